"""Algorithms on one WFSA, each written once against the Semiring interface.

- ``closure_matrix``: the Kleene star of a matrix (exact, or capped at k terms).
- ``score``: the Forward algorithm, with epsilon arcs (cycles included).
- ``viterbi``: the best single path with a backtrace naming every arc.
- ``all_spans``: SoPa's search score over every non-empty substring.
- ``pathsum``: the semiring sum over all strings (shortest distance).
- ``score_symbolic``: the Forward score as a sympy expression.

Epsilon semantics: a path may take epsilon arcs at the start and after each
consumed symbol. ``epsilon_cap=None`` allows any number (the exact closure
``E*``); ``epsilon_cap=k`` allows at most k in a row (``I + E + ... + E^k``;
k=1 is SoPa's first-order ``I + T(eps)``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from kleene.automata.binding import bind_with_origins
from kleene.automata.closure import check_epsilon_cap, epsilon_closure_rows
from kleene.automata.recursion import MatrixStepper, SymbolicArrays, run_forward
from kleene.automata.semiring import Semiring, sympy_constant
from kleene.automata.sparse import (
    EPSILON_ID,
    NO_LABEL,
    PREDICATE_ID,
    SPARSE_MIN_STATES,
    ArcStore,
    ClosureRows,
    IntArray,
    LabelArc,
    csr_index,
    gather_ranges,
    plain,
    require_store,
)
from kleene.automata.star import closure_matrix as closure_matrix  # re-exported: kleene.compile.reference
from kleene.automata.weights import Env, instantiate, is_symbolic
from kleene.automata.wfsa import WFSA, Arc
from kleene.errors import AlphabetError, ArgumentError, BudgetExceededError, DivergenceError, WeightError

# ----------------------------------------------------------------------------------------
# Forward


def _useful_states(wfsa: WFSA, symbols: Sequence[Hashable]) -> np.ndarray:
    """The (Q,) mask of the states on some successful path deriving ``symbols`` (``useful_for_string`` over the
    arcs of non-zero weight; symbolic weights count as non-zero)."""
    from .sparse import useful_for_string

    arcs, src, dst, starts, ends = _nonzero_graph(wfsa)
    consumes = np.fromiter((a.label.consumes for a in arcs), dtype=bool, count=len(arcs))

    def matching(x: Hashable) -> np.ndarray:
        return np.fromiter((a.label.consumes and _matches(a, x) for a in arcs), dtype=bool, count=len(arcs))

    return useful_for_string(src, dst, consumes, matching, wfsa.num_states, starts, ends, symbols)


def _nonzero_graph(wfsa: WFSA) -> tuple[list[Arc], IntArray, IntArray, np.ndarray, np.ndarray]:
    """The arcs of ``wfsa`` of non-zero weight (symbolic weights count as non-zero), their sources and
    destinations as arrays, and the (Q,) masks of the states of non-zero initial and final weight."""
    s = wfsa.semiring

    def nonzero(weight: Any) -> bool:
        return is_symbolic(weight) or not s.is_zero(weight)

    arcs = [arc for arc in wfsa.arcs if nonzero(arc.weight)]
    src = np.fromiter((a.src for a in arcs), dtype=np.int64, count=len(arcs))
    dst = np.fromiter((a.dst for a in arcs), dtype=np.int64, count=len(arcs))
    starts, ends = (np.zeros(wfsa.num_states, dtype=bool) for _ in range(2))
    starts[[q for q, w in wfsa.initial.items() if nonzero(w)]] = True
    ends[[q for q, w in wfsa.final.items() if nonzero(w)]] = True
    return arcs, src, dst, starts, ends


def _matches(arc: Arc, symbol: Hashable) -> bool:
    try:
        return bool(arc.label.matches(symbol))
    except TypeError:  # an unhashable symbol matches no set-valued label
        return False


def _dense_closure(
    wfsa: WFSA, env: Env | None, epsilon_cap: int | None, symbols: Sequence[Hashable] | None = None
) -> np.ndarray | None:
    """The (Q, Q) epsilon closure Forward's dense steps read (None without epsilon arcs): only cycles on a successful
    path of ``symbols`` (None: of any string) may diverge.

    Without symbolic epsilon weights the closure does not depend on ``env``: the closure where the cycles of every
    useful state count (``useful_mask``) is computed once per automaton and cap (``WFSA.memo``), and read for every
    string; it agrees with each string's own closure on the states useful for that string (an epsilon path between
    two of them stays among them), and the other states add nothing to the score. Only where it diverges is the
    closure computed again for the string, without the arcs of the states useful for none of its paths.

    Caution:
        Symbolic epsilon weights are evaluated in ``env`` at every call (nothing is cached: ``env`` may change).
        The cached closure is a dense (Q, Q) array, held as long as the automaton (and not changed).

    Raises:
        DivergenceError: a cycle on a successful path of ``symbols`` (of any string, for None) diverges.
    """
    if not wfsa.has_epsilons:
        return None
    s = wfsa.semiring

    def string_useful() -> np.ndarray:
        return useful_mask(wfsa) if symbols is None else _useful_states(wfsa, symbols)

    if wfsa.memo("symbolic epsilon weights", lambda: any(is_symbolic(a.weight) for a in wfsa.arcs
                                                         if not a.label.consumes)):
        return epsilon_closure_rows(wfsa, epsilon_cap, env, useful=string_useful).dense(s)

    def whole() -> np.ndarray | None:
        try:
            rows = epsilon_closure_rows(wfsa, epsilon_cap, env, useful=lambda: useful_mask(wfsa))
        except DivergenceError:
            return None
        return _read_only(rows.dense(s))

    closure: np.ndarray | None = wfsa.memo(("epsilon closure", epsilon_cap), whole)
    if closure is None:  # a useful state's cycle diverges: does one on a successful path of the string?
        closure = epsilon_closure_rows(wfsa, epsilon_cap, env, live=string_useful()).dense(s)
    return closure


#: The most transition matrices ``score`` keeps per constant-weight automaton (``WFSA.memo``): at most 32 KiB each
#: (64 x 64 float64; larger automata take the arc store). The symbols read after them are cached per call only.
SHARED_MATRICES = 256


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


class _Stepper(MatrixStepper):
    """Forward's dense steps for one automaton: per-symbol transition matrices (symbolic weights bound by ``env``)
    and the epsilon closure (``_dense_closure``: only cycles on a successful path of ``symbols``, when given, may
    diverge).

    Caution:
        With constant weights, the initial and final vectors and the matrices of the first ``SHARED_MATRICES``
        symbols read are computed once per automaton (``WFSA.memo``, read-only arrays) and read by every call;
        symbolic weights are evaluated in ``env`` by each stepper (its own matrices, or those of ``matrices``: a
        dict kept by the caller for steppers of the same automaton and ``env``, such as one batch's).
    """

    def __init__(
        self, wfsa: WFSA, env: Env | None, epsilon_cap: int | None, symbols: Sequence[Hashable] | None = None,
        matrices: dict[Hashable, np.ndarray] | None = None,
    ):
        self.wfsa, self.env = wfsa, env
        self._own: dict[Hashable, np.ndarray] = {}
        closure = _dense_closure(wfsa, env, epsilon_cap, symbols)
        if wfsa.memo("symbolic weights", lambda: wfsa.is_symbolic):
            self._shared: dict[Hashable, np.ndarray] = self._own if matrices is None else matrices
            initial, final = wfsa.vector(wfsa.initial, env), wfsa.vector(wfsa.final, env)
        else:  # nothing depends on env
            self._shared = wfsa.memo("transition matrices", dict)
            initial = wfsa.memo("initial vector", lambda: _read_only(wfsa.vector(wfsa.initial)))
            final = wfsa.memo("final vector", lambda: _read_only(wfsa.vector(wfsa.final)))
        super().__init__(wfsa.semiring, initial, final, closure, self._matrix)

    def _matrix(self, symbol: Hashable, position: int) -> np.ndarray:
        self.wfsa.check_symbol(symbol, position)
        try:
            found = self._shared.get(symbol)
            if found is None:
                found = self._own.get(symbol)
        except TypeError:  # unhashable symbol
            return self.wfsa.transition_matrix(symbol, self.env)
        if found is None:
            found = _read_only(self.wfsa.transition_matrix(symbol, self.env))
            (self._shared if len(self._shared) < SHARED_MATRICES else self._own)[symbol] = found
        return found


def _stepper(wfsa: WFSA, env: Env | None, epsilon_cap: int | None, symbols: Sequence[Hashable] | None = None) -> Any:
    """The sparse stepper for large constant-weight automata, else the dense one."""
    from kleene.automata.sparse import engine_store

    store = engine_store(wfsa)
    return _Stepper(wfsa, env, epsilon_cap, symbols) if store is None else SparseStepper(wfsa, store, epsilon_cap)


def forward(stepper: Any, symbols: Sequence[Hashable]) -> Any:
    """The Forward score ``finish(step(...step(start(), x1)..., xn))`` by ``recursion.run_forward``, the one
    recursion of kleene.automata, as a plain value.

    ``stepper`` is a strategy with ``start()``, ``step(vector, symbol, position)`` and ``finish(vector)``: dense
    matrices (``_Stepper``: any weights, with ``env``; sympy cells: ``_SymbolicStepper``) or the arc store
    (``SparseStepper``); each uses its semiring's operations only.
    """
    vector, _ = run_forward(stepper, stepper.semiring, symbols)
    return plain(stepper.finish(vector))


#: The most entries (per arc of the store, at least ``CLOSURE_ROWS_MIN``) that the exact epsilon closure of the
#: useful states may hold for Forward to read it as rows; a larger one is walked a component level at a time.
CLOSURE_ROWS_PER_ARC, CLOSURE_ROWS_MIN = 4, 1_000_000


def _exact_rows(wfsa: WFSA, store: ArcStore) -> ClosureRows | None:
    """The rows of ``E*`` for the epsilon arcs between useful states; None when a useful component's star diverges
    (then only the components a string reaches may count) or the rows outgrow their budget."""
    budget = max(CLOSURE_ROWS_MIN, CLOSURE_ROWS_PER_ARC * store.num_arcs)
    try:
        return epsilon_closure_rows(wfsa, live=store.useful(), budget=budget)
    except (DivergenceError, BudgetExceededError):
        return None


class SparseStepper:
    """The Forward algorithm's steps on the sparse store (same interface as the dense stepper).

    Caution:
        Constant weights only. Epsilon closures are exact (``epsilon_cap=None``) or capped at k arcs in a row;
        either is read as closure rows (computed once per store) where they exist, else the exact one walks the
        epsilon graph's components from the vector's support (which raises only for a divergent component the
        vector reaches).
    """

    def __init__(self, wfsa: WFSA, store: ArcStore, epsilon_cap: int | None, live: np.ndarray | None = None):
        """``live``: the states whose epsilon cycles count (default: the useful ones)."""
        check_epsilon_cap(epsilon_cap, "SparseStepper")
        self.wfsa, self.store, self.cap = wfsa, store, epsilon_cap
        self.semiring = store.semiring
        self.has_epsilons = bool(store.arcs_with_label(EPSILON_ID).size)
        self.epsilons = None
        self.rows: ClosureRows | None = None
        if self.has_epsilons and epsilon_cap is not None:
            self.rows = store.memo(f"closure capped at {epsilon_cap}", lambda: epsilon_closure_rows(wfsa, epsilon_cap))
        elif self.has_epsilons and live is None:
            self.rows = store.memo("exact closure", lambda: _exact_rows(wfsa, store))
        if self.has_epsilons and self.rows is None:
            self.epsilons = store.graph("epsilon") if live is None else store.epsilon_graph(live)

    def close(self, vector: np.ndarray) -> np.ndarray:
        if self.epsilons is not None:
            return self.epsilons.close(vector)
        if self.rows is None:
            return vector
        s = self.semiring
        active = np.flatnonzero(vector != s.zero)
        owner, cols, vals = self.rows.expand(active)
        out: np.ndarray = s.segment_sum(s.times(vector[active][owner], vals), cols, len(vector))
        return out

    def start(self) -> np.ndarray:
        return self.close(self.store.initial.copy())

    def step(self, vector: np.ndarray, symbol: Hashable, position: int) -> np.ndarray:
        self.wfsa.check_symbol(symbol, position)
        s, store = self.semiring, self.store
        active = np.flatnonzero(vector != s.zero)
        if active.size * 4 * max(1, store.num_arcs // max(1, store.num_states)) < store.num_arcs // max(
            1, len(store.symbols)
        ):  # a small frontier: its own arcs (CSR by source), filtered by label
            arcs = gather_ranges(store.indptr, active)
            arcs = arcs[store.matches_mask(symbol, arcs)]
        else:  # a large frontier: the symbol's arcs
            arcs = store.matching(symbol)
            arcs = arcs[vector[store.src[arcs]] != s.zero]
        src = store.src[arcs]
        out = s.segment_sum(s.times(vector[src], store.weight[arcs]), store.dst[arcs], store.num_states)
        return self.close(out)

    def finish(self, vector: np.ndarray) -> Any:
        s = self.semiring
        return s.sum(s.times(vector, self.store.final), axis=0)


def score_on_store(wfsa: WFSA, symbols: Sequence[Hashable], epsilon_cap: int | None = None) -> Any:
    """The Forward score of ``symbols`` on the arc store (see ``score``).

    Without useful epsilon arcs and predicate labels, a frontier of at most ``SMALL_FRONTIER`` states is advanced
    in plain Python over per-state label tables (built from the CSR arrays as states are first visited), which
    costs microseconds per symbol where vectorised steps cost tens; larger frontiers take ``score_batch_on_store``.
    """
    store = require_store(wfsa)
    if not store.predicates:
        for i, x in enumerate(symbols):
            wfsa.check_symbol(x, i)
        if not store.useful_epsilons():
            small = _forward_small(store, symbols)
            if small is not None:
                return small
    return score_batch_on_store(wfsa, [symbols], epsilon_cap)[0]


#: The largest frontier ``forward`` advances in plain Python.
SMALL_FRONTIER = 64


def _small_label(store: ArcStore, x: Hashable) -> int | None:
    """The label id the small-frontier searches (``_forward_small``, ``_viterbi_small``) step on for symbol ``x``:
    ``NO_LABEL`` for a symbol the store does not name (no path), None for an unhashable one (the searches then leave
    the string to the array searches)."""
    try:
        return store.symbol_ids.get(x, NO_LABEL)
    except TypeError:
        return None


def _forward_small(store: ArcStore, symbols: Sequence[Hashable]) -> Any:
    """``score_on_store`` with frontiers of at most ``SMALL_FRONTIER`` useful states as {state: weight} dicts; None
    when a frontier grows larger (or a symbol is unhashable)."""
    s = store.semiring
    plus, times = s.plus, s.times
    useful = store.useful()
    tables = store.label_tables()
    frontier: dict[int, Any] = {q: w for q, w in store.initial_items() if useful[q]}
    for x in symbols:
        ident = _small_label(store, x)
        if ident is None:
            return None
        if ident == NO_LABEL:
            return plain(s.zero)
        nxt: dict[int, Any] = {}
        for q, w in frontier.items():
            table = tables.get(q)
            if table is None:
                table = tables[q] = store.label_table(q, useful)
            for d, aw, _, _ in table.get(ident, ()):
                v = times(w, aw)
                nxt[d] = plus(nxt[d], v) if d in nxt else v
        frontier = {q: w for q, w in nxt.items() if w != s.zero}
        if len(frontier) > SMALL_FRONTIER:
            return None
    total = s.zero
    final = store.final
    for q, w in frontier.items():
        rho = final[q].item()
        if rho != s.zero:
            total = plus(total, times(w, rho))
    return plain(total)


def score_batch_on_store(
    wfsa: WFSA, strings: Sequence[Sequence[Hashable]], epsilon_cap: int | None = None
) -> list[Any]:
    """The Forward score of each string of ``strings`` on the arc store, in one pass over positions.

    Without epsilon arcs on useful states the strings advance together: the frontier is the (string, state, weight)
    triples of all strings at one position, each step one vectorised gather of the frontier states' arcs (CSR by
    source), a label filter and a plus-reduction per (string, destination); only useful states are kept (the others
    carry no successful path). With epsilon arcs, on automata of fewer than ``SPARSE_MIN_STATES`` states (where
    stepping each string costs mostly per-call overhead), the frontier is closed after each step by the rows of
    the closure (exact or capped: ``SparseStepper``'s, computed once per store); on larger ones, and where the exact
    closure of the useful states diverges or outgrows its budget, each string runs the stepper (only cycles on its
    own successful paths may diverge).

    Caution:
        Constant weights only.

    Raises:
        AlphabetError: a symbol outside the alphabet (naming it, its position and the string's index).
        DivergenceError: an exact epsilon closure diverges on a successful path.
    """
    store = require_store(wfsa)
    strings = list(strings)
    for b, string in enumerate(strings):
        for i, x in enumerate(string):
            try:
                wfsa.check_symbol(x, i)
            except AlphabetError as exc:
                raise AlphabetError(f"{exc} (string {b} of the batch)" if len(strings) > 1 else str(exc)) from None
    useful = store.useful()
    has_epsilons = store.useful_epsilons()
    distinct: dict[Hashable, int] = {}
    try:
        codes = [[distinct.setdefault(x, len(distinct)) for x in string] for string in strings]
    except TypeError:  # an unhashable symbol: the per-string stepper matches it against predicates
        codes = None
    stepper = None if codes is None or not has_epsilons else SparseStepper(wfsa, store, epsilon_cap)
    if codes is not None and (
        stepper is None or (stepper.rows is not None and store.num_states < SPARSE_MIN_STATES)
    ):  # no useful epsilon arc, or a small automaton's closure (exact or capped): the strings advance together
        return _forward_together(store, useful, codes, list(distinct), None if stepper is None else stepper.rows)
    # per string: an unhashable symbol, a larger automaton's closure (its frontiers may be large: the stepper's
    # steps read only the symbol's arcs), or an exact closure that diverges or outgrows its budget
    stepper = stepper or SparseStepper(wfsa, store, epsilon_cap)
    out = []
    for string in strings:
        try:
            out.append(forward(stepper, string))
        except DivergenceError:  # only cycles on a successful path of this string may diverge
            out.append(forward(SparseStepper(wfsa, store, epsilon_cap, store.useful_for(string)), string))
    return out


def _forward_together(
    store: ArcStore, useful: np.ndarray, codes: list[list[int]], symbols: list[Hashable],
    closure: ClosureRows | None = None,
) -> list[Any]:
    """``score_batch_on_store`` with the strings advancing together: ``codes[b]`` is string b as indices into
    ``symbols``; ``closure``: the rows of the epsilon closure, applied to the start and after each step (None: no
    useful epsilon arc)."""
    s, n = store.semiring, store.num_states
    count = len(codes)
    lengths = np.fromiter((len(c) for c in codes), dtype=np.int64, count=count)
    longest = int(lengths.max(initial=0))
    padded = np.full((count, longest), -1, dtype=np.int64)
    for b, c in enumerate(codes):
        padded[b, : len(c)] = c
    direct = np.array([store.symbol_ids.get(x, NO_LABEL) for x in symbols], dtype=np.int64)
    accepts = (np.array([[p.matches(x) for x in symbols] for p in store.predicates], dtype=bool)
               if store.predicates and symbols else None)
    result = s.zeros((count,))
    starts = np.flatnonzero((store.initial != s.zero) & useful)
    strings = np.repeat(np.arange(count, dtype=np.int64), len(starts))
    states = np.tile(starts, count)
    weights = np.tile(store.initial[starts], count)

    def merged(strings: np.ndarray, states: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
        """The (string, state) pairs summed (sorted by string, then state), zeros dropped."""
        keys = strings * n + states
        unique, inverse = np.unique(keys, return_inverse=True)
        sums = s.segment_sum(values, inverse.reshape(-1), len(unique))
        live = sums != s.zero
        return unique[live] // n, unique[live] % n, sums[live]

    def close(strings: np.ndarray, states: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
        if closure is None:
            return strings, states, weights
        owner, cols, vals = closure.expand(states)
        keep = useful[cols]
        owner, cols, vals = owner[keep], cols[keep], vals[keep]
        return merged(strings[owner], cols, s.times(weights[owner], vals))

    strings, states, weights = close(strings, states, weights)
    for t in range(longest + 1):
        done = lengths[strings] == t
        if done.any():
            ends = s.times(weights[done], store.final[states[done]])
            s.scatter_plus(result, strings[done], ends)
            strings, states, weights = strings[~done], states[~done], weights[~done]
        if t == longest or not strings.size:
            break
        arcs = gather_ranges(store.indptr, states)
        pair = np.repeat(np.arange(len(states)), store.indptr[states + 1] - store.indptr[states])
        code = padded[strings[pair], t]
        labels = store.label[arcs]
        hit = labels == direct[code]
        if accepts is not None:
            hit |= (labels == PREDICATE_ID) & accepts[np.maximum(store.predicate_of[arcs], 0), code]
        dst = store.dst[arcs]
        hit &= useful[dst]
        arcs, pair, dst = arcs[hit], pair[hit], dst[hit]
        strings, states, weights = close(*merged(strings[pair], dst, s.times(weights[pair], store.weight[arcs])))
    return [plain(x) for x in result]




def score(wfsa: WFSA, symbols: Sequence[Hashable], env: Env | None = None, epsilon_cap: int | None = None) -> Any:
    """The Forward score of ``symbols``: the semiring sum over all paths deriving it.

    Note:
        Symbolic weights need ``env`` (see ``kleene.automata.weights.evaluate``).

    Caution:
        Scoring many strings on one automaton computes its epsilon closure once per ``epsilon_cap`` (where no
        epsilon weight is symbolic) and, with constant weights, its vectors and matrices once: they are kept with
        the automaton (``WFSA.memo``; large constant-weight automata: the arc store) until it changes. Replacing
        an arc in place (``a.arcs[i] = arc``) is not seen: assign ``a.arcs`` instead.

    Raises:
        AlphabetError: a symbol outside the declared alphabet (named, with its position).
        DivergenceError: the exact epsilon closure diverges on a successful path of ``symbols`` (cycles off
            every such path do not count, as after ``trim``).
    """
    check_epsilon_cap(epsilon_cap, "score")
    from kleene.automata.sparse import engine_store

    if engine_store(wfsa) is not None:
        return score_on_store(wfsa, symbols, epsilon_cap)
    return forward(_Stepper(wfsa, env, epsilon_cap, symbols), symbols)


def score_batch(
    wfsa: WFSA, strings: Sequence[Sequence[Hashable]], env: Env | None = None, epsilon_cap: int | None = None
) -> list[Any]:
    """``[score(wfsa, s) for s in strings]`` in one call: constant-weight automata without useful epsilon arcs
    advance all strings together on the arc store (see ``score_batch_on_store``); others score each string (with
    symbolic weights, each symbol's matrix evaluated in ``env`` once per batch). An empty batch gives an empty list.

    Raises:
        ArgumentError: ``strings`` is not a sequence of symbol sequences.
        AlphabetError: a symbol outside the alphabet (naming it, its position and its string's index).
        DivergenceError: as ``score``.
    """
    check_epsilon_cap(epsilon_cap, "score_batch")
    from kleene.automata.sparse import arc_store

    if isinstance(strings, str | bytes) or not isinstance(strings, Sequence):
        got = type(strings).__name__
        raise ArgumentError(f"score_batch: strings must be a sequence of symbol sequences; got {got}")
    for b, string in enumerate(strings):
        if not isinstance(string, Sequence):
            raise ArgumentError(f"score_batch: strings[{b}] must be a sequence of symbols; got {string!r}")
    if not strings:
        return []
    if arc_store(wfsa) is not None:
        return score_batch_on_store(wfsa, strings, epsilon_cap)
    matrices: dict[Hashable, np.ndarray] = {}  # symbolic weights: score's steps, with matrices shared by the batch
    return [forward(_Stepper(wfsa, env, epsilon_cap, string, matrices), string) for string in strings]


@dataclass(frozen=True)
class SpanScores:
    """SoPa's search score: ``total`` over all non-empty spans, ``ends[t]`` over spans ending at t+1."""

    total: Any
    ends: list[Any]


def all_spans(
    wfsa: WFSA, symbols: Sequence[Hashable], env: Env | None = None, epsilon_cap: int | None = None
) -> SpanScores:
    """The semiring sum of ``score(symbols[i:j])`` over all ``0 <= i < j <= n``.

    In the real semiring this is the expected count of matches; in max semirings
    the best match. ``ends[j-1]`` sums the spans ending at ``j``.

    Raises:
        ArgumentError: ``epsilon_cap`` is neither None nor an integer >= 0.
        AlphabetError: a symbol outside the declared alphabet (named, with its position).
    """
    check_epsilon_cap(epsilon_cap, "all_spans")
    stepper = _stepper(wfsa, env, epsilon_cap)
    s = wfsa.semiring
    restart = stepper.start()
    live = s.zeros((wfsa.num_states,))
    total, ends = s.zero, []
    for i, x in enumerate(symbols):
        live = stepper.step(s.plus(live, restart), x, i)
        end = plain(stepper.finish(live))
        ends.append(end)
        total = s.plus(total, end)
    return SpanScores(plain(total), ends)


def pathsum(wfsa: WFSA, env: Env | None = None, epsilon_cap: int | None = None) -> Any:
    """The semiring sum of the scores of all strings: ``lambda (E + sum_a T(a))* rho``.

    With ``epsilon_cap=k``, paths take at most k epsilon arcs in a row (as in ``score``):
    ``lambda C (T C)* rho`` with ``C = I + E + ... + E^k`` and ``T = sum_a T(a)``.
    Only cycles on some successful path can make the sum diverge.

    Raises:
        DivergenceError: the sum diverges (naming a cycle).
        AlphabetError: predicate labels with no alphabet to enumerate.
    """
    check_epsilon_cap(epsilon_cap, "pathsum")
    from . import sparse

    if sparse.arc_store(wfsa) is None:  # symbolic weights: evaluated in env first, then the one sum
        wfsa = bind_with_origins(wfsa, env)[0]
    if epsilon_cap is not None and wfsa.has_epsilons:  # the sum over the epsilon-free automaton of the capped closure
        wfsa = sparse.remove_epsilon_store(wfsa, require_store(wfsa), epsilon_closure_rows(wfsa, epsilon_cap))
    return sparse.pathsum(wfsa)


def useful_mask(wfsa: WFSA) -> np.ndarray:
    """The (Q,) mask of the useful states of ``wfsa``: accessible from an initial state and co-accessible to a final
    one along arcs of non-zero weight (symbolic weights count as non-zero), as ``trim`` keeps them. Only the cycles
    of these states can make a score, pathsum or closure diverge. Do not modify the result (it may be cached)."""
    from .sparse import arc_store, useful_states

    store = arc_store(wfsa)
    if store is not None:
        return store.useful()
    _, src, dst, starts, ends = _nonzero_graph(wfsa)
    return useful_states(src, dst, wfsa.num_states, starts, ends)


# ----------------------------------------------------------------------------------------
# Viterbi


@dataclass(frozen=True)
class Step:
    """One arc of a path: which arc, between which states, consuming what."""

    arc: int
    src: str
    dst: str
    kind: str  # "main", "self-loop" or "epsilon"
    symbol: Hashable | None
    weight: Any

    def __str__(self) -> str:
        consumed = "ε" if self.symbol is None else repr(self.symbol)
        return f"{self.src} -[{consumed} / {self.weight:.4g} ({self.kind})]-> {self.dst}"


@dataclass(frozen=True)
class ViterbiPath:
    """The best path: its weight (semiring zero when none exists) and its arcs."""

    weight: Any
    steps: list[Step] = field(default_factory=list)
    start: str | None = None
    end: str | None = None

    @property
    def found(self) -> bool:
        return self.start is not None

    def __str__(self) -> str:
        if not self.found:
            return "no path"
        lines = [f"weight {self.weight:.6g}: start at {self.start}"]
        lines += [f"  {step}" for step in self.steps]
        lines.append(f"  end at {self.end}")
        return "\n".join(lines)


def viterbi(
    wfsa: WFSA, symbols: Sequence[Hashable], env: Env | None = None, epsilon_cap: int | None = None
) -> ViterbiPath:
    """The best single path deriving ``symbols`` under the semiring's Viterbi order.

    The order is that of ``semiring.viterbi`` (max-times for real, max-plus for
    log, the semiring itself when idempotent). Path weights are semiring products.

    Raises:
        WeightError: a negative arc weight in the real semiring (no max-times order).
        DivergenceError: an epsilon cycle improves paths without bound (exact mode).
    """
    check_epsilon_cap(epsilon_cap, "viterbi")
    from .sparse import arc_store

    if arc_store(wfsa) is not None:
        path: ViterbiPath = viterbi_of_store(wfsa, symbols, epsilon_cap)
        return path
    # symbolic weights: evaluated in env first, then the one search; the steps name the arcs of ``wfsa``
    bound, origins = bind_with_origins(wfsa, env)
    path = viterbi_of_store(bound, symbols, epsilon_cap)
    steps = [Step(origins[step.arc], step.src, step.dst, step.kind, step.symbol, step.weight) for step in path.steps]
    return ViterbiPath(path.weight, steps, path.start, path.end)


# ----------------------------------------------------------------------------------------
# Viterbi on the arc store


@dataclass
class _Layer:
    """The best paths into the states of one position: states (ascending), weights, and the stored arc that set each
    (-1: none); ``rounds`` keeps, per round of the epsilon relaxation (round 0: before it), the states it set and
    their arcs, so that a backtrace follows each arc from its source's value at that round (a path may pass a state
    twice, or stop short of its source's later improvements, when the relaxation is capped)."""

    states: IntArray
    weights: np.ndarray
    arcs: IntArray
    rounds: list[tuple[IntArray, IntArray]] = field(default_factory=list)

    def pointer(self, q: int, last: int) -> tuple[int, int]:
        """The arc that set state q's value as of round ``last``, and the round that set it."""
        for r in range(min(last, len(self.rounds) - 1), -1, -1):
            states, arcs = self.rounds[r]
            i = int(np.searchsorted(states, q))
            if i < len(states) and int(states[i]) == q:
                return int(arcs[i]), r
        raise AssertionError(f"state {q} has no value in its layer")  # the search only backtraces states it set


#: Up to this many states, Viterbi's layers are read by a pass over every state (cheaper than sorting the few
#: touched ones); above it, in time proportional to what a position touches.
DENSE_LAYER_STATES = 8192


#: Up to this many candidates, ``_best_per_destination`` first checks whether each has its own destination.
DISTINCT_CHECK = 64


def _best_per_destination(
    v: Semiring, dst: IntArray, candidate: np.ndarray, arc_id: IntArray, positions: IntArray, n: int
) -> tuple[IntArray, np.ndarray, IntArray]:
    """Per destination (ascending) the best candidate and, among equal ones, the arc first in ``wfsa.arcs`` order;
    in time proportional to the candidates (few of them: a sort) or to the n states (many: a scatter)."""
    if len(dst) <= DISTINCT_CHECK:  # few candidates, often one per destination: then a sort is the whole answer
        order = np.argsort(dst, kind="stable")
        ordered = dst[order]
        if not np.any(ordered[1:] == ordered[:-1]):
            return ordered, candidate[order], positions[order]
    if 16 * len(dst) < n and n > DENSE_LAYER_STATES:
        states, inverse = np.unique(dst, return_inverse=True)
        inverse = inverse.reshape(-1)
    else:
        reached = np.zeros(n, dtype=bool)
        reached[dst] = True
        states = np.flatnonzero(reached)
        inverse = np.cumsum(reached)[dst] - 1
    best = v.segment_sum(candidate, inverse, len(states))
    hit = candidate == best[inverse]
    inverse, arc_id, positions = inverse[hit], arc_id[hit], positions[hit]
    order = np.lexsort((arc_id, inverse))
    inverse, positions = inverse[order], positions[order]
    first = np.ones(len(inverse), dtype=bool)
    first[1:] = inverse[1:] != inverse[:-1]
    return states, best, positions[first]


#: Up to this many epsilon arcs out of every state, Viterbi reads a state's epsilon arcs from a padded table.
PADDED_EPSILONS = 4


class _ViterbiArcs:
    """What every Viterbi search of one store over the states of one mask reads: the kept arcs, the epsilon arcs
    by source, and two state-indexed buffers (all zero between searches) for the epsilon relaxation."""

    def __init__(self, store: ArcStore, useful: np.ndarray):
        s = store.semiring
        self.keep = useful[store.src] & useful[store.dst]
        eps = np.flatnonzero(store.label == EPSILON_ID)
        _nonnegative(s, store.weight[eps], lambda k: f"arc {int(store.arc_id[eps[k]])} on None")
        _nonnegative(s, store.initial, lambda k: f"initial weight of {store.names[k]}")
        eps = eps[self.keep[eps]]
        order, self.eps_ptr = csr_index(store.src[eps], store.num_states)
        self.eps = eps[order]
        # with few epsilon arcs per state, a state's arcs are one row of a padded table (-1: none)
        degree = np.diff(self.eps_ptr)
        widest = int(degree.max(initial=0))
        self.eps_table: IntArray | None = None
        if widest <= PADDED_EPSILONS:
            rank = np.arange(len(self.eps)) - np.repeat(self.eps_ptr[:-1], degree)
            self.eps_table = np.full((store.num_states, widest), -1, dtype=np.int64)
            self.eps_table[store.src[self.eps], rank] = self.eps
        self.start = np.flatnonzero((store.initial != s.zero) & useful)
        self.weights = s.zeros((store.num_states,))
        self.arcs = np.full(store.num_states, -1, dtype=np.int64)


def _viterbi_small(
    wfsa: WFSA, store: ArcStore, symbols: Sequence[Hashable], epsilon_cap: int | None, useful: np.ndarray
) -> ViterbiPath | None:
    """``_viterbi_store`` in plain Python over per-state label tables (as ``score_on_store``'s small frontiers),
    while every layer holds at most ``SMALL_FRONTIER`` states: for stores without predicate labels, in a semiring
    with no sign condition; None otherwise (the array search runs). The epsilon relaxation is the array search's,
    round for round (a round offers every arc out of the states the previous round improved, from their weights at
    its start; ties go to the arc first in ``wfsa.arcs``), so both find the same path.

    Raises:
        DivergenceError: as ``_viterbi_store``.
    """
    s, v = store.semiring, store.semiring.viterbi
    if store.predicates or s.is_field:
        return None
    for i, x in enumerate(symbols):
        wfsa.check_symbol(x, i)
    # the tables of the usual mask are kept on the store; a narrower one (after a divergence) builds its own
    tables: dict[int, dict[int, list[LabelArc]]] = store.label_tables() if useful is store.useful() else {}
    times, better, zero = v.times, v.better, s.zero
    limit = store.num_states if epsilon_cap is None else epsilon_cap
    epsilons = store.useful_epsilons()

    def table(q: int) -> dict[int, list[LabelArc]]:
        found = tables.get(q)
        if found is None:
            found = tables[q] = store.label_table(q, useful)
        return found

    # a layer maps a state to (weight, arc id, stored arc) of the best path into it (-1, -1: none, at the start)
    Layer = dict[int, tuple[Any, int, int]]

    def offers(sources: Iterable[int], layer: Layer, ident: int) -> Layer:
        """The best path into each destination of the arcs labelled ``ident`` out of the states ``sources`` (the
        best paths into them in ``layer``); ties: the lowest arc id."""
        out: Layer = {}
        for q in sources:
            w = layer[q][0]
            for d, aw, arc_id, position in table(q).get(ident, ()):
                candidate = times(w, aw)
                if candidate == zero:
                    continue
                held = out.get(d)
                if held is None or better(candidate, held[0]) or (candidate == held[0] and arc_id < held[1]):
                    out[d] = (candidate, arc_id, position)
        return out

    def relax(layer: Layer) -> list[dict[int, int]] | None:
        """Improve ``layer`` along epsilon arcs in place; per round (0: before it), the states it set and their
        stored arcs (as ``_Layer.rounds``); None when the layer outgrows ``SMALL_FRONTIER``."""
        rounds = [{q: held[2] for q, held in layer.items()}]
        if not epsilons:
            return rounds
        frontier = list(layer)
        for count in range(1, limit + 1):
            offered = offers(frontier, layer, EPSILON_ID)
            frontier = [d for d, offer in offered.items() if d not in layer or better(offer[0], layer[d][0])]
            if not frontier:
                break
            for d in frontier:
                layer[d] = offered[d]
            rounds.append({d: offered[d][2] for d in frontier})
            if len(layer) > SMALL_FRONTIER:
                return None
            if epsilon_cap is None and count == limit:
                names = ", ".join(store.names[q] for q in sorted(frontier))
                raise DivergenceError(f"an epsilon cycle through {names} improves paths without bound")
        return rounds

    start: Layer = {q: (w, -1, -1) for q, w in store.initial_items() if useful[q]}
    rounds = relax(start)
    if rounds is None:
        return None
    history, pointers = [start], [rounds]
    for x in symbols:
        ident = _small_label(store, x)
        if ident is None:
            return None
        if ident == NO_LABEL:
            return ViterbiPath(s.zero)
        layer = offers(history[-1], history[-1], ident)
        rounds = None if len(layer) > SMALL_FRONTIER else relax(layer)
        if rounds is None:
            return None
        history.append(layer)
        pointers.append(rounds)
    best_q, best = -1, zero
    for q, (w, _, _) in sorted(history[-1].items()):  # ties: the lowest state, as the array search
        total = times(w, store.final[q].item())
        if total != zero and (best_q < 0 or better(total, best)):
            best_q, best = q, total
    if best_q < 0:
        return ViterbiPath(s.zero)

    def pointer(t: int, q: int, last: int) -> tuple[int, int]:
        set_at = next(r for r in range(last, -1, -1) if q in pointers[t][r])
        return pointers[t][set_at][q], set_at

    steps = _backtrace(store, symbols, best_q, pointer, lambda t: len(pointers[t]))
    return ViterbiPath(plain(best), steps, steps[0].src if steps else store.names[best_q], store.names[best_q])


def _backtrace(
    store: ArcStore, symbols: Sequence[Hashable], end: int, pointer: Callable[[int, int, int], tuple[int, int]],
    rounds: Callable[[int], int],
) -> list[Step]:
    """The steps of the best path into state ``end`` after every symbol, read back from the pointers of a Viterbi
    search: ``pointer(t, q, last)`` is (the stored arc that set state q's value after t symbols, as of round
    ``last`` of that position's epsilon relaxation, -1 for none; the round that set it), and ``rounds(t)`` the
    number of rounds at position t. Each arc is taken from its source's value at the round it was read."""
    steps: list[Step] = []
    q, t = end, len(symbols)
    last = rounds(t) - 1
    while True:
        arc, set_at = pointer(t, q, last)
        if arc < 0:
            break
        consumes = int(store.label[arc]) != EPSILON_ID
        steps.append(_stored_step(store, arc, symbols[t - 1] if consumes else None))
        q = int(store.src[arc])
        if consumes:
            t -= 1
            last = rounds(t) - 1
        else:
            last = set_at - 1
    steps.reverse()
    return steps


def _stored_step(store: ArcStore, position: int, symbol: Hashable | None) -> Step:
    """The ``Step`` of stored arc ``position`` consuming ``symbol`` (None: an epsilon arc), read from the store's
    arrays (``Arc.kind``'s rule, without materialising ``wfsa.arcs``)."""
    src, dst = int(store.src[position]), int(store.dst[position])
    kind = "epsilon" if symbol is None else "self-loop" if src == dst else "main"
    return Step(int(store.arc_id[position]), store.names[src], store.names[dst], kind, symbol,
                plain(store.weight[position]))


def _nonnegative(s: Semiring, values: np.ndarray, what: Any) -> None:
    """Refuse a negative weight where Viterbi ranks by max-times (``what(k)`` names the k-th value).

    Raises:
        WeightError: naming the weight.
    """
    if s.is_field and np.any(values < 0):
        k = int(np.flatnonzero(values < 0)[0])
        raise WeightError(
            f"{what(k)}: Viterbi in the {s.name} semiring ranks paths by max-times and needs nonnegative "
            f"weights; got {values[k]}"
        )


#: After this many searches in plain Python that outgrew ``SMALL_FRONTIER`` on one store, and when they are
#: half of those begun there, Viterbi on that store goes straight to the arrays (both find the same path).
SMALL_GIVE_UPS = 8


def viterbi_of_store(wfsa: WFSA, symbols: Sequence[Hashable], epsilon_cap: int | None = None) -> Any:
    """The best single path deriving ``symbols`` on the arc store (see ``viterbi``).

    Caution:
        Constant weights only; only states on some successful path are searched (so a divergent epsilon cycle
        elsewhere does not raise). Ties between equally good paths go to the arc first in ``wfsa.arcs``.

    Raises:
        WeightError: a negative weight in a real-field semiring (max-times ranks paths and needs them nonnegative).
        DivergenceError: an epsilon cycle improves paths without bound (exact mode).
    """
    store = require_store(wfsa)

    tries = store.memo("viterbi small tries", lambda: [0, 0])  # Python searches begun, and given up

    def search(useful: np.ndarray) -> ViterbiPath:
        if tries[1] < SMALL_GIVE_UPS or 2 * tries[1] < tries[0]:  # while it mostly succeeds on this store
            tries[0] += 1
            small = _viterbi_small(wfsa, store, symbols, epsilon_cap, useful)
            if small is not None:
                return small
            tries[1] += 1
        path: ViterbiPath = _viterbi_store(wfsa, store, symbols, epsilon_cap, useful)
        return path

    try:
        return search(store.useful())
    except DivergenceError:  # only cycles on a successful path of ``symbols`` count
        return search(store.useful_for(symbols))


def _viterbi_store(
    wfsa: WFSA, store: ArcStore, symbols: Sequence[Hashable], epsilon_cap: int | None, useful: np.ndarray
) -> Any:
    """``viterbi`` over the states of the mask ``useful``."""
    s, v = store.semiring, store.semiring.viterbi
    n = store.num_states
    if useful is store.useful():  # the usual search: its arrays are kept on the store
        prepared = store.memo("viterbi", lambda: _ViterbiArcs(store, useful))
    else:
        prepared = _ViterbiArcs(store, useful)
    keep, eps, eps_ptr = prepared.keep, prepared.eps, prepared.eps_ptr

    def relax(layer: _Layer) -> _Layer:
        layer.rounds.append((layer.states, layer.arcs))
        if not eps.size:
            return layer
        weights, arcs = prepared.weights, prepared.arcs  # zero / -1 everywhere, and again on return
        weights[layer.states] = layer.weights
        arcs[layer.states] = layer.arcs
        frontier = layer.states
        touched = [frontier]
        limit = n if epsilon_cap is None else epsilon_cap
        try:
            for count in range(1, limit + 1):
                if prepared.eps_table is not None:
                    out = prepared.eps_table[frontier].reshape(-1)
                    out = out[out >= 0]
                else:
                    out = eps[gather_ranges(eps_ptr, frontier)]
                if not out.size:
                    break
                candidate = v.times(weights[store.src[out]], store.weight[out])
                live = candidate != s.zero
                out, candidate = out[live], candidate[live]
                dst, best, chosen = _best_per_destination(v, store.dst[out], candidate, store.arc_id[out], out, n)
                improved = (v.plus(best, weights[dst]) == best) & (best != weights[dst])
                frontier = dst[improved]
                if not frontier.size:
                    break
                weights[frontier], arcs[frontier] = best[improved], chosen[improved]
                touched.append(frontier)
                layer.rounds.append((frontier, chosen[improved]))
                if epsilon_cap is None and count == limit:
                    names = ", ".join(store.names[q] for q in frontier)
                    raise DivergenceError(f"an epsilon cycle through {names} improves paths without bound")
            if n <= DENSE_LAYER_STATES:
                states = np.flatnonzero(weights != s.zero)
            else:
                states = np.unique(np.concatenate(touched))
            return _Layer(states, weights[states], arcs[states], layer.rounds)
        finally:
            for states in touched:
                weights[states] = s.zero
                arcs[states] = -1

    start = prepared.start
    history = [relax(_Layer(start, store.initial[start], np.full(len(start), -1, dtype=np.int64)))]
    for position, x in enumerate(symbols):
        wfsa.check_symbol(x, position)
        previous = history[-1]
        counts = store.indptr[previous.states + 1] - store.indptr[previous.states]
        matching = store.matching(x)
        if int(counts.sum()) <= len(matching):  # a small frontier: its own arcs, filtered by label
            arcs = gather_ranges(store.indptr, previous.states)
            owner = np.repeat(np.arange(len(previous.states)), counts)
            hit = keep[arcs] & store.matches_mask(x, arcs)
            arcs, owner = arcs[hit], owner[hit]
        else:  # a large frontier: the symbol's arcs from it
            arcs = matching[keep[matching]]
            owner = np.minimum(np.searchsorted(previous.states, store.src[arcs]), max(0, len(previous.states) - 1))
            hit = previous.states[owner] == store.src[arcs] if len(previous.states) else np.zeros(len(arcs), bool)
            arcs, owner = arcs[hit], owner[hit]
        _nonnegative(s, store.weight[arcs], lambda k, arcs=arcs, x=x: f"arc {int(store.arc_id[arcs[k]])} on {x!r}")
        candidate = v.times(previous.weights[owner], store.weight[arcs])
        live = candidate != s.zero
        arcs, candidate = arcs[live], candidate[live]
        dst, best, chosen = _best_per_destination(v, store.dst[arcs], candidate, store.arc_id[arcs], arcs, n)
        history.append(relax(_Layer(dst, best, chosen)))
    last = history[-1]
    rho = store.final[last.states]
    _nonnegative(s, rho, lambda k: f"final weight of {store.names[int(last.states[k])]}")
    ends = v.times(last.weights, rho)
    live = np.flatnonzero(ends != s.zero)
    if not live.size:
        return ViterbiPath(s.zero)
    top = v.sum(ends[live], axis=0)
    winner = int(live[np.flatnonzero(ends[live] == top)[0]])
    end = int(last.states[winner])
    steps = _backtrace(store, symbols, end, lambda t, q, last: history[t].pointer(q, last),
                       lambda t: len(history[t].rounds))
    start_name = steps[0].src if steps else store.names[end]
    return ViterbiPath(plain(ends[winner]), steps, start_name, store.names[end])


# ----------------------------------------------------------------------------------------
# Symbolic scores


def _sym_weight(wfsa: WFSA, weight: Any, symbol: Hashable | None) -> sympy.Expr:
    if is_symbolic(weight):
        return weight if symbol is None else instantiate(weight, symbol)
    return sympy_constant(weight)


def _sym_matrix(wfsa: WFSA, s: SymbolicArrays, symbol: Hashable | None) -> np.ndarray:
    """The (Q, Q) object array of symbolic arc weights for ``symbol`` (None: epsilon), parallel arcs summed."""
    n = wfsa.num_states
    cells: list[list[list[sympy.Expr]]] = [[[] for _ in range(n)] for _ in range(n)]
    for arc in wfsa.arcs:
        hit = (not arc.label.consumes) if symbol is None else _label_matches_symbolic(arc, symbol)
        if hit:
            cells[arc.src][arc.dst].append(_sym_weight(wfsa, arc.weight, symbol))
    matrix: np.ndarray = s.zeros((n, n))
    for i in range(n):
        for j in range(n):
            matrix[i, j] = s.sym_plus(*cells[i][j])
    return matrix


def _label_matches_symbolic(arc: Arc, symbol: Hashable) -> bool:
    from kleene.automata.labels import AnySymbol

    if isinstance(symbol, sympy.Basic) and not isinstance(arc.label, AnySymbol):
        return bool(arc.label.matches(str(symbol)))
    return bool(arc.label.matches(symbol))


def score_symbolic(wfsa: WFSA, symbols: Sequence[Hashable], epsilon_cap: int | None = None) -> sympy.Expr:
    """The Forward score as a sympy expression of the weight functions.

    Each consumed symbol ``x`` replaces ``ALPHA`` (so ``mu(ALPHA)`` becomes
    ``mu(x)``); pass sympy symbols (``x1, x2, ...``) to get the papers' general
    formulas. Constants stay numbers. The result uses the semiring's symbolic
    operations (``Add``/``Mul`` for real, ``Max``/``Add`` for max-plus, ...).

    Caution:
        Neither ``symbols`` nor ``epsilon_cap`` is checked: a symbol outside the alphabet is read like any other
        (``ANY`` arcs take it), and an epsilon cycle's closure is the semiring's symbolic star, whether or not its
        series converges for the values later substituted.
    """
    result: sympy.Expr = forward(_SymbolicStepper(wfsa, epsilon_cap), symbols)
    return result


class _SymbolicStepper(MatrixStepper):
    """Forward's dense steps over sympy expressions (``SymbolicArrays``: the semiring's symbolic operations): per
    symbol, the arc weights with ``ALPHA`` replaced by it, and ``closure_matrix`` of the epsilon weights."""

    def __init__(self, wfsa: WFSA, epsilon_cap: int | None):
        s = SymbolicArrays(wfsa.semiring)
        self.wfsa = wfsa

        def vector(weights: dict[int, Any]) -> np.ndarray:
            out: np.ndarray = s.zeros((wfsa.num_states,))
            for q, w in weights.items():
                out[q] = _sym_weight(wfsa, w, None)
            return out

        closure = closure_matrix(_sym_matrix(wfsa, s, None), s, epsilon_cap) if wfsa.has_epsilons else None
        super().__init__(s, vector(wfsa.initial), vector(wfsa.final), closure,
                         lambda symbol, position: _sym_matrix(wfsa, s, symbol))
