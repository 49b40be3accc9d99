"""The torch reference backend against kleene.automata's Forward algorithm (an independent oracle)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from kleene.automata import DivergenceError, get_semiring
from kleene.automata.algorithms import closure_matrix
from kleene.automata.examples import paper_automaton_b, paper_automaton_f, paper_recurrence_f
from kleene.compile import CompileError, Factor, Options, Template, TemplateArc, compile, sopa_pattern
from kleene.compile.reference import closure_tensor, reverse_valid, run_reference, static_params

from .oracle import SEMIRINGS, oracle_outputs, random_slots, random_template, set_constants


def finite(outputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """Semiring zeros (-inf at padding) replaced by 0 so that finite differences stay defined."""
    return tuple(torch.where(torch.isfinite(y), y, torch.zeros_like(y)) for y in outputs)


def _close(expected: torch.Tensor, got: torch.Tensor) -> None:
    finite = torch.isfinite(expected)
    assert torch.equal(finite, torch.isfinite(got)), (expected, got)
    assert torch.equal(expected[~finite], got[~finite].to(expected.dtype))
    torch.testing.assert_close(got[finite].to(expected.dtype), expected[finite], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("seed", range(6))
def test_random_templates_agree_with_forward(semiring: str, seed: int) -> None:
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    template = random_template(rng, semiring)
    options = Options(
        restart=seed % 2 == 1,
        epsilon_cap=rng.choice([None, 1, 2]),
        bidirectional=seed % 3 == 0,
    )
    module = compile(
        template,
        semiring,
        dim=4,
        backend="torch",
        restart=options.restart,
        epsilon_cap=options.epsilon_cap,
        bidirectional=options.bidirectional,
    ).double()
    set_constants(module, gen)
    slots = random_slots(semiring, (3, 5, len(template.slots), 4), gen)
    lengths = [5, 2, 0]
    got, _ = module(slots, torch.tensor(lengths))
    expected = oracle_outputs(template, semiring, options, slots, module.constants.detach(), lengths)
    _close(expected, got.detach())


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_sum_and_last_outputs(semiring: str) -> None:
    gen = torch.Generator().manual_seed(1)
    template = Template.from_wfsa(paper_automaton_f(semiring))
    s = get_semiring("max-plus" if semiring == "max-times" else semiring)
    slots = random_slots(semiring, (3, 6, 4, 2), gen)
    lengths = torch.tensor([6, 1, 0])
    modules = {mode: compile(template, semiring, 2, "torch", output=mode).double() for mode in ("steps", "sum", "last")}
    for m in modules.values():
        m.load_state_dict(modules["steps"].state_dict())
    steps, final = modules["steps"](slots, lengths)
    total, _ = modules["sum"](slots, lengths)
    last, final_last = modules["last"](slots, lengths)
    _close(s.sum(steps, axis=1).detach(), total.detach())
    _close(steps[0, -1].detach(), last[0].detach())
    _close(steps[1, 0].detach(), last[1].detach())
    assert torch.equal(final, final_last)
    # An empty sequence scores the empty string: F gives it zero (q0 is not final).
    assert torch.all(last[2] == s.zero)


def test_paper_recurrence_f() -> None:
    """Eq. 19 of rational-recurrences.md, written out, against the compiled F (real semiring)."""
    gen = torch.Generator().manual_seed(3)
    template = Template.from_wfsa(paper_automaton_f())
    module = compile(template, "real", dim=1, backend="torch").double()
    set_constants(module, gen)
    slots = random_slots("real", (1, 7, 4, 1), gen)
    got = module(slots)[0].detach()
    env = {name: {t: float(slots[0, t, i, 0]) for t in range(7)} for i, name in enumerate(template.slots)}
    env.update({c: float(module.constants.detach()[i, 0]) for i, c in enumerate(template.constants)})
    for t in range(7):
        assert math.isclose(paper_recurrence_f(list(range(t + 1)), env), float(got[0, t, 0]), rel_tol=1e-12)


def test_h0_continues_a_split_sequence() -> None:
    """Truncated BPTT: running two halves with the final state carried over equals one run."""
    gen = torch.Generator().manual_seed(4)
    template = Template.from_wfsa(paper_automaton_f("log"))
    module = compile(template, "log", dim=3, backend="torch").double()
    slots = random_slots("log", (2, 8, 4, 3), gen)
    whole, final = module(slots)
    first, middle = module(slots[:, :5])
    second, final2 = module(slots[:, 5:], h0=middle)
    _close(whole.detach(), torch.cat([first, second], 1).detach())
    _close(final.detach(), final2.detach())


def test_padding_never_changes_results() -> None:
    gen = torch.Generator().manual_seed(5)
    template = sopa_pattern(4)
    module = compile(template, "max-times", dim=2, backend="torch", restart=True, bidirectional=True).double()
    slots = random_slots("max-times", (1, 4, len(template.slots), 2), gen)
    padded = torch.cat([slots, random_slots("max-times", (1, 3, len(template.slots), 2), gen)], 1)
    short, h_short = module(slots)
    long, h_long = module(padded, torch.tensor([4]))
    _close(short.detach(), long[:, :4].detach())
    assert torch.all(long[:, 4:] == -math.inf)
    _close(h_short.detach(), h_long.detach())


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("output", ["steps", "sum"])
@pytest.mark.slow
def test_gradcheck(semiring: str, output: str) -> None:
    """float64 gradcheck through slots, h0 and the constants (epsilon closure included)."""
    gen = torch.Generator().manual_seed(6)
    template = Template.from_wfsa(paper_automaton_f(semiring))
    module = compile(template, semiring, 2, "torch", output=output, restart=output == "sum").double()
    set_constants(module, gen)
    slots = random_slots(semiring, (2, 4, 4, 2), gen).requires_grad_()
    h0 = random_slots(semiring, (2, 4, 2), gen).requires_grad_()
    constants = module.constants.detach().clone().requires_grad_()
    lengths = torch.tensor([4, 2])

    def run(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        params = static_params(module.plan, c, x.new_empty((1, 2)))
        return finite(run_reference(module.plan, x, params, lengths, h))

    assert torch.autograd.gradcheck(run, (slots, h0, constants))


@pytest.mark.parametrize("semiring", ["real", "log", "max-plus"])
def test_batched_closure_matches_closure_matrix(semiring: str) -> None:
    """Lehmann's algorithm per dimension against kleene.automata's closure_matrix, with epsilon cycles."""
    gen = torch.Generator().manual_seed(7)
    template = Template(
        states=("a", "b", "c"),
        slots=("x",),
        constants=("u", "v", "w"),
        moves=(),
        epsilons=tuple(TemplateArc(i, j, Factor(constants=(k,))) for k, (i, j) in enumerate([(0, 1), (1, 2), (2, 0)])),
        initial=(),
        final=((2, Factor()),),
        semiring=semiring,
    )
    module = compile(template, semiring, 3, "torch").double()
    set_constants(module, gen, 0.2, 0.9)
    like = torch.zeros(1, 3, dtype=torch.float64)
    ours = closure_tensor(module.plan, module.constants.detach(), like)
    s = get_semiring(semiring)
    for d in range(3):
        e = s.zeros((3, 3))
        for k, (i, j) in enumerate([(0, 1), (1, 2), (2, 0)]):
            e[i, j] = float(module.constants[k, d])
        torch.testing.assert_close(ours[d], torch.as_tensor(closure_matrix(e, s), dtype=torch.float64))


def test_divergent_closure_names_state() -> None:
    b = paper_automaton_b()
    template = Template.from_wfsa(b)
    assert template.slots == ("mu", "phi")
    looped = Template(
        template.states,
        template.slots,
        ("g",),
        template.moves,
        (TemplateArc(1, 1, Factor(constants=(0,))),),
        template.initial,
        template.final,
    )
    module = compile(looped, "real", 2, "torch", init={"g": 1.5})
    with pytest.raises(DivergenceError, match=r"matrix \[0\] of the batch.*cycle q1 -> q1"):
        module(torch.rand(1, 2, 2, 2))


def test_bad_inputs_raise() -> None:
    module = compile(Template.from_wfsa(paper_automaton_b()), "real", 3, "torch")
    with pytest.raises(CompileError, match="2 slots"):
        module(torch.rand(1, 2, 3, 3))
    with pytest.raises(CompileError, match="lengths must lie"):
        module(torch.rand(2, 2, 2, 3), torch.tensor([3, 1]))
    with pytest.raises(CompileError, match="dim=3"):
        module(torch.rand(2, 2, 2, 4))
    with pytest.raises(CompileError, match="unknown backend"):
        compile(Template.from_wfsa(paper_automaton_b()), "real", 3, "fortran")


def test_reverse_valid() -> None:
    x = torch.arange(8.0).view(2, 4)
    assert reverse_valid(x, torch.tensor([3, 0])).tolist() == [[2.0, 1.0, 0.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
