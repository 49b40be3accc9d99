"""The sparse engine: a compact arc store and shortest-distance algorithms in time proportional to the arcs touched.

``ArcStore`` holds a constant-weight ``WFSA`` as source-sorted arrays (CSR): destinations, label ids and weights.
Symbols are ids; predicate labels (``ANY``, ``OneOf``, ``NoneOf``) stay symbolic: a symbol matches an arc by its
label id or by one of the distinct predicates. The store is built lazily (``arc_store``) and cached on the
automaton until a mutating method (``add_state``, ``add_arc``, ``set_initial``, ``set_final``) runs.

``shortest_distance`` is the generic single-source algorithm: the states reachable from the source vector are
split into strongly connected components, visited in topological order of the condensation (level by level, so
acyclic parts are one vectorised propagation per level). A cyclic component is solved by the semiring's means:

- a linear solve (a sparse LU factorisation, ``scipy.sparse.linalg.splu``, kept for later solves) for
  ``is_field`` semirings and for ``log_domain`` ones in scaled space (max-plus potentials make every arc
  weight <= 0 and the source is shifted by its maximum, so weights like 750 or -800 neither overflow nor
  underflow);
- Lehmann's dense star for small blocks and Bellman-Ford relaxation (FIFO rounds, vectorised) for large ones
  in the idempotent semirings, raising ``DivergenceError`` when a cycle keeps improving;
(Every non-idempotent semiring of kleene is real or log, so no convergence-threshold iteration is needed.)

The Forward algorithm on the store (``kleene.automata.algorithms.SparseStepper``) closes each frontier with the
same procedure on the epsilon graph (``_Graph.close``), restricted to the states the frontier touches.
``epsilon_closure`` is the one closure matrix of the sparse strategy: every row of ``E*`` (the components in
reverse topological order, a level at a time, each row the sum of its successors' rows, cyclic components' rows
multiplied by their block's star, ``closure_matrix`` of ``kleene.automata.star`` for small blocks) or, with a cap,
of ``I + E + ... + E^k``; ``remove_epsilon_store`` then builds the epsilon-free arcs as arrays.

Large automata (held in a store, or with ``ARRAY_OPS_MIN_ARCS`` arcs or more) are trimmed, pushed, determinized and
minimized on the store's arrays (``trim_store``, ``with_weights``, ``store_backed``; see ``kleene.automata.ops``,
``push``, ``determinize``, ``minimize``), and their results keep their arcs in a store until ``WFSA.arcs`` is read.

Everything here works on the *useful* part of the automaton (accessible and co-accessible states), so a divergent
cycle on no successful path does not raise (as OpenFst).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import AlphabetError, ArgumentError, BudgetExceededError, DivergenceError, SemiringError, WeightError
from .labels import EPSILON, Label, Sym
from .semiring import Semiring
from .weights import is_symbolic
from .wfsa import WFSA, Arc

if TYPE_CHECKING:  # pragma: no cover  (scipy is imported where it is used: kleene.automata loads without it)
    import scipy.sparse

#: Label id of epsilon arcs and of predicate arcs (symbols have ids >= 0).
EPSILON_ID = -1
PREDICATE_ID = -2
#: A label id no arc has: what a symbol the store does not name looks up as.
NO_LABEL = PREDICATE_ID - 1
#: Components up to this size are solved densely (their star is cached); larger ones by sparse solves/relaxation.
DENSE_BLOCK = 256
#: Linear components larger than this are solved iteratively (GMRES) instead of by a sparse LU.
ITERATIVE_FROM = 2000
IntArray = np.ndarray
#: One entry of ``ArcStore.label_table``: (destination, weight, arc id, stored position).
LabelArc = tuple[int, Any, int, int]


def gather_ranges(indptr: IntArray, rows: IntArray) -> IntArray:
    """The concatenated ranges ``[indptr[r], indptr[r+1])`` for ``r`` in ``rows`` (positions, in row order)."""
    starts = indptr[rows]
    return _spans(starts, indptr[rows + 1] - starts)


def _spans(starts: IntArray, lengths: IntArray) -> IntArray:
    """The concatenated ranges ``[starts[i], starts[i] + lengths[i])``, in order."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    return offsets + np.arange(total, dtype=np.int64)


def csr_index(rows: IntArray, n: int) -> tuple[IntArray, IntArray]:
    """A stable order sorting ``rows`` and the CSR pointer of the sorted rows (length n+1)."""
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return order, indptr


