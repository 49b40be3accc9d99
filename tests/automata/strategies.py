"""Hypothesis strategies for small random WFSAs in every semiring."""

from __future__ import annotations

import functools
import math
from typing import Any

from hypothesis import strategies as st

from kleene.automata import ANY, EPSILON, WFSA, NoneOf, OneOf, get_semiring

ALPHABET = ("a", "b", "c")

LABELS = st.one_of(
    st.sampled_from(ALPHABET),
    st.just(EPSILON),
    st.just(ANY),
    st.sets(st.sampled_from(ALPHABET), min_size=1, max_size=2).map(OneOf),
    st.sets(st.sampled_from(ALPHABET), min_size=1, max_size=2).map(NoneOf),
)


@functools.cache
def weights(semiring: str, epsilon: bool, signed: bool = True) -> st.SearchStrategy[Any]:
    """Weights in the semiring's domain; epsilon weights keep every epsilon star convergent.

    ``signed=False`` keeps real weights nonnegative (as Viterbi needs). One strategy object per arguments (built
    and validated by hypothesis once, not once per arc drawn)."""
    unit = st.floats(0.05, 0.95 if not epsilon else 0.2, allow_nan=False)
    if semiring == "real":
        signs = [1.0, -1.0] if signed and not epsilon else [1.0]
        return st.builds(lambda u, sign: u * sign, unit, st.sampled_from(signs))
    if semiring == "log":
        return unit.map(math.log)
    if semiring == "max-plus":
        return st.floats(-3.0, -0.1) if epsilon else st.floats(-3.0, 3.0)
    if semiring == "min-plus":
        return st.floats(0.1, 3.0) if epsilon else st.floats(-3.0, 3.0)
    if semiring == "max-times":
        return st.floats(0.05, 0.95) if epsilon else st.floats(0.05, 2.0)
    return st.booleans()


@functools.cache
def _integers(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


@functools.cache
def _state_sets(n: int, max_size: int) -> st.SearchStrategy[set[int]]:
    return st.sets(_integers(0, n - 1), min_size=1, max_size=max_size)


_SYMBOL_LABELS = LABELS.filter(lambda lab: lab is not EPSILON)


@functools.cache
def wfsas(
    semiring: str, max_states: int = 4, max_arcs: int = 8, epsilons: bool = True, signed: bool = True
) -> st.SearchStrategy[WFSA]:
    """Random automata over ALPHABET (epsilon cycles allowed when ``epsilons``); one strategy object per arguments
    (tests draw it inside their bodies, once per example)."""
    return _wfsas(semiring, max_states, max_arcs, epsilons, signed)


@st.composite
def _wfsas(
    draw: st.DrawFn, semiring: str, max_states: int, max_arcs: int, epsilons: bool, signed: bool
) -> WFSA:
    """A random automaton over ALPHABET (see ``wfsas``)."""
    n = draw(_integers(1, max_states))
    a = WFSA(get_semiring(semiring), alphabet=ALPHABET)
    for _ in range(n):
        a.add_state()
    states = _integers(0, n - 1)
    for q in draw(_state_sets(n, 2)):
        a.set_initial(q, draw(weights(semiring, epsilon=False, signed=signed)))
    for q in draw(_state_sets(n, n)):
        a.set_final(q, draw(weights(semiring, epsilon=False, signed=signed)))
    for _ in range(draw(_integers(0, max_arcs))):
        label = draw(LABELS if epsilons else _SYMBOL_LABELS)
        eps = label is EPSILON
        a.add_arc(draw(states), draw(states), label, draw(weights(semiring, epsilon=eps, signed=signed)))
    return a


strings = st.lists(st.sampled_from(ALPHABET), max_size=4)
