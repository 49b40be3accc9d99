"""AT&T text: OpenFst's meaning of each line, the weight conventions, errors naming lines, round trips."""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.automata import (
    ANY,
    EPSILON,
    WFSA,
    AlphabetError,
    FormatError,
    KleeneError,
    NoneOf,
    OneOf,
    SemiringError,
    Sym,
    SymbolTable,
    WeightError,
)
from kleene.automata.att import read_att, read_symbols, write_att, write_symbols
from kleene.automata.weights import weight_functions

from .strategies import ALPHABET, strings, wfsas

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]


def close(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    fa, fb = float(a), float(b)  # type: ignore[arg-type]
    if math.isinf(fa) or math.isinf(fb):
        return fa == fb
    return math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-9)


def arcs_of(wfsa: WFSA) -> list[tuple[str, str, object, object]]:
    return [(wfsa.state_name(a.src), wfsa.state_name(a.dst), a.label, a.weight) for a in wfsa.arcs]


# -- reading ------------------------------------------------------------------------------------


def test_reads_arcs_finals_and_start_like_fstcompile() -> None:
    a = read_att("3 1 a 0.5\n1 1 b\n1 2 <eps> 0.25\n2 1.5\n1\n")
    assert a.semiring.name == "min-plus"
    assert a.states == ["1", "2", "3"]  # named by file id, indexed in id order
    assert a.initial == {a.state("3"): 0.0}  # the first line's state
    assert arcs_of(a) == [("3", "1", Sym("a"), 0.5), ("1", "1", Sym("b"), 0.0), ("1", "2", EPSILON, 0.25)]
    assert a.final == {a.state("2"): 1.5, a.state("1"): 0.0}
    assert a.score(["a", "b"]) == 0.5  # min(3 -a-> 1 -b-> 1 final: 0.5, then <eps> to 2: 0.5 + 0.25 + 1.5)
    assert a.score(["b"]) == math.inf


def test_start_state_can_come_from_a_final_line_and_blank_lines_are_skipped() -> None:
    a = read_att("\n2 0.5\n\n0 2 x\n  \n")
    assert a.initial == {a.state("2"): 0.0}
    assert a.final == {a.state("2"): 0.5}


def test_only_spaces_tabs_and_newlines_separate() -> None:
    a = read_att("0\t1  a\xa0b\x850.5\r\n1\r\n")  # no-break space and NEL belong to the label, as in OpenFst
    assert [arc.label for arc in a.arcs] == [Sym("a\xa0b\x850.5")]
    assert a.final == {1: 0.0}


def test_empty_text_is_the_empty_automaton() -> None:
    a = read_att("  \n\n")
    assert a.num_states == 0
    assert not a.initial
    assert not a.arcs


def test_last_final_line_wins_and_a_zero_final_weight_is_not_final() -> None:
    a = read_att("0 1 a\n1 2\n1 3\n0 0.5\n0 Infinity\n")
    assert a.final == {a.state("1"): 3.0}


def test_openfst_log_weights_are_negated_into_kleene_log() -> None:
    a = read_att("0 1 a 0.5\n1 2 b Infinity\n1 -0.25\n", "log")
    assert [arc.weight for arc in a.arcs] == [-0.5, -math.inf]
    assert a.final == {a.state("1"): 0.25}
    assert write_att(a) == "0\t1\ta\t0.5\n1\t2\tb\tInfinity\n1\t-0.25\n"


@pytest.mark.parametrize(
    ("semiring", "text", "expected"),
    [
        ("real", "-2.5", -2.5),
        ("max-plus", "-Infinity", -math.inf),
        ("max-times", "0.25", 0.25),
        ("boolean", "0", False),
        ("boolean", "1", True),
    ],
)
def test_other_semirings_read_values_as_written(semiring: str, text: str, expected: object) -> None:
    a = read_att(f"0 1 a {text}\n1\n", semiring)
    assert a.arcs[0].weight == expected
    assert read_att(write_att(a), semiring).arcs[0].weight == expected


