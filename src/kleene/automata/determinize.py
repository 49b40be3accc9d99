"""Weighted determinization: the subset construction with residual weights (Mohri 1997), over minterms.

A state of the result is a weighted subset ``{(q, v_q)}`` of the input's states: ``v_q`` is what remains to be
multiplied in front of ``q``'s future once the result's arcs have taken their share. On a minterm ``m`` (a group
of symbols no arc out of the subset tells apart, see ``kleene.automata.minterms``) the result's arc weighs
``w = ⊕ v_q ⊗ w(q -m-> r)`` and leads to the subset of residuals ``divide(⊕_q v_q ⊗ w(q -m-> r), w)``.
Subsets are identified by their residuals quantised to ``delta`` (as OpenFst does), so that rounding does not
make the same subset twice.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from typing import Any

from kleene.errors import ArgumentError, BudgetExceededError, SemiringError, WeightError

from .labels import EPSILON, Label, Sym, meet
from .minterms import minterms
from .ops import bind, remove_epsilon, trim
from .weights import Env, Weight
from .wfsa import WFSA, Arc, LazyNames

#: The default bound on the number of states a construction may build before giving up (about 20 s of subsets on
#: one core; an unambiguous automaton without the twins property is refused long before, see ``TWINS_CHECK_AFTER``).
DEFAULT_MAX_STATES = 100_000
#: After this many subsets a construction tests the twins property (``twins_failure``): an unambiguous automaton
#: without it has no finite deterministic equivalent, and is refused at once instead of filling ``max_states``.
TWINS_CHECK_AFTER = 1_000
#: The twins test is skipped for inputs with more states than this (its product has up to n² pairs).
TWINS_CHECK_MAX_STATES = 1_000
#: The quantisation step for comparing weights (pywrapfst's default for determinize and minimize).
DEFAULT_DELTA = 1e-6


def numeric_epsilon_free(a: WFSA, env: Env | None, operation: str) -> WFSA:
    """``a`` with symbolic weights bound in ``env`` and epsilon arcs removed (exact closure), trimmed.

    Raises:
        WeightError: symbolic weights and no ``env``.
        DivergenceError: the epsilon closure diverges.
    """
    if a.is_symbolic:
        if env is None:
            raise WeightError(f"{operation}: the automaton has symbolic weights; pass env= (or bind(a, env) first)")
        a = bind(a, env)
    if a.has_epsilons:
        a = remove_epsilon(a)
    return trim(a)


Subset = tuple[tuple[int, Any], ...]


class SubsetConstruction:
    """The weighted subset construction of an epsilon-free automaton with numeric weights, one subset at a time
    (so that a search can build only the part it visits, as OpenFst's lazy ``DeterminizeFst``).

    A subset is a sorted tuple of (state, residual) pairs; ``key`` identifies subsets up to the quantisation of
    their residuals.

    Caution:
        See ``determinize`` for the semiring's requirements; they are not checked here.
    """

    def __init__(self, a: WFSA, delta: float):
        from .sparse import arc_store

        self.a, self.s, self.delta = a, a.semiring, delta
        store = arc_store(a) if a._arcs is None else None  # arcs held in the store only: read a state's when asked
        self.store = store if store is not None and not store.predicates else None
        self.outgoing: dict[int, list[Arc]] = {}
        if self.store is None:
            for q in range(a.num_states):
                self.outgoing[q] = []
            for arc in a.arcs:
                self.outgoing[arc.src].append(arc)

    def arcs_of(self, q: int) -> list[Arc]:
        """The arcs leaving state ``q``, in arc order."""
        if q not in self.outgoing and self.store is not None:
            st = self.store
            lo, hi = int(st.indptr[q]), int(st.indptr[q + 1])  # a state's arcs keep their order in the store
            self.outgoing[q] = [Arc(q, d, EPSILON if k < 0 else Sym(st.symbols[k]), w) for d, k, w in
                                zip(st.dst[lo:hi].tolist(), st.label[lo:hi].tolist(), st.weight[lo:hi].tolist())]
        return self.outgoing[q]

    def start(self) -> tuple[Any, Subset] | None:
        """The total initial weight and the initial subset (None for an automaton without initial state)."""
        s = self.s
        if not self.a.initial:
            return None
        total = _sum(s, self.a.initial.values())
        return total, tuple(sorted((q, s.divide(w, total)) for q, w in self.a.initial.items()))

    def key(self, subset: Subset) -> tuple[tuple[int, Any], ...]:
        return tuple((q, self.s.quantize(v, self.delta)) for q, v in subset)

    def final(self, subset: Subset) -> Any:
        s, final = self.s, self.a.final
        return _sum(s, (s.times(v, final[q]) for q, v in subset if q in final))

    def successors(self, subset: Subset) -> list[tuple[Label, Any, Subset]]:
        """The arcs out of ``subset``: one per minterm of the labels leaving it, with its weight and next subset."""
        s, a = self.s, self.a
        arcs = [(v, arc) for q, v in subset for arc in self.arcs_of(q)]
        parts = minterms([arc.label for _, arc in arcs], a.alphabet)
        by_minterm: list[dict[int, Weight]] = [{} for _ in range(len(parts))]
        for (v, arc), cover in zip(arcs, parts.covers):
            weight = s.times(v, arc.weight)
            for m in cover:
                into = by_minterm[m]
                into[arc.dst] = s.plus(into[arc.dst], weight) if arc.dst in into else weight
        out: list[tuple[Label, Any, Subset]] = []
        for m, into in enumerate(by_minterm):
            weight = _sum(s, into.values())
            if not s.is_zero(weight):
                residuals = tuple(sorted((r, s.divide(u, weight)) for r, u in into.items() if not s.is_zero(u)))
                out.append((parts.label(m), weight, residuals))
        return out


def check_determinizable(a: WFSA, max_states: int, delta: float, operation: str) -> None:
    """Refuse what the subset construction cannot do.

    Raises:
        SemiringError: a semiring that is not zero-sum-free.
        ArgumentError: a bad ``max_states`` or ``delta``.
    """
    s = a.semiring
    if not s.zero_sum_free:
        raise SemiringError(
            f"{operation}: the {s.name} semiring is not zero-sum-free (weights can cancel, so residuals can divide "
            "by zero); determinize in log (probabilities) or a tropical semiring"
        )
    _check_budget(max_states, delta, operation)


def budget_exceeded(operation: str, max_states: int, twins: str | None = None) -> BudgetExceededError:
    why = (
        f"the twins property fails ({twins}), so it may have no finite deterministic equivalent"
        if twins is not None
        else "the automaton may lack the twins property (then no finite deterministic equivalent exists)"
    )
    return BudgetExceededError(f"{operation}: more than max_states={max_states} subsets (raise max_states); {why}")


def admit_subset(a: WFSA, count: int, max_states: int, delta: float, operation: str) -> None:
    """Called before the ``count``-th subset (0-based) of a construction over ``a`` (epsilon-free, numeric, trimmed)
    is made: refuses it over budget, and once ``TWINS_CHECK_AFTER`` subsets exist tests the twins property.

    Raises:
        BudgetExceededError: ``count`` reaches ``max_states``, or ``a`` is unambiguous and lacks the twins property
            (Mohri 1997: no finite deterministic equivalent exists).
    """
    if count >= max_states:
        twins = twins_failure(a, delta)[0] if a.num_states <= TWINS_CHECK_MAX_STATES else None
        raise budget_exceeded(operation, max_states, twins)
    if count == TWINS_CHECK_AFTER and a.num_states <= TWINS_CHECK_MAX_STATES:
        twins, ambiguous = twins_failure(a, delta)
        if twins is not None and not ambiguous:
            raise BudgetExceededError(
                f"{operation}: no finite deterministic equivalent exists: the automaton is unambiguous and the twins "
                f"property fails ({twins}); no max_states is enough"
            )


def twins_failure(a: WFSA, delta: float) -> tuple[str | None, bool]:
    """Whether ``a`` (epsilon-free, numeric, trimmed) lacks the twins property, and whether it is ambiguous.

    The twins property: any two states reached by one string that both loop on one string loop with the same
    weight. It is tested on the product of ``a`` with itself (pairs reached by one string) weighted by
    ``w ⊗ w'^-1`` (``Semiring.divide``): it holds iff every cycle of that product weighs one, i.e. iff every
    strongly connected component has a potential (Allauzen and Mohri 2003). ``a`` is ambiguous iff some pair of
    distinct states is both reached and co-reached by one string.

    Returns:
        (a description of two looping states with different cycle weights, or None; whether ``a`` is ambiguous).
    """

    s = a.semiring
    outgoing: list[list[tuple[int, Label, Any]]] = [[] for _ in range(a.num_states)]
    for arc in a.arcs:
        outgoing[arc.src].append((arc.dst, arc.label, arc.weight))
    index: dict[tuple[int, int], int] = {}
    pairs: list[tuple[int, int]] = []
    edges: list[list[tuple[int, Any]]] = []

    def pair(p: int, q: int) -> int:
        if (p, q) not in index:
            index[(p, q)] = len(pairs)
            pairs.append((p, q))
            edges.append([])
        return index[(p, q)]

    for p in a.initial:
        for q in a.initial:
            pair(p, q)
    k = 0
    while k < len(pairs):
        p, q = pairs[k]
        for p2, x, u in outgoing[p]:
            for q2, y, v in outgoing[q]:
                if meet(x, y) is not None:
                    edges[k].append((pair(p2, q2), s.divide(u, v)))
        k += 1
    n = len(pairs)
    reverse: list[list[int]] = [[] for _ in range(n)]
    for u in range(n):
        for v, _ in edges[u]:
            reverse[v].append(u)
    coreached = [pairs[u][0] in a.final and pairs[u][1] in a.final for u in range(n)]
    stack = [u for u in range(n) if coreached[u]]
    while stack:
        for v in reverse[stack.pop()]:
            if not coreached[v]:
                coreached[v] = True
                stack.append(v)
    ambiguous = any(coreached[u] and pairs[u][0] != pairs[u][1] for u in range(n))
    component = _components(edges)
    potential: dict[int, Any] = {}
    one = s.quantize(s.one, delta)
    for root in range(n):
        if root in potential:
            continue
        potential[root] = s.one
        todo = [root]
        while todo:
            u = todo.pop()
            for v, w in edges[u]:
                if component[v] != component[u]:
                    continue
                reached = s.times(potential[u], w)
                if v not in potential:
                    potential[v] = reached
                    todo.append(v)
                elif s.quantize(s.divide(reached, potential[v]), delta) != one:
                    p, q = pairs[v]
                    return (
                        f"states {a.state_name(p)!r} and {a.state_name(q)!r} are reached by one string and loop on "
                        "one string with different weights"
                    ), ambiguous
    return None, ambiguous


def _components(edges: list[list[tuple[int, Any]]]) -> list[int]:
    """The strongly connected component of every node (Tarjan's algorithm, iterative)."""
    n = len(edges)
    number, low, component = [-1] * n, [0] * n, [-1] * n
    on_stack = [False] * n
    stack: list[int] = []
    counter = components = 0
    for root in range(n):
        if number[root] >= 0:
            continue
        work = [(root, 0)]
        number[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            u, i = work[-1]
            if i < len(edges[u]):
                work[-1] = (u, i + 1)
                v = edges[u][i][0]
                if number[v] < 0:
                    number[v] = low[v] = counter
                    counter += 1
                    stack.append(v)
                    on_stack[v] = True
                    work.append((v, 0))
                elif on_stack[v]:
                    low[u] = min(low[u], number[v])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[u])
            if low[u] == number[u]:
                while True:
                    v = stack.pop()
                    on_stack[v] = False
                    component[v] = components
                    if v == u:
                        break
                components += 1
    return component


def determinize(
    a: WFSA, *, max_states: int = DEFAULT_MAX_STATES, delta: float = DEFAULT_DELTA, env: Env | None = None
) -> WFSA:
    """A deterministic automaton giving every string the same score as ``a``.

    The result has at most one initial state (carrying the total initial weight) and, out of every state, labels
    that accept disjoint sets of symbols: predicate labels stay predicates (minterms). Epsilon arcs are removed
    first (``remove_epsilon``) and the input is trimmed. Subsets whose residuals agree once quantised to
    ``delta`` (``Semiring.quantize``) are one state.

    Caution:
        Needs a zero-sum-free semiring with division (``Semiring.zero_sum_free``, ``Semiring.divide``): boolean,
        min-plus (tropical), max-plus, max-times and log. Real weights can cancel and are refused (use log for
        probabilities). Automata without the twins property (and, in log, ambiguous ones whose numbers of paths
        grow) may have no finite deterministic equivalent: after ``TWINS_CHECK_AFTER`` subsets an unambiguous one
        without the twins property is refused (it has none), any other stops at ``max_states`` (default
        ``DEFAULT_MAX_STATES``, 100 000: about 20 s).

    Raises:
        SemiringError: a semiring that is not zero-sum-free.
        BudgetExceededError: more than ``max_states`` states would be built (raise ``max_states``), or an
            unambiguous input lacks the twins property.
        WeightError: symbolic weights without ``env``.
        ArgumentError: a bad ``max_states`` or ``delta``.
    """
    check_determinizable(a, max_states, delta, "determinize")
    a = numeric_epsilon_free(a, env, "determinize")
    from .sparse import array_store

    store = array_store(a)
    if store is not None and a.initial:
        return _determinize_store(a, store, max_states, delta)
    s = a.semiring
    out = WFSA(s, a.alphabet, a.name)
    construction = SubsetConstruction(a, delta)
    begin = construction.start()
    if begin is None:
        return out
    index: dict[tuple[tuple[int, Any], ...], int] = {}
    uses: dict[str, int] = {}  # subsets of the same states (with other residuals) are numbered
    pending: deque[tuple[int, Subset]] = deque()

    def state_of(subset: Subset) -> int:
        key = construction.key(subset)
        if key not in index:
            admit_subset(a, len(index), max_states, delta, "determinize")
            name = "{" + ",".join(a.state_name(q) for q, _ in subset) + "}"
            uses[name] = uses.get(name, 0) + 1
            index[key] = out.add_state(name if uses[name] == 1 else f"{name}#{uses[name]}")
            pending.append((index[key], subset))
        return index[key]

    total, start = begin
    out.set_initial(state_of(start), total)
    while pending:
        here, subset = pending.popleft()
        final = construction.final(subset)
        if not s.is_zero(final):
            out.set_final(here, final)
        for label, weight, after in construction.successors(subset):
            out.add_arc(here, state_of(after), label, weight)
    return out


def _sum(s: Any, weights: Any) -> Any:
    total = s.zero
    for w in weights:
        total = s.plus(total, w)
    return total


def _check_budget(max_states: int, delta: float, operation: str) -> None:
    if isinstance(max_states, bool) or not isinstance(max_states, int) or max_states < 1:
        raise ArgumentError(f"{operation}: max_states must be a positive integer, got {max_states!r}")
    if not (isinstance(delta, (int, float)) and delta > 0 and math.isfinite(delta)):
        raise ArgumentError(f"{operation}: delta must be a positive finite number, got {delta!r}")


def is_deterministic(a: WFSA) -> bool:
    """Whether ``a`` has at most one initial state, no epsilon arc, and out of every state labels accepting
    pairwise disjoint sets of symbols (over ``a``'s alphabet).

    Caution:
        ``a`` must be a ``WFSA``; weights play no part (a zero-weight arc still counts).
    """
    from .sparse import array_store, is_deterministic_store

    store = array_store(a)
    if store is not None:
        return is_deterministic_store(a, store)
    if len(a.initial) > 1 or a.has_epsilons:
        return False
    outgoing: list[list[Label]] = [[] for _ in range(a.num_states)]
    for arc in a.arcs:
        outgoing[arc.src].append(arc.label)
    for labels in outgoing:
        if len(labels) > 1:
            parts = minterms(labels, a.alphabet)
            counts = [0] * len(parts)
            for cover in parts.covers:
                for m in cover:
                    counts[m] += 1
            if any(c > 1 for c in counts):
                return False
    return True


class _SubsetNames(LazyNames):
    """The names ``{q1,q2}`` (``#k`` for the k-th subset of the same states) of ``_determinize_store``'s subsets."""

    def __init__(self, base: Any, subsets: list[Any], repeats: list[int]):
        self.base, self.subsets, self.repeats = base, subsets, repeats

    def __len__(self) -> int:
        return len(self.subsets)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        name = "{" + ",".join(self.base[q] for q in self.subsets[index].tolist()) + "}"
        k = self.repeats[index]
        return name if k == 1 else f"{name}#{k}"

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))


