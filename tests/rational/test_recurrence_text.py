"""A recurrence's updates and outputs as text use the declared names; other types are refused naming the update
(issue 23: a list gave an AttributeError, ``"a*f"`` said that the declared a and f were undeclared)."""

from __future__ import annotations

import pytest
import sympy

from kleene.errors import RecurrenceError
from kleene.rational import Recurrence, prove


def declared() -> tuple[Recurrence, sympy.Symbol, sympy.Expr]:
    rec = Recurrence("text", semiring="real")
    a = rec.state("a")
    f = rec.input("f")
    return rec, a, f


def test_text_updates_mean_the_declared_names() -> None:
    rec, a, f = declared()
    rec.update(a, "a*f + f")
    rec.output("y", "2*a")
    assert rec.components[0].update == a * f + f
    assert prove(rec).rational


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ([1, 2], r"the update of a must be a sympy expression, a number or a string, got list"),
        (None, "got NoneType"),
        ("a*g", "undeclared symbol\\(s\\) g"),
        ("a +* f", "the update of a: cannot parse"),
        ("__import__('os')", "not allowed"),
    ],
)
def test_bad_updates_are_recurrence_errors(update: object, message: str) -> None:
    rec, a, _ = declared()
    with pytest.raises(RecurrenceError, match=message):
        rec.update(a, update)
