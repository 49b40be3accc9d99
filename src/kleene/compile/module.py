"""``compile(template, semiring, dim, backend=...)``: a template as a ``torch.nn.Module``.

A backend is a factory ``plan -> runner``; a runner maps ``(plan, slots, params, lengths, h0)``
to ``(output, final_state)`` with the semantics documented in ``kleene.compile.template``.
``register_backend`` adds one (the GPU backends register themselves this way).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Protocol

import torch
from torch import nn

from kleene.automata.semiring import Semiring
from kleene.compile.reference import check_inputs, run_reference, static_params
from kleene.compile.template import Options, OutputMode, Plan, Template, lower
from kleene.data.checks import check_count, check_features, check_lengths
from kleene.errors import CompileError

Tensor = torch.Tensor


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
    """Make ``backend=name`` available; ``auto_priority`` (0 = first) also lets "auto" try it."""
    _BACKENDS[name] = factory
    if auto_priority is not None and name not in AUTO_ORDER:
        AUTO_ORDER.insert(auto_priority, name)


def backends() -> list[str]:
    return sorted(_BACKENDS)


def _default_constant(semiring: Semiring) -> float:
    """Probability 0.5 as the semiring's element, in its storage form."""
    return float(semiring.to_storage(semiring.from_probability(0.5)))


class CompiledRecurrence(nn.Module):
    """``dim`` copies of a template's recurrence; the template's constants are parameters.

    ``forward(slots, lengths=None, h0=None) -> (output, final_state)`` with slots
    (B, T, S, dim) in the slot order ``template.slots``, output (B, T, dim) for
    ``output="steps"`` else (B, dim), and final_state (B, Q, dim). Values are in the
    semiring's storage form (max-times: log-weights). bfloat16/float16 slots are computed in
    float32 and the outputs are float32.
    """

    def __init__(
        self,
        template: Template,
        semiring: str | Semiring,
        dim: int,
        backend: str = "auto",
        options: Options | None = None,
        init: Mapping[str, float] | None = None,
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
        self.backend, self._runner = self._choose(backend)

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

    def forward(self, slots: Tensor, lengths: Tensor | None = None, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Run the recurrence; see the class docstring for the shapes.

        Raises:
            CompileError: slots that are not a real floating (B, T, S, dim) tensor, lengths that are not one integer
                in 0..T per sequence, or an h0 that is not a real floating (B, Q, dim) tensor.
        """
        shape = f"(B, T, S={self.plan.num_slots}, D={self.dim})"
        check_features(slots, None, error=CompileError, name="slots", rank=4, shape=shape)
        if slots.shape[-1] != self.dim:
            raise CompileError(f"slots have D={slots.shape[-1]} dimensions; this module has dim={self.dim}")
        if h0 is not None:
            check_features(h0, self.dim, error=CompileError, name="h0", shape=f"(B, Q={self.plan.num_states}, D)")
        lengths = check_lengths(lengths, slots.shape[0], slots.shape[1], error=CompileError, device=slots.device)
        if slots.dtype not in (torch.float32, torch.float64):
            slots = slots.float()
        if h0 is not None and h0.dtype != slots.dtype:
            h0 = h0.to(slots.dtype)
        checked = check_inputs(self.plan, slots, lengths, h0)
        like = slots.new_empty((1, self.dim))
        # an empty batch has no work to split: the reference runner returns the empty results of every backend
        runner = run_reference if slots.shape[0] == 0 else self._runner
        return runner(self.plan, slots, self.params(like), checked, h0)

    def extra_repr(self) -> str:
        o = self.plan.options
        return (
            f"{self.template.name}, semiring={self.plan.semiring.name}, dim={self.dim}, backend={self.backend}, "
            f"restart={o.restart}, output={o.output}, epsilon_cap={o.epsilon_cap}, "
            f"bidirectional={o.bidirectional}"
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
) -> CompiledRecurrence:
    """Compile ``template`` for ``semiring`` into a module running ``dim`` copies of it.

    ``backend``: "torch" (reference), "cpp" (generated C++), any registered backend, or
    "auto" (the first of ``AUTO_ORDER`` that builds; one warning when it falls back).
    See ``Options`` for ``restart``, ``output``, ``epsilon_cap`` and ``bidirectional``;
    ``init`` gives constants' initial values in storage form.

    Raises:
        CompileError: an unknown backend, a backend that cannot build this plan, or a template that cannot be
            compiled for ``semiring``.
    """
    options = Options(restart=restart, output=output, epsilon_cap=epsilon_cap, bidirectional=bidirectional)
    return CompiledRecurrence(template, semiring, dim, backend, options, init)
