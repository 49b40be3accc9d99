"""Brute-force oracles: enumerate paths explicitly, with no matrices and no closure."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

from kleene.automata import WFSA, Arc


def leaving(wfsa: WFSA) -> dict[int, list[tuple[int, Arc]]]:
    """Each state's outgoing arcs with their indices, in arc order (the walks below visit them in that order)."""
    out: dict[int, list[tuple[int, Arc]]] = {}
    for i, arc in enumerate(wfsa.arcs):
        out.setdefault(arc.src, []).append((i, arc))
    return out


def paths(
    wfsa: WFSA, symbols: Sequence[Hashable], max_epsilons: int, env: dict[str, Any] | None = None
) -> Iterator[tuple[Any, list[int]]]:
    """Every path deriving ``symbols`` with at most ``max_epsilons`` epsilon arcs in a row,
    as (path weight including initial and final weights, arc indices)."""
    s = wfsa.semiring
    out = leaving(wfsa)

    def walk(state: int, position: int, run: int, weight: Any, taken: list[int]) -> Iterator[tuple[Any, list[int]]]:
        if position == len(symbols) and state in wfsa.final:
            yield s.times(weight, wfsa.numeric(wfsa.final[state], None, env, "final")), list(taken)
        for i, arc in out.get(state, ()):
            if not arc.label.consumes:
                if run < max_epsilons:
                    w = s.times(weight, wfsa.arc_weight(i, None, env))
                    yield from walk(arc.dst, position, run + 1, w, [*taken, i])
            elif position < len(symbols) and arc.label.matches(symbols[position]):
                w = s.times(weight, wfsa.arc_weight(i, symbols[position], env))
                yield from walk(arc.dst, position + 1, 0, w, [*taken, i])

    for q, lam in wfsa.initial.items():
        yield from walk(q, 0, 0, wfsa.numeric(lam, None, env, "initial"), [])


def path_count(wfsa: WFSA, symbols: Sequence[Hashable], max_epsilons: int) -> int:
    """How many paths ``paths`` enumerates (counted by dynamic programming over (state, position, epsilon run),
    without enumerating them): a test's guard against a random automaton whose enumeration would take minutes."""
    memo: dict[tuple[int, int, int], int] = {}
    out = leaving(wfsa)

    def count(state: int, position: int, run: int) -> int:
        key = (state, position, run)
        if key not in memo:
            total = int(position == len(symbols) and state in wfsa.final)
            for _, arc in out.get(state, ()):
                if not arc.label.consumes:
                    total += count(arc.dst, position, run + 1) if run < max_epsilons else 0
                elif position < len(symbols) and arc.label.matches(symbols[position]):
                    total += count(arc.dst, position + 1, 0)
            memo[key] = total
        return memo[key]

    return sum(count(q, 0, 0) for q in wfsa.initial)


def brute_force_score(
    wfsa: WFSA, symbols: Sequence[Hashable], max_epsilons: int, env: dict[str, Any] | None = None
) -> Any:
    """The semiring sum over ``paths``."""
    s = wfsa.semiring
    total = s.zero
    for weight, _ in paths(wfsa, symbols, max_epsilons, env):
        total = s.plus(total, weight)
    return total


def brute_force_best(
    wfsa: WFSA, symbols: Sequence[Hashable], max_epsilons: int, env: dict[str, Any] | None = None
) -> tuple[Any, list[int] | None]:
    """The best path of non-zero weight under the semiring's Viterbi order (weight, arcs)."""
    s = wfsa.semiring
    best: tuple[Any, list[int] | None] = (s.zero, None)
    for weight, taken in paths(wfsa, symbols, max_epsilons, env):
        if s.is_zero(weight):
            continue  # a zero-weight path is no path
        if best[1] is None or s.viterbi.better(weight, best[0]):
            best = (weight, taken)
    return best


def brute_force_log_score(
    wfsa: WFSA,
    symbols: Sequence[Hashable],
    max_epsilons: int,
    log_of: Callable[[Any], float] = float,
    env: dict[str, Any] | None = None,
) -> float:
    """``log`` of the real sum over ``paths`` of ``exp(log_of(w1) + log_of(w2) + ...)``, all in log space.

    For a log-semiring automaton (``log_of=float``) this is its score; for a nonnegative real one
    (``log_of=safe_log``) the log of its score, far past float64's range (1e-400 is -921). Each path's log
    weight is an exactly rounded sum (``math.fsum``) of its arcs' logs, and the paths are added by a
    log-sum-exp shifted by their maximum, so nothing under- or overflows.
    """
    logs: list[float] = []
    out = leaving(wfsa)

    def walk(state: int, position: int, run: int, terms: list[float]) -> None:
        if position == len(symbols) and state in wfsa.final:
            logs.append(math.fsum([*terms, log_of(wfsa.numeric(wfsa.final[state], None, env, "final"))]))
        for i, arc in out.get(state, ()):
            if not arc.label.consumes:
                if run < max_epsilons:
                    walk(arc.dst, position, run + 1, [*terms, log_of(wfsa.arc_weight(i, None, env))])
            elif position < len(symbols) and arc.label.matches(symbols[position]):
                walk(arc.dst, position + 1, 0, [*terms, log_of(wfsa.arc_weight(i, symbols[position], env))])

    for q, lam in wfsa.initial.items():
        walk(q, 0, 0, [log_of(wfsa.numeric(lam, None, env, "initial"))])
    finite = [x for x in logs if x != -math.inf]
    if not finite:
        return -math.inf
    top = max(finite)
    return top + math.log(math.fsum(math.exp(x - top) for x in finite))


def safe_log(weight: Any) -> float:
    """``log(w)`` of a nonnegative real weight, ``-inf`` for 0."""
    w = float(weight)
    return -math.inf if w == 0 else math.log(w)
