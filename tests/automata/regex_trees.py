"""Random regular-expression trees for tests: a hypothesis strategy, the tests' own printer, a direct evaluation
of the series by its definition, and the same tree built with pynini's operations."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

from hypothesis import strategies as st

from kleene.automata import get_semiring

SIGMA = ("a", "b", "*")  # '*' is special: the printer escapes it
EIGHTHS = st.integers(0, 24).map(lambda k: k / 8)  # nonnegative tropical costs that float32 holds exactly

Node = tuple[Any, ...]


@cache
def tree_weights(semiring: str) -> st.SearchStrategy[Any]:
    """Weights that keep the test's stars mostly convergent (divergence is tested too)."""
    if semiring == "real":
        return st.floats(-0.9, 0.9).map(lambda x: round(x, 3))
    if semiring == "log":
        return st.floats(-3.0, 0.5).map(lambda x: round(x, 3))
    if semiring in ("max-plus", "min-plus"):
        return st.integers(-16, 16).map(lambda k: k / 8)
    if semiring == "max-times":
        return st.integers(0, 16).map(lambda k: k / 8)
    return st.booleans()


@cache
def trees(semiring: str, weights: st.SearchStrategy[Any] | None = None, max_leaves: int = 6) -> st.SearchStrategy[Node]:
    """Expression trees over SIGMA with weights from ``weights`` (default ``tree_weights(semiring)``); one strategy
    object per arguments (hypothesis validates a recursive strategy in milliseconds, once per object)."""
    members = st.sets(st.sampled_from(SIGMA), min_size=1, max_size=2).map(lambda s: tuple(sorted(s)))
    leaves = st.one_of(
        st.sampled_from(SIGMA).map(lambda x: ("sym", x)),
        st.just(("any",)),
        st.just(("eps",)),
        members.map(lambda m: ("set", m)),
        members.map(lambda m: ("notset", m)),
    )

    def extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        return st.one_of(
            st.tuples(st.just("alt"), children, children),
            st.tuples(st.just("seq"), children, children),
            st.tuples(st.sampled_from(["star", "plus", "opt"]), children),
            st.tuples(st.just("w"), children, tree_weights(semiring) if weights is None else weights),
            st.tuples(st.just("rep"), children, st.integers(0, 2), st.integers(0, 2) | st.none()),
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves)


def show(node: Node) -> str:
    """The test's own printer: every compound fully parenthesised, special symbols escaped."""
    kind = node[0]

    def sym(x: str) -> str:
        return "\\" + x if x == "*" else x

    if kind == "sym":
        return sym(node[1])
    if kind == "any":
        return "."
    if kind == "eps":
        return "()"
    if kind in ("set", "notset"):
        return ("[" if kind == "set" else "[^") + " ".join(map(sym, node[1])) + "]"
    if kind == "alt":
        return f"({show(node[1])} | {show(node[2])})"
    if kind == "seq":
        return f"({show(node[1])} {show(node[2])})"
    if kind in ("star", "plus", "opt"):
        return f"({show(node[1])})" + {"star": "*", "plus": "+", "opt": "?"}[kind]
    if kind == "w":
        w = node[2]
        return f"({show(node[1])})<{str(w).lower() if isinstance(w, bool) else repr(w)}>"
    low, high = node[2], node[3]
    high = low if high is not None and high < low else high
    return f"({show(node[1])}){{{low},{'' if high is None else high}}}"


