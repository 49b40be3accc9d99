"""The n best strings or paths of an automaton, and strings sampled in proportion to their weight.

- ``shortest_paths(a, n)``: the n best strings (``unique=True``: the automaton is determinized in its Viterbi
  semiring, so that every string is one path) or the n best paths, by Mohri and Riley's n-best search: a
  best-first search whose priority is the weight so far times the exact best completion (the shortest distance
  to the final states), in which every state is expanded at most n times.
- ``shortest_path_automaton(a, n)``: the same as an automaton, one chain of states per string (as OpenFst).
- ``random_paths(a, n, seed)``: strings drawn with probability ``a(x) / pathsum(a)`` (real and log), walking
  arcs with probabilities normalised by the backward distances.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Sequence
from itertools import count
from typing import Any, Protocol, cast

import numpy as np

from kleene.errors import AlphabetError, ArgumentError, SemiringError, WeightError

from .determinize import (
    DEFAULT_DELTA,
    DEFAULT_MAX_STATES,
    Subset,
    SubsetConstruction,
    budget_exceeded,
    check_determinizable,
    is_deterministic,
    numeric_epsilon_free,
)
from .labels import EPSILON, Label, Sym
from .ops import bind, trim
from .push import state_distances
from .semiring import Semiring
from .sparse import ArcStore, array_store, store_backed
from .weights import Env
from .wfsa import WFSA

Path = tuple[tuple[Hashable, ...], Any]


def _count_argument(n: int, operation: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ArgumentError(f"{operation}: n must be a non-negative integer, got {n!r}")
    return int(n)


def _numeric(a: WFSA, env: Env | None, operation: str) -> WFSA:
    if not a.is_symbolic:
        return a
    if env is None:
        raise WeightError(f"{operation}: the automaton has symbolic weights; pass env= (or bind(a, env) first)")
    return bind(a, env)


def _in_semiring(a: WFSA, semiring: Semiring, operation: str) -> WFSA:
    """``a``'s numbers read in another semiring with the same domain (the Viterbi one).

    Raises:
        WeightError: a weight outside that semiring (a negative real weight for max-times).
    """
    if semiring is a.semiring:
        return a
    store = array_store(a)
    if store is not None:
        return _store_in_semiring(a, store, semiring, operation)
    out = WFSA(semiring, a.alphabet, a.name)
    for name in a.states:
        out.add_state(name)
    try:
        for arc in a.arcs:
            out.add_arc(arc.src, arc.dst, arc.label, arc.weight)
        for q, w in a.initial.items():
            out.set_initial(q, w)
        for q, w in a.final.items():
            out.set_final(q, w)
    except WeightError as exc:
        raise WeightError(f"{operation} ranks paths in the {semiring.name} semiring: {exc}") from None
    return out


def _store_in_semiring(a: WFSA, store: ArcStore, semiring: Semiring, operation: str) -> WFSA:
    """``_in_semiring`` in arrays: the same numbers, checked once per distinct extreme or non-finite value."""
    values = np.concatenate([store.weight, store.initial, store.final])
    try:
        for value in {*np.unique(values[~np.isfinite(values)]).tolist(), values.min(initial=0.0),
                      values.max(initial=0.0)}:
            if value != a.semiring.zero:
                semiring.check(value)
    except WeightError as exc:
        raise WeightError(f"{operation} ranks paths in the {semiring.name} semiring: {exc}") from None
    zero = a.semiring.zero
    initial = {q: semiring.zero if w == zero else w for q, w in a.initial.items()}
    final = {q: semiring.zero if w == zero else w for q, w in a.final.items()}
    moved = ArcStore(
        semiring, store.num_states, store.indptr, store.src, store.dst, store.label, store.weight, store.arc_id,
        store.symbols, store.symbol_ids, [], store.predicate_of, np.where(store.initial == zero, semiring.zero,
                                                                         store.initial),
        np.where(store.final == zero, semiring.zero, store.final), store.names,
    )
    return store_backed(semiring, a.alphabet, a.name, a._names, moved, initial, final)


def _ranking(semiring: Semiring) -> Callable[[Any], float]:
    """A sort key putting better single-path weights (the Viterbi ⊕ picks them) first."""
    lower_is_better = bool(semiring.plus(0.0, 1.0) == 0.0)
    return (lambda w: float(w)) if lower_is_better else (lambda w: -float(w))


def _symbols_of(label: Label, alphabet: Any, where: str) -> list[Hashable | None]:
    if not label.consumes:
        return [None]
    try:
        return list(label.symbols(alphabet))
    except AlphabetError as exc:
        raise AlphabetError(f"{where}: {exc}") from None


class _Graph(Protocol):
    """What the n-best search walks: start nodes, final weights, arcs (each reading one symbol, or None for an
    epsilon move) and the best completion weight of every node."""

    def starts(self) -> list[tuple[Hashable, Any]]: ...

    def final(self, node: Hashable) -> Any: ...

    def arcs(self, node: Hashable) -> list[tuple[list[Hashable | None], Any, Hashable]]: ...

    def distance(self, node: Hashable) -> Any: ...


class _Paths:
    """The automaton itself: nodes are states, every path is a path."""

    def __init__(self, a: WFSA):
        self.a = a
        self.d = state_distances(a, "final")
        store = array_store(a)
        self.store = store
        self.out: dict[int, list[tuple[list[Hashable | None], Any, Hashable]]] = {}
        if self.store is None:
            for q in range(a.num_states):
                self.out[q] = []
            for i, arc in enumerate(a.arcs):
                self.out[arc.src].append((_symbols_of(arc.label, a.alphabet, f"arc {i}"), arc.weight, arc.dst))

    def starts(self) -> list[tuple[Hashable, Any]]:
        return list(self.a.initial.items())

    def final(self, node: Hashable) -> Any:
        return self.a.final.get(cast(int, node), self.a.semiring.zero)

    def arcs(self, node: Hashable) -> list[tuple[list[Hashable | None], Any, Hashable]]:
        q = cast(int, node)
        if q not in self.out and self.store is not None:  # the state's arcs from the CSR store, in arc order
            st = self.store
            span = np.arange(st.indptr[q], st.indptr[q + 1])
            span = span[np.argsort(st.arc_id[span], kind="stable")]
            self.out[q] = [([None] if k < 0 else [st.symbols[k]], w, d) for k, w, d in
                           zip(st.label[span].tolist(), st.weight[span].tolist(), st.dst[span].tolist())]
        return self.out[q]

    def distance(self, node: Hashable) -> Any:
        return self.d[cast(int, node)]


class _Strings:
    """The determinized automaton, built lazily as the search reaches its subsets: every string is one path.

    The best completion of a subset ``{(q, v_q)}`` is ``⊕ v_q ⊗ d(q)`` with ``d`` the distances of the input.
    """

    def __init__(self, a: WFSA, delta: float, max_states: int):
        self.a, self.s, self.max_states = a, a.semiring, max_states
        self.construction = SubsetConstruction(a, delta)
        self.d = state_distances(a, "final")
        self.subsets: dict[Hashable, Subset] = {}

    def _node(self, subset: Subset) -> Hashable:
        key = self.construction.key(subset)
        if key not in self.subsets:
            if len(self.subsets) >= self.max_states:
                raise budget_exceeded("shortest_paths", self.max_states)
            self.subsets[key] = subset
        return key

    def starts(self) -> list[tuple[Hashable, Any]]:
        begin = self.construction.start()
        return [] if begin is None else [(self._node(begin[1]), begin[0])]

    def final(self, node: Hashable) -> Any:
        return self.construction.final(self.subsets[node])

    def arcs(self, node: Hashable) -> list[tuple[list[Hashable | None], Any, Hashable]]:
        return [
            (_symbols_of(label, self.a.alphabet, "a minterm"), weight, self._node(after))
            for label, weight, after in self.construction.successors(self.subsets[node])
        ]

    def distance(self, node: Hashable) -> Any:
        s = self.s
        total = s.zero
        for q, v in self.subsets[node]:
            total = s.plus(total, s.times(v, self.d[q]))
        return total


def shortest_paths(
    a: WFSA,
    n: int = 1,
    *,
    unique: bool = True,
    max_states: int = DEFAULT_MAX_STATES,
    delta: float = DEFAULT_DELTA,
    env: Env | None = None,
) -> list[Path]:
    """The ``n`` best strings (``unique=True``) or paths of ``a``, best first, each as (symbols, weight).

    Paths are ranked in the semiring's Viterbi order (``Semiring.viterbi``: max-times for real, max-plus for log,
    the semiring itself when idempotent) and weigh the ⊗-product of their weights (initial and final included).
    With ``unique=True`` the weight of a string is that of its best path: the search runs on the determinization
    of ``a`` in the Viterbi semiring, built lazily (only the subsets it reaches), so that automata without a
    finite deterministic equivalent still have their n best strings. With ``unique=False`` a string read by
    several paths appears once per path. An arc with a predicate label counts as one arc per symbol it reads.
    Ties come in no particular order.

    Caution:
        The Viterbi semiring's best paths must exist: real weights must be nonnegative, and no cycle may improve
        a path (a negative cycle in min-plus, a positive one in max-plus, one above 1 in max-times).

    Raises:
        ArgumentError: ``n`` is not a non-negative integer; a bad ``max_states`` or ``delta``.
        WeightError: a negative real weight; symbolic weights without ``env``.
        DivergenceError: a cycle that improves paths without bound.
        BudgetExceededError: the search reached more than ``max_states`` subsets.
        AlphabetError: a predicate label without an alphabet to enumerate.
    """
    n = _count_argument(n, "shortest_paths")
    v = a.semiring.viterbi
    b = _in_semiring(_numeric(a, env, "shortest_paths"), v, "shortest_paths")
    graph: _Graph
    if unique:
        check_determinizable(b, max_states, delta, "shortest_paths")
        if is_deterministic(b):  # every string is one path already: no subsets to build
            graph = _Paths(b)
        else:
            graph = _Strings(numeric_epsilon_free(b, None, "shortest_paths"), delta, max_states)
    else:
        graph = _Paths(trim(b))
    if n == 0:
        return []
    key = _ranking(v)
    # heap entries: (priority, tie, complete?, node, weight so far, symbols as a linked list)
    Trail = tuple[Hashable, Any] | None
    heap: list[tuple[float, int, bool, Hashable, Any, Trail]] = []
    tie = count()

    def offer(node: Hashable, weight: Any, trail: Trail, complete: bool) -> None:
        priority = weight if complete else v.times(weight, graph.distance(node))
        if not v.is_zero(priority):
            heapq.heappush(heap, (key(priority), next(tie), complete, node, weight, trail))

    for node, weight in graph.starts():
        offer(node, weight, None, complete=False)
    pops: dict[Hashable, int] = {}
    found: list[Path] = []
    while heap and len(found) < n:
        _, _, complete, node, weight, trail = heapq.heappop(heap)
        if complete:
            found.append((_unwind(trail), weight))
            continue
        pops[node] = pops.get(node, 0) + 1
        if pops[node] > n:
            continue
        offer(node, v.times(weight, graph.final(node)), trail, complete=True)
        for symbols, arc_weight, after in graph.arcs(node):
            extended = v.times(weight, arc_weight)
            for symbol in symbols:
                offer(after, extended, trail if symbol is None else (symbol, trail), complete=False)
    return found


def _unwind(trail: Any) -> tuple[Hashable, ...]:
    out: list[Hashable] = []
    while trail is not None:
        symbol, trail = trail
        out.append(symbol)
    return tuple(reversed(out))


def shortest_path_automaton(
    a: WFSA, n: int = 1, *, unique: bool = True, max_states: int = DEFAULT_MAX_STATES, env: Env | None = None
) -> WFSA:
    """``shortest_paths`` as an automaton over ``a``'s semiring: one chain of states per string or path from a
    shared initial state, the path's weight on its final state (OpenFst's ``ShortestPath`` result, up to where
    the weights sit).

    Raises:
        See ``shortest_paths``.
    """
    best = shortest_paths(a, n, unique=unique, max_states=max_states, env=env)
    out = WFSA(a.semiring, a.alphabet, a.name)
    start = out.add_state("start")
    out.set_initial(start)
    for k, (symbols, weight) in enumerate(best):
        here = start
        for t, symbol in enumerate(symbols):
            nxt = out.add_state(f"p{k}.{t + 1}")
            out.add_arc(here, nxt, Sym(symbol), out.semiring.one)
            here = nxt
        if here == start:  # the empty string: its own epsilon step keeps the paths apart
            here = out.add_state(f"p{k}.0")
            out.add_arc(start, here, EPSILON, out.semiring.one)
        out.set_final(here, weight)
    return out


# ----------------------------------------------------------------------------------------
# Sampling


def random_paths(a: WFSA, n: int, seed: int | None = None, *, env: Env | None = None) -> list[tuple[Hashable, ...]]:
    """``n`` strings drawn independently, each ``x`` with probability ``a(x) / pathsum(a)``.

    A state ``q`` with backward distance ``β(q)`` (the sum of all its paths to the end) takes the arc
    ``q -x/w-> r`` with probability ``w β(r) / β(q)`` (times the number of symbols a predicate label reads, one
    of which is then drawn uniformly) and stops with probability ``ρ(q) / β(q)``; the first state is drawn with
    probability ``λ(q) β(q) / Σ λ β``.

    Caution:
        Needs a semiring whose ⊕ adds weights (real or log: ``Semiring.to_real``) with nonnegative weights and
        a finite pathsum. Predicate labels need the alphabet.

    Raises:
        ArgumentError: ``n`` or ``seed`` is not a non-negative integer (``seed`` may be None: fresh entropy).
        SemiringError: an idempotent semiring (its ⊕ picks a path instead of adding them).
        WeightError: a negative real weight; symbolic weights without ``env``; a zero pathsum.
        DivergenceError: the pathsum diverges.
    """
    n = _count_argument(n, "random_paths")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ArgumentError(f"random_paths: seed must be None or an integer >= 0, got {seed!r}")
    s = a.semiring
    if not s.has_real_image:
        raise SemiringError(
            f"random_paths: the {s.name} semiring has no homomorphism onto the reals; sampling in proportion to "
            "weight needs real or log"
        )
    a = trim(_numeric(a, env, "random_paths"))
    for where, value in _all_weights(a):
        if s.to_real(value) < 0:
            raise WeightError(f"random_paths: {where} has the negative weight {value!r}; probabilities are >= 0")
    beta = [s.to_real(d) for d in state_distances(a, "final")]
    rng = np.random.default_rng(seed)
    starts = list(a.initial)
    start_p = np.array([s.to_real(a.initial[q]) * beta[q] for q in starts])
    if n == 0:
        return []
    if not starts or start_p.sum() <= 0:
        raise WeightError("random_paths: the automaton's pathsum is zero, so no string can be drawn")
    moves: list[list[int]] = [[] for _ in range(a.num_states)]
    for i, arc in enumerate(a.arcs):
        moves[arc.src].append(i)
    symbols = [_symbols_of(arc.label, a.alphabet, f"random_paths: arc {i}") for i, arc in enumerate(a.arcs)]
    tables: list[tuple[np.ndarray, list[int]]] = []  # per state: cumulative probabilities, arcs (-1: stop)
    for q in range(a.num_states):
        options = [-1] + moves[q]
        weights = [s.to_real(a.final[q]) if q in a.final else 0.0]
        weights += [s.to_real(a.arcs[i].weight) * len(symbols[i]) * beta[a.arcs[i].dst] for i in moves[q]]
        tables.append((np.cumsum(weights), options))
    out: list[tuple[Hashable, ...]] = []
    for _ in range(n):
        state = starts[_draw(rng, np.cumsum(start_p))]
        word: list[Hashable] = []
        while True:
            cumulative, options = tables[state]
            choice = options[_draw(rng, cumulative)]
            if choice < 0:
                break
            readable = symbols[choice]
            symbol = readable[0] if len(readable) == 1 else readable[int(rng.integers(len(readable)))]
            if symbol is not None:
                word.append(symbol)
            state = a.arcs[choice].dst
        out.append(tuple(word))
    return out


def _draw(rng: np.random.Generator, cumulative: np.ndarray) -> int:
    """An index drawn with probability proportional to the increments of ``cumulative``."""
    index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    return min(index, len(cumulative) - 1)


def _all_weights(a: WFSA) -> Sequence[tuple[str, Any]]:
    return (
        [(f"arc {i}", arc.weight) for i, arc in enumerate(a.arcs)]
        + [(f"the initial weight of {a.state_name(q)}", w) for q, w in a.initial.items()]
        + [(f"the final weight of {a.state_name(q)}", w) for q, w in a.final.items()]
    )