def _determinize_store(a: WFSA, store: Any, max_states: int, delta: float) -> WFSA:
    """``determinize`` of an epsilon-free, trimmed automaton whose arcs are in an arc store (symbol labels only), one
    breadth-first level of subsets at a time in arrays: the same subsets, numbering, names, arcs and weights as the
    subset construction above (the same ⊕ sequences, via ``Semiring.scatter_plus`` in arc order). A subset is
    keyed by the bytes of its states and quantised residuals (``Semiring.quantize``), made for all subsets of a level
    of one size at once."""
    import numpy as np

    from .sparse import ArcStore, gather_ranges, store_backed

    s = a.semiring
    total = _sum(s, a.initial.values())
    start = sorted((q, s.divide(w, total)) for q, w in a.initial.items())
    index: dict[Any, int] = {}
    quantized: dict[Any, int] = {}  # residual value -> id of its quantisation key
    key_ids: dict[Any, int] = {}
    same_states: dict[Any, int] = {}  # subsets of the same states so far (for the "#k" names)
    repeats: list[int] = []
    subset_states: list[np.ndarray] = []
    subset_residuals: list[np.ndarray] = []

    def quantize(values: np.ndarray) -> np.ndarray:
        unique, inverse = np.unique(values, return_inverse=True)
        ids = []
        for x in unique.tolist():
            if x not in quantized:
                quantized[x] = key_ids.setdefault(s.quantize(x, delta), len(key_ids))
            ids.append(quantized[x])
        out: np.ndarray = np.array(ids, dtype=np.int64)[inverse.reshape(-1)]
        return out

    def lookup(states: np.ndarray, residuals: np.ndarray, keys: np.ndarray, starts: np.ndarray,
               lengths: np.ndarray) -> np.ndarray:
        """The subset id of each segment ``[starts[g], starts[g] + lengths[g])`` of (states, keys), new ones
        numbered in segment order."""
        out = np.empty(len(starts), dtype=np.int64)
        new: list[tuple[int, Any, Any]] = []  # (segment, key, key of its states) of the subsets not met before
        for size in np.unique(lengths).tolist():
            which = np.flatnonzero(lengths == size)
            cells = starts[which][:, None] + np.arange(size)[None, :]
            rows = np.ascontiguousarray(np.concatenate([states[cells], keys[cells]], axis=1).astype(np.int64))
            byte_rows = rows.view(np.dtype((np.void, rows.shape[1] * 8))).ravel().tolist()
            state_rows = np.ascontiguousarray(rows[:, :size]).view(np.dtype((np.void, size * 8))).ravel().tolist()
            for g, key, state_key in zip(which.tolist(), byte_rows, state_rows):
                found = index.get(key)
                if found is None:
                    new.append((g, key, state_key))
                else:
                    out[g] = found
        for g, key, state_key in sorted(new, key=lambda item: item[0]):  # numbered as the construction meets them
            found = index.get(key)
            if found is None:
                admit_subset(a, len(index), max_states, delta, "determinize")
                found = index[key] = len(subset_states)
                subset_states.append(states[starts[g] : starts[g] + lengths[g]])
                subset_residuals.append(residuals[starts[g] : starts[g] + lengths[g]])
                same_states[state_key] = same_states.get(state_key, 0) + 1
                repeats.append(same_states[state_key])
            out[g] = found
        return out

    first_states = np.array([q for q, _ in start], dtype=np.int64)
    first_residuals = np.array([v for _, v in start], dtype=store.weight.dtype)
    lookup(first_states, first_residuals, quantize(first_residuals), np.zeros(1, dtype=np.int64),
           np.array([len(start)], dtype=np.int64))
    out_src: list[np.ndarray] = []
    out_dst: list[np.ndarray] = []
    out_label: list[np.ndarray] = []
    out_weight: list[np.ndarray] = []
    final: dict[int, Any] = {}
    level = np.zeros(1, dtype=np.int64)
    while level.size:
        sizes = np.array([len(subset_states[k]) for k in level.tolist()], dtype=np.int64)
        sub = np.repeat(np.arange(len(level)), sizes)
        q = np.concatenate([subset_states[k] for k in level.tolist()])
        v = np.concatenate([subset_residuals[k] for k in level.tolist()])
        is_final = store.final[q] != s.zero
        if is_final.any():  # final weights: ⊕ over the subset's final states in order
            weights = s.zeros((len(level),))
            s.scatter_plus(weights, sub[is_final], s.times(v[is_final], store.final[q[is_final]]))
            hit = np.flatnonzero(weights != s.zero)
            final.update(zip(level[hit].tolist(), weights[hit].tolist()))
        arcs = gather_ranges(store.indptr, q)
        if not arcs.size:
            break
        pair = np.repeat(np.arange(len(q)), store.indptr[q + 1] - store.indptr[q])
        a_sub, a_label, a_dst = sub[pair], store.label[arcs], store.dst[arcs]
        a_weight = s.times(v[pair], store.weight[arcs])
        # groups: (subset, label) in order of first appearance (minterm order); cells: (group, destination) likewise
        _, first, group = np.unique(a_sub * (len(store.symbols) + 1) + a_label, return_index=True,
                                    return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        group = rank[group.reshape(-1)]
        _, cell_first, cell = np.unique(group * store.num_states + a_dst, return_index=True, return_inverse=True)
        cell_rank = np.empty(len(cell_first), dtype=np.int64)
        cell_rank[np.argsort(cell_first, kind="stable")] = np.arange(len(cell_first))
        cell = cell_rank[cell.reshape(-1)]
        cells, groups = len(cell_first), len(first)
        u = s.zeros((cells,))
        s.scatter_plus(u, cell, a_weight)  # into[dst], in arc order
        cell_group = np.empty(cells, dtype=np.int64)
        cell_group[cell] = group
        cell_dst = np.empty(cells, dtype=np.int64)
        cell_dst[cell] = a_dst
        weight = s.zeros((groups,))
        s.scatter_plus(weight, cell_group, u)  # ⊕ of into's values, in first-appearance order
        group_sub = np.empty(groups, dtype=np.int64)
        group_sub[group] = a_sub
        group_label = np.empty(groups, dtype=np.int64)
        group_label[group] = a_label
        live_group = weight != s.zero
        live_cell = (u != s.zero) & live_group[cell_group]
        with np.errstate(all="ignore"):
            residual = s._divide(u, weight[cell_group])
        order = np.lexsort((cell_dst, cell_group))
        order = order[live_cell[order]]
        seg_group = cell_group[order]
        live = np.flatnonzero(live_group)
        starts = np.searchsorted(seg_group, live)
        lengths = np.searchsorted(seg_group, live, side="right") - starts
        seg_states, seg_residuals = cell_dst[order], residual[order]
        before = len(subset_states)
        targets = lookup(seg_states, seg_residuals, quantize(seg_residuals), starts, lengths)
        out_src.append(level[group_sub[live]])
        out_dst.append(targets)
        out_label.append(group_label[live])
        out_weight.append(weight[live])
        level = np.arange(before, len(subset_states), dtype=np.int64)
    n = len(subset_states)
    src = np.concatenate(out_src) if out_src else np.zeros(0, dtype=np.int64)
    dst = np.concatenate(out_dst) if out_dst else np.zeros(0, dtype=np.int64)
    label = np.concatenate(out_label) if out_label else np.zeros(0, dtype=np.int64)
    weight_all = np.concatenate(out_weight) if out_weight else s.zeros((0,))
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    initial_vector, final_vector = s.zeros((n,)), s.zeros((n,))
    initial_vector[0] = total
    for k, w in final.items():
        final_vector[k] = w
    names = _SubsetNames(a._names, subset_states, repeats)
    result = ArcStore(
        s, n, indptr, src[order], dst[order], label[order], weight_all[order], np.arange(len(src))[order],
        store.symbols, store.symbol_ids, [], np.full(len(src), -1, dtype=np.int8), initial_vector, final_vector,
        names,
    )
    return store_backed(s, a.alphabet, a.name, names, result, {0: total}, dict(sorted(final.items())))
