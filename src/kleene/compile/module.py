"""``compile(template, semiring, dim, backend=...)``: a template as a ``torch.nn.Module``.

A backend is a factory ``plan -> runner``; a runner maps ``(plan, slots, params, lengths, h0)``
to ``(output, final_state)`` with the semantics documented in ``kleene.compile.template``.
``register_backend`` adds one (the GPU backends register themselves this way).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NoReturn, Protocol

import torch
from torch import nn

from kleene.automata.semiring import Semiring
from kleene.compile.chunked import ChunkedRunner, Scan, check_scan, choose_scan
from kleene.compile.reference import check_shapes, run_reference, static_params
from kleene.compile.runtime.op import onnx_exporting
from kleene.compile.template import DEFAULT_STATE_BUDGET, Options, OutputMode, Plan, Template, lower
from kleene.data.checks import check_count, check_features, check_lengths
from kleene.errors import CompileError, DeployError

Tensor = torch.Tensor


#: Half-precision dtypes: the kernels compute them in float32 (states and accumulation) and return their own dtype.
HALF_DTYPES = (torch.float16, torch.bfloat16)


def kernel_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a kernel computes values of ``dtype`` in: float32 for a half-precision dtype, else ``dtype``."""
    return torch.float32 if dtype in HALF_DTYPES else dtype


class Runner(Protocol):
    def __call__(
        self, plan: Plan, slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None
    ) -> tuple[Tensor, Tensor]: ...


def _torch_backend(plan: Plan) -> Runner:
    return run_reference


def _cpp_backend(plan: Plan) -> Runner:
    from kleene.compile.runtime.cpu import cpp_runner

    return cpp_runner(plan)


_BACKENDS: dict[str, Callable[[Plan], Runner]] = {"torch": _torch_backend, "cpp": _cpp_backend}
#: The order ``backend="auto"`` tries on CPU tensors.
AUTO_ORDER: list[str] = ["cpp", "torch"]


def register_backend(name: str, factory: Callable[[Plan], Runner], auto_priority: int | None = None) -> None:
    """Make ``backend=name`` available; ``auto_priority`` (0 = first) also lets "auto" try it.

    Caution:
        A name already registered is replaced. ``factory`` is called with each ``Plan`` and must return a runner
        with the signature of the built-in ones (``kleene.compile.runtime``).
    """
    _BACKENDS[name] = factory
    if auto_priority is not None and name not in AUTO_ORDER:
        AUTO_ORDER.insert(auto_priority, name)


def backends() -> list[str]:
    """The names ``compile(..., backend=name)`` accepts, sorted.

    Caution:
        The GPU backends are listed once ``kleene.compile`` is imported, whether or not this machine can run them.
    """
    return sorted(_BACKENDS)


#: Integer dtypes of the same width, for bitwise comparison of floating tensors (NaN and -0.0 included).
_BITS = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def _same_bits(a: Tensor, b: Tensor) -> bool:
    """Whether ``a`` and ``b`` hold the same values bit for bit (same dtype, device and shape)."""
    if a.dtype != b.dtype or a.device != b.device or a.shape != b.shape or a.dtype not in _BITS:
        return False
    if a.numel() == 0:
        return True
    if not (a.is_contiguous() and b.is_contiguous()):
        return False
    return torch.equal(a.view(_BITS[a.dtype]), b.view(_BITS[b.dtype]))


@dataclass
class _Table:
    """The static parameter table computed from a snapshot of the constants, for computation in ``dtype``.

    ``jacobian`` (K, C, D), filled on demand: ``params[k, d]`` depends on ``constants[:, d]`` only, so the
    vector-Jacobian product of the table is ``grad_constants[c, d] = sum_k grad[k, d] * jacobian[k, c, d]``.
    """

    snapshot: Tensor
    dtype: torch.dtype
    device: torch.device
    table: Tensor
    jacobian: Tensor | None = None
    grad_seen: bool = False

    def matches(self, constants: Tensor, like: Tensor) -> bool:
        return self.dtype == like.dtype and self.device == like.device and _same_bits(self.snapshot, constants)


class _CachedParams(torch.autograd.Function):
    """The cached table as a function of the constants, differentiated through the cached Jacobian."""

    @staticmethod
    def forward(ctx: Any, constants: Tensor, entry: _Table) -> Tensor:
        assert entry.jacobian is not None
        ctx.save_for_backward(entry.jacobian)
        ctx.constants_dtype = constants.dtype
        return entry.table.view_as(entry.table)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (jacobian,) = ctx.saved_tensors
        return (grad[:, None, :] * jacobian).sum(0).to(ctx.constants_dtype), None


