"""Adapters for foreign modules of known structure: ``torch.nn.RNN`` read as a linear Elman network,
pytorch-qrnn weights, the ``sru`` package's cell (see the package docstring for their conventions)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from kleene.extract.core import (
    ACTIVATIONS,
    AffineInput,
    Extraction,
    ExtractionError,
    Unit,
    proved_automata,
    to_numpy,
    vocabulary_rows,
)
from kleene.rational import zoo
from kleene.rational.certificate import AutomatonProof


def from_linear_rnn(
    weight_ih: Any,
    weight_hh: Any,
    bias: Any,
    embedding: Any,
    words: Sequence[Hashable] | None = None,
    h0: Any = None,
    model: str = "linear Elman RNN",
) -> Extraction:
    """The linear Elman network ``h_t = W_hh h_{t−1} + W_ih v_{x_t} + b`` (Corollary 14) as one automaton per unit.

    All d units share one run (states q0 = bias, q1..qd = h); unit i reads state qi. ``embedding``
    is a ``[V, n]`` matrix (or a module with ``.weight``) whose rows are the words' vectors.

    Raises:
        ExtractionError: the weights' shapes disagree, the embedding is not a matrix, or ``words`` does not name
            one word per embedding row.
    """
    w_ih, w_hh, b = to_numpy(weight_ih), to_numpy(weight_hh), to_numpy(bias)
    d = w_hh.shape[0]
    if w_hh.shape != (d, d) or w_ih.shape[0] != d or b.shape != (d,):
        raise ExtractionError(f"inconsistent linear RNN shapes: W_ih {w_ih.shape}, W_hh {w_hh.shape}, b {b.shape}")
    names, table = vocabulary_rows(embedding, words)
    proofs = proved_automata(zoo.elman_linear(d))
    constants = {zoo.matrix_entry("w", i + 1, j + 1, d): float(w_hh[i, j]) for i in range(d) for j in range(d)}
    inputs = {f"u{i + 1}": AffineInput("identity", w_ih[i][None, :], float(b[i])) for i in range(d)}
    initial = {} if h0 is None else {f"q{i + 1}": float(v) for i, v in enumerate(to_numpy(h0).reshape(-1))}
    units = [Unit(f"h{i + 1}", proofs[i], inputs, constants, initial) for i in range(d)]
    return Extraction(model, units, names, table)


def from_torch_rnn(
    rnn: Any, embedding: Any, words: Sequence[Hashable] | None = None, *, activation: str, h0: Any = None
) -> Extraction:
    """A single-layer, unidirectional ``torch.nn.RNN``'s weights read as a linear Elman network.

    torch runs only tanh or ReLU; ``activation="identity"`` declares that the weights are used
    without a nonlinearity (a tanh Elman network is not rational: use ``kleene.extract.spectral``).

    Raises:
        ExtractionError: another activation, several layers, or a bidirectional module.
    """
    if activation != "identity":
        raise ExtractionError(
            f"an Elman network with {activation} is not rational (the prover refuses it); "
            "only activation='identity' is extracted exactly; use spectral extraction instead"
        )
    if rnn.num_layers != 1 or rnn.bidirectional:
        raise ExtractionError("only single-layer unidirectional torch.nn.RNN weights are extracted")
    bias = to_numpy(rnn.bias_ih_l0) + to_numpy(rnn.bias_hh_l0) if rnn.bias else np.zeros(rnn.hidden_size)
    model = "torch.nn.RNN (identity)"
    return from_linear_rnn(rnn.weight_ih_l0, rnn.weight_hh_l0, bias, embedding, words, h0, model=model)


def _gated_units(
    name: str,
    proofs_for: Callable[[], list[AutomatonProof]],
    forget: Sequence[AffineInput],
    value: Sequence[AffineInput],
    value_name: str,
) -> list[Unit]:
    proof = proofs_for()[0]
    return [Unit(f"{name}{i + 1}", proof, {"f": f, value_name: v}) for i, (f, v) in enumerate(zip(forget, value))]


def from_qrnn_weights(
    weight: Any,
    bias: Any,
    embedding: Any,
    words: Sequence[Hashable] | None = None,
    *,
    window: int = 1,
    output_gate: bool = False,
) -> Extraction:
    """A pytorch-qrnn ``QRNNLayer``'s f-pooling cell state, from its ``linear`` weights.

    pytorch-qrnn computes ``Y = linear(cat([x_t, x_{t−1}]))`` (window 2: the current word's columns
    first, x_{−1} = 0) or ``linear(x_t)`` and
    splits Y into Z, F (and O with ``output_gate``) along features; ``z = tanh(Z)``,
    ``F = σ(F)``, ``c_t = F ⊙ z + (1 − F) ⊙ c_{t−1}``. The paper's forget gate is ``f = 1 − F
    = σ(−F)``, so the unit's f input has the negated weights (the f ↔ 1 − f swap).

    With a window of 2 the automaton tracks the previous word in its states (Appendix A), so it
    is built over ``words`` only: keep that list small (tens of words).

    Raises:
        ExtractionError: a window other than 1 or 2, weights that are not ``[k·d, window·n]`` or do not split into
            the gates, or an embedding that does not match ``words``.
    """
    w, b = to_numpy(weight), to_numpy(bias)
    names, table = vocabulary_rows(embedding, words)
    n = table.shape[1]
    if window not in (1, 2) or w.shape[1] != window * n:
        raise ExtractionError(f"pytorch-qrnn weights must be [k·d, window·n] with window 1 or 2; got {w.shape}")
    parts = 3 if output_gate else 2
    if w.shape[0] % parts or b.shape != (w.shape[0],):
        raise ExtractionError(f"weight rows {w.shape[0]} (bias {b.shape}) do not split into {parts} gates")
    d = w.shape[0] // parts
    rows = newest_first_to_oldest_first(w, window)
    z = [AffineInput("tanh", rows[i], float(b[i])) for i in range(d)]
    f = [AffineInput("sigmoid", -rows[d + i], -float(b[d + i])) for i in range(d)]
    units = _gated_units(
        "c", lambda: proved_automata(zoo.qrnn(window, alphabet=names), names if window > 1 else None), f, z, "z"
    )
    return Extraction(f"pytorch-qrnn layer (window {window})", units, names, table)


def qrnn_output_gate(weight: Any, bias: Any, vectors: np.ndarray, window: int = 1) -> np.ndarray:
    """pytorch-qrnn's output gate ``σ(O)`` for a sentence's vectors ``[T, n]`` (for reading h = o ⊙ c).

    Caution:
        ``weight`` and ``bias`` must be those of a layer with an output gate (three gates, as ``from_qrnn_weights``
        with ``output_gate=True`` checks); they are not checked here.
    """
    w, b = to_numpy(weight), to_numpy(bias)
    d = w.shape[0] // 3
    oldest_first = newest_first_to_oldest_first(w[2 * d :], window)
    return windowed_sigmoid(oldest_first.reshape(d, -1), b[2 * d :], vectors, window)


def newest_first_to_oldest_first(weight: np.ndarray, window: int) -> np.ndarray:
    """pytorch-qrnn's ``[rows, K·n]`` weights (columns of x_t, then x_{t−1}, ...) as ``[rows, K, n]`` with the
    oldest word first (``AffineInput``'s and a causal convolution's order)."""
    rows: np.ndarray = weight.reshape(weight.shape[0], window, -1)[:, ::-1]
    return np.ascontiguousarray(rows)


def windowed_sigmoid(weight: np.ndarray, bias: np.ndarray, vectors: np.ndarray, window: int) -> np.ndarray:
    """``σ(W [v_{t−K+1}; …; v_t] + b)`` for every step of ``vectors`` ``[T, n]`` (zero vectors before the start).

    ``weight`` is ``[d, K·n]`` with the oldest word's columns first (a causal convolution's order; pytorch-qrnn's
    weights are newest first: see ``newest_first_to_oldest_first``).
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    padded = np.concatenate([np.zeros((window - 1, vectors.shape[1])), vectors]) if window > 1 else vectors
    stacked = np.concatenate([padded[k : k + len(vectors)] for k in range(window)], axis=1)
    out: np.ndarray = ACTIVATIONS["sigmoid"][0](stacked @ weight.T + bias)
    return out