@dataclass(eq=False)
class ArcStore:
    """The arcs of a constant-weight automaton as CSR arrays (see the module docstring).

    Arcs of weight zero are left out (they carry no path). ``arc_id[i]`` is the index in ``wfsa.arcs`` of stored
    arc ``i``; arcs are sorted by source, stably, so arcs of one state keep their order.
    """

    semiring: Semiring
    num_states: int
    indptr: IntArray
    src: IntArray
    dst: IntArray
    label: IntArray
    weight: np.ndarray
    arc_id: IntArray
    symbols: list[Hashable]
    symbol_ids: dict[Hashable, int]
    predicates: list[Label]
    predicate_of: IntArray  # per stored arc: index into ``predicates`` (-1 for other arcs)
    initial: np.ndarray
    final: np.ndarray
    names: Sequence[str]
    _by_label: tuple[IntArray, IntArray] | None = field(default=None, repr=False)
    _matches: dict[Hashable, IntArray] = field(default_factory=dict, repr=False)
    _graphs: dict[str, _Graph] = field(default_factory=dict, repr=False)
    _useful: np.ndarray | None = field(default=None, repr=False)
    _memo: dict[str, Any] = field(default_factory=dict, repr=False)

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """``build()``, computed once per store and ``key`` (what an algorithm derives from the store alone)."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    @property
    def num_arcs(self) -> int:
        return len(self.dst)

    def _label_index(self) -> tuple[IntArray, IntArray]:
        if self._by_label is None:
            shifted = self.label - PREDICATE_ID  # predicates 0, epsilons 1, symbol k at k + 2
            self._by_label = csr_index(shifted, len(self.symbols) + 2)
        return self._by_label

    def arcs_with_label(self, label_id: int) -> IntArray:
        """Positions of the stored arcs whose label id is ``label_id`` (a symbol id or ``EPSILON_ID``)."""
        order, indptr = self._label_index()
        k = label_id - PREDICATE_ID
        return order[indptr[k] : indptr[k + 1]]

    def matching(self, symbol: Hashable) -> IntArray:
        """Positions of the stored arcs that consume ``symbol``: by label id or by a predicate (cached per symbol)."""
        try:
            return self._matches[symbol]
        except KeyError:
            pass
        except TypeError:  # unhashable symbol: no arc can name it, only predicates may match
            return self._predicate_arcs(symbol)
        ident = self.symbol_ids.get(symbol)
        direct = self.arcs_with_label(ident) if ident is not None else np.zeros(0, dtype=np.int64)
        if self.predicates:
            direct = np.sort(np.concatenate([direct, self._predicate_arcs(symbol)]))
        if len(self._matches) < 100_000:
            self._matches[symbol] = direct
        return direct

    def matches_mask(self, symbol: Hashable, arcs: IntArray) -> np.ndarray:
        """Which of the stored arcs ``arcs`` consume ``symbol``."""
        try:
            ident = self.symbol_ids.get(symbol)
        except TypeError:  # unhashable
            ident = None
        labels = self.label[arcs]
        hit: np.ndarray = labels == (ident if ident is not None else NO_LABEL)
        if self.predicates:
            accepts = np.array([p.matches(symbol) for p in self.predicates], dtype=bool)
            hit |= (labels == PREDICATE_ID) & accepts[np.maximum(self.predicate_of[arcs], 0)]
        return hit

    def _predicate_arcs(self, symbol: Hashable) -> IntArray:
        if not self.predicates:
            return np.zeros(0, dtype=np.int64)
        hits = np.array([p.matches(symbol) for p in self.predicates], dtype=bool)
        candidates = self.arcs_with_label(PREDICATE_ID)
        out: IntArray = candidates[hits[self.predicate_of[candidates]]]
        return out

    def arc_list(self) -> list[Arc]:
        """The stored arcs as ``Arc`` objects, in ``arc_id`` order (an automaton whose arcs live in this store
        only reads them so)."""
        order = np.argsort(self.arc_id)
        labels: list[Label] = [EPSILON, *(Sym(x) for x in self.symbols), *self.predicates]
        codes = self.label[order] + 1
        if self.predicates:  # predicate arcs: after the symbols, by their index in ``self.predicates``
            hit = codes == PREDICATE_ID + 1
            codes[hit] = len(self.symbols) + 1 + self.predicate_of[order][hit]
        src, dst, lab, weight = (self.src[order].tolist(), self.dst[order].tolist(), codes.tolist(),
                                 self.weight[order].tolist())
        return [Arc(s, d, labels[k], w) for s, d, k, w in zip(src, dst, lab, weight)]

    def has_epsilon_arcs(self) -> bool:
        return bool(np.any(self.label == EPSILON_ID))

    def useful(self) -> np.ndarray:
        """Which states are accessible from an initial state and co-accessible to a final one (a boolean mask,
        computed once per store; do not modify it)."""
        if self._useful is None:
            self._useful = useful_states(self.src, self.dst, self.num_states, self.initial != self.semiring.zero,
                                         self.final != self.semiring.zero)
        return self._useful

    def useful_epsilons(self) -> bool:
        """Whether an epsilon arc joins two useful states (computed once per store)."""

        def find() -> bool:
            eps = self.arcs_with_label(EPSILON_ID)
            useful = self.useful()
            return bool(np.any(useful[self.src[eps]] & useful[self.dst[eps]]))

        found: bool = self.memo("useful epsilons", find)
        return found

    def useful_for(self, symbols: Sequence[Hashable]) -> np.ndarray:
        """The states on some successful path deriving ``symbols`` (see ``useful_for_string``)."""
        arcs = np.arange(self.num_arcs)
        return useful_for_string(
            self.src, self.dst, self.label != EPSILON_ID, lambda x: self.matches_mask(x, arcs), self.num_states,
            self.initial != self.semiring.zero, self.final != self.semiring.zero, symbols,
        )

    def epsilon_graph(self, live: np.ndarray) -> _Graph:
        """The graph of the epsilon arcs between the states of the boolean mask ``live`` (not cached)."""
        eps = self.arcs_with_label(EPSILON_ID)
        return _Graph(self, np.sort(eps[live[self.src[eps]] & live[self.dst[eps]]]))

    def initial_items(self) -> tuple[tuple[int, Any], ...]:
        """(state, weight) of the initial states, as Python numbers (computed once per store)."""

        def find() -> tuple[tuple[int, Any], ...]:
            states = np.flatnonzero(self.initial != self.semiring.zero)
            return tuple(zip(states.tolist(), self.initial[states].tolist()))

        items: tuple[tuple[int, Any], ...] = self.memo("initial items", find)
        return items

    def label_tables(self) -> dict[int, dict[int, list[LabelArc]]]:
        """The per-state tables of ``label_table`` under the usual mask (``useful()``) built so far: a cache on the
        store (``memo``), shared by the small-frontier searches of ``score`` and ``viterbi``."""
        tables: dict[int, dict[int, list[LabelArc]]] = self.memo("label tables", dict)
        return tables

    def label_table(self, q: int, useful: np.ndarray) -> dict[int, list[LabelArc]]:
        """State q's arcs into useful states by label id, in arc order: [(destination, weight, arc id, stored
        position)]."""
        lo, hi = int(self.indptr[q]), int(self.indptr[q + 1])
        table: dict[int, list[LabelArc]] = {}
        rows = zip(self.label[lo:hi].tolist(), self.dst[lo:hi].tolist(), self.weight[lo:hi].tolist(),
                   self.arc_id[lo:hi].tolist(), range(lo, hi))
        for label, d, w, arc_id, position in rows:
            if useful[d]:
                table.setdefault(label, []).append((d, w, arc_id, position))
        return table

    def graph(self, which: str) -> _Graph:
        """The graph of the useful states' arcs: ``"all"`` arcs or ``"epsilon"`` arcs (cached)."""
        if which not in self._graphs:
            keep = self.useful()
            mask = keep[self.src] & keep[self.dst]
            if which == "epsilon":
                mask &= self.label == EPSILON_ID
            positions = np.flatnonzero(mask)
            self._graphs[which] = _Graph(self, positions)
        return self._graphs[which]

    def total_weights(self, alphabet: Sequence[Hashable] | None) -> np.ndarray:
        """Per stored arc, the semiring sum of its weight over the symbols it consumes (epsilon arcs: the weight).

        Raises:
            AlphabetError: a predicate arc and no alphabet to count its symbols.
        """
        weights = self.weight.copy()
        if self.predicates:
            if alphabet is None:
                first = int(np.flatnonzero(self.label == PREDICATE_ID)[0])
                raise AlphabetError(
                    f"arc {int(self.arc_id[first])} has predicate label {self.predicates[self.predicate_of[first]]}; "
                    "pathsum needs the automaton's alphabet"
                )
            for k, predicate in enumerate(self.predicates):
                hit = self.predicate_of == k
                count = sum(1 for x in alphabet if predicate.matches(x))
                weights[hit] = self.semiring.repeated_sum(weights[hit], count)
        return weights


