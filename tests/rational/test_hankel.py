"""Hankel-rank evidence: ranks equal the minimal state count for rational units, keep growing otherwise."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from kleene.rational import RecurrenceError, hankel_evidence, prove, zoo
from kleene.rational.hankel import hankel_block, numeric_rank, precise_rank


def test_rank_is_exact_on_a_known_matrix() -> None:
    values = {(): 1.0, ("a",): 2.0, ("b",): 3.0, ("a", "a"): 4.0, ("a", "b"): 6.0, ("b", "a"): 6.0, ("b", "b"): 9.0}
    block = hankel_block(values, ["a", "b"], 1)
    assert block == [[1, 2, 3], [2, 4, 6], [3, 6, 9]]
    assert numeric_rank(block, 1e-9)[0] == 1
    with mpmath.workdps(50):
        mp_block = [[mpmath.mpf(x) for x in row] for row in block]
        assert precise_rank(mp_block, mpmath.mpf("1e-30"))[0] == 1
        mp_block[2][2] += mpmath.mpf("1e-40")  # below tolerance: still rank 1 ...
        assert precise_rank(mp_block, mpmath.mpf("1e-30"))[0] == 1
        mp_block[2][2] += mpmath.mpf("1e-20")  # ... above it: rank 2
        assert precise_rank(mp_block, mpmath.mpf("1e-30"))[0] == 2


@pytest.mark.parametrize("name,rank", [("example-6", 2), ("rrnn-c", 3), ("rrnn-f", 3), ("rcnn", 3), ("isan", 3)])
def test_rational_units_have_bounded_rank_at_most_the_constructed_states(name: str, rank: int) -> None:
    rec = zoo.ZOO[name]()
    evidence = hankel_evidence(rec, ["a", "b"], max_length=4)
    assert evidence.ranks[-1] == evidence.ranks[-2] == rank
    states = prove(zoo.ZOO[name]()).summary()["states"][0]
    assert rank <= states
    if name in ("example-6", "rrnn-c"):
        assert rank == states  # B's two states and C's three are minimal


def test_f_is_not_minimal_its_epsilon_state_is_redundant() -> None:
    """F's q3 always holds r·Ω(q0): the Hankel rank (3) is below F's 4 states."""
    assert hankel_evidence(zoo.rrnn_f(), ["a", "b"], max_length=4).ranks[-1] == 3


@pytest.mark.parametrize("name,least", [("lstm", 31), ("gru", 16)])
def test_lstm_and_gru_ranks_exceed_every_small_automaton(name: str, least: int) -> None:
    evidence = hankel_evidence(zoo.ZOO[name](), ["a", "b"], max_length=4)
    assert evidence.ranks[:4] == [0, 3, 7, 15]  # full rank up to the 15 x 15 block
    assert evidence.ranks[-1] >= least


@pytest.mark.slow
def test_rational_ranks_do_not_depend_on_precision_but_nonrational_ones_grow() -> None:
    """The spectrum of a non-rational unit decays without ever vanishing: more digits resolve more rank."""
    low = {
        n: hankel_evidence(zoo.ZOO[n](), ["a", "b"], max_length=4, precision=30, tolerance=1e-12).ranks[-1]
        for n in ("rrnn-c", "gru")
    }
    high = {
        n: hankel_evidence(zoo.ZOO[n](), ["a", "b"], max_length=4, precision=80, tolerance=1e-40).ranks[-1]
        for n in ("rrnn-c", "gru")
    }
    assert low["rrnn-c"] == high["rrnn-c"] == 3
    assert high["gru"] > low["gru"] > 3


@pytest.mark.slow
def test_lstm_ranks_keep_growing() -> None:
    evidence = hankel_evidence(zoo.lstm(), ["a", "b"], max_length=5)
    assert not evidence.stabilised and evidence.ranks[-1] > evidence.ranks[-2] > evidence.ranks[-3]
    assert "still growing" in evidence.render_lines()[0]


def test_hankel_needs_the_real_semiring() -> None:
    with pytest.raises(RecurrenceError, match="real semiring"):
        hankel_evidence(zoo.rrnn_b_maxplus(), ["a", "b"])


def test_evidence_is_reproducible() -> None:
    a = hankel_evidence(zoo.gru(), ["a", "b"], max_length=3, seed=4)
    b = hankel_evidence(zoo.gru(), ["a", "b"], max_length=3, seed=4)
    assert a.ranks == b.ranks and np.allclose(a.singular_values[-1], b.singular_values[-1])


@pytest.mark.parametrize("precision", [None, 40])
def test_prefixes_shared_by_strings_run_once_with_the_values_of_each_run(precision: int | None) -> None:
    """``run_prefixes`` (what the evidence reads) gives every prefix of every string the outputs ``run`` gives that
    string alone, though the strings share prefixes (each run once, from the state its own prefix left)."""
    from kleene.rational.certificate import random_environment

    rec = zoo.gru()
    env = random_environment(rec, ["a", "b"], np.random.default_rng(1), 3.0)
    strings = [("a", "b", "b"), ("a", "b", "a"), ("b",), (), ("b", "a", "a", "b")]
    got = rec.run_prefixes(strings, env, precision)
    assert set(got) == {s[:t] for s in strings for t in range(len(s) + 1)}
    for string in strings:
        for t, outputs in enumerate(rec.run(string, env, precision)):
            assert got[string[:t]] == outputs, (string, t)


def test_an_unhashable_symbol_is_named_in_a_recurrence_error() -> None:
    from kleene.errors import RecurrenceError
    from kleene.rational.certificate import random_environment

    rec = zoo.gru()
    env = random_environment(rec, ["a", "b"], np.random.default_rng(1), 3.0)
    with pytest.raises(RecurrenceError, match=r"symbol \['b'\] at position 1 is not hashable"):
        rec.run(["a", ["b"]], env)
