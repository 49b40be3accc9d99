"""Drawing: rendered to SVG with the real `dot`; the SVG's structure (shapes, pen widths, texts) is checked."""

from __future__ import annotations

import math
import re
import shutil
import xml.etree.ElementTree as ET

import pytest
import sympy
from hypothesis import HealthCheck, given, settings

from kleene.automata import ANY, EPSILON, WFSA, OneOf, WeightError, sigmoid, to_dot, weight_functions
from kleene.automata.draw import arc_label, format_state_name, format_weight
from kleene.automata.examples import paper_automaton_b, paper_automaton_c, paper_automaton_f

from .automata.strategies import wfsas

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot binary is not installed")
SVG = "{http://www.w3.org/2000/svg}"


def render(wfsa: WFSA, **kwargs: object) -> dict[str, ET.Element]:
    """The SVG groups of ``wfsa``'s drawing by their title (``s0``, ``s0->s1``, ...); edges may repeat a title."""
    root = ET.fromstring(to_dot(wfsa, **kwargs).pipe(format="svg"))
    groups: dict[str, ET.Element] = {}
    for group in root.iter(f"{SVG}g"):
        if group.get("class") in ("node", "edge"):
            title = group.find(f"{SVG}title")
            assert title is not None and title.text is not None
            key = re.sub(r":[a-z]+", "", title.text)  # "s0:n->s0:n" (a loop with ports) is "s0->s0"
            while key in groups:
                key += "'"
            groups[key] = group
    return groups


def texts(group: ET.Element) -> list[str]:
    return [t.text or "" for t in group.iter(f"{SVG}text")]


def all_texts(groups: dict[str, ET.Element]) -> list[str]:
    return [text for group in groups.values() for text in texts(group)]


def ellipses(group: ET.Element) -> list[ET.Element]:
    return list(group.iter(f"{SVG}ellipse"))


@needs_dot
def test_figure_1_automaton_b_renders_like_the_paper() -> None:
    groups = render(paper_automaton_b())
    q0, q1 = groups["s0"], groups["s1"]
    assert texts(q0) == ["q₀"] and texts(q1) == ["q₁"]
    assert len(ellipses(q0)) == 1 and ellipses(q0)[0].get("stroke-width") == "2.5"  # bold: initial
    assert len(ellipses(q1)) == 2 and ellipses(q1)[0].get("stroke-width") is None  # double circle: final
    assert texts(groups["s0->s0"]) == ["∀α / 1"]
    assert texts(groups["s0->s1"]) == ["α / μ(α)"]
    assert texts(groups["s1->s1"]) == ["∀α / φ(α)"]
    assert not any(key.startswith("start") for key in groups)  # initial weight one: no arrow


@needs_dot
def test_figure_2_and_4_automata_c_and_f() -> None:
    c = render(paper_automaton_c())
    assert len(ellipses(c["s1"])) == 1 and len(ellipses(c["s2"])) == 2
    assert sorted(all_texts(c)) == sorted(
        ["q₀", "q₁", "q₂", "∀α / 1", "α / μ₁(α)", "∀α / φ₁(α)", "α / μ₂(α)", "∀α / φ₂(α)"]
    )
    f = render(paper_automaton_f())
    assert texts(f["s1"]) == ["q₁/ρ₁"] and len(ellipses(f["s1"])) == 2
    assert texts(f["s2"]) == ["q₂/ρ₂"] and len(ellipses(f["s2"])) == 2
    assert texts(f["s3"]) == ["q₃"] and len(ellipses(f["s3"])) == 1
    assert texts(f["s0->s3"]) == ["ε / γ"]
    assert texts(f["s3->s2"]) == ["α / μ₂(α)"]


def test_dot_source_attributes() -> None:
    dot = to_dot(paper_automaton_b(), title="Figure 1")
    source = dot.source
    assert "rankdir=LR" in source and "fontname=Helvetica" in source and 'label="Figure 1"' in source
    loops = [line for line in source.splitlines() if "s0 -> s0" in line or "s1 -> s1" in line]
    assert len(loops) == 2 and all("headport=n" in line and "tailport=n" in line for line in loops)
    top_down = to_dot(paper_automaton_b(), rankdir="TB").source
    assert "rankdir=TB" in top_down and "headport=e" in top_down


@needs_dot
def test_initial_and_final_weights_other_than_one_are_shown() -> None:
    wfsa = WFSA("log", ["a", "b"])
    wfsa.add_states("start", "end")
    wfsa.set_initial("start", -0.5)
    wfsa.set_final("end", -1.23456)
    wfsa.add_arc("start", "end", "a", -2.0)
    wfsa.add_arc("end", "end", EPSILON, -math.inf)
    groups = render(wfsa)
    assert texts(groups["start0->s0"]) == ["-0.5"]
    assert groups["s0"].get("class") == "node" and texts(groups["s0"]) == ["start"]
    assert texts(groups["s1"]) == ["end/-1.23"]
    assert texts(groups["s0->s1"]) == ["a / -2"]
    assert texts(groups["s1->s1"]) == ["ε / -∞"]
    # the log semiring's one is 0: an initial weight 0 gets no arrow, a final weight 0 no "/"
    wfsa.set_initial("start", 0.0)
    wfsa.set_final("end", 0.0)
    groups = render(wfsa)
    assert "start0->s0" not in groups and texts(groups["s1"]) == ["end"]


