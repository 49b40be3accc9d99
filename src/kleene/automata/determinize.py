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
from typing import Any

from kleene.errors import ArgumentError, BudgetExceededError, SemiringError, WeightError

from .labels import Label
from .minterms import minterms
from .ops import bind, remove_epsilon, trim
from .weights import Env, Weight
from .wfsa import WFSA

#: The default bound on the number of states a construction may build before giving up.
DEFAULT_MAX_STATES = 1_000_000
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
        self.a, self.s, self.delta = a, a.semiring, delta
        self.outgoing: list[list[int]] = [[] for _ in range(a.num_states)]
        for i, arc in enumerate(a.arcs):
            self.outgoing[arc.src].append(i)

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
        arcs = [(v, a.arcs[i]) for q, v in subset for i in self.outgoing[q]]
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


def budget_exceeded(operation: str, max_states: int) -> BudgetExceededError:
    return BudgetExceededError(
        f"{operation}: more than max_states={max_states} subsets; the automaton may lack the twins property "
        "(then no finite deterministic equivalent exists)"
    )


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
        grow) have no finite deterministic equivalent; the construction then stops at ``max_states``.

    Raises:
        SemiringError: a semiring that is not zero-sum-free.
        BudgetExceededError: more than ``max_states`` states would be built.
        WeightError: symbolic weights without ``env``.
        ArgumentError: a bad ``max_states`` or ``delta``.
    """
    check_determinizable(a, max_states, delta, "determinize")
    a = numeric_epsilon_free(a, env, "determinize")
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
            if len(index) >= max_states:
                raise budget_exceeded("determinize", max_states)
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
    pairwise disjoint sets of symbols (over ``a``'s alphabet)."""
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
