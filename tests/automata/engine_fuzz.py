"""A differential fuzz of the automata engine against an independent dense oracle.

Shared by ``test_engine.py`` (a few hundred comparisons) and ``benchmarks/fuzz_engine.py`` (10,000 and more).
Each random automaton is run through the engine's operations (score, viterbi, pathsum, all-state distances,
remove_epsilon, the epsilon closure ``closure.epsilon_closure_rows`` and each of its strategies) under a random
*strategy profile* (the engine's size thresholds set to their defaults or lowered, so that small automata take the
sparse engine and the sparse closure, small components the large-component solvers, the LU the iterative
solver...), and every result is compared with this module's
oracle, which shares no code with the engine:

- dense Q x Q matrices built from ``wfsa.arcs`` (parallel arcs plus-summed; a predicate arc once per symbol it
  accepts), restricted to the states on some successful path (found here by set reachability);
- the star of a matrix by Gauss-Jordan elimination in the semiring (``plus``, ``times`` and the scalar ``star``
  only), preceded in the real semiring by a spectral-radius check (``< 1`` converges); capped closures as
  ``I + E + ... + E^k``;
- where the enumeration is small, the brute-force sum over explicit paths (``tests/automata/oracle.py``).

The Forward recursion's other element types are compared too: the padded torch batch (``batched_forward``, on
automata of at most ``BATCHED_STATES`` states) and the sympy score (``score_symbolic``, at most
``SYMBOLIC_STATES`` states, where its closure is a finite sum).

The automata cross every strategy threshold (2 to 300 states, one cyclic component of 257+ states), every
semiring, epsilon caps, divergent cycles on and off successful paths, and weights near each semiring's limits
(log self-loops of weight -1e-16 and -1e-17, log weights of magnitude 750, real self-loops of 1 - 1e-9,
idempotent self-loops of exactly one). Agreement: both raise ``DivergenceError``, or both give values equal up
to a tolerance (relative 1e-7 for the sum semirings, whose solves are conditioned by the cycles generated; 1e-9
for the idempotent ones).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from kleene.automata import ANY, EPSILON, WFSA, SymbolTable, algorithms, get_semiring, remove_epsilon
from kleene.automata import closure as engine_closure
from kleene.automata import sparse as engine_sparse
from kleene.automata.algorithms import viterbi as viterbi_path
from kleene.automata.batched import DenseWFSA
from kleene.automata.push import state_distances
from kleene.automata.semiring import Semiring
from kleene.automata.star import closure_matrix
from kleene.errors import DivergenceError

from . import oracle

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]
SYMBOLS = ["a", "b", "c"]
#: Module attributes of the engine that choose a strategy, and the lowered value each profile may set.
THRESHOLDS: dict[tuple[Any, str], int] = {
    (engine_sparse, "SPARSE_MIN_STATES"): 2,
    (engine_closure, "DENSE_CLOSURE_STATES"): 1,
    (engine_sparse, "DENSE_BLOCK"): 3,
    (engine_sparse, "ITERATIVE_FROM"): 6,
    (algorithms, "SMALL_FRONTIER"): 1,
    (algorithms, "DENSE_LAYER_STATES"): 1,
    (engine_sparse, "ARRAY_OPS_MIN_ARCS"): 1,
}


class Diverges(Exception):
    """The oracle's sum diverges."""


# ----------------------------------------------------------------------------------------------------------------------
# The oracle


def star(matrix: np.ndarray, s: Semiring) -> np.ndarray:
    """``M*`` by Gauss-Jordan elimination in the semiring (raises Diverges)."""
    n = matrix.shape[0]
    if s.name == "real" and n and float(np.max(np.abs(np.linalg.eigvals(matrix.astype(float))))) >= 1.0 - 1e-12:
        raise Diverges
    a = np.array(matrix, dtype=s.numpy_dtype)
    for k in range(n):
        if s.star_diverges(a[k, k]):
            raise Diverges
        pivot = s.star(a[k, k])
        a = s.plus(a, s.times(s.times(a[:, k : k + 1], pivot), a[k : k + 1, :]))
    eye = s.zeros((n, n))
    np.fill_diagonal(eye, s.one)
    return np.asarray(s.plus(eye, a))


