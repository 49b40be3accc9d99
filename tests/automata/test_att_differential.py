"""The bulk AT&T readers (files of 64 KiB and more: the compiled scanner and the numpy reader) accept exactly the
language of the general reader: on random and adversarial texts both give the same automaton or the same error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kleene.automata import WFSA, read_att
from kleene.errors import KleeneError

#: Tokens for every column: plain ids and weights, the spellings Python's int()/float() take but OpenFst's
#: grammar does not (underscores, non-ASCII digits, full-width digits), ids beyond 64 bits, odd numbers.
TOKENS = [
    "0", "1", "2", "3", "007", "a", "b", "<eps>", "1.5", "-2.5", ".5", "5.", "1e3", "1E-3", "+1", "-0", "inf",
    "-Infinity", "INF", "nan", "0x1p3", "1e999", "0.1e-400", "1e", "e5", "--1", "1_000", "1_0", "١", "１", "٣.٥",
    "١٢", "9" * 19, "9" * 25, "9223372036854775807", "9223372036854775808", "2147483647",
]
ODD = ["1_000", "1_0", "١", "１", "٣.٥", "١٢", "9" * 19, "9" * 25, "9223372036854775808", "1e", "e5", "--1", "a"]
STATE = st.one_of(
    st.sampled_from(["0", "1", "2", "3", "007", "2147483647", "9223372036854775807"]), st.sampled_from(ODD)
)
LABEL = st.one_of(st.sampled_from(["1", "2", "7", "0", "a", "b", "<eps>"]), st.sampled_from(ODD))
WEIGHT = st.one_of(
    st.sampled_from(["0.5", "1", "-2.5", ".5", "5.", "1e3", "1E-3", "+1", "-0", "inf", "-Infinity", "INF", "nan",
                     "0x1p3", "1e999", "0.1e-400"]),
    st.sampled_from(ODD),
)
LINE = st.one_of(
    st.tuples(STATE, STATE, LABEL, WEIGHT).map(list),  # an arc
    st.tuples(STATE, STATE, LABEL).map(list),
    st.tuples(STATE, WEIGHT).map(list),  # a final state
    st.tuples(STATE).map(list),
    st.lists(st.sampled_from(TOKENS), min_size=1, max_size=5),  # anything
)
PAD = "\n" + " " * (1 << 16) + "\n"  # a blank line: past 64 KiB, the bulk readers' size


def outcome(text: str, semiring: str) -> Any:
    try:
        a: WFSA = read_att(text, semiring)
    except KleeneError as exc:
        return type(exc).__name__, str(exc)
    arcs = sorted((a.state_name(x.src), a.state_name(x.dst), str(x.label), x.weight) for x in a.arcs)
    return (
        [a.state_name(q) for q in range(a.num_states)],
        {a.state_name(q): w for q, w in a.initial.items()},
        {a.state_name(q): w for q, w in dict(a.final).items()},
        arcs,
        list(a.alphabet) if a.alphabet is not None else None,
    )


@pytest.mark.parametrize("native_off", ["", "1"], ids=["compiled", "numpy"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.tuples(LINE, st.sampled_from([" ", "\t", "  "])), min_size=1, max_size=6),
    ending=st.sampled_from(["\n", "\r\n"]),
    semiring=st.sampled_from(["min-plus", "log", "max-times"]),
)
@pytest.mark.slow
def test_bulk_and_general_readers_accept_the_same_language(
    monkeypatch: pytest.MonkeyPatch, native_off: str, lines: list[tuple[list[str], str]], ending: str, semiring: str
) -> None:
    monkeypatch.setenv("KLEENE_NO_NATIVE", native_off)
    text = "".join(sep.join(fields) + ending for fields, sep in lines)
    assert outcome(text + PAD, semiring) == outcome(text, semiring)


@pytest.mark.parametrize("native_off", ["", "1"], ids=["compiled", "numpy"])
@pytest.mark.parametrize("weight", ["1_000", "١", "１", "٣.٥", "1_0.5"])
@pytest.mark.slow
def test_bulk_reader_refuses_what_the_general_reader_refuses(
    monkeypatch: pytest.MonkeyPatch, native_off: str, weight: str
) -> None:
    monkeypatch.setenv("KLEENE_NO_NATIVE", native_off)
    arcs = "".join(f"{k} {k + 1} 7 0.5\n" for k in range(6000))
    text = arcs + f"6000 6001 7 {weight}\n6001\n"
    assert len(text) >= 1 << 16
    with pytest.raises(KleeneError, match=rf"line 6001 .*weight '{weight}' is not a number"):
        read_att(text)


def test_ids_beyond_64_bits_are_format_errors() -> None:
    for text in (f"0 1 {'9' * 5000}\n1\n", f"{'9' * 5000} 1 2\n1\n", f"0 1 2\n{'9' * 20}\n"):
        with pytest.raises(KleeneError, match="larger than 2\\^63 - 1"):
            read_att(text)
        with pytest.raises(KleeneError, match="larger than 2\\^63 - 1"):
            read_att(text + PAD)


@pytest.mark.parametrize("native_off", ["", "1"], ids=["compiled", "numpy"])
def test_the_padding_takes_the_bulk_path(monkeypatch: pytest.MonkeyPatch, native_off: str) -> None:
    monkeypatch.setenv("KLEENE_NO_NATIVE", native_off)
    assert read_att("0 1 7 0.5\n1\n" + PAD)._arcs is None  # filled into the arc store: a bulk reader read it


def test_errors_do_not_echo_long_lines() -> None:
    with pytest.raises(KleeneError) as error:
        read_att("0 1 " + "9" * 5000 + "\n1\n")
    assert len(str(error.value)) < 300 and "(5004 characters)" in str(error.value)
