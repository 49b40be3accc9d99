"""Semiring laws, and agreement of the scalar, numpy, torch and symbolic realisations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.automata import SEMIRINGS, DivergenceError, Semiring, SemiringError, WeightError, get_semiring

from .strategies import weights


def same(s: Semiring, a: object, b: object) -> bool:
    if s.name == "boolean":
        return bool(a) == bool(b)
    fa, fb = float(a), float(b)  # type: ignore[arg-type]
    return fa == fb if math.isinf(fa) or math.isinf(fb) else math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("s", SEMIRINGS, ids=lambda s: s.name)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_semiring_laws(s: Semiring, data: st.DataObject) -> None:
    a, b, c = (data.draw(weights(s.name, epsilon=False)) for _ in range(3))
    assert same(s, s.plus(a, b), s.plus(b, a))
    assert same(s, s.plus(s.plus(a, b), c), s.plus(a, s.plus(b, c)))
    assert same(s, s.times(s.times(a, b), c), s.times(a, s.times(b, c)))
    assert same(s, s.times(a, s.plus(b, c)), s.plus(s.times(a, b), s.times(a, c)))
    assert same(s, s.plus(a, s.zero), a) and same(s, s.times(a, s.one), a)
    assert same(s, s.times(a, s.zero), s.zero)


@pytest.mark.parametrize("s", SEMIRINGS, ids=lambda s: s.name)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_numpy_torch_and_scalar_agree(s: Semiring, data: st.DataObject) -> None:
    xs = data.draw(st.lists(weights(s.name, epsilon=False), min_size=1, max_size=5))
    ys = data.draw(st.lists(weights(s.name, epsilon=False), min_size=len(xs), max_size=len(xs)))
    arr = np.array(xs, dtype=s.numpy_dtype)
    ten = torch.tensor(xs, dtype=torch.bool if s.name == "boolean" else torch.float64)
    scalar_sum = s.zero
    for x in xs:
        scalar_sum = s.plus(scalar_sum, x)
    assert same(s, s.sum(arr, axis=0), scalar_sum)
    assert same(s, s.sum(ten, axis=0).item(), scalar_sum)
    for x, y, t in zip(xs, ys, s.times(ten, torch.tensor(ys, dtype=ten.dtype)).tolist()):
        assert same(s, s.times(x, y), t)


@pytest.mark.parametrize("s", SEMIRINGS, ids=lambda s: s.name)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_symbolic_operations_realise_the_numeric_ones(s: Semiring, data: st.DataObject) -> None:
    a, b = (data.draw(weights(s.name, epsilon=False)) for _ in range(2))
    sa, sb = sympy.sympify(a), sympy.sympify(b)
    assert same(s, s.sym_plus(sa, sb), s.plus(a, b))
    assert same(s, s.sym_times(sa, sb), s.times(a, b))


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [("real", 0.5, 2.0), ("log", math.log(0.5), math.log(2.0)), ("max-plus", -1.0, 0.0),
     ("min-plus", 2.0, 0.0), ("max-times", 0.3, 1.0), ("boolean", True, True)],
)
def test_star_where_it_converges(name: str, value: float, expected: float) -> None:
    s = get_semiring(name)
    assert same(s, s.star(value), expected)
    assert same(s, s.sym_star(sympy.sympify(value)), expected)


@pytest.mark.parametrize(("name", "value"), [("real", 1.0), ("real", -1.5), ("log", 0.1), ("max-plus", 0.5),
                                             ("min-plus", -0.5), ("max-times", 1.5)])
def test_star_divergence_names_the_value(name: str, value: float) -> None:
    with pytest.raises(DivergenceError, match=repr(value).replace(".", r"\.")):
        get_semiring(name).star(value)


@pytest.mark.parametrize(("alias", "name"), [("tropical", "min-plus"), ("min_plus", "min-plus"), ("REAL", "real"),
                                             ("max-product", "max-times"), ("bool", "boolean")])
def test_semirings_by_name(alias: str, name: str) -> None:
    assert get_semiring(alias).name == name


def test_unknown_semiring_lists_the_known_ones() -> None:
    with pytest.raises(SemiringError, match="unknown semiring 'no-such-semiring'; known: real, log"):
        get_semiring("no-such-semiring")


@pytest.mark.parametrize(("name", "value", "message"), [
    ("real", float("nan"), "NaN is not an element of the real semiring"),
    ("real", float("inf"), "inf is not an element of the real semiring"),
    ("max-times", -0.5, r"-0\.5 is not an element of the max-times semiring"),
    ("log", float("inf"), "inf is not an element of the log semiring"),
    ("boolean", 0.5, "0.5 is not an element of the boolean semiring"),
    ("max-plus", "2 +* x", r"cannot parse weight .2 \+\* x."),
])
def test_weights_outside_the_semiring_are_refused(name: str, value: object, message: str) -> None:
    from kleene.automata import WFSA

    a = WFSA(name)
    a.add_states("p", "q")
    with pytest.raises(WeightError, match=message):
        a.add_arc("p", "q", "x", value)


def test_logsumexp_of_all_zero_has_zero_gradient() -> None:
    x = torch.full((3,), -math.inf, requires_grad=True)
    get_semiring("log").sum(x, axis=0).backward()
    assert torch.equal(x.grad, torch.zeros(3))