def useful_states(src: IntArray, dst: IntArray, n: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The (n,) mask of the states on some path from a ``starts`` state to an ``ends`` state along the arcs
    ``src -> dst`` (accessible and co-accessible: the states a sum over successful paths reads, and the only ones
    whose cycles can make it diverge). The one usefulness computation of kleene.automata."""
    out: np.ndarray = _reach(src, dst, n, starts)
    out &= _reach(dst, src, n, ends)
    return out


def useful_for_string(
    src: IntArray, dst: IntArray, consumes: np.ndarray, matching: Callable[[Hashable], np.ndarray], n: int,
    starts: np.ndarray, ends: np.ndarray, symbols: Sequence[Hashable],
) -> np.ndarray:
    """The (n,) mask of the states on some successful path deriving ``symbols``, along the arcs ``src -> dst``
    (``consumes``: which arcs consume a symbol, the others are epsilon arcs; ``matching(x)``: which arcs accept x).
    Only these states' epsilon cycles can make the score of ``symbols`` diverge."""
    eps = ~consumes
    eps_src, eps_dst = src[eps], dst[eps]
    steps = [consumes & matching(x) for x in symbols]
    forward = [_reach(eps_src, eps_dst, n, starts)]
    for hit in steps:
        reached = np.zeros(n, dtype=bool)
        reached[dst[hit & forward[-1][src]]] = True
        forward.append(_reach(eps_src, eps_dst, n, reached))
    backward = _reach(eps_dst, eps_src, n, ends)
    useful: np.ndarray = forward[-1] & backward
    for t in range(len(symbols) - 1, -1, -1):
        hit = steps[t]
        before = np.zeros(n, dtype=bool)
        before[src[hit & backward[dst]]] = True
        backward = _reach(eps_dst, eps_src, n, before)
        useful |= forward[t] & backward
    return useful


def _reach(src: IntArray, dst: IntArray, n: int, start: np.ndarray) -> np.ndarray:
    """Which of n states are reachable from the ``start`` mask along arcs ``src -> dst`` (zero or more steps)."""
    if not start.any():
        return start.copy()
    super_src = np.full(int(start.sum()), n)
    rows = np.concatenate([src, super_src])
    cols = np.concatenate([dst, np.flatnonzero(start)])
    from scipy.sparse import csr_matrix  # scipy loads when a sparse algorithm runs, not with kleene.automata
    from scipy.sparse.csgraph import breadth_first_order

    graph = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n + 1, n + 1))
    order = breadth_first_order(graph, n, directed=True, return_predecessors=False)
    seen = np.zeros(n + 1, dtype=bool)
    seen[order] = True
    return seen[:n]


def arc_store(wfsa: WFSA) -> ArcStore | None:
    """The cached ``ArcStore`` of ``wfsa``, built now if needed; None when a weight is symbolic."""
    cached = wfsa._sparse_cache
    if cached is not None and cached[0] == wfsa._arcs_key() and cached[1] == _weights_key(wfsa):
        store: ArcStore | None = cached[3]
        return store
    store = _build(wfsa)
    cache_store(wfsa, store)
    return store


#: From this many arcs on (or when the arcs live only in the arc store), trim, push, minimize's merge,
#: is_deterministic and shortest_paths work on the arc store's arrays instead of ``Arc`` objects.
ARRAY_OPS_MIN_ARCS = 10_000


def array_store(wfsa: WFSA) -> ArcStore | None:
    """The arc store when the array versions of the structural operations should run on ``wfsa``: its arcs are
    held in the store only or number ``ARRAY_OPS_MIN_ARCS`` or more, its weights are constant and no label is a
    predicate; else None."""
    if wfsa._arcs is not None and len(wfsa._arcs) < ARRAY_OPS_MIN_ARCS:
        return None
    store = arc_store(wfsa)
    if store is None or store.predicates or (wfsa._arcs is not None and store.num_arcs != len(wfsa._arcs)):
        return None  # symbolic weights, predicate labels, or zero-weight arcs the store leaves out
    return store


def cache_store(wfsa: WFSA, store: ArcStore | None) -> None:
    """Remember ``store`` as the arc store of ``wfsa`` in its current state."""
    wfsa._sparse_cache = (wfsa._arcs_key(), _weights_key(wfsa), None, store)


def _weights_key(wfsa: WFSA) -> tuple[int, int, int, int]:
    """Identifies the initial and final weight dicts and their change counts (replacing one bumps the version)."""
    return (id(wfsa.initial), wfsa.initial.version, id(wfsa.final), wfsa.final.version)


def store_backed(
    semiring: Semiring, alphabet: Any, name: str | None, names: Sequence[str], store: ArcStore,
    initial: dict[int, Any], final: dict[int, Any],
) -> WFSA:
    """A ``WFSA`` whose arcs live only in ``store`` (``WFSA.arcs`` materialises them in ``store.arc_id`` order on first
    use); ``names`` are its state names (a list, or ``IdNames``), ``initial``/``final`` its weight dicts.

    Caution:
        ``store`` must hold no zero-weight arcs, its ``arc_id`` must be 0..m-1, its ``initial``/``final`` vectors
        must match the dicts, and the names must be distinct.
    """
    from .wfsa import IdIndex, IdNames, LazyIndex, LazyNames

    wfsa = WFSA(semiring, alphabet, name)
    if isinstance(names, IdNames):
        wfsa._names, wfsa._index = names, IdIndex(names)
    elif isinstance(names, LazyNames):
        wfsa._names, wfsa._index = names, LazyIndex(names)
    else:  # the index is built on first use
        wfsa._names = list(names)
        wfsa._index = LazyIndex(wfsa._names)
    wfsa._arcs = None
    wfsa.initial, wfsa.final = initial, final
    store.names = wfsa._names
    cache_store(wfsa, store)
    return wfsa


def with_weights(wfsa: WFSA, store: ArcStore, weight: np.ndarray, initial: dict[int, Any], final: dict[int, Any]
                 ) -> WFSA:
    """A store-backed copy of ``wfsa`` (same states, arcs and labels) with new arc weights (per stored arc, none
    zero) and new initial/final weights."""
    s = store.semiring
    table = None if wfsa.alphabet is None else type(wfsa.alphabet)(wfsa.alphabet, epsilon=wfsa.alphabet.epsilon)
    moved = ArcStore(
        s, store.num_states, store.indptr, store.src, store.dst, store.label, weight, store.arc_id, store.symbols,
        store.symbol_ids, store.predicates, store.predicate_of, _dense(s, initial, store.num_states),
        _dense(s, final, store.num_states), store.names,
    )
    return store_backed(s, table, wfsa.name, wfsa._names, moved, initial, final)


def _dense(s: Semiring, weights: dict[int, Any], n: int) -> np.ndarray:
    out: np.ndarray = s.zeros((n,))
    if weights:
        out[np.fromiter(weights, dtype=np.int64, count=len(weights))] = list(weights.values())
    return out


def is_deterministic_store(wfsa: WFSA, store: ArcStore) -> bool:
    """``is_deterministic`` for a store without predicate arcs: one initial state at most, no epsilon arc, no two
    arcs of one state with the same symbol."""
    if len(wfsa.initial) > 1 or np.any(store.label == EPSILON_ID):
        return False
    order = np.lexsort((store.label, store.src))
    src, label = store.src[order], store.label[order]
    return not bool(np.any((src[1:] == src[:-1]) & (label[1:] == label[:-1])))


