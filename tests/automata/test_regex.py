"""Regular expressions: the parser's errors, the compiled series against a direct evaluation of the expression
tree, predicate labels that stay symbolic, and ``to_regex`` round trips."""

from __future__ import annotations

from itertools import product

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kleene.automata import (
    ANY,
    WFSA,
    AlphabetError,
    DivergenceError,
    FormatError,
    NoneOf,
    OneOf,
    WeightError,
    equivalent,
    regex,
    to_regex,
)
from kleene.automata.regexp import format_regex, parse_regex, to_regex_tree

from .oracle import brute_force_score
from .regex_trees import EIGHTHS, SIGMA, Node, evaluator, pynini_score, same, show, to_pynini, trees
from .strategies import wfsas

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]

# -- errors ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("(a b", FormatError, r"column 5: expected '\)' to close the group opened at column 1 but found the end"),
        ("a b)", FormatError, r"column 4: unexpected '\)' \(no group is open\)"),
        ("a | | b", FormatError, r"column 5: expected a symbol, '\.', '\(' or '\[' but found '\|'"),
        ("a |", FormatError, r"column 4: expected a symbol.* but found the end of the expression"),
        ("* a", FormatError, r"column 1: expected a symbol.* but found '\*'"),
        ("[a b", FormatError, r"column 5: expected a symbol or '\]' to close the set opened at column 1"),
        ("[a (b)]", FormatError, r"column 4: expected a symbol or '\]'.* but found '\('"),
        ("a<2.5", FormatError, r"column 2: expected '>' to close the '<' opened here"),
        ("a<two>", FormatError, r"column 2: weight <two> is not a number"),
        ("a b>", FormatError, r"column 4: unexpected '>'"),
        ("a{2", FormatError, r"column 2: expected '}'"),
        ("a{x}", FormatError, r"column 2: expected \{m\}, \{m,\}, \{,n\} or \{m,n\} with integers, not \{x\}"),
        ("a{3,1}", FormatError, r"column 2: repetition \{3,1\}: the upper bound 1 is below 3"),
        ('a "b', FormatError, r"column 3: unterminated quote"),
        ('a ""', FormatError, r'column 3: empty quoted symbol ""'),
        ("a \\", FormatError, r"column 3: expected a character after '\\'"),
        ("   ", FormatError, r"column 1: empty expression; write \(\) for the empty string"),
        ("a<-1>", WeightError, r"regex column 2: weight <-1>: -1.0 is not an element of the max-times semiring"),
        ("a<inf>", WeightError, r"regex column 2: weight <inf>: inf is not an element of the max-times semiring"),
    ],
)
def test_errors_name_the_column_and_what_was_expected(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        regex(text, "max-times")


def test_symbols_outside_the_alphabet_are_named_with_their_column() -> None:
    with pytest.raises(AlphabetError, match=r"regex column 7: symbol 'bad' is not in the alphabet \{'good'"):
        regex("good [bad]", alphabet=["good", "fine"])
    with pytest.raises(AlphabetError, match="column 4: symbol 'z'"):
        regex("ab z", alphabet="ab", unit="char")


def test_a_diverging_star_is_refused_where_the_semiring_has_no_star() -> None:
    with pytest.raises(DivergenceError, match=r"regex column 5: the operand of '\*' scores the empty string with 1"):
        regex("(a?)*", "real")
    assert regex("(a?)*", "boolean").score(["a", "a"]) is True  # the boolean star of one converges
    assert regex("(a?)*", "min-plus").score(["a"]) == 0.0
    assert regex("(a?<0.5>)*", "real").score([]) == 2.0  # (a | ())<0.5> scores the empty string 0.5: 1/(1-0.5)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(FormatError, match="unit must be 'word' or 'char', not 'byte'"):
        regex("a", unit="byte")
    with pytest.raises(FormatError, match="must be a str, not int"):
        regex(3)  # type: ignore[arg-type]


# -- syntax ----------------------------------------------------------------------------------------------------------


def test_words_and_characters() -> None:
    assert regex("good movie").score(["good", "movie"]) == 1.0
    assert regex("good movie", unit="char").score(list("goodmovie")) == 1.0  # whitespace is insignificant
    assert regex('"good movie"').score(["good movie"]) == 1.0  # one symbol with a space
    assert regex('" "', unit="char").score([" "]) == 1.0
    assert regex("ab*", unit="char").score(list("abbb")) == 1.0  # postfix binds to the last character
    assert regex("ab*", unit="char").score(list("abab")) == 0.0


def test_escapes_and_quotes_make_one_symbol() -> None:
    a = regex(r'"(" \* don"\""t a\\b "[^x]"')
    assert a.score(["(", "*", 'don"t', "a\\b", "[^x]"]) == 1.0
    assert regex(r"\( \)", unit="char").score(["(", ")"]) == 1.0


def test_predicates_sets_and_complements() -> None:
    sigma = ["good", "great", "bad", "awful", "movie"]
    a = regex("[good great] [^bad awful] .", alphabet=sigma)
    labels = [arc.label for arc in a.arcs]
    assert OneOf({"good", "great"}) in labels and NoneOf({"bad", "awful"}) in labels and ANY in labels
    assert a.score(["great", "movie", "bad"]) == 1.0
    assert a.score(["great", "bad", "bad"]) == 0.0
    assert regex("[^]", alphabet=sigma).arcs[0].label == ANY
    assert regex("[]").num_states == 0  # the empty language


def test_weights_on_atoms_and_groups() -> None:
    a = regex("(very<0.5>)* good<2> | bad", "real")
    assert a.score(["good"]) == 2.0
    assert a.score(["very", "very", "good"]) == 0.25 * 2.0
    assert regex("(a | b)<3>", "real").score(["b"]) == 3.0
    assert regex("a<-0.5> b", "log").score(["a", "b"]) == -0.5
    assert regex("(a b)<2> | a b", "min-plus").score(["a", "b"]) == 0.0
    assert regex("a<false> | b", "boolean").score(["a"]) is False


def test_alternatives_add_up_outside_idempotent_semirings() -> None:
    assert regex("a | a", "real").score(["a"]) == 2.0
    assert regex("(a?)?", "real").score([]) == 2.0
    assert regex("a | a", "max-plus").score(["a"]) == 0.0


def test_bounded_repetition_counts_each_length_once() -> None:
    a = regex("a{1,3}", "real")
    assert [a.score(["a"] * k) for k in range(5)] == [0.0, 1.0, 1.0, 1.0, 0.0]
    b = regex("a{2,}", "real")
    assert [b.score(["a"] * k) for k in range(5)] == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert [regex("a{,1}").score(["a"] * k) for k in range(3)] == [1.0, 1.0, 0.0]
    assert [regex("a{2}").score(["a"] * k) for k in range(4)] == [0.0, 0.0, 1.0, 0.0]
    assert regex("a{0}").score([]) == 1.0 and regex("a{0}").score(["a"]) == 0.0


def test_the_position_automaton_has_one_state_per_occurrence_and_no_epsilons() -> None:
    a = regex("(a | b)* a b b")
    assert a.num_states == 6 and not a.has_epsilons


def test_predicates_stay_symbolic_over_a_large_vocabulary() -> None:
    vocab = [f"w{i}" for i in range(20_000)]
    a = regex(". w7 [^w1 w2] [w3 w4]* .", alphabet=vocab)
    assert len(a.arcs) <= 8 and a.num_states == 6
    assert a.score(["w19999", "w7", "w5", "w3", "w4", "w0"]) == 1.0
    assert a.score(["w19999", "w7", "w1", "w0"]) == 0.0
    assert len(str(a).splitlines()) <= 12  # printed as labels, not expanded
    assert to_regex(a) == ". w7 [^w1 w2] [w3 w4]* ."


# -- semantics against a direct evaluation of the expression tree -----------------------------------------------------

WORDS = [w for n in range(4) for w in product(SIGMA, repeat=n)] + [("a", "b", "a", "b"), ("*", "*", "a", "*")]


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.slow
def test_series_equals_the_definition_of_the_expression(semiring: str, data: st.DataObject) -> None:
    tree = data.draw(trees(semiring))
    unit = data.draw(st.sampled_from(["word", "char"]))
    text = show(tree)
    oracle = evaluator(semiring, tree)
    try:
        oracle(())
    except DivergenceError:
        with pytest.raises(DivergenceError):
            regex(text, semiring, SIGMA, unit=unit)
        return
    a = regex(text, semiring, SIGMA, unit=unit)
    assert not a.has_epsilons
    for w in WORDS:
        assert same(semiring, a.score(list(w)), oracle(w)), (text, w, a.score(list(w)), oracle(w))


# -- to_regex --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "semiring", "expected"),
    [
        ("a | a", "boolean", "a"),
        ("a | a", "real", "a<2>"),
        ("a | b | c", "real", "[a b c]"),
        ("[a b] | [b c]", "max-plus", "[a b c]"),
        ("[^a b] | b", "real", "[^a]"),
        ("(a b)*", "real", "(a b)*"),
        ("a a*", "real", "a+"),
        ("a? b", "real", "a? b"),
        ("good<2.5> | very+ good<2.5>", "real", "very* good<2.5>"),
        ("good<2.5> | very* good<2.5>", "real", "very*? good<2.5>"),  # the empty prefix twice: (()<2> | very+)
        ("good<2.5> | very* good<2.5>", "max-plus", "very* good<2.5>"),
        ("a<0.1> b", "real", "a<0.1> b"),
        ("()", "real", "()"),
        ("[]", "real", "[]"),
        ("(a | ())<0.5>", "real", "a?<0.5>"),
        ('"(" "a b" "^x" \\\\ "\\""', "real", '"(" "a b" "^x" "\\\\" "\\""'),
    ],
)
def test_to_regex_simplifies(text: str, semiring: str, expected: str) -> None:
    assert to_regex(regex(text, semiring)) == expected


