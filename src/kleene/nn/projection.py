"""The layers' input projection ``x W^T + b``: the GEMM that bounds a rational layer's time.

On the CPU, oneDNN's linear with its weight reordered into oneDNN's blocked layout (what torch's inductor calls
for frozen weights) runs the forward GEMM 12-15% faster than ``F.linear`` on the machines kleene was measured on
(BENCHMARKS.md, "The projection GEMM"); the reorder of a (4·512, 512) weight costs about 0.5 ms, so it pays at
every call, including training steps whose weight changes each time. ``linear`` takes that path where torch has it
(float32, CPU, oneDNN built in) and ``F.linear`` elsewhere; the backward computes ``grad_x`` the same way (the
transposed weight reordered) and ``grad_W``, ``grad_b`` with plain GEMM and sum.

Under ``torch.compile``, ``torch.export`` (and so ONNX export) and TorchScript tracing, ``linear`` is
``F.linear``: the oneDNN ops have no export form and inductor fuses its own GEMM, so compiled and exported
programs need no setting. ``KLEENE_PLAIN_GEMM=1`` in the environment selects ``F.linear`` in eager mode too: a
benchmark knob (BENCHMARKS.md measures the two paths), not something a deployment needs.

Caution:
    The two paths round differently (another summation order): results agree to float32's GEMM accuracy,
    not bit for bit.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import torch
from torch import nn
from torch.nn import functional

Tensor = torch.Tensor

__all__ = ["Linear", "linear", "packed_gemm_available"]


@cache
def _torch_has_packed_gemm() -> bool:
    """Whether this torch build has oneDNN and its reordered-weight linear ops (probed once per process)."""
    mkldnn = torch.ops.mkldnn
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(mkldnn, "_reorder_linear_weight")
        and hasattr(mkldnn, "_linear_pointwise")
    )


def packed_gemm_available() -> bool:
    """Whether torch offers oneDNN's reordered-weight linear here (and ``KLEENE_PLAIN_GEMM`` does not refuse it).

    The environment is read at each call (one dictionary lookup), so the switch may change while a process runs."""
    return os.environ.get("KLEENE_PLAIN_GEMM", "") in ("", "0") and _torch_has_packed_gemm()


def _tracing() -> bool:
    """Whether torch.compile, torch.export or TorchScript is tracing this call (the packed path steps aside)."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing() or torch.jit.is_scripting()


def _packed(x2: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``x2 (M, K) @ weight (N, K)^T + bias`` through oneDNN with ``weight`` reordered for M rows."""
    mkldnn = torch.ops.mkldnn
    blocked = mkldnn._reorder_linear_weight(weight, x2.shape[0])
    out: Tensor = mkldnn._linear_pointwise(x2, blocked, bias, "none", [], "")
    return out


class _PackedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x2: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x2, weight)
        ctx.has_bias = bias is not None
        return _packed(x2, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        x2, weight = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = _packed(grad, weight.t().contiguous(), None) if ctx.needs_input_grad[0] else None
        grad_w = grad.t() @ x2 if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x (..., K) @ weight (N, K)^T + bias (N)``, as ``torch.nn.functional.linear``, on the fastest GEMM path.

    Caution:
        The oneDNN path applies to float32 CPU tensors with at least one row in eager mode; every other case
        (float64, GPU tensors, empty batches, no oneDNN, tracing by torch.compile / torch.export / TorchScript) is
        ``F.linear`` itself.
    """
    rows = x.numel() // max(x.shape[-1], 1) if x.dim() else 0
    if (
        _tracing()
        or x.dtype != torch.float32
        or weight.dtype != torch.float32
        or x.device.type != "cpu"
        or weight.device.type != "cpu"
        or (bias is not None and bias.dtype != torch.float32)
        or rows == 0
        or x.shape[-1] == 0
        or not packed_gemm_available()
    ):
        return functional.linear(x, weight, bias)
    out = _PackedLinear.apply(x.reshape(rows, x.shape[-1]).contiguous(), weight.contiguous(), bias)
    return out.view(*x.shape[:-1], weight.shape[0])


class Linear(nn.Linear):
    """``torch.nn.Linear`` (same parameters, same state dict) whose forward is ``linear``: the GEMM path above."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