def trim_store(wfsa: WFSA, store: ArcStore) -> WFSA:
    """``trim`` in arrays for a constant-weight automaton without predicate labels: the useful states (in order,
    keeping their names) and the arcs between them (in order); the result's arcs live in its arc store."""
    from .wfsa import IdNames

    s = store.semiring
    keep = store.useful()
    new_index = np.cumsum(keep) - 1
    arcs = np.flatnonzero(keep[store.src] & keep[store.dst])
    arc_rank = np.empty(0, dtype=np.int64)
    if arcs.size:
        order = np.argsort(store.arc_id[arcs], kind="stable")
        arc_rank = np.empty(arcs.size, dtype=np.int64)
        arc_rank[order] = np.arange(arcs.size)
    kept = np.flatnonzero(keep)
    names: Sequence[str]
    if isinstance(wfsa._names, IdNames):
        names = IdNames(wfsa._names.ids[kept])
    else:
        names = [wfsa._names[q] for q in kept.tolist()]
    n = len(kept)
    initial = {int(new_index[q]): w for q, w in wfsa.initial.items() if keep[q] and not s.is_zero(w)}
    final = {int(new_index[q]): w for q, w in wfsa.final.items() if keep[q] and not s.is_zero(w)}
    table = None if wfsa.alphabet is None else type(wfsa.alphabet)(wfsa.alphabet, epsilon=wfsa.alphabet.epsilon)
    src = new_index[store.src[arcs]]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    trimmed = ArcStore(
        s, n, indptr, src, new_index[store.dst[arcs]], store.label[arcs], store.weight[arcs], arc_rank,
        store.symbols, store.symbol_ids, [], np.full(arcs.size, -1, dtype=np.int8), store.initial[keep],
        store.final[keep], names,
    )
    return store_backed(s, table, wfsa.name, names, trimmed, initial, final)


def _build(wfsa: WFSA) -> ArcStore | None:
    s = wfsa.semiring
    arcs = wfsa.arcs
    values = [*(a.weight for a in arcs), *wfsa.initial.values(), *wfsa.final.values()]
    if any(is_symbolic(w) for w in values):
        return None
    n, m = wfsa.num_states, len(arcs)
    src = np.fromiter((a.src for a in arcs), dtype=np.int64, count=m)
    dst = np.fromiter((a.dst for a in arcs), dtype=np.int64, count=m)
    weight: np.ndarray = np.array([a.weight for a in arcs], dtype=s.numpy_dtype).reshape(m)
    symbol_ids: dict[Hashable, int] = {}
    predicate_ids: dict[Label, int] = {}
    label = np.empty(m, dtype=np.int64)
    predicate_of = np.full(m, -1, dtype=np.int64)
    for i, arc in enumerate(arcs):
        lab = arc.label
        if not lab.consumes:
            label[i] = EPSILON_ID
        elif isinstance(lab, Sym):
            label[i] = symbol_ids.setdefault(lab.symbol, len(symbol_ids))
        else:
            label[i] = PREDICATE_ID
            predicate_of[i] = predicate_ids.setdefault(lab, len(predicate_ids))
    return make_store(
        s, n, src, dst, label, weight, np.arange(m), list(symbol_ids), list(predicate_ids), predicate_of,
        wfsa.vector(wfsa.initial), wfsa.vector(wfsa.final), wfsa.states,
    )


def make_store(
    semiring: Semiring, n: int, src: IntArray, dst: IntArray, label: IntArray, weight: np.ndarray, arc_id: IntArray,
    symbols: list[Hashable], predicates: list[Label], predicate_of: IntArray, initial: np.ndarray,
    final: np.ndarray, names: Sequence[str],
) -> ArcStore:
    """An ``ArcStore`` from unsorted arc arrays (drops zero-weight arcs, sorts by source)."""
    keep = weight != semiring.zero
    src, dst, label, weight, arc_id, predicate_of = (x[keep] for x in (src, dst, label, weight, arc_id, predicate_of))
    order, indptr = csr_index(src, n)
    return ArcStore(
        semiring, n, indptr, src[order], dst[order], label[order], weight[order], arc_id[order],
        symbols, {x: k for k, x in enumerate(symbols)}, predicates, predicate_of[order], initial, final, names,
    )


# ----------------------------------------------------------------------------------------------------------------------
# Graphs, components and the generic closure


class _Graph:
    """A subset of a store's arcs with its strongly connected components in topological levels."""

    def __init__(self, store: ArcStore, positions: IntArray):
        self.store = store
        self.semiring = store.semiring
        n = store.num_states
        self.n = n
        self.src, self.dst = store.src[positions], store.dst[positions]
        self.positions = positions
        order, self.indptr = csr_index(self.src, n)
        self.src, self.dst, self.positions = self.src[order], self.dst[order], self.positions[order]
        self.weight = store.weight[self.positions]
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        graph = csr_matrix((np.ones(len(self.src), dtype=np.int8), (self.src, self.dst)), shape=(n, n))
        count, comp = connected_components(graph, directed=True, connection="strong")
        self.comp = comp
        sizes = np.bincount(comp, minlength=count)
        loops = np.zeros(count, dtype=bool)
        loops[comp[self.src[self.src == self.dst]]] = True
        self.cyclic = (sizes > 1) | loops
        self.cross = comp[self.src] != comp[self.dst]
        self.level = _levels(comp[self.src[self.cross]], comp[self.dst[self.cross]], count)
        self._members: dict[int, IntArray] = {}
        self._solvers: dict[int, _Component] = {}
        member_order, self._member_ptr = csr_index(comp, count)
        self._member_order = member_order

    def members(self, c: int) -> IntArray:
        return self._member_order[self._member_ptr[c] : self._member_ptr[c + 1]]

    def solver(self, c: int) -> _Component:
        if c not in self._solvers:
            states = self.members(c)
            arcs = gather_ranges(self.indptr, states)
            arcs = arcs[~self.cross[arcs]]
            self._solvers[c] = _Component(self, states, arcs)
        return self._solvers[c]

    def touched(self, vector: np.ndarray) -> IntArray:
        """The states reachable (zero or more arcs) from the support of ``vector``."""
        mask = vector != self.semiring.zero
        frontier = np.flatnonzero(mask)
        while frontier.size:
            nxt = self.dst[gather_ranges(self.indptr, frontier)]
            nxt = np.unique(nxt[~mask[nxt]])
            mask[nxt] = True
            frontier = nxt
        return np.flatnonzero(mask)

    def close(self, vector: np.ndarray) -> np.ndarray:
        """``vector ⊗ A*`` for this graph's matrix A (``vector`` is changed in place and returned).

        Raises:
            DivergenceError: a reached cyclic component whose star diverges (naming a cycle).
        """
        s = self.semiring
        states = self.touched(vector)
        levels = self.level[self.comp[states]]
        order = np.argsort(levels, kind="stable")
        states, levels = states[order], levels[order]
        bounds = np.flatnonzero(np.diff(levels)) + 1
        for group in np.split(states, bounds):
            comps = np.unique(self.comp[group])
            for c in comps[self.cyclic[comps]]:
                self.solver(int(c)).solve(vector)
            arcs = gather_ranges(self.indptr, group)
            arcs = arcs[self.cross[arcs]]
            if arcs.size:
                s.scatter_plus(vector, self.dst[arcs], s.times(vector[self.src[arcs]], self.weight[arcs]))
        return vector


def _levels(csrc: IntArray, cdst: IntArray, count: int) -> IntArray:
    """Topological levels of a DAG on ``count`` nodes (Kahn's algorithm, one vectorised step per level)."""
    level = np.zeros(count, dtype=np.int64)
    indegree = np.bincount(cdst, minlength=count)
    order, indptr = csr_index(csrc, count)
    targets = cdst[order]
    frontier = np.flatnonzero(indegree == 0)
    depth = 0
    while frontier.size:
        level[frontier] = depth
        nxt = targets[gather_ranges(indptr, frontier)]
        if not nxt.size:
            break
        drop = np.bincount(nxt, minlength=count)
        touched = np.flatnonzero(drop)
        indegree[touched] -= drop[touched]
        frontier = touched[indegree[touched] == 0]
        depth += 1
    return level


