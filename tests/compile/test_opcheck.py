"""The cpp kernels as torch.library custom ops: opcheck, and a compiled module inside torch.compile."""

from __future__ import annotations

import pytest
import torch

from kleene.automata.examples import paper_automaton_f
from kleene.compile import Template, compile
from kleene.compile.runtime.cpu import compiler, cpp_op
from kleene.compile.runtime.op import SAVE_CHECKPOINTS, SAVE_NOTHING, SAVE_STATES, stores_states

from .oracle import random_slots, set_constants

try:
    compiler()
except Exception as exc:  # noqa: BLE001 - the reason is shown in the skip message
    pytest.skip(f"no C++ compiler: {exc}", allow_module_level=True)

pytestmark = pytest.mark.cpp


@pytest.mark.parametrize(("semiring", "output"), [("log", "steps"), ("max-plus", "sum")])
@pytest.mark.slow
def test_opcheck(semiring: str, output: str) -> None:
    gen = torch.Generator().manual_seed(21)
    # restarts and both directions: the log kernel is tests/compile/test_cpp_backend.py's test_gradcheck[log]
    module = compile(
        Template.from_wfsa(paper_automaton_f(semiring)), semiring, 4, "cpp", output=output, restart=True,
        bidirectional=True,
    ).double()  # fmt: skip
    set_constants(module, gen)
    forward = cpp_op(module.plan).custom_forward
    slots = random_slots(semiring, (2, 5, 4, 4), gen).requires_grad_()
    params = module.params(slots).detach().requires_grad_()
    h0 = random_slots(semiring, (2, 4, 4), gen).requires_grad_()
    lengths = torch.tensor([5, 3])
    stored = stores_states(module.plan)
    assert stored == (semiring == "log")  # logaddexp's exp/log make recomputation the costly side
    for args in (
        (slots, params, lengths, h0, SAVE_CHECKPOINTS),
        *([(slots, params, lengths, None, SAVE_STATES), (slots, params, lengths, h0, SAVE_STATES)] if stored else []),
        (slots.detach(), params.detach(), lengths, None, SAVE_NOTHING),
    ):
        torch.library.opcheck(forward, args)


@pytest.mark.slow
def test_module_under_torch_compile() -> None:
    gen = torch.Generator().manual_seed(22)
    module = compile(Template.from_wfsa(paper_automaton_f()), "real", 4, "cpp")
    set_constants(module, gen)
    reference = compile(Template.from_wfsa(paper_automaton_f()), "real", 4, "torch")
    reference.load_state_dict(module.state_dict())
    slots = random_slots("real", (2, 6, 4, 4), gen, torch.float32).requires_grad_()

    def loss(m: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        out, final = m(torch.sigmoid(x))
        return out.square().sum() + final.sum()

    compiled = torch.compile(lambda x: loss(module, x), backend="aot_eager", fullgraph=True)
    got = compiled(slots)
    (g_got,) = torch.autograd.grad(got, [slots])
    expected = loss(reference, slots)
    (g_expected,) = torch.autograd.grad(expected, [slots])
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(g_got, g_expected)