def from_sru_cell(cell: Any, embedding: Any, words: Sequence[Hashable] | None = None) -> Extraction:
    """The cell state of the ``sru`` package's ``SRUCell`` (v2) when its ``weight_c`` (the v ⊙ c term) is zero.

    The package computes ``U = x W`` viewed as ``[d, k]`` per unit: ``U[..., 0]`` is x̃, ``U[..., 1]``
    plus ``bias[:d]`` the forget pre-activation; ``c_t = x̃ + (c_{t−1} − x̃) ⊙ f``, the 2017 SRU.

    Raises:
        ExtractionError: nonzero ``weight_c`` (then the cell is SRU v2, not rational), bidirectional
            cells, layer norm, custom input modules.
    """
    vc = to_numpy(cell.weight_c)
    if np.any(vc != 0):
        raise ExtractionError(
            f"this SRU cell has nonzero weight_c (max |v| = {np.abs(vc).max():.3g}): v ⊙ c_(t-1) inside the gates "
            "makes it SRU v2, which is not rational; use spectral extraction"
        )
    if cell.bidirectional or cell.layer_norm is not None or cell.custom_m is not None:
        raise ExtractionError("only unidirectional SRU cells without layer norm or custom_m are extracted")
    w = to_numpy(cell.weight)
    if cell.weight_proj is not None:
        w = to_numpy(cell.weight_proj) @ w
    names, table = vocabulary_rows(embedding, words)
    d, k = cell.hidden_size, cell.num_matrices
    per_unit = w.reshape(w.shape[0], d, k)
    forget_bias = to_numpy(cell.bias)[:d]
    f = [AffineInput("sigmoid", per_unit[:, i, 1][None, :], float(forget_bias[i])) for i in range(d)]
    g = [AffineInput("identity", per_unit[:, i, 0][None, :]) for i in range(d)]
    units = _gated_units("c", lambda: proved_automata(zoo.sru()), f, g, "g")
    return Extraction("sru.SRUCell (weight_c = 0)", units, names, table)