class _Component:
    """One cyclic strongly connected component: its arcs in local numbering and a solver for ``b ⊗ A_CC*``."""

    def __init__(self, graph: _Graph, states: IntArray, arcs: IntArray):
        self.graph = graph
        self.semiring = s = graph.semiring
        self.states = states
        local = np.full(graph.n, -1, dtype=np.int64)
        local[states] = np.arange(len(states))
        self.src, self.dst = local[graph.src[arcs]], local[graph.dst[arcs]]
        self.weight = graph.weight[arcs]
        self.size = len(states)
        self._dense: Any = None
        self._linear = s.log_domain or s.is_field
        self._prepared = False

    # -- names for errors
    def _cycle(self) -> str:
        """A cycle of this component, by state names (a shortest cycle through its first state)."""
        k = self.size
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import breadth_first_order

        graph = csr_matrix((np.ones(len(self.src), dtype=np.int8), (self.src, self.dst)), shape=(k, k))
        _, pred = breadth_first_order(graph, 0, directed=True, return_predecessors=True)
        back = self.src[self.dst == 0]
        last = int(back[0]) if back.size else 0
        path = [last]
        while path[-1] != 0 and pred[path[-1]] >= 0:
            path.append(int(pred[path[-1]]))
        path.reverse()
        names = self.graph.store.names
        loop = [names[self.states[i]] for i in path] + [names[self.states[path[0]]]]
        return "cycle " + " -> ".join(loop)

    def _diverges(self, why: str) -> DivergenceError:
        return DivergenceError(f"the {self.semiring.name} star diverges: {why}; {self._cycle()}")

    # -- linear solves (real and log)
    def _prepare_linear(self) -> None:
        s = self.semiring
        if s.log_domain:
            w = self.weight
            self.potential = np.zeros(self.size)
            if w.size and (w.max() > 0.0 or w.min() < -700.0):
                self.potential = self._potentials()
            scaled = np.exp(w + self.potential[self.src] - self.potential[self.dst])
        else:
            self.potential = np.zeros(self.size)
            scaled = self.weight.astype(float)
        self.nonnegative = bool(np.all(scaled >= 0))
        self._radius_checked = False
        k = self.size
        from scipy.sparse import csr_matrix, diags

        self.scaled = csr_matrix((scaled, (self.src, self.dst)), shape=(k, k))  # duplicates add, as plus does
        # x (I - A) = b  <=>  (I - A)^T x^T = b^T; the diagonal 1 - A_qq from the self-loops' own sum, exactly
        # (a log self-loop of weight -1e-17 has e^w = 1.0 in floats, but 1 - e^w = -expm1(w) = 1e-17)
        loops = self.src == self.dst
        diagonal = np.ones(k)
        if loops.any():
            total = s.segment_sum(self.weight[loops], self.src[loops], k)
            diagonal = -np.expm1(total) if s.log_domain else 1.0 - total.astype(float)
        off = ~loops
        moves = csr_matrix((scaled[off], (self.src[off], self.dst[off])), shape=(k, k))
        self.system = (diags(diagonal, format="csr") - moves.T).tocsc()
        if not self.nonnegative:
            self._check_radius()
        self._lu: Any = None
        if k <= ITERATIVE_FROM:
            self._factorize()

    def _factorize(self) -> None:
        """One sparse LU factorisation serves every later solve (epsilon closures of many frontiers)."""
        from scipy.sparse.linalg import MatrixRankWarning, splu

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", MatrixRankWarning)
                self._lu = splu(self.system)
        except (RuntimeError, MatrixRankWarning):
            raise self._diverges("spectral radius >= 1 (the linear system is singular)") from None

    def _solve_system(self, rhs: np.ndarray) -> np.ndarray:
        """``(I - A)^T x = rhs``: LU for small components; restarted GMRES for large ones (random graphs fill an
        LU in), falling back to LU when it does not converge."""
        if self._lu is None:
            from scipy.sparse.linalg import gmres

            x, info = gmres(self.system, rhs, rtol=1e-13, atol=0.0, restart=50, maxiter=1000)
            if info == 0:
                return np.asarray(x, dtype=float)
            self._factorize()
        return np.asarray(self._lu.solve(rhs), dtype=float)

    def _check_radius(self) -> None:
        radius = _spectral_radius(self.scaled)
        self._radius_checked = True
        if radius >= 1.0 - 1e-12:
            raise self._diverges(f"spectral radius {radius:.4g} >= 1")

    def _potentials(self) -> np.ndarray:
        """Max-plus potentials D with ``w + D[src] - D[dst] <= 0`` on every arc (log weights, any magnitude).

        Raises:
            DivergenceError: a cycle of positive log weight (its star diverges).
        """
        d = np.zeros(self.size)
        for _ in range(self.size + 1):
            candidate = d.copy()
            np.maximum.at(candidate, self.dst, d[self.src] + self.weight)
            if np.array_equal(candidate, d):
                return d
            d = candidate
        raise self._diverges("a cycle of log weight >= 0")

    def _solve_linear(self, b: np.ndarray) -> np.ndarray:
        s = self.semiring
        if s.log_domain:
            shifted = b - self.potential
            top = shifted.max()
            if top == -np.inf:
                return b
            rhs = np.exp(shifted - top)
        else:
            rhs = b.astype(float)
        with np.errstate(all="ignore"):
            x = self._solve_system(rhs)
        if not np.all(np.isfinite(x)):
            raise self._diverges("spectral radius >= 1 (the linear system is singular)")
        if self.nonnegative and np.all(rhs >= 0):
            # irreducible A >= 0 and b >= 0: a nonnegative solution exists iff the spectral radius is < 1
            if np.any(x < 0):
                raise self._diverges("spectral radius >= 1 (the linear system has no nonnegative solution)")
        elif not self._radius_checked:
            self._check_radius()
        if not s.log_domain:
            return x
        with np.errstate(divide="ignore"):
            out: np.ndarray = np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), -np.inf) + top + self.potential
        return out

    # -- relaxation (idempotent semirings)
    def _relax(self, b: np.ndarray) -> np.ndarray:
        """Bellman-Ford in FIFO rounds from the changed states; an idempotent semiring converges in ``size`` rounds
        unless a cycle improves paths without bound."""
        s = self.semiring
        x = b.copy()
        changed = np.flatnonzero(x != s.zero)
        order, indptr = csr_index(self.src, self.size)
        src, dst, weight = self.src[order], self.dst[order], self.weight[order]
        for _ in range(self.size + 1):
            arcs = gather_ranges(indptr, changed)
            if not arcs.size:
                return x
            before = x.copy()
            s.scatter_plus(x, dst[arcs], s.times(before[src[arcs]], weight[arcs]))
            changed = np.flatnonzero(x != before)
        raise self._diverges("a cycle improves paths without bound")

    def solve(self, vector: np.ndarray) -> None:
        """In place on the global ``vector``: its entries on this component become ``b ⊗ A_CC*``."""
        vector[self.states] = self._local(vector[self.states])

    def _local(self, b: np.ndarray) -> np.ndarray:
        """``b ⊗ A_CC*`` for a vector ``b`` over this component's states (in local numbering)."""
        s = self.semiring
        if self._linear:
            if not self._prepared:
                self._prepare_linear()
                self._prepared = True
            return self._solve_linear(b)
        if not s.idempotent:
            raise SemiringError(f"the {s.name} semiring has no cycle solver (neither linear nor idempotent)")
        if self.size <= DENSE_BLOCK:
            out: np.ndarray = s.sum(s.times(b[:, None], self.dense_star()), axis=0)
            return out
        return self._relax(b)

    def dense_star(self) -> np.ndarray:
        """``A_CC*`` as a dense (size, size) matrix, by ``closure_matrix`` on the block (computed once).

        Raises:
            DivergenceError: the star diverges (naming a cycle).
        """
        if self._dense is None:
            from .star import closure_matrix

            s = self.semiring
            block = s.zeros((self.size, self.size))
            flat = s.segment_sum(self.weight, self.src * self.size + self.dst, self.size * self.size)
            block[:] = flat.reshape(self.size, self.size)
            names = [self.graph.store.names[q] for q in self.states]
            self._dense = closure_matrix(block, s, None, names)
        star: np.ndarray = self._dense
        return star

    def star_rows(self, rows: IntArray) -> np.ndarray:
        """Rows ``rows`` (local numbering) of ``A_CC*``, dense (len(rows), size): from the dense star up to
        ``DENSE_BLOCK`` states, else one solve per row (``b = e_q``).

        Raises:
            DivergenceError: the star diverges (naming a cycle).
        """
        s = self.semiring
        if self.size <= DENSE_BLOCK:
            out: np.ndarray = self.dense_star()[rows]
            return out
        out = s.zeros((len(rows), self.size))
        for i, q in enumerate(rows.tolist()):
            unit = s.zeros((self.size,))
            unit[q] = s.one
            out[i] = self._local(unit)
        return out


