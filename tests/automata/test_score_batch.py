"""score_batch (all strings advancing together in the sparse engine) against brute-force path enumeration and
against scoring each string with the dense matrices."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.automata import (
    ANY,
    EPSILON,
    WFSA,
    AlphabetError,
    ArgumentError,
    DivergenceError,
    OneOf,
    score_batch,
)
from kleene.automata.algorithms import _Stepper

from .oracle import brute_force_score
from .strategies import wfsas

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]


def close(a: object, b: object) -> bool:
    if isinstance(a, bool | np.bool_) or isinstance(b, bool | np.bool_):
        return bool(a) == bool(b)
    fa, fb = float(a), float(b)  # type: ignore[arg-type]
    return fa == fb or math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_score_batch_equals_brute_force(semiring: str, data: st.DataObject) -> None:
    wfsa = data.draw(wfsas(semiring, epsilons=False))
    batch = data.draw(st.lists(st.lists(st.sampled_from(("a", "b", "c")), max_size=4), max_size=5))
    got = score_batch(wfsa, batch)
    assert len(got) == len(batch)
    for string, value in zip(batch, got):
        assert close(value, brute_force_score(wfsa, string, 0)), (string, value)


@pytest.mark.parametrize("semiring", ["real", "log", "min-plus", "max-plus"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_score_batch_with_epsilons_equals_score(semiring: str, data: st.DataObject) -> None:
    wfsa = data.draw(wfsas(semiring, epsilons=True))
    batch = data.draw(st.lists(st.lists(st.sampled_from(("a", "b", "c")), max_size=4), max_size=4))
    for string, value in zip(batch, score_batch(wfsa, batch, epsilon_cap=2)):
        assert close(value, brute_force_score(wfsa, string, 2))


@pytest.mark.parametrize("semiring", ["real", "log", "min-plus", "max-times", "boolean"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_score_batch_with_exact_epsilon_closures_equals_score(semiring: str, data: st.DataObject) -> None:
    """The strings advance together through the exact closure's rows (or, where it diverges, one by one) and get
    the dense matrices' scores (the automata have fewer states than the sparse engine's threshold)."""
    wfsa = data.draw(wfsas(semiring, epsilons=True))
    batch = data.draw(st.lists(st.lists(st.sampled_from(("a", "b", "c")), max_size=4), max_size=6))
    expected: list[object] = []
    for string in batch:
        try:
            expected.append(wfsa.score(string))
        except DivergenceError:
            with pytest.raises(DivergenceError):
                score_batch(wfsa, [string])
            expected.append(None)
    kept = [string for string, value in zip(batch, expected) if value is not None]
    got = score_batch(wfsa, kept)
    assert len(got) == len(kept)
    for string, value, want in zip(kept, got, [v for v in expected if v is not None]):
        assert close(value, want), (string, value, want, wfsa.to_att())


def _large(seed: int, semiring: str, predicates: bool) -> WFSA:
    """200 states, ~1200 arcs over 12 symbols (some ANY / OneOf arcs), several initial and final states."""
    rng = np.random.default_rng(seed)
    symbols = [f"s{k}" for k in range(12)]
    a = WFSA(semiring, alphabet=symbols)
    for _ in range(200):
        a.add_state()
    for q in rng.choice(200, 3, replace=False).tolist():
        a.set_initial(q, float(rng.uniform(0.5, 1.0)) if semiring == "real" else -float(rng.uniform(0, 1)))
    for q in rng.choice(200, 40, replace=False).tolist():
        a.set_final(q, float(rng.uniform(0.5, 1.0)) if semiring == "real" else -float(rng.uniform(0, 1)))
    for _ in range(1200):
        kind = rng.random()
        label = (ANY if kind < 0.05 else OneOf({symbols[0], symbols[1]}) if kind < 0.1 and predicates
                 else symbols[int(rng.integers(0, 12))])
        if label is ANY and not predicates:
            label = symbols[0]
        w = float(rng.uniform(0.05, 0.3)) if semiring == "real" else -float(rng.uniform(0, 2))
        a.add_arc(int(rng.integers(0, 200)), int(rng.integers(0, 200)), label, w)
    return a


@pytest.mark.parametrize("semiring", ["real", "log", "max-plus"])
@pytest.mark.parametrize("predicates", [False, True])
def test_score_batch_on_a_large_automaton_equals_the_dense_matrices(semiring: str, predicates: bool) -> None:
    wfsa = _large(5, semiring, predicates)
    rng = np.random.default_rng(6)
    batch = [[f"s{k}" for k in rng.integers(0, 12, int(rng.integers(0, 7))).tolist()] for _ in range(60)]
    got = score_batch(wfsa, batch)
    dense = _Stepper(wfsa, None, None)
    for string, value in zip(batch, got):
        vector = dense.start()
        for i, x in enumerate(string):
            vector = dense.step(vector, x, i)
        expected = dense.finish(vector)
        assert close(value, expected), (string, value, expected)
        assert close(wfsa.score(string), expected)  # a single string takes the same path


def test_score_batch_inputs() -> None:
    wfsa = _large(7, "log", False)
    assert score_batch(wfsa, []) == []
    assert score_batch(wfsa, [[]]) == [wfsa.score([])]
    with pytest.raises(ArgumentError, match="strings must be a sequence"):
        score_batch(wfsa, 3)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match=r"strings\[1\] must be a sequence"):
        score_batch(wfsa, [["s1"], 5])  # type: ignore[list-item]
    with pytest.raises(AlphabetError, match=r"symbol 'zz' at position 1 .*\(string 2 of the batch\)"):
        score_batch(wfsa, [["s1"], [], ["s2", "zz"]])


def test_score_batch_with_useful_epsilons_scores_each_string() -> None:
    wfsa = _large(8, "log", False)
    wfsa.add_arc(0, 1, EPSILON, -0.5)
    wfsa.add_arc(1, 0, EPSILON, -0.7)
    batch = [["s1", "s2"], ["s3"], []]
    assert all(close(a, b) for a, b in zip(score_batch(wfsa, batch), [wfsa.score(s) for s in batch]))


def test_the_cached_arc_store_follows_changes_of_initial_and_final_weights() -> None:
    """initial/final are change-counting dicts: every way of changing them reaches the sparse engine's scores."""
    wfsa = _large(9, "log", False)
    string = ["s1"]
    target = next(a.dst for a in wfsa.arcs if a.src in wfsa.initial and a.label.symbols(None) == ["s1"])
    before = wfsa.score(string)
    wfsa.final[target] = 0.0  # item assignment
    raised = wfsa.score(string)
    assert raised > before or math.isclose(raised, before)
    wfsa.final.pop(target)
    assert wfsa.score(string) <= raised
    wfsa.final.update({target: 5.0})
    assert wfsa.score(string) > raised
    wfsa.final.clear()
    assert wfsa.score(string) == -math.inf
    wfsa.final = {target: 0.0}  # assignment of a plain dict
    assert wfsa.score(string) > -math.inf
    wfsa.initial = {}
    assert wfsa.score(string) == -math.inf
