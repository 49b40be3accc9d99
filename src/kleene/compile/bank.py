"""``CompiledBank``: several compiled recurrences (a SoPa bank's pattern groups) run by one generated kernel call
(one launch per direction on a GPU), on the recurrences' backend: ``cpp``, ``triton`` or ``cuda``.

The recurrences keep their parameters (a bank is not a module and owns none: it reads each recurrence's static
parameter table, ``CompiledRecurrence.cached_params``, at every call); the bank fixes the layout of its rows
(``kleene.compile.codegen.bank.BankLayout``: each recurrence's block padded to whole vectors) and its kernel.
Slots come in that layout: ``pack_slots`` lays per-recurrence slots out, or a caller builds the rows directly
(SoPa gathers them from a table of per-word rows).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from kleene.compile.codegen.bank import BankLayout
from kleene.compile.module import CompiledRecurrence, kernel_dtype, refuse_torchscript
from kleene.compile.template import Plan
from kleene.data.checks import check_lengths
from kleene.errors import CompileError

Tensor = torch.Tensor


def prebuild(plans: Sequence[Plan], dtype: torch.dtype, backward: bool) -> None:
    """Build the cpp kernels of ``plans`` for ``dtype`` (their forward entry points, and their backward ones if
    ``backward``) concurrently (``runtime.cpu.build_many``), for a model that is about to run them all: their first
    calls then only load them.

    Raises:
        CompileError: no compiler, a dtype other than float32 and float64, or a kernel that does not build.
    """
    from kleene.compile.codegen.entries import STORED_KINDS, mode_kinds
    from kleene.compile.runtime.cpu import build_many, load_kernel

    requests = []
    for plan in plans:
        kernel = load_kernel(plan)[1]
        # a training step stores the states where the kernel can and they fit its budget (runtime.cpu
        # .backward_strategy): the usual case, so that mode is the one built ahead; a forward alone saves nothing
        kinds = mode_kinds(kernel.kinds == STORED_KINDS) if backward else mode_kinds(False)[:1]
        requests += kernel.requests(dtype, kinds)
    build_many(requests)


def bank_runs_on(backend: str, device: torch.device) -> bool:
    """Whether a bank of recurrences on ``backend`` runs its one kernel on tensors on ``device``: ``cpp`` on the
    CPU, ``cuda`` on a GPU, ``triton`` on a GPU (or on the CPU in Triton's interpreter, ``TRITON_INTERPRET=1``)."""
    if backend == "cpp":
        return device.type == "cpu"
    if backend == "cuda":
        return device.type == "cuda"
    if backend == "triton":
        from kleene.compile.runtime.gpu import triton_interpreting

        return device.type == "cuda" or (device.type == "cpu" and triton_interpreting())
    return False


def bank_backend(recurrences: Sequence[CompiledRecurrence]) -> str | None:
    """The backend every one of ``recurrences`` runs on when it is one a bank runs on (cpp, triton, cuda), else None
    (no recurrences, several backends, or another one)."""
    from kleene.compile.runtime.bank import BANK_BACKENDS

    backends = {r.backend for r in recurrences}
    return backends.pop() if len(backends) == 1 and backends <= set(BANK_BACKENDS) else None


class CompiledBank:
    """One kernel running ``recurrences`` (``CompiledRecurrence``s with ``output="sum"``, all on one of the backends
    cpp, triton and cuda) side by side over the same sequences; ``align``: the lane alignment of its blocks
    (default: the one padding fewest lanes, ``kleene.compile.codegen.bank.choose_align``).

    Constructing a bank builds nothing: its kernel's entry points are built at their first call
    (``runtime.cpu.NativeKernel``; the CUDA launchers at their first launch).

    Raises:
        CompileError: no recurrences, recurrences on different backends or on another backend, one bidirectional
            or whose output is not "sum", or no compiler for the backend.
    """

    def __init__(self, recurrences: Sequence[CompiledRecurrence], align: int | None = None):
        from kleene.compile.runtime.bank import BANK_BACKENDS, bank_runner

        backend = bank_backend(recurrences)
        if recurrences and backend is None:
            backends = ", ".join(sorted({r.backend for r in recurrences}))
            raise CompileError(f"a bank runs recurrences of one backend among {BANK_BACKENDS}; got {backends}")
        self.layout = BankLayout.of([r.plan for r in recurrences], [r.dim for r in recurrences], align)
        assert backend is not None  # BankLayout.of refuses no recurrences
        #: where the bank's kernel runs: its recurrences' backend
        self.backend = backend
        self._run = bank_runner(self.layout, self.backend)
        widths, counts = self.layout.widths, self.layout.counts
        lanes = [torch.arange(c) + o for c, o in zip(counts, self.layout.lane_offsets)]
        #: the output columns holding real lanes (not padding), in recurrence order
        self.columns = torch.cat(lanes)
        self._pads = [w - c for w, c in zip(widths, counts)]

    def real_lanes(self, out: Tensor) -> list[Tensor]:
        """Each recurrence's real lanes (B, count_g) of the bank's output ``out`` (B, WT), in recurrence order: the
        same values as ``out[:, self.columns]`` split by counts, cut at Python offsets (so that ``torch.compile``
        sees no tensor of indices, whose length it could confuse with the batch size)."""
        return [out.narrow(1, o, c) for o, c in zip(self.layout.lane_offsets, self.layout.counts)]

    @property
    def row(self) -> int:
        """R: the values of one (sequence, step) row of the bank's slots."""
        return self.layout.slot_offsets[-1]

    def pad_lanes(self, values: Sequence[Tensor]) -> Tensor:
        """Per-recurrence tensors (..., n_g, count_g) as the bank's rows (..., sum n_g * width_g): each block's
        lanes padded with zeros to its width (their gradient is dropped)."""
        blocks = [nn.functional.pad(v, (0, pad)) if pad else v for v, pad in zip(values, self._pads)]
        return torch.cat([b.flatten(-2) for b in blocks], -1)

    def pack_slots(self, slots: Sequence[Tensor]) -> Tensor:
        """Per-recurrence slots (B, T, S_g, count_g) as the bank's slots (B, T, R)."""
        return self.pad_lanes(slots)

    def params(self, recurrences: Sequence[CompiledRecurrence], like: Tensor) -> Tensor:
        """The bank's parameter table (KT,): each recurrence's ``cached_params`` (K_g, count_g), padded."""
        tables = [r.cached_params(like.new_empty((1, r.dim))) for r in recurrences]
        return self.pad_lanes(tables)

    def __call__(
        self, recurrences: Sequence[CompiledRecurrence], slots: Tensor, lengths: Tensor, h0: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """``(out (B, WT), final (B, QT))`` of the bank's ``recurrences`` (the ones it was built from) on ``slots``
        (B, T, R) and ``h0`` (B, QT) in the bank's layout; ``out[:, columns]`` are the recurrences' outputs
        (B, sum count_g) in order.

        Raises:
            CompileError: slots on a device the backend does not run on (``bank_runs_on``), slots or h0 of the wrong
                shape or dtype, lengths not in 0..T, or a kernel that fails to build at its first call.
        """
        if torch.jit.is_tracing():
            refuse_torchscript("torch.jit.trace of a model holding a bank of compiled recurrences")
        if not bank_runs_on(self.backend, slots.device):
            raise CompileError(f"a bank on the {self.backend} backend cannot run on tensors on {slots.device}")
        if slots.dim() != 3 or slots.shape[-1] != self.row or not slots.dtype.is_floating_point:
            raise CompileError(
                f"bank slots must be floating (B, T, R={self.row}); got {slots.dtype} {tuple(slots.shape)}"
            )
        dtype = slots.dtype  # half precision runs in float32 and returns in its own dtype
        if dtype != kernel_dtype(dtype):
            out, final = self(recurrences, slots.to(kernel_dtype(dtype)), lengths, None if h0 is None else h0.float())
            return out.to(dtype), final.to(dtype)
        qt = self.layout.state_offsets[-1]
        if h0 is not None and (tuple(h0.shape) != (slots.shape[0], qt) or h0.dtype != slots.dtype):
            raise CompileError(f"bank h0 must be {slots.dtype} ({slots.shape[0]}, {qt}); got {tuple(h0.shape)}")
        lengths = check_lengths(lengths, slots.shape[0], slots.shape[1], error=CompileError, device=slots.device)
        return self._run(slots, self.params(recurrences, slots), lengths, h0)
