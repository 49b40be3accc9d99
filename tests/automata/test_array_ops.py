"""The array versions of trim, push, is_deterministic, minimize (deterministic) and shortest_paths (on the arc
store, used for large automata) give what the Arc-object versions give, on random automata of every shape."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.automata import (
    WFSA,
    BudgetExceededError,
    DivergenceError,
    determinize,
    get_semiring,
    is_deterministic,
    minimize,
    push,
    shortest_paths,
    sparse,
    trim,
)

from .strategies import weights

SYMBOLS = ("a", "b", "c")


@st.composite
def symbol_wfsas(draw: st.DrawFn, semiring: str, deterministic: bool = False) -> WFSA:
    """Random automata whose labels are symbols (the array versions' domain), some states useless."""
    n = draw(st.integers(1, 6))
    a = WFSA(get_semiring(semiring), alphabet=SYMBOLS)
    for _ in range(n):
        a.add_state()
    states = st.integers(0, n - 1)
    for q in draw(st.sets(states, min_size=1, max_size=1 if deterministic else 2)):
        a.set_initial(q, draw(weights(semiring, epsilon=False, signed=False)))
    for q in draw(st.sets(states, min_size=1, max_size=n)):
        a.set_final(q, draw(weights(semiring, epsilon=False, signed=False)))
    used: set[tuple[int, str]] = set()
    for _ in range(draw(st.integers(0, 12))):
        src, label = draw(states), draw(st.sampled_from(SYMBOLS))
        if deterministic and (src, label) in used:
            continue
        used.add((src, label))
        a.add_arc(src, draw(states), label, draw(weights(semiring, epsilon=True)))  # every cycle converges
    return a


def _with_arrays(flag: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse, "ARRAY_OPS_MIN_ARCS", 0 if flag else 1 << 62)


def _close(x: Any, y: Any) -> bool:
    if isinstance(x, bool) or isinstance(y, bool):
        return bool(x) == bool(y)
    return x == y or math.isclose(float(x), float(y), rel_tol=1e-12, abs_tol=1e-12)


def _same(a: WFSA, b: WFSA) -> None:
    assert a.states == b.states
    assert [(x.src, x.dst, x.label) for x in a.arcs] == [(x.src, x.dst, x.label) for x in b.arcs]
    assert all(_close(x.weight, y.weight) for x, y in zip(a.arcs, b.arcs))
    for mine, theirs in ((a.initial, b.initial), (a.final, b.final)):
        assert sorted(mine) == sorted(theirs)
        assert all(_close(mine[q], theirs[q]) for q in mine)


def _both(fn: Any, a: WFSA, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """fn(a) with the array versions, then with the object versions (a divergent sum must raise in both)."""
    for flag in (True, False):
        _with_arrays(flag, monkeypatch)
        try:
            yield fn(a.copy())
        except (DivergenceError, BudgetExceededError) as exc:  # no finite sum / no finite determinization
            yield type(exc)


def _same_or_both_diverge(a: Any, b: Any) -> bool:
    if a in (DivergenceError, BudgetExceededError) or b in (DivergenceError, BudgetExceededError):
        assert a is b
        return False
    return True


@pytest.mark.parametrize("semiring", ["min-plus", "log", "max-plus", "max-times", "boolean"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_array_trim_push_and_determinism_equal_the_object_versions(semiring: str, data: st.DataObject) -> None:
    a = data.draw(symbol_wfsas(semiring))
    with pytest.MonkeyPatch.context() as monkeypatch:
        arrays, objects = _both(trim, a, monkeypatch)
        _same(arrays, objects)
        if semiring != "boolean":
            for towards in ("initial", "final"):
                arrays, objects = _both(lambda x, t=towards: push(x, t), a, monkeypatch)
                if _same_or_both_diverge(arrays, objects):
                    _same(arrays, objects)
        det_arrays, det_objects = _both(is_deterministic, a, monkeypatch)
        assert det_arrays == det_objects


@pytest.mark.parametrize("semiring", ["min-plus", "log", "max-plus", "boolean"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_array_minimize_equals_the_object_version(semiring: str, data: st.DataObject) -> None:
    a = data.draw(symbol_wfsas(semiring, deterministic=data.draw(st.booleans())))
    if semiring != "boolean":  # round weights to a coarse grid, so that equal sums are equal and states merge
        for i, arc in enumerate(a.arcs):
            a.arcs[i] = type(arc)(arc.src, arc.dst, arc.label, round(arc.weight, 1))
        a.arcs = list(a.arcs)
    with pytest.MonkeyPatch.context() as monkeypatch:
        arrays, objects = _both(lambda x: minimize(x, "deterministic", max_states=200), a, monkeypatch)
        if _same_or_both_diverge(arrays, objects):
            _same(arrays, objects)


@pytest.mark.parametrize("semiring", ["min-plus", "log", "max-times"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_array_shortest_paths_equal_the_object_version(semiring: str, data: st.DataObject) -> None:
    a = data.draw(symbol_wfsas(semiring))
    with pytest.MonkeyPatch.context() as monkeypatch:
        arrays, objects = _both(lambda x: shortest_paths(x, 4, unique=False), a, monkeypatch)
    if not _same_or_both_diverge(arrays, objects):
        return
    assert [w for _, w in arrays] == pytest.approx([w for _, w in objects], rel=1e-12, abs=1e-12)
    assert sorted(arrays, key=lambda p: (round(float(p[1]), 9), p[0])) == sorted(
        objects, key=lambda p: (round(float(p[1]), 9), p[0])) or len({round(float(w), 9) for _, w in arrays}) < 4


@pytest.mark.slow
def test_array_minimize_of_a_large_trie_equals_the_object_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3000-word trie (tropical final costs): minimization merges its common suffixes; determinize leaves it."""
    rng = np.random.default_rng(0)
    a = WFSA("min-plus", alphabet="abcd")
    a.add_state()
    a.set_initial(0)
    children: list[dict[str, int]] = [{}]
    for _ in range(3000):
        q = 0
        for c in rng.choice(list("abcd"), int(rng.integers(1, 9))).tolist():
            if c not in children[q]:
                children[q][c] = a.add_state()
                children.append({})
                a.add_arc(q, children[q][c], c, 0.0)
            q = children[q][c]
        a.set_final(q, float(rng.integers(1, 4)))
    arrays, objects = _both(lambda x: minimize(x, "deterministic"), a, monkeypatch)
    assert arrays.num_states < a.num_states and arrays._arcs is None  # the array version ran and merged
    _same(arrays, objects)
    _with_arrays(True, monkeypatch)
    assert is_deterministic(a)
    _same(determinize(a), determinize(a.copy()))


@pytest.mark.parametrize("semiring", ["min-plus", "log", "max-plus", "max-times", "boolean"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_array_determinize_equals_the_subset_construction(semiring: str, data: st.DataObject) -> None:
    a = data.draw(symbol_wfsas(semiring))
    with pytest.MonkeyPatch.context() as monkeypatch:
        arrays, objects = _both(lambda x: determinize(x, max_states=60), a, monkeypatch)
        if _same_or_both_diverge(arrays, objects):
            _same(arrays, objects)


def test_array_minimize_merges_labels_into_one_of(monkeypatch: pytest.MonkeyPatch) -> None:
    a = WFSA("min-plus", alphabet=SYMBOLS)
    a.add_states("p", "q", "r")
    a.set_initial("p")
    a.set_final("q", 1.0)
    a.set_final("r", 1.0)
    a.add_arc("p", "q", "a", 0.5)
    a.add_arc("p", "r", "c", 0.25)
    a.add_arc("p", "q", "b", 0.5)
    a.add_arc("q", "q", "c", 2.0)
    a.add_arc("r", "r", "c", 2.0)
    arrays, objects = _both(lambda x: minimize(x, "deterministic"), a, monkeypatch)
    assert arrays._arcs is None
    _same(arrays, objects)
    assert any(type(arc.label).__name__ == "OneOf" for arc in arrays.arcs)
