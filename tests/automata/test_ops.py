"""Rational operations checked against brute-force path enumeration (tests/automata/oracle.py),
against the closed forms of the operations, and against OpenFst (pynini) on tropical and log automata."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from functools import reduce
from typing import Any

import pytest
import sympy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kleene.automata import (
    ANY,
    BOOLEAN,
    EPSILON,
    LOG,
    MIN_PLUS,
    REAL,
    WFSA,
    AlphabetError,
    DivergenceError,
    NoneOf,
    OneOf,
    Semiring,
    SemiringError,
    Sym,
    SymbolTable,
    WeightError,
    concat,
    get_semiring,
    intersect,
    kleene_plus,
    kleene_star,
    remove_epsilon,
    reverse,
    trim,
    union,
    weight_functions,
)

from .oracle import brute_force_score, paths
from .strategies import ALPHABET, wfsas

SEMIRING_NAMES = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]
IDEMPOTENT_NAMES = ["max-plus", "min-plus", "max-times", "boolean"]
# The brute-force oracle enumerates paths one by one, and their number grows like
# (epsilon arcs ** cap * consuming arcs) ** length: caps, strings and automata stay small.
CAP = 1  # epsilons in a row allowed where scores are compared with a cap
strings = st.lists(st.sampled_from(ALPHABET), max_size=3)
FEW = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


def same(semiring: Semiring, x: Any, y: Any, rel: float = 1e-7) -> bool:
    if semiring is BOOLEAN:
        return bool(x) == bool(y)
    x, y = float(x), float(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return math.isclose(x, y, rel_tol=rel, abs_tol=1e-9)


def total(semiring: Semiring, values: Sequence[Any]) -> Any:
    return reduce(semiring.plus, values, semiring.zero)


def exact_or_none(wfsa: WFSA, symbols: Sequence[Hashable]) -> Any:
    """The exact score, or None when the epsilon closure diverges."""
    try:
        return wfsa.score(symbols)
    except DivergenceError:
        return None


def snapshot(wfsa: WFSA) -> tuple[Any, ...]:
    return (wfsa.states, list(wfsa.arcs), dict(wfsa.initial), dict(wfsa.final), wfsa.alphabet)


# ----------------------------------------------------------------------------------------
# union


@pytest.mark.parametrize("name", SEMIRING_NAMES)
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_union_scores_the_sum(name: str, data: st.DataObject) -> None:
    a, b = data.draw(wfsas(name)), data.draw(wfsas(name))
    before = snapshot(a), snapshot(b)
    u = union(a, b)
    assert (snapshot(a), snapshot(b)) == before
    s = u.semiring
    for x in [[], *data.draw(st.lists(strings, min_size=1, max_size=3))]:
        expected = s.plus(brute_force_score(a, x, CAP), brute_force_score(b, x, CAP))
        assert same(s, brute_force_score(u, x, CAP), expected)
        assert same(s, u.score(x, epsilon_cap=CAP), expected)


def test_union_names_states_by_operand() -> None:
    a = WFSA("real", alphabet="ab")
    a.add_states("start", "end")
    b = WFSA("real", alphabet="ab")
    b.add_states("start")
    assert union(a, b).states == ["a.start", "a.end", "b.start"]


def test_union_keeps_predicates_meaning_when_alphabets_differ() -> None:
    small = WFSA("real", alphabet="ab")
    small.add_state("q")
    small.set_initial("q")
    small.set_final("q")
    small.add_arc("q", "q", ANY, 0.5)
    small.add_arc("q", "q", NoneOf({"a"}), 0.25)
    big = WFSA("real", alphabet="abc")
    big.add_state("r")
    big.set_initial("r", 0.1)
    big.set_final("r")
    big.add_arc("r", "r", "c", 0.3)
    u = union(small, big)
    assert list(u.alphabet or []) == ["a", "b", "c"]
    assert [str(arc.label) for arc in u.arcs[:2]] == ["{a,b}", "b"]
    assert u.score(["a", "b"]) == pytest.approx(0.5 * 0.75)
    assert u.score(["c"]) == pytest.approx(0.1 * 0.3)  # the small automaton's ∀α no longer reads c
    assert u.score(["b", "c"]) == 0.0


def test_union_adopts_the_symbols_of_an_operand_without_alphabet() -> None:
    open_ = WFSA("max-plus")
    open_.add_state("q")
    open_.set_initial("q")
    open_.set_final("q")
    open_.add_arc("q", "q", "z", -1.0)
    closed = WFSA("max-plus", alphabet="ab")
    closed.add_state("r")
    u = union(closed, open_)
    assert list(u.alphabet or []) == ["a", "b", "z"]
    assert u.score(["z", "z"]) == -2.0


def test_mixed_semirings_are_refused() -> None:
    a, b = WFSA("real"), WFSA("log")
    for op in (union, concat, intersect):
        with pytest.raises(SemiringError, match=r"different semirings.*real and log"):
            op(a, b)


def test_alphabets_that_cannot_merge_are_refused() -> None:
    a = WFSA("real", alphabet=SymbolTable(["a"], epsilon="eps"))
    b = WFSA("real", alphabet=SymbolTable(["eps"]))
    with pytest.raises(AlphabetError, match=r"second operand.*'eps' is the epsilon symbol"):
        union(a, b)


# ----------------------------------------------------------------------------------------
# concatenation


def splits(x: Sequence[Hashable]) -> Iterator[tuple[list[Hashable], list[Hashable]]]:
    for i in range(len(x) + 1):
        yield list(x[:i]), list(x[i:])


@pytest.mark.parametrize("name", SEMIRING_NAMES)
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_concat_scores_the_sum_over_splits(name: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(name, epsilons=False))
    b = data.draw(wfsas(name, epsilons=False))
    before = snapshot(a), snapshot(b)
    c = concat(a, b)
    assert (snapshot(a), snapshot(b)) == before
    s = c.semiring
    for x in [[], *data.draw(st.lists(strings, min_size=1, max_size=3))]:
        expected = total(s, [s.times(brute_force_score(a, u, 0), brute_force_score(b, v, 0)) for u, v in splits(x)])
        assert same(s, brute_force_score(c, x, 1), expected)  # one epsilon joins the operands
        assert same(s, c.score(x), expected)


@pytest.mark.parametrize("name", ["real", "log", "max-plus"])
@FEW
@given(data=st.data())
def test_concat_with_epsilon_cycles_matches_exact_scores(name: str, data: st.DataObject) -> None:
    a, b = data.draw(wfsas(name, max_states=3)), data.draw(wfsas(name, max_states=3))
    s = a.semiring
    x = data.draw(strings)
    parts = [(exact_or_none(a, u), exact_or_none(b, v)) for u, v in splits(x)]
    assume(all(p is not None and q is not None for p, q in parts))
    assert same(s, concat(a, b).score(x), total(s, [s.times(p, q) for p, q in parts]))


# ----------------------------------------------------------------------------------------
# Kleene star and plus


def power(semiring: Semiring, value: Any, exponent: int) -> Any:
    return reduce(semiring.times, [value] * exponent, semiring.one)


def factorizations(x: Sequence[Hashable]) -> Iterator[list[list[Hashable]]]:
    """Every way of cutting a non-empty ``x`` into non-empty pieces."""
    if not x:
        yield []
        return
    for i in range(1, len(x) + 1):
        for rest in factorizations(x[i:]):
            yield [list(x[:i]), *rest]


def near_divergence(semiring: Semiring, value: Any) -> bool:
    """Whether the star of ``value`` is within rounding of the convergence boundary."""
    if semiring is BOOLEAN:
        return False
    boundary = {"real": 1.0, "log": 0.0, "max-plus": 0.0, "min-plus": 0.0, "max-times": 1.0}[semiring.name]
    magnitude = abs(float(value)) if semiring is REAL else float(value)
    return abs(magnitude - boundary) < 1e-6


@pytest.mark.parametrize("name", SEMIRING_NAMES)
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_kleene_plus_and_star_score_the_sum_over_factorizations(name: str, data: st.DataObject) -> None:
    """With e = a(ε): plus(x) = ⊕ over cuts of x into m non-empty pieces of (e*)^(m+1) ⊗ Π a(piece),
    plus(ε) = e ⊗ e*, star(ε) = e*, star(x) = plus(x) otherwise."""
    a = data.draw(wfsas(name, max_states=3, max_arcs=6, epsilons=False))
    s = a.semiring
    before = snapshot(a)
    plus, star = kleene_plus(a), kleene_star(a)
    assert snapshot(a) == before
    e = brute_force_score(a, [], 0)
    assume(not near_divergence(s, e))
    x = data.draw(strings)
    if not s.star_converges(e):  # the divergent cycle counts only when a successful path derives x
        derivable = not x or any(all(any(paths(a, piece, 0)) for piece in cut) for cut in factorizations(x))
        for result in (plus, star):
            if derivable:
                with pytest.raises(DivergenceError):
                    result.score(x)
            else:
                assert result.score(x) == s.zero
        return
    e_star = s.star(e)
    if x:
        pieces = [
            reduce(s.times, [brute_force_score(a, piece, 0) for piece in cut], power(s, e_star, len(cut) + 1))
            for cut in factorizations(x)
        ]
        expected_plus = expected_star = total(s, pieces)
    else:
        expected_plus, expected_star = s.times(e, e_star), e_star
    assert same(s, plus.score(x), expected_plus)
    assert same(s, star.score(x), expected_star)


def test_kleene_star_adds_a_fresh_start_state() -> None:
    a = WFSA("real", alphabet="a")
    a.add_states("star", "q")
    a.set_initial("star", 0.5)
    a.add_arc("star", "q", "a", 0.5)
    a.set_final("q")
    star = kleene_star(a)
    assert star.states == ["star", "q", "star'"]
    assert star.score([]) == 1.0
    assert star.score(["a", "a"]) == pytest.approx(0.25**2)


def test_kleene_star_of_a_divergent_empty_string_weight_names_a_cycle() -> None:
    a = WFSA("real", alphabet="a")
    a.add_state("q")
    a.set_initial("q", 2.0)
    a.set_final("q", 1.0)
    with pytest.raises(DivergenceError, match="q -> q"):
        kleene_star(a).score([])
    assert kleene_star(a).score(["a"]) == 0.0  # no path derives "a": the cycle does not count


# ----------------------------------------------------------------------------------------
# intersection


@pytest.mark.parametrize("name", SEMIRING_NAMES)
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_intersect_scores_the_product(name: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(name, epsilons=False))
    b = data.draw(wfsas(name, epsilons=False))
    before = snapshot(a), snapshot(b)
    product = intersect(a, b)
    assert (snapshot(a), snapshot(b)) == before
    assert not product.has_epsilons
    s = product.semiring
    for x in [[], *data.draw(st.lists(strings, min_size=1, max_size=3))]:
        expected = s.times(brute_force_score(a, x, 0), brute_force_score(b, x, 0))
        assert same(s, brute_force_score(product, x, 0), expected)
        assert same(s, product.score(x), expected)


@pytest.mark.parametrize("name", IDEMPOTENT_NAMES)
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_intersect_with_epsilons_counts_each_pair_of_paths_once_idempotent(name: str, data: st.DataObject) -> None:
    """In these semirings every epsilon cycle weighs at most one (see strategies), so best paths need
    simple epsilon runs only: fewer than n in an operand, and in the product (a's run, then b's)
    at most (n_a - 1) + (n_b - 1). The brute force with those caps is exact."""
    a, b = data.draw(wfsas(name, max_states=2, max_arcs=4)), data.draw(wfsas(name, max_states=2, max_arcs=4))
    product = intersect(a, b)
    s = product.semiring
    x = data.draw(strings)
    expected = s.times(brute_force_score(a, x, a.num_states - 1), brute_force_score(b, x, b.num_states - 1))
    assert same(s, brute_force_score(product, x, a.num_states + b.num_states - 2), expected)
    assert same(s, product.score(x), expected)


@pytest.mark.parametrize("name", ["real", "log"])
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_intersect_with_epsilon_cycles_counts_each_pair_of_paths_once(name: str, data: st.DataObject) -> None:
    """A filter that let both operands' epsilons interleave freely would count a pair of epsilon
    runs once per interleaving, and the real/log products would come out too large."""
    a, b = data.draw(wfsas(name, max_states=3)), data.draw(wfsas(name, max_states=3))
    x = data.draw(strings)
    score_a, score_b = exact_or_none(a, x), exact_or_none(b, x)
    assume(score_a is not None and score_b is not None)
    s = a.semiring
    assert same(s, intersect(a, b).score(x), s.times(score_a, score_b))
    assert same(s, intersect(a, a).score(x), s.times(score_a, score_a))  # epsilon runs side by side


def test_intersect_counts_two_epsilon_runs_once() -> None:
    """Each operand takes one epsilon before "a": the pair of runs has two interleavings, counted once."""

    def epsilon_then_a(weight: float) -> WFSA:
        w = WFSA("real", alphabet="a")
        w.add_states("0", "1", "2")
        w.set_initial("0")
        w.set_final("2")
        w.add_arc("0", "1", EPSILON, weight)
        w.add_arc("1", "2", "a", 1.0)
        return w

    product = intersect(epsilon_then_a(0.5), epsilon_then_a(0.25))
    assert product.score(["a"]) == pytest.approx(0.125)
    assert brute_force_score(product, ["a"], 2) == pytest.approx(0.125)


def one_arc(label: Any, alphabet: str = "abc", weight: Any = 0.5) -> WFSA:
    w = WFSA("real", alphabet=alphabet)
    w.add_states("p", "q")
    w.set_initial("p")
    w.set_final("q")
    w.add_arc("p", "q", label, weight)
    return w


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        (ANY, Sym("b"), "b"),
        (Sym("b"), ANY, "b"),
        (ANY, ANY, "∀α"),
        (OneOf("ab"), NoneOf("a"), "b"),
        (OneOf("abc"), NoneOf("a"), "{b,c}"),
        (NoneOf("a"), NoneOf("b"), "Σ∖{a,b}"),
        (ANY, NoneOf("b"), "Σ∖{b}"),
        (OneOf("ab"), OneOf("bc"), "b"),
        (Sym("a"), NoneOf("a"), None),
        (OneOf("ab"), NoneOf("ab"), None),
        (NoneOf("ab"), NoneOf("c"), None),
    ],
)
def test_intersect_meets_predicate_labels(x: Any, y: Any, expected: str | None) -> None:
    product = intersect(one_arc(x), one_arc(y))
    labels = [str(arc.label) for arc in product.arcs]
    if expected is None:
        assert labels == []
        return
    assert labels == [expected]
    for symbol in "abc":
        hit = x.matches(symbol) and y.matches(symbol)
        assert product.score([symbol]) == (0.25 if hit else 0.0)


def test_intersect_works_over_the_common_alphabet() -> None:
    a = one_arc(ANY, "abc")
    b = one_arc(NoneOf("a"), "ab")
    product = intersect(a, b)
    assert list(product.alphabet or []) == ["a", "b"]
    assert product.score(["b"]) == 0.25
    assert product.score(["a"]) == 0.0
    assert [str(arc.label) for arc in intersect(one_arc("c", "abc"), one_arc(ANY, "ab")).arcs] == []


def test_intersect_names_pairs_and_epsilon_filter_states() -> None:
    a = WFSA("real", alphabet="a")
    a.add_states("p0", "p1")
    a.set_initial("p0")
    a.set_final("p1")
    a.add_arc("p0", "p1", "a", 0.5)
    b = WFSA("real", alphabet="a")
    b.add_states("q0", "q1", "q2")
    b.set_initial("q0")
    b.set_final("q2")
    b.add_arc("q0", "q1", EPSILON, 0.5)
    b.add_arc("q1", "q2", "a", 0.5)
    product = intersect(a, b)
    assert product.states == ["(p0,q0)", "(p0,q1)ε", "(p1,q2)"]
    assert product.score(["a"]) == pytest.approx(0.125)


def test_intersect_multiplies_symbolic_weights() -> None:
    mu, phi = weight_functions("mu", "phi")
    a, b = one_arc(ANY, weight=mu), one_arc(ANY, weight=phi)
    product = intersect(a, b)
    assert product.arcs[0].weight == mu * phi
    env = {"mu": {"a": 0.5, "b": 0.2, "c": 0.1}, "phi": {"a": 0.3, "b": 0.7, "c": 0.9}}
    assert product.score(["b"], env=env) == pytest.approx(0.2 * 0.7)
    tropical = WFSA("max-plus", alphabet="ab")
    tropical.add_states("p", "q")
    tropical.set_initial("p")
    tropical.set_final("q")
    tropical.add_arc("p", "q", ANY, mu)
    assert intersect(tropical, tropical).arcs[0].weight == 2 * mu


# ----------------------------------------------------------------------------------------
# reversal


@pytest.mark.parametrize("name", SEMIRING_NAMES)
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_reverse_scores_the_reversed_string(name: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(name))
    before = snapshot(a)
    r = reverse(a)
    assert snapshot(a) == before
    assert r.states == a.states
    s = a.semiring
    for x in [[], *data.draw(st.lists(strings, min_size=1, max_size=3))]:
        expected = brute_force_score(a, x[::-1], CAP)
        assert same(s, brute_force_score(r, x, CAP), expected)
        assert same(s, r.score(x, epsilon_cap=CAP), expected)


# ----------------------------------------------------------------------------------------
# epsilon removal


@pytest.mark.parametrize("name", SEMIRING_NAMES)
@pytest.mark.parametrize("cap", [0, 1, 2])
@FEW
@given(data=st.data())
@pytest.mark.slow
def test_remove_epsilon_with_a_cap_matches_capped_paths(name: str, cap: int, data: st.DataObject) -> None:
    a = data.draw(wfsas(name, max_arcs=8 if cap < 2 else 5))
    before = snapshot(a)
    plain = remove_epsilon(a, cap=cap)
    assert snapshot(a) == before
    assert not plain.has_epsilons
    assert plain.states == a.states
    s = a.semiring
    for x in [[], *data.draw(st.lists(strings, min_size=1, max_size=3))]:
        expected = brute_force_score(a, x, cap)
        assert same(s, brute_force_score(plain, x, 0), expected)
        assert same(s, a.score(x, epsilon_cap=cap), expected)


@pytest.mark.parametrize("name", IDEMPOTENT_NAMES)
@FEW
@given(data=st.data())
def test_remove_epsilon_exact_matches_simple_paths_idempotent(name: str, data: st.DataObject) -> None:
    """Every epsilon cycle weighs at most one here (see strategies): simple runs (< n epsilons) are exact."""
    a = data.draw(wfsas(name, max_states=3, max_arcs=5))
    plain = remove_epsilon(a)
    assert not plain.has_epsilons
    x = data.draw(strings)
    assert same(a.semiring, brute_force_score(plain, x, 0), brute_force_score(a, x, a.num_states - 1))


@pytest.mark.parametrize("name", ["real", "log"])
@FEW
@given(data=st.data())
def test_remove_epsilon_exact_preserves_scores_or_diverges(name: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(name))
    x = data.draw(strings)
    expected = exact_or_none(a, x)
    if expected is None:
        with pytest.raises(DivergenceError):
            remove_epsilon(a)
        return
    plain = remove_epsilon(a)
    assert not plain.has_epsilons
    assert same(a.semiring, brute_force_score(plain, x, 0), expected)


def test_remove_epsilon_geometric_series() -> None:
    """q0 -ε/0.5-> q0 and q0 -a/1-> q1: a(a) = sum_k 0.5^k = 2."""
    a = WFSA("real", alphabet="a")
    a.add_states("q0", "q1")
    a.set_initial("q0")
    a.set_final("q1")
    a.add_arc("q0", "q0", EPSILON, 0.5)
    a.add_arc("q0", "q1", "a", 1.0)
    plain = remove_epsilon(a)
    assert plain.initial == {0: pytest.approx(2.0)}
    assert plain.score(["a"]) == pytest.approx(2.0)
    a.add_arc("q0", "q0", EPSILON, 0.5)
    with pytest.raises(DivergenceError, match="q0 -> q0"):
        remove_epsilon(a)


def test_remove_epsilon_evaluates_symbolic_epsilon_weights_and_keeps_symbolic_arcs() -> None:
    (mu,) = weight_functions("mu")
    gamma = sympy.Symbol("gamma")
    a = WFSA("real", alphabet="ab")
    a.add_states("q0", "q1")
    a.set_initial("q0")
    a.set_final("q1")
    a.add_arc("q0", "q1", EPSILON, gamma)
    a.add_arc("q0", "q1", ANY, mu)
    a.add_arc("q1", "q1", ANY, mu)
    with pytest.raises(WeightError, match="gamma"):
        remove_epsilon(a)
    env = {"gamma": 0.25, "mu": {"a": 0.5, "b": 0.1}}
    plain = remove_epsilon(a, env={"gamma": 0.25})
    assert any(arc.weight == mu for arc in plain.arcs)
    for x in (["a"], ["a", "b"], []):
        assert plain.score(x, env=env) == pytest.approx(a.score(x, env=env))


# ----------------------------------------------------------------------------------------
# trimming


def useful_states(wfsa: WFSA) -> set[int]:
    """States on some successful path, by brute force over arcs (independent of trim)."""
    s = wfsa.semiring
    arcs = [arc for arc in wfsa.arcs if not s.is_zero(arc.weight)]

    def closure(starts: set[int], forward: bool) -> set[int]:
        seen = set(starts)
        changed = True
        while changed:
            changed = False
            for arc in arcs:
                src, dst = (arc.src, arc.dst) if forward else (arc.dst, arc.src)
                if src in seen and dst not in seen:
                    seen.add(dst)
                    changed = True
        return seen

    starts = {q for q, w in wfsa.initial.items() if not s.is_zero(w)}
    ends = {q for q, w in wfsa.final.items() if not s.is_zero(w)}
    return closure(starts, True) & closure(ends, False)


@pytest.mark.parametrize("name", SEMIRING_NAMES)
@FEW
@given(data=st.data())
def test_trim_preserves_scores_and_keeps_only_useful_states(name: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(name, max_states=5))
    before = snapshot(a)
    t = trim(a)
    assert snapshot(a) == before
    assert t.states == [a.state_name(q) for q in sorted(useful_states(a))]
    assert useful_states(t) == set(range(t.num_states))
    assert trim(t).states == t.states and len(trim(t).arcs) == len(t.arcs)
    s = a.semiring
    for x in [[], *data.draw(st.lists(strings, min_size=1, max_size=3))]:
        assert same(s, brute_force_score(t, x, CAP), brute_force_score(a, x, CAP))


def test_trim_drops_useless_states_and_dead_arcs() -> None:
    a = WFSA("real", alphabet="ab")
    a.add_states("start", "dead_end", "unreachable", "end")
    a.set_initial("start")
    a.set_final("end", 0.5)
    a.add_arc("start", "end", "a", 0.3)
    a.add_arc("start", "end", "b", 0.0)  # zero weight
    a.add_arc("start", "end", NoneOf("ab"), 0.7)  # no symbol of the alphabet
    a.add_arc("start", "dead_end", "a", 0.2)
    a.add_arc("unreachable", "end", "a", 0.2)
    t = trim(a)
    assert t.states == ["start", "end"]
    assert [(arc.src, arc.dst, str(arc.label), arc.weight) for arc in t.arcs] == [(0, 1, "a", 0.3)]
    assert t.initial == {0: 1.0} and t.final == {1: 0.5}


# ----------------------------------------------------------------------------------------
# OpenFst (pynini) as an independent implementation


pynini = pytest.importorskip("pynini", reason="pynini (OpenFst) is an optional dev dependency")
SYMBOL_IDS: dict[Hashable, int] = {symbol: i + 1 for i, symbol in enumerate(ALPHABET)}


def to_openfst(wfsa: WFSA) -> Any:
    """Our tropical (min-plus) or log automaton as an OpenFst acceptor (OpenFst's log weights are -log p)."""
    arc_type, weight_type = ("standard", "tropical") if wfsa.semiring is MIN_PLUS else ("log", "log")
    sign = 1.0 if wfsa.semiring is MIN_PLUS else -1.0
    fst = pynini.Fst(arc_type=arc_type)
    states = [fst.add_state() for _ in range(wfsa.num_states)]
    start = fst.add_state()  # OpenFst has one start state: fan out with epsilons carrying lambda
    fst.set_start(start)
    for q, w in wfsa.initial.items():
        fst.add_arc(start, pynini.Arc(0, 0, pynini.Weight(weight_type, sign * w), states[q]))
    for q, w in wfsa.final.items():
        fst.set_final(states[q], pynini.Weight(weight_type, sign * w))
    for arc in wfsa.arcs:
        ids = [0] if not arc.label.consumes else [SYMBOL_IDS[x] for x in arc.label.symbols(wfsa.alphabet)]
        weight = pynini.Weight(weight_type, sign * arc.weight)
        for i in ids:
            fst.add_arc(states[arc.src], pynini.Arc(i, i, weight, states[arc.dst]))
    return fst


def openfst_score(fst: Any, symbols: Sequence[Hashable], semiring: Semiring) -> float:
    line = pynini.Fst(arc_type=fst.arc_type())
    state = line.add_state()
    line.set_start(state)
    for x in symbols:
        nxt = line.add_state()
        line.add_arc(state, pynini.Arc(SYMBOL_IDS[x], SYMBOL_IDS[x], pynini.Weight.one(fst.weight_type()), nxt))
        state = nxt
    line.set_final(state)
    lattice = pynini.compose(line, fst.copy().arcsort("ilabel"))
    if lattice.start() == -1:
        return float(semiring.zero)
    value = float(pynini.shortestdistance(lattice, delta=1e-9, reverse=True)[lattice.start()])
    return value if semiring is MIN_PLUS else -value


OPENFST_OPS = {
    "union": (union, lambda x, y: pynini.union(x, y)),
    "concat": (concat, lambda x, y: pynini.concat(x, y)),
    "intersect": (intersect, lambda x, y: pynini.intersect(x.arcsort("olabel"), y)),
    "star": (lambda x, _: kleene_star(x), lambda x, _: pynini.closure(x)),
    "plus": (lambda x, _: kleene_plus(x), lambda x, _: pynini.closure(x, 1)),
    "reverse": (lambda x, _: reverse(x), lambda x, _: pynini.reverse(x)),
    "rmepsilon": (lambda x, _: remove_epsilon(x), lambda x, _: pynini.rmepsilon(x, delta=1e-9)),
}


@pytest.mark.parametrize("op", list(OPENFST_OPS))
@pytest.mark.parametrize("semiring", [MIN_PLUS, LOG])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
@pytest.mark.slow
def test_operations_agree_with_openfst(op: str, semiring: Semiring, data: st.DataObject) -> None:
    """Positive costs (min-plus) and probabilities below 0.45 (log) keep every closure convergent.
    OpenFst keeps weights in float32, hence the 1e-5 relative tolerance."""
    weights = st.floats(0.1, 3.0) if semiring is MIN_PLUS else st.floats(0.05, 0.45).map(math.log)

    @st.composite
    def acceptors(draw: st.DrawFn) -> WFSA:
        w = WFSA(semiring, alphabet=ALPHABET)
        n = draw(st.integers(1, 3))
        for _ in range(n):
            w.add_state()
        for q in draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=2)):
            w.set_initial(q, draw(weights))
        for q in draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=2)):
            w.set_final(q, draw(weights))
        labels = st.sampled_from([*ALPHABET, EPSILON, ANY, OneOf("ab"), NoneOf("a")])
        for _ in range(draw(st.integers(0, 5))):
            w.add_arc(draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)), draw(labels), draw(weights))
        return w

    a, b = data.draw(acceptors()), data.draw(acceptors())
    ours_op, theirs_op = OPENFST_OPS[op]
    ours = ours_op(a, b)
    theirs = theirs_op(to_openfst(a), to_openfst(b))
    for x in [[], *data.draw(st.lists(strings, min_size=1, max_size=3))]:
        reference = openfst_score(theirs, x, semiring)
        assert same(semiring, ours.score(x), reference, rel=1e-5)
        assert same(semiring, openfst_score(to_openfst(ours), x, semiring), reference, rel=1e-5)


