"""Adapters for kleene's own rational layers, read by duck typing (``kleene.compile`` never imports ``kleene.nn``).

Each reads the first layer of a stack, whose input is the word vectors, and yields one automaton per hidden unit
whose prefix scores are the layer's *cell state* c (before any output nonlinearity or gate):

- ``RRNNLayer`` (B, B-maxplus, C, F) and ``SRULayer``: the zoo's ``rrnn-*`` and ``sru`` entries;
- ``QRNNLayer``: f- and fo-pooling are the zoo's ``qrnn`` (``c_t = f ⊙ c_{t−1} + (1 − f) ⊙ z``), ifo-pooling the
  recurrence ``c_t = f ⊙ c_{t−1} + i ⊙ z`` proved here; a window of 2 keeps the previous word in the states
  (Appendix A), so such automata are built over a short word list. The output gate of fo/ifo pooling,
  ``h_t = o_t ⊙ c_t``, multiplies the automaton's value outside it: ``qrnn_layer_output_gate`` computes o_t;
- ``RCNNLayer``: the zoo's ``rcnn`` (input-dependent or constant decay λ); its output is ``tanh(c + b)``;
- ``ISANLayer``: the zoo's ``isan``: all d units share one run, unit i reads final state q_i (as the linear
  Elman network); ``h_t = c_t``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kleene.automata.semiring import get_semiring
from kleene.extract.core import (
    AffineInput,
    Extraction,
    ExtractionError,
    Unit,
    proved_automata,
    to_numpy,
    vocabulary_rows,
)
from kleene.extract.foreign import windowed_sigmoid
from kleene.rational import zoo


def _rows(linear: Any, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``start .. start+count`` of a ``nn.Linear``'s weight and bias (zeros without bias)."""
    weight = to_numpy(linear.weight)[start : start + count]
    bias = to_numpy(linear.bias)[start : start + count] if linear.bias is not None else np.zeros(count)
    return weight, bias


def _affine(activation: str, weight: np.ndarray, bias: np.ndarray, stored_in: Any = None) -> list[AffineInput]:
    return [AffineInput(activation, weight[i][None, :], float(bias[i]), stored_in) for i in range(len(weight))]


def _values(layer: Any, linear: Any, start: int, count: int) -> list[AffineInput]:
    """Rows of ``linear`` as the values a layer stores as they are (``W v + b``), read back as elements."""
    return _affine("identity", *_rows(linear, start, count), layer.algebra)


def _gate_activation(layer: Any) -> str:
    """σ as the layer stores a gate (``gate_in_storage``): log σ where its storage holds log-weights."""
    return "logsigmoid" if layer.algebra.storage.log_weights else "sigmoid"


def _gates(layer: Any, linear: Any, start: int, count: int) -> tuple[list[AffineInput], list[AffineInput]]:
    """The gates σ(z) of rows ``start .. start+count`` and their complements 1 − σ(z) = σ(−z), as elements."""
    weight, bias = _rows(linear, start, count)
    activation = _gate_activation(layer)
    return _affine(activation, weight, bias, layer.algebra), _affine(activation, -weight, -bias, layer.algebra)


def _constants(layer: Any) -> np.ndarray:
    """A compiled layer's constants ``[k, d]`` (stored gates σ(raw), ``GateConstants``) as elements."""
    return np.asarray(layer.algebra.from_storage(to_numpy(layer.recurrence.constants)), dtype=np.float64)


def _recurrence(layer: Any, paper: Sequence[Any], general: Callable[[str], Any]) -> Any:
    """The paper's recurrence of ``paper`` (zoo entries) proved in ``layer``'s semiring, else ``general(name)``:
    the zoo's form of the layer in any semiring."""
    for rec in paper:
        if get_semiring(rec.semiring) == layer.algebra:
            return rec
    return general(layer.algebra.name)


# -- RRNN and SRU -------------------------------------------------------------------------------


#: The paper's recurrences of each RRNN kind (one per semiring it states them in); ``rrnn_semiring`` elsewhere.
_RRNN_RECURRENCES = {
    "B": (zoo.rrnn_b, zoo.rrnn_b_maxplus),
    "B-maxplus": (zoo.rrnn_b_maxplus,),
    "C": (zoo.rrnn_c,),
    "F": (zoo.rrnn_f,),
}


