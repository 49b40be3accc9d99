"""The machinery of exact extraction: input functions, units, the ``Extraction`` (automata, verification, export)."""

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
from kleene.automata.labels import EPSILON, Sym, SymbolTable
from kleene.automata.semiring import Semiring
from kleene.automata.weights import ALPHA, sigmoid
from kleene.automata.wfsa import WFSA
from kleene.errors import ExtractionError, WeightError
from kleene.extract.readable import WORDS_PER_ARC, readable_dot
from kleene.rational.certificate import AutomatonProof, Certificate
from kleene.rational.prover import prove
from kleene.rational.recurrence import BOS, Recurrence, input_symbol, symbol_atom


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
    ``K − 1 − k`` steps back (zero vector before the start), as in a width-K convolution. With ``stored_in``, the
    function computes a stored value of that semiring (as a layer feeds its kernel) and is read back as its element
    (``from_storage``: the identity except where the storage differs, e.g. max-times' logarithms).
    """

    activation: str
    weight: np.ndarray
    bias: float = 0.0
    stored_in: Semiring | None = None

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
        value = ACTIVATIONS[self.activation][0](pre)
        return value if self.stored_in is None else np.asarray(self.stored_in.from_storage(value), dtype=np.float64)

    def expression(self, coordinates: Sequence[sympy.Expr], lagged: Sequence[np.ndarray]) -> sympy.Expr:
        """The same function as a sympy expression of the current word's coordinates (learned numbers inlined)."""
        constant = self.bias + sum(float(vector @ row) for row, vector in zip(self.weight[:-1], lagged))
        pre = sympy.Add(*(sympy.Float(float(w)) * v for w, v in zip(self.weight[-1], coordinates) if w != 0))
        value = ACTIVATIONS[self.activation][1](pre + sympy.Float(constant))
        return value if self.stored_in is None else self.stored_in.sym_from_storage(value)


@dataclass(frozen=True)
class Structure:
    """A symbolic automaton built by hand (no zoo recurrence has its exact semantics), with what its weight
    functions mean: ``parameterisation[name]`` is an expression of input calls ``g(x_t)`` and constants,
    written in the automaton's own number system (e.g. ``m1(x_t) + eps0`` for a max-plus product).

    The prover's ``AutomatonProof`` has the same two attributes; a ``Structure`` carries no invariant, so its
    correctness rests on ``Extraction.verify`` against the module.
    """

    wfsa: WFSA
    parameterisation: dict[str, sympy.Expr]


@dataclass
class Unit:
    """One automaton to extract: its structure (proved, or built by hand), its inputs and constants.

    ``constants`` give the values of the structure's constant symbols; ``initial`` overrides initial
    weights by state name (a nonzero initial hidden state).
    """

    name: str
    structure: AutomatonProof | Structure
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
        self.semiring: Semiring = self.units[0].structure.wfsa.semiring
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
            raise ExtractionError(
                f"unit {unit.name}: {where} {weight} has no value (constants given: {sorted(unit.constants)})"
            ) from None

    @staticmethod
    def _parameterised(unit: Unit, name: str) -> sympy.Expr:
        """The weight function ``name`` of ``unit`` as an expression of input calls (its constants filled in)."""
        expr: sympy.Expr = unit.structure.parameterisation[name].subs(
            {sympy.Symbol(k): v for k, v in unit.constants.items()}
        )
        return expr

    def _weight_values(self, unit: Unit, weight: Any, current: np.ndarray, where: str) -> np.ndarray | float:
        """An arc weight's value for each row of ``current`` (a float when it does not read the word)."""
        if not (isinstance(weight, sympy.Basic) and weight.atoms(AppliedUndef)):
            return self._constant(unit, weight, where)
        if not (isinstance(weight, AppliedUndef) and weight.args == (ALPHA,)):
            raise ExtractionError(f"unit {unit.name}: {where} weight {weight} is not a weight function of α")
        name = weight.func.__name__
        if name not in unit.structure.parameterisation:
            raise ExtractionError(f"unit {unit.name}: the weight function {name} has no parameterisation")
        expr = self._parameterised(unit, name)
        fn, calls = _lambdified(expr)
        args = [self._check_call(unit, c).values(current, self._lagged(c)) for c in calls]
        return np.broadcast_to(np.asarray(fn(*args), dtype=np.float64), (current.shape[0],))

    # -- automata ---------------------------------------------------------------------------------
    def dense(self, unit: Unit, words: Sequence[Hashable]) -> DenseWFSA:
        """``unit``'s automaton tabulated over ``words`` (float64 tensors; row 0 is padding)."""
        import torch

        s, template = self.semiring, unit.structure.wfsa
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
        template = unit.structure.wfsa
        vector: np.ndarray = self.semiring.zeros((template.num_states,))
        for state, weight in template.initial.items():
            vector[state] = self._constant(unit, weight, f"initial weight of {template.state_name(state)}")
        for name, weight in unit.initial.items():
            vector[template.state(name)] = weight
        return vector

    def _final(self, unit: Unit) -> np.ndarray:
        template = unit.structure.wfsa
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
        s, template = self.semiring, unit.structure.wfsa
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
        template = unit.structure.wfsa
        coordinates = [sympy.Function(f"v{k + 1}")(ALPHA) for k in range(self.features.shape[1])]
        out = WFSA(self.semiring, template.alphabet, name=f"{self.model}:{unit.name} (symbolic)")
        for name in template.states:
            out.add_state(name)
        for index, arc in enumerate(template.arcs):
            where = f"arc {index}"
            weight: Any
            if isinstance(arc.weight, sympy.Basic) and arc.weight.atoms(AppliedUndef):
                name = arc.weight.func.__name__
                expr = self._parameterised(unit, name)
                weight = expr.xreplace(
                    {
                        c: self._check_call(unit, c).expression(coordinates, self._lagged(c))
                        for c in expr.atoms(AppliedUndef)
                    }
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
                worst = max(worst, _max_abs_difference(scores[b, : len(sentence)], expected))
        self.max_abs_error = worst
        self.checked_tokens = sum(len(x) for x in sentences)
        return worst

    def verify_documents(self, documents: Sequence[Sequence[Hashable]], scores: np.ndarray) -> float:
        """The maximum absolute difference between every unit's score of each whole document and ``scores``.

        ``scores`` is ``[B, units]`` (the module's per-document outputs, e.g. SoPa's pattern scores). The result
        is also stored in ``max_abs_error``.

        Raises:
            ExtractionError: an empty document, or ``scores`` of the wrong shape.
        """
        expected = np.asarray(scores, dtype=np.float64)
        if expected.shape != (len(documents), len(self.units)):
            raise ExtractionError(
                f"{self.model}: document scores have shape {expected.shape}, expected ({len(documents)}, "
                f"{len(self.units)})"
            )
        empty = [b for b, document in enumerate(documents) if not document]
        if empty:
            raise ExtractionError(f"{self.model}: document {empty[0]} is empty")
        prefix = self.forward(documents)
        last = prefix[np.arange(len(documents)), [len(d) - 1 for d in documents]]
        self.max_abs_error = _max_abs_difference(last, expected) if len(documents) else 0.0
        self.checked_tokens = sum(len(d) for d in documents)
        return self.max_abs_error

    # -- export -----------------------------------------------------------------------------------
    def export(
        self,
        directory: str | Path,
        fmt: str = "att",
        words: Sequence[Hashable] | None = None,
        words_per_arc: int | None = WORDS_PER_ARC,
    ) -> list[Path]:
        """Write every unit's constant automaton over ``words`` (default: all its words) into ``directory``: AT&T
        text + symbol table, JSON, or a dot drawing.

        AT&T files use the semiring's own numbers (``write_att``); the semiring's ``openfst_arc_type`` is the
        OpenFst arc type that gives the same string scores. A drawing shows the best ``words_per_arc`` words of
        each arc and never the padding or unknown token (``readable_dot``), or every word with ``None``: the
        automaton as it computes, which is unreadable over a vocabulary.

        Raises:
            ExtractionError: an unknown ``fmt``, or ``words_per_arc`` that is neither None nor an integer >= 1.
        """
        from kleene.automata.att import write_att, write_symbols
        from kleene.automata.draw import to_dot
        from kleene.automata.jsonio import to_json

        if fmt not in ("att", "json", "dot"):
            raise ExtractionError(f"unknown export format {fmt!r} (expected att, json or dot)")
        if words_per_arc is not None and (
            isinstance(words_per_arc, bool) or not isinstance(words_per_arc, int) or words_per_arc < 1
        ):
            raise ExtractionError(f"words_per_arc must be None (every word) or an integer >= 1, got {words_per_arc!r}")
        out_dir = Path(directory)
        out_dir.mkdir(parents=True, exist_ok=True)
        paths: list[Path] = []
        table = SymbolTable(self.words if words is None else words)
        arc_type = self.semiring.openfst_arc_type
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
                drawing = to_dot(automaton) if words_per_arc is None else readable_dot(automaton, words_per_arc)
                path.write_text(drawing.source)
            paths.append(path)
        return paths

    def summary(self) -> dict[str, Any]:
        """Facts for reports and ``kleene extract --json``."""
        return {
            "model": self.model,
            "semiring": self.semiring.name,
            "automata": len(self.units),
            "states": max(unit.structure.wfsa.num_states for unit in self.units),
            "vocabulary": len(self.words),
            "max_abs_error": self.max_abs_error,
            "checked_tokens": self.checked_tokens,
        }


def _max_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """``max |a − b|``, where equal infinities (a semiring zero on both sides) differ by 0."""
    same = a == b
    with np.errstate(invalid="ignore"):  # inf − inf where both hold the same infinity: masked by ``same``
        return float(np.max(np.where(same, 0.0, np.abs(a - b)))) if np.size(a) else 0.0


def arc_type_usable(wfsa: WFSA) -> bool:
    """Whether every weight of a constant ``wfsa`` maps into its OpenFst arc type (real: only nonnegative ones)."""
    arc_type = wfsa.semiring.openfst_arc_type
    if arc_type is None:
        return False
    encode = wfsa.semiring.openfst_codec(arc_type)[1]
    weights = [a.weight for a in wfsa.arcs] + list(wfsa.initial.values()) + list(wfsa.final.values())
    try:
        for w in weights:
            encode(w)
    except WeightError:
        return False
    return True


def to_numpy(x: Any) -> np.ndarray:
    """A tensor or array as float64 numpy (detached)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def vocabulary_rows(embedding: Any, words: Sequence[Hashable] | None) -> tuple[list[Hashable], np.ndarray]:
    table = to_numpy(embedding.weight if hasattr(embedding, "weight") else embedding)
    if table.ndim != 2:
        raise ExtractionError(f"embeddings must be a [V, n] matrix; got shape {table.shape}")
    names: list[Hashable] = list(range(table.shape[0])) if words is None else list(words)
    if len(names) != table.shape[0]:
        raise ExtractionError(f"{len(names)} words for {table.shape[0]} embedding rows")
    return names, table
