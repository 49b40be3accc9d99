"""Forward, Viterbi, all-spans and pathsum against brute-force path enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kleene.automata import ANY, EPSILON, WFSA, Arc, DivergenceError, WeightError, get_semiring
from kleene.automata.algorithms import all_spans, closure_matrix, pathsum, score, score_batch, viterbi

from .oracle import brute_force_best, brute_force_score, path_count
from .strategies import ALPHABET, strings, wfsas

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]

#: The most paths an example may have for the brute-force oracles to enumerate it (rare random automata with parallel
#: epsilon arcs have millions: one such example took a minute)
ENUMERABLE = 20_000


def close(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    fa, fb = float(a), float(b)  # type: ignore[arg-type]
    if math.isinf(fa) or math.isinf(fb):
        return fa == fb
    return math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-9)


def epsilon_acyclic(a: WFSA) -> bool:
    import networkx as nx

    g = nx.DiGraph([(arc.src, arc.dst) for arc in a.arcs if not arc.label.consumes])
    return nx.is_directed_acyclic_graph(g)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_capped_forward_equals_path_enumeration(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring))
    x = data.draw(strings)
    cap = data.draw(st.integers(0, 2))
    assert close(score(a, x, epsilon_cap=cap), brute_force_score(a, x, cap))


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_exact_forward_equals_enumeration_when_epsilons_are_acyclic(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring))
    assume(epsilon_acyclic(a))
    x = data.draw(strings)
    assert close(score(a, x), brute_force_score(a, x, a.num_states))


@pytest.mark.parametrize("semiring", ["real", "log", "max-plus", "min-plus", "max-times", "boolean"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_exact_closure_is_the_limit_of_capped_closures(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, max_arcs=10))
    x = data.draw(strings)
    try:
        exact = score(a, x)
    except DivergenceError:
        assume(False)
    assert close(exact, score(a, x, epsilon_cap=200)) or math.isclose(
        float(exact), float(score(a, x, epsilon_cap=200)), rel_tol=1e-7, abs_tol=1e-9
    )


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_viterbi_finds_the_best_enumerated_path(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, signed=False, max_arcs=6))
    x = data.draw(strings)
    cap = data.draw(st.integers(0, 2))
    assume(path_count(a, x, cap) <= ENUMERABLE)
    best_weight, best_arcs = brute_force_best(a, x, cap)
    path = viterbi(a, x, epsilon_cap=cap)
    assert path.found == (best_arcs is not None)
    assert close(path.weight, best_weight)
    if path.found:
        s = a.semiring
        total = a.numeric(a.initial[a.state(path.start)], None, None, "initial")
        for step in path.steps:
            total = s.times(total, step.weight)
        total = s.times(total, a.final[a.state(path.end)])
        assert close(total, path.weight)
        assert [step.symbol for step in path.steps if step.kind != "epsilon"] == list(x)
        assert sum(1 for step in path.steps if step.kind == "epsilon") <= cap * (len(x) + 1)


@pytest.mark.parametrize("semiring", ["max-plus", "max-times", "min-plus", "log"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_exact_viterbi_matches_enumeration_with_epsilon_cycles(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring))
    x = data.draw(strings)
    assume(path_count(a, x, a.num_states) <= ENUMERABLE)
    best_weight, _ = brute_force_best(a, x, a.num_states)
    assert close(viterbi(a, x).weight, best_weight)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_all_spans_sums_every_substring(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring))
    x = data.draw(strings)
    cap = data.draw(st.integers(0, 1))
    s = a.semiring
    spans = all_spans(a, x, epsilon_cap=cap)
    for j in range(1, len(x) + 1):
        expected = s.zero
        for i in range(j):
            expected = s.plus(expected, brute_force_score(a, x[i:j], cap))
        assert close(spans.ends[j - 1], expected)
    total = s.zero
    for end in spans.ends:
        total = s.plus(total, end)
    assert close(spans.total, total)


@pytest.mark.parametrize("semiring", ["max-plus", "min-plus", "max-times", "boolean"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_pathsum_of_idempotent_semirings_is_the_best_short_string(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, max_states=3, epsilons=False))
    try:
        total = pathsum(a)
    except DivergenceError:
        assume(False)
    s = a.semiring
    expected = s.zero
    for n in range(a.num_states + 1):
        for x in itertools.product(ALPHABET, repeat=n):
            expected = s.plus(expected, brute_force_score(a, x, 0))
    assert close(total, expected)


@settings(max_examples=15, deadline=None)
@given(a=wfsas("real", max_states=3, epsilons=False))
@pytest.mark.slow
def test_real_pathsum_is_the_limit_of_truncated_sums(a: WFSA) -> None:
    radius = np.max(np.abs(np.linalg.eigvals(np.abs(sum(a.transition_matrix(x) for x in ALPHABET)))))
    shrink = min(1.0, 0.2 / radius) if radius > 0 else 1.0
    scaled = a.copy()
    scaled.arcs = [Arc(arc.src, arc.dst, arc.label, arc.weight * shrink) for arc in a.arcs]
    truncated = 0.0
    for n in range(8):  # every string's score, in one score_batch per length (checked equal to score elsewhere)
        truncated += sum(score_batch(scaled, list(itertools.product(ALPHABET, repeat=n))))
    assert math.isclose(pathsum(scaled), truncated, rel_tol=1e-3, abs_tol=1e-4)


def test_divergent_epsilon_closure_names_the_cycle() -> None:
    a = WFSA("real", alphabet="ab")
    a.add_states("start", "loop1", "loop2")
    a.set_initial("start")
    a.set_final("loop2")
    a.add_arc("start", "loop1", EPSILON, 0.5)
    a.add_arc("loop1", "loop2", EPSILON, 2.0)
    a.add_arc("loop2", "loop1", EPSILON, 0.9)
    with pytest.raises(DivergenceError, match=r"loop1 -> loop2 -> loop1|loop2 -> loop1 -> loop2") as err:
        a.score("")
    assert "spectral radius" in str(err.value)
    assert a.score("ab") == 0.0  # no path derives "ab": the cycle is on no successful path of it


def test_positive_max_plus_cycle_diverges_with_its_name() -> None:
    a = WFSA("max-plus")
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q")
    a.add_arc("p", "q", EPSILON, 0.5)
    a.add_arc("q", "p", EPSILON, 0.1)
    with pytest.raises(DivergenceError, match=r"cycle p -> q -> p|cycle q -> p -> q"):
        a.score([])
    with pytest.raises(DivergenceError, match="improves paths without bound"):
        a.viterbi([])


def test_capped_closure_is_sopa_first_order() -> None:
    s = get_semiring("max-times")
    e = np.array([[0.0, 0.7, 0.0], [0.0, 0.0, 0.6], [0.0, 0.0, 0.0]])
    assert np.allclose(closure_matrix(e, s, cap=1), np.maximum(np.eye(3), e))


def test_viterbi_names_main_self_loop_and_epsilon_arcs() -> None:
    a = WFSA("max-times", alphabet="ab")
    a.add_states("s", "m", "e")
    a.set_initial("s")
    a.set_final("e")
    a.add_arc("s", "m", "a", 0.9)
    a.add_arc("m", "m", ANY, 0.5)
    a.add_arc("m", "e", EPSILON, 0.8)
    path = a.viterbi("ab")
    assert [step.kind for step in path.steps] == ["main", "self-loop", "epsilon"]
    assert [step.symbol for step in path.steps] == ["a", "b", None]
    assert math.isclose(path.weight, 0.9 * 0.5 * 0.8)
    assert "self-loop" in str(path)


def test_unknown_symbol_is_named_with_its_position() -> None:
    a = WFSA("real", alphabet="ab")
    a.add_state()
    a.set_initial(0)
    a.set_final(0)
    with pytest.raises(Exception, match=r"symbol 'z' at position 2 is not in the alphabet"):
        a.score("abz")


def test_real_viterbi_refuses_negative_weights() -> None:
    a = WFSA("real")
    a.add_state()
    a.set_initial(0)
    a.set_final(0)
    a.add_arc(0, 0, "a", -0.5)
    with pytest.raises(WeightError, match="arc 0 on 'a': Viterbi in the real semiring"):
        a.viterbi("a")
    a.arcs.clear()
    a.set_final(0, -1.0)
    with pytest.raises(WeightError, match="final weight of q0: Viterbi in the real semiring"):
        a.viterbi("")


@pytest.mark.parametrize("name", ["real", "log", "max-plus", "min-plus", "max-times", "boolean"])
@pytest.mark.parametrize("cap", [None, 0, 2])
def test_closure_of_a_batch_is_the_closure_of_each_matrix(name: str, cap: int | None) -> None:
    import torch

    s = get_semiring(name)
    rng = np.random.default_rng(3)
    if name == "boolean":
        batch = rng.random((2, 3, 3, 3)) < 0.3
    elif name in ("max-plus", "log"):
        batch = np.where(rng.random((2, 3, 3, 3)) < 0.5, -rng.uniform(0.5, 2.0, (2, 3, 3, 3)), s.zero)
    elif name == "min-plus":
        batch = np.where(rng.random((2, 3, 3, 3)) < 0.5, rng.uniform(0.5, 2.0, (2, 3, 3, 3)), s.zero)
    else:
        batch = np.where(rng.random((2, 3, 3, 3)) < 0.5, rng.uniform(0.0, 0.3, (2, 3, 3, 3)), s.zero)
    got = closure_matrix(batch, s, cap)
    assert got.shape == batch.shape
    for index in np.ndindex(batch.shape[:2]):
        np.testing.assert_allclose(got[index], closure_matrix(batch[index], s, cap), atol=1e-12)
    if name != "boolean":
        as_torch = closure_matrix(torch.as_tensor(batch), s, cap)
        np.testing.assert_allclose(as_torch.numpy(), got, atol=1e-12)


def test_batched_divergence_names_the_matrix_and_cycle() -> None:
    batch = np.zeros((3, 2, 2))
    batch[2, 1, 1] = 0.5  # max-plus: a positive self-loop in the third matrix only
    with pytest.raises(DivergenceError, match=r"matrix \[2\] of the batch.*cycle state 1 -> state 1"):
        closure_matrix(np.where(batch == 0, -np.inf, batch), get_semiring("max-plus"))
    with pytest.raises(DivergenceError, match=r"matrix \[1\] of the batch.*spectral radius 1\.5"):
        closure_matrix(np.stack([np.zeros((2, 2)), np.diag([0.0, 1.5])]), get_semiring("real"))


def test_viterbi_and_pathsum_of_symbolic_weights_bind_them_and_name_the_original_arcs() -> None:
    """Symbolic weights are bound in ``env`` (an ``ANY`` arc of weight ``mu(α)`` becomes one arc per symbol) and
    the one arc-store search runs: the best path's steps name the arcs of the symbolic automaton, its weight is
    the product of their evaluated weights and equals the bound automaton's best path; pathsum sums the evaluated
    weights (with and without an epsilon cap)."""
    from kleene.automata import bind
    from kleene.automata.examples import paper_automaton_b
    from kleene.automata.weights import weight_functions

    b = paper_automaton_b("real", alphabet=["x", "y"])
    env = {"mu": {"x": 0.3, "y": 0.5}, "phi": {"x": 0.7, "y": 2.0}}
    bound = bind(b, env)
    for word in ["x", "xy", "yyx", "xyxy"]:
        path = viterbi(b, list(word), env)
        assert path.found and path.weight == pytest.approx(viterbi(bound, list(word)).weight, rel=1e-12)
        product = 1.0
        for step in path.steps:
            arc = b.arcs[step.arc]  # an index into the symbolic automaton's arcs
            assert (b.state_name(arc.src), b.state_name(arc.dst)) == (step.src, step.dst)
            assert step.weight == pytest.approx(b.arc_weight(step.arc, step.symbol, env), rel=1e-12)
            product *= step.weight
        assert product == pytest.approx(path.weight, rel=1e-12)
    # p -ANY/mu(α)-> q (final 0.5), q -ε/0.25-> p: the strings' total is 0.4 * 0.5 / (1 - 0.4 * 0.25)
    (mu,) = weight_functions("mu")
    loop = WFSA("real", alphabet=["x", "y"])
    loop.add_states("p", "q")
    loop.set_initial("p")
    loop.set_final("q", 0.5)
    loop.add_arc("p", "q", ANY, mu)
    loop.add_arc("q", "p", EPSILON, 0.25)
    assert pathsum(loop, {"mu": {"x": 0.3, "y": 0.1}}) == pytest.approx(0.2 / 0.9, rel=1e-12)
    assert pathsum(loop, {"mu": {"x": 0.3, "y": 0.1}}, epsilon_cap=0) == pytest.approx(0.2, rel=1e-12)


def test_symbolic_weights_evaluate_whatever_their_symbols_are_named() -> None:
    """A weight of calls and free symbols evaluates to its value at the environment's numbers, also where a free
    symbol has the name the evaluator gives its calls (``_kleene_call0``)."""
    import sympy

    from kleene.automata.weights import evaluate, weight_functions

    mu, phi = weight_functions("mu", "phi")
    for name in ("gamma", "_kleene_call0", "_kleene_call1"):
        free = sympy.Symbol(name)
        expr = mu * 2 + free * phi - sympy.exp(free)
        env = {"mu": {"x": 0.3}, "phi": {"x": 0.7}, name: 1.5}
        assert evaluate(expr, "x", env) == pytest.approx(0.3 * 2 + 1.5 * 0.7 - math.exp(1.5), rel=1e-14)
