"""Equivalence by Tzeng's algorithm, checked against exhaustive comparison of scores.

Oracle: two real-weighted automata with n and m states that differ on some string
differ on one of length < n + m (the forward vectors of the direct sum span a space
of dimension <= n + m, reached by prefixes of length < n + m). So comparing every
string that short decides equivalence independently of the algorithm under test.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import pytest
import sympy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kleene.automata import (
    ANY,
    EPSILON,
    LOG,
    REAL,
    WFSA,
    AlphabetError,
    DivergenceError,
    NoneOf,
    OneOf,
    SemiringError,
    WeightError,
    concat,
    equivalent,
    intersect,
    remove_epsilon,
    reverse,
    trim,
    union,
    weight_functions,
)

from .strategies import ALPHABET, wfsas

FEW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def words(alphabet: Sequence[Hashable], shorter_than: int) -> Iterator[tuple[Hashable, ...]]:
    for length in range(shorter_than):
        yield from itertools.product(alphabet, repeat=length)


def as_real(wfsa: WFSA, value: float) -> float:
    return math.exp(value) if wfsa.semiring is LOG else value


def scores_differ(a: WFSA, b: WFSA, word: Sequence[Hashable]) -> bool:
    x, y = as_real(a, a.score(word)), as_real(b, b.score(word))
    return not math.isclose(x, y, rel_tol=1e-7, abs_tol=1e-9)


def shortest_difference(a: WFSA, b: WFSA) -> tuple[Hashable, ...] | None:
    """The first string (by length) on which the scores differ, by exhaustive search."""
    for word in words(ALPHABET, a.num_states + b.num_states):
        if scores_differ(a, b, word):
            return word
    return None


def converges(wfsa: WFSA) -> bool:
    try:
        wfsa.score([])
    except DivergenceError:
        return False
    return True


def check_against_exhaustive_search(a: WFSA, b: WFSA) -> None:
    result = equivalent(a, b)
    witness = shortest_difference(a, b)
    assert bool(result) == (witness is None)
    if witness is not None:
        c = result.counterexample
        assert c is not None
        assert len(c.symbols) == len(witness)  # a shortest distinguishing string
        assert c.score_a == pytest.approx(a.score(c.symbols), rel=1e-7, abs=1e-9)
        assert c.score_b == pytest.approx(b.score(c.symbols), rel=1e-7, abs=1e-9)
        assert scores_differ(a, b, c.symbols)
    else:
        assert result.counterexample is None


def perturbed(a: WFSA, arc_index: int, factor: float) -> WFSA:
    """A copy of ``a`` with one arc weight scaled (log: shifted by log factor)."""
    b = WFSA(a.semiring, a.alphabet)
    for name in a.states:
        b.add_state(name)
    for i, arc in enumerate(a.arcs):
        weight = arc.weight
        if i == arc_index:
            weight = weight + math.log(factor) if a.semiring is LOG else weight * factor
        b.add_arc(arc.src, arc.dst, arc.label, weight)
    for q, w in a.initial.items():
        b.set_initial(q, w)
    for q, w in a.final.items():
        b.set_final(q, w)
    return b


# ----------------------------------------------------------------------------------------
# the same series built differently


@pytest.mark.parametrize("name", ["real", "log"])
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_rebuilt_automata_are_equivalent(name: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(name, max_states=3, max_arcs=6))
    b = data.draw(wfsas(name, max_states=3, max_arcs=6))
    assume(converges(a) and converges(b))
    pairs = [
        (a, remove_epsilon(a)),
        (a, reverse(reverse(a))),
        (a, trim(a)),
        (union(a, b), union(b, a)),
        (intersect(a, b), intersect(b, a)),
        (concat(concat(a, b), a), concat(a, concat(b, a))),
    ]
    for left, right in pairs:
        result = equivalent(left, right)
        assert result, str(result)
        assert result.counterexample is None
        assert result.dimension <= left.num_states + right.num_states


@pytest.mark.parametrize("name", ["real", "log"])
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_random_pairs_agree_with_exhaustive_search(name: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(name, max_states=3, max_arcs=5))
    b = data.draw(wfsas(name, max_states=2, max_arcs=4))
    assume(converges(a) and converges(b))
    check_against_exhaustive_search(a, b)


@pytest.mark.parametrize("name", ["real", "log"])
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_perturbed_automata_are_told_apart(name: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(name, max_states=3, max_arcs=6))
    assume(a.arcs)
    b = perturbed(a, data.draw(st.integers(0, len(a.arcs) - 1)), data.draw(st.sampled_from([0.5, 1.5, 1.0 + 1e-4])))
    assume(converges(a) and converges(b))
    check_against_exhaustive_search(a, b)


def test_structurally_different_automata_with_the_same_series() -> None:
    """x -> 0.5^|x| over {a}: one state, or two half-weighted copies of it."""
    one = WFSA("real", alphabet="a")
    one.add_state("q")
    one.set_initial("q")
    one.set_final("q")
    one.add_arc("q", "q", "a", 0.5)
    two = WFSA("real", alphabet="a")
    two.add_states("p", "r")
    for q in ("p", "r"):
        two.set_initial(q, 0.5)
        two.set_final(q)
        two.add_arc(q, q, "a", 0.5)
    assert equivalent(one, two)
    two.add_arc("p", "r", "a", 1e-3)
    result = equivalent(one, two)
    assert not result
    assert result.counterexample is not None and result.counterexample.symbols == ("a",)
    assert result.counterexample.score_a == pytest.approx(0.5)
    assert result.counterexample.score_b == pytest.approx(0.5 + 0.5e-3)
    assert "not equivalent" in str(result)


def test_nearly_parallel_forward_vectors_are_still_explored() -> None:
    """a(a^n) = 0.5^n; b(a^n) = (0.5+d)^n / 2 + (0.5-d)^n / 2 agrees for n = 0, 1 and exceeds it by d^2 at n = 2.
    The forward vectors of "" and "a" are only ~7 degrees apart, yet "a" must be extended to find "aa"."""
    d = 0.01
    a = WFSA("real", alphabet="a")
    a.add_state("q")
    a.set_initial("q")
    a.set_final("q")
    a.add_arc("q", "q", "a", 0.5)
    b = WFSA("real", alphabet="a")
    for name, rate in (("fast", 0.5 + d), ("slow", 0.5 - d)):
        b.add_state(name)
        b.set_initial(name, 0.5)
        b.set_final(name)
        b.add_arc(name, name, "a", rate)
    result = equivalent(a, b)
    assert not result and result.counterexample is not None
    assert result.counterexample.symbols == ("a", "a")
    assert result.counterexample.score_b - result.counterexample.score_a == pytest.approx(d**2)


def test_cancelling_negative_weights_equal_the_empty_automaton() -> None:
    """Two paths of weights +0.3^k and -0.3^k cancel on every string."""
    signed = WFSA("real", alphabet="ab")
    signed.add_states("plus", "minus")
    signed.set_initial("plus")
    signed.set_initial("minus", -1.0)
    for q in ("plus", "minus"):
        signed.set_final(q)
        signed.add_arc(q, q, ANY, 0.3)
    empty = WFSA("real", alphabet="ab")
    assert equivalent(signed, empty)
    rounded = WFSA("real", alphabet="ab")  # 0.1 + 0.2 - 0.3 is 5.6e-17 in floating point: zero up to rounding
    rounded.add_states("p", "f")
    rounded.set_initial("p")
    rounded.set_final("f")
    for weight in (0.1, 0.2, -0.3):
        rounded.add_arc("p", "f", "a", weight)
    assert rounded.score(["a"]) != 0.0
    assert equivalent(rounded, empty)
    signed.set_initial("minus", -1.0 + 1e-6)
    result = equivalent(signed, empty)
    assert not result and result.counterexample is not None
    assert result.counterexample.symbols == ()


def test_the_counterexample_is_shortest() -> None:
    """Only "aaa" (or longer) tells a chain accepting "aaa" from the empty automaton."""
    chain = WFSA("real", alphabet="ab")
    chain.add_states("0", "1", "2", "3")
    chain.set_initial("0")
    chain.set_final("3", 0.25)
    for src, dst in (("0", "1"), ("1", "2"), ("2", "3")):
        chain.add_arc(src, dst, "a")
    result = equivalent(WFSA("real", alphabet="ab"), chain)
    assert not result and result.counterexample is not None
    assert result.counterexample.symbols == ("a", "a", "a")
    assert (result.counterexample.score_a, result.counterexample.score_b) == (0.0, 0.25)


def test_real_and_log_automata_compare_as_real_series() -> None:
    real = WFSA("real", alphabet="ab")
    real.add_states("p", "q")
    real.set_initial("p", 0.4)
    real.set_final("q", 0.5)
    real.add_arc("p", "q", "a", 0.7)
    real.add_arc("q", "q", OneOf("ab"), 0.2)
    real.add_arc("p", "q", EPSILON, 0.1)
    log = WFSA("log", alphabet="ab")
    log.add_states("p", "q")
    log.set_initial("p", math.log(0.4))
    log.set_final("q", math.log(0.5))
    log.add_arc("p", "q", "a", math.log(0.7))
    log.add_arc("q", "q", ANY, math.log(0.2))
    log.add_arc("p", "q", EPSILON, math.log(0.1))
    assert equivalent(real, log)
    log.add_arc("q", "q", "b", math.log(0.01))
    result = equivalent(real, log)
    assert not result and result.counterexample is not None
    c = result.counterexample
    assert c.symbols == ("b",)  # p -ε-> q -b-> q
    assert c.score_b == pytest.approx(log.score(c.symbols))  # reported in the log semiring
    assert c.score_a == pytest.approx(real.score(c.symbols))


def test_predicates_range_over_each_automatons_own_alphabet() -> None:
    def loop(label: Any, alphabet: str) -> WFSA:
        w = WFSA("real", alphabet=alphabet)
        w.add_state("q")
        w.set_initial("q")
        w.set_final("q")
        w.add_arc("q", "q", label, 0.5)
        return w

    assert equivalent(loop(ANY, "ab"), loop(OneOf("ab"), "ab"))
    assert equivalent(loop(NoneOf("c"), "abc"), loop(ANY, "ab"))
    result = equivalent(loop(ANY, "ab"), loop(ANY, "abc"))
    assert not result and result.counterexample is not None
    assert result.counterexample.symbols == ("c",)
    assert (result.counterexample.score_a, result.counterexample.score_b) == (0.0, 0.5)


def test_automata_without_alphabets_use_the_symbols_they_name() -> None:
    a, b = WFSA("real"), WFSA("real")
    for w in (a, b):
        w.add_state("q")
        w.set_initial("q")
        w.set_final("q")
    a.add_arc("q", "q", "x", 0.5)
    b.add_arc("q", "q", OneOf(["x"]), 0.5)
    assert equivalent(a, b)
    b.add_arc("q", "q", "y", 0.5)
    result = equivalent(a, b)
    assert not result and result.counterexample is not None
    assert result.counterexample.symbols == ("y",)


def test_tolerance_decides_what_counts_as_equal() -> None:
    a = WFSA("real", alphabet="a")
    a.add_state("q")
    a.set_initial("q")
    a.set_final("q")
    a.add_arc("q", "q", "a", 0.5)
    b = perturbed(a, 0, 1.0 + 1e-12)
    assert equivalent(a, b)
    assert not equivalent(a, b, tolerance=1e-14)


def test_symbolic_weights_need_an_environment() -> None:
    (mu,) = weight_functions("mu")
    gamma = sympy.Symbol("gamma")
    a = WFSA("real", alphabet="ab")
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q")
    a.add_arc("p", "q", ANY, mu)
    a.add_arc("p", "q", EPSILON, gamma)
    b = WFSA("real", alphabet="ab")
    b.add_states("p", "q")
    b.set_initial("p")
    b.set_final("q")
    b.add_arc("p", "q", "a", 0.5)
    b.add_arc("p", "q", "b", 0.25)
    b.set_final("p", 0.1)
    with pytest.raises(WeightError, match=r"no value for '(gamma|mu)'"):
        equivalent(a, b)
    assert equivalent(a, b, env={"mu": {"a": 0.5, "b": 0.25}, "gamma": 0.1})
    assert not equivalent(a, b, env={"mu": {"a": 0.5, "b": 0.3}, "gamma": 0.1})


def test_unsupported_inputs_are_refused_with_a_reason() -> None:
    tropical = WFSA("min-plus", alphabet="a")
    with pytest.raises(SemiringError, match="first automaton is over the min-plus semiring"):
        equivalent(tropical, WFSA("real", alphabet="a"))
    open_ = WFSA("real")
    open_.add_state("q")
    open_.add_arc("q", "q", ANY, 0.5)
    with pytest.raises(AlphabetError, match="arc 0 of the second automaton has the predicate label ∀α"):
        equivalent(WFSA("real"), open_)
    divergent = WFSA("real", alphabet="a")
    divergent.add_state("q")
    divergent.add_arc("q", "q", EPSILON, 1.5)
    assert equivalent(divergent, WFSA("real", alphabet="a"))  # the cycle is on no successful path: both are empty
    divergent.set_initial("q")
    divergent.set_final("q")
    with pytest.raises(DivergenceError):
        equivalent(divergent, WFSA("real", alphabet="a"))


def test_inputs_are_not_modified() -> None:
    a = WFSA(REAL, alphabet="ab")
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q")
    a.add_arc("p", "q", EPSILON, 0.5)
    a.add_arc("q", "q", ANY, 0.5)
    arcs, states = list(a.arcs), a.states
    equivalent(a, reverse(a))
    assert a.arcs == arcs and a.states == states and a.has_epsilons
