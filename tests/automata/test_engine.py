"""The engine's strategies agree: regressions of the disagreements the differential fuzz found (issue 25), and the
fuzz itself at a small count (``benchmarks/fuzz_engine.py`` runs it at 10,000 comparisons and more)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from kleene.automata import EPSILON, WFSA, sparse
from kleene.automata.semiring import get_semiring
from kleene.errors import DivergenceError

from . import engine_fuzz


def chain(n: int, semiring: str) -> WFSA:
    """States 0 -a-> 1 -a-> ... -> n-1 (initial 0, final n-1), all weights one."""
    a = WFSA(semiring)
    for i in range(n):
        a.add_state(str(i))
    a.set_initial(0)
    a.set_final(n - 1)
    for i in range(n - 1):
        a.add_arc(i, i + 1, "a", a.semiring.one)
    return a


SIZES = [8, sparse.SPARSE_MIN_STATES]  # the dense strategy and the sparse one


@pytest.mark.parametrize("n", SIZES)
def test_pathsum_honours_the_epsilon_cap_in_every_strategy(n: int) -> None:
    """A real epsilon self-loop of weight w with cap 1 adds w once: 1 + w (2 diverges without the cap)."""
    for w in (0.5, 2.0):
        a = chain(n, "real")
        a.add_arc(1, 1, EPSILON, w)
        assert a.pathsum(epsilon_cap=1) == pytest.approx(1.0 + w, rel=1e-12)
        assert a.pathsum(epsilon_cap=2) == pytest.approx(1.0 + w + w * w, rel=1e-12)
    with pytest.raises(DivergenceError, match="cycle 1 -> 1"):
        a.pathsum()


@pytest.mark.parametrize("n", SIZES)
def test_a_string_with_no_successful_path_scores_zero_beside_a_divergent_cycle(n: int) -> None:
    """Min-plus, a negative epsilon loop on the start state: "b" has no successful path (score = zero = inf, no
    best path); "a"*(n-1) has one through the loop and diverges."""
    a = chain(n, "min-plus")
    a.add_arc(0, 0, EPSILON, -1.0)
    assert a.score(["b"]) == math.inf
    assert not a.viterbi(["b"]).found
    assert a.score_batch([["b"], ["b", "b"]]) == [math.inf, math.inf]
    with pytest.raises(DivergenceError):
        a.score(["a"] * (n - 1))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("loop", [-1e-16, -1e-17, -1e-300])
def test_log_closure_is_exact_near_probability_one(n: int, loop: float) -> None:
    """A log self-loop of weight w: pathsum = -log(1 - e^w) = -log(-expm1(w)) (36.841 for -1e-16); e^w rounds to
    1.0 for -1e-17, which must not make the sum diverge."""
    a = chain(n, "log")
    a.add_arc(1, 1, EPSILON, loop)
    expected = -math.log(-math.expm1(loop))
    assert a.pathsum() == pytest.approx(expected, rel=1e-12)
    assert a.score(["a"] * (n - 1)) == pytest.approx(expected, rel=1e-12)


def test_capped_epsilon_closure_rows_equal_the_dense_capped_closure() -> None:
    """``sparse.epsilon_closure(..., cap=k)`` is ``I + E + ... + E^k`` (the one closure function, capped)."""
    import numpy as np

    s = get_semiring("real")
    src, dst = np.array([0, 1, 1, 2]), np.array([1, 1, 2, 0])
    weight = np.array([0.5, 0.25, 2.0, 3.0])
    e = np.zeros((3, 3))
    np.add.at(e, (src, dst), weight)
    for cap in range(4):
        rows = sparse.epsilon_closure(s, 3, src, dst, weight, ["p", "q", "r"], cap)
        got = np.zeros((3, 3))
        for q in range(3):
            cols, vals = rows.row(q)
            got[q, cols] = vals
        expected = sum(np.linalg.matrix_power(e, k) for k in range(cap + 1))
        np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.slow
def test_the_fuzz_finds_no_disagreement() -> None:
    outcome = engine_fuzz.run(600, seed=0)
    assert outcome.comparisons >= 600
    assert not outcome.disagreements, "\n".join(outcome.disagreements)


def test_the_fuzz_sees_a_wrong_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison is not vacuous: an engine whose dense closure is off by 1e-3 disagrees with the oracle."""
    from kleene.automata import closure

    right = closure.closure_matrix

    def off(*args: Any, **kwargs: Any) -> Any:
        return right(*args, **kwargs) + 1e-3

    monkeypatch.setattr(closure, "closure_matrix", off)  # the dense strategy of the one epsilon closure
    a = chain(3, "log")
    a.add_arc(1, 1, EPSILON, -1.0)
    case = engine_fuzz.Case(a, {}, [["a", "a"]], [None], "a log self-loop")
    problems = [engine_fuzz.compare(label, ours, theirs, a.semiring, same)
                for label, ours, theirs, same in engine_fuzz.comparisons(case)]
    assert any(p is not None and p.startswith("score") for p in problems)


@pytest.mark.parametrize("towards", ["initial", "final"])
def test_state_distances_with_predicate_labels_ignore_a_divergent_cycle_off_their_paths(towards: str) -> None:
    """The dense branch (predicate labels) sums only the paths it reports, as the store's: a divergent cycle on a
    state neither reached from an initial state nor reaching a final one does not raise."""
    from kleene.automata import ANY
    from kleene.automata.push import state_distances

    a = WFSA("log", alphabet=["a", "b"])
    for name in "pqr":
        a.add_state(name)
    a.set_initial(0)
    a.set_final(1)
    a.add_arc(0, 1, ANY, math.log(0.25))  # two symbols: 0.5 in all
    a.add_arc(2, 2, EPSILON, 0.5)  # divergent, on no path from 0 or to 1
    expected = {"initial": [0.0, math.log(0.5), -math.inf], "final": [math.log(0.5), 0.0, -math.inf]}[towards]
    assert state_distances(a, towards) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("semiring", ["min-plus", "log", "max-plus"])