@pytest.mark.parametrize("name", SEMIRING_NAMES)
def test_every_semiring_round_trips_through_every_operation(name: str) -> None:
    """A fixed small example: the identities union(a, ∅) = a, concat(ε, a) = a and a ∩ Σ* = a."""
    s = get_semiring(name)
    one, other = (True, True) if s is BOOLEAN else (s.one, {"real": 0.5, "log": -0.7}.get(name, 0.5))
    a = WFSA(s, alphabet="ab")
    a.add_states("p", "q")
    a.set_initial("p", one)
    a.set_final("q", other)
    a.add_arc("p", "q", "a", other)
    a.add_arc("q", "q", ANY, other)
    empty = WFSA(s, alphabet="ab")
    epsilon = WFSA(s, alphabet="ab")
    epsilon.set_initial(epsilon.add_state("e"))
    epsilon.set_final("e")
    everything = kleene_star(one_symbol_any(s))
    for x in (["a"], ["a", "b"], ["b"], []):
        expected = a.score(x)
        assert same(s, union(a, empty).score(x), expected)
        assert same(s, concat(epsilon, a).score(x), expected)
        assert same(s, intersect(a, everything).score(x), expected)


def one_symbol_any(s: Semiring) -> WFSA:
    w = WFSA(s, alphabet="ab")
    w.add_states("p", "q")
    w.set_initial("p")
    w.set_final("q")
    w.add_arc("p", "q", ANY)
    return w


def test_bind_evaluates_symbolic_weights_per_symbol() -> None:
    from kleene.automata import WeightError, bind
    from kleene.automata.examples import paper_automaton_b

    b = paper_automaton_b("real", alphabet=["x", "y"])
    env = {"mu": {"x": 0.3, "y": -0.5}, "phi": {"x": 0.7, "y": 2.0}}
    bound = bind(b, env)
    assert not bound.is_symbolic
    assert all(isinstance(arc.label, Sym) for arc in bound.arcs if arc.weight != 1)  # μ, φ arcs expanded per symbol
    for word in ["", "x", "xy", "yyx", "xyxy"]:
        assert bound.score(word) == pytest.approx(b.score(word, env), abs=1e-12)
    with pytest.raises(WeightError, match="arc"):
        bind(b, {"mu": {"x": 0.3, "y": 0.1}})  # phi missing: the message names the arc
