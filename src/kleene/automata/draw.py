"""Drawing a WFSA as a graphviz diagram in the style of the papers' figures.

Initial states are bold circles, final states double circles; arcs read ``label / weight``. A symbolic weight is
printed on one line with sympy's unicode names (``mu1(alpha)`` as ``μ₁(α)``). An arc accepting any symbol is drawn
``∀α`` when it is a self-loop and ``α`` otherwise, the convention of the rational-recurrences figures, where the
``α`` of a main arc is the symbol its weight function reads.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import sympy
from sympy.printing.pretty.pretty_symbology import pretty_symbol
from sympy.printing.str import StrPrinter

from kleene.automata.labels import AnySymbol, Sym
from kleene.automata.weights import ALPHA, Env, Weight, is_symbolic, sigmoid
from kleene.automata.wfsa import WFSA, Arc

if TYPE_CHECKING:  # pragma: no cover  (graphviz is imported by to_dot: kleene.automata loads without it)
    import graphviz

#: Stands for the consumed symbol while a weight is printed, so that symbol text is never rewritten.
_ALPHA_MARK = "\x00"


class _OneLinePrinter(StrPrinter):  # type: ignore[misc]
    """sympy's string printer with unicode names (``φ₁``) and compact floats."""

    def __init__(self, precision: int):
        super().__init__()
        self.precision = precision

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return _ALPHA_MARK if expr == ALPHA else str(pretty_symbol(expr.name))

    def _print_Function(self, expr: sympy.Expr) -> str:
        args = ", ".join(self._print(a) for a in expr.args)
        name = "σ" if expr.func is sigmoid else pretty_symbol(expr.func.__name__)
        return f"{name}({args})"

    def _print_Float(self, expr: sympy.Float) -> str:
        return format_number(float(expr), self.precision)


def format_number(value: float, precision: int = 3) -> str:
    """A constant in ``%.{precision}g`` form, with ``∞``/``-∞`` for the infinities."""
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:.{precision}g}"


def format_weight(weight: Weight, alpha: str = "α", precision: int = 3) -> str:
    """A weight as one line of text (``·`` for products, ``^`` for powers); ``alpha`` stands for the symbol."""
    if isinstance(weight, bool):
        return str(weight)
    if not is_symbolic(weight):
        return format_number(float(weight), precision)
    text = str(_OneLinePrinter(precision).doprint(weight))
    return text.replace("**", "^").replace("*", "·").replace(_ALPHA_MARK, alpha)


def format_state_name(name: str) -> str:
    """``q0`` as ``q₀``: letters followed by digits get subscript digits; other names are kept as they are."""
    if re.fullmatch(r"[A-Za-z]+\d+", name):
        return str(pretty_symbol(name))
    return name


def arc_label(wfsa: WFSA, index: int, env: Env | None = None, show_weights: bool = True, precision: int = 3) -> str:
    """The text drawn on arc ``index`` of ``wfsa``: ``label / weight``, or the label alone.

    With ``env``, weights whose value the arc determines are shown as numbers: weights that do not read the
    consumed symbol, and weights on an arc consuming one given symbol. A weight function on a predicate arc
    (``∀α / φ(α)``) has no single value and stays symbolic. Boolean arcs show their label alone.

    Raises:
        WeightError: ``env`` lacks a value that a weight needs, or the value is outside the semiring.
    """
    arc = wfsa.arcs[index]
    label = _label_text(arc)
    if not show_weights or wfsa.semiring.weightless:
        return label
    if isinstance(arc.label, Sym):
        weight = _evaluated(wfsa, arc.weight, env, arc.label.symbol, f"arc {index}")
        return f"{label} / {format_weight(weight, str(arc.label.symbol), precision)}"
    weight = arc.weight if _reads_symbol(arc.weight) else _evaluated(wfsa, arc.weight, env, None, f"arc {index}")
    return f"{label} / {format_weight(weight, 'α', precision)}"


