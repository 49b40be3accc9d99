"""Brute-force oracles: enumerate paths explicitly, with no matrices and no closure."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from kleene.automata import WFSA


def paths(
    wfsa: WFSA, symbols: Sequence[Hashable], max_epsilons: int, env: dict[str, Any] | None = None
) -> Iterator[tuple[Any, list[int]]]:
    """Every path deriving ``symbols`` with at most ``max_epsilons`` epsilon arcs in a row,
    as (path weight including initial and final weights, arc indices)."""
    s = wfsa.semiring

    def walk(state: int, position: int, run: int, weight: Any, taken: list[int]) -> Iterator[tuple[Any, list[int]]]:
        if position == len(symbols) and state in wfsa.final:
            yield s.times(weight, wfsa.numeric(wfsa.final[state], None, env, "final")), list(taken)
        for i, arc in enumerate(wfsa.arcs):
            if arc.src != state:
                continue
            if not arc.label.consumes:
                if run < max_epsilons:
                    w = s.times(weight, wfsa.arc_weight(i, None, env))
                    yield from walk(arc.dst, position, run + 1, w, [*taken, i])
            elif position < len(symbols) and arc.label.matches(symbols[position]):
                w = s.times(weight, wfsa.arc_weight(i, symbols[position], env))
                yield from walk(arc.dst, position + 1, 0, w, [*taken, i])

    for q, lam in wfsa.initial.items():
        yield from walk(q, 0, 0, wfsa.numeric(lam, None, env, "initial"), [])


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
