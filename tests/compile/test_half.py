"""Half precision (float16, bfloat16) through every kind of kernel and every registry model, on CPU.

The kernels compute half-precision values in float32 (states and accumulation) and return the inputs' dtype; the
conversion happens once, at the kernel's boundary (``CompiledRecurrence.forward``, ``CompiledBank.__call__``, the
dense runner). So a kernel's half result is *exactly* its float32 result on the upcast inputs, rounded once, and
its gradient is the float32 gradient rounded once: that is what the kernel tests assert (bit for bit).

The models are compared with a float32 run (same parameters: the half model's, upcast) within the half type's
precision: every layer rounds its outputs (and the backward its gradients) to the half type, each rounding a
relative error of at most eps/2 (eps = ``torch.finfo(dtype).eps``) on normal numbers and an absolute one of at
most half the subnormal spacing ``smallest_normal * eps`` below them. A registry model chains at most
``ROUNDINGS`` such roundings from the parameters to the loss and back, so the norm-wise error of an output or of a
parameter's gradient is bounded by ``ROUNDINGS * (eps * |ref| + smallest_normal * eps * sqrt(n))`` (the
conditioning of these small, well-scaled models is O(1)).
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from kleene.automata import get_semiring
from kleene.automata.examples import paper_automaton_f
from kleene.compile import Template, compile
from kleene.compile.bank import CompiledBank
from kleene.compile.runtime.dense import dense_recurrence
from kleene.nn.sopa import SoftPatterns

from ..nn.test_inputs import MODELS, VOCAB, tiny
from .oracle import with_output_map

HALVES = (torch.bfloat16, torch.float16)
#: Roundings to the half type along the longest chain of a registry model, forward and backward: embedding,
#: projection, recurrence, pooling/head layers (two per layer: its value and its gradient).
ROUNDINGS = 12


def _exactly_float32(run, inputs: list[torch.Tensor], dtype: torch.dtype) -> None:  # type: ignore[no-untyped-def]
    """``run(*inputs)`` in ``dtype`` is the float32 run on the upcast inputs rounded once, values and gradients."""
    halves = [x.to(dtype).requires_grad_(x.is_floating_point()) for x in inputs]
    singles = [x.detach().float().requires_grad_(x.is_floating_point()) for x in halves]
    got, want = run(*halves), run(*singles)
    assert all(g.dtype == dtype for g in got)
    for g, w in zip(got, want):
        assert torch.equal(g, w.to(dtype)), (g, w)
    # weights exact in every half type, so both runs' backward start from the same gradient
    weights = [((torch.arange(w.numel()) % 7 - 3) / 4).reshape(w.shape) for w in want]
    sum(((g.float() * v).sum() for g, v in zip(got, weights)), torch.zeros(())).backward()
    sum(((w * v).sum() for w, v in zip(want, weights)), torch.zeros(())).backward()
    for h, s in zip(halves, singles):
        if h.is_floating_point():
            assert h.grad is not None and h.grad.dtype == dtype
            assert torch.equal(h.grad, s.grad.to(dtype))


@pytest.fixture(scope="module")
def f_template() -> Template:
    return Template.from_wfsa(paper_automaton_f("real"))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("kind", ["template", "output map", "chunked"])
def test_compiled_recurrences_run_half_in_float32(kind: str, dtype: torch.dtype, f_template: Template) -> None:
    torch.manual_seed(0)
    template = with_output_map(f_template, "highway") if kind == "output map" else f_template
    module = compile(template, "real", 3, "cpp", scan="chunked" if kind == "chunked" else "sequential")
    assert module.backend == "cpp"
    steps = 200 if kind == "chunked" else 5  # (a chunk holds at least 64 steps)
    slots = torch.rand(3, steps, module.plan.num_slots, 3) * 0.5
    lengths = torch.tensor([steps, 2, 0])
    _exactly_float32(lambda x: module(x, lengths), [slots], dtype)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_the_dense_path_runs_half_in_float32(dtype: torch.dtype) -> None:
    torch.manual_seed(1)
    storage = get_semiring("log").storage
    w, off, c0 = torch.randn(3, 4, 5, 5) - 2, torch.randn(3, 4, 5) - 1, torch.randn(3, 5)
    lengths = torch.tensor([4, 1, 0])
    _exactly_float32(lambda a, b, c: dense_recurrence(a, b, lengths, c, storage), [w, off, c0], dtype)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_the_bank_runs_half_in_float32(dtype: torch.dtype) -> None:
    torch.manual_seed(2)
    bank = SoftPatterns(3, {2: 3, 4: 9}, semiring="max-times", backend="cpp")
    recurrences = [g.recurrence for g in bank.groups]
    compiled = CompiledBank(recurrences)
    slots = compiled.pack_slots([torch.randn(2, 5, len(g.template.slots), g.count) for g in bank.groups])
    lengths = torch.tensor([5, 0])
    _exactly_float32(lambda x: compiled(recurrences, x, lengths), [slots], dtype)


def _run(model: torch.nn.Module, tokens: torch.Tensor, lengths: torch.Tensor, autocast: bool = False):  # type: ignore[no-untyped-def]
    """The output (as float32) and every parameter's gradient of a fixed projection of it."""
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = model(tokens, lengths)
    weights = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
    (out.float() * weights).sum().backward()
    grads = {name: p.grad.float() for name, p in model.named_parameters() if p.grad is not None}
    return out.detach(), grads


def _within_precision(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    info = torch.finfo(dtype)
    bound = ROUNDINGS * info.eps * (float(want.norm()) + info.smallest_normal * math.sqrt(want.numel()))
    error = float((got.float() - want).norm())
    assert error <= bound, f"{what}: |error| {error:.3g} > {bound:.3g} ({ROUNDINGS} roundings of {dtype})"


@pytest.mark.parametrize("mode", ["bfloat16", "float16", "autocast"])
@pytest.mark.parametrize("name", MODELS)
@pytest.mark.slow
def test_registry_models_train_in_half_precision(name: str, mode: str) -> None:
    torch.manual_seed(3)
    tokens, lengths = torch.randint(2, VOCAB, (4, 6)), torch.tensor([6, 3, 1, 0])
    if mode == "autocast":
        dtype, model, reference = torch.bfloat16, copy.deepcopy(tiny(name)), copy.deepcopy(tiny(name))
        out, grads = _run(model, tokens, lengths, autocast=True)
    else:
        dtype = getattr(torch, mode)
        model = copy.deepcopy(tiny(name)).to(dtype)
        reference = copy.deepcopy(model).float()  # the same (rounded) parameters
        out, grads = _run(model, tokens, lengths)
        assert out.dtype == dtype
        assert all(p.grad is None or p.grad.dtype == dtype for p in model.parameters())
    want, want_grads = _run(reference, tokens, lengths)
    _within_precision(out, want, dtype, f"{name} output")
    assert grads.keys() == want_grads.keys() and grads
    for key, grad in grads.items():
        assert bool(torch.isfinite(grad).all()), key
        _within_precision(grad, want_grads[key], dtype, f"{name} gradient of {key}")