#: Cyclic components' closure rows are formed in chunks of at most this many (row, entry) products.
_CHUNK = 1 << 21


@dataclass
class ClosureRows:
    """The rows of a closure matrix, sparse: row q holds the columns ``cols[start[q] : start[q] + length[q]]``
    (ascending) with the values ``vals[...]`` (none zero). ``matrix``: the dense Q x Q closure they were read
    from, when there is one (``from_dense``)."""

    start: IntArray
    length: IntArray
    cols: IntArray
    vals: np.ndarray
    matrix: np.ndarray | None = None

    @classmethod
    def from_dense(cls, semiring: Semiring, matrix: np.ndarray) -> ClosureRows:
        """The non-zeros of a dense (Q, Q) closure matrix as rows (the matrix kept beside them)."""
        matrix = np.asarray(matrix)
        rows, cols = np.nonzero(matrix != semiring.zero)
        length = np.bincount(rows, minlength=matrix.shape[0]).astype(np.int64)
        start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
        return cls(start, length, cols.astype(np.int64), matrix[rows, cols], matrix)

    def dense(self, semiring: Semiring) -> np.ndarray:
        """The closure as a dense (Q, Q) matrix of ``semiring`` (the one the rows were read from, if any)."""
        if self.matrix is not None:
            return self.matrix
        n = len(self.start)
        out: np.ndarray = semiring.zeros((n, n))
        positions = _spans(self.start, self.length)
        out[np.repeat(np.arange(n), self.length), self.cols[positions]] = self.vals[positions]
        return out

    @property
    def size(self) -> int:
        """The number of entries (non-zeros) the rows hold."""
        return int(self.length.sum())

    def expand(self, rows: IntArray) -> tuple[IntArray, IntArray, np.ndarray]:
        """The entries of rows ``rows`` (repeats allowed), in order: (index into ``rows``, column, value)."""
        lengths = self.length[rows]
        positions = _spans(self.start[rows], lengths)
        owner = np.repeat(np.arange(len(rows)), lengths)
        return owner, self.cols[positions], self.vals[positions]

    def row(self, q: int) -> tuple[list[int], list[Any]]:
        lo, hi = int(self.start[q]), int(self.start[q] + self.length[q])
        return self.cols[lo:hi].tolist(), self.vals[lo:hi].tolist()


class _RowBuffer:
    """Closure rows appended a block at a time (capacity doubling), readable while they grow."""

    def __init__(self, semiring: Semiring, n: int):
        self.semiring = semiring
        self.start = np.zeros(n, dtype=np.int64)
        self.length = np.zeros(n, dtype=np.int64)
        self.cols = np.zeros(max(16, n), dtype=np.int64)
        self.vals = semiring.zeros((max(16, n),))
        self.size = 0

    def append(self, rows: IntArray, cols: IntArray, vals: np.ndarray) -> None:
        """Add the entries (rows, cols, vals), sorted by row, of rows not added before."""
        end = self.size + len(rows)
        if end > len(self.cols):
            grown = max(end, 2 * len(self.cols))
            self.cols = np.concatenate([self.cols[: self.size], np.zeros(grown - self.size, dtype=np.int64)])
            self.vals = np.concatenate([self.vals[: self.size], self.semiring.zeros((grown - self.size,))])
        self.cols[self.size : end] = cols
        self.vals[self.size : end] = vals
        present, first, counts = np.unique(rows, return_index=True, return_counts=True)
        self.start[present] = self.size + first
        self.length[present] = counts
        self.size = end

    def rows(self) -> ClosureRows:
        return ClosureRows(self.start, self.length, self.cols[: self.size], self.vals[: self.size])


