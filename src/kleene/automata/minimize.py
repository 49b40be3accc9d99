"""Minimization: partition refinement of deterministic automata, and Schützenberger's linear reduction.

- ``minimize(a)`` (``method="deterministic"``): determinize if needed, push the weights towards the initial state,
  then merge states by Hopcroft's partition refinement, treating each (minterm, quantised weight) pair as a
  letter, as OpenFst does. The result is the minimal deterministic automaton (unique up to state names).
- ``reduce(a)`` (``method="linear"``, real and log): the minimal automaton among all weighted automata, not only
  deterministic ones, by the forward and backward spanning bases of Schützenberger's reduction (Berstel and
  Reutenauer, *Noncommutative Rational Series*, ch. 2): its number of states is the rank of the Hankel matrix.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

import numpy as np

from kleene.errors import ArgumentError, SemiringError, WeightError

from .determinize import (
    DEFAULT_DELTA,
    DEFAULT_MAX_STATES,
    determinize,
    is_deterministic,
    numeric_epsilon_free,
)
from .equivalence import adds_direction
from .minterms import Minterms, minterms
from .push import push
from .weights import Env
from .wfsa import WFSA

Method = Literal["auto", "deterministic", "linear"]


def minimize(
    a: WFSA,
    method: Method = "auto",
    *,
    delta: float = DEFAULT_DELTA,
    max_states: int = DEFAULT_MAX_STATES,
    tolerance: float = 1e-9,
    env: Env | None = None,
) -> WFSA:
    """The minimal automaton giving every string the same score as ``a``.

    ``method="deterministic"`` returns the minimal deterministic automaton: ``a`` is determinized when it is not
    deterministic, pushed towards its initial state, and its states merged by partition refinement on
    (minterm, weight quantised to ``delta``) letters; predicate labels stay predicates. ``method="linear"`` is
    ``reduce(a, tolerance=tolerance)``. ``"auto"`` picks "linear" for semirings that are not zero-sum-free (real)
    and "deterministic" otherwise.

    Caution:
        "deterministic" needs what ``determinize`` and ``push`` need (boolean, min-plus, max-plus, max-times,
        log); "linear" needs real or log weights. Epsilons are removed and the input trimmed first.

    Raises:
        ArgumentError: an unknown ``method``.
        SemiringError, BudgetExceededError, DivergenceError, WeightError: see ``determinize``, ``push``, ``reduce``.
    """
    if method not in ("auto", "deterministic", "linear"):
        raise ArgumentError(f"minimize: method must be 'auto', 'deterministic' or 'linear', got {method!r}")
    if method == "linear" or (method == "auto" and not a.semiring.zero_sum_free):
        return reduce(a, tolerance=tolerance, env=env)
    a = numeric_epsilon_free(a, env, "minimize")
    if not is_deterministic(a):
        a = determinize(a, max_states=max_states, delta=delta)
    s = a.semiring
    from .sparse import array_store

    store = array_store(a)
    arc_weights = store.weight.tolist() if store is not None else [arc.weight for arc in a.arcs]
    weights = arc_weights + list(a.final.values()) + list(a.initial.values())
    if not (s.idempotent and all(w == s.one for w in weights)):  # otherwise pushing changes nothing
        a = push(a, "initial")
    return _merge_equivalent_states(a, delta)


def _merge_equivalent_states(a: WFSA, delta: float) -> WFSA:
    """The quotient of a deterministic, pushed, trimmed automaton by Hopcroft's coarsest stable partition."""
    s = a.semiring
    n = a.num_states
    out = WFSA(s, a.alphabet, a.name)
    if n == 0:
        return out
    from .sparse import array_store

    store = array_store(a)
    if (store is not None
            and (a.alphabet is None or all(x in a.alphabet for x in store.symbols))):
        return _merge_in_arrays(a, store, delta)
    parts = minterms([arc.label for arc in a.arcs], a.alphabet)
    letters: dict[tuple[int, Any], int] = {}
    inverse: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # dst -> (letter, src)
    for arc, cover in zip(a.arcs, parts.covers):
        key = s.quantize(arc.weight, delta)
        for m in cover:
            letter = letters.setdefault((m, key), len(letters))
            inverse[arc.dst].append((letter, arc.src))
    finals: dict[Any, list[int]] = {}
    for q in range(n):
        finals.setdefault(s.quantize(a.final[q], delta) if q in a.final else None, []).append(q)
    block_of = _hopcroft(n, list(finals.values()), inverse)
    return _quotient(a, block_of, parts)


