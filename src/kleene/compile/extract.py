"""Exact extraction: a trained rational cell taken apart into one WFSA per hidden unit (or pattern).

The structure comes from the prover: the cell's recurrence (a ``kleene.compile.zoo`` entry) is
proved rational, which yields a symbolic automaton whose weight functions are parameterised by
the recurrence's input functions (``phi_c = f(x_t)``, ``mu_c = (1 − f(x_t))·g(x_t)``). Extraction
fills that structure from the trained parameters:

- every input function of a unit is ``act(w · v_x + b)`` of the consumed word's feature vector
  ``v_x`` (its embedding row), an ``AffineInput``;
- the *constant* automaton of a unit over a word list has one ``Sym(word)`` arc per word and
  structural arc, its weight computed from the word's embedding (``Extraction.wfsa``);
- the *symbolic* automaton keeps ``∀α`` arcs whose weights are sympy expressions of the
  embedding coordinates ``v1(α) .. vn(α)`` with the learned numbers inlined, so it scores words
  outside any list given their vectors (``Extraction.symbolic`` and ``Extraction.environment``).

The extraction verifies itself: ``Extraction.verify`` runs every unit's Forward over real
sentences (batched, ``kleene.automata.batched_forward``) and compares the prefix scores with the
hidden states the module computed, recording the maximum absolute error.

Conventions of foreign modules (each adapter's docstring says what it reads):

- ``torch.nn.RNN`` can only run tanh or ReLU; its weights are read as the *linear* Elman network
  ``h_t = W_hh h_{t−1} + W_ih x_t + b`` (Corollary 14) only when the caller says
  ``activation="identity"``: one automaton over all d units (like ISAN), one final state per unit.
- pytorch-qrnn's ``ForgetMult`` computes ``c_t = F_t ⊙ z_t + (1 − F_t) ⊙ c_{t−1}``: its gate ``F``
  is the paper's ``1 − f``. Since ``1 − σ(a) = σ(−a)``, the paper's forget gate is the sigmoid of
  the negated pre-activation, which is what ``from_qrnn_weights`` uses.
- the ``sru`` package (v2) feeds ``v ⊙ c_{t−1}`` into its gates; with ``weight_c`` zero its cell
  state is the 2017 SRU recurrence ``c_t = f ⊙ c_{t−1} + (1 − f) ⊙ x̃_t``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kleene.automata.batched import DenseWFSA
from kleene.automata.errors import KleeneError
from kleene.automata.labels import EPSILON, Sym, SymbolTable
from kleene.automata.semiring import Semiring
from kleene.automata.weights import ALPHA, sigmoid
from kleene.automata.wfsa import WFSA

from . import zoo
from .certificate import AutomatonProof, Certificate
from .prover import prove
from .recurrence import BOS, Recurrence, input_symbol, symbol_atom

__all__ = [
    "ACTIVATIONS",
    "AffineInput",
    "Extraction",
    "ExtractionError",
    "Unit",
    "from_linear_rnn",
    "from_qrnn_weights",
    "from_sru_cell",
    "from_torch_rnn",
    "proved_automata",
]


class ExtractionError(KleeneError):
    """A module that cannot be extracted exactly (the message names the reason), or bad extraction input."""


def _logsigmoid_numpy(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _sigmoid_numpy(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 0.5 * (1.0 + np.tanh(0.5 * x))
    return out


#: activation name -> (numpy function, sympy function)
ACTIVATIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], Callable[[sympy.Expr], sympy.Expr]]] = {
    "identity": (lambda x: x, lambda x: x),
    "sigmoid": (_sigmoid_numpy, sigmoid),
    "tanh": (np.tanh, sympy.tanh),
    "logsigmoid": (_logsigmoid_numpy, lambda x: -sympy.log(1 + sympy.exp(-x))),
}


@dataclass(frozen=True)
class AffineInput:
    """An input function ``act(Σ_k weight[k] · v_{x_{t−K+1+k}} + bias)`` of the last K words' vectors.

    ``weight`` is ``[K, n]``: row ``K − 1`` reads the current word, row ``k < K − 1`` the word
    ``K − 1 − k`` steps back (zero vector before the start), as in a width-K convolution.
    """

    activation: str
    weight: np.ndarray
    bias: float = 0.0

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ExtractionError(f"unknown activation {self.activation!r}; expected one of {sorted(ACTIVATIONS)}")
        if np.ndim(self.weight) != 2:
            raise ExtractionError(f"an AffineInput weight must be [K, n]; got shape {np.shape(self.weight)}")

    @property
    def window(self) -> int:
        return int(self.weight.shape[0])

    def values(self, current: np.ndarray, lagged: Sequence[np.ndarray]) -> np.ndarray:
        """Values for every row of ``current`` ([V, n]) given the K−1 earlier vectors (oldest first)."""
        pre = current @ self.weight[-1] + self.bias
        for row, vector in zip(self.weight[:-1], lagged):
            pre = pre + float(vector @ row)
        return ACTIVATIONS[self.activation][0](pre)

    def expression(self, coordinates: Sequence[sympy.Expr], lagged: Sequence[np.ndarray]) -> sympy.Expr:
        """The same function as a sympy expression of the current word's coordinates (learned numbers inlined)."""
        constant = self.bias + sum(float(vector @ row) for row, vector in zip(self.weight[:-1], lagged))
        pre = sympy.Add(*(sympy.Float(float(w)) * v for w, v in zip(self.weight[-1], coordinates) if w != 0))
        return ACTIVATIONS[self.activation][1](pre + sympy.Float(constant))