def epsilon_closure(
    semiring: Semiring, n: int, src: IntArray, dst: IntArray, weight: np.ndarray, names: Sequence[str],
    cap: int | None = None, budget: int | None = None,
) -> ClosureRows:
    """The rows of ``E*`` (``cap=None``) or of ``I + E + ... + E^cap`` for the n x n matrix E of the arcs
    ``src -> dst`` (parallel arcs add), in time and memory proportional to its non-zeros (for components of
    bounded size). ``budget``: the most entries the exact rows may hold (None: no limit).

    The graph's strongly connected components are visited in reverse topological order of the condensation, a
    level at a time: a state's row is ``e_q ⊕ ⊕_{q -w-> t leaving its component} w ⊗ row(t)`` (vectorised over the
    level), then a cyclic component's rows are multiplied by the star of its block (``closure_matrix`` up to
    ``DENSE_BLOCK`` states, else one sparse solve or relaxation per row, as in ``shortest_distance``).

    Raises:
        DivergenceError: a component whose star diverges (naming a cycle of it, by ``names``).
        BudgetExceededError: the exact rows outgrow ``budget`` entries (checked a level at a time).
    """
    s = semiring
    if cap is not None:
        return _capped_closure(s, n, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64),
                               np.asarray(weight, dtype=s.numpy_dtype), cap)
    m = len(src)
    store = make_store(
        s, n, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), np.full(m, EPSILON_ID),
        np.asarray(weight, dtype=s.numpy_dtype), np.arange(m), [], [], np.full(m, -1), s.zeros((n,)),
        s.zeros((n,)), names,
    )
    graph = _Graph(store, np.arange(store.num_arcs))
    comp, count = graph.comp, len(graph.cyclic)
    cross = np.flatnonzero(graph.cross)
    level = _levels(comp[graph.dst[cross]], comp[graph.src[cross]], count)[comp]  # sinks first
    order = np.argsort(level, kind="stable")
    bounds = np.flatnonzero(np.diff(level[order])) + 1
    buffer = _RowBuffer(s, n)
    for group in np.split(order, bounds):
        rows, cols, vals = group, group, s.ones((len(group),))
        arcs = gather_ranges(graph.indptr, group)
        arcs = arcs[graph.cross[arcs]]
        if arcs.size:
            owner, succ_cols, succ_vals = buffer.rows().expand(graph.dst[arcs])
            rows = np.concatenate([group, graph.src[arcs][owner]])
            cols = np.concatenate([group, succ_cols])
            vals = np.concatenate([vals, s.times(graph.weight[arcs][owner], succ_vals)])
        key, inverse = np.unique(rows * n + cols, return_inverse=True)
        inverse = inverse.reshape(-1)
        if len(key) < len(rows):
            vals = s.segment_sum(vals, inverse, len(key))
        else:  # no duplicates: only the order changes
            ordered = np.empty_like(vals)
            ordered[inverse] = vals
            vals = ordered
        rows, cols = key // n, key % n
        cyclic = graph.cyclic[comp[rows]]
        if cyclic.any():
            rows, cols, vals = _star_times(graph, rows, cols, vals, cyclic, n)
        live = vals != s.zero
        buffer.append(rows[live], cols[live], vals[live])
        if budget is not None and buffer.size > budget:
            raise BudgetExceededError(f"the epsilon closure holds more than {budget} entries")
    return buffer.rows()


def _capped_closure(s: Semiring, n: int, src: IntArray, dst: IntArray, weight: np.ndarray, cap: int) -> ClosureRows:
    """``I + E + ... + E^cap`` as closure rows: each power's entries (row, column, value) times E, plus-merged."""
    if cap < 0:
        raise ArgumentError(f"epsilon cap must be >= 0, got {cap}")
    order, indptr = csr_index(src, n)
    dst, weight = dst[order], weight[order]
    rows = cols = np.arange(n, dtype=np.int64)
    vals = s.ones((n,))
    parts = [(rows, cols, vals)]
    for _ in range(cap):
        counts = indptr[cols + 1] - indptr[cols]
        arcs = _spans(indptr[cols], counts)
        owner = np.repeat(np.arange(len(cols)), counts)
        rows, cols, vals = rows[owner], dst[arcs], s.times(vals[owner], weight[arcs])
        first, vals = _plus_merge(s, [rows, cols], vals)
        rows, cols = rows[first], cols[first]
        live = vals != s.zero
        rows, cols, vals = rows[live], cols[live], vals[live]
        if not len(rows):
            break
        parts.append((rows, cols, vals))
    rows, cols = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    first, vals = _plus_merge(s, [rows, cols], np.concatenate([p[2] for p in parts]))
    rows, cols = rows[first], cols[first]
    live = vals != s.zero
    rows, cols, vals = rows[live], cols[live], vals[live]
    length = np.bincount(rows, minlength=n).astype(np.int64)
    start = np.zeros(n, dtype=np.int64)
    np.cumsum(length[:-1], out=start[1:])
    return ClosureRows(start, length, cols, vals)


