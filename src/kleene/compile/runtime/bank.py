"""A bank's kernel (``kleene.compile.codegen.bank``) built, loaded and called like a plan's (``runtime.cpu``).

The same cache and compiler as ``runtime.cpu``; two ``torch.library`` custom ops per bank
(``kleene::bank_fwd_<key>``, ``kleene::bank_bwd_<key>``) with fake implementations and autograd, traced under
``torch.compile``, and in eager mode the same kernel functions through a plain ``torch.autograd.Function``.
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch

from kleene.compile.codegen.bank import BankLayout, generate_bank_cpp
from kleene.compile.runtime.cpu import NativeKernel, _check_cpu, _ptr, load_native

Tensor = torch.Tensor


_OPS: dict[str, tuple[Any, Any]] = {}


def load_bank_kernel(layout: BankLayout) -> tuple[str, NativeKernel]:
    """Build (or fetch from the cache) and load ``layout``'s kernel; returns (key, kernel)."""
    ptr, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    forward = [ptr] * 7 + [i64] * 3 + [c_int]
    backward = [ptr] * 12 + [i64] * 3 + [c_int]
    return load_native(generate_bank_cpp(layout), "kleene_bank", forward, backward)


def _checkpoint_shape(layout: BankLayout, slots: Tensor, save: bool) -> tuple[int, ...]:
    if not save:
        return (0,)
    b, t = slots.shape[:2]
    chunk = layout.checkpoint_chunk(slots.element_size())
    return (b, (t + chunk - 1) // chunk, layout.state_offsets[-1])


def run_bank_forward(
    layout: BankLayout,
    kernel: NativeKernel,
    slots: Tensor,
    params: Tensor,
    lengths: Tensor,
    h0: Tensor | None,
    save: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    """Call the bank's forward kernel: (output (B, WT), final state (B, QT), checkpoints if ``save`` else empty)."""
    _check_cpu(slots, params, lengths, h0)
    slots, params, lengths = slots.contiguous(), params.contiguous(), lengths.contiguous()
    h0 = None if h0 is None else h0.contiguous()
    b, t = slots.shape[:2]
    out = slots.new_empty((b, layout.lane_offsets[-1]))
    final = slots.new_empty((b, layout.state_offsets[-1]))
    saved = slots.new_empty(_checkpoint_shape(layout, slots, save))
    kernel.forward[slots.dtype](
        _ptr(slots), _ptr(params), _ptr(lengths), _ptr(h0), _ptr(out), _ptr(final),
        _ptr(saved) if save else None, b, t, layout.checkpoint_chunk(slots.element_size()), torch.get_num_threads(),
    )  # fmt: skip
    return out, final, saved


def run_bank_backward(
    layout: BankLayout,
    kernel: NativeKernel,
    slots: Tensor,
    params: Tensor,
    lengths: Tensor,
    h0: Tensor | None,
    saved: Tensor,
    final: Tensor,
    out: Tensor,
    grad_out: Tensor,
    grad_final: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """Call the bank's backward kernel on the forward's checkpoints: (grad slots, grad params summed over the
    batch, grad h0)."""
    _check_cpu(slots, params, lengths, h0, saved, final, out, grad_out, grad_final)
    args = [x.contiguous() for x in (slots, params, lengths, saved, final, out, grad_out, grad_final)]
    slots, params, lengths, saved, final, out, grad_out, grad_final = args
    h0 = None if h0 is None else h0.contiguous()
    b, t = slots.shape[:2]
    grad_slots = torch.empty_like(slots)
    grad_params = slots.new_empty((b, layout.param_offsets[-1]))
    grad_h0 = slots.new_empty((b, layout.state_offsets[-1]))
    kernel.backward[slots.dtype](
        _ptr(slots), _ptr(params), _ptr(lengths), _ptr(h0), _ptr(saved), _ptr(final), _ptr(out), _ptr(grad_out),
        _ptr(grad_final), _ptr(grad_slots), _ptr(grad_params), _ptr(grad_h0), b, t,
        layout.checkpoint_chunk(slots.element_size()), torch.get_num_threads(),
    )  # fmt: skip
    return grad_slots, grad_params.sum(0), grad_h0


def bank_custom_ops(layout: BankLayout) -> tuple[Any, Any]:
    """The (forward, backward) custom ops of ``layout``'s bank, registering them on first use."""
    key, kernel = load_bank_kernel(layout)
    if key in _OPS:
        return _OPS[key]
    qt, wt, kt = layout.state_offsets[-1], layout.lane_offsets[-1], layout.param_offsets[-1]

    @torch.library.custom_op(f"kleene::bank_fwd_{key}", mutates_args=())
    def forward(
        slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, save: bool
    ) -> tuple[Tensor, Tensor, Tensor]:
        return run_bank_forward(layout, kernel, slots, params, lengths, h0, save)

    @forward.register_fake
    def _(slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, save: bool) -> Any:
        b = slots.shape[0]
        return (
            slots.new_empty((b, wt)),
            slots.new_empty((b, qt)),
            slots.new_empty(_checkpoint_shape(layout, slots, save)),
        )

    @torch.library.custom_op(f"kleene::bank_bwd_{key}", mutates_args=())
    def backward(
        slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, saved: Tensor, final: Tensor,
        out: Tensor, grad_out: Tensor, grad_final: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
        return run_bank_backward(layout, kernel, slots, params, lengths, h0, saved, final, out, grad_out, grad_final)

    @backward.register_fake
    def _(
        slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, saved: Tensor, final: Tensor,
        out: Tensor, grad_out: Tensor, grad_final: Tensor,
    ) -> Any:  # fmt: skip
        return torch.empty_like(slots), slots.new_empty((kt,)), slots.new_empty((slots.shape[0], qt))

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, ...]) -> None:
        slots, params, lengths, h0, _ = inputs
        out, final, saved = output
        ctx.has_h0 = h0 is not None
        ctx.save_for_backward(slots, params, lengths, h0 if h0 is not None else slots.new_empty(0), saved, final, out)

    def grad_fn(ctx: Any, grad_out: Tensor | None, grad_final: Tensor | None, _: Any) -> tuple[Any, ...]:
        slots, params, lengths, h0, saved, final, out = ctx.saved_tensors
        grad_out = torch.zeros_like(out) if grad_out is None else grad_out
        grad_final = torch.zeros_like(final) if grad_final is None else grad_final
        g_slots, g_params, g_h0 = backward(
            slots, params, lengths, h0 if ctx.has_h0 else None, saved, final, out, grad_out, grad_final
        )
        return g_slots, g_params, None, g_h0 if ctx.has_h0 else None, None

    forward.register_autograd(grad_fn, setup_context=setup_context)
    _OPS[key] = (forward, backward)
    return _OPS[key]


class _Eager(torch.autograd.Function):
    """The bank's kernels under eager autograd, without the dispatcher's per-call cost."""

    @staticmethod
    def forward(
        ctx: Any, layout: BankLayout, kernel: NativeKernel, slots: Tensor, params: Tensor, lengths: Tensor,
        h0: Tensor | None,
    ) -> tuple[Tensor, Tensor]:  # fmt: skip
        out, final, saved = run_bank_forward(layout, kernel, slots, params, lengths, h0, True)
        ctx.layout, ctx.kernel, ctx.has_h0 = layout, kernel, h0 is not None
        ctx.save_for_backward(slots, params, lengths, h0 if h0 is not None else slots.new_empty(0), saved, final, out)
        return out, final

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_out: Tensor, grad_final: Tensor) -> tuple[Any, ...]:
        slots, params, lengths, h0, saved, final, out = ctx.saved_tensors
        g_slots, g_params, g_h0 = run_bank_backward(
            ctx.layout, ctx.kernel, slots, params, lengths, h0 if ctx.has_h0 else None, saved, final, out,
            grad_out, grad_final,
        )  # fmt: skip
        return None, None, g_slots, g_params, None, g_h0 if ctx.has_h0 else None


def bank_runner(layout: BankLayout) -> Any:
    """``run(slots (B, T, R), params (KT,), lengths, h0 (B, QT) | None) -> (out (B, WT), final (B, QT))`` calling
    ``layout``'s kernel (through its custom ops under ``torch.compile``, directly otherwise)."""
    forward, _ = bank_custom_ops(layout)
    _, kernel = load_bank_kernel(layout)

    def run(slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
        need = torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (slots, params, h0))
        if torch.compiler.is_compiling():
            out, final, _ = forward(slots, params, lengths, h0, need)
            return out, final
        if need:
            out, final = _Eager.apply(layout, kernel, slots, params, lengths, h0)
            return out, final
        out, final, _ = run_bank_forward(layout, kernel, slots, params, lengths, h0, False)
        return out, final

    return run