def capped(matrix: np.ndarray, s: Semiring, cap: int) -> np.ndarray:
    n = matrix.shape[0]
    eye = s.zeros((n, n))
    np.fill_diagonal(eye, s.one)
    total, power = eye, eye
    for _ in range(cap):
        power = s.matmul(power, matrix)
        total = s.plus(total, power)
    return np.asarray(total)


def closure(matrix: np.ndarray, s: Semiring, cap: int | None) -> np.ndarray:
    return star(matrix, s) if cap is None else capped(matrix, s, cap)


@dataclass
class Dense:
    """An automaton as dense matrices: ``eps`` and one matrix per symbol of the alphabet."""

    s: Semiring
    n: int
    initial: np.ndarray
    final: np.ndarray
    eps: np.ndarray
    moves: dict[Hashable, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, a: WFSA, s: Semiring | None = None) -> Dense:
        s = s or a.semiring
        n = a.num_states
        d = cls(s, n, s.zeros((n,)), s.zeros((n,)), s.zeros((n, n)))
        for q, w in a.initial.items():
            d.initial[q] = s.plus(d.initial[q], w)
        for q, w in a.final.items():
            d.final[q] = s.plus(d.final[q], w)
        alphabet = list(a.alphabet) if a.alphabet is not None else SYMBOLS
        for x in alphabet:
            d.moves[x] = s.zeros((n, n))
        for arc in a.arcs:
            if not arc.label.consumes:
                d.eps[arc.src, arc.dst] = s.plus(d.eps[arc.src, arc.dst], arc.weight)
                continue
            for x in alphabet:
                if arc.label.matches(x):
                    d.moves[x][arc.src, arc.dst] = s.plus(d.moves[x][arc.src, arc.dst], arc.weight)
        return d

    def support(self, m: np.ndarray) -> list[tuple[int, int]]:
        return [(int(i), int(j)) for i, j in zip(*np.nonzero(m != self.s.zero))]

    def reach(self, start: set[int], moves: list[tuple[int, int]]) -> set[int]:
        seen, stack = set(start), list(start)
        while stack:
            q = stack.pop()
            for i, j in moves:
                if i == q and j not in seen:
                    seen.add(j)
                    stack.append(j)
        return seen

    def live_for(self, symbols: Sequence[Hashable]) -> np.ndarray:
        """The states on some successful path deriving ``symbols``."""
        eps = self.support(self.eps)
        back = [(j, i) for i, j in eps]
        ahead = [self.reach({q for q in range(self.n) if self.initial[q] != self.s.zero}, eps)]
        for x in symbols:
            step = self.support(self.moves[x])
            ahead.append(self.reach({j for i, j in step if i in ahead[-1]}, eps))
        behind = self.reach({q for q in range(self.n) if self.final[q] != self.s.zero}, back)
        live = np.zeros(self.n, dtype=bool)
        for t in range(len(symbols), -1, -1):
            live[sorted(ahead[t] & behind)] = True
            if t:
                step = self.support(self.moves[symbols[t - 1]])
                behind = self.reach({i for i, j in step if j in behind}, back)
        return live

    def restricted(self, m: np.ndarray, live: np.ndarray) -> np.ndarray:
        return np.where(live[:, None] & live[None, :], m, self.s.zero)

    def vecmat(self, v: np.ndarray, m: np.ndarray) -> np.ndarray:
        return np.asarray(self.s.matmul(v[None, :], m)[0])

    def dot(self, v: np.ndarray, w: np.ndarray) -> Any:
        return self.s.sum(self.s.times(v, w), axis=0)

    def score(self, symbols: Sequence[Hashable], cap: int | None) -> Any:
        live = self.live_for(symbols)
        s = self.s
        c = closure(self.restricted(self.eps, live), s, cap)
        v = self.vecmat(np.where(live, self.initial, s.zero), c)
        for x in symbols:
            v = self.vecmat(self.vecmat(v, self.restricted(self.moves[x], live)), c)
        return self.dot(v, self.final)

    def one_step(self) -> np.ndarray:
        total = self.s.zeros((self.n, self.n))
        for m in self.moves.values():
            total = self.s.plus(total, m)
        return total

    def useful(self, step: np.ndarray, initial: np.ndarray, final: np.ndarray) -> np.ndarray:
        moves = self.support(step)
        ahead = self.reach({q for q in range(self.n) if initial[q] != self.s.zero}, moves)
        behind = self.reach({q for q in range(self.n) if final[q] != self.s.zero}, [(j, i) for i, j in moves])
        live = np.zeros(self.n, dtype=bool)
        live[sorted(ahead & behind)] = True
        return live

    def pathsum(self, cap: int | None) -> Any:
        s = self.s
        if cap is None:
            step, initial = s.plus(self.eps, self.one_step()), self.initial
        else:
            c = capped(self.eps, s, cap)
            step, initial = s.matmul(self.one_step(), c), self.vecmat(self.initial, c)
        live = self.useful(step, initial, self.final)
        return self.dot(self.vecmat(np.where(live, initial, s.zero), star(self.restricted(step, live), s)),
                        self.final)

    def distances(self, towards: str) -> np.ndarray:
        s = self.s
        step = s.plus(self.eps, self.one_step())
        start = self.initial
        if towards == "final":
            step, start = step.T, self.final
        live = np.zeros(self.n, dtype=bool)
        live[sorted(self.reach({q for q in range(self.n) if start[q] != s.zero}, self.support(step)))] = True
        return np.where(live, self.vecmat(np.where(live, start, s.zero), star(self.restricted(step, live), s)), s.zero)

    def batch_scores(self, strings: Sequence[Sequence[Hashable]], cap: int | None) -> list[Any]:
        """``score`` of each string with one closure over the states useful in the batch's union graph (the
        epsilon arcs and the arcs of every symbol of the batch, at any position), as ``batched_forward`` has it."""
        s = self.s
        step = self.eps
        for x in sorted({x for w in strings for x in w}):
            step = s.plus(step, self.moves[x])
        c = closure(self.restricted(self.eps, self.useful(step, self.initial, self.final)), s, cap)
        out = []
        for w in strings:
            v = self.vecmat(self.initial, c)
            for x in w:
                v = self.vecmat(self.vecmat(v, self.moves[x]), c)
            out.append(self.dot(v, self.final))
        return out

    def epsilons_acyclic(self) -> bool:
        """Whether the epsilon arcs form no cycle (their support's n-th boolean power is empty)."""
        support = (self.eps != self.s.zero).astype(np.int64)
        power = np.eye(self.n, dtype=np.int64)
        for _ in range(self.n):
            power = np.minimum(power @ support, 1)
        return not power.any()

    def epsilons_diverge(self) -> bool:
        """Whether the exact epsilon closure diverges on the useful states (as ``remove_epsilon`` sees them)."""
        live = self.useful(self.s.plus(self.eps, self.one_step()), self.initial, self.final)
        try:
            star(self.restricted(self.eps, live), self.s)
        except Diverges:
            return True
        return False