def _star_times(
    graph: _Graph, rows: IntArray, cols: IntArray, vals: np.ndarray, cyclic: np.ndarray, n: int
) -> tuple[IntArray, IntArray, np.ndarray]:
    """The entries (rows, cols, vals) of one level with each cyclic component's rows P_C replaced by
    ``A_CC* ⊗ P_C`` (entries sorted by row then column)."""
    s = graph.semiring
    keep = ~cyclic
    out_rows, out_cols, out_vals = [rows[keep]], [cols[keep]], [vals[keep]]
    picked = np.flatnonzero(cyclic)
    picked = picked[np.argsort(graph.comp[rows[picked]], kind="stable")]
    comps = graph.comp[rows[picked]]
    for part in np.split(picked, np.flatnonzero(np.diff(comps)) + 1):
        c = int(graph.comp[rows[part[0]]])
        solver = graph.solver(c)
        members = solver.states  # ascending
        local = np.searchsorted(members, rows[part])
        columns, where = np.unique(cols[part], return_inverse=True)
        where = where.reshape(-1)
        width, entries = len(columns), len(part)
        step = max(1, min(_CHUNK // max(1, entries), _CHUNK // max(1, width)))
        for lo in range(0, solver.size, step):
            chosen = np.arange(lo, min(solver.size, lo + step))
            star = solver.star_rows(chosen)  # (chunk, size)
            products = s.times(star[:, local], vals[part][None, :])  # (chunk, entries)
            cells = (np.arange(len(chosen))[:, None] * width + where[None, :]).reshape(-1)
            block = s.segment_sum(products.reshape(-1), cells, len(chosen) * width).reshape(len(chosen), width)
            i, j = np.nonzero(block != s.zero)
            out_rows.append(members[chosen[i]])
            out_cols.append(columns[j])
            out_vals.append(block[i, j])
    rows, cols, vals = np.concatenate(out_rows), np.concatenate(out_cols), np.concatenate(out_vals)
    order = np.argsort(rows * n + cols, kind="stable")
    return rows[order], cols[order], vals[order]


def _plus_merge(semiring: Semiring, keys: list[IntArray], vals: np.ndarray) -> tuple[IntArray, np.ndarray]:
    """Sort entries by the key columns ``keys`` (most significant first) and plus-merge equal keys: (the position of
    each distinct key's first entry, in key order; the sums). Few temporaries: the entries can be millions."""
    if not len(vals):
        return np.zeros(0, dtype=np.int64), vals
    key = keys[0].astype(np.int64, copy=True)
    for column in keys[1:]:
        width = int(column.max()) + 1
        if int(key.max()) >= (2**62) // width:  # would overflow: sort by the columns themselves
            order = np.lexsort(keys[::-1])
            change = np.zeros(len(vals), dtype=bool)
            change[0] = True
            for k in keys:
                ordered_key = k[order]
                change[1:] |= ordered_key[1:] != ordered_key[:-1]
            break
        key *= width
        key += column
    else:
        order = np.argsort(key, kind="stable")  # the entries come in runs of ascending keys (timsort)
        np.take(key, order, out=key)
        change = np.empty(len(vals), dtype=bool)
        change[0] = True
        np.not_equal(key[1:], key[:-1], out=change[1:])
    del key
    starts = np.flatnonzero(change)
    first = order[starts]
    sums = vals[first]
    if len(starts) < len(vals):  # add the repeats (few: one ufunc.at over them, not a pass over all entries)
        repeats = np.flatnonzero(~change)
        semiring.scatter_plus(sums, np.cumsum(change)[repeats] - 1, vals[order[repeats]])
    return first, sums


def remove_epsilon_store(wfsa: WFSA, store: ArcStore, closure: ClosureRows) -> WFSA:
    """``remove_epsilon`` in arrays (see ``kleene.automata.ops.remove_epsilon``) for a constant-weight automaton:
    each consuming arc ``p -x/w-> q`` becomes ``p -x/(w ⊗ C[q, r])-> r`` for the non-zeros of row q of the closure
    C, parallel arcs with one label plus-merged; initial weights ``lambda ⊗ C``. The result's arcs are sorted by
    source, destination and label, and live in its arc store."""
    s, n = store.semiring, store.num_states
    consuming = np.flatnonzero(store.label != EPSILON_ID)  # by source (CSR order)
    targets = store.dst[consuming]
    lengths = closure.length[targets]
    positions = _spans(closure.start[targets], lengths)
    dst = closure.cols[positions]
    weight = s.times(np.repeat(store.weight[consuming], lengths), closure.vals[positions])
    del positions
    codes = store.label[consuming]  # symbol ids, then one code per predicate
    if store.predicates:
        codes = np.where(codes >= 0, codes, len(store.symbols) + store.predicate_of[consuming])
    codes = np.repeat(codes, lengths)
    src = np.repeat(store.src[consuming], lengths)
    first, weight = _plus_merge(s, [src, dst, codes], weight)
    live = weight != s.zero
    if not live.all():
        first, weight = first[live], weight[live]
    src, dst, codes = src[first], dst[first], codes[first]
    predicated = codes >= len(store.symbols)
    label = np.where(predicated, PREDICATE_ID, codes)
    predicate_of = np.where(predicated, codes - len(store.symbols), -1)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    out = ArcStore(
        s, n, indptr, src, dst, label, weight, np.arange(len(first)), store.symbols, store.symbol_ids,
        store.predicates, predicate_of, s.zeros((n,)), store.final.copy(), store.names,
    )
    starts = [q for q, w in wfsa.initial.items() if not s.is_zero(w)]
    owner, cols, reach = closure.expand(np.asarray(starts, dtype=np.int64))
    lam: np.ndarray = np.asarray([wfsa.initial[q] for q in starts], dtype=s.numpy_dtype).reshape(len(starts))
    first, totals = _plus_merge(s, [cols], s.times(lam[owner], reach))
    states = cols[first]
    live = totals != s.zero
    states, totals = states[live], totals[live]
    out.initial[states] = totals
    initial = dict(zip(states.tolist(), totals.tolist()))
    final = dict(wfsa.final.items())
    alphabet = None if wfsa.alphabet is None else wfsa.alphabet.copy()
    return store_backed(s, alphabet, wfsa.name, wfsa._names, out, initial, final)


def _spectral_radius(matrix: scipy.sparse.csr_matrix) -> float:
    k = matrix.shape[0]
    if k <= 2000:
        return float(np.max(np.abs(np.linalg.eigvals(matrix.toarray()))))
    from scipy.sparse.linalg import eigs

    return float(np.max(np.abs(eigs(matrix, k=1, which="LM", return_eigenvectors=False))))


# ----------------------------------------------------------------------------------------------------------------------
# Public algorithms


def shortest_distance(wfsa: WFSA) -> np.ndarray:
    """The single-source shortest distance: per state q, the semiring sum over paths from the initial states to q
    (initial weights included), over the useful part (states on some successful path; others get zero).

    Caution:
        Constant weights only (``wfsa.is_symbolic`` false).

    Raises:
        WeightError: symbolic weights (bind them first).
        DivergenceError: a cyclic component on a successful path whose star diverges (naming a cycle).
    """
    store = require_store(wfsa)
    vector: np.ndarray = np.where(store.useful(), store.initial, store.semiring.zero).astype(store.semiring.numpy_dtype)
    return store.graph("all").close(vector)


def state_distances(store: ArcStore, towards: str) -> np.ndarray:
    """Per state, the semiring sum over all paths from it to the final states (``towards="final"``, final weights
    included) or from the initial states to it (``"initial"``, initial weights included); zero where no such path.
    Only the states these paths pass through are solved, so a divergent cycle elsewhere does not raise.

    Caution:
        Predicate labels count once (the caller handles them).

    Raises:
        DivergenceError: a cycle on one of these paths whose star diverges.
    """
    s, n = store.semiring, store.num_states
    if towards == "final":  # the reversed automaton, from its initial (= the final) states
        src, dst, start = store.dst, store.src, store.final
    else:
        src, dst, start = store.src, store.dst, store.initial
    reached = _reach(src, dst, n, start != s.zero)
    keep = reached[src] & reached[dst]
    oriented = make_store(
        s, n, src[keep], dst[keep], store.label[keep], store.weight[keep], store.arc_id[keep], store.symbols,
        store.predicates, store.predicate_of[keep], start, s.zeros((n,)), store.names,
    )
    vector: np.ndarray = np.where(reached, start, s.zero).astype(s.numpy_dtype)
    positions = np.arange(oriented.num_arcs)
    return _Graph(oriented, positions).close(vector)


def require_store(wfsa: WFSA) -> ArcStore:
    """The arc store of ``wfsa``.

    Raises:
        ArgumentError: not a WFSA.
        WeightError: symbolic weights.
    """
    if not isinstance(wfsa, WFSA):
        raise ArgumentError(f"wfsa: expected a WFSA, got {type(wfsa).__name__}")
    store = arc_store(wfsa)
    if store is None:
        raise WeightError(f"{wfsa!r} has symbolic weights; the sparse engine needs constant weights")
    return store


def pathsum(wfsa: WFSA) -> Any:
    """The semiring sum over all successful paths (the scores of all strings), in the sparse engine (the capped sum
    is ``algorithms.pathsum``'s: this one over the epsilon-free automaton of the capped closure).

    Raises:
        WeightError: symbolic weights.
        AlphabetError: predicate labels and no alphabet to count their symbols.
        DivergenceError: a cycle on a successful path whose star diverges (naming it).
    """
    store = require_store(wfsa)
    s = store.semiring
    alphabet = list(wfsa.alphabet) if wfsa.alphabet is not None else None
    weights = store.total_weights(alphabet)
    totals = ArcStore(
        s, store.num_states, store.indptr, store.src, store.dst, store.label, weights, store.arc_id, store.symbols,
        store.symbol_ids, store.predicates, store.predicate_of, store.initial, store.final, store.names,
    )
    useful = store.useful()
    vector: np.ndarray = np.where(useful, store.initial, s.zero).astype(s.numpy_dtype)
    distance = totals.graph("all").close(vector)
    return plain(s.sum(s.times(distance, np.where(useful, store.final, s.zero)), axis=0))


def plain(value: Any) -> Any:
    """A numpy scalar or 0-d array as a Python number; anything else unchanged."""
    return value.item() if isinstance(value, np.generic | np.ndarray) else value


#: From this many states on, ``score``/``pathsum``/``all_spans`` of constant-weight automata use the sparse engine
#: (measured: below it the dense matrices are as fast or faster).
SPARSE_MIN_STATES = 64


def engine_store(wfsa: WFSA) -> ArcStore | None:
    """The arc store when the sparse engine should run ``wfsa`` (large enough, constant weights), else None."""
    if wfsa.num_states < SPARSE_MIN_STATES:
        return None
    return arc_store(wfsa)