def _label_text(arc: Arc) -> str:
    if isinstance(arc.label, AnySymbol):
        return "∀α" if arc.src == arc.dst else "α"
    return str(arc.label)


def _reads_symbol(weight: Weight) -> bool:
    return is_symbolic(weight) and ALPHA in weight.free_symbols  # type: ignore[union-attr]


def _evaluated(wfsa: WFSA, weight: Weight, env: Env | None, symbol: Hashable | None, where: str) -> Any:
    """``weight``'s value under ``env`` (``weight`` itself when there is no environment)."""
    return weight if env is None else wfsa.numeric(weight, symbol, env, where)


def state_weight_label(
    wfsa: WFSA, weight: Weight, env: Env | None = None, where: str = "weight", precision: int = 3
) -> str | None:
    """The text of an initial or final weight, or ``None`` when it need not be shown: one, or any boolean weight.

    Raises:
        WeightError: ``env`` is given and lacks a value that the weight needs (the message starts with ``where``).
    """
    if wfsa.semiring.weightless or (not is_symbolic(weight) and weight == wfsa.semiring.one):
        return None
    return format_weight(_evaluated(wfsa, weight, env, None, where), precision=precision)


def to_dot(
    wfsa: WFSA,
    env: Env | None = None,
    rankdir: str = "LR",
    show_weights: bool = True,
    fontname: str = "Helvetica",
    precision: int = 3,
    title: str | None = None,
) -> graphviz.Digraph:
    """A ``graphviz.Digraph`` of ``wfsa``; render it with ``.pipe(format="svg")`` or ``.render(...)``.

    Node ``s{i}`` is state ``i``, labelled with its name (``q0`` drawn ``q₀``) and, for a final state whose weight
    is not one, ``/ ρ`` (``q₁/ρ₁``). An initial weight that is not one labels an arrow from an invisible node
    ``start{i}``. ``env`` shows weights as numbers where it can (see ``arc_label``); ``title`` is a caption.

    Raises:
        WeightError: ``env`` is given and lacks a value that a weight needs.
    """
    import graphviz

    font = {"fontname": fontname}
    dot = graphviz.Digraph(name=wfsa.name or "wfsa")
    dot.attr(rankdir=rankdir, nodesep="0.5", ranksep="0.6", pad="0.2", **font)
    if title:
        dot.attr(label=graphviz.escape(title), labelloc="b", fontsize="14")
    dot.attr("node", shape="circle", fontsize="14", margin="0.04", **font)
    dot.attr("edge", fontsize="12", arrowsize="0.7", **font)

    for index, name in enumerate(wfsa.states):
        text = format_state_name(name)
        attrs: dict[str, str] = {}
        if index in wfsa.final:
            attrs["shape"] = "doublecircle"
            rho = state_weight_label(wfsa, wfsa.final[index], env, f"final weight of {name}", precision)
            if show_weights and rho is not None:
                text = f"{text}/{rho}"
        if index in wfsa.initial:
            attrs["penwidth"] = "2.5"
        dot.node(f"s{index}", graphviz.escape(text), **attrs)

    for index, weight in wfsa.initial.items():
        lam = state_weight_label(wfsa, weight, env, f"initial weight of {wfsa.state_name(index)}", precision)
        if show_weights and lam is not None:
            dot.node(f"start{index}", "", shape="none", width="0", height="0")
            dot.edge(f"start{index}", f"s{index}", graphviz.escape(lam))

    # self-loops go across the flow (above the state for left-to-right, as in the papers' figures)
    loop_side = "n" if rankdir in ("LR", "RL") else "e"
    for index, arc in enumerate(wfsa.arcs):
        text = graphviz.escape(arc_label(wfsa, index, env, show_weights, precision))
        if arc.src == arc.dst:
            dot.edge(f"s{arc.src}", f"s{arc.dst}", text, tailport=loop_side, headport=loop_side)
        else:
            dot.edge(f"s{arc.src}", f"s{arc.dst}", text)
    return dot