def _quantized_ids(s: Any, values: np.ndarray, delta: float) -> np.ndarray:
    """Per value, an id equal for values whose ``Semiring.quantize`` keys are equal."""
    unique, inverse = np.unique(values, return_inverse=True)
    ids: dict[Any, int] = {}
    key_id = np.array([ids.setdefault(s.quantize(x, delta), len(ids)) for x in unique.tolist()], dtype=np.int64)
    out: np.ndarray = key_id[inverse.reshape(-1)] if unique.size else np.zeros(0, dtype=np.int64)
    return out


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 (a bijection that spreads every input bit over the output)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def _merge_in_arrays(a: WFSA, store: Any, delta: float) -> WFSA:
    """``_merge_equivalent_states`` for a deterministic automaton whose arcs are in an arc store (symbol labels
    only): Moore's refinement in arrays (each round splits blocks by the rows (block, its arcs' (letter, target
    block)) until no block splits: the same coarsest stable partition as Hopcroft's), then the same quotient."""
    from .labels import OneOf
    from .sparse import PREDICATE_ID, ArcStore, store_backed
    from .wfsa import IdNames

    s = a.semiring
    n, m = store.num_states, store.num_arcs
    letter_keys = np.stack([store.label, _quantized_ids(s, store.weight, delta)], axis=1)
    letter = np.unique(letter_keys, axis=0, return_inverse=True)[1].reshape(-1) if m else np.zeros(0, np.int64)
    final_values = np.where(store.final != s.zero, store.final, np.nan).astype(float)
    is_final = ~np.isnan(final_values)
    block = np.zeros(n, dtype=np.int64)
    if is_final.any():
        block[is_final] = 1 + _quantized_ids(s, final_values[is_final], delta)
    block = np.unique(block, return_inverse=True)[1].reshape(-1)
    order = np.lexsort((letter, store.src))
    src, dst, let = store.src[order], store.dst[order], letter[order]
    degree = np.bincount(src, minlength=n)
    width = int(degree.max(initial=0))
    slot = np.arange(m) - np.repeat(np.cumsum(degree) - degree, degree)
    count = len(np.unique(block))
    first_arc = np.cumsum(degree) - degree  # where each state's arcs start (sorted by source, then letter)
    while True:
        # a state's signature: its block and the multiset of its arcs' (letter, target block) ids (one arc per
        # letter: deterministic). States are grouped by a 64-bit hash of it (one sort) and every group is then
        # checked arc by arc against its first state, so that the partition is exact.
        pair = let * count + block[dst]
        digest = _mix(block.astype(np.uint64)) ^ _mix(degree.astype(np.uint64) + np.uint64(1 << 40))
        np.add.at(digest, src, _mix(pair.astype(np.uint64) + np.uint64(1 << 62)))
        _, first, refined = np.unique(digest, return_index=True, return_inverse=True)
        refined = refined.reshape(-1)
        rep = first[refined]
        exact = (np.array_equal(block, block[rep]) and np.array_equal(degree, degree[rep])
                 and np.array_equal(pair, pair[first_arc[rep[src]] + slot]))
        if not exact:  # a hash collision: group the padded rows exactly
            rows = np.full((n, 1 + width), -1, dtype=np.int64)
            rows[:, 0] = block
            rows[src, 1 + slot] = pair
            refined = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
        new_count = int(refined.max(initial=-1)) + 1
        block = refined
        if new_count == count:
            break
        count = new_count
    # the quotient: blocks numbered by their first state, each with its first state's arcs (labels merged per
    # target and weight, as _quotient does)
    first_state = np.full(count, n, dtype=np.int64)
    np.minimum.at(first_state, block, np.arange(n))
    rank = np.empty(count, dtype=np.int64)
    rank[np.argsort(first_state, kind="stable")] = np.arange(count)
    representative = first_state[block] == np.arange(n)
    mine = np.flatnonzero(representative[store.src])
    mine = mine[np.argsort(store.arc_id[mine], kind="stable")]  # arc order, as _quotient walks a.arcs
    q_src, q_dst = rank[block[store.src[mine]]], rank[block[store.dst[mine]]]
    q_weight, q_label = store.weight[mine], store.label[mine]
    firsts = np.sort(first_state)
    names: Any = IdNames(a._names.ids[firsts]) if isinstance(a._names, IdNames) else [
        a._names[q] for q in firsts.tolist()]
    # arcs of one representative to one target block with one weight merge into one arc (OneOf when several):
    # groups of equal (source, target, weight), in order of first appearance
    k_all = len(mine)
    weight_key = (q_weight + 0.0).view(np.int64) if q_weight.dtype == np.float64 else q_weight.astype(np.int64)
    order = np.lexsort((np.arange(k_all), weight_key, q_dst, q_src))
    boundary = np.ones(k_all, dtype=bool)
    boundary[1:] = ((q_src[order][1:] != q_src[order][:-1]) | (q_dst[order][1:] != q_dst[order][:-1])
                    | (weight_key[order][1:] != weight_key[order][:-1]))
    group_sorted = np.cumsum(boundary) - 1
    group = np.empty(k_all, dtype=np.int64)
    group[order] = group_sorted
    leaders = order[boundary]  # the first arc (in arc order) of each group
    sizes = np.bincount(group, minlength=len(leaders))
    by_appearance = np.argsort(leaders, kind="stable")
    out_src, out_dst = q_src[leaders][by_appearance], q_dst[leaders][by_appearance]
    out_weight = q_weight[leaders][by_appearance]
    out_label = q_label[leaders][by_appearance].astype(np.int64)
    out_pred = np.full(len(leaders), -1, dtype=np.int64)
    predicates: list[Any] = []
    multiple = np.flatnonzero(sizes[by_appearance] > 1)
    if multiple.size:  # several symbols to one target with one weight: one OneOf arc, symbols in minterm order
        first_use = {x: i for i, x in reversed(list(enumerate(store.label[np.argsort(store.arc_id)].tolist())))}
        members_of = np.argsort(group, kind="stable")
        starts = np.concatenate([[0], np.cumsum(sizes)])
        for j in multiple.tolist():
            g = int(by_appearance[j])
            ids = sorted((int(q_label[k]) for k in members_of[starts[g] : starts[g + 1]]), key=lambda i: first_use[i])
            out_label[j] = PREDICATE_ID
            out_pred[j] = len(predicates)
            predicates.append(OneOf([store.symbols[i] for i in ids]))
    k = len(out_src)
    src_arr, dst_arr = out_src.astype(np.int64), out_dst.astype(np.int64)
    arc_order = np.argsort(src_arr, kind="stable")
    indptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(src_arr, minlength=count), out=indptr[1:])
    initial = {int(rank[block[q]]): w for q, w in a.initial.items()}
    final = {int(rank[block[q]]): a.final[q] for q in first_state.tolist() if q in a.final}
    quotient = ArcStore(
        s, count, indptr, src_arr[arc_order], dst_arr[arc_order], out_label[arc_order],
        out_weight[arc_order], np.arange(k)[arc_order], store.symbols,
        store.symbol_ids, predicates, out_pred[arc_order], s.zeros((count,)),
        s.zeros((count,)), names,
    )
    for q, w in initial.items():
        quotient.initial[q] = w
    for q, w in final.items():
        quotient.final[q] = w
    return store_backed(s, a.alphabet, a.name, names, quotient, initial, final)


