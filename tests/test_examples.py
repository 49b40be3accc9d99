"""The paper's automata B, C, F: their arcs as the paper describes them, and their scores against the paper's
equations (Eq. 4, Eq. 6, Eqs. 11-12, the §5.1 recurrence) and against brute-force path enumeration."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.automata import ANY, EPSILON, get_semiring
from kleene.automata.examples import (
    DEFAULT_ALPHABET,
    paper_automaton_b,
    paper_automaton_c,
    paper_automaton_f,
    paper_equation_4,
    paper_recurrence_b,
    paper_recurrence_c,
    paper_recurrence_f,
)
from kleene.errors import ArgumentError

from .automata.oracle import brute_force_score

FUNCTIONS = ("mu", "phi", "mu1", "phi1", "mu2", "phi2")
sentences = st.lists(st.sampled_from(DEFAULT_ALPHABET), min_size=0, max_size=6)
values = st.floats(-2.0, 2.0, allow_nan=False)


@st.composite
def environments(draw: st.DrawFn) -> dict[str, Any]:
    env: dict[str, Any] = {name: {s: draw(values) for s in DEFAULT_ALPHABET} for name in FUNCTIONS}
    env.update({name: draw(values) for name in ("gamma", "rho1", "rho2")})
    return env


def arc_table(wfsa: Any) -> set[tuple[str, str, str, str]]:
    return {(wfsa.state_name(a.src), wfsa.state_name(a.dst), str(a.label), str(a.weight)) for a in wfsa.arcs}


def test_b_is_figure_1() -> None:
    b = paper_automaton_b()
    assert b.states == ["q0", "q1"] and b.initial == {0: 1.0} and b.final == {1: 1.0}
    assert arc_table(b) == {
        ("q0", "q0", "∀α", "1.0"),
        ("q0", "q1", "∀α", "mu(alpha)"),
        ("q1", "q1", "∀α", "phi(alpha)"),
    }
    assert all(a.label is ANY for a in b.arcs)


def test_c_is_figure_2() -> None:
    c = paper_automaton_c()
    assert c.states == ["q0", "q1", "q2"] and c.initial == {0: 1.0} and c.final == {2: 1.0}
    assert arc_table(c) == {
        ("q0", "q0", "∀α", "1.0"),
        ("q0", "q1", "∀α", "mu1(alpha)"),
        ("q1", "q1", "∀α", "phi1(alpha)"),
        ("q1", "q2", "∀α", "mu2(alpha)"),
        ("q2", "q2", "∀α", "phi2(alpha)"),
    }


def test_f_is_figure_4() -> None:
    f = paper_automaton_f()
    assert f.states == ["q0", "q1", "q2", "q3"] and f.initial == {0: 1.0}
    assert {f.state_name(q): str(w) for q, w in f.final.items()} == {"q1": "rho1", "q2": "rho2"}
    assert arc_table(f) == arc_table(paper_automaton_c()) | {
        ("q0", "q3", "ε", "gamma"),
        ("q3", "q2", "∀α", "mu2(alpha)"),
    }
    assert [a.label for a in f.arcs if not a.label.consumes] == [EPSILON]


@pytest.mark.parametrize("semiring", ["real", "log", "max-plus", "max-times"])
def test_constructions_take_any_semiring(semiring: str) -> None:
    for build in (paper_automaton_b, paper_automaton_c, paper_automaton_f):
        wfsa = build(semiring, alphabet=["x", "y"])
        assert wfsa.semiring is get_semiring(semiring) and list(wfsa.alphabet or []) == ["x", "y"]
        assert wfsa.initial == {0: get_semiring(semiring).one}


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_b_symbolic_score_is_equation_4(n: int) -> None:
    words = list(DEFAULT_ALPHABET * 2)[:n]
    assert sympy.expand(paper_automaton_b().score_symbolic(words) - paper_equation_4(words)) == 0


def test_equation_4_is_for_nonempty_strings() -> None:
    with pytest.raises(ArgumentError, match=r"symbols: .*non-empty"):
        paper_equation_4([])
    assert paper_automaton_b().score([], {"mu": {}, "phi": {}}) == 0.0  # "B gives the empty string score 0"


@settings(max_examples=40, deadline=None)
@given(sentences, environments())
def test_forward_matches_the_papers_recurrences(words: list[str], env: dict[str, Any]) -> None:
    for build, recurrence in (
        (paper_automaton_b, paper_recurrence_b),
        (paper_automaton_c, paper_recurrence_c),
        (paper_automaton_f, paper_recurrence_f),
    ):
        forward = float(build().score(words, env))
        assert math.isclose(forward, recurrence(words, env), rel_tol=1e-9, abs_tol=1e-9), build.__name__


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(DEFAULT_ALPHABET), max_size=4), environments())
def test_recurrences_match_brute_force_path_sums(words: list[str], env: dict[str, Any]) -> None:
    # F's only epsilon arc leaves q0 and no epsilon follows it, so one epsilon in a row covers every path
    for build, recurrence in (
        (paper_automaton_b, paper_recurrence_b),
        (paper_automaton_c, paper_recurrence_c),
        (paper_automaton_f, paper_recurrence_f),
    ):
        total = float(brute_force_score(build(), words, max_epsilons=1, env=env))
        assert math.isclose(total, recurrence(words, env), rel_tol=1e-9, abs_tol=1e-9), build.__name__


def equation_4_in(semiring_name: str, words: Sequence[Hashable], env: dict[str, Any]) -> Any:
    """Eq. 4 read literally with the semiring's ⊕ and ⊗."""
    s = get_semiring(semiring_name)
    total = s.zero
    for i in range(len(words)):
        term = env["mu"][words[i]]
        for x in words[i + 1 :]:
            term = s.times(term, env["phi"][x])
        total = s.plus(total, term)
    return total


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(DEFAULT_ALPHABET), min_size=1, max_size=6), environments())
def test_b_in_max_plus_is_equation_4_with_max_and_plus(words: list[str], env: dict[str, Any]) -> None:
    # §5.2: the same automaton over <R, max, +> scores the best single unigram with its decay
    score = paper_automaton_b("max-plus").score(words, env)
    assert math.isclose(float(score), float(equation_4_in("max-plus", words, env)), rel_tol=1e-9, abs_tol=1e-9)


def test_recurrence_f_counts_the_epsilon_shortcut_from_the_first_symbol() -> None:
    # one word: paths q0 -μ1-> q1 (final ρ1) and q0 -ε/γ-> q3 -μ2-> q2 (final ρ2)
    env = {name: {"the": 0.5} for name in FUNCTIONS} | {"gamma": 0.25, "rho1": 2.0, "rho2": 3.0}
    assert paper_recurrence_f(["the"], env) == pytest.approx(2.0 * 0.5 + 3.0 * 0.25 * 0.5)
    assert float(paper_automaton_f().score(["the"], env)) == pytest.approx(2.0 * 0.5 + 3.0 * 0.25 * 0.5)

