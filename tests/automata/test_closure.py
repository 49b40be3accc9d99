"""The one epsilon closure, ``closure.epsilon_closure_rows``: both of its strategies against the fuzz's independent
oracle (Gauss-Jordan elimination in the semiring; capped sums of powers), its divergence rule, its errors."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

from kleene.automata import EPSILON, WFSA, closure, get_semiring, remove_epsilon
from kleene.automata.algorithms import useful_mask
from kleene.automata.sparse import ClosureRows
from kleene.errors import ArgumentError, BudgetExceededError, DivergenceError

from . import engine_fuzz

STRATEGIES = {"dense": 10**9, "sparse": 0}  # DENSE_CLOSURE_STATES forcing each strategy


def random_epsilon_automaton(semiring: str, n: int, seed: int) -> WFSA:
    """n states, random epsilon and symbol arcs of convergent weights (small cycles), state 0 initial, n-1 final."""
    rng = random.Random(seed)
    a = WFSA(semiring)
    s = a.semiring
    for _ in range(n):
        a.add_state()
    a.set_initial(0)
    a.set_final(n - 1)
    small = {"real": 0.2, "log": float(np.log(0.2)), "max-plus": -0.5, "min-plus": 0.5, "max-times": 0.5,
             "boolean": True}[semiring]
    for _ in range(2 * n):
        a.add_arc(rng.randrange(n), rng.randrange(n), EPSILON if rng.random() < 0.6 else "a", small)
    for q in range(n - 1):
        a.add_arc(q, q + 1, "a", s.one)
    return a


def rows_as_matrix(rows: ClosureRows, semiring: str, n: int) -> np.ndarray:
    """The rows read one at a time (``ClosureRows.row``) into a dense matrix."""
    out = get_semiring(semiring).zeros((n, n))
    for q in range(n):
        cols, vals = rows.row(q)
        out[q, cols] = vals
    return np.asarray(out)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("semiring", ["real", "log", "max-plus", "min-plus", "max-times", "boolean"])
def test_each_strategy_is_the_closure_of_the_epsilon_matrix(
    semiring: str, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exact and capped closures of random automata (1 to 12 states) equal the oracle's, in both strategies."""
    monkeypatch.setattr(closure, "DENSE_CLOSURE_STATES", STRATEGIES[strategy])
    s = get_semiring(semiring)
    for seed in range(6):
        a = random_epsilon_automaton(semiring, 1 + 2 * seed, seed)
        eps = engine_fuzz.Dense.of(a).eps
        for cap in (None, 0, 1, 3):
            expected = engine_fuzz.closure(eps, s, cap)
            got = rows_as_matrix(closure.epsilon_closure_rows(a, cap), semiring, a.num_states)
            finite = np.isfinite(np.asarray(expected, dtype=float))
            assert np.array_equal(finite, np.isfinite(np.asarray(got, dtype=float)))
            np.testing.assert_allclose(np.asarray(got, dtype=float)[finite], np.asarray(expected, dtype=float)[finite],
                                       rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_divergent_cycle_off_every_successful_path_counts_only_without_useful(
    strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real epsilon self-loop of weight 2 on a state no successful path visits: ``useful=None`` raises, naming
    it; with ``useful`` the closure is that of the useful states (their rows are the oracle's on them)."""
    monkeypatch.setattr(closure, "DENSE_CLOSURE_STATES", STRATEGIES[strategy])
    a = random_epsilon_automaton("real", 6, 3)
    dead = a.add_state("dead")
    a.add_arc(0, dead, EPSILON, 0.5)
    a.add_arc(dead, dead, EPSILON, 2.0)
    with pytest.raises(DivergenceError, match="dead"):
        closure.epsilon_closure_rows(a)
    useful = useful_mask(a)
    got = rows_as_matrix(closure.epsilon_closure_rows(a, useful=lambda: useful_mask(a)), "real", a.num_states)
    eps = engine_fuzz.Dense.of(a).eps
    expected = engine_fuzz.closure(np.where(useful[:, None] & useful[None, :], eps, 0.0), get_semiring("real"), None)
    np.testing.assert_allclose(got[np.ix_(useful, useful)], expected[np.ix_(useful, useful)], rtol=1e-12)
    assert closure.epsilon_closure_rows(a, 2) is not None  # a capped closure never diverges


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_bad_caps_and_budgets_raise_named_errors(strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(closure, "DENSE_CLOSURE_STATES", STRATEGIES[strategy])
    a = random_epsilon_automaton("log", 5, 1)
    for cap in (-1, 1.5, True, "2"):
        with pytest.raises(ArgumentError, match=r"epsilon_closure_rows: epsilon_cap .* got"):
            closure.epsilon_closure_rows(a, cap)  # type: ignore[arg-type]
    with pytest.raises(BudgetExceededError, match="more than 2 entries"):
        closure.epsilon_closure_rows(a, budget=2)


def test_the_dense_rows_carry_their_matrix_and_sparse_rows_expand_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    a = random_epsilon_automaton("max-plus", 9, 4)
    dense = closure.epsilon_closure_rows(a)
    assert dense.matrix is not None and dense.dense(a.semiring) is dense.matrix
    monkeypatch.setattr(closure, "DENSE_CLOSURE_STATES", 0)
    sparse = closure.epsilon_closure_rows(a)
    assert sparse.matrix is None
    np.testing.assert_allclose(sparse.dense(a.semiring), dense.matrix, rtol=1e-12)


def test_capped_remove_epsilon_of_a_large_automaton_grows_with_its_arcs() -> None:
    """``remove_epsilon(a, cap)`` of 3,000 states: the capped closure is sparse (the dense one needed Q x Q x Q
    temporaries, 200 GiB here), and the result scores strings as ``score(..., epsilon_cap)``."""
    a = random_epsilon_automaton("log", 3000, 7)
    start = time.perf_counter()
    b = remove_epsilon(a, 2)
    assert time.perf_counter() - start < 20.0
    assert not b.has_epsilons
    for word in (["a"], ["a", "a", "a"], ["a"] * 7):
        assert b.score(word) == pytest.approx(a.score(word, epsilon_cap=2), rel=1e-9)