def evaluator(semiring: str, tree: Node) -> Callable[[tuple[str, ...]], Any]:
    """The series of ``tree`` by its definition (sums over factorizations), memoised on (node, string)."""
    s = get_semiring(semiring)

    def total(values: list[Any]) -> Any:
        out = s.zero
        for v in values:
            out = s.plus(out, v)
        return out

    @cache
    def value(node: Node, w: tuple[str, ...]) -> Any:
        kind = node[0]
        if kind == "sym":
            return s.one if w == (node[1],) else s.zero
        if kind == "any":
            return s.one if len(w) == 1 else s.zero
        if kind == "eps":
            return s.one if not w else s.zero
        if kind in ("set", "notset"):
            inside = len(w) == 1 and w[0] in node[1]
            return s.one if len(w) == 1 and inside == (kind == "set") else s.zero
        if kind == "alt":
            return s.plus(value(node[1], w), value(node[2], w))
        if kind == "seq":
            return concat(node[1], node[2], w)
        if kind == "star":  # S(ε) = n*, S(w) = ⊕_{w = uv, u ≠ ε} n* x(u) S(v)
            closure = s.star(value(node[1], ()))
            if not w:
                return closure
            splits = range(1, len(w) + 1)
            return total([s.times(s.times(closure, value(node[1], w[:i])), value(node, w[i:])) for i in splits])
        if kind == "plus":  # x+ = x x*
            return concat(node[1], ("star", node[1]), w)
        if kind == "opt":
            return s.plus(value(node[1], w), s.one if not w else s.zero)
        if kind == "w":
            return s.times(value(node[1], w), node[2])
        low, high = node[2], node[3]
        high = low if high is not None and high < low else high
        if high is None:  # x{m,} = x^m x*
            return power(node[1], low, ("star", node[1]), w)
        return total([power(node[1], k, ("eps",), w) for k in range(low, high + 1)])

    def concat(x: Node, y: Node, w: tuple[str, ...]) -> Any:
        return total([s.times(value(x, w[:i]), value(y, w[i:])) for i in range(len(w) + 1)])

    def power(x: Node, k: int, tail: Node, w: tuple[str, ...]) -> Any:
        node = tail
        for _ in range(k):
            node = ("seq", x, node)
        return value(node, w)

    return lambda w: value(tree, w)


def same(semiring: str, x: Any, y: Any) -> bool:
    """Scores equal up to rounding: a few dozen products and sums of weights below 2 in magnitude, so an absolute
    error of 1e-9 is generous; infinities (the zero of log and the tropical semirings) must match exactly."""
    if semiring == "boolean":
        return bool(x) == bool(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)




def to_pynini(node: Node) -> Any:
    """The tree built with pynini's own operations (byte strings, tropical weights): the OpenFst oracle."""
    import pynini

    kind = node[0]
    if kind == "sym":
        return pynini.accep(node[1])
    if kind == "eps":
        return pynini.accep("")
    if kind in ("any", "set", "notset"):
        members = SIGMA if kind == "any" else node[1] if kind == "set" else [x for x in SIGMA if x not in node[1]]
        return pynini.union(*(pynini.accep(x) for x in members))
    if kind == "alt":
        return pynini.union(to_pynini(node[1]), to_pynini(node[2]))
    if kind == "seq":
        return to_pynini(node[1]) + to_pynini(node[2])
    if kind == "star":
        return pynini.closure(to_pynini(node[1]))
    if kind == "plus":
        return pynini.closure(to_pynini(node[1]), 1)
    if kind == "opt":
        return pynini.closure(to_pynini(node[1]), 0, 1)
    if kind == "w":
        return to_pynini(node[1]) + pynini.accep("", weight=node[2])
    low, high = node[2], node[3]
    high = low if high is not None and high < low else high
    if high == 0:  # pynini reads an upper bound of 0 as unbounded
        return pynini.accep("")
    return pynini.closure(to_pynini(node[1]), low) if high is None else pynini.closure(to_pynini(node[1]), low, high)


def pynini_score(machine: Any, word: tuple[str, ...]) -> float:
    """OpenFst's tropical score of ``word`` (its shortest distance after composing with the word); inf if none."""
    import pynini

    composed = pynini.accep("".join(word)) @ machine
    if composed.start() == pynini.NO_STATE_ID:
        return math.inf
    distances = pynini.shortestdistance(composed, reverse=True)
    return float(distances[composed.start()]) if composed.start() < len(distances) else math.inf