def _hopcroft(n: int, initial: list[list[int]], inverse: list[list[tuple[int, int]]]) -> list[int]:
    """The coarsest partition refining ``initial`` that is stable under every letter (a partial DFA: every block
    starts in the worklist, as Valmari and Lehtinen show it must); returns each state's block."""
    blocks: list[set[int]] = [set(b) for b in initial]
    block_of = [0] * n
    for b, members in enumerate(blocks):
        for q in members:
            block_of[q] = b
    waiting = deque(range(len(blocks)))
    queued = [True] * len(blocks)
    while waiting:
        splitter = waiting.popleft()
        queued[splitter] = False
        by_letter: dict[int, set[int]] = {}
        for q in list(blocks[splitter]):
            for letter, src in inverse[q]:
                by_letter.setdefault(letter, set()).add(src)
        for sources in by_letter.values():
            touched: dict[int, list[int]] = {}
            for q in sources:
                touched.setdefault(block_of[q], []).append(q)
            for b, inside in touched.items():
                if len(inside) == len(blocks[b]):
                    continue
                new = len(blocks)
                blocks.append(set(inside))
                blocks[b].difference_update(inside)
                for q in inside:
                    block_of[q] = new
                if queued[b]:
                    queued.append(True)
                    waiting.append(new)
                else:
                    smaller = new if len(inside) <= len(blocks[b]) else b
                    queued.append(smaller == new)
                    queued[b] = queued[b] or smaller == b
                    waiting.append(smaller)
    return block_of


