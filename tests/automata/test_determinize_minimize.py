"""determinize, minimize, reduce, push, shortest_paths and random_paths: against OpenFst and brute force.

The OpenFst comparisons (``openfst_ops.py``) run ``KLEENE_OPENFST_FUZZ`` random automata per operation (default
200); ``benchmarks/fuzz_openfst_ops.py`` runs thousands.
"""

from __future__ import annotations

import math
import os
import random
from typing import Any

import numpy as np
import pytest

from kleene.automata import (
    ANY,
    EPSILON,
    WFSA,
    ArgumentError,
    BudgetExceededError,
    NoneOf,
    OneOf,
    SemiringError,
    WeightError,
    determinize,
    equivalent,
    is_deterministic,
    minimize,
    push,
    random_paths,
    reduce,
    shortest_path_automaton,
    shortest_paths,
    state_distances,
)
from kleene.automata.examples import DEFAULT_ALPHABET, paper_automaton_f

pytest.importorskip("pynini", reason="pynini (real OpenFst) is the oracle of the comparisons; pip install pynini")
from . import openfst_ops

COUNT = int(os.environ.get("KLEENE_OPENFST_FUZZ", "200"))


@pytest.mark.parametrize("operation", sorted(openfst_ops.CHECKS))
@pytest.mark.slow
def test_agrees_with_openfst_on_random_automata(operation: str) -> None:
    checked, skipped = openfst_ops.run(operation, COUNT, seed=0)
    # skipped: no twins property (kleene's budget is exceeded, so OpenFst would not terminate either)
    assert checked + skipped == COUNT
    assert checked >= 0.8 * COUNT, (checked, skipped)


# -- Schützenberger's reduction -----------------------------------------------------------------------------------


