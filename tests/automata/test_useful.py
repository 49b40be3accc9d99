"""A divergent cycle on no successful path (inaccessible or not co-accessible states) must not make the dense
algorithms raise: viterbi, all_spans, remove_epsilon and batched_forward read only the useful states, as score
and pathsum do (and OpenFst after trim). One on a successful path still raises."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kleene.automata import EPSILON, WFSA, DenseWFSA, DivergenceError, all_spans, remove_epsilon, trim, viterbi
from kleene.automata.algorithms import useful_mask


def _automaton(semiring: str = "real") -> WFSA:
    """s -a-> f (final), s -b-> d; d has a divergent epsilon loop and no way to a final state; u (inaccessible) too."""
    a = WFSA(semiring, alphabet="ab")
    a.add_states("s", "f", "d", "u")
    one = 0.0 if semiring == "log" else 1.0
    a.set_initial("s", one)
    a.set_final("f", math.log(0.8) if semiring == "log" else 0.8)
    a.add_arc("s", "f", "a", math.log(0.5) if semiring == "log" else 0.5)
    a.add_arc("f", "f", "a", math.log(0.25) if semiring == "log" else 0.25)
    a.add_arc("f", "f", EPSILON, math.log(0.5) if semiring == "log" else 0.5)
    a.add_arc("s", "d", "b", math.log(0.5) if semiring == "log" else 0.5)
    a.add_arc("d", "d", EPSILON, math.log(1.5) if semiring == "log" else 1.5)
    a.add_arc("u", "u", EPSILON, math.log(2.0) if semiring == "log" else 2.0)
    a.add_arc("u", "f", "a", math.log(0.5) if semiring == "log" else 0.5)
    return a


def test_useful_mask_is_trims_states() -> None:
    a = _automaton()
    assert useful_mask(a).tolist() == [True, True, False, False]
    assert trim(a).states == ["s", "f"]


@pytest.mark.parametrize("semiring", ["real", "log"])
def test_dense_algorithms_ignore_divergent_cycles_off_successful_paths(semiring: str) -> None:
    a = _automaton(semiring)
    t = trim(a)
    for string in (["a"], ["a", "a"], ["b"], ["b", "a"], []):
        assert viterbi(a, string).weight == viterbi(t, string).weight
        assert a.score(string) == pytest.approx(t.score(string), rel=1e-12)
    spans, trimmed = all_spans(a, ["a", "b", "a"]), all_spans(t, ["a", "b", "a"])
    assert spans.total == pytest.approx(trimmed.total, rel=1e-12)
    assert spans.ends == pytest.approx(trimmed.ends, rel=1e-12)
    plain = remove_epsilon(a)
    assert not plain.has_epsilons
    for string in (["a"], ["a", "a", "a"], ["b"]):
        assert plain.score(string) == pytest.approx(t.score(string), rel=1e-12, abs=1e-300)


def test_batched_forward_ignores_divergent_cycles_off_successful_paths() -> None:
    torch = pytest.importorskip("torch")
    a = _automaton("real")
    dense = DenseWFSA.from_wfsa(a, dtype=torch.float64)
    strings = [["a"], ["a", "a"], ["b"], []]
    got = dense.score_strings(strings).tolist()
    expected = [trim(a).score(s) for s in strings]
    assert np.allclose(got, expected, rtol=1e-12, atol=0.0)


def test_a_divergent_cycle_on_a_successful_path_still_raises() -> None:
    torch = pytest.importorskip("torch")
    a = _automaton("real")
    a.set_final("d", 0.5)  # d is useful now: its loop (weight 1.5) diverges
    with pytest.raises(DivergenceError):
        viterbi(a, ["b"])
    with pytest.raises(DivergenceError):
        all_spans(a, ["b"])
    with pytest.raises(DivergenceError):
        remove_epsilon(a)
    with pytest.raises(DivergenceError):
        DenseWFSA.from_wfsa(a, dtype=torch.float64).score_strings([["b"]])
