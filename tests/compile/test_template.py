"""Templates: reading WFSAs, the SoPa and dense constructors, lowering, and the errors they raise."""

from __future__ import annotations

import pytest
import sympy

from kleene.automata import ANY, EPSILON, WFSA, Sym, weight_functions
from kleene.automata.examples import paper_automaton_b, paper_automaton_c, paper_automaton_f
from kleene.compile import Options, Template, dense_template, lower, sopa_bank, sopa_pattern
from kleene.compile.template import epsilon_reach
from kleene.errors import CompileError


def test_automaton_f_reads_as_slots_constants_and_literals() -> None:
    t = Template.from_wfsa(paper_automaton_f())
    assert t.slots == ("mu1", "phi1", "mu2", "phi2")
    assert t.constants == ("gamma", "rho1", "rho2")
    assert len(t.moves) == 6 and len(t.epsilons) == 1
    self_loop = t.moves[0]
    assert (self_loop.src, self_loop.dst, self_loop.weight.slots, self_loop.weight.literal) == (0, 0, (), None)
    assert t.epsilons[0].weight.constants == (0,)
    assert [q for q, _ in t.final] == [1, 2]
    # Round trip: the template as a WFSA has the same scores (checked symbolically on a short string).
    again = t.to_wfsa()
    original = paper_automaton_f(alphabet=None)
    assert sympy.simplify(again.score_symbolic([0, 1]) - original.score_symbolic([0, 1])) == 0


@pytest.mark.parametrize("semiring", ["real", "log", "max-plus", "max-times"])
def test_products_in_each_semiring(semiring: str) -> None:
    (mu,) = weight_functions("mu")
    w = WFSA(semiring)
    w.add_states("a", "b")
    w.set_initial("a")
    s = w.semiring
    product = s.sym_times(mu, sympy.Symbol("g"), sympy.Float(0.5 if semiring in ("real", "max-times") else -0.5))
    w.add_arc("a", "b", ANY, product)
    w.add_arc("a", "a", ANY, s.zero)  # a literal-zero arc is no arc
    w.set_final("b")
    t = Template.from_wfsa(w)
    assert len(t.moves) == 1
    assert t.moves[0].weight.slots == (0,) and t.moves[0].weight.constants == (0,)
    assert t.moves[0].weight.literal == pytest.approx(0.5 if semiring in ("real", "max-times") else -0.5)


def test_rejections_name_the_arc() -> None:
    (mu,) = weight_functions("mu")
    w = WFSA("real", alphabet=["x"])
    w.add_states("a", "b")
    w.set_initial("a")
    w.set_final("b")
    w.add_arc("a", "b", Sym("x"), mu)
    with pytest.raises(CompileError, match=r"arc 0 \(a -x-> b\).*∀α"):
        Template.from_wfsa(w)
    w2 = WFSA("real")
    w2.add_states("a", "b")
    w2.set_final("b")
    w2.add_arc("a", "b", ANY, sympy.sin(mu))
    with pytest.raises(CompileError, match=r"arc 0 \(a -∀α-> b\).*sin\(mu\) is not elementwise"):
        Template.from_wfsa(w2)
    w3 = WFSA("real")
    w3.add_states("a", "b")
    w3.set_final("b")
    w3.add_arc("a", "b", ANY, mu + sympy.Symbol("g"))
    with pytest.raises(CompileError, match="offending part"):
        Template.from_wfsa(w3)


def test_literals_do_not_cross_semirings() -> None:
    w = WFSA("real")
    w.add_states("a", "b")
    w.set_initial("a")
    w.set_final("b", 0.5)
    w.add_arc("a", "b", ANY, weight_functions("mu")[0])
    with pytest.raises(CompileError, match="literals are written in the real semiring"):
        lower(Template.from_wfsa(w), "log")
    lower(Template.from_wfsa(paper_automaton_b()), "max-plus")  # only literal one: fine


def test_epsilon_slot_and_missing_final_are_rejected() -> None:
    w = WFSA("real")
    w.add_states("a", "b")
    w.set_final("b")
    w.add_arc("a", "b", EPSILON, sympy.Symbol("g"))
    Template.from_wfsa(w)
    b = paper_automaton_c()
    b.final.clear()
    with pytest.raises(CompileError, match="no final state"):
        Template.from_wfsa(b)


def test_sopa_pattern_shape() -> None:
    p = sopa_pattern(4)
    assert p.num_states == 4
    assert sorted((a.src, a.dst) for a in p.moves) == [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (2, 3), (3, 3)]
    assert [(a.src, a.dst) for a in p.epsilons] == [(0, 1), (1, 2), (2, 3)]
    assert p.slots.count("mu0") == 1 and len(p.slots) == 7 and len(p.constants) == 3
    assert [t.num_states for t in sopa_bank()] == [2, 3, 4, 5, 6, 7]
    with pytest.raises(CompileError):
        sopa_pattern(1)


def test_lowering_closure_structure() -> None:
    p = sopa_pattern(4)
    pairs, cyclic = epsilon_reach(p, None)
    assert pairs == {(0, 1), (1, 2), (2, 3), (0, 2), (1, 3), (0, 3)} and not cyclic
    capped, _ = epsilon_reach(p, 1)
    assert capped == {(0, 1), (1, 2), (2, 3)}
    plan = lower(p, "max-times", Options(restart=True, output="sum", epsilon_cap=1))
    assert sum(1 for e in plan.closure if e.src != e.dst) == 3
    assert [s is not None for s in plan.start] == [True, True, False, False]  # λ ⊗ (I + E) reaches s1
    dense = lower(dense_template(3), "real")
    assert len(dense.moves) == 9 and not dense.has_closure


def test_options_validate() -> None:
    with pytest.raises(CompileError, match="output"):
        Options(output="mean")  # type: ignore[arg-type]
    with pytest.raises(CompileError, match="epsilon_cap"):
        Options(epsilon_cap=-1)


def test_a_semiring_without_kernel_algebra_is_refused_by_name() -> None:
    with pytest.raises(CompileError, match="boolean semiring has no kernel realisation"):
        lower(sopa_pattern(2, semiring="boolean"), "boolean")