@dataclass
class Unit:
    """One automaton to extract: a proved structure, its inputs and constants.

    ``outputs`` names what the automaton's final weights read (one entry per hidden unit it
    yields; several when units share one run, as in the linear Elman network).
    ``initial`` overrides initial weights by state name (a nonzero initial hidden state).
    """

    name: str
    proof: AutomatonProof
    inputs: Mapping[str, AffineInput]
    constants: Mapping[str, float] = field(default_factory=dict)
    initial: Mapping[str, float] = field(default_factory=dict)


def proved_automata(rec: Recurrence, alphabet: Sequence[Hashable] | None = None) -> list[AutomatonProof]:
    """The prover's automata for ``rec`` (one per output).

    Raises:
        ExtractionError: the prover refuses ``rec`` (the recurrence is not rational), with its reason.
    """
    result = prove(rec, alphabet=alphabet, check=False)
    if not isinstance(result, Certificate):
        raise ExtractionError(f"{rec.name} is not rational, so it cannot be extracted exactly: {result.reason}")
    return list(result.automata)


@lru_cache(maxsize=1024)
def _lambdified(expr: sympy.Expr) -> tuple[Callable[..., Any], list[sympy.Expr]]:
    """A numpy function of ``expr``'s input calls (sorted), and those calls.

    Raises:
        ExtractionError: ``expr`` has free constants left.
    """
    calls = sorted(expr.atoms(AppliedUndef), key=str)
    dummies = sympy.symbols(f"_arg0:{len(calls)}")
    body = expr.xreplace(dict(zip(calls, dummies)))
    if body.free_symbols - set(dummies):
        raise ExtractionError(f"{expr} has unset constants {sorted(map(str, body.free_symbols - set(dummies)))}")
    return sympy.lambdify(dummies, body, modules="numpy"), calls


def _word_of_atom(words: Sequence[Hashable]) -> dict[sympy.Basic, Hashable | None]:
    table: dict[sympy.Basic, Hashable | None] = {symbol_atom(w): w for w in words}
    table[symbol_atom(BOS)] = None
    return table


