"""A bank's kernels (``kleene.compile.codegen.bank``) built, loaded and called like a plan's (``runtime.cpu``,
``runtime.gpu``).

On the CPU (``cpp``): the same cache and compiler as ``runtime.cpu``; the bank's kernels are one
``kleene.compile.runtime.op.NativeOp`` (``kleene::bank_fwd_<key>``, ``kleene::bank_bwd_<key>``) that always
recomputes from checkpoints (``op.save_mode`` of kernels that cannot store every state). On a GPU (``triton``,
``cuda``): one launch per direction for the whole bank, through the template GPU kernels' launchers and op
(``runtime.gpu.lane_op``: ``kleene::bank_gpu_fwd_<key>``, ``kleene::bank_gpu_bwd_<key>``); those kernels store every
state (``op.save_mode`` of kernels without checkpoints).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import torch

from kleene.compile.codegen.bank import (
    BankLayout,
    bank_blocks,
    generate_bank_cpp,
    generate_bank_cuda,
    generate_bank_triton,
)
from kleene.compile.runtime.cpu import NativeKernel, _check_cpu, _ptr, load_native
from kleene.compile.runtime.gpu import (
    cuda_launchers_of,
    lane_op,
    require_cuda,
    triton_block,
    triton_interpreting,
    triton_launchers,
)
from kleene.compile.runtime.op import SAVE_CHECKPOINTS, NativeOp, checkpoint_steps, save_mode
from kleene.errors import CompileError

#: The backends a bank runs on: its recurrences' (every one the same).
BANK_BACKENDS = ("cpp", "triton", "cuda")

Tensor = torch.Tensor


def load_bank_kernel(layout: BankLayout) -> tuple[str, NativeKernel]:
    """Build (or fetch from the cache) and load ``layout``'s kernel; returns (key, kernel)."""
    ptr, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    forward = [ptr] * 7 + [i64] * 3 + [c_int]
    backward = [ptr] * 12 + [i64] * 3 + [c_int]
    return load_native(generate_bank_cpp(layout), "kleene_bank", forward, backward)


def checkpoint_chunk(layout: BankLayout, itemsize: int) -> int:
    """Steps between the bank's checkpoints: ``checkpoint_steps`` of a chunk's slot rows and states."""
    return checkpoint_steps(layout.slot_offsets[-1] + layout.state_offsets[-1], itemsize)


