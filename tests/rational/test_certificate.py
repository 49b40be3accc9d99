"""Certificates: check() re-verifies from stored data, mutations fail, JSON round trips, rendering, drawing."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import sympy
from sympy.core.function import AppliedUndef

from kleene.automata import FormatError
from kleene.automata.weights import expression_from_tree, expression_to_tree
from kleene.rational import Certificate, prove, zoo
from kleene.rational.certificate import AutomatonProof
from kleene.rational.recurrence import input_symbol

ZOO_PROVED = [n for n in zoo.ZOO if n not in zoo.REFUSED]


def certificate(name: str) -> Certificate:
    cert = prove(zoo.ZOO[name]())
    assert isinstance(cert, Certificate) and cert.checked, name
    return cert


def _other_function(cert: Certificate, proof: AutomatonProof, name: str) -> sympy.Expr:
    """A different input-dependent expression for the mutation: another input, or a scaled copy."""
    rec = cert.recurrence
    current = proof.parameterisation[name]
    for f in rec.input_functions:
        if f.lags == 0 and f.call != current:
            return f.call
    return rec.ring.sym_times(current, current)


@pytest.mark.parametrize("name", ZOO_PROVED)
def test_changing_one_weight_function_makes_check_fail(name: str) -> None:
    cert = certificate(name)
    proof = cert.automata[0]
    target = sorted(proof.parameterisation)[0]
    mutated = dict(proof.parameterisation)
    mutated[target] = _other_function(cert, proof, target)
    bad = Certificate(cert.recurrence, [dataclasses.replace(proof, parameterisation=mutated), *cert.automata[1:]])
    assert not bad.check()
    assert bad.failure and ("identity fails" in bad.failure)


@pytest.mark.parametrize("name", ["example-6", "rrnn-f", "rrnn-b-maxplus", "qrnn", "sopa"])
def test_changing_one_arc_weight_makes_check_fail(name: str) -> None:
    cert = certificate(name)
    proof = cert.automata[0]
    w = proof.wfsa.copy()
    i = next(i for i, a in enumerate(w.arcs) if isinstance(a.weight, sympy.Basic) and a.weight.atoms(AppliedUndef))
    other = next(
        a.weight
        for a in w.arcs
        if isinstance(a.weight, sympy.Basic) and a.weight != w.arcs[i].weight and a.weight.atoms(AppliedUndef)
    )
    w.arcs[i] = dataclasses.replace(w.arcs[i], weight=other)
    bad = Certificate(cert.recurrence, [dataclasses.replace(proof, wfsa=w)])
    assert not bad.check()


def test_dropping_an_arc_or_changing_an_initial_weight_fails() -> None:
    cert = certificate("rrnn-f")
    proof = cert.automata[0]
    w = proof.wfsa.copy()
    w.arcs = [a for a in w.arcs if a.label.consumes]  # drop the epsilon arc
    assert not Certificate(cert.recurrence, [dataclasses.replace(proof, wfsa=w)]).check()
    w2 = proof.wfsa.copy()
    w2.initial = dict.fromkeys(w2.initial, 2.0)
    bad = Certificate(cert.recurrence, [dataclasses.replace(proof, wfsa=w2)])
    assert not bad.check() and "base identity fails" in (bad.failure or "")


def test_a_parameterisation_reading_the_state_is_rejected() -> None:
    """A weight function may not smuggle the state in: that would make any identity 'true'."""
    cert = certificate("example-6")
    proof = cert.automata[0]
    mutated = {**proof.parameterisation, "phi_c": sympy.Symbol("c_{t-1}") * input_symbol(0)}
    bad = Certificate(cert.recurrence, [dataclasses.replace(proof, parameterisation=mutated)])
    assert not bad.check() and "non-input symbols" in (bad.failure or "")


def test_missing_parameterisation_is_reported() -> None:
    cert = certificate("example-6")
    proof = cert.automata[0]
    bad = Certificate(cert.recurrence, [dataclasses.replace(proof, parameterisation={})])
    assert not bad.check() and "has no parameterisation" in (bad.failure or "")


def test_changing_the_recurrence_makes_check_fail() -> None:
    cert = certificate("rrnn-c")
    other = zoo.rrnn_c()
    c2 = other.component_of("c2")
    c2.update = c2.update + 1
    assert not Certificate(other, cert.automata).check()


@pytest.mark.parametrize("name", ["example-6", "rrnn-f", "rrnn-b-maxplus", "isan", "qrnn", "sopa", "cnn", "t-lstm"])
def test_json_round_trip_rechecks(name: str) -> None:
    cert = certificate(name)
    text = cert.to_json()
    doc = json.loads(text)
    assert doc["rational"] is True and doc["checked"] is True and doc["semiring"] == cert.semiring.name
    back = Certificate.from_json(text)
    assert back.checked is None
    assert back.check(), back.failure
    assert [p.wfsa.num_states for p in back.automata] == [p.wfsa.num_states for p in cert.automata]
    assert back.cross_check(trials=1, strings=4, seed=9)


def test_tampered_json_fails_check_or_reading() -> None:
    cert = certificate("example-6")
    doc = json.loads(cert.to_json())
    doc["proofs"][0]["parameterisation"]["phi_c"] = {"function": "g", "args": [{"symbol": "x_t"}]}
    assert not Certificate.from_json(json.dumps(doc)).check()
    doc["proofs"][0]["parameterisation"]["phi_c"] = {"op": "__import__", "args": []}
    with pytest.raises(FormatError, match="unknown expression node"):
        Certificate.from_json(json.dumps(doc))
    with pytest.raises(FormatError, match=r"not a kleene\.certificate"):
        Certificate.from_json(json.dumps({"format": "something else"}))
    with pytest.raises(FormatError, match="line 1"):
        Certificate.from_json("{not json")


def test_expression_json_round_trip() -> None:
    x = input_symbol(0)
    f = sympy.Function("f")(x)
    for e in [
        sympy.Max(f + sympy.Symbol("c"), -sympy.oo + 0 * f, 2),
        (1 - f) * sympy.Rational(1, 3),
        sympy.log(sympy.exp(f) + 1),
    ]:
        assert expression_from_tree(json.loads(json.dumps(expression_to_tree(e)))) == e


def test_text_and_markdown_rendering_show_equations_automata_and_proof() -> None:
    cert = certificate("rrnn-f")
    cert.cross_check(trials=1, strings=3)
    text = cert.render_text()
    for needle in [
        "rrnn-f: rational over the real semiring",
        "c2_t =",
        "q0 -ε/r-> q3",
        "mu_c2(α) :=",
        "base case",
        "inductive step",
        "all residuals exactly 0",
        "Numeric cross-check",
    ]:
        assert needle in text, needle
    md = cert.render_markdown()
    assert md.startswith("## rrnn-f") and "\\begin{aligned}" in md and "| from | label | weight | to |" in md
    assert "\\mu_{c2}" in md
    refused = prove(zoo.lstm())
    assert "REFUSED" in refused.render_text() and "**Reason:**" in refused.render_markdown()


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' binary not installed")
def test_draw_writes_one_svg_per_distinct_automaton(tmp_path: Path) -> None:
    cert = certificate("isan")
    paths = cert.draw(tmp_path)
    assert len(paths) == 1 and paths[0].suffix == ".svg"
    svg = paths[0].read_text()
    assert "<svg" in svg and "φ_c2(α)" in svg and "η_c1(α)" in svg


def test_an_arc_weight_reading_the_state_is_rejected() -> None:
    cert = certificate("example-6")
    proof = cert.automata[0]
    w = proof.wfsa.copy()
    w.arcs[1] = dataclasses.replace(w.arcs[1], weight=sympy.Symbol("c_{t-1}"))
    bad = Certificate(cert.recurrence, [dataclasses.replace(proof, wfsa=w)])
    assert not bad.check() and "neither constants nor α" in (bad.failure or "")