def test_to_regex_in_character_mode() -> None:
    a = regex("(ab|c)*d<0.5>", "real", unit="char")
    text = to_regex(a, unit="char")
    assert " " not in text and equivalent(regex(text, unit="char"), a)
    assert to_regex(regex(r"\( | \ ", unit="char"), unit="char") == r"[\ \(]"
    with pytest.raises(AlphabetError, match="symbol 'ab' is not one character"):
        to_regex(regex("ab"), unit="char")


def test_to_regex_refuses_symbolic_weights() -> None:
    a = WFSA("real", ["a"])
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q")
    a.add_arc("p", "q", "a", "mu(alpha)")
    with pytest.raises(WeightError, match=r"to_regex: arc 0 has the symbolic weight mu\(alpha\); bind it first"):
        to_regex(a)


def test_printed_trees_parse_back_to_the_same_tree() -> None:
    for text in ["a (b | c)* d<2>", "[^a b]+ . [c d]?", "(a b){2,3} (c | ()<0.5>)", "a*<3> b{,2}"]:
        tree = parse_regex(text)
        assert parse_regex(format_regex(tree)) == tree


@pytest.mark.parametrize("semiring", ["real", "log"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.slow
def test_to_regex_round_trips_in_the_field_semirings(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, max_states=4, max_arcs=7))
    unit = data.draw(st.sampled_from(["word", "char"]))
    back = regex(to_regex(a, unit=unit), semiring, a.alphabet, unit=unit)
    result = equivalent(a, back)
    assert result, (to_regex(a, unit=unit), str(result))


@pytest.mark.parametrize("semiring", ["max-plus", "min-plus", "max-times", "boolean"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.slow
def test_to_regex_round_trips_in_the_other_semirings(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, max_states=4, max_arcs=7, epsilons=False))
    text = to_regex(a)
    back = regex(text, semiring, a.alphabet)
    alphabet = list(a.alphabet or ())
    for n in range(4):
        for w in product(alphabet, repeat=n):
            assert same(semiring, back.score(list(w)), brute_force_score(a, list(w), 0)), (text, w)


def test_to_regex_of_epsilon_automata_removes_the_epsilons_first() -> None:
    a = regex("a b", "real").star()  # ops.kleene_star adds epsilon arcs
    assert a.has_epsilons
    text = to_regex(a)
    assert text == "(a b)*" and equivalent(regex(text), a)


def test_to_regex_tree_of_the_empty_language_is_none() -> None:
    a = WFSA("real", ["a"])
    a.add_state()
    assert to_regex_tree(a) is None and to_regex(a) == "[]"



# -- OpenFst ---------------------------------------------------------------------------------------------------------

@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees("min-plus", EIGHTHS))
def test_tropical_regexes_score_as_pynini_builds_them(tree: Node) -> None:
    pytest.importorskip("pynini", reason="pynini (real OpenFst) is the oracle")
    machine = to_pynini(tree)
    a = regex(show(tree), "min-plus", SIGMA, unit="char")
    for w in WORDS:
        assert a.score(list(w)) == pynini_score(machine, w), (show(tree), w)


def test_to_regex_of_a_union_of_phrases_gives_the_phrases_back() -> None:
    text = " | ".join(f"w{i} w{i + 1} w{i + 2}" for i in range(0, 600, 3))
    a = regex(text)
    assert a.num_states == 601 and to_regex(a) == text
    shared = regex("not good | not great | never good")
    assert to_regex(shared) == "not [good great] | never good"
