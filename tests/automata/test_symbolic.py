"""Symbolic scores: agreement with numeric scores, epsilon stars, and the semirings' symbolic operations."""

from __future__ import annotations

import math
import random

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.automata import ALPHA, ANY, EPSILON, WFSA, WeightError, weight_functions
from kleene.automata.algorithms import score_symbolic

from .strategies import strings, wfsas


@pytest.mark.parametrize("semiring", ["real", "max-plus", "min-plus", "max-times", "boolean"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_symbolic_score_of_a_constant_automaton_is_its_numeric_score(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, max_states=3, max_arcs=6))
    x = data.draw(strings)
    cap = data.draw(st.sampled_from([0, 1, 2]))
    expr = score_symbolic(a, x, epsilon_cap=cap)
    numeric = a.score(x, epsilon_cap=cap)
    if semiring == "boolean":
        assert bool(expr) == bool(numeric)
    else:
        assert math.isclose(float(expr), float(numeric), rel_tol=1e-9, abs_tol=1e-9)


def _b_max_plus() -> WFSA:
    mu, phi = weight_functions("mu", "phi")
    b = WFSA("max-plus", alphabet="abc")
    b.add_states("q0", "q1")
    b.set_initial("q0")
    b.set_final("q1")
    b.add_arc("q0", "q0", ANY)
    b.add_arc("q0", "q1", ANY, mu)
    b.add_arc("q1", "q1", ANY, phi)
    return b


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_max_plus_b_is_eq4_with_max_and_plus(n: int) -> None:
    xs = sympy.symbols(f"x1:{n + 1}")
    mu, phi = sympy.Function("mu"), sympy.Function("phi")
    expected = sympy.Max(*[mu(xs[i]) + sum(phi(x) for x in xs[i + 1 :]) for i in range(n)])
    got = score_symbolic(_b_max_plus(), xs)
    rng = random.Random(n)
    for _ in range(50):
        values = {f(x): rng.uniform(-3, 3) for f in (mu, phi) for x in xs}
        assert math.isclose(float(got.xreplace(values)), float(expected.xreplace(values)))


def test_symbolic_weights_evaluate_with_an_environment() -> None:
    b = _b_max_plus()
    env = {"mu": {"a": 1.0, "b": -1.0, "c": 0.5}, "phi": lambda s: -0.25}
    expr = score_symbolic(b, list("abc"))
    values = {sympy.Function(f)(sympy.Symbol(s)): (env[f][s] if isinstance(env[f], dict) else -0.25)
              for f in ("mu", "phi") for s in "abc"}
    assert math.isclose(float(expr.xreplace(values)), b.score("abc", env))


def test_epsilon_cycle_closes_to_the_star_symbolically() -> None:
    gamma = sympy.Symbol("gamma")
    a = WFSA("real")
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q")
    a.add_arc("p", "q", EPSILON, gamma)
    a.add_arc("q", "p", EPSILON, gamma)
    assert sympy.simplify(score_symbolic(a, []) - gamma / (1 - gamma**2)) == 0
    assert math.isclose(a.score([], env={"gamma": 0.5}), 0.5 / 0.75)
    capped = score_symbolic(a, [], epsilon_cap=3)
    assert sympy.expand(capped - (gamma + gamma**3)) == 0


def test_epsilon_weight_cannot_depend_on_the_consumed_symbol() -> None:
    a = WFSA("real")
    a.add_states("p", "q")
    with pytest.raises(WeightError, match=r"arc 0 \(p -ε-> q\).*depends on the consumed symbol"):
        a.add_arc("p", "q", EPSILON, sympy.Function("mu")(ALPHA))


def test_missing_environment_entry_is_named() -> None:
    b = _b_max_plus()
    with pytest.raises(WeightError, match="no value for 'mu'"):
        b.score("ab", env={"phi": {"a": 0.0, "b": 0.0}})
    with pytest.raises(WeightError, match=r"mu\('c'\) is not defined"):
        b.score("c", env={"mu": {"a": 0.0}, "phi": {"a": 0.0}})


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_c_symbolic_score_is_equations_11_to_13(n: int) -> None:
    from kleene.automata.examples import paper_automaton_c

    xs = sympy.symbols(f"x1:{n + 1}")
    mu1, phi1, mu2, phi2 = (sympy.Function(f) for f in ("mu1", "phi1", "mu2", "phi2"))

    def beta(t: int) -> sympy.Expr:  # Eq. 13, unrolled
        if t == 0:
            return sympy.S.Zero
        terms = [mu1(xs[j]) * sympy.Mul(*(phi1(xs[k]) for k in range(j + 1, t))) for j in range(t - 1)]
        return sympy.Add(*terms, mu1(xs[t - 1]))

    c_score = sympy.S.Zero  # Eq. 11 with C[x_:0] = 0
    for t in range(n):
        c_score = c_score * phi2(xs[t]) + beta(t) * mu2(xs[t])
    got = score_symbolic(paper_automaton_c(), xs)
    assert sympy.expand(got - c_score) == 0