@pytest.mark.parametrize(
    ("semiring", "arc_type", "cost", "expected", "written"),
    [
        ("min-plus", "standard", 2.0, 2.0, 2.0),
        ("max-plus", "tropical", 2.0, -2.0, 2.0),
        ("max-times", "tropical", 2.0, math.exp(-2.0), 2.0),
        ("boolean", "tropical", 2.0, True, 0.0),  # the support: every finite cost is True
        ("boolean", "tropical", math.inf, False, math.inf),
        ("log", "log", 2.0, -2.0, 2.0),
        ("real", "log", 2.0, math.exp(-2.0), 2.0),
        ("real", "log", math.inf, 0.0, math.inf),
        ("boolean", "log", 0.5, True, 0.0),
    ],
)
def test_openfst_arc_types_map_into_kleene_semirings(
    semiring: str, arc_type: str, cost: float, expected: object, written: float
) -> None:
    text = "Infinity" if math.isinf(cost) else str(cost)
    a = read_att(f"0 1 a {text}\n1\n", semiring, arc_type=arc_type)
    assert close(a.arcs[0].weight, expected)
    back = write_att(a, arc_type=arc_type, show_weight_one=True).splitlines()[0].split("\t")[-1]
    assert close(float(back), written)


@pytest.mark.parametrize(("semiring", "arc_type"), [("log", "tropical"), ("real", "tropical"), ("max-plus", "log")])
def test_arc_types_that_are_not_homomorphic_images_are_refused(semiring: str, arc_type: str) -> None:
    with pytest.raises(SemiringError, match=f"OpenFst {arc_type} weights do not map onto the {semiring} semiring"):
        read_att("0 1 a 1\n1\n", semiring, arc_type=arc_type)


def test_unknown_arc_type() -> None:
    with pytest.raises(SemiringError, match="unknown OpenFst arc type 'log64'"):
        read_att("0\n", arc_type="log64")


@pytest.mark.parametrize("spelling", ["Infinity", "inf", "INF", "+infinity"])
def test_infinity_spellings(spelling: str) -> None:
    assert read_att(f"0 1 a {spelling}\n1\n").arcs[0].weight == math.inf


@pytest.mark.parametrize(("text", "value"), [("+1", 1.0), (".5", 0.5), ("5.", 5.0), ("1e-3", 0.001), ("0x10", 16.0)])
def test_number_syntax_accepted_by_fstcompile(text: str, value: float) -> None:
    assert read_att(f"0 1 a {text}\n1\n").arcs[0].weight == value


def test_transducer_lines_with_equal_labels_are_acceptor_arcs() -> None:
    a = read_att("0 1 a a 0.5\n1 2 b b\n2\n")
    assert arcs_of(a) == [("0", "1", Sym("a"), 0.5), ("1", "2", Sym("b"), 0.0)]


def test_transducer_labels_are_compared_after_the_symbol_table() -> None:
    # pynini prints "a 1" when only the input symbols are attached.
    table = SymbolTable(["a"])
    a = read_att("0 1 a 1 0.5\n1 2 <eps> 0\n2\n", symbols=table)
    assert arcs_of(a) == [("0", "1", Sym("a"), 0.5), ("1", "2", EPSILON, 0.0)]


def test_transducer_line_with_different_labels_names_the_line() -> None:
    with pytest.raises(FormatError, match=r"line 2 \('1 2 a b 0.5'\): input label 'a' and output label 'b' differ"):
        read_att("0 1 a a\n1 2 a b 0.5\n2\n")


def test_four_field_lines_are_inferred_from_the_other_lines() -> None:
    assert read_att("0 1 a 0.5\n1 2 b\n2\n").arcs[0].weight == 0.5  # a 3-field line: acceptor
    assert read_att("0 1 2 2\n1 2 3 3 0.5\n2\n").arcs[0].weight == 0.0  # a 5-field line: transducer
    assert read_att("0 1 a a\n1 2 3 3\n2\n").arcs[1].label == Sym(3)  # 'a' is no weight: transducer
    assert read_att("0 1 a 7\n1 2 3 3\n2\n").arcs[1].weight == 3.0  # labels differ: acceptor


def test_ambiguous_four_field_file_asks_for_the_format() -> None:
    with pytest.raises(FormatError, match=r"line 1 \('0 1 2 2'\): ambiguous .* pass acceptor=True or acceptor=False"):
        read_att("0 1 2 2\n1\n")
    assert read_att("0 1 2 2\n1\n", acceptor=True).arcs[0].weight == 2.0
    assert read_att("0 1 2 2\n1\n", acceptor=False).arcs[0].weight == 0.0


