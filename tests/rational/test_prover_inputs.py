"""Issue 12: the prover and the zoo check their inputs and raise RecurrenceError naming them (no AttributeError,
IndexError or TypeError from inside)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.rational.prover import prove
from kleene.rational.recurrence import RecurrenceError
from kleene.rational.zoo import ZOO, isan, qrnn, sopa, t_lstm


@pytest.mark.parametrize("bad", [[1, 2], "rrnn-b", None, 3, ZOO["rrnn-b"]])
def test_prove_refuses_what_is_not_a_recurrence(bad: object) -> None:
    with pytest.raises(RecurrenceError, match="prove needs a kleene Recurrence"):
        prove(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("alphabet", ["ab", 5, [[1]], b"ab"])
def test_prove_refuses_an_alphabet_that_is_not_a_list_of_symbols(alphabet: object) -> None:
    with pytest.raises(RecurrenceError, match="alphabet"):
        prove(sopa(2), alphabet=alphabet)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    entry=st.sampled_from([sopa, isan, qrnn]),
    value=st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.booleans(), st.text(max_size=2)),
)
def test_fuzz_zoo_sizes(entry: object, value: object) -> None:
    with pytest.raises(RecurrenceError):
        entry(value)  # type: ignore[operator]


@pytest.mark.parametrize("alphabet", ["ab", [], 3, [["a"]]])
def test_zoo_alphabets(alphabet: object) -> None:
    for entry in (t_lstm, lambda a: qrnn(2, a)):
        with pytest.raises(RecurrenceError, match="alphabet"):
            entry(alphabet)