def paper_env(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    env: dict[str, Any] = {
        name: {w: rng.uniform(0.1, 0.9) for w in DEFAULT_ALPHABET} for name in ("mu1", "phi1", "mu2", "phi2")
    }
    env.update(gamma=rng.uniform(0.1, 0.5), rho1=rng.uniform(0.2, 0.9), rho2=rng.uniform(0.2, 0.9))
    return env


@pytest.mark.parametrize("seed", range(5))
def test_automaton_f_reduces_from_four_states_to_three(seed: int) -> None:
    f = paper_automaton_f("real")
    env = paper_env(seed)
    reduced = reduce(f, env=env)
    assert f.num_states == 4
    assert reduced.num_states == 3
    assert equivalent(f, reduced, env=env)
    assert minimize(f, env=env).num_states == 3  # "auto" picks the linear reduction for real weights
    assert reduce(reduced).num_states == 3


def hankel_rank(a: WFSA) -> int:
    """The rank of the Hankel block of prefixes x suffixes (brute-force scores) up to ``states - 1`` symbols,
    which holds a full basis: the forward vectors of words up to that length span the forward space."""
    words = list(openfst_ops.strings(max(a.num_states - 1, 0)))
    hankel = np.array([[a.semiring.to_real(a.score(u + v)) for v in words] for u in words])
    singular = np.linalg.svd(hankel, compute_uv=False)
    return int(np.sum(singular > 1e-9 * singular[0])) if singular[0] > 0 else 0


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.slow
def test_reduce_returns_an_equivalent_automaton_of_hankel_rank(seed: int) -> None:
    rng = random.Random(seed)
    semiring = "real" if seed % 2 else "log"
    a = openfst_ops.random_acceptor(rng, "log", max_states=4, max_arcs=8, epsilons=seed % 3 == 0)
    if semiring == "real":  # the same probabilities with some signs flipped
        real = WFSA("real", a.alphabet)
        for name in a.states:
            real.add_state(name)
        for arc in a.arcs:
            real.add_arc(arc.src, arc.dst, arc.label, math.exp(arc.weight) * rng.choice([1, -1]))
        real.initial = {q: math.exp(w) for q, w in a.initial.items()}
        real.final = {q: math.exp(w) * rng.choice([1, -1]) for q, w in a.final.items()}
        a = real
    try:
        reduced = reduce(a)
    except WeightError as exc:  # log: the minimal automaton needs a negative weight
        assert semiring == "log" and "real semiring" in str(exc)
        reduced = reduce(_as_real(a))
    assert equivalent(a, reduced), (a.to_att(), reduced.to_att())
    # a rank-r series is determined by its Hankel block up to length 2r; r <= states, so length 4 suffices here
    assert reduced.num_states == hankel_rank(a)
    assert reduce(reduced).num_states == reduced.num_states


def test_reduce_refuses_idempotent_semirings() -> None:
    a = openfst_ops.random_acceptor(random.Random(0), "min-plus")
    with pytest.raises(SemiringError, match="min-plus"):
        reduce(a)


# -- predicate labels stay symbolic ----------------------------------------------------------------------------------


def test_wildcards_over_a_large_vocabulary_are_not_expanded() -> None:
    vocabulary = [f"w{i}" for i in range(20_000)]
    a = WFSA("log", vocabulary)
    q0, q1, q2 = a.add_states("q0", "q1", "q2")
    a.set_initial(q0)
    # unambiguous loops (determinizable in log) with a total weight below one (a convergent pathsum)
    a.add_arc(q0, q0, NoneOf(["w7", "w8", "w9"]), math.log(0.3 / len(vocabulary)))
    a.add_arc(q0, q1, "w7", math.log(0.2))
    a.add_arc(q0, q1, OneOf(["w7", "w8", "w9"]), math.log(0.1))
    a.add_arc(q1, q2, NoneOf(["w1"]), math.log(0.5 / len(vocabulary)))
    a.add_arc(q1, q1, ANY, math.log(0.3 / len(vocabulary)))
    a.set_final(q2, math.log(0.5))
    a.set_final(q1, math.log(0.2))
    d = determinize(a)
    assert is_deterministic(d) and not is_deterministic(a)
    m = minimize(a)
    for result in (d, m):
        assert len(result.arcs) < 40, result.to_att()
        for word in (["w7"], ["w7", "w1"], ["w3", "w8", "w2"], ["w9", "w9", "w9"], ["w1", "w1"], []):
            assert math.isclose(result.score(word), a.score(word), abs_tol=1e-9), (word, result.to_att())


def test_minimize_merges_labels_back_into_predicates() -> None:
    a = WFSA("boolean", ["a", "b", "c", "d"])
    q = a.add_states("0", "1", "2")
    a.set_initial(q[0])
    for symbol in "abcd":
        a.add_arc(q[0], q[1 if symbol in "ab" else 2], symbol)
        a.add_arc(q[1], q[1], symbol)
        a.add_arc(q[2], q[2], ANY)
    a.set_final(q[1])
    a.set_final(q[2])
    m = minimize(a)  # a non-final start, then any non-empty string: two states, one arc each over all symbols
    assert m.num_states == 2 and len(m.arcs) == 2
    assert all(arc.label in (ANY, OneOf("abcd")) for arc in m.arcs), m.to_att()


# -- push, shortest paths --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("semiring", ["log", "min-plus", "max-times", "real"])
@pytest.mark.parametrize("seed", range(10))
def test_pushed_weights_out_of_every_state_sum_to_one(semiring: str, seed: int) -> None:
    a = openfst_ops.random_acceptor(random.Random(seed), "log" if semiring == "real" else semiring, epsilons=True)
    if semiring == "real":
        a = _as_real(a)
    p = push(a, "initial")
    s = p.semiring
    for q in range(p.num_states):
        total = p.final.get(q, s.zero)
        for arc in (a for a in p.arcs if a.src == q):
            total = s.plus(total, arc.weight)
        assert math.isclose(float(total), float(s.one), abs_tol=1e-9), (q, total, p.to_att())
    distances = state_distances(p, "final")
    assert all(math.isclose(float(d), float(s.one), abs_tol=1e-9) for d in distances)


def _as_real(a: WFSA) -> WFSA:
    real = WFSA("real", a.alphabet)
    for name in a.states:
        real.add_state(name)
    for arc in a.arcs:
        real.add_arc(arc.src, arc.dst, arc.label, math.exp(arc.weight))
    real.initial = {q: math.exp(w) for q, w in a.initial.items()}
    real.final = {q: math.exp(w) for q, w in a.final.items()}
    return real


def test_shortest_paths_of_a_small_automaton() -> None:
    a = WFSA("min-plus", ["a", "b"])
    a.add_states("0", "1", "2")
    a.set_initial("0")
    a.add_arc("0", "1", "a", 1.0)
    a.add_arc("0", "2", "a", 2.0)  # 'a b^k' through 2 costs 2 + k/2: no twins, but the lazy search needs few subsets
    a.add_arc("1", "1", "b", 1.0)
    a.add_arc("2", "2", "b", 0.5)
    a.set_final("1", 0.0)
    a.set_final("2", 0.0)
    assert shortest_paths(a, 3, max_states=10) == [(("a",), 1.0), (("a", "b"), 2.0), (("a", "b", "b"), 3.0)]
    assert sorted(shortest_paths(a, 3, unique=False)) == [(("a",), 1.0), (("a",), 2.0), (("a", "b"), 2.0)]
    with pytest.raises(BudgetExceededError):
        determinize(a, max_states=10)
    automaton = shortest_path_automaton(a, 3, unique=False)  # a start state and a chain per path
    assert automaton.score(["a"]) == 1.0 and automaton.score(["a", "b"]) == 2.0 and automaton.num_states == 5


def test_shortest_paths_ranks_log_and_real_weights_by_viterbi() -> None:
    a = WFSA("real", ["a", "b"])
    a.add_states("0", "1")
    a.set_initial("0")
    a.add_arc("0", "1", ANY, 0.4)
    a.add_arc("0", "1", "a", 0.3)  # 'a' has two paths: 0.4 and 0.3; Viterbi keeps 0.4
    a.set_final("1", 0.5)
    best = shortest_paths(a, 5)
    assert sorted(best) == [(("a",), 0.2), (("b",), 0.2)]
    with pytest.raises(ArgumentError, match="n must be"):
        shortest_paths(a, -1)


# -- sampling --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("semiring", ["log", "real"])
@pytest.mark.slow
def test_random_paths_follow_the_exact_probabilities(semiring: str) -> None:
    """Bins: every string up to length 4 expected at least 20 times, and all other strings together. Each bin's
    count is within 5 binomial standard deviations of N p (a union bound over the bins keeps a false alarm
    below 1e-4; the seed is fixed)."""
    a = WFSA("log", ["a", "b", "c"])
    a.add_states("0", "1", "2")
    a.set_initial("0", math.log(0.7))
    a.set_initial("1", math.log(0.3))
    a.add_arc("0", "0", "a", math.log(0.3))
    a.add_arc("0", "1", ANY, math.log(0.1))
    a.add_arc("1", "2", EPSILON, math.log(0.5))
    a.add_arc("2", "0", NoneOf(["a"]), math.log(0.4))
    a.add_arc("1", "1", "c", math.log(0.2))
    a.set_final("0", math.log(0.2))
    a.set_final("2", math.log(0.3))
    if semiring == "real":
        a = _as_real(a)
    total = a.semiring.to_real(a.pathsum())
    n = 20_000
    draws = random_paths(a, n, seed=1234)
    assert random_paths(a, 50, seed=7) == random_paths(a, 50, seed=7)
    counts: dict[tuple[Any, ...], int] = {}
    for word in draws:
        counts[word] = counts.get(word, 0) + 1
    assert all(a.score(list(word)) != a.semiring.zero for word in counts)  # only strings of the language
    bins = {word: a.semiring.to_real(a.score(list(word))) / total for word in openfst_ops.strings(4)}
    bins = {word: p for word, p in bins.items() if n * p >= 20}
    observed = {word: counts.get(word, 0) for word in bins}
    rest_p = 1 - sum(bins.values())
    rest_count = n - sum(observed.values())
    assert len(bins) >= 10
    for word, p, count in [(w, bins[w], observed[w]) for w in bins] + [(("rest",), rest_p, rest_count)]:
        assert abs(count - n * p) <= 5 * math.sqrt(n * p * (1 - p)), (word, count, n * p)


def test_random_paths_refuses_idempotent_semirings_and_negative_weights() -> None:
    with pytest.raises(SemiringError, match="min-plus"):
        random_paths(openfst_ops.random_acceptor(random.Random(0), "min-plus"), 3, seed=0)
    a = WFSA("real", ["a"])
    a.add_states("0")
    a.set_initial("0")
    a.add_arc("0", "0", "a", -0.5)
    a.set_final("0", 1.0)
    with pytest.raises(Exception, match="negative"):
        random_paths(a, 3, seed=0)
    assert random_paths(WFSA("log", ["a"]), 0) == []


# -- refusals --------------------------------------------------------------------------------------------------------


def test_determinize_refuses_real_weights_and_stops_at_its_budget() -> None:
    with pytest.raises(SemiringError, match="zero-sum-free"):
        determinize(_as_real(openfst_ops.random_acceptor(random.Random(0), "log")))
    a = WFSA("min-plus", ["a", "b"])  # no twins property: 'a b^n' reaches 1 and 2 with costs n and 2n
    a.add_states("0", "1", "2")
    a.set_initial("0")
    a.add_arc("0", "1", "a", 0.0)
    a.add_arc("0", "2", "a", 0.0)
    a.add_arc("1", "1", "b", 1.0)
    a.add_arc("2", "2", "b", 2.0)
    a.set_final("1", 0.0)
    a.set_final("2", 0.0)
    with pytest.raises(BudgetExceededError, match="twins"):
        determinize(a, max_states=50)
    with pytest.raises(ArgumentError, match="max_states"):
        determinize(a, max_states=0)


def test_bad_options_are_named() -> None:
    a = openfst_ops.random_acceptor(random.Random(0), "log")
    with pytest.raises(ArgumentError, match="towards"):
        push(a, "middle")  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="method"):
        minimize(a, "fastest")  # type: ignore[arg-type]


def test_minterms_partition_the_alphabet_without_enumerating_it() -> None:
    from kleene.automata import Sym, SymbolTable, minterms

    labels = [ANY, Sym("a"), OneOf(["a", "b"]), NoneOf(["b"])]
    parts = minterms(labels, SymbolTable("abcd"))
    accepted = {str(parts.label(i)): sorted(j for j, cover in enumerate(parts.covers) if i in cover)
                for i in range(len(parts))}
    assert accepted == {"a": [0, 1, 2, 3], "b": [0, 2], "Σ∖{a,b}": [0, 3]}
    assert parts.size(parts.other or 0, SymbolTable("abcd")) == 2
    assert len(minterms(labels, SymbolTable("ab"))) == 2  # no symbol is left unmentioned
    assert str(parts.union(range(len(parts)))) == str(ANY)
