"""Building automata, and the errors that name bad input."""

from __future__ import annotations

import pytest

from kleene.automata import ANY, EPSILON, WFSA, AlphabetError, NoneOf, OneOf, SymbolTable, UnknownStateError


def test_plain_construction() -> None:
    a = WFSA("real", alphabet=["a", "b"], name="demo")
    p, q = a.add_states("p", "q")
    a.set_initial(p, 0.5)
    a.set_final("q", 2.0)
    a.add_arc(p, q, "a", 0.25)
    a.add_arc(q, q, NoneOf({"a"}), 0.5)
    assert a.num_states == 2 and a.states == ["p", "q"]
    assert [arc.kind for arc in a.arcs] == ["main", "self-loop"]
    assert a.score("abb") == 0.5 * 0.25 * 0.5 * 0.5 * 2.0
    assert a.score("aba") == 0.0
    assert "demo" in repr(a) and "2 states" in repr(a)


def test_arc_to_an_unknown_state_is_named() -> None:
    a = WFSA()
    a.add_states("p", "q")
    with pytest.raises(UnknownStateError, match=r"arc 0 \(p -x-> 'r'\): no state named 'r'; states are \['p', 'q'\]"):
        a.add_arc("p", "r", "x")
    with pytest.raises(UnknownStateError, match="no state with index 7"):
        a.set_final(7)


def test_duplicate_state_name_is_refused() -> None:
    a = WFSA()
    a.add_state("p")
    with pytest.raises(UnknownStateError, match="state 'p' already exists"):
        a.add_state("p")


def test_symbol_outside_the_alphabet_is_named() -> None:
    a = WFSA(alphabet="ab")
    a.add_states("p", "q")
    with pytest.raises(AlphabetError, match=r"arc 0 \(p -z-> q\): symbol 'z' is not in the alphabet"):
        a.add_arc("p", "q", "z")


def test_predicate_labels_match_as_sets() -> None:
    assert ANY.matches("x") and not EPSILON.matches("x")
    assert OneOf({"a", "b"}).matches("a") and not OneOf({"a"}).matches("b")
    assert NoneOf({"a"}).matches("b") and not NoneOf({"a"}).matches("a")
    table = SymbolTable("abc")
    assert NoneOf({"a"}).symbols(table) == ["b", "c"]
    with pytest.raises(AlphabetError, match="needs an alphabet"):
        ANY.symbols(None)


def test_symbol_table_ids() -> None:
    table = SymbolTable(["x", "y"])
    assert table.id("x") == 1 and table.symbol(2) == "y" and table.symbol(0) == "<eps>"
    with pytest.raises(AlphabetError, match="symbol 'z' is not in the alphabet"):
        table.id("z")
    with pytest.raises(AlphabetError, match="symbol id 9 is not in the table"):
        table.symbol(9)


def test_weight_strings_name_parameters_not_sympy_constants() -> None:
    import sympy

    from kleene.automata import ALPHA, WeightError

    a = WFSA()
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q", "gamma")
    assert a.final[1] == sympy.Symbol("gamma")
    a.add_arc("p", "q", ANY, "beta(alpha) * E")
    assert a.arcs[0].weight == sympy.Function("beta")(ALPHA) * sympy.Symbol("E")
    a.add_arc("p", "q", ANY, "sigmoid(w * v(alpha) + b)")
    assert a.score(["x"], env={"beta": {"x": 2.0}, "E": 0.5, "gamma": 1.0, "w": 0.0, "v": {"x": 1.0}, "b": 0.0}) == 1.5
    with pytest.raises(WeightError, match="'open' is not allowed in a weight expression"):
        a.add_arc("p", "q", ANY, "open(1)")
