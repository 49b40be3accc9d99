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

from .errors import ArgumentError, BudgetExceededError, SemiringError, WeightError
from .labels import Label
from .minterms import minterms
from .ops import _fresh_name, bind, remove_epsilon, trim
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


def determinize(
    a: WFSA, *, max_states: int = DEFAULT_MAX_STATES, delta: float = DEFAULT_DELTA, env: Env | None = None
) -> WFSA:
    """A deterministic automaton giving every string the same score as ``a``.

    The result has at most one initial state (carrying the total initial weight) and, out of every state, labels
    that accept disjoint sets of symbols: predicate labels stay predicates (minterms). Epsilon arcs are removed
    first (``remove_epsilon``) and the input is trimmed.

    Caution:
        Needs a zero-sum-free semiring with division (``Semiring.zero_sum_free``, ``Semiring.divide``): boolean,
        min-plus (tropical), max-plus, max-times and log. Real weights can cancel and are refused (use log for
        probabilities). Weighted automata without the twins property have no finite deterministic equivalent;
        the construction then stops at ``max_states``.

    Raises:
        SemiringError: a semiring that is not zero-sum-free.
        BudgetExceededError: more than ``max_states`` states would be built.
        WeightError: symbolic weights without ``env``.
        ArgumentError: a bad ``max_states`` or ``delta``.
    """
    s = a.semiring
    if not s.zero_sum_free:
        raise SemiringError(
            f"determinize: the {s.name} semiring is not zero-sum-free (weights can cancel, so residuals can divide "
            "by zero); determinize in log (probabilities) or a tropical semiring"
        )
    _check_budget(max_states, delta, "determinize")
    a = numeric_epsilon_free(a, env, "determinize")
    out = WFSA(s, a.alphabet, a.name)
    if not a.initial:
        return out
    outgoing: list[list[int]] = [[] for _ in range(a.num_states)]
    for i, arc in enumerate(a.arcs):
        outgoing[arc.src].append(i)
    Subset = tuple[tuple[int, Any], ...]
    index: dict[tuple[tuple[int, Any], ...], int] = {}
    names: set[str] = set()
    pending: deque[tuple[int, Subset]] = deque()

    def state_of(subset: Subset) -> int:
        key = tuple((q, s.quantize(v, delta)) for q, v in subset)
        if key not in index:
            if len(index) >= max_states:
                raise BudgetExceededError(
                    f"determinize: more than max_states={max_states} subsets; the automaton may lack the twins "
                    "property (then no finite deterministic equivalent exists)"
                )
            name = _fresh_name("{" + ",".join(a.state_name(q) for q, _ in subset) + "}", names)
            names.add(name)
            index[key] = out.add_state(name)
            pending.append((index[key], subset))
        return index[key]

    total = _sum(s, a.initial.values())
    start = tuple(sorted((q, s.divide(w, total)) for q, w in a.initial.items()))
    out.set_initial(state_of(start), total)
    while pending:
        here, subset = pending.popleft()
        final = _sum(s, (s.times(v, a.final[q]) for q, v in subset if q in a.final))
        if not s.is_zero(final):
            out.set_final(here, final)
        arcs = [(v, a.arcs[i]) for q, v in subset for i in outgoing[q]]
        parts = minterms([arc.label for _, arc in arcs], a.alphabet)
        by_minterm: list[dict[int, Weight]] = [{} for _ in range(len(parts))]
        for (v, arc), cover in zip(arcs, parts.covers):
            weight = s.times(v, arc.weight)
            for m in cover:
                into = by_minterm[m]
                into[arc.dst] = s.plus(into[arc.dst], weight) if arc.dst in into else weight
        for m, into in enumerate(by_minterm):
            weight = _sum(s, into.values())
            if s.is_zero(weight):
                continue
            residuals = tuple(sorted((r, s.divide(u, weight)) for r, u in into.items() if not s.is_zero(u)))
            label: Label = parts.label(m)
            out.add_arc(here, state_of(residuals), label, weight)
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