@pytest.mark.parametrize(
    ("text", "acceptor", "message"),
    [
        ("0 1 a\n1 2 b b 0.5\n", None, r"line 2 \('1 2 b b 0.5'\): 5 fields, but other arc lines have 3"),
        ("0 1 a 0.5\n1 2 a a 1 2\n", None, r"line 2 \('1 2 a a 1 2'\): expected 'state \[weight\]' or 'src dst"),
        ("0 1 a a\n1 2 b\n", False, r"line 2 \('1 2 b'\): expected 'state \[weight\]' or 'src dst ilabel olabel"),
        ("0 1 a\nx 1 b\n", None, r"line 2 \('x 1 b'\): state 'x' is not a non-negative integer"),
        ("0 1 a\n-1\n", None, r"line 2 \('-1'\): state '-1' is not a non-negative integer"),
        ("0 1 a\n1 2 b 1_000\n", None, r"line 2 \('1 2 b 1_000'\): weight '1_000' is not a number"),
        ("0 1 a\n1 abc\n", None, r"line 2 \('1 abc'\): weight 'abc' is not a number"),
        ("0 1 a 1\n1 2 b b\n", None, r"line 2 \('1 2 b b'\): arc lines mix acceptor and transducer columns"),
    ],
)
def test_malformed_lines_name_the_line(text: str, acceptor: bool | None, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        read_att(text, acceptor=acceptor)


@pytest.mark.parametrize(
    ("semiring", "weight", "message"),
    [
        ("min-plus", "-Infinity", "-inf is not an element of the min-plus semiring"),
        ("log", "-inf", "inf is not an element of the log semiring"),
        ("max-times", "-0.5", "not an element of the max-times semiring"),
        ("boolean", "0.5", "not an element of the boolean semiring"),
        ("real", "nan", "NaN is not an element of the real semiring"),
    ],
)
def test_weight_outside_the_semiring_names_the_line(semiring: str, weight: str, message: str) -> None:
    with pytest.raises(WeightError, match=rf"line 3 \('1 2 b {weight}'\): .*{message}"):
        read_att(f"0 1 a\n2\n1 2 b {weight}\n", semiring)


def test_labels_without_a_table_are_ints_or_strings_and_zero_is_epsilon() -> None:
    a = read_att("0 1 0\n1 2 <eps>\n2 3 <epsilon>\n3 4 7\n4 5 x\n5 6 12\n6\n")
    assert [arc.label for arc in a.arcs] == [EPSILON, EPSILON, EPSILON, Sym(7), Sym("x"), Sym(12)]
    assert a.alphabet == SymbolTable([7, 12, "x"])  # closed: the file's symbols, ints first


def test_labels_with_a_table_are_ids_or_names() -> None:
    table = SymbolTable(["a", "b"], epsilon="<epsilon>")
    a = read_att("0 1 1\n1 2 b\n2 3 0\n3 4 <epsilon>\n4\n", symbols=table)
    assert [arc.label for arc in a.arcs] == [Sym("a"), Sym("b"), EPSILON, EPSILON]
    assert a.alphabet is table


@pytest.mark.parametrize(("label", "message"), [("3", "label id 3 is not in the symbol table"), ("z", "label 'z'")])
def test_label_outside_the_table_names_the_line(label: str, message: str) -> None:
    with pytest.raises(AlphabetError, match=rf"line 2 \('1 2 {label}'\): {message}"):
        read_att(f"0 1 a\n1 2 {label}\n2\n", symbols=SymbolTable(["a", "b"]))


def test_symbols_text_with_sparse_ids_keeps_openfst_ids() -> None:
    symbols = "<epsilon>\t0\na\t97\nb\t98\n"
    a = read_att("0 1 97\n1 2 b\n2 3 <epsilon>\n3\n", symbols=symbols)
    assert [arc.label for arc in a.arcs] == [Sym("a"), Sym("b"), EPSILON]
    assert a.alphabet == SymbolTable(["a", "b"])
    assert a.alphabet.epsilon == "<epsilon>"


# -- symbol tables ------------------------------------------------------------------------------


def test_symbols_round_trip() -> None:
    table = SymbolTable(["the", "cat", "<unk>"], epsilon="<epsilon>")
    text = write_symbols(table)
    assert text == "<epsilon>\t0\nthe\t1\ncat\t2\n<unk>\t3\n"
    back = read_symbols(text)
    assert back == table
    assert back.epsilon == "<epsilon>"
    assert read_symbols("x 2\n\n<eps> 0\ny 1\n") == SymbolTable(["y", "x"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<eps> 0\na 1\nb 3\n", r"line 3: symbol id 3 leaves a gap \(expected 2\)"),
        ("a 1\nb 1\n", r"line 2 \('b 1'\): duplicate id"),
        ("a 1\na 2\n", r"line 2 \('a 2'\): duplicate symbol"),
        ("a 1\nb\n", r"line 2 \('b'\): a symbols line is 'symbol id'"),
        ("a 1\nb -2\n", r"line 2 \('b -2'\): a symbols line"),
        ("a 1 x\n", r"line 1 \('a 1 x'\): a symbols line"),
    ],
)
def test_bad_symbols_text_names_the_line(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        read_symbols(text)


def test_write_symbols_refuses_whitespace() -> None:
    with pytest.raises(AlphabetError, match="'a b' cannot be written as an AT&T field"):
        write_symbols(SymbolTable(["a b"]))


# -- writing ------------------------------------------------------------------------------------


def chain(semiring: str = "min-plus", alphabet: object = None) -> WFSA:
    a = WFSA(semiring, alphabet)  # type: ignore[arg-type]
    a.add_states("s", "t", "u")
    a.set_initial("s")
    a.add_arc("s", "t", "a", 1.0)
    a.add_arc("t", "u", EPSILON, 2.0)
    a.set_final("u", 0.5)
    return a


def test_write_uses_state_indices_and_omits_weight_one() -> None:
    assert write_att(chain()) == "0\t1\ta\t1\n1\t2\t<eps>\t2\n2\t0.5\n"
    assert chain().to_att(show_weight_one=True) == "0\t1\ta\t1\n1\t2\t<eps>\t2\n2\t0.5\n"
    assert write_att(chain(), show_weight_one=True, acceptor=False) == "0\t1\ta\ta\t1\n1\t2\t<eps>\t<eps>\t2\n2\t0.5\n"


def test_write_with_a_table_writes_ids() -> None:
    table = SymbolTable(["b", "a"])
    assert write_att(chain(), table) == "0\t1\t2\t1\n1\t2\t0\t2\n2\t0.5\n"
    with pytest.raises(AlphabetError, match=r"arc 0 \(s -a-> t\): symbol 'a' is not in the alphabet"):
        write_att(chain(), SymbolTable(["b"]))


def test_names_use_the_alphabets_epsilon() -> None:
    a = chain("min-plus", SymbolTable(["a"], epsilon="EPS"))
    text = write_att(a)
    assert text.splitlines()[1] == "1\t2\tEPS\t2"
    back = read_att(text, symbols=write_symbols(a.alphabet))  # type: ignore[arg-type]
    assert [arc.label for arc in back.arcs] == [Sym("a"), EPSILON]


def test_start_state_lines_come_first() -> None:
    a = WFSA("min-plus")
    a.add_states("p", "q")
    a.add_arc("p", "q", "x", 1.0)
    a.add_arc("q", "p", "y", 2.0)
    a.set_initial("q")
    a.set_final("p")
    assert write_att(a).splitlines()[0] == "1\t0\ty\t2"
    b = WFSA("min-plus")
    b.add_states("p", "q")
    b.add_arc("p", "q", "x")
    b.set_initial("q")
    b.set_final("q", 3.0)
    assert write_att(b) == "1\t3\n0\t1\tx\n"
    b.final.clear()
    assert write_att(b) == "1\tInfinity\n0\t1\tx\n"  # a start state with no lines, named by a zero final weight
    assert read_att(write_att(b)).initial == {1: 0.0}


def test_several_or_weighted_initial_states_get_a_fresh_start() -> None:
    a = chain("log")
    a.set_initial("t", -1.0)
    text = write_att(a)
    assert text.splitlines()[:2] == ["3\t0\t<eps>", "3\t1\t<eps>\t1"]
    back = read_att(text, "log")
    assert back.initial == {back.state("3"): 0.0}
    for word in ([], ["a"], ["a", "a"]):
        assert close(back.score(word), a.score(word))
    b = chain("real")
    b.set_initial("s", 0.5)
    assert write_att(b).splitlines()[0] == "3\t0\t<eps>\t0.5"


def test_no_initial_state_writes_an_empty_start() -> None:
    a = chain()
    a.initial.clear()
    text = write_att(a)
    assert text.splitlines()[0] == "3\tInfinity"
    assert read_att(text).score(["a"]) == math.inf


def test_predicate_labels_are_expanded_over_the_alphabet() -> None:
    a = WFSA("real", ["a", "b", "c"])
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q")
    a.add_arc("p", "q", ANY, 0.5)
    a.add_arc("p", "q", NoneOf({"a"}), 0.25)
    a.add_arc("q", "q", OneOf({"c", "a"}), 0.125)
    lines = write_att(a).splitlines()
    assert lines == [
        "0\t1\ta\t0.5",
        "0\t1\tb\t0.5",
        "0\t1\tc\t0.5",
        "0\t1\tb\t0.25",
        "0\t1\tc\t0.25",
        "1\t1\ta\t0.125",
        "1\t1\tc\t0.125",
        "1",
    ]


def test_predicate_labels_without_an_alphabet_are_refused() -> None:
    a = WFSA("real")
    a.add_states("p", "q")
    a.set_initial("p")
    a.add_arc("p", "q", OneOf({"b", "a"}))  # OneOf lists its own symbols
    assert write_att(a).splitlines()[:2] == ["0\t1\ta", "0\t1\tb"]
    a.add_arc("p", "q", ANY)
    with pytest.raises(AlphabetError, match=r"arc 1 \(p -∀α-> q\): label ∀α needs an alphabet"):
        write_att(a)


def test_symbolic_weights_need_env() -> None:
    (mu,) = weight_functions("mu")
    a = WFSA("real", ["a", "b"])
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q", sympy.Symbol("gamma"))
    a.add_arc("p", "q", ANY, mu)
    with pytest.raises(WeightError, match=r"arc 0 \(p -∀α-> q\): weight mu\(alpha\) is symbolic; pass env="):
        write_att(a)
    with pytest.raises(WeightError, match=r"arc 0 .*mu\('b'\) is not defined"):
        write_att(a, env={"mu": {"a": 0.5}, "gamma": 0.75})
    text = write_att(a, env={"mu": {"a": 0.5, "b": 0.25}, "gamma": 0.75})
    assert text == "0\t1\ta\t0.5\n0\t1\tb\t0.25\n1\t0.75\n"


@pytest.mark.parametrize(("symbol", "message"), [("a b", "cannot be written as an AT&T field"), ("0", "epsilon")])
def test_symbols_that_cannot_be_labels_without_a_table(symbol: str, message: str) -> None:
    a = WFSA("real")
    a.add_states("p")
    a.set_initial("p")
    a.add_arc("p", "p", symbol)
    with pytest.raises(AlphabetError, match=rf"arc 0 \(p -{symbol}-> p\).*{message}"):
        write_att(a)


def test_values_without_an_openfst_form_name_the_arc() -> None:
    a = chain("real")
    a.add_arc("s", "u", "b", -0.5)
    with pytest.raises(WeightError, match=r"arc 2 \(s -b-> u\): -0.5 has no OpenFst weight"):
        write_att(a, arc_type="log")


# -- round trips --------------------------------------------------------------------------------


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("with_table", [True, False])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_write_then_read_keeps_every_score(semiring: str, with_table: bool, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring))
    table = SymbolTable(ALPHABET) if with_table else None
    acceptor = data.draw(st.booleans())
    text = write_att(a, table, acceptor=acceptor, show_weight_one=data.draw(st.booleans()))
    b = read_att(text, semiring, symbols=table, acceptor=acceptor)
    for word in [data.draw(strings) for _ in range(4)] + [[]]:
        if b.alphabet is not None and any(x not in b.alphabet for x in word):  # a symbol the file never names
            assert table is None
            with pytest.raises(AlphabetError, match="is not in the alphabet"):
                b.score(word)
            assert a.semiring.is_zero(a.score(word))  # and which a's paths never take
            continue
        assert close(b.score(word), a.score(word)), (word, text)


# -- labels: one rule for ints, strings and tables (issue 12) -----------------------------------


def test_numeric_labels_read_as_ints_and_score_with_ints() -> None:
    a = read_att("0 1 1 0.5\n1 2 2\n2\n", "real")
    assert a.score([1, 2]) == 0.5  # the natural call: the file said 1 and 2
    assert a.alphabet == SymbolTable([1, 2])
    with pytest.raises(AlphabetError, match=r"symbol '1' at position 0 is not in the alphabet \{1, 2\} \(it has 1"):
        a.score(["1", "2"])  # never a silent zero
    with pytest.raises(AlphabetError, match="symbol 3 at position 1"):
        a.score([1, 3])


def test_symbols_that_print_the_same_are_refused() -> None:
    a = WFSA("real", [1, "1"])
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q")
    a.add_arc("p", "q", 1, 0.5)
    a.add_arc("p", "q", "1", 0.25)
    with pytest.raises(FormatError, match=r"symbols 1 and '1' both print as '1'"):
        write_att(a)
    with pytest.raises(FormatError, match=r"symbols 1 and '1' both print as '1'"):
        write_symbols(a.alphabet)  # type: ignore[arg-type]
    with pytest.raises(FormatError, match=r"symbols 1 and '1' both print as '1'"):
        read_att("0 1 1\n1\n", symbols=SymbolTable([1, "1"]))
    text = write_att(a, SymbolTable([1, "1"]))  # ids tell them apart
    assert text.splitlines()[:2] == ["0\t1\t1\t0.5", "0\t1\t2\t0.25"]


@pytest.mark.parametrize(("symbol", "back"), [("7", "7"), (True, "'True'"), (1.5, "'1.5'")])
def test_without_a_table_symbols_must_read_back_as_themselves(symbol: object, back: str) -> None:
    a = WFSA("real")
    a.add_states("p")
    a.set_initial("p")
    a.add_arc("p", "p", symbol)
    with pytest.raises(AlphabetError, match=rf"symbol {symbol!r} would read back as {back}.*symbol table"):
        write_att(a)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_int_and_string_alphabets_round_trip_with_inferred_columns(semiring: str, data: st.DataObject) -> None:
    """write_att's output reads back with acceptor=None (never ambiguous), keeping int symbols ints."""
    a = data.draw(wfsas(semiring))
    if data.draw(st.booleans()):
        a = _relabelled(a, {"a": 1, "b": 2, "c": 30})
    if data.draw(st.booleans()):  # a zero initial weight: a fresh start state with an arc of weight zero
        a.set_initial(data.draw(st.integers(0, a.num_states - 1)), a.semiring.zero)
    table = SymbolTable(a.alphabet) if data.draw(st.booleans()) else None  # type: ignore[arg-type]
    text = write_att(a, table, acceptor=data.draw(st.booleans()), show_weight_one=data.draw(st.booleans()))
    b = read_att(text, semiring, symbols=table)
    for word in [data.draw(strings) for _ in range(3)] + [[]]:
        word = [x if a.alphabet is None or x in a.alphabet else {"a": 1, "b": 2, "c": 30}[x] for x in word]
        if any(x not in b.alphabet for x in word):  # type: ignore[operator]
            assert a.semiring.is_zero(a.score(word))
            continue
        assert close(b.score(word), a.score(word)), (word, text)


def _relabelled(a: WFSA, mapping: dict[str, int]) -> WFSA:
    out = WFSA(a.semiring, [mapping[x] for x in ALPHABET])
    for name in a.states:
        out.add_state(name)
    for arc in a.arcs:
        label = arc.label
        if isinstance(label, Sym):
            label = Sym(mapping[label.symbol])  # type: ignore[index]
        elif isinstance(label, (OneOf, NoneOf)):
            label = type(label)(mapping[x] for x in label.members)  # type: ignore[index]
        out.add_arc(arc.src, arc.dst, label, arc.weight)
    out.initial, out.final = dict(a.initial), dict(a.final)
    return out


def test_a_file_whose_only_line_is_0_0_0_0() -> None:
    """Acceptor arc 0 -eps/0-> 0 or transducer arc 0 -eps:eps-> 0: in min-plus both weigh one, the same automaton."""
    a = read_att("0 0 0 0\n")
    assert a.states == ["0"] and a.initial == {0: 0.0} and a.final == {}
    assert arcs_of(a) == [("0", "0", EPSILON, 0.0)]
    with pytest.raises(FormatError, match="ambiguous"):
        read_att("0 0 0 0\n", "real")  # there the readings differ: weight 0 (zero) or 1


def test_max_times_with_initial_weight_zero_round_trips() -> None:
    a = WFSA("max-times", alphabet="ab")
    a.add_states("s", "t")
    a.set_initial("s", 0.0)
    a.set_initial("t", 0.0)
    a.set_final("t", 0.5)
    a.add_arc("s", "t", EPSILON, 0.0)
    text = write_att(a)
    assert "\t0.0" in text  # "2 0 <eps> 0" would also read as a transducer arc of weight one
    b = read_att(text, "max-times")
    assert b.score([]) == a.score([]) == 0.0
    a.set_initial("t", 0.25)
    assert read_att(write_att(a), "max-times").score([]) == 0.125


# -- sources: text, bytes, paths, file objects --------------------------------------------------

TEXT = "0 1 a 0.5\n1 2 <eps> 0.25\n2 1.5\n"


def test_read_att_takes_text_bytes_paths_and_file_objects(tmp_path: Path) -> None:
    path = tmp_path / "machine.att"
    path.write_text(TEXT)
    expected = read_att(TEXT).score(["a"])
    assert expected == 2.25
    with path.open() as text_file, path.open("rb") as binary_file:
        sources = [TEXT, TEXT.encode(), path, str(path), io.StringIO(TEXT), text_file, binary_file]
        for source in sources:
            assert read_att(source).score(["a"]) == expected, source


def test_file_names_and_text_are_told_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("0").write_text("0 1 a\n1\n")  # a file named like one-line AT&T text
    assert read_att("0").num_states == 2  # no line break and the file exists: the file
    assert read_att("0\n").num_states == 1  # a line break: text
    with pytest.raises(FormatError, match=r"line 1 \('nosuch.att'\).*\(and no file named 'nosuch.att' exists\)"):
        read_att("nosuch.att")
    with pytest.raises(FormatError, match=r"read_att: source names .*nosuch.att.*cannot be read"):
        read_att(tmp_path / "nosuch.att")


@pytest.mark.parametrize("source", [5, None, ["0 1 a"], 2.5, object()])
def test_read_att_of_a_wrong_type_names_the_argument(source: object) -> None:
    with pytest.raises(FormatError, match=r"read_att: source must be text \(str\), bytes, a pathlib.Path"):
        read_att(source)


def test_wrong_symbols_and_sources_name_the_argument() -> None:
    with pytest.raises(FormatError, match=r"read_att: symbols must be text"):
        read_att(TEXT, symbols=5)
    with pytest.raises(FormatError, match=r"read_att: osymbols must be text"):
        read_att(TEXT, osymbols=[1])
    with pytest.raises(FormatError, match="not both"):
        read_att(TEXT, symbols=SymbolTable("a"), isymbols=SymbolTable("a"))
    with pytest.raises(FormatError, match=r"read_symbols: source must be text"):
        read_symbols(3)
    with pytest.raises(FormatError, match=r"source is not UTF-8 text \(byte 0"):
        read_att(b"\xff0 1 a\n")
    with pytest.raises(FormatError, match="write_att: wfsa must be a WFSA"):
        write_att(TEXT)  # type: ignore[arg-type]


def test_symbol_tables_from_paths_files_and_both_columns(tmp_path: Path) -> None:
    table = SymbolTable(["a", "b"], epsilon="<epsilon>")
    path = tmp_path / "abc.syms"
    write_symbols(table, file=path)
    transducer = "0 1 1 1 0.5\n1 2 b b\n2\n"
    for symbols in (table, path, str(path), path.read_bytes(), path.read_text()):
        a = read_att(transducer, symbols=symbols)
        assert a.alphabet == table and a.score(["a", "b"]) == 0.5
        assert read_att(transducer, isymbols=symbols, osymbols=symbols).score(["a", "b"]) == 0.5
    # an output table with other ids: each arc's two columns must still name one symbol
    flipped = SymbolTable(["b", "a"])
    a = read_att("0 1 1 2 0.5\n1\n", isymbols=table, osymbols=flipped)
    assert a.score(["a"]) == 0.5
    with pytest.raises(FormatError, match="differ"):
        read_att("0 1 1 1 0.5\n1\n", isymbols=table, osymbols=flipped)


def test_write_att_and_write_symbols_write_to_paths_and_file_objects(tmp_path: Path) -> None:
    a = read_att(TEXT)
    path = tmp_path / "out.att"
    text = write_att(a, file=path)
    assert path.read_text() == text
    write_att(a, file=str(path) + "2")
    assert Path(str(path) + "2").read_text() == text
    buffer, binary = io.StringIO(), io.BytesIO()
    write_att(a, file=buffer)
    write_att(a, file=binary)
    assert buffer.getvalue() == text and binary.getvalue() == text.encode()
    assert read_att(path).score(["a"]) == a.score(["a"])
    with pytest.raises(FormatError, match="file must be a path or a writable file object"):
        write_att(a, file=3)
    syms = tmp_path / "t.syms"
    write_symbols(SymbolTable(["x"]), file=syms)
    assert read_symbols(syms) == SymbolTable(["x"])
    assert read_att("0 1 x\n1\n", symbols=syms).alphabet == SymbolTable(["x"])
    assert write_att(read_att("0 1 x\n1\n"), symbols=syms) == "0\t1\t1\n1\n"


# -- fuzz: malformed input gives a kleene error or an automaton, never another exception ----------

TOKENS = st.sampled_from(["0", "1", "2", "17", "a", "b", "<eps>", "<epsilon>", "0.5", "-1", "inf", "-inf", "nan",
                          "Infinity", "0x1p-3", "1e400", "x y", "", "\t", "é", "\x00", "1_0", "+2", ".5"])
LINES = st.lists(TOKENS, max_size=6).map(" ".join)
SYMBOL_LINES = st.lists(st.sampled_from(["a", "b", "<eps>", "0", "1", "2", "x", "-3", ""]), max_size=3).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(LINES, max_size=6),
    semiring=st.sampled_from(SEMIRINGS),
    acceptor=st.sampled_from([None, True, False]),
    symbols=st.one_of(st.none(), st.lists(SYMBOL_LINES, max_size=4).map("\n".join)),
    as_bytes=st.booleans(),
)
@pytest.mark.slow
def test_fuzzed_att_text_reads_or_raises_a_kleene_error(
    lines: list[str], semiring: str, acceptor: bool | None, symbols: str | None, as_bytes: bool
) -> None:
    text = "\n".join(lines) + "\n"
    try:
        a = read_att(text.encode() if as_bytes else text, semiring, symbols=symbols, acceptor=acceptor)
    except KleeneError:
        return
    assert isinstance(a, WFSA)
    try:
        again = read_att(write_att(a), semiring, symbols=None)  # what was read writes and reads back
    except KleeneError:
        return  # e.g. a string symbol of digits read through a table: writing it needs the table
    for word in ([], [next(iter(a.alphabet))] if a.alphabet else []):
        try:
            expected = a.score(word)
        except KleeneError:
            continue
        if again.alphabet is not None and any(x not in again.alphabet for x in word):
            assert a.semiring.is_zero(expected)  # a table symbol no arc uses: the file cannot name it
            continue
        assert close(again.score(word), expected)


SOURCES = st.one_of(
    st.integers(), st.floats(), st.none(), st.lists(st.text(max_size=3), max_size=2), st.binary(max_size=20),
    st.text(max_size=20), st.dictionaries(st.text(max_size=2), st.integers()),
)


@settings(max_examples=100, deadline=None)
@given(source=SOURCES)
def test_fuzzed_sources_read_or_raise_a_kleene_error(source: object) -> None:
    for reader in (read_att, read_symbols):
        with contextlib.suppress(KleeneError):
            reader(source)