def _quotient(a: WFSA, block_of: list[int], parts: Minterms) -> WFSA:
    """The automaton of the blocks, each with the arcs of its first state (labels merged per target and weight)."""
    s = a.semiring
    out = WFSA(s, a.alphabet, a.name)
    order: dict[int, int] = {}
    for q in range(a.num_states):
        if block_of[q] not in order:
            order[block_of[q]] = out.add_state(a.state_name(q))
    representative = {b: q for q, b in reversed(list(enumerate(block_of)))}
    grouped: dict[tuple[int, int, Any], list[int]] = {}
    for arc, cover in zip(a.arcs, parts.covers):
        if representative[block_of[arc.src]] == arc.src and cover:
            key = (order[block_of[arc.src]], order[block_of[arc.dst]], arc.weight)
            grouped.setdefault(key, []).extend(cover)
    for (src, dst, weight), cover in grouped.items():
        out.add_arc(src, dst, parts.union(cover), weight)
    for q, w in a.initial.items():
        out.set_initial(order[block_of[q]], w)
    for b, q in representative.items():
        if q in a.final:
            out.set_final(order[b], a.final[q])
    return out


# ----------------------------------------------------------------------------------------
# Schützenberger's reduction


def reduce(a: WFSA, *, tolerance: float = 1e-9, env: Env | None = None) -> WFSA:
    """The minimal weighted automaton of ``a`` (real or log), deterministic or not: its number of states is the
    rank of ``a``'s Hankel matrix.

    The forward vectors ``α M(w)`` of all prefixes span a space; a breadth-first search that extends only the
    prefixes adding a direction finds an orthonormal basis ``F`` of it, and ``(αFᵀ, F M(x) Fᵀ, Fη)`` is an
    equivalent automaton on that basis. The same on the columns ``M(w) η`` of the result gives the minimal one.
    Letters are minterms, so predicate labels are never expanded symbol by symbol. A direction counts as new
    when it leaves the span by more than ``tolerance`` (relative, as in ``equivalent``); coefficients below
    ``tolerance`` times the largest are dropped.

    Caution:
        Needs the real or the log semiring (log weights are reduced as probabilities). The minimal automaton of
        a log automaton may need negative weights, which log cannot hold: then reduce the real automaton.
        Epsilons are removed first; symbolic weights are bound in ``env``.

    Raises:
        SemiringError: another semiring.
        WeightError: symbolic weights without ``env``; a log result with a negative weight.
        DivergenceError: the epsilon closure diverges.
    """
    s = a.semiring
    if not s.has_real_image:
        raise SemiringError(
            f"reduce: the {s.name} semiring has no homomorphism onto the reals; the linear reduction needs real or "
            "log weights"
        )
    if not (isinstance(tolerance, (int, float)) and 0 < tolerance < 1):
        raise ArgumentError(f"reduce: tolerance must be in (0, 1), got {tolerance!r}")
    a = numeric_epsilon_free(a, env, "reduce")
    n = a.num_states
    parts = minterms([arc.label for arc in a.arcs], a.alphabet)
    matrices = [np.zeros((n, n)) for _ in range(len(parts))]
    for arc, cover in zip(a.arcs, parts.covers):
        for m in cover:
            matrices[m][arc.src, arc.dst] += s.to_real(arc.weight)
    initial, final = np.zeros(n), np.zeros(n)
    for q, w in a.initial.items():
        initial[q] = s.to_real(w)
    for q, w in a.final.items():
        final[q] = s.to_real(w)
    # forward: the span of the rows alpha M(w); then backward: the span of the columns M(w) eta, as rows of the
    # transposed automaton
    # transposed automaton; a pass whose span is the whole space changes nothing and is skipped (so that an
    # automaton that is already minimal comes back with its own weights)
    reduced = False
    for transpose in (False, True):
        if transpose:
            basis = _spanning_basis(final, [m.T for m in matrices], tolerance)
        else:
            basis = _spanning_basis(initial, matrices, tolerance)
        if basis.shape[0] < initial.shape[0]:
            initial, final = initial @ basis.T, basis @ final
            matrices = [basis @ m @ basis.T for m in matrices]
            reduced = True
    if not reduced:
        return a
    try:
        return _from_matrices(a, parts, initial, matrices, final, tolerance)
    except WeightError as exc:
        raise WeightError(
            f"reduce: the minimal automaton has a weight the {s.name} semiring cannot hold ({exc}); "
            "reduce the automaton over the real semiring"
        ) from None


