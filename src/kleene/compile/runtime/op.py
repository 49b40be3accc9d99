"""One native-kernel op: a kernel's forward and backward as a differentiable torch operation, and what its forward
saves for its backward.

Every generated kernel -- a template's (C++, Triton, CUDA), a bank's, the dense path's -- is called through
``NativeOp``: given the kernel's forward and backward (functions that allocate their results and launch it) and
the shapes of what the forward returns, it registers two ``torch.library`` custom ops (``kleene::<prefix>fwd_<key>``,
``kleene::<prefix>bwd_<key>``) with fake (meta) implementations and autograd, which ``torch.compile`` and
``torch.export`` trace, and in eager mode calls the same functions through one ``torch.autograd.Function`` (the
dispatcher costs tens of microseconds a call); without gradients it calls the forward alone.

The save-or-recompute policy lives here too (``save_mode``, ``stores_states``, ``checkpoint_steps``): code
writers only write the kernels a policy asks for (``kleene.compile.codegen``), the runtime decides.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kleene.compile.template import Plan

Tensor = torch.Tensor
Inputs = tuple["Tensor | None", ...]

def onnx_exporting() -> bool:
    """Whether ``torch.onnx.export`` is tracing the caller (no generated kernel exports to ONNX: callers then run
    their step as an ONNX ``Scan``). Asked without importing ``torch.onnx`` when nothing has (0.03 s of every
    command's start-up)."""
    return "torch.onnx" in sys.modules and torch.onnx.is_in_onnx_export()


# --------------------------------------------------------------------------------------------
# What a forward saves for its backward
# --------------------------------------------------------------------------------------------

#: What a forward saves for its backward: nothing beyond its outputs (no gradient needed, or a backward that reads
#: the outputs), checkpoints (the state every ``checkpoint_steps`` steps; the backward recomputes the rest), or
#: every state.
SAVE_NOTHING, SAVE_CHECKPOINTS, SAVE_STATES = 0, 1, 2

#: Bytes of slots and recomputed states one backward chunk may keep in cache (per thread of the CPU kernels).
CHUNK_BYTES = 1 << 19


def checkpoint_steps(values_per_step: int, itemsize: int) -> int:
    """Steps between checkpoints of a kernel whose backward holds ``values_per_step`` values (slots and states of
    the lanes one task walks) of ``itemsize`` bytes per step: as many as fit ``CHUNK_BYTES``, from 4 to 64.

    Caution: ``values_per_step`` and ``itemsize`` are positive."""
    return max(4, min(64, CHUNK_BYTES // (values_per_step * itemsize)))


def stores_states(plan: Plan) -> bool:
    """Whether ``plan``'s CPU kernels are written with a stored-states mode (the backward reads every forward state
    instead of recomputing it from checkpoints): only where recomputing costs more than the extra memory traffic,
    i.e. where the semiring's kernel ⊕ or ⊗ evaluates exp/log (``KernelOp.transcendental``). Other plans' libraries
    do not contain that mode (it would cost half again their build time). Measured on an AMD EPYC (32 MB L3, 1
    thread, 2026-11-25): F's forward+backward from stored states was 18% faster in the log semiring, and 10-30%
    slower in real and max-plus (a step of a few multiply-adds is recomputed from an L2-resident chunk almost for
    free, while storing doubles the forward's writes)."""
    algebra = plan.semiring.kernel_algebra()
    return algebra.plus.transcendental or algebra.times.transcendental


def save_mode(can_store: bool, can_checkpoint: bool, state_bytes: int = 0, budget: float = float("inf")) -> int:
    """What a forward that needs a backward saves, for kernels that can store every state (``can_store``) and/or
    recompute them from checkpoints (``can_checkpoint``): every state where only that is possible, or where both
    are and the states (``state_bytes``) fit ``budget``; else checkpoints; ``SAVE_NOTHING`` for kernels that can do
    neither (their backward reads the forward's outputs)."""
    if can_store and (not can_checkpoint or state_bytes <= budget):
        return SAVE_STATES
    return SAVE_CHECKPOINTS if can_checkpoint else SAVE_NOTHING


# --------------------------------------------------------------------------------------------
# The op
# --------------------------------------------------------------------------------------------

#: The registered (forward, backward) custom ops by forward name: one registration per kernel per process.
_REGISTERED: dict[str, tuple[Any, Any]] = {}


class NativeOp:
    """A kernel as a differentiable torch operation: ``op(*inputs)`` returns the forward's first ``visible``
    outputs.

    ``inputs`` names the kernel's tensor inputs (a trailing ``?``: it may be None), ``differentiable`` those that
    get gradients. ``forward(inputs, save) -> outputs`` launches the kernel and returns its ``outputs`` outputs:
    the first ``visible`` the caller's, the rest what the backward needs besides the inputs and those (``save``,
    a ``SAVE_*`` value, says what); ``output_shapes(inputs, save)`` are their shapes (each output has the first
    input's dtype and device). ``backward(inputs, save, outputs, grads) -> gradients`` (``grads``: of the visible
    outputs) launches the reverse kernel: one gradient per differentiable input, shaped like it (any tensor where
    the input is None). ``saving(inputs)`` is the policy's ``SAVE_*`` choice (``save_mode``) when a gradient is
    needed. The custom ops are ``kleene::{prefix}fwd_{key}`` and ``kleene::{prefix}bwd_{key}``, registered once per
    process: ``key`` must identify the kernel (a hash of its source).

    Caution: ``forward`` and ``backward`` return new tensors (never an input, never one twice).
    """

    def __init__(
        self,
        prefix: str,
        key: str,
        inputs: Sequence[str],
        differentiable: Sequence[str],
        outputs: int,
        visible: int,
        forward: Callable[[Inputs, int], tuple[Tensor, ...]],
        backward: Callable[[Inputs, int, tuple[Tensor, ...], tuple[Tensor, ...]], tuple[Tensor, ...]],
        output_shapes: Callable[[Inputs, int], Sequence[tuple[Any, ...]]],
        saving: Callable[[Inputs], int],
    ):
        self.names = tuple(name.rstrip("?") for name in inputs)
        self.optional = tuple(name.endswith("?") for name in inputs)
        self.differentiable = tuple(self.names.index(name) for name in differentiable)
        self.outputs, self.visible = outputs, visible
        self.forward, self.backward, self.output_shapes, self.saving = forward, backward, output_shapes, saving
        names = f"kleene::{prefix}fwd_{key}", f"kleene::{prefix}bwd_{key}"
        self.custom_forward, self.custom_backward = _REGISTERED.get(names[0]) or self._register(*names)

    def __call__(self, *inputs: Tensor | None) -> tuple[Tensor, ...]:
        need = torch.is_grad_enabled() and any(
            (x := inputs[i]) is not None and x.requires_grad for i in self.differentiable
        )
        if torch.compiler.is_compiling():
            outputs = self.custom_forward(*inputs, self.saving(inputs) if need else SAVE_NOTHING)
            return tuple(outputs[: self.visible])
        if need:
            return _Eager.apply(self, *inputs)  # type: ignore[no-any-return]
        return self.forward(inputs, SAVE_NOTHING)[: self.visible]

    def gradients(
        self,
        inputs: Inputs,
        save: int,
        outputs: tuple[Tensor, ...],
        grads: Sequence[Tensor | None],
        backward: Callable[[Inputs, int, tuple[Tensor, ...], tuple[Tensor, ...]], Sequence[Tensor]],
    ) -> tuple[Any, ...]:
        """One entry per input: the gradient of each differentiable input that is not None, else None, from
        ``backward`` (``self.backward`` or its custom op) given ``grads`` of the visible outputs (a None one counts
        as zeros)."""
        filled = tuple(torch.zeros_like(y) if g is None else g for g, y in zip(grads, outputs[: self.visible]))
        result: list[Any] = [None] * len(inputs)
        for i, grad in zip(self.differentiable, backward(inputs, save, outputs, filled)):
            if inputs[i] is not None:
                result[i] = grad
        return tuple(result)

    def _register(self, forward_name: str, backward_name: str) -> tuple[Any, Any]:
        """Register the forward and backward custom ops (fake implementations and autograd included)."""
        n, count = len(self.names), self.outputs
        arguments = ", ".join(f"Tensor{'?' if opt else ''} {name}" for name, opt in zip(self.names, self.optional))
        results = "(" + ", ".join(["Tensor"] * count) + ")"
        gradients = "(" + ", ".join(["Tensor"] * len(self.differentiable)) + ")"
        outputs = ", ".join(f"Tensor out{j}" for j in range(count))
        grads = ", ".join(f"Tensor grad{j}" for j in range(self.visible))

        def run_forward(*args: Any) -> tuple[Tensor, ...]:
            return tuple(self.forward(args[:n], args[n]))

        def fake_forward(*args: Any) -> tuple[Tensor, ...]:
            return tuple(args[0].new_empty(shape) for shape in self.output_shapes(args[:n], args[n]))

        def run_backward(*args: Any) -> tuple[Tensor, ...]:
            inputs = args[:n]
            result = self.backward(inputs, args[-1], args[n : n + count], args[n + count : -1])
            return tuple(g if inputs[i] is not None else g.new_empty(0) for i, g in zip(self.differentiable, result))

        def fake_backward(*args: Any) -> tuple[Tensor, ...]:
            return tuple(
                torch.empty_like(x) if (x := args[i]) is not None else args[0].new_empty(0) for i in self.differentiable
            )

        forward = torch.library.custom_op(
            forward_name, run_forward, mutates_args=(), schema=f"({arguments}, int save) -> {results}"
        )
        forward.register_fake(fake_forward)
        backward = torch.library.custom_op(
            backward_name,
            run_backward,
            mutates_args=(),
            schema=f"({arguments}, {outputs}, {grads}, int save) -> {gradients}",
        )
        backward.register_fake(fake_backward)

        def launch_backward(inputs: Inputs, save: int, outputs: tuple[Tensor, ...], grads: tuple[Tensor, ...]) -> Any:
            return backward(*inputs, *outputs, *grads, save)

        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, ...]) -> None:
            ctx.present, ctx.save = tuple(x is not None for x in inputs[:n]), inputs[n]
            ctx.save_for_backward(*(x for x in inputs[:n] if x is not None), *output)

        def grad_fn(ctx: Any, *grads: Tensor | None) -> tuple[Any, ...]:
            inputs, outputs = _unpack(ctx.present, ctx.saved_tensors)
            return (*self.gradients(inputs, ctx.save, outputs, grads, launch_backward), None)

        forward.register_autograd(grad_fn, setup_context=setup_context)
        _REGISTERED[forward_name] = (forward, backward)
        return forward, backward


def _unpack(present: Sequence[bool], saved: Sequence[Tensor]) -> tuple[Inputs, tuple[Tensor, ...]]:
    """The inputs (None where absent) and the outputs a forward saved as its present inputs, then its outputs."""
    inputs: list[Tensor | None] = []
    at = 0
    for here in present:
        inputs.append(saved[at] if here else None)
        at += here
    return tuple(inputs), tuple(saved[at:])


class _Eager(torch.autograd.Function):
    """A ``NativeOp`` under eager autograd: the custom ops' calls without the dispatcher's per-call cost;
    ``torch.compile`` traces the custom ops instead."""

    @staticmethod
    def forward(ctx: Any, op: NativeOp, *inputs: Tensor | None) -> tuple[Tensor, ...]:  # type: ignore[override]
        save = op.saving(inputs)
        outputs = op.forward(inputs, save)
        ctx.op, ctx.save, ctx.present = op, save, [x is not None for x in inputs]
        ctx.save_for_backward(*[x for x in inputs if x is not None], *outputs)
        return outputs[: op.visible]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, *grads: Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        # (autograd passes zeros, never None, for an output without a gradient: no filling as in ``gradients``)
        op: NativeOp = ctx.op
        inputs, outputs = _unpack(ctx.present, ctx.saved_tensors)
        result: list[Any] = [None] * (len(inputs) + 1)
        for i, grad in zip(op.differentiable, op.backward(inputs, ctx.save, outputs, grads)):
            if inputs[i] is not None:
                result[i + 1] = grad
        return tuple(result)
