"""The operators in pynini's spirit (``|``, ``+``, ``&``, ``star``, ``plus``, ``copy``, ``str``, ``equivalent``)
against the definitions of the operations, against kleene's regexes and against pynini's own operators."""

from __future__ import annotations

from itertools import product
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kleene.automata import (
    WFSA,
    SemiringError,
    concat,
    get_semiring,
    intersect,
    kleene_plus,
    kleene_star,
    read_att,
    regex,
    union,
    write_att,
)

from .oracle import brute_force_score
from .regex_trees import EIGHTHS, SIGMA, Node, pynini_score, same, show, to_pynini, trees
from .strategies import ALPHABET, wfsas

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]
WORDS = [list(w) for n in range(4) for w in product(ALPHABET, repeat=n)]


def total(semiring: str, values: list[Any]) -> Any:
    s = get_semiring(semiring)
    out = s.zero
    for v in values:
        out = s.plus(out, v)
    return out


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.slow
def test_operators_compute_the_rational_operations(semiring: str, data: st.DataObject) -> None:
    """``a | b`` is ⊕, ``a + b`` the Cauchy product and ``a & b`` the pointwise ⊗, checked path by path."""
    s = get_semiring(semiring)
    a = data.draw(wfsas(semiring, max_states=3, max_arcs=5, epsilons=False))
    b = data.draw(wfsas(semiring, max_states=3, max_arcs=5, epsilons=False))

    def bf(m: WFSA, w: list[str]) -> Any:
        return brute_force_score(m, w, 0)

    either, then, both = a | b, a + b, a & b
    for w in WORDS:
        assert same(semiring, either.score(w), s.plus(bf(a, w), bf(b, w)))
        splits = [s.times(bf(a, w[:i]), bf(b, w[i:])) for i in range(len(w) + 1)]
        assert same(semiring, then.score(w), total(semiring, splits))
        assert same(semiring, both.score(w), s.times(bf(a, w), bf(b, w)))


def test_operators_are_the_ops_functions() -> None:
    a, b = regex("a b*<0.5>", "real"), regex("(a | b)<0.25>", "real")
    for operator, function in [(a | b, union(a, b)), (a + b, concat(a, b)), (a & b, intersect(a, b))]:
        assert str(operator) == str(function)
    assert str(a.star()) == str(kleene_star(a)) and str(a.plus()) == str(kleene_plus(a))


def test_operators_agree_with_the_regex_syntax() -> None:
    x, y = regex("a b<0.5>"), regex("b | c<0.25>")
    assert (x | y).equivalent(regex("a b<0.5> | b | c<0.25>"))
    assert (x + y).equivalent(regex("a b<0.5> (b | c<0.25>)"))
    assert (x.star() + y).equivalent(regex("(a b<0.5>)* (b | c<0.25>)"))
    assert x.plus().equivalent(regex("(a b<0.5>)+"))
    assert (regex("a* b", alphabet="abc") & regex(". b", alphabet="abc")).equivalent(regex("a b", alphabet="abc"))


def test_mixed_semirings_are_refused_naming_both() -> None:
    a, b = regex("a", "real"), regex("a", "log")
    for attempt in (lambda: a | b, lambda: a + b, lambda: a & b):
        with pytest.raises(SemiringError, match=r"different semirings \(real and log\)"):
            attempt()


def test_operands_that_are_not_automata_raise_type_errors() -> None:
    a = regex("a")
    with pytest.raises(TypeError):
        _ = a | "b"  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = a + 1  # type: ignore[operator]


def test_equality_is_identity_and_equivalence_is_a_method() -> None:
    a, b = regex("a | b"), regex("[a b]")
    assert a != b and a == a
    assert a.equivalent(b)
    result = a.equivalent(regex("a"))
    assert not result and result.counterexample is not None and result.counterexample.symbols == ("b",)


def test_copy_is_independent() -> None:
    a = regex("a b", alphabet=["a", "b"])
    c = a.copy()
    c.add_arc(0, 0, "a", 0.5)
    c.alphabet.add("z")  # type: ignore[union-attr]
    c.set_final(0)
    assert len(a.arcs) == 2 and "z" not in a.alphabet and 0 not in a.final  # type: ignore[operator]
    assert str(a.copy()) == str(a)


def test_str_is_the_att_listing() -> None:
    a = regex("a b* | c<2.5>", "min-plus")
    assert str(a) == write_att(a)
    assert str(a).splitlines()[0].startswith("0\t")
    back = read_att(str(a), "min-plus")
    assert all(back.score(w) == a.score(w) for w in WORDS)
    assert repr(a) == "<WFSA over min-plus: 4 states, 4 arcs>"


def test_str_shows_predicates_and_expressions_without_expanding() -> None:
    vocab = [f"w{i}" for i in range(20_000)]
    a = regex(". [^w1] [w2 w3]", alphabet=vocab)
    lines = str(a).splitlines()
    assert lines == ["0\t1\t∀α", "1\t2\tΣ∖{w1}", "2\t3\t{w2,w3}", "3"]
    m = WFSA("real", ["x"])
    m.add_states("p", "q")
    m.set_initial("p", 0.5)
    m.set_final("q", "w")
    m.add_arc("p", "q", "x", "mu(alpha)")
    assert str(m) == "2\t0\t<eps>\t0.5\n0\t1\tx\tmu(alpha)\n1\tw\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(x=trees("min-plus", EIGHTHS, max_leaves=4), y=trees("min-plus", EIGHTHS, max_leaves=4))
@pytest.mark.slow
def test_tropical_operators_match_pynini(x: Node, y: Node) -> None:
    pynini = pytest.importorskip("pynini", reason="pynini (real OpenFst) is the oracle")
    a, b = regex(show(x), "min-plus", SIGMA, unit="char"), regex(show(y), "min-plus", SIGMA, unit="char")
    p, q = to_pynini(x), to_pynini(y)
    pairs = [
        (a | b, pynini.union(p, q)),
        (a + b, p + q),
        (a & b, pynini.intersect(p, q)),
        (a.star(), pynini.closure(p)),
        (a.plus(), pynini.closure(p, 1)),
    ]
    words = [w for n in range(4) for w in product(SIGMA, repeat=n)]
    for ours, theirs in pairs:
        for w in words:
            assert ours.score(list(w)) == pynini_score(theirs, w), (show(x), show(y), w)


def test_str_quotes_symbols_that_are_not_att_fields() -> None:
    a = WFSA("real")
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q")
    for symbol in ["a b", "0", "<eps>", "x"]:
        a.add_arc("p", "q", symbol, 0.5)
    assert str(a).splitlines()[:4] == ["0\t1\t'a\\u0020b'\t0.5", "0\t1\t'0'\t0.5", "0\t1\t'<eps>'\t0.5", "0\t1\tx\t0.5"]