def _checkpoint_shape(layout: BankLayout, slots: Tensor, save: int) -> tuple[int, ...]:
    if save != SAVE_CHECKPOINTS:
        return (0,)
    b, t = slots.shape[:2]
    chunk = checkpoint_chunk(layout, slots.element_size())
    return (b, (t + chunk - 1) // chunk, layout.state_offsets[-1])


def run_bank_forward(
    layout: BankLayout,
    kernel: NativeKernel,
    slots: Tensor,
    params: Tensor,
    lengths: Tensor,
    h0: Tensor | None,
    save: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """Call the bank's forward kernel: (output (B, WT), final state (B, QT), checkpoints if ``save`` is
    ``SAVE_CHECKPOINTS`` else empty)."""
    _check_cpu(slots, params, lengths, h0)
    slots, params, lengths = slots.contiguous(), params.contiguous(), lengths.contiguous()
    h0 = None if h0 is None else h0.contiguous()
    b, t = slots.shape[:2]
    out = slots.new_empty((b, layout.lane_offsets[-1]))
    final = slots.new_empty((b, layout.state_offsets[-1]))
    saved = slots.new_empty(_checkpoint_shape(layout, slots, save))
    kernel.forward(slots.dtype, save == SAVE_CHECKPOINTS)(
        _ptr(slots), _ptr(params), _ptr(lengths), _ptr(h0), _ptr(out), _ptr(final),
        _ptr(saved) if save == SAVE_CHECKPOINTS else None, b, t, checkpoint_chunk(layout, slots.element_size()),
        torch.get_num_threads(),
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
    kernel.backward(slots.dtype)(
        _ptr(slots), _ptr(params), _ptr(lengths), _ptr(h0), _ptr(saved), _ptr(final), _ptr(out), _ptr(grad_out),
        _ptr(grad_final), _ptr(grad_slots), _ptr(grad_params), _ptr(grad_h0), b, t,
        checkpoint_chunk(layout, slots.element_size()), torch.get_num_threads(),
    )  # fmt: skip
    return grad_slots, grad_params.sum(0), grad_h0


def bank_op(layout: BankLayout) -> NativeOp:
    """The bank's kernels as one op: ``op(slots (B, T, R), params (KT,), lengths, h0 (B, QT) | None) -> (out (B,
    WT), final (B, QT))``; its custom ops ``op.custom_forward(slots, params, lengths, h0, save) -> (out, final,
    checkpoints)`` and ``op.custom_backward``."""
    key, kernel = load_bank_kernel(layout)
    qt, wt = layout.state_offsets[-1], layout.lane_offsets[-1]

    def forward(inputs: tuple[Any, ...], save: int) -> tuple[Tensor, Tensor, Tensor]:
        slots, params, lengths, h0 = inputs
        return run_bank_forward(layout, kernel, slots, params, lengths, h0, save)

    def backward(inputs: tuple[Any, ...], save: int, outputs: tuple[Tensor, ...], grads: tuple[Tensor, ...]) -> Any:
        (slots, params, lengths, h0), (out, final, saved), (grad_out, grad_final) = inputs, outputs, grads
        return run_bank_backward(layout, kernel, slots, params, lengths, h0, saved, final, out, grad_out, grad_final)

    def shapes(inputs: tuple[Any, ...], save: int) -> list[tuple[Any, ...]]:
        b = inputs[0].shape[0]
        return [(b, wt), (b, qt), _checkpoint_shape(layout, inputs[0], save)]

    def saving(inputs: tuple[Any, ...]) -> int:
        return save_mode(can_store=False, can_checkpoint=True)

    inputs, differentiable = ("slots", "params", "lengths", "h0?"), ("slots", "params", "h0")
    return NativeOp("bank_", key, inputs, differentiable, 3, 2, forward, backward, shapes, saving)


def bank_gpu_op(layout: BankLayout, backend: str, block: int | None = None) -> NativeOp:
    """The bank's Triton or CUDA kernels (``codegen.bank.generate_bank_triton``, ``generate_bank_cuda``) as one op of
    ``bank_op``'s signature (``runtime.gpu.lane_op``); ``block``: Triton's lanes per program (default: the widest
    block's next power of two, at most ``runtime.gpu.TRITON_BLOCK``).

    Raises:
        CompileError: a ``block`` that is not a power of two, triton missing, or (cuda) no CUDA build of torch, no
            GPU or a failed build.
    """
    wt = layout.lane_offsets[-1]
    if block is not None and (not isinstance(block, int) or block < 1 or block & (block - 1)):
        raise CompileError(f"a Triton bank's block (lanes per program) must be a power of two; got {block!r}")
    if backend == "triton":
        block = triton_block(max(layout.widths)) if block is None else block
        options = {} if triton_interpreting() else {"num_warps": max(1, block // 32)}

        def geometry(slots: Tensor) -> tuple[int, int, int, int, tuple[int, int], dict[str, Any]]:
            return slots.shape[1], wt, wt, block, (slots.shape[0], bank_blocks(layout, block)), options

        forward, backward, key = triton_launchers(generate_bank_triton(layout), geometry)
    elif backend == "cuda":
        require_cuda()
        forward, backward, key = cuda_launchers_of(generate_bank_cuda(layout), lambda x: (x.shape[0], x.shape[1], wt))
    else:
        raise CompileError(f"a bank's GPU kernels are 'triton' or 'cuda', not {backend!r}")
    return bank_lane_op(layout, forward, backward, key)


def bank_lane_op(
    layout: BankLayout, forward: Callable[..., None], backward: Callable[..., None], key: str
) -> NativeOp:
    """Launchers of ``layout``'s lane kernels (``runtime.gpu.Kernels``' arguments, D the bank's lanes WT) as one op
    of ``bank_op``'s signature (``runtime.gpu.lane_op``); ``key`` identifies the kernels."""
    qt, wt, kt = layout.state_offsets[-1], layout.lane_offsets[-1], layout.param_offsets[-1]

    def shapes(slots: Tensor) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]:
        b, t = slots.shape[:2]
        return (b, wt), (b, qt), (b, t, qt), (b, kt)

    return lane_op("bank_gpu_", key, forward, backward, shapes, float(layout.plans[0].storage.zero))


def bank_runner(layout: BankLayout, backend: str = "cpp") -> Any:
    """``run(slots (B, T, R), params (KT,), lengths, h0 (B, QT) | None) -> (out (B, WT), final (B, QT))`` calling
    ``layout``'s kernels on ``backend`` (one of ``BANK_BACKENDS``: ``bank_op`` or ``bank_gpu_op``; through their
    custom ops under ``torch.compile``, directly otherwise).

    Raises:
        CompileError: a backend not in ``BANK_BACKENDS``, or its kernels cannot be built.
    """
    if backend not in BANK_BACKENDS:
        raise CompileError(f"a bank runs on one of {BANK_BACKENDS}, not {backend!r}")
    op = bank_op(layout) if backend == "cpp" else bank_gpu_op(layout, backend)

    def run(slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
        out, final = op(slots, params, lengths, h0)
        return out, final

    return run