@needs_dot
def test_show_weights_false_and_boolean_automata_show_labels_only() -> None:
    groups = render(paper_automaton_f(), show_weights=False)
    assert sorted(all_texts(groups)) == sorted(["q₀", "q₁", "q₂", "q₃", "∀α", "α", "∀α", "α", "∀α", "ε", "α"])
    boolean = WFSA("boolean", ["a", "b"])
    boolean.add_states("q0", "q1")
    boolean.set_initial("q0")
    boolean.set_final("q1")
    boolean.add_arc("q0", "q1", OneOf({"a", "b"}), True)
    assert sorted(all_texts(render(boolean))) == ["q₀", "q₁", "{a,b}"]


def test_symbolic_weights_print_on_one_line() -> None:
    (mu,) = weight_functions("mu")
    w, b = sympy.symbols("w b")
    assert format_weight(sigmoid(w * mu + b)) == "σ(b + w·μ(α))"
    assert format_weight(mu**2 * sympy.Float(0.123456)) == "0.123·μ(α)^2"
    assert format_weight(sympy.Symbol("rho1") * sympy.Symbol("gamma")) in ("γ·ρ₁", "ρ₁·γ")
    assert format_weight(mu, alpha="a*b") == "μ(a*b)"  # the symbol's own text is never rewritten
    assert format_weight(0.000123456) == "0.000123" and format_weight(1.0) == "1"
    assert format_weight(math.inf) == "∞" and format_weight(True) == "True"


def test_state_names_get_subscripts_only_when_letters_then_digits() -> None:
    assert [format_state_name(n) for n in ("q0", "q12", "start", "my_state", "0", "q0a")] == [
        "q₀",
        "q₁₂",
        "start",
        "my_state",
        "0",
        "q0a",
    ]


def test_environment_turns_determined_weights_into_numbers() -> None:
    (mu,) = weight_functions("mu")
    wfsa = WFSA("real", ["a", "b"])
    wfsa.add_states("q0", "q1")
    wfsa.set_initial("q0", sympy.Symbol("lam"))
    wfsa.set_final("q1", sympy.Symbol("rho"))
    wfsa.add_arc("q0", "q1", "a", mu)  # one symbol: mu(a) has a value
    wfsa.add_arc("q0", "q1", ANY, mu)  # any symbol: mu(alpha) has none
    wfsa.add_arc("q1", "q1", EPSILON, sympy.Symbol("gamma"))
    env = {"mu": {"a": 0.25, "b": 0.5}, "gamma": 0.125, "lam": 2.0, "rho": 0.75}
    assert [arc_label(wfsa, i) for i in range(3)] == ["a / μ(a)", "α / μ(α)", "ε / γ"]
    assert [arc_label(wfsa, i, env) for i in range(3)] == ["a / 0.25", "α / μ(α)", "ε / 0.125"]
    source = to_dot(wfsa, env=env).source
    assert 'label="q₁/0.75"' in source and "start0 -> s0 [label=2]" in source
    with pytest.raises(WeightError, match=r"arc 2.*gamma"):
        to_dot(wfsa, env={"mu": {"a": 0.25}, "lam": 2.0, "rho": 0.75})
    with pytest.raises(WeightError, match=r"final weight of q1.*rho"):
        to_dot(wfsa, env={"mu": {"a": 0.25}, "gamma": 0.125, "lam": 2.0})


@needs_dot
def test_symbols_with_graphviz_syntax_are_drawn_verbatim() -> None:
    wfsa = WFSA("real", ["<unk>", "a\\nb", 'say "hi"'])
    q = wfsa.add_state("<s>")
    wfsa.set_initial(q)
    wfsa.set_final(q)
    for symbol in ["<unk>", "a\\nb", 'say "hi"']:
        wfsa.add_arc(q, q, symbol, 0.5)
    assert sorted(all_texts(render(wfsa))) == sorted(["<s>", "<unk> / 0.5", "a\\nb / 0.5", 'say "hi" / 0.5'])


@needs_dot
def test_repr_svg_is_the_drawing() -> None:
    svg = paper_automaton_b()._repr_svg_()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "α / μ(α)" in svg


@needs_dot
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wfsas("real"))
def test_every_arc_and_state_is_drawn(wfsa: WFSA) -> None:
    groups = render(wfsa)
    nodes = [key for key, g in groups.items() if g.get("class") == "node" and not key.startswith("start")]
    edges = [g for key, g in groups.items() if g.get("class") == "edge" and not key.startswith("start")]
    assert len(nodes) == wfsa.num_states and len(edges) == len(wfsa.arcs)
    assert sorted(t for g in edges for t in texts(g)) == sorted(arc_label(wfsa, i) for i in range(len(wfsa.arcs)))
    for q in range(wfsa.num_states):
        assert len(ellipses(groups[f"s{q}"])) == (2 if q in wfsa.final else 1)
        bold = ellipses(groups[f"s{q}"])[0].get("stroke-width") == "2.5"
        assert bold == (q in wfsa.initial)