def _rrnn_units(layer: Any, words: Sequence[Hashable]) -> list[Unit]:
    d, kind = layer.dim, layer.kind
    general = kind.split("-")[0]
    paper = [build() for build in _RRNN_RECURRENCES[kind]]
    proof = proved_automata(_recurrence(layer, paper, lambda s: zoo.rrnn_semiring(general, s)))[0]
    names = [""] if general == "B" else ["1", "2"]
    inputs: list[dict[str, AffineInput]] = [{} for _ in range(d)]
    for j, suffix in enumerate(names):
        gates, complements = _gates(layer, layer.forget, j * d, d)
        values = _values(layer, layer.update, j * d, d)
        for i in range(d):
            # the paper's B in max-plus names the value u (Example 15); the other forms name it w
            inputs[i].update({"f" + suffix: gates[i], "nf" + suffix: complements[i], "w" + suffix: values[i]})
            inputs[i].setdefault("u", values[i])
    constants: list[dict[str, float]] = [{} for _ in range(d)]
    if kind == "F":
        values_k = _constants(layer)  # [gamma, rho1, rho2] x d
        mapping = {"gamma": "r", "rho1": "p1", "rho2": "p2"}
        names_k = list(layer.recurrence.template.constants)
        constants = [{mapping[n]: float(values_k[k, i]) for k, n in enumerate(names_k)} for i in range(d)]
    return [Unit(f"c{i + 1}", proof, inputs[i], constants[i]) for i in range(d)]


def _sru_units(layer: Any, words: Sequence[Hashable]) -> list[Unit]:
    d = layer.dim
    rec = _recurrence(layer, [zoo.sru()], lambda s: zoo.rrnn_semiring("B", s))
    proof = proved_automata(rec)[0]
    gates, complements = _gates(layer, layer.gates, 0, d)
    values = _values(layer, layer.transform, 0, d)
    # the paper's SRU (``zoo.sru``) names its value g, ``rrnn_semiring`` w
    return [
        Unit(f"c{i + 1}", proof, {"f": gates[i], "nf": complements[i], "w": values[i], "g": values[i]})
        for i in range(d)
    ]


# -- QRNN ---------------------------------------------------------------------------------------


def _qrnn_gate_rows(layer: Any, gate: str) -> tuple[np.ndarray, np.ndarray]:
    """One gate's convolution as ``[d, K, n]`` rows (row k reads the word K−1−k steps back) and ``[d]`` biases."""
    d = layer.hidden_size
    block = list(layer.gates).index(gate)
    weight = to_numpy(layer.convolution.weight)[block * d : (block + 1) * d]  # [d, n, K]
    bias = layer.convolution.bias
    biases = to_numpy(bias)[block * d : (block + 1) * d] if bias is not None else np.zeros(d)
    return weight.transpose(0, 2, 1), biases


def _qrnn_units(layer: Any, words: Sequence[Hashable]) -> list[Unit]:
    if layer.context is not None:
        raise ExtractionError("QRNNLayer: a decoder layer adds an encoder context to its gates; it is not extracted")
    window = layer.window
    if window > 2:
        raise ExtractionError(
            f"QRNNLayer: window {window} would track the last {window - 1} words in the states "
            f"(|V|^{window - 1} histories); exact extraction supports windows 1 and 2"
        )
    alphabet = list(words) if window > 1 else zoo.DEFAULT_ALPHABET
    paper = [zoo.qrnn(window, alphabet=alphabet, pooling=layer.pooling)]
    rec = _recurrence(
        layer, paper, lambda s: zoo.qrnn_semiring(window, alphabet=alphabet, pooling=layer.pooling, semiring=s)
    )
    proof = proved_automata(rec, alphabet if window > 1 else None)[0]
    gate = _gate_activation(layer)
    inputs: dict[str, list[AffineInput]] = {}
    for name in (g for g in layer.gates if g in ("z", "f", "i")):
        rows, biases = _qrnn_gate_rows(layer, name)
        activation = "tanh" if name == "z" else gate
        inputs[name] = [AffineInput(activation, rows[u], float(biases[u]), layer.algebra) for u in range(len(rows))]
        if name == "f":
            inputs["nf"] = [AffineInput(gate, -rows[u], -float(biases[u]), layer.algebra) for u in range(len(rows))]
    return [Unit(f"c{u + 1}", proof, {g: spec[u] for g, spec in inputs.items()}) for u in range(layer.hidden_size)]


def qrnn_layer_output_gate(layer: Any, vectors: np.ndarray) -> np.ndarray:
    """A kleene ``QRNNLayer``'s output gate ``o_t`` ``[T, d]`` for a sentence's vectors ``[T, n]`` (fo/ifo pooling):
    its output is ``h_t = o_t ⊙ c_t`` with c_t the automata's value.

    Raises:
        ExtractionError: f-pooling (no output gate).
    """
    if "o" not in layer.gates:
        raise ExtractionError(f"QRNNLayer with {layer.pooling}-pooling has no output gate")
    rows, biases = _qrnn_gate_rows(layer, "o")
    return windowed_sigmoid(rows.reshape(len(rows), -1), biases, vectors, layer.window)


# -- RCNN and ISAN ------------------------------------------------------------------------------


def _rcnn_units(layer: Any, words: Sequence[Hashable]) -> list[Unit]:
    d, order = layer.dim, layer.order
    adaptive = layer.decay is not None
    proof = proved_automata(zoo.rcnn(order, constant_lambda=not adaptive, semiring=layer.algebra.name))[0]
    updates = [_values(layer, layer.inputs, j * d, d) for j in range(order)]
    decay = _gates(layer, layer.decay, 0, d)[0] if adaptive else None
    constant = None if adaptive else _constants(layer)[0]  # σ(raw) per unit, as elements
    units = []
    for i in range(d):
        inputs = {f"u{j + 1}": updates[j][i] for j in range(order)}
        if decay is not None:
            inputs["lam"] = decay[i]
        constants = {} if constant is None else {"lam": float(constant[i])}
        units.append(Unit(f"c{i + 1}", proof, inputs, constants))
    return units