class Extraction:
    """Per-unit WFSAs of a trained rational module over a vocabulary, with self-verification.

    Args:
        model: a short description of the source module.
        units: the automata to extract (all over the same semiring).
        words: the vocabulary; ``features[i]`` is the vector of ``words[i]``.
        features: ``[V, n]`` word vectors (float64).
    """

    def __init__(self, model: str, units: Sequence[Unit], words: Sequence[Hashable], features: np.ndarray):
        if not units:
            raise ExtractionError(f"{model}: nothing to extract (no units)")
        features = np.asarray(features, dtype=np.float64)
        if features.ndim != 2 or features.shape[0] != len(words):
            raise ExtractionError(f"{model}: features must be [V={len(words)}, n]; got shape {features.shape}")
        if len(set(words)) != len(words):
            raise ExtractionError(f"{model}: the vocabulary lists a word twice")
        self.model = model
        self.units = list(units)
        self.words = list(words)
        self.features = features
        self.semiring: Semiring = self.units[0].proof.wfsa.semiring
        self._row = {w: i for i, w in enumerate(self.words)}
        self._atoms = _word_of_atom(self.words)
        self.max_abs_error: float | None = None
        self.checked_tokens = 0

    # -- looking words up ---------------------------------------------------------------------
    def rows(self, words: Sequence[Hashable]) -> np.ndarray:
        """Feature rows of ``words``.

        Raises:
            ExtractionError: a word outside the vocabulary (named).
        """
        try:
            return self.features[[self._row[w] for w in words]]
        except KeyError as exc:
            raise ExtractionError(f"{self.model}: word {exc.args[0]!r} is not in the vocabulary") from None

    def _lagged(self, call: sympy.Expr) -> list[np.ndarray]:
        """The vectors of a call's history arguments (zero before the start)."""
        zero = np.zeros(self.features.shape[1])
        out = []
        for arg in call.args[:-1]:
            if arg not in self._atoms:
                raise ExtractionError(f"{self.model}: the history symbol {arg} of {call} is not in the vocabulary")
            word = self._atoms[arg]
            out.append(zero if word is None else self.rows([word])[0])
        return out

    @staticmethod
    def _check_call(unit: Unit, call: sympy.Expr) -> AffineInput:
        name = call.func.__name__
        if name not in unit.inputs:
            raise ExtractionError(f"unit {unit.name}: no parameters for the input function {name}")
        spec = unit.inputs[name]
        if spec.window != len(call.args):
            raise ExtractionError(f"unit {unit.name}: {name} reads {len(call.args)} words but has window {spec.window}")
        if call.args[-1] != input_symbol(0):
            raise ExtractionError(f"unit {unit.name}: unexpected input call {call}")
        return spec

    def _constant(self, unit: Unit, weight: Any, where: str) -> float:
        """A structural weight (a number or an expression of the unit's constants) as a float."""
        if not isinstance(weight, sympy.Basic):
            return float(weight)
        value = weight.subs({sympy.Symbol(k): v for k, v in unit.constants.items()})
        try:
            return float(value)
        except TypeError:
            raise ExtractionError(f"unit {unit.name}: {where} {weight} has no value (constants given: "
                                  f"{sorted(unit.constants)})") from None

    def _weight_values(self, unit: Unit, weight: Any, current: np.ndarray, where: str) -> np.ndarray | float:
        """An arc weight's value for each row of ``current`` (a float when it does not read the word)."""
        if not (isinstance(weight, sympy.Basic) and weight.atoms(AppliedUndef)):
            return self._constant(unit, weight, where)
        if not (isinstance(weight, AppliedUndef) and weight.args == (ALPHA,)):
            raise ExtractionError(f"unit {unit.name}: {where} weight {weight} is not a weight function of α")
        name = weight.func.__name__
        if name not in unit.proof.parameterisation:
            raise ExtractionError(f"unit {unit.name}: the weight function {name} has no parameterisation")
        expr = unit.proof.parameterisation[name].subs({sympy.Symbol(k): v for k, v in unit.constants.items()})
        fn, calls = _lambdified(expr)
        args = [self._check_call(unit, c).values(current, self._lagged(c)) for c in calls]
        return np.broadcast_to(np.asarray(fn(*args), dtype=np.float64), (current.shape[0],))

    # -- automata ---------------------------------------------------------------------------------
    def dense(self, unit: Unit, words: Sequence[Hashable]) -> DenseWFSA:
        """``unit``'s automaton tabulated over ``words`` (float64 tensors; row 0 is padding)."""
        import torch

        s, template = self.semiring, unit.proof.wfsa
        q = template.num_states
        current = self.rows(words)
        emissions: np.ndarray = s.zeros((len(words) + 1, q, q))
        epsilon: np.ndarray = s.zeros((q, q))
        position = {w: i for i, w in enumerate(words)}
        cache: dict[Any, np.ndarray] = {}  # weight -> its value for every word
        for index, arc in enumerate(template.arcs):
            where = f"arc {index} ({template.state_name(arc.src)} -{arc.label}-> {template.state_name(arc.dst)})"
            if not arc.label.consumes:
                epsilon[arc.src, arc.dst] = s.plus(epsilon[arc.src, arc.dst], self._constant(unit, arc.weight, where))
                continue
            if isinstance(arc.label, Sym):
                if arc.label.symbol not in position:
                    continue
                rows = np.array([position[arc.label.symbol]])
            else:
                rows = np.flatnonzero([arc.label.matches(w) for w in words])
            if arc.weight not in cache:
                values = self._weight_values(unit, arc.weight, current, where)
                cache[arc.weight] = np.broadcast_to(values, (len(words),))
            hit = rows + 1
            emissions[hit, arc.src, arc.dst] = s.plus(emissions[hit, arc.src, arc.dst], cache[arc.weight][rows])

        def tensor(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(np.asarray(a, dtype=np.float64))

        return DenseWFSA(
            emissions=tensor(emissions),
            epsilon=tensor(epsilon) if template.has_epsilons else None,
            initial=tensor(self._initial(unit)),
            final=tensor(self._final(unit)),
            semiring=s,
            symbols=SymbolTable(words),
        )

    def _initial(self, unit: Unit) -> np.ndarray:
        template = unit.proof.wfsa
        vector: np.ndarray = self.semiring.zeros((template.num_states,))
        for state, weight in template.initial.items():
            vector[state] = self._constant(unit, weight, f"initial weight of {template.state_name(state)}")
        for name, weight in unit.initial.items():
            vector[template.state(name)] = weight
        return vector

    def _final(self, unit: Unit) -> np.ndarray:
        template = unit.proof.wfsa
        vector: np.ndarray = self.semiring.zeros((template.num_states,))
        for state, weight in template.final.items():
            vector[state] = self._constant(unit, weight, f"final weight of {template.state_name(state)}")
        return vector

    def unit(self, ref: int | str) -> Unit:
        """A unit by index or name."""
        if isinstance(ref, int):
            return self.units[ref]
        for u in self.units:
            if u.name == ref:
                return u
        raise ExtractionError(f"{self.model}: no unit named {ref!r}")

    def wfsa(self, ref: int | str, words: Sequence[Hashable] | None = None) -> WFSA:
        """The constant-weight automaton of a unit over ``words`` (default: the vocabulary).

        Every consuming structural arc becomes one ``Sym(word)`` arc per word (zero weights dropped).
        """
        unit = self.unit(ref)
        words = self.words if words is None else list(words)
        dense = self.dense(unit, words)
        s, template = self.semiring, unit.proof.wfsa
        out = WFSA(s, SymbolTable(words), name=f"{self.model}:{unit.name}")
        for name in template.states:
            out.add_state(name)
        emissions = dense.emissions.numpy()
        zero = s.zeros(())
        consuming = sorted({(a.src, a.dst) for a in template.arcs if a.label.consumes})
        for src, dst in consuming:
            for i, word in enumerate(words, start=1):
                if emissions[i, src, dst] != zero:
                    out.add_arc(src, dst, Sym(word), float(emissions[i, src, dst]))
        if dense.epsilon is not None:
            eps = dense.epsilon.numpy()
            for src, dst in zip(*np.nonzero(eps != zero)):
                out.add_arc(int(src), int(dst), EPSILON, float(eps[src, dst]))
        for which, vector in ((out.set_initial, dense.initial), (out.set_final, dense.final)):
            for q, w in enumerate(vector.numpy()):
                if w != zero:
                    which(q, float(w))
        return out

    def symbolic(self, ref: int | str) -> WFSA:
        """The unit's automaton with weight functions of the word vector ``v1(α) .. vn(α)``.

        Score it with ``env=extraction.environment(vectors)``. Window inputs are specialised per
        history word, so their arcs stay labelled with vocabulary words.
        """
        unit = self.unit(ref)
        template = unit.proof.wfsa
        coordinates = [sympy.Function(f"v{k + 1}")(ALPHA) for k in range(self.features.shape[1])]
        out = WFSA(self.semiring, template.alphabet, name=f"{self.model}:{unit.name} (symbolic)")
        for name in template.states:
            out.add_state(name)
        for index, arc in enumerate(template.arcs):
            where = f"arc {index}"
            weight: Any
            if isinstance(arc.weight, sympy.Basic) and arc.weight.atoms(AppliedUndef):
                name = arc.weight.func.__name__
                expr = unit.proof.parameterisation[name].subs({sympy.Symbol(k): v for k, v in unit.constants.items()})
                weight = expr.xreplace(
                    {c: self._check_call(unit, c).expression(coordinates, self._lagged(c)) for c in
                     expr.atoms(AppliedUndef)}
                )
            else:
                weight = self._constant(unit, arc.weight, where)
            out.add_arc(arc.src, arc.dst, arc.label, weight)
        for q, w in enumerate(self._initial(unit)):
            if w != self.semiring.zeros(()):
                out.set_initial(q, float(w))
        for q, w in enumerate(self._final(unit)):
            if w != self.semiring.zeros(()):
                out.set_final(q, float(w))
        return out

    def environment(self, vectors: Mapping[Hashable, Sequence[float]] | None = None) -> dict[str, Any]:
        """The weight environment of ``symbolic`` automata: ``v_k`` reads coordinate k of a word's vector
        (from ``vectors``, else from the vocabulary's features)."""

        def coordinate(k: int) -> Callable[[Hashable], float]:
            def read(word: Hashable) -> float:
                if vectors is not None and word in vectors:
                    return float(vectors[word][k])
                return float(self.rows([word])[0, k])

            return read

        return {f"v{k + 1}": coordinate(k) for k in range(self.features.shape[1])}

    # -- running and verifying --------------------------------------------------------------------
    def forward(self, sentences: Sequence[Sequence[Hashable]]) -> np.ndarray:
        """Every unit's prefix scores: ``[B, T, units]`` (semiring zero past each sentence's end)."""
        words = sorted({w for sentence in sentences for w in sentence}, key=lambda w: self._row.get(w, -1))
        self.rows(words)  # names an out-of-vocabulary word
        columns = []
        for unit in self.units:
            dense = self.dense(unit, words)
            ids, lengths = dense.encode(sentences)
            columns.append(dense.score_batch(ids, lengths, per_step=True).numpy())
        return np.stack(columns, axis=-1)

    def verify(self, sentences: Sequence[Sequence[Hashable]], states: Sequence[np.ndarray] | np.ndarray) -> float:
        """The maximum absolute difference between the automata's prefix scores and ``states``.

        ``states[b]`` is ``[len(sentences[b]), units]``: the module's hidden states of sentence b.
        The result is also stored in ``max_abs_error``.

        Raises:
            ExtractionError: shapes that do not match the sentences (named).
        """
        scores = self.forward(sentences)
        worst = 0.0
        for b, sentence in enumerate(sentences):
            expected = np.asarray(states[b], dtype=np.float64)
            if expected.shape != (len(sentence), len(self.units)):
                raise ExtractionError(
                    f"{self.model}: states of sentence {b} have shape {expected.shape}, "
                    f"expected ({len(sentence)}, {len(self.units)})"
                )
            if len(sentence):
                worst = max(worst, float(np.max(np.abs(scores[b, : len(sentence)] - expected))))
        self.max_abs_error = worst
        self.checked_tokens = sum(len(x) for x in sentences)
        return worst

    # -- export -----------------------------------------------------------------------------------
    def export(self, directory: str | Path, fmt: str = "att", words: Sequence[Hashable] | None = None) -> list[Path]:
        """Write every unit's constant automaton (AT&T text + symbol table, JSON, or dot) into ``directory``.

        AT&T files use the semiring's own numbers (``write_att``); see ``openfst_arc_type`` for
        the OpenFst arc type that gives the same string scores.
        """
        from kleene.automata.att import write_att, write_symbols
        from kleene.automata.draw import to_dot
        from kleene.automata.jsonio import to_json

        if fmt not in ("att", "json", "dot"):
            raise ExtractionError(f"unknown export format {fmt!r} (expected att, json or dot)")
        out_dir = Path(directory)
        out_dir.mkdir(parents=True, exist_ok=True)
        paths: list[Path] = []
        table = SymbolTable(self.words if words is None else words)
        arc_type = openfst_arc_type(self.semiring)
        if fmt == "att":
            paths.append(out_dir / "words.syms")
            paths[-1].write_text(write_symbols(table))
        for index in range(len(self.units)):
            automaton = self.wfsa(index, list(table))
            stem = out_dir / f"unit{index:03d}"
            if fmt == "att":
                path = stem.with_suffix(".att")
                path.write_text(write_att(automaton, table, arc_type=arc_type if arc_type_usable(automaton) else None))
            elif fmt == "json":
                path = stem.with_suffix(".json")
                path.write_text(to_json(automaton))
            else:
                path = stem.with_suffix(".dot")
                path.write_text(to_dot(automaton).source)
            paths.append(path)
        return paths

    def summary(self) -> dict[str, Any]:
        """Facts for reports and ``kleene extract --json``."""
        return {
            "model": self.model,
            "semiring": self.semiring.name,
            "automata": len(self.units),
            "states": self.units[0].proof.wfsa.num_states,
            "vocabulary": len(self.words),
            "max_abs_error": self.max_abs_error,
            "checked_tokens": self.checked_tokens,
        }


def openfst_arc_type(semiring: Semiring) -> str | None:
    """The OpenFst arc type that represents ``semiring``'s values (None: no homomorphic image).

    real -> log (``−log p``, needs nonnegative weights), log -> log, max-plus/min-plus/max-times -> tropical.
    """
    return {"real": "log", "log": "log", "max-plus": "tropical", "min-plus": "tropical", "max-times": "tropical"}.get(
        semiring.name
    )


def arc_type_usable(wfsa: WFSA) -> bool:
    """Whether every weight of a constant ``wfsa`` maps into its OpenFst arc type (real: all nonnegative)."""
    if wfsa.semiring.name != "real":
        return openfst_arc_type(wfsa.semiring) is not None
    weights = [a.weight for a in wfsa.arcs] + list(wfsa.initial.values()) + list(wfsa.final.values())
    return all(float(w) >= 0 for w in weights)


# ---------------------------------------------------------------------------------------------
# adapters: foreign modules
# ---------------------------------------------------------------------------------------------


def _array(x: Any) -> np.ndarray:
    """A tensor or array as float64 numpy (detached)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def _vocabulary(embedding: Any, words: Sequence[Hashable] | None) -> tuple[list[Hashable], np.ndarray]:
    table = _array(embedding.weight if hasattr(embedding, "weight") else embedding)
    if table.ndim != 2:
        raise ExtractionError(f"embeddings must be a [V, n] matrix; got shape {table.shape}")
    names: list[Hashable] = list(range(table.shape[0])) if words is None else list(words)
    if len(names) != table.shape[0]:
        raise ExtractionError(f"{len(names)} words for {table.shape[0]} embedding rows")
    return names, table


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
    """
    w_ih, w_hh, b = _array(weight_ih), _array(weight_hh), _array(bias)
    d = w_hh.shape[0]
    if w_hh.shape != (d, d) or w_ih.shape[0] != d or b.shape != (d,):
        raise ExtractionError(f"inconsistent linear RNN shapes: W_ih {w_ih.shape}, W_hh {w_hh.shape}, b {b.shape}")
    names, table = _vocabulary(embedding, words)
    proofs = proved_automata(zoo.elman_linear(d))
    constants = {f"w{i + 1}{j + 1}": float(w_hh[i, j]) for i in range(d) for j in range(d)}
    if d > 9:  # zoo names w{i}{j} are ambiguous past 9 units; check that the prover's names are the ones we fill
        raise ExtractionError(f"the linear Elman construction is limited to 9 units here; got {d}")
    inputs = {f"u{i + 1}": AffineInput("identity", w_ih[i][None, :], float(b[i])) for i in range(d)}
    initial = {} if h0 is None else {f"q{i + 1}": float(v) for i, v in enumerate(_array(h0).reshape(-1))}
    units = [Unit(f"h{i + 1}", proofs[i], inputs, constants, initial) for i in range(d)]
    return Extraction(model, units, names, table)


def from_torch_rnn(rnn: Any, embedding: Any, words: Sequence[Hashable] | None = None, *, activation: str,
                   h0: Any = None) -> Extraction:
    """A single-layer, unidirectional ``torch.nn.RNN``'s weights read as a linear Elman network.

    torch runs only tanh or ReLU; ``activation="identity"`` declares that the weights are used
    without a nonlinearity (a tanh Elman network is not rational: use ``kleene.compile.spectral``).

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
    bias = _array(rnn.bias_ih_l0) + _array(rnn.bias_hh_l0) if rnn.bias else np.zeros(rnn.hidden_size)
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

    pytorch-qrnn computes ``Y = linear(cat([x_{t−1}, x_t]))`` (window 2) or ``linear(x_t)`` and
    splits Y into Z, F (and O with ``output_gate``) along features; ``z = tanh(Z)``,
    ``F = σ(F)``, ``c_t = F ⊙ z + (1 − F) ⊙ c_{t−1}``. The paper's forget gate is ``f = 1 − F
    = σ(−F)``, so the unit's f input has the negated weights (the f ↔ 1 − f swap).

    With a window of 2 the automaton tracks the previous word in its states (Appendix A), so it
    is built over ``words`` only: keep that list small (tens of words).
    """
    w, b = _array(weight), _array(bias)
    names, table = _vocabulary(embedding, words)
    n = table.shape[1]
    if window not in (1, 2) or w.shape[1] != window * n:
        raise ExtractionError(f"pytorch-qrnn weights must be [k·d, window·n] with window 1 or 2; got {w.shape}")
    parts = 3 if output_gate else 2
    if w.shape[0] % parts or b.shape != (w.shape[0],):
        raise ExtractionError(f"weight rows {w.shape[0]} (bias {b.shape}) do not split into {parts} gates")
    d = w.shape[0] // parts
    rows = w.reshape(w.shape[0], window, n)
    z = [AffineInput("tanh", rows[i], float(b[i])) for i in range(d)]
    f = [AffineInput("sigmoid", -rows[d + i], -float(b[d + i])) for i in range(d)]
    units = _gated_units(
        "c", lambda: proved_automata(zoo.qrnn(window, alphabet=names), names if window > 1 else None), f, z, "z"
    )
    return Extraction(f"pytorch-qrnn layer (window {window})", units, names, table)


def qrnn_output_gate(weight: Any, bias: Any, vectors: np.ndarray, window: int = 1) -> np.ndarray:
    """pytorch-qrnn's output gate ``σ(O)`` for a sentence's vectors ``[T, n]`` (for reading h = o ⊙ c)."""
    w, b = _array(weight), _array(bias)
    d = w.shape[0] // 3
    padded = np.concatenate([np.zeros((window - 1, vectors.shape[1])), vectors]) if window > 1 else vectors
    stacked = np.concatenate([padded[k : k + len(vectors)] for k in range(window)], axis=1)
    return _sigmoid_numpy(stacked @ w[2 * d :].T + b[2 * d :])


def from_sru_cell(cell: Any, embedding: Any, words: Sequence[Hashable] | None = None) -> Extraction:
    """The cell state of the ``sru`` package's ``SRUCell`` (v2) when its ``weight_c`` (the v ⊙ c term) is zero.

    The package computes ``U = x W`` viewed as ``[d, k]`` per unit: ``U[..., 0]`` is x̃, ``U[..., 1]``
    plus ``bias[:d]`` the forget pre-activation; ``c_t = x̃ + (c_{t−1} − x̃) ⊙ f``, the 2017 SRU.

    Raises:
        ExtractionError: nonzero ``weight_c`` (then the cell is SRU v2, not rational), bidirectional
            cells, layer norm, custom input modules.
    """
    vc = _array(cell.weight_c)
    if np.any(vc != 0):
        raise ExtractionError(
            f"this SRU cell has nonzero weight_c (max |v| = {np.abs(vc).max():.3g}): v ⊙ c_(t-1) inside the gates "
            "makes it SRU v2, which is not rational; use spectral extraction"
        )
    if cell.bidirectional or cell.layer_norm is not None or cell.custom_m is not None:
        raise ExtractionError("only unidirectional SRU cells without layer norm or custom_m are extracted")
    w = _array(cell.weight)
    if cell.weight_proj is not None:
        w = _array(cell.weight_proj) @ w
    names, table = _vocabulary(embedding, words)
    d, k = cell.hidden_size, cell.num_matrices
    per_unit = w.reshape(w.shape[0], d, k)
    forget_bias = _array(cell.bias)[:d]
    f = [AffineInput("sigmoid", per_unit[:, i, 1][None, :], float(forget_bias[i])) for i in range(d)]
    g = [AffineInput("identity", per_unit[:, i, 0][None, :]) for i in range(d)]
    units = _gated_units("c", lambda: proved_automata(zoo.sru()), f, g, "g")
    return Extraction("sru.SRUCell (weight_c = 0)", units, names, table)


# ---------------------------------------------------------------------------------------------
# adapters: kleene's own layers (read by duck typing: kleene.compile never imports kleene.nn)
# ---------------------------------------------------------------------------------------------


def _rows(linear: Any, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``start .. start+count`` of a ``nn.Linear``'s weight and bias (zeros without bias)."""
    weight = _array(linear.weight)[start : start + count]
    bias = _array(linear.bias)[start : start + count] if linear.bias is not None else np.zeros(count)
    return weight, bias


def _affine(activation: str, weight: np.ndarray, bias: np.ndarray) -> list[AffineInput]:
    return [AffineInput(activation, weight[i][None, :], float(bias[i])) for i in range(len(weight))]


def _rrnn_units(layer: Any) -> list[Unit]:
    d, kind = layer.dim, layer.kind
    if kind in ("B", "B-maxplus"):
        maxplus = kind == "B-maxplus"
        proof = proved_automata(zoo.rrnn_b_maxplus() if maxplus else zoo.rrnn_b())[0]
        forget = _affine("logsigmoid" if maxplus else "sigmoid", *_rows(layer.forget, 0, d))
        update = _affine("identity", *_rows(layer.update, 0, d))
        value = "u" if maxplus else "w"
        return [Unit(f"c{i + 1}", proof, {"f": forget[i], value: update[i]}) for i in range(d)]
    proof = proved_automata(zoo.rrnn_c() if kind == "C" else zoo.rrnn_f())[0]
    f1, f2 = (_affine("sigmoid", *_rows(layer.forget, j * d, d)) for j in (0, 1))
    w1, w2 = (_affine("identity", *_rows(layer.update, j * d, d)) for j in (0, 1))
    constants: list[dict[str, float]] = [{} for _ in range(d)]
    if kind == "F":
        values = _array(layer.recurrence.constants)  # [gamma, rho1, rho2] x d, already σ(raw)
        names = list(layer.recurrence.template.constants)
        mapping = {"gamma": "r", "rho1": "p1", "rho2": "p2"}
        constants = [{mapping[n]: float(values[k, i]) for k, n in enumerate(names)} for i in range(d)]
    return [
        Unit(f"c{i + 1}", proof, {"f1": f1[i], "f2": f2[i], "w1": w1[i], "w2": w2[i]}, constants[i]) for i in range(d)
    ]


def _sru_units(layer: Any) -> list[Unit]:
    d = layer.dim
    proof = proved_automata(zoo.sru())[0]
    forget = _affine("sigmoid", *_rows(layer.gates, 0, d))
    value = _affine("identity", *_rows(layer.transform, 0, d))
    return [Unit(f"c{i + 1}", proof, {"f": forget[i], "g": value[i]}) for i in range(d)]


#: kleene layer class name -> unit builder
KLEENE_LAYERS: dict[str, Callable[[Any], list[Unit]]] = {"RRNNLayer": _rrnn_units, "SRULayer": _sru_units}


def from_kleene_layer(layer: Any, embedding: Any, words: Sequence[Hashable] | None = None) -> Extraction:
    """The cell states of a kleene rational layer reading word vectors (the first layer of a stack).

    Raises:
        ExtractionError: a layer kind without an extraction here, or a bidirectional layer.
    """
    kind = type(layer).__name__
    if kind not in KLEENE_LAYERS:
        raise ExtractionError(f"no exact extraction for {kind} (supported: {', '.join(sorted(KLEENE_LAYERS))})")
    if getattr(layer.recurrence, "bidirectional", False):
        raise ExtractionError(f"{kind}: bidirectional layers are not extracted (the backward half reads reversed text)")
    names, table = _vocabulary(embedding, words)
    label = f"{kind}({layer.kind})" if hasattr(layer, "kind") else kind
    return Extraction(label, KLEENE_LAYERS[kind](layer), names, table)


def kleene_layer_states(layer: Any, vectors: Any, lengths: Any) -> Any:
    """The cell states c ``[B, T, d]`` a kleene rational layer computes (its compiled recurrence's output)."""
    slots, _ = layer.slots(vectors)
    states, _ = layer.recurrence(slots, lengths)
    return states
