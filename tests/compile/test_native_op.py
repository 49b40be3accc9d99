"""``runtime.op.NativeOp``, the one wrapper of every native kernel, around a small torch "kernel" with a known
gradient (a running sum with an optional start), and the save-or-recompute policy it applies."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from kleene.compile.runtime.op import (
    SAVE_CHECKPOINTS,
    SAVE_NOTHING,
    SAVE_STATES,
    NativeOp,
    checkpoint_steps,
    save_mode,
)

_COUNTER = itertools.count()


def _running_sum(saving: int) -> tuple[NativeOp, list[int]]:
    """``op(x (B, T), scale (T,), h0 (B,) | None) -> (y, final)`` with ``y[:, t] = h0 + sum_{s<=t} scale[s] x[:, s]``
    and ``final = y[:, -1]``; the forward saves ``scale * x`` when ``save`` is ``SAVE_STATES`` (its backward reads
    it only to check it got what it was promised). Also returns the ``save`` values the forward saw."""
    seen: list[int] = []

    def forward(inputs: tuple[Any, ...], save: int) -> tuple[torch.Tensor, ...]:
        x, scale, h0 = inputs
        seen.append(save)
        y = torch.cumsum(x * scale, 1) + (0 if h0 is None else h0[:, None])
        saved = x * scale if save == SAVE_STATES else x.new_empty(0)
        return y, y[:, -1].clone(), saved

    def backward(inputs: tuple[Any, ...], save: int, outputs: tuple[torch.Tensor, ...], grads: Any) -> Any:
        x, scale, h0 = inputs
        assert outputs[2].numel() == (x.numel() if save == SAVE_STATES else 0)
        grad_y, grad_final = grads
        total = grad_y.flip(1).cumsum(1).flip(1)
        total = total + grad_final[:, None]
        grad_h0 = total[:, 0] if h0 is not None else x.new_zeros(x.shape[0])
        return total * scale, (total * x).sum(0), grad_h0

    def shapes(inputs: tuple[Any, ...], save: int) -> list[tuple[Any, ...]]:
        x = inputs[0]
        return [tuple(x.shape), (x.shape[0],), tuple(x.shape) if save == SAVE_STATES else (0,)]

    op = NativeOp(
        "test_running_sum_",
        str(next(_COUNTER)),
        ("x", "scale", "h0?"),
        ("x", "scale", "h0"),
        3,
        2,
        forward,
        backward,
        shapes,
        lambda inputs: saving,
    )
    return op, seen


def _inputs(with_h0: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(3, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    scale = torch.rand(5, generator=gen, dtype=torch.float64).add(0.5).requires_grad_()
    h0 = torch.randn(3, generator=gen, dtype=torch.float64, requires_grad=True) if with_h0 else None
    return x, scale, h0


@pytest.mark.parametrize("with_h0", [True, False])
@pytest.mark.parametrize("saving", [SAVE_STATES, SAVE_NOTHING])
def test_eager_and_traced_gradients_agree_with_autograd(with_h0: bool, saving: int) -> None:
    """Eager (the autograd function) and under torch.compile (the custom ops): gradcheck in float64, and the
    gradients of a loss reading one output only (the other's gradient counts as zeros) equal torch's own."""
    op, seen = _running_sum(saving)
    x, scale, h0 = _inputs(with_h0)
    args = (x, scale) if h0 is None else (x, scale, h0)

    def run(*a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return op(a[0], a[1], a[2] if len(a) > 2 else None)

    assert torch.autograd.gradcheck(run, args)
    assert seen and set(seen) == {saving}
    compiled = torch.compile(run, backend="aot_eager", fullgraph=True)
    for loss in (lambda y, f: (y.sin()).sum(), lambda y, f: (f * f).sum()):
        got = torch.autograd.grad(loss(*compiled(*args)), args)
        eager = torch.autograd.grad(loss(*run(*args)), args)
        expected_y = torch.cumsum(x * scale, 1) + (0 if h0 is None else h0[:, None])
        expected = torch.autograd.grad(loss(expected_y, expected_y[:, -1]), args)
        for a, b, c in zip(got, eager, expected):
            torch.testing.assert_close(a, c, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(b, c, rtol=1e-12, atol=1e-12)


def test_without_gradients_the_forward_saves_nothing_and_optional_inputs_get_none() -> None:
    op, seen = _running_sum(SAVE_STATES)
    x, scale, _ = _inputs(False)
    with torch.no_grad():
        y, final = op(x, scale, None)
    assert seen == [SAVE_NOTHING] and torch.equal(final, y[:, -1])
    y, _ = op(x.detach().requires_grad_(), scale.detach(), None)
    assert seen[-1] == SAVE_STATES and y.requires_grad
    torch.library.opcheck(op.custom_forward, (x, scale, None, SAVE_STATES))
    torch.library.opcheck(op.custom_forward, (x, scale, torch.zeros(3, dtype=torch.float64), SAVE_NOTHING))


def test_save_mode() -> None:
    """Kernels that only store, only checkpoint, both (the budget decides) or neither (the backward reads the
    outputs)."""
    assert save_mode(can_store=True, can_checkpoint=False, state_bytes=10**12, budget=0) == SAVE_STATES
    assert save_mode(can_store=False, can_checkpoint=True) == SAVE_CHECKPOINTS
    assert save_mode(can_store=True, can_checkpoint=True, state_bytes=100, budget=100) == SAVE_STATES
    assert save_mode(can_store=True, can_checkpoint=True, state_bytes=101, budget=100) == SAVE_CHECKPOINTS
    assert save_mode(can_store=False, can_checkpoint=False) == SAVE_NOTHING
    assert [checkpoint_steps(n, 4) for n in (1, 2048, 8192, 10**6)] == [64, 64, 16, 4]