def _isan_units(layer: Any, words: Sequence[Hashable]) -> list[Unit]:
    d = layer.size
    proofs = proved_automata(zoo.isan(d, semiring=layer.algebra.name))
    matrix = _values(layer, layer.matrix, 0, d * d)  # row i·d + j: [W_x]_ij, c_i ⊕= W_ij ⊗ c_j
    inputs = {zoo.matrix_entry("W", i + 1, j + 1, d): matrix[i * d + j] for i in range(d) for j in range(d)}
    offsets = _values(layer, layer.offset, 0, d)
    inputs.update({f"b{i + 1}": offsets[i] for i in range(d)})
    return [Unit(f"c{i + 1}", proofs[i], inputs) for i in range(d)]


# -- the registry -------------------------------------------------------------------------------


def _compiled_states(layer: Any, vectors: Any, lengths: Any) -> Any:
    slots, _ = layer.slots(vectors)
    states, _ = layer.recurrence(slots, lengths, mapped=False)  # the states c, not the layer's output map
    return states


@dataclass(frozen=True)
class LayerAdapter:
    """How to extract one kind of kleene layer: its units, and the cell states ``[B, T, d]`` it computes."""

    units: Callable[[Any, Sequence[Hashable]], list[Unit]]
    states: Callable[[Any, Any, Any], Any]
    describe: Callable[[Any], str]


#: kleene layer class name -> adapter
KLEENE_LAYERS: dict[str, LayerAdapter] = {
    "RRNNLayer": LayerAdapter(_rrnn_units, _compiled_states, lambda layer: f"RRNNLayer({layer.kind})"),
    "SRULayer": LayerAdapter(_sru_units, _compiled_states, lambda layer: "SRULayer"),
    "QRNNLayer": LayerAdapter(
        _qrnn_units,
        lambda layer, vectors, lengths: layer.run(vectors, lengths)[0],
        lambda layer: f"QRNNLayer({layer.pooling}-pooling, window {layer.window})",
    ),
    "RCNNLayer": LayerAdapter(
        _rcnn_units,
        _compiled_states,
        lambda layer: f"RCNNLayer({layer.order}-gram, {'adaptive' if layer.decay is not None else 'constant'} λ)",
    ),
    "ISANLayer": LayerAdapter(
        _isan_units,
        lambda layer, vectors, lengths: layer(vectors, lengths)[0],
        lambda layer: f"ISANLayer({layer.size})",
    ),
}


def _adapter(layer: Any) -> LayerAdapter:
    kind = type(layer).__name__
    if kind not in KLEENE_LAYERS:
        raise ExtractionError(f"no exact extraction for {kind} (supported: {', '.join(sorted(KLEENE_LAYERS))})")
    return KLEENE_LAYERS[kind]


def check_layer(layer: Any) -> LayerAdapter:
    """The adapter of ``layer``'s kind.

    Raises:
        ExtractionError: a layer kind without an extraction here, or a bidirectional layer.
    """
    adapter = _adapter(layer)
    if layer.reads_both_ways:
        kind = type(layer).__name__
        raise ExtractionError(f"{kind}: bidirectional layers are not extracted (the backward half reads reversed text)")
    return adapter


def history_window(layer: Any) -> int:
    """How many words a layer's input functions read (its convolution window; 1 for recurrent layers). Above 1
    the automata keep the previous word in their states and grow with the word list: extract over a short one."""
    return int(getattr(layer, "window", 1))


def from_kleene_layer(layer: Any, embedding: Any, words: Sequence[Hashable] | None = None) -> Extraction:
    """The cell states of a kleene rational layer reading word vectors (the first layer of a stack).

    ``embedding`` is the ``[V, n]`` matrix (or a module with ``.weight``) of the ``words``' vectors.

    Raises:
        ExtractionError: a layer kind without an extraction here, a bidirectional layer, or a layer
            configuration outside the construction (named).
    """
    adapter = check_layer(layer)
    names, table = vocabulary_rows(embedding, words)
    return Extraction(adapter.describe(layer), adapter.units(layer, names), names, table)


def kleene_layer_states(layer: Any, vectors: Any, lengths: Any) -> Any:
    """The cell states c ``[B, T, d]`` a kleene rational layer computes, as elements of its semiring (what its
    automata's prefix scores equal; the layer computes stored values, e.g. logarithms in max-times).

    Raises:
        ExtractionError: ``layer`` is not one of the layers with an exact extraction (the message lists them).
    """
    return layer.algebra.from_storage(_adapter(layer).states(layer, vectors, lengths))