def _default_constant(semiring: Semiring) -> float:
    """Probability 0.5 as the semiring's element, in its storage form."""
    return semiring.stored_probability(0.5)


#: Why TorchScript cannot take a compiled recurrence, and what deploys one instead.
TORCHSCRIPT_REFUSAL = (
    "kleene's compiled recurrences do not run under TorchScript (torch.jit.script / torch.jit.trace): their "
    "kernels are Python-registered custom ops driven by Python plans. Deploy with torch.export.export(model, "
    "(tokens, lengths), dynamic_shapes=...) or as ONNX (kleene.nn.deploy.export_onnx, or `kleene export "
    "CHECKPOINT --format onnx`); see docs/deploy.md"
)


def refuse_torchscript(what: str) -> NoReturn:
    """Raise the one TorchScript error of kleene (``TORCHSCRIPT_REFUSAL``) for ``what``.

    Raises:
        DeployError: always."""
    raise DeployError(f"{what}: {TORCHSCRIPT_REFUSAL}")


class CompiledRecurrence(nn.Module):
    """``dim`` copies of a template's recurrence; the template's constants are parameters.

    ``forward(slots, lengths=None, h0=None) -> (output, final_state)`` with slots
    (B, T, S, dim) in the slot order ``template.slots``, output (B, T, dim) for
    ``output="steps"`` else (B, dim), and final_state (B, Q, dim). Values are in the
    semiring's storage form (max-times: log-weights). bfloat16/float16 slots are computed in
    float32 (states and accumulation) and the outputs are in the slots' dtype.

    ``scan``: "sequential" runs the backend's kernel over the steps in order; "chunked" cuts the sequences into
    chunks run in parallel and combined by a semiring scan (``kleene.compile.chunked``: same results, (Q + 2)×
    the work); "auto" picks per call by ``kleene.compile.chunked.choose_scan`` (threads, lanes B·D, Q, T), and
    is "sequential" on the torch backend (the oracle), under ``torch.compile`` and on a GPU (docs/gpu.md).
    """

    def __init__(
        self,
        template: Template,
        semiring: str | Semiring,
        dim: int,
        backend: str = "auto",
        options: Options | None = None,
        init: Mapping[str, float] | None = None,
        scan: Scan = "auto",
    ):
        super().__init__()
        if not isinstance(template, Template):
            raise CompileError(f"template must be a kleene.compile.Template, got {type(template).__name__}")
        self.template = template
        self.plan = lower(template, semiring, options)
        self.dim = check_count(dim, "dim", minimum=1, error=CompileError)
        init = dict(init or {})
        unknown = set(init) - set(template.constants)
        if unknown:
            raise CompileError(f"init names unknown constants {sorted(unknown)}; constants: {template.constants}")
        default = _default_constant(self.plan.semiring)
        values = torch.tensor([init.get(c, default) for c in template.constants], dtype=torch.float32)
        if template.constants:
            self.constants = nn.Parameter(values[:, None].repeat(1, dim))
        else:  # nothing to learn: a (0, dim) buffer, not a parameter without a gradient (DDP refuses those)
            self.register_buffer("constants", values[:, None].repeat(1, dim))
        self.scan = check_scan(scan)
        self._mapped = template.output_map is not None
        if self._mapped and self.scan == "chunked":
            raise CompileError(f"scan='chunked' runs templates without an output map; {template.name!r} has one")
        self.backend, self._runner = self._choose(backend)
        self._chunked: ChunkedRunner | None = None
        if self.scan == "chunked":
            self._chunked = ChunkedRunner(self.plan, _BACKENDS[self.backend])
        self._table: _Table | None = None
        self._bare: tuple[Plan, Runner] | None = None  # the plan without its output map (``mapped=False``)

    def __prepare_scriptable__(self) -> NoReturn:
        """``torch.jit.script`` calls this on every submodule first: it raises the one TorchScript error."""
        refuse_torchscript(f"torch.jit.script of a model holding {self.template.name}")

    def _choose(self, backend: str) -> tuple[str, Runner]:
        if backend != "auto":
            if backend not in _BACKENDS:
                raise CompileError(f"unknown backend {backend!r}; available: {', '.join(backends())} and 'auto'")
            return backend, _BACKENDS[backend](self.plan)
        failures = []
        for name in AUTO_ORDER:
            try:
                runner = _BACKENDS[name](self.plan)
            except Exception as exc:  # noqa: BLE001 - any failure to build means: try the next backend
                failures.append(f"{name}: {exc}")
                continue
            if failures:
                warnings.warn(
                    f"kleene.compile: using the {name} backend for {self.template.name} ({'; '.join(failures)})",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return name, runner
        raise CompileError(f"no backend works for {self.template.name}: {'; '.join(failures)}")  # pragma: no cover

    def params(self, like: Tensor) -> Tensor:
        """The plan's static parameter table (K, dim) for computation in ``like``'s dtype."""
        return static_params(self.plan, self.constants.to(like.dtype), like)

    def _jacobian(self, like: Tensor) -> Tensor:
        """d params[k, d] / d constants[c, d] as (K, C, D), one reverse pass per row of the table."""
        constants = self.constants.detach().to(like.dtype).requires_grad_()
        with torch.enable_grad():
            table = static_params(self.plan, constants, like)
            rows = []
            for k in range(table.shape[0]):
                if not table[k].requires_grad:  # a literal-only row (no constant reaches it)
                    rows.append(torch.zeros_like(constants))
                    continue
                (row,) = torch.autograd.grad(
                    table[k].sum(), [constants], retain_graph=True, allow_unused=True, materialize_grads=True
                )
                rows.append(row)
        if not rows:
            return like.new_zeros((0, constants.shape[0], like.shape[-1]))
        return torch.stack(rows, 0)

    def cached_params(self, like: Tensor) -> Tensor:
        """``params(like)``, reusing the table of the previous call while the constants hold the same bits.

        The cache is keyed on the constants' values (compared bit for bit on every call, so in-place changes,
        ``.data`` writes and optimizer steps are all seen), their dtype and device and ``like``'s. Under gradient,
        a table seen twice gets its Jacobian cached, so the backward of the table is one multiply-add; a changed
        table (a training step) is computed with its autograd graph as ``params`` does. Under ``torch.compile``
        and on the torch backend (whose gradients must stay differentiable to any order) it is ``params``.
        """
        constants = self.constants
        if torch.compiler.is_compiling() or self.backend == "torch":
            return self.params(like)
        needs_grad = torch.is_grad_enabled() and constants.requires_grad
        entry = self._table
        if entry is None or not entry.matches(constants, like):
            snapshot = constants.detach().clone()
            if needs_grad:
                table = self.params(like)
                self._table = _Table(snapshot, like.dtype, like.device, table.detach(), grad_seen=True)
                return table
            with torch.no_grad():
                table = self.params(like)
            self._table = _Table(snapshot, like.dtype, like.device, table)
            return table
        if not needs_grad:
            return entry.table
        if entry.jacobian is None:
            if not entry.grad_seen:
                entry.grad_seen = True
                return self.params(like)
            entry.jacobian = self._jacobian(like)
        return _CachedParams.apply(constants, entry)

    def forward(
        self,
        slots: Tensor,
        lengths: Tensor | None = None,
        h0: Tensor | None = None,
        output_constants: Tensor | None = None,
        mapped: bool = True,
    ) -> tuple[Tensor, Tensor]:
        """Run the recurrence; see the class docstring for the shapes.

        With an output map (``Template.output_map``) the output is the map's value h (B, T, dim), 0 at padding;
        ``output_constants`` (C, dim) are its constants (required when it has some). ``mapped=False`` returns the
        step outputs y instead (the same template compiled without its map, built on first use).

        Raises:
            CompileError: slots that are not a real floating (B, T, S, dim) tensor, lengths that are not one integer
                in 0..T per sequence, an h0 that is not a real floating (B, Q, dim) tensor, output constants
                that are missing, unexpected or not (C, dim), or a kernel that fails to build at its first call.
        """
        if torch.jit.is_tracing():
            refuse_torchscript(f"torch.jit.trace of a model holding {self.template.name}")
        plan, runner = self.plan, self._runner
        if not mapped and plan.output_map is not None:
            if self._bare is None:
                bare = lower(replace(self.template, output_map=None), plan.semiring, plan.options)
                self._bare = (bare, _BACKENDS[self.backend](bare))
            plan, runner = self._bare
        count = plan.num_output_constants
        if count or output_constants is not None:
            wanted = (count, self.dim)
            if output_constants is None or not torch.is_tensor(output_constants) or (
                tuple(output_constants.shape) != wanted
            ):
                got = None if output_constants is None else getattr(output_constants, "shape", output_constants)
                raise CompileError(f"output_constants must be a tensor of shape (C, dim) = {wanted}; got {got}")
        shape = f"(B, T, S={self.plan.num_slots}, D={self.dim})"
        check_features(slots, None, error=CompileError, name="slots", rank=4, shape=shape)
        if slots.shape[-1] != self.dim:
            raise CompileError(f"slots have D={slots.shape[-1]} dimensions; this module has dim={self.dim}")
        if h0 is not None:
            check_features(h0, self.dim, error=CompileError, name="h0", shape=f"(B, Q={self.plan.num_states}, D)")
        lengths = check_lengths(lengths, slots.shape[0], slots.shape[1], error=CompileError, device=slots.device)
        dtype = slots.dtype  # half precision runs in float32 (states, accumulation) and returns in its own dtype
        slots = slots.to(kernel_dtype(dtype))
        if h0 is not None and h0.dtype != slots.dtype:
            h0 = h0.to(slots.dtype)
        check_shapes(plan, slots, h0)
        like = slots.new_empty((1, self.dim))
        params = self.cached_params(like)
        if output_constants is not None and count:
            params = torch.cat([params, output_constants.to(params.dtype)], 0)
        if onnx_exporting():  # no kernel exports to ONNX: the plan's step as an ONNX Scan
            return run_reference(plan, slots, params, lengths, h0, scan=True)
        # an empty batch has no work to split: the reference runner returns the empty results of every backend
        if slots.shape[0] == 0:
            runner = run_reference
        elif plan is self.plan:
            runner = self._scan_runner(slots)
        out, final = runner(plan, slots, params, lengths, h0)
        return out.to(dtype), final.to(dtype)

    def _scan_runner(self, slots: Tensor) -> Runner:
        """The runner of this call: the backend's sequential one or the chunked scan (see ``scan``)."""
        if self.scan == "sequential" or (self.scan == "auto" and (self.backend == "torch" or self._mapped)):
            return self._runner
        if self.scan == "auto" and torch.compiler.is_compiling():  # a traced graph keeps one path: the sequential
            return self._runner
        if self.scan == "auto" and slots.device.type != "cpu":
            # on a GPU the chunked scan's launches cost what its parallelism saves: at (1 and 4, 16384, 512) on an
            # H200 it ran forward+backward at 0.63-1.04x the sequential kernel's speed (docs/gpu.md)
            return self._runner
        if self.scan == "auto":
            b, t, _, d = slots.shape
            if choose_scan(self.plan, b, t, d, torch.get_num_threads()) == "sequential":
                return self._runner
        if self._chunked is None:
            self._chunked = ChunkedRunner(self.plan, _BACKENDS[self.backend])
        return self._chunked

    def extra_repr(self) -> str:
        o = self.plan.options
        return (
            f"{self.template.name}, semiring={self.plan.semiring.name}, dim={self.dim}, backend={self.backend}, "
            f"restart={o.restart}, output={o.output}, epsilon_cap={o.epsilon_cap}, "
            f"bidirectional={o.bidirectional}, scan={self.scan}"
        )


def compile(
    template: Template,
    semiring: str | Semiring,
    dim: int,
    backend: str = "auto",
    *,
    restart: bool = False,
    output: OutputMode = "steps",
    epsilon_cap: int | None = None,
    bidirectional: bool = False,
    init: Mapping[str, float] | None = None,
    state_budget: int = DEFAULT_STATE_BUDGET,
    scan: Scan = "auto",
) -> CompiledRecurrence:
    """Compile ``template`` for ``semiring`` into a module running ``dim`` copies of it.

    ``backend``: "torch" (reference), "cpp" (generated C++), any registered backend, or
    "auto" (the first of ``AUTO_ORDER`` whose factory succeeds; one warning when it falls back). The cpp backend
    writes the source and looks for the compiler here, and compiles each entry point (direction, dtype) at its
    first call (``runtime.cpu.NativeKernel``): a compiler that is found but fails raises then, not here.
    See ``Options`` for ``restart``, ``output``, ``epsilon_cap`` and ``bidirectional``;
    ``init`` gives constants' initial values in storage form; ``state_budget`` bounds the bytes of forward
    states a generated kernel stores for its backward (beyond it, the backward recomputes from checkpoints);
    ``scan`` is "sequential", "chunked" or "auto" (see ``CompiledRecurrence``).

    Raises:
        CompileError: an unknown backend or scan, a backend that cannot build this plan, or a template that cannot
            be compiled for ``semiring``.
    """
    options = Options(
        restart=restart,
        output=output,
        epsilon_cap=epsilon_cap,
        bidirectional=bidirectional,
        state_budget=state_budget,
    )
    return CompiledRecurrence(template, semiring, dim, backend, options, init, scan)