# ----------------------------------------------------------------------------------------------------------------------
# Random automata


def _weights(s: Semiring, rng: random.Random, probabilities: Sequence[float]) -> list[Any]:
    """Semiring weights with the given real images (for real: themselves; log: logs; tropical: -logs)."""
    if s.name in ("real", "max-times"):
        return list(probabilities)
    if s.name in ("log", "max-plus"):
        return [math.log(p) for p in probabilities]
    if s.name == "min-plus":
        return [-math.log(p) for p in probabilities]
    return [True for _ in probabilities]


@dataclass
class Case:
    """One random automaton, its strategy profile and the inputs to try."""

    wfsa: WFSA
    profile: dict[tuple[Any, str], int]
    strings: list[list[str]]
    caps: list[int | None]
    describe: str


def random_case(rng: random.Random) -> Case:
    s = get_semiring(rng.choice(SEMIRINGS))
    shape = rng.random()
    if shape < 0.45:
        n = rng.randint(2, 10)
    elif shape < 0.8:
        n = rng.randint(20, 70)
    elif shape < 0.95:
        n = rng.randint(60, 110)
    else:
        n = rng.randint(258, 300)
    with_predicates = rng.random() < 0.15
    a = WFSA(s, alphabet=SymbolTable(SYMBOLS))
    for _ in range(n):
        a.add_state()
    epsilon_share = rng.choice([0.0, 0.2, 0.5])
    arcs: list[tuple[int, int, Any]] = []
    if n > 256:  # one cyclic component larger than a dense block: a ring with chords
        arcs += [(q, (q + 1) % n, rng.choice([EPSILON, "a", "b"])) for q in range(n)]
    for _ in range(rng.randint(n, 3 * n)):
        label: Any = EPSILON if rng.random() < epsilon_share else rng.choice(SYMBOLS)
        if with_predicates and label is not EPSILON and rng.random() < 0.3:
            label = ANY
        arcs.append((rng.randrange(n), rng.randrange(n), label))
    # substochastic: each state's outgoing mass (a predicate arc counted per symbol) at most 0.9
    mass = [0.0] * n
    raw = []
    for src, _, label in arcs:
        p = rng.uniform(0.05, 1.0)
        raw.append(p)
        mass[src] += p * (len(SYMBOLS) if label is ANY else 1)
    probabilities = [p * min(1.0, 0.9 / mass[src]) for p, (src, _, _) in zip(raw, arcs)]
    for (src, dst, label), w in zip(arcs, _weights(s, rng, probabilities)):
        a.add_arc(src, dst, label, w)
    starts = rng.sample(range(n), k=min(n, rng.choice([1, 1, 2])))
    for q, w in zip(starts, _weights(s, rng, [rng.uniform(0.2, 1.0) for _ in starts])):
        a.set_initial(q, w)
    finals = rng.sample(range(n), k=max(1, n // rng.choice([2, 4, 8])))
    for q, w in zip(finals, _weights(s, rng, [rng.uniform(0.2, 1.0) for _ in finals])):
        a.set_final(q, w)
    notes = [f"{s.name}, {n} states, {len(arcs)} arcs, epsilon share {epsilon_share}"]
    if rng.random() < 0.25:
        notes.append(_add_limit_weights(a, s, rng))
    if rng.random() < 0.25:
        notes.append(_add_divergent_cycle(a, s, rng))
    profile = {key: low for key, low in THRESHOLDS.items() if rng.random() < 0.4}
    strings = [[rng.choice(SYMBOLS) for _ in range(rng.randint(0, 5))] for _ in range(4)]
    caps: list[int | None] = [None, rng.choice([0, 1, 2, 3])]
    if profile:
        notes.append("lowered " + ", ".join(name for _, name in profile))
    return Case(a, profile, strings, caps, "; ".join(notes))


def _add_limit_weights(a: WFSA, s: Semiring, rng: random.Random) -> str:
    """A state of its own with a self-loop at the semiring's limit, between a random state and a fresh final one,
    or (log) cycles of weights +750 / -751 and -753.5 (overflow unless solved in scaled space)."""
    q = rng.randrange(a.num_states)
    if s.name == "log" and rng.random() < 0.3:
        r = a.add_state()
        a.add_arc(q, r, rng.choice([EPSILON, "a"]), -751.0)
        a.add_arc(r, r, EPSILON, -3.0)
        a.add_arc(r, q, rng.choice([EPSILON, "b"]), 750.0)
        a.add_arc(q, r, "c", -753.5)
        a.set_final(r, -750.0)
        return "log weights of magnitude 750"
    loop = {"real": 1.0 - 1e-9, "log": rng.choice([-1e-16, -1e-17, -1e-12]), "max-plus": 0.0, "min-plus": 0.0,
            "max-times": 1.0, "boolean": True}[s.name]
    r, f = a.add_state(), a.add_state()
    into = _weights(s, rng, [0.5])[0]
    a.add_arc(q, r, rng.choice([EPSILON, "a", "b"]), into)
    a.add_arc(r, r, rng.choice([EPSILON, EPSILON, "a"]), loop)
    a.add_arc(r, f, EPSILON, into)
    a.set_final(f, s.one)
    return f"self-loop {loop!r} at {r}"


def _add_divergent_cycle(a: WFSA, s: Semiring, rng: random.Random) -> str:
    """An epsilon cycle whose star diverges, on a random state (on or off a successful path)."""
    if s.name == "boolean":
        return "no divergent cycle in boolean"
    weight = {"real": 1.5, "log": 0.4, "max-plus": 0.5, "min-plus": -0.5, "max-times": 1.5}[s.name]
    q = rng.randrange(a.num_states)
    if rng.random() < 0.5:
        a.add_arc(q, q, EPSILON, weight)
        return f"divergent self-loop at {q}"
    r = a.add_state()
    a.add_arc(q, r, EPSILON, weight)
    a.add_arc(r, q, EPSILON, weight)
    return f"divergent 2-cycle through {q}"


@contextlib.contextmanager
def profile_set(profile: dict[tuple[Any, str], int]) -> Iterator[None]:
    saved = {key: getattr(*key) for key in profile}
    try:
        for (module, name), value in profile.items():
            setattr(module, name, value)
        yield
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)


# ----------------------------------------------------------------------------------------------------------------------
# Comparisons


def _close(ours: Any, theirs: Any, s: Semiring) -> bool:
    x, y = float(ours), float(theirs)
    if x == y:
        return True
    if not (math.isfinite(x) and math.isfinite(y)):
        return False
    if s.name == "log":  # log values: the relative error of the probability is the absolute one of its log
        return abs(x - y) <= 1e-7 * max(1.0, abs(y) * 1e-2)
    tolerance = 1e-9 if s.idempotent else 1e-7
    return abs(x - y) <= tolerance * max(1.0, abs(x), abs(y))


def compare(label: str, run: Callable[[], Any], expect: Callable[[], Any], s: Semiring,
             same: Callable[[Any, Any], bool] | None = None) -> str | None:
    """None when the engine's result and the oracle's agree; else a description."""
    try:
        theirs: Any = expect()
    except Diverges:
        theirs = Diverges
    try:
        ours: Any = run()
    except DivergenceError as exc:
        ours = Diverges
        message = str(exc)
    except Exception as exc:  # noqa: BLE001 (any other failure of the engine is a disagreement)
        return f"{label}: engine raised {type(exc).__name__}: {exc}"
    if ours is Diverges or theirs is Diverges:
        if ours is theirs:
            return None
        got = f"DivergenceError ({message})" if ours is Diverges else repr(ours)
        return f"{label}: engine {got}, oracle {'diverges' if theirs is Diverges else repr(theirs)}"
    agree = same(ours, theirs) if same is not None else _close(ours, theirs, s)
    return None if agree else f"{label}: engine {ours!r}, oracle {theirs!r}"


def _vectors_close(s: Semiring) -> Callable[[Any, Any], bool]:
    return lambda ours, theirs: len(ours) == len(theirs) and all(_close(x, y, s) for x, y in zip(ours, theirs))


def comparisons(case: Case) -> Iterator[tuple[str, Callable[[], Any], Callable[[], Any], Callable[[Any, Any], bool]
                                                 | None]]:
    """(label, engine call, oracle call, equality or None) for every comparison of one case."""
    a, s = case.wfsa, case.wfsa.semiring
    dense = Dense.of(a)
    viterbi = Dense.of(a, s.viterbi)
    for cap in case.caps:
        for word in case.strings:
            yield (f"score({word}, cap={cap})", lambda w=word, c=cap: a.score(w, epsilon_cap=c),
                   lambda w=word, c=cap: dense.score(w, c), None)
            yield (f"viterbi({word}, cap={cap})", lambda w=word, c=cap: viterbi_path(a, w, epsilon_cap=c).weight,
                   lambda w=word, c=cap: viterbi.score(w, c), None)
            if cap is not None and a.num_states <= 12 and oracle.path_count(a, word, cap) <= 300:
                yield (f"score({word}, cap={cap}) by enumeration", lambda w=word, c=cap: a.score(w, epsilon_cap=c),
                       lambda w=word, c=cap: oracle.brute_force_score(a, w, c), None)
        yield f"pathsum(cap={cap})", lambda c=cap: a.pathsum(epsilon_cap=c), lambda c=cap: dense.pathsum(c), None
    for towards in ("initial", "final"):
        yield (f"state_distances({towards})", lambda t=towards: state_distances(a, t),
               lambda t=towards: dense.distances(t).tolist(), _vectors_close(s))
    yield from _forward_comparisons(case, dense)
    eps = [arc for arc in a.arcs if not arc.label.consumes]
    src = np.array([arc.src for arc in eps], dtype=np.int64)
    dst = np.array([arc.dst for arc in eps], dtype=np.int64)
    weight = np.array([arc.weight for arc in eps], dtype=s.numpy_dtype).reshape(len(eps))
    for cap in case.caps:
        yield (f"epsilon_closure(cap={cap})",
               lambda c=cap: _rows(engine_sparse.epsilon_closure(s, a.num_states, src, dst, weight, a.states, c),
                                   s, a.num_states),
               lambda c=cap: closure(dense.eps, s, c).ravel().tolist(), _vectors_close(s))
        yield (f"epsilon_closure_rows(cap={cap})", lambda c=cap: _rows(engine_closure.epsilon_closure_rows(a, c), s,
                                                                        a.num_states),
               lambda c=cap: closure(dense.eps, s, c).ravel().tolist(), _vectors_close(s))
        yield (f"closure_matrix(cap={cap})", lambda c=cap: closure_matrix(dense.eps, s, c).ravel().tolist(),
               lambda c=cap: closure(dense.eps, s, c).ravel().tolist(), _vectors_close(s))
        for word in case.strings[:2]:
            yield (f"remove_epsilon(cap={cap}).score({word})",
                   lambda w=word, c=cap: Dense.of(remove_epsilon(a, c)).score(w, 0),
                   lambda w=word, c=cap: _diverging_if(c is None and dense.epsilons_diverge(), dense.score(w, c)),
                   None)


#: The largest automaton whose Forward score is also computed symbolically (sympy is slow).
SYMBOLIC_STATES = 10
#: The largest automaton run through the padded torch batch (dense Q x Q steps: no strategy threshold to cross;
#: its cubic closures in Python loops take seconds at 300 states).
BATCHED_STATES = 70


def _forward_comparisons(case: Case, dense: Dense) -> Iterator[tuple[str, Callable[[], Any], Callable[[], Any],
                                                                     Callable[[Any, Any], bool] | None]]:
    """The element types of the one Forward recursion (``kleene.automata.recursion``) against the oracle: the
    padded torch batch (``DenseWFSA.score_strings``: ``batched_forward``) on all the case's strings at once, and the
    sympy score (``score_symbolic`` evaluated) on small automata where its closure is a finite sum (a cap, or no
    epsilon cycle: a symbolic star evaluated in sympy's floats loses what the engine's log1p keeps); both also by
    brute-force path enumeration where it is small."""
    a, s = case.wfsa, case.wfsa.semiring
    if a.num_states > BATCHED_STATES:
        return
    table = DenseWFSA.from_wfsa(a, a.alphabet if a.alphabet is not None else SymbolTable(SYMBOLS))
    for cap in case.caps:
        yield (f"batched_forward({case.strings}, cap={cap})",
               lambda c=cap: table.score_strings(case.strings, epsilon_cap=c).tolist(),
               lambda c=cap: dense.batch_scores(case.strings, c), _vectors_close(s))
        small = cap is not None and a.num_states <= 12
        if not small and a.num_states > SYMBOLIC_STATES:
            continue
        for word in case.strings[:2]:
            if small and oracle.path_count(a, word, cap) <= 300:
                yield (f"batched_forward([{word}], cap={cap}) by enumeration",
                       lambda w=word, c=cap: table.score_strings([w], epsilon_cap=c).tolist()[0],
                       lambda w=word, c=cap: oracle.brute_force_score(a, w, c), None)
            if a.num_states <= SYMBOLIC_STATES and (cap is not None or dense.epsilons_acyclic()):
                yield (f"score_symbolic({word}, cap={cap})",
                       lambda w=word, c=cap: _number(algorithms.score_symbolic(a, w, c)),
                       lambda w=word, c=cap: dense.score(w, c), None)


def _number(expr: Any) -> float:
    """A constant sympy expression as a float (a sympy boolean as 0 or 1)."""
    return float(expr) if isinstance(expr, sympy.Expr) else float(bool(expr))


def _diverging_if(condition: bool, value: Any) -> Any:
    if condition:
        raise Diverges
    return value


def _rows(rows: Any, s: Semiring, n: int) -> list[Any]:
    out = s.zeros((n, n))
    for q in range(n):
        cols, vals = rows.row(q)
        out[q, cols] = vals
    return list(out.ravel().tolist())


@dataclass
class Outcome:
    comparisons: int = 0
    disagreements: list[str] = field(default_factory=list)


def run(count: int, seed: int = 0, stop_after: int = 10) -> Outcome:
    """At least ``count`` comparisons on random cases from ``seed``; stops early after ``stop_after``
    disagreements."""
    rng = random.Random(seed)
    outcome = Outcome()
    case_number = 0
    while outcome.comparisons < count and len(outcome.disagreements) < stop_after:
        case = random_case(rng)
        with profile_set(case.profile):
            for label, ours, theirs, same in comparisons(case):
                outcome.comparisons += 1
                problem = compare(label, ours, theirs, case.wfsa.semiring, same)
                if problem is not None:
                    outcome.disagreements.append(f"case {case_number} (seed {seed}; {case.describe}): {problem}")
        case_number += 1
    return outcome
