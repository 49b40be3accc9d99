"""Every operation that can blow up has a budget that answers within seconds and names the argument to raise;
bad input becomes a kleene error naming the argument (issue 23, "bad input that still escapes")."""

from __future__ import annotations

import pytest

from kleene.automata import regex
from kleene.errors import ArgumentError, BudgetExceededError, FormatError

# -- regex ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["(a*){1000}", "(a*){100000}", "(bad*){3000}", "a{100001}", "(a|b){0,}{99999999}"])
def test_regex_repetition_has_an_arc_budget(text: str) -> None:
    with pytest.raises(BudgetExceededError, match="max_arcs=100000"):
        regex(text)


def test_regex_budget_can_be_raised_and_lowered() -> None:
    assert regex("(a*){20}").num_arcs == 20 * 21 // 2 + 20  # the start's arcs and k(k+1)/2 follow arcs
    with pytest.raises(BudgetExceededError, match="max_arcs=50"):
        regex("(a*){20}", max_arcs=50)
    assert regex("a{150}", max_arcs=200).num_states == 151
    with pytest.raises(ArgumentError, match="max_arcs"):
        regex("a", max_arcs=0)


def test_regex_huge_repetition_count_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="column 2: repetition count"):
        regex("a{999999999999999999999}")
    with pytest.raises(FormatError, match="with integers"):
        regex("a{٣}")  # an Arabic-Indic digit is not a count


def test_regex_nesting_is_bounded() -> None:
    deep = "(" * 300 + "a" + ")" * 300
    with pytest.raises(FormatError, match="MAX_NESTING=100"):
        regex(deep)
    with pytest.raises(FormatError, match="MAX_NESTING"):
        regex("a" + "*" * 2000)
    ok = "(" * 100 + "a" + ")" * 100
    assert regex(ok).score(["a"]) == 1.0


def test_regex_long_bounded_repetition_does_not_recurse() -> None:
    a = regex("a{0,2000}", "tropical", max_arcs=10_000)
    assert a.score(["a"] * 2000) == 0.0 and a.score(["a"] * 2001) == float("inf")
    assert regex("a{2,3}").score(["a"] * 3) == 1.0 and regex("a{2,3}").score(["a"]) == 0.0
