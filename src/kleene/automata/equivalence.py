"""Equivalence of real-weighted automata by Schützenberger's linear-algebra method.

Two automata are equivalent when they give every string the same score. Over
the reals this is decidable in polynomial time (Tzeng's algorithm): run both
automata side by side as one "direct sum" whose forward vector after a prefix
``w`` is ``[alpha_a M_a(w), alpha_b M_b(w)]``. The vectors of all prefixes span a
space of dimension at most ``n_a + n_b``; a breadth-first search over prefixes
that only extends prefixes adding a new direction finds a basis of it, and the
automata are equivalent exactly when ``[eta_a, -eta_b]`` vanishes on that basis.
Because the search is breadth-first, the first prefix on which it does not
vanish is a shortest distinguishing string.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, replace

import numpy as np
import sympy

from kleene.automata.labels import OneOf, Sym
from kleene.automata.ops import merged_alphabet, remove_epsilon
from kleene.automata.weights import Env, Weight, is_symbolic
from kleene.automata.wfsa import WFSA
from kleene.errors import AlphabetError, DivergenceError, SemiringError


@dataclass(frozen=True)
class Counterexample:
    """A string the automata score differently, with both scores (in each automaton's semiring)."""

    symbols: tuple[Hashable, ...]
    score_a: float
    score_b: float


@dataclass(frozen=True)
class EquivalenceResult:
    """Truthy when the automata are equivalent; otherwise ``counterexample`` tells them apart.

    ``dimension`` is the size of the basis of forward vectors the search built.
    """

    equivalent: bool
    counterexample: Counterexample | None = None
    dimension: int = 0

    def __bool__(self) -> bool:
        return self.equivalent

    def __str__(self) -> str:
        if self.counterexample is None:
            return "equivalent" if self.equivalent else "not equivalent"
        c = self.counterexample
        return f"not equivalent: on {list(c.symbols)!r} the scores are {c.score_a!r} and {c.score_b!r}"


@dataclass(frozen=True)
class _Series:
    """An epsilon-free automaton as real vectors and matrices: ``alpha M(x1) ... M(xn) eta``."""

    initial: np.ndarray
    final: np.ndarray
    matrices: dict[Hashable, np.ndarray]


@dataclass(frozen=True)
class _LinearForm:
    """The automaton's real series, and the series of its absolute weights (which bounds rounding errors)."""

    signed: _Series
    magnitude: _Series
    log_domain: bool

    def report(self, value: float) -> float:
        """A real score back in the automaton's own semiring (log for LOG)."""
        if not self.log_domain:
            return value
        with np.errstate(divide="ignore"):
            return float(np.log(value))


def _alphabet_of_both(a: WFSA, b: WFSA) -> list[Hashable]:
    """The union of the symbols either automaton can read.

    Raises:
        AlphabetError: a predicate label (``ANY``, ``NoneOf``) in an automaton without an alphabet.
    """
    for side, wfsa in (("first", a), ("second", b)):
        if wfsa.alphabet is not None:
            continue
        for i, arc in enumerate(wfsa.arcs):
            if arc.label.consumes and not isinstance(arc.label, (Sym, OneOf)):
                raise AlphabetError(
                    f"equivalent: arc {i} of the {side} automaton has the predicate label {arc.label}, "
                    "which needs the automaton's alphabet to be enumerated"
                )
    merged = merged_alphabet(a, b, "equivalent")
    if merged is not None:
        return list(merged)
    symbols: dict[Hashable, None] = {}
    for wfsa in (a, b):
        for arc in wfsa.arcs:
            for symbol in arc.label.symbols(None):
                symbols.setdefault(symbol)
    return list(symbols)


def _linear_form(wfsa: WFSA, symbols: list[Hashable], env: Env | None, side: str) -> _LinearForm:
    """``wfsa`` as real linear algebra over ``symbols`` (epsilons removed, log weights exponentiated).

    The magnitude series sums absolute path weights (``|w|`` on every arc, before
    parallel arcs merge); when its epsilon closure diverges although the signed one
    converges, the absolute values of the signed matrices stand in for it.

    Raises:
        SemiringError: a semiring other than real or log.
    """
    if not wfsa.semiring.has_real_image:
        raise SemiringError(
            f"equivalent: the {side} automaton is over the {wfsa.semiring.name} semiring; only semirings that embed "
            "into the real field (real, log: compared as real after exponentiating) are supported"
        )
    signed = _series(wfsa, symbols, env)
    if wfsa.semiring.real_image_nonnegative:  # e.g. exponentiated log weights: no cancellation
        return _LinearForm(signed, signed, log_domain=True)
    try:
        magnitude = _series(_absolute(wfsa), symbols, env)
    except DivergenceError:
        magnitude = _Series(
            np.abs(signed.initial), np.abs(signed.final), {x: np.abs(m) for x, m in signed.matrices.items()}
        )
    return _LinearForm(signed, magnitude, log_domain=False)


def _series(wfsa: WFSA, symbols: list[Hashable], env: Env | None) -> _Series:
    """Real vectors and per-symbol matrices; a symbol outside ``wfsa``'s own alphabet gets the zero matrix."""
    plain = remove_epsilon(wfsa, env=env) if wfsa.has_epsilons else wfsa

    def real(values: np.ndarray) -> np.ndarray:
        return np.asarray(wfsa.semiring.to_real(np.asarray(values, dtype=float)), dtype=float)

    n = plain.num_states
    matrices = {
        x: real(plain.transition_matrix(x, env)) if plain.alphabet is None or x in plain.alphabet else np.zeros((n, n))
        for x in symbols
    }
    return _Series(real(plain.vector(plain.initial, env)), real(plain.vector(plain.final, env)), matrices)


def _absolute(wfsa: WFSA) -> WFSA:
    """A copy of a real automaton with every weight replaced by its absolute value (``Abs`` when symbolic)."""
    out = wfsa.copy()
    out.arcs = [replace(arc, weight=_magnitude(arc.weight)) for arc in wfsa.arcs]
    out.initial = {q: _magnitude(w) for q, w in wfsa.initial.items()}
    out.final = {q: _magnitude(w) for q, w in wfsa.final.items()}
    return out


def _magnitude(weight: Weight) -> Weight:
    return sympy.Abs(weight) if is_symbolic(weight) else abs(weight)


def adds_direction(basis: list[np.ndarray], vector: np.ndarray, tolerance: float) -> bool:
    """Whether ``vector`` leaves span(``basis``) by more than ``tolerance`` (relative); if so, extend ``basis``.

    Note:
        ``basis`` is kept orthonormal (Gram-Schmidt, projected twice for stability).
    """
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        return False
    residual = vector / norm
    for _ in range(2):
        for direction in basis:
            residual = residual - (direction @ residual) * direction
    size = float(np.linalg.norm(residual))
    if size <= tolerance:
        return False
    basis.append(residual / size)
    return True


def equivalent(a: WFSA, b: WFSA, env: Env | None = None, tolerance: float = 1e-9) -> EquivalenceResult:
    """Whether ``a`` and ``b`` give every string the same score (Tzeng's algorithm).

    Scores ``s_a``, ``s_b`` of a string count as equal when ``|s_a - s_b| <= tolerance * t``,
    where ``t`` is the total *absolute* weight of both automata's paths for the
    string, so that neither scale nor cancellation between negative weights misleads
    the test. The same relative ``tolerance`` decides when a forward vector adds a
    new direction to the basis.

    Note:
        Both automata must be over the real or the log semiring (log weights are
        exponentiated and compared as real ones, so a real and a log automaton can
        be compared). Epsilon arcs are removed first (their closure must converge).
        Predicate labels need the automaton's alphabet; strings range over the union
        of both alphabets. Symbolic weights are evaluated in ``env``.

    Raises:
        SemiringError: a semiring other than real or log.
        AlphabetError: a predicate label without an alphabet, or alphabets that cannot be merged.
        DivergenceError: an epsilon closure that diverges.
        WeightError: a symbolic weight that ``env`` does not determine.
    """
    symbols = _alphabet_of_both(a, b)
    form_a = _linear_form(a, symbols, env, "first")
    form_b = _linear_form(b, symbols, env, "second")
    split = len(form_a.signed.initial)
    matrices = {x: _block_diagonal(form_a.signed.matrices[x], form_b.signed.matrices[x]) for x in symbols}
    magnitudes = {x: _block_diagonal(form_a.magnitude.matrices[x], form_b.magnitude.matrices[x]) for x in symbols}
    final_a, final_b = form_a.signed.final, form_b.signed.final
    final_magnitude = np.concatenate([form_a.magnitude.final, form_b.magnitude.final])
    start = np.concatenate([form_a.signed.initial, form_b.signed.initial])
    start_magnitude = np.concatenate([form_a.magnitude.initial, form_b.magnitude.initial])
    pending: deque[tuple[tuple[Hashable, ...], np.ndarray, np.ndarray]] = deque([((), start, start_magnitude)])
    basis: list[np.ndarray] = []
    while pending:
        word, vector, magnitude = pending.popleft()
        score_a, score_b = float(vector[:split] @ final_a), float(vector[split:] @ final_b)
        if abs(score_a - score_b) > tolerance * float(magnitude @ final_magnitude):
            witness = Counterexample(word, form_a.report(score_a), form_b.report(score_b))
            return EquivalenceResult(False, witness, len(basis))
        if adds_direction(basis, vector, tolerance):
            for x in symbols:
                pending.append(((*word, x), vector @ matrices[x], magnitude @ magnitudes[x]))
    return EquivalenceResult(True, None, len(basis))


def _block_diagonal(upper: np.ndarray, lower: np.ndarray) -> np.ndarray:
    n, m = upper.shape[0], lower.shape[0]
    out = np.zeros((n + m, n + m))
    out[:n, :n] = upper
    out[n:, n:] = lower
    return out