@pytest.mark.parametrize("cap", [None, 1, 3])
def test_viterbi_small_layers_and_array_layers_find_the_same_path(
    semiring: str, cap: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Viterbi's two layer strategies (Python dicts for small layers, arrays otherwise) relax epsilon arcs round for
    round alike: the same best path, arc for arc, on random automata with epsilon cycles (weights of 3 values, so
    ties are common and the tie rule is exercised). The arrays read epsilon arcs from the padded table (capped
    searches) or by CSR ranges (exact ones)."""
    from kleene.automata import algorithms
    from kleene.automata.algorithms import _viterbi_small, _viterbi_store

    monkeypatch.setattr(algorithms, "PADDED_EPSILONS", 64 if cap else 0)
    rng = np.random.default_rng(len(semiring) + (cap or 0))
    s = get_semiring(semiring)
    compared = 0
    for trial in range(12):
        n = int(rng.integers(8, 60))
        a = WFSA(semiring, alphabet=["a", "b"])
        for q in range(n):
            a.add_state(str(q))
        a.set_initial(0)
        for q in rng.choice(n, 6, replace=False).tolist():
            a.set_final(q, s.one)
        cost = [0.0, 0.5, 1.0] if semiring == "min-plus" else [0.0, -0.5, -1.0]
        for _ in range(3 * n):
            label = [EPSILON, "a", "b"][int(rng.integers(0, 3))]
            a.add_arc(int(rng.integers(0, n)), int(rng.integers(0, n)), label, cost[int(rng.integers(0, 3))])
        store = sparse.require_store(a)
        for _ in range(4):
            word = [["a", "b"][int(i)] for i in rng.integers(0, 2, int(rng.integers(0, 6)))]
            small = _viterbi_small(a, store, word, cap, store.useful())
            assert small is not None  # a layer holds at most n < SMALL_FRONTIER (64) states
            array = _viterbi_store(a, store, word, cap, store.useful())
            assert (small.weight, small.steps, small.start, small.end) == (
                array.weight, array.steps, array.start, array.end), (trial, word)
            compared += small.found
    assert compared >= 10  # most words have a path


def test_exact_closure_rows_and_the_component_walk_score_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forward's two readings of the exact epsilon closure (rows computed once per store; the component walk from
    the vector's support, when the rows would outgrow their budget) give the same scores, on a log automaton with
    epsilon cycles."""
    from kleene.automata import algorithms

    rng = np.random.default_rng(7)
    n = 80
    a = WFSA("log", alphabet=["a", "b"])
    for q in range(n):
        a.add_state(str(q))
        a.set_final(q, math.log(0.1))
    a.set_initial(0)
    for q in range(n):
        share = rng.dirichlet(np.ones(4)) * 0.9
        for p in share:
            label = [EPSILON, "a", "b"][int(rng.integers(0, 3))]
            a.add_arc(q, int(rng.integers(0, n)), label, math.log(p))
    words = [[["a", "b"][int(i)] for i in rng.integers(0, 2, length)] for length in range(6)]
    store = sparse.require_store(a)
    assert algorithms.SparseStepper(a, store, None).rows is not None
    with_rows = [a.score(w) for w in words]
    monkeypatch.setattr(algorithms, "CLOSURE_ROWS_MIN", 0)
    monkeypatch.setattr(algorithms, "CLOSURE_ROWS_PER_ARC", 0)
    b = a.copy()  # a fresh store: its memo has no rows
    assert algorithms.SparseStepper(b, sparse.require_store(b), None).rows is None
    walked = [b.score(w) for w in words]
    assert walked == pytest.approx(with_rows, rel=1e-12, abs=1e-12)
    assert min(with_rows) > -math.inf


@pytest.mark.parametrize("cap", [1, 2, 4])
def test_capped_viterbi_through_improving_epsilon_cycles_backtraces_the_path_it_scored(cap: int) -> None:
    """With an epsilon cap, the best path may go round an improving epsilon cycle (a state twice) or stop before its
    source's later improvements: both strategies give the same path, its steps multiply to its weight and no run
    of epsilon arcs exceeds the cap (a regression: one back pointer per state looped for ever or named a path of
    another weight)."""
    from kleene.automata.algorithms import _viterbi_small, _viterbi_store

    a = chain(4, "min-plus")  # 0 -a-> 1 -a-> 2 -a-> 3, final 3
    a.add_arc(1, 1, EPSILON, -1.0)  # an improving self-loop
    a.add_arc(2, 1, EPSILON, -0.5)  # and a cycle 1 -> 2 -> ... through the chain's states
    a.add_arc(1, 2, EPSILON, -0.25)
    store = sparse.require_store(a)
    rng = np.random.default_rng(cap)
    for word in (["a"], ["a", "a"], ["a", "a", "a"], ["a"] * int(rng.integers(1, 5))):
        small = _viterbi_small(a, store, word, cap, store.useful())
        array = _viterbi_store(a, store, word, cap, store.useful())
        assert small is not None and (small.weight, small.steps) == (array.weight, array.steps)
        if not small.found:
            continue
        assert sum(step.weight for step in small.steps) == pytest.approx(small.weight, abs=1e-12)
        run = longest = 0
        for step in small.steps:
            run = run + 1 if step.symbol is None else 0
            longest = max(longest, run)
        assert longest <= cap
        assert [step.symbol for step in small.steps if step.symbol is not None] == word
