"""JSON: exact document shape, lossless round trips (symbolic weights included), errors naming the path."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
import sympy
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kleene.automata import (
    ALPHA,
    ANY,
    EPSILON,
    WFSA,
    AlphabetError,
    FormatError,
    NoneOf,
    OneOf,
    WeightError,
    sigmoid,
    weight_functions,
)
from kleene.automata.jsonio import from_document, from_json, to_document, to_json
from kleene.automata.weights import expression_to_tree

from .strategies import ALPHABET, LABELS, strings, wfsas

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]

MU, BETA = weight_functions("mu", "beta")  # sympy has a beta function: the declaration must win
GAMMA, E_SYMBOL, W = sympy.symbols("gamma E w")  # sympy has gamma and E as well


def assert_same(a: WFSA, b: WFSA) -> None:
    assert b.semiring is a.semiring
    assert b.name == a.name
    assert b.states == a.states
    assert b.alphabet == a.alphabet
    assert (b.alphabet.epsilon if b.alphabet else None) == (a.alphabet.epsilon if a.alphabet else None)
    assert b.initial == a.initial
    assert b.final == a.final
    assert b.arcs == a.arcs
    for x, y in zip(a.arcs, b.arcs, strict=True):
        assert type(x.weight) is type(y.weight)


def small() -> WFSA:
    a = WFSA("log", ["a", "b", 3], name="small")
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q", -math.inf)
    a.add_arc("p", "q", "a", -0.5)
    a.add_arc("q", "q", EPSILON, -1.25)
    a.add_arc("q", "p", OneOf({3, "b"}), GAMMA * MU)
    a.add_arc("p", "p", NoneOf({"a"}))
    a.add_arc("p", "q", ANY, 2.0)
    return a


def test_document_shape() -> None:
    assert to_document(small()) == {
        "format": "kleene.wfsa",
        "version": 2,
        "name": "small",
        "semiring": "log",
        "alphabet": {"epsilon": "<eps>", "symbols": ["a", "b", 3]},
        "states": ["p", "q"],
        "initial": {"p": 0.0},
        "final": {"q": "-inf"},
        "weight_names": {"functions": ["mu"], "symbols": ["gamma"]},
        "arcs": [
            {"src": "p", "dst": "q", "label": {"kind": "symbol", "symbol": "a"}, "weight": -0.5},
            {"src": "q", "dst": "q", "label": {"kind": "epsilon"}, "weight": -1.25},
            {
                "src": "q",
                "dst": "p",
                "label": {"kind": "one-of", "symbols": [3, "b"]},
                "weight": {"expression": expression_to_tree(sympy.Symbol("gamma") * sympy.Function("mu")(ALPHA))},
            },
            {"src": "p", "dst": "p", "label": {"kind": "none-of", "symbols": ["a"]}, "weight": 0.0},
            {"src": "p", "dst": "q", "label": {"kind": "any"}, "weight": 2.0},
        ],
    }
    json.loads(to_json(small()))  # strict JSON: no Infinity/NaN literals


def test_version_1_documents_with_expression_text_still_read() -> None:
    """Version 1 wrote symbolic weights as text; version 2 writes the exact tree certificates use."""
    doc = to_document(small())
    doc["version"] = 1
    doc["arcs"][2]["weight"] = "gamma*mu(alpha)"
    a = from_document(doc)
    assert a.arcs[2].weight == sympy.Symbol("gamma") * sympy.Function("mu")(ALPHA)
    assert from_document(to_document(a)).arcs[2].weight == a.arcs[2].weight


def test_round_trip_of_a_small_automaton() -> None:
    a = small()
    assert_same(a, from_json(to_json(a)))
    assert_same(a, from_json(a.to_json()))


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_round_trip_keeps_everything(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring))
    b = from_json(to_json(a, indent=data.draw(st.sampled_from([None, 2]))))
    assert_same(a, b)
    for word in [data.draw(strings) for _ in range(3)]:
        assert b.score(word) == a.score(word)


def float_leaves() -> st.SearchStrategy[sympy.Expr]:
    return st.floats(-3.0, 3.0, allow_nan=False).map(lambda x: sympy.Float(x))


def expressions(leaves: st.SearchStrategy[sympy.Expr]) -> st.SearchStrategy[sympy.Expr]:
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
            st.tuples(inner, inner).map(lambda t: t[0] * t[1]),
            st.tuples(inner, inner).map(lambda t: t[0] / (1 + t[1] ** 2)),
            st.tuples(inner, inner).map(lambda t: sympy.Max(t[0], t[1])),
            inner.map(sympy.exp),
            inner.map(sigmoid),
            inner.map(lambda e: sympy.log(1 + sympy.exp(e))),
            inner.map(lambda e: e**2),
        ),
        max_leaves=6,
    )


SYMBOL_FREE = expressions(st.one_of(float_leaves(), st.sampled_from([GAMMA, E_SYMBOL, W])))
SYMBOLIC = expressions(st.one_of(float_leaves(), st.sampled_from([MU, BETA, GAMMA, E_SYMBOL, W, sympy.pi])))


@st.composite
def symbolic_wfsas(draw: st.DrawFn) -> WFSA:
    a = WFSA("real", ALPHABET)
    n = draw(st.integers(1, 3))
    a.add_states(*(f"s{i}" for i in range(n)))
    states = st.integers(0, n - 1)
    try:  # a float-only expression may overflow to inf, which no real weight is
        a.set_initial(draw(states), draw(SYMBOL_FREE))
        a.set_final(draw(states), draw(SYMBOL_FREE))
        for _ in range(draw(st.integers(1, 4))):
            label = draw(LABELS)
            a.add_arc(draw(states), draw(states), label, draw(SYMBOL_FREE if label is EPSILON else SYMBOLIC))
    except WeightError:
        assume(False)
    return a


def same_expression(x: object, y: object) -> bool:
    """Equal as expressions: sympy re-canonicalises some printed forms on reading (``-(a + 1)*b`` becomes
    ``(-a - 1)*b``), so identical structure is not guaranteed, equal value is."""
    if x == y:
        return True
    if not (isinstance(x, sympy.Basic) and isinstance(y, sympy.Basic)):
        return False
    return sympy.expand(x - y) == 0 or sympy.simplify(x - y) == 0


@settings(max_examples=60, deadline=None)
@given(a=symbolic_wfsas())
@pytest.mark.slow
def test_round_trip_of_symbolic_weights(a: WFSA) -> None:
    b = from_json(to_json(a))  # equal expressions: beta, gamma and E kept their declared meaning
    assert b.states == a.states and b.alphabet == a.alphabet
    for weights_a, weights_b in ((a.initial, b.initial), (a.final, b.final)):
        assert weights_a.keys() == weights_b.keys()
        assert all(same_expression(weights_a[q], weights_b[q]) for q in weights_a)
    assert [(x.src, x.dst, x.label) for x in a.arcs] == [(y.src, y.dst, y.label) for y in b.arcs]
    assert all(same_expression(x.weight, y.weight) for x, y in zip(a.arcs, b.arcs, strict=True))


def test_symbolic_scores_survive_the_round_trip() -> None:
    a = WFSA("real", ["a", "b"])
    a.add_states("p", "q")
    a.set_initial("p", GAMMA)
    a.set_final("q", sympy.Float(0.1) * E_SYMBOL)
    a.add_arc("p", "q", ANY, sigmoid(W * BETA + sympy.Float(1 / 3)))
    a.add_arc("q", "q", "b", MU)
    env: dict[str, Any] = {"mu": {"a": 0.5, "b": 0.25}, "beta": {"a": -1.0, "b": 2.0}, "gamma": 0.7, "E": 3.0, "w": 0.3}
    b = from_json(to_json(a))
    for word in (["a"], ["b", "b"], ["a", "b", "b"]):
        assert b.score(word, env) == a.score(word, env)


# -- errors -------------------------------------------------------------------------------------


def document(**changes: Any) -> dict[str, Any]:
    doc = to_document(small())
    doc.update(changes)
    return doc


def arcs_with(index: int, **changes: Any) -> list[dict[str, Any]]:
    arcs = to_document(small())["arcs"]
    arcs[index] = {**arcs[index], **changes}
    return [{k: v for k, v in arc.items() if v is not None} for arc in arcs]


@pytest.mark.parametrize(
    ("doc", "error", "message"),
    [
        ("not json", FormatError, r"line 1, column 1: not JSON"),
        ("[1, 2]", FormatError, r"\(document\): expected a JSON object"),
        ('{"format": "kleene.wfsa", "version": 1, "version": 1}', FormatError, "duplicate key 'version'"),
        ('{"x": NaN}', FormatError, "NaN is not JSON"),
        (document(format="openfst"), FormatError, "format: expected 'kleene.wfsa', got \"openfst\""),
        (document(version=3), FormatError, "version: this kleene reads versions 1 and 2, got 3"),
        (document(version=True), FormatError, "version: this kleene reads versions 1 and 2, got true"),
        ({k: v for k, v in document().items() if k != "version"}, FormatError, "^version: missing"),
        (document(colour="red"), FormatError, "^colour: unknown key"),
        (document(semiring="complex"), FormatError, "semiring: unknown semiring 'complex'"),
        (document(semiring=3), FormatError, "semiring: expected a semiring name, got 3"),
        (document(name=7), FormatError, "name: expected a string or null"),
        (document(states="p q"), FormatError, "states: expected a list of state names"),
        (document(states=["p", "p"]), FormatError, r"states\[1\]: duplicate state name 'p'"),
        (document(states=["p", 1]), FormatError, r"states\[1\]: expected a state name, got 1"),
        (document(alphabet=["a"]), FormatError, "alphabet: expected an object or null"),
        (document(alphabet={"symbols": ["a", "a"]}), FormatError, r"alphabet.symbols\[1\]: duplicate symbol 'a'"),
        (document(alphabet={"symbols": [1.5]}), FormatError, r"alphabet.symbols\[0\]: expected a symbol"),
        (document(alphabet={"symbols": ["<eps>"]}), FormatError, r"alphabet.symbols\[0\]: '<eps>' is the epsilon"),
        (document(initial={"r": 0.0}), FormatError, "initial.r: unknown state 'r'"),
        (document(final=[]), FormatError, "final: expected an object of state: weight"),
        (document(arcs={}), FormatError, "arcs: expected a list of arcs"),
        (document(arcs=[3]), FormatError, r"arcs\[0\]: expected an arc object"),
        (document(arcs=arcs_with(3, dst="r")), FormatError, r"arcs\[3\].dst: unknown state 'r'"),
        (document(arcs=arcs_with(1, src=None)), FormatError, r"arcs\[1\].src: missing"),
        (document(arcs=arcs_with(1, cost=1)), FormatError, r"arcs\[1\].cost: unknown key"),
        (document(arcs=arcs_with(0, label="a")), FormatError, r"arcs\[0\].label: expected a label object"),
        (document(arcs=arcs_with(0, label={"kind": "sym"})), FormatError, r"arcs\[0\].label.kind: unknown label kind"),
        (document(arcs=arcs_with(0, label={"kind": "symbol"})), FormatError, r"arcs\[0\].label.symbol: missing"),
        (
            document(arcs=arcs_with(0, label={"kind": "epsilon", "symbol": "a"})),
            FormatError,
            r"arcs\[0\].label.symbol: unknown key",
        ),
        (
            document(arcs=arcs_with(0, label={"kind": "one-of", "symbols": [True]})),
            FormatError,
            r"arcs\[0\].label.symbols\[0\]: expected a symbol",
        ),
        (
            document(arcs=arcs_with(0, label={"kind": "symbol", "symbol": "z"})),
            AlphabetError,
            r"arcs\[0\].label: arc 0 \(p -z-> q\): symbol 'z' is not in the alphabet",
        ),
        (document(arcs=arcs_with(0, weight=True)), WeightError, r"arcs\[0\].weight: true is not a weight of the log"),
        (
            document(arcs=arcs_with(0, weight="inf")),
            WeightError,
            r"arcs\[0\].weight: .*inf is not an element of the log",
        ),
        (document(arcs=arcs_with(0, weight=[1])), FormatError, r"arcs\[0\].weight: expected a number, 'inf'"),
        (document(arcs=arcs_with(0, weight=10**400)), WeightError, r"arcs\[0\].weight: .* is too large"),
        (document(initial={"p": "mu(alpha)"}), WeightError, r"initial.p: .*depends on the consumed symbol"),
        (document(weight_names={"functions": ["mu"], "symbols": ["mu"]}), FormatError, "'mu' is declared twice"),
        (document(weight_names={"functions": ["__class__"]}), FormatError, r"functions\[0\]: \"__class__\" is not"),
        (document(weight_names={"constants": []}), FormatError, "weight_names.constants: unknown key"),
    ],
)
def test_invalid_documents_name_the_path(doc: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        from_json(doc if isinstance(doc, str) else json.dumps(doc))


@pytest.mark.parametrize(
    ("weight", "offender"),
    [
        ("__import__('os').getcwd()", "__import__"),
        ("open(1)", "open"),
        ("alpha.func", "."),
        ("mu(alpha)[0]", "["),
        ("sympify(1)", "sympify"),
        ("(lambda: 1)()", "lambda"),
        ("exp(alpha) if 1 else 0", "if"),
        ("Symbol('x')", "'x'"),
    ],
)
def test_expression_strings_never_reach_eval_with_code(weight: str, offender: str) -> None:
    doc = document(arcs=arcs_with(2, weight=weight))
    with pytest.raises(FormatError, match=rf"arcs\[2\].weight: weight .*: {re.escape(repr(offender))} is not allowed"):
        from_document(doc)


def test_undeclared_names_read_as_sympy_reads_them() -> None:
    doc = document(weight_names=None, arcs=arcs_with(2, weight="exp(nu(alpha)) + rho"))
    b = from_document({k: v for k, v in doc.items() if v is not None})
    nu = sympy.Function("nu")(sympy.Symbol("alpha"))
    assert b.arcs[2].weight == sympy.exp(nu) + sympy.Symbol("rho")


def test_writing_refuses_what_json_cannot_hold() -> None:
    a = WFSA("real", [("tuple", "symbol")])
    with pytest.raises(AlphabetError, match=r"alphabet: symbol \('tuple', 'symbol'\) is not a JSON string or integer"):
        to_json(a)
    b = WFSA("real")
    b.add_state("p")
    b.add_arc("p", "p", "a", sympy.Function("gamma")(sympy.Symbol("alpha")) * GAMMA)
    with pytest.raises(FormatError, match=r"\['gamma'\] name both weight functions and symbols"):
        to_json(b)


@pytest.mark.parametrize(
    "value",
    [
        sympy.Float(0.1),
        sympy.Float(1 / 3),
        sympy.Float(5e-324),  # subnormal
        sympy.Float(1e-300) ** 2,  # below the double range: sympy Floats allow it
        sympy.Float(1e300) * 1e300,  # above it
    ],
)
def test_floats_inside_expressions_are_exact(value: sympy.Float) -> None:
    a = WFSA("real")
    a.add_state("p")
    a.add_arc("p", "p", "a", value * MU)
    assert from_json(to_json(a)).arcs[0].weight == value * MU