def _spanning_basis(start: np.ndarray, matrices: list[np.ndarray], tolerance: float) -> np.ndarray:
    """An orthonormal basis (as rows) of the span of ``start M(w)`` over all words ``w``."""
    basis: list[np.ndarray] = []
    pending = deque([start])
    while pending:
        vector = pending.popleft()
        if adds_direction(basis, vector, tolerance):
            pending.extend(vector @ m for m in matrices)
    size = start.shape[0]
    return np.array(basis) if basis else np.zeros((0, size))


def _from_matrices(
    a: WFSA, parts: Minterms, initial: np.ndarray, matrices: list[np.ndarray], final: np.ndarray, tolerance: float
) -> WFSA:
    s = a.semiring
    k = initial.shape[0]
    scale = max([float(np.max(np.abs(x))) for x in (initial, final, *matrices) if x.size] + [0.0])
    floor = tolerance * scale

    def weight(x: float) -> Any:
        return s.from_real(float(x))

    out = WFSA(s, a.alphabet, a.name)
    for i in range(k):
        out.add_state(f"r{i}")
    for i in range(k):
        for j in range(k):
            grouped: dict[float, list[int]] = {}
            for m, matrix in enumerate(matrices):
                if abs(matrix[i, j]) > floor:
                    grouped.setdefault(float(matrix[i, j]), []).append(m)
            for value, cover in grouped.items():
                out.add_arc(i, j, parts.union(cover), weight(value))
    for i in range(k):
        if abs(initial[i]) > floor:
            out.set_initial(i, weight(initial[i]))
        if abs(final[i]) > floor:
            out.set_final(i, weight(final[i]))
    return out
