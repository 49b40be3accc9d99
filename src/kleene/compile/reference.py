"""The torch backend: a plain, differentiable implementation of a plan (the oracle for the others).

``static_params`` builds the per-dimension parameter table of a plan from the learned
constants (shared by every backend: kernels never see constants, only ``params``), and
``run_reference`` runs the recurrence of ``kleene.compile.template`` step by step with the
storage semiring's own operations, so autograd gives its gradient: the Forward recursion of
kleene.automata (``kleene.automata.recursion.run_forward``, lengths mask and prefix scores included)
with ``PlanStepper``, the step over the plan's moves and closure entries.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kleene.automata.recursion import masked_step, run_forward
from kleene.automata.semiring import Semiring
from kleene.automata.star import closure_matrix
from kleene.compile.functions import OUTPUT, torch_expression, torch_function
from kleene.compile.template import Factor, Plan
from kleene.errors import CompileError

Tensor = torch.Tensor


# --------------------------------------------------------------------------------------------
# Static parameters: constants -> params[k, d]
# --------------------------------------------------------------------------------------------
def _factor_value(plan: Plan, factor: Factor, constants: Tensor, like: Tensor) -> Tensor:
    """The static part (constants ⊗ literal) of a factor, one value per dimension."""
    s = plan.storage
    value = s.ones((like.shape[-1],), like=like)
    for c in factor.constants:
        value = s.times(value, constants[c])
    if factor.literal is not None:
        value = s.times(value, plan.semiring.to_storage(factor.literal))
    return value


def closure_tensor(plan: Plan, constants: Tensor, like: Tensor) -> Tensor:
    """The per-dimension epsilon closure ``C`` of shape (D, Q, Q), differentiable in ``constants``.

    Raises:
        DivergenceError: the closure of some dimension diverges (naming the dimension and a cycle of states).
    """
    s = plan.storage
    q, d = plan.num_states, like.shape[-1]
    eye = s.identity(q, like=like).expand(d, q, q)
    template = plan.template
    if not template.epsilons:
        return eye
    matrix = s.zeros((d, q, q), like=like)
    for arc in template.epsilons:
        value = _factor_value(plan, arc.weight, constants, like)
        cell = torch.zeros(q, q, dtype=torch.bool, device=like.device)
        cell[arc.src, arc.dst] = True
        matrix = torch.where(cell, s.plus(matrix, value[:, None, None]), matrix)
    cap = plan.options.epsilon_cap
    if cap is None and not any(e.src == e.dst and e.param is not None for e in plan.closure):
        cap = q - 1  # acyclic epsilons: paths have at most Q-1 arcs, so the capped sum is exact
    return closure_matrix(matrix, s, cap, template.states)


def static_params(plan: Plan, constants: Tensor, like: Tensor) -> Tensor:
    """The plan's parameter table ``params[k, d]`` (storage semiring values).

    Args:
        constants: (C, D) learned constants in storage form.
        like: any tensor of the wanted dtype and device whose last dimension is D.
    """
    s = plan.storage
    template = plan.template
    d = like.shape[-1]
    closure = closure_tensor(plan, constants, like) if template.epsilons else None
    columns = [s.zeros((d,), like=like) for _ in range(plan.num_states)]
    for q, w in template.initial:
        columns[q] = s.plus(columns[q], _factor_value(plan, w, constants, like))
    initial = torch.stack(columns, 1)
    start = s.matmul(initial[:, None, :], closure)[:, 0, :] if closure is not None else initial
    finals = dict(template.final)
    rows: list[Tensor] = []
    for source in plan.params:
        if source.kind == "move":
            assert isinstance(source.index, int)
            rows.append(_factor_value(plan, template.moves[source.index].weight, constants, like))
        elif source.kind == "closure":
            assert isinstance(source.index, tuple) and closure is not None
            rows.append(closure[:, source.index[0], source.index[1]])
        elif source.kind == "start":
            rows.append(start[:, source.index])
        else:
            assert isinstance(source.index, int)
            rows.append(_factor_value(plan, finals[source.index], constants, like))
    if not rows:
        return like.new_zeros((0, d))
    return torch.stack(rows, 0)


# --------------------------------------------------------------------------------------------
# Shapes and directions
# --------------------------------------------------------------------------------------------
def check_shapes(plan: Plan, slots: Tensor, h0: Tensor | None) -> None:
    """Validate the shapes of ``slots`` (B, T, S, D) and ``h0`` (B, Q, D) against ``plan``.

    Raises:
        CompileError: a shape that does not fit the plan (naming it).
    """
    if slots.dim() != 4:
        raise CompileError(f"slots must have shape (B, T, S, D); got {tuple(slots.shape)}")
    b, _, s, d = slots.shape
    if s != plan.num_slots:
        raise CompileError(
            f"{plan.template.name} has {plan.num_slots} slots {plan.template.slots}, but slots has S={s}"
        )
    if plan.options.bidirectional and d % 2:
        raise CompileError(f"bidirectional runs need an even number of dimensions, got D={d}")
    if h0 is not None and tuple(h0.shape) != (b, plan.num_states, d):
        raise CompileError(f"h0 must have shape (B, Q, D) = {(b, plan.num_states, d)}; got {tuple(h0.shape)}")


def check_inputs(plan: Plan, slots: Tensor, lengths: Tensor | None, h0: Tensor | None) -> Tensor:
    """Validate shapes and return lengths as int64 on the slots' device.

    Raises:
        CompileError: a shape or length that does not fit the plan (naming it).
    """
    check_shapes(plan, slots, h0)
    b, t = slots.shape[:2]
    if lengths is None:
        return torch.full((b,), t, dtype=torch.int64, device=slots.device)
    lengths = torch.as_tensor(lengths, device=slots.device).to(torch.int64)
    if tuple(lengths.shape) != (b,):
        raise CompileError(f"lengths must have shape (B,) = ({b},); got {tuple(lengths.shape)}")
    if b and not torch.compiler.is_compiling() and (int(lengths.min()) < 0 or int(lengths.max()) > t):
        raise CompileError(f"lengths must lie in [0, T={t}]; got min {int(lengths.min())}, max {int(lengths.max())}")
    return lengths


def reverse_valid(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each sequence's valid steps (axis 1), leaving its padding in place."""
    t = x.shape[1]
    steps = torch.arange(t, device=x.device)[None, :]
    index = torch.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)
    shape = index.shape + (1,) * (x.dim() - 2)
    return torch.gather(x, 1, index.view(shape).expand_as(x))


# --------------------------------------------------------------------------------------------
# The recurrence
# --------------------------------------------------------------------------------------------
def _reduce(s: Semiring, terms: list[Tensor], zero: Tensor) -> Tensor:
    if not terms:
        return zero
    if len(terms) == 1:
        return terms[0]
    return s.sum(torch.stack(terms, 0), axis=0)


def _run_one_direction(
    plan: Plan, slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, scan: bool = False
) -> tuple[Tensor, Tensor, Tensor]:
    """Left-to-right run: per-step outputs (B, T, D), final state (B, Q, D), last output (B, D); ``scan``: the
    steps as one traced ``scan`` (see ``_scan_one_direction``), else ``kleene.automata.recursion.run_forward``."""
    s = plan.storage
    b, t, _, d = slots.shape
    q = plan.num_states
    zero = s.zeros((b, d), like=slots)
    rows = params.unbind(0) if params.shape[0] else ()
    start = [rows[p] if p is not None else None for p in plan.start]

    def initial_state(j: int) -> Tensor:
        if h0 is not None:
            return h0[:, j]
        if plan.options.restart or start[j] is None:
            return zero
        return start[j].expand(b, d)  # type: ignore[union-attr]

    z = torch.stack([initial_state(j) for j in range(q)], 1)
    loaded = load_functions(plan, slots)
    functions = torch.stack(loaded, 2) if loaded else slots.new_zeros((b, t, 0, d))
    if scan:
        return _scan_one_direction(plan, slots, functions, params, lengths, z, zero)
    stepper = PlanStepper(plan, rows, z, zero)
    final, outputs = run_forward(stepper, s, zip(slots.unbind(1), functions.unbind(1)), lengths, per_step=True)
    steps = torch.stack(outputs, 1) if outputs else slots.new_zeros((b, 0, d))
    return steps, final, stepper.finish(final)


class PlanStepper:
    """Forward's steps over a plan's topology, for ``run_forward``: the state is (B, Q, D); a step reads one
    step's slots (B, S, D) and weight-function values (B, F, D) and computes ``close(z ⊗ M_t)`` with the plan's
    moves as ``M_t`` (per-step, per-dimension factors) and its closure entries as the closure; ``finish`` is the
    final weights' sum (the step output)."""

    def __init__(self, plan: Plan, rows: Sequence[Tensor], initial: Tensor, zero: Tensor):
        self.plan, self.rows, self.initial, self.zero = plan, tuple(rows), initial, zero
        self.semiring = plan.storage
        self.restart = [rows[p] if p is not None else None for p in plan.start]

    def start(self) -> Tensor:
        return self.initial

    def step(self, state: Tensor, inputs: tuple[Tensor, Tensor], position: object) -> Tensor:
        x, f = inputs
        new = _step(self.plan, self.rows, self.restart, list(state.unbind(1)), x.unbind(1), f.unbind(1), self.zero)
        return torch.stack(new, 1)

    def finish(self, state: Tensor) -> Tensor:
        return _emit(self.plan, self.rows, list(state.unbind(1)), self.zero)


def _step(
    plan: Plan,
    rows: tuple[Tensor, ...],
    start: list[Tensor | None],
    z: list[Tensor],
    xs: Sequence[Tensor],
    fs: Sequence[Tensor],
    zero: Tensor,
) -> list[Tensor]:
    """One step of the recurrence: the new state (Q tensors (B, D)) from ``z``, the step's slots ``xs`` (S of
    them) and weight functions ``fs``, before the length mask."""
    s = plan.storage
    q = plan.num_states
    z_in = [s.plus(z[j], start[j]) if plan.options.restart and start[j] is not None else z[j] for j in range(q)]
    terms: list[list[Tensor]] = [[] for _ in range(q)]
    for move in plan.moves:
        value = z_in[move.src]
        for slot in move.slots:
            value = s.times(value, xs[slot])
        for f in move.functions:
            value = s.times(value, fs[f])
        if move.param is not None:
            value = s.times(value, rows[move.param])
        terms[move.dst].append(value)
    pre = [_reduce(s, terms[j], zero) for j in range(q)]
    closed: list[list[Tensor]] = [[] for _ in range(q)]
    for entry in plan.closure:
        value = pre[entry.src] if entry.param is None else s.times(pre[entry.src], rows[entry.param])
        closed[entry.dst].append(value)
    return [_reduce(s, closed[j], zero) for j in range(q)]


def _scan_one_direction(
    plan: Plan,
    slots: Tensor,
    functions: Tensor,
    params: Tensor,
    lengths: Tensor,
    z: Tensor,
    zero: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """``_run_one_direction`` with its loop over the steps as torch's ``scan`` operator: one traced step (the
    recursion's ``masked_step``) whatever the length, which ``torch.onnx.export`` writes as an ONNX ``Scan``
    (dynamic batch and length). The step reads ``params`` whole (its rows are views, and the operator takes no
    aliased inputs)."""
    from torch._higher_order_ops.scan import scan as scan_steps

    t = slots.shape[1]

    def body(state: Tensor, inputs: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        x, f, step = inputs
        rows = params.unbind(0) if params.shape[0] else ()
        kept, output = masked_step(PlanStepper(plan, rows, state, zero), plan.storage, state, (x, f), step, lengths)
        return kept, output

    steps_in = torch.arange(t, device=slots.device)
    final, outputs = scan_steps(body, z, (slots.transpose(0, 1), functions.transpose(0, 1), steps_in))
    rows = params.unbind(0) if params.shape[0] else ()
    return outputs.transpose(0, 1), final, _emit(plan, rows, list(final.unbind(1)), zero)


def load_functions(plan: Plan, slots: Tensor) -> list[Tensor]:
    """The stored values (B, T, D) of the plan's weight functions on ``slots`` (B, T, S, D), differentiable."""
    names = plan.template.slots
    out = []
    for load in plan.loads:
        value = torch_function(load, names)(*[slots[:, :, i] for i in load.inputs])
        out.append(torch.as_tensor(value, dtype=slots.dtype, device=slots.device).expand(slots[:, :, 0].shape))
    return out


def map_output(plan: Plan, steps: Tensor, slots: Tensor, params: Tensor, lengths: Tensor) -> Tensor:
    """The plan's output map on the step outputs ``steps`` (B, T, D), ``slots`` (B, T, S, D) and the output
    constants (the rows of ``params`` after the static ones); 0 at padding, differentiable.

    Caution: ``plan.output_map`` must not be None."""
    om = plan.output_map
    assert om is not None
    valid = (torch.arange(steps.shape[1], device=steps.device)[None, :] < lengths[:, None])[..., None]
    y = torch.where(valid, steps, torch.zeros_like(steps))  # padding holds the semiring zero (maybe infinite)
    names = (OUTPUT, *plan.template.slots, *om.constants)
    constants = [params[plan.output_constant(c)] for c in range(len(om.constants))]
    h = torch_expression(om.expr, names)(y, *slots.unbind(2), *constants)
    h = torch.as_tensor(h, dtype=steps.dtype, device=steps.device).expand_as(steps)
    return torch.where(valid, h, torch.zeros_like(h))


def _emit(plan: Plan, rows: tuple[Tensor, ...], z: list[Tensor], zero: Tensor) -> Tensor:
    s = plan.storage
    terms = [z[q] if p is None else s.times(z[q], rows[p]) for q, p in plan.final]
    return _reduce(s, terms, zero)


def run_reference(
    plan: Plan, slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None = None, scan: bool = False
) -> tuple[Tensor, Tensor]:
    """Run ``plan`` on ``slots`` (B, T, S, D) with ``params`` (K, D): (output, final state (B, Q, D)).

    The output is (B, T, D) for ``output="steps"`` and (B, D) for "sum" and "last". ``scan``: the steps as torch's
    ``scan`` operator (for ``torch.onnx.export``: an ONNX ``Scan``; T >= 1), else a Python loop over them.
    Note: ``lengths`` must already be checked (``check_inputs``).
    """
    if plan.options.bidirectional:
        half = slots.shape[-1] // 2
        h0_parts = (None, None) if h0 is None else (h0[..., :half], h0[..., half:])
        fwd = _run_one_direction(plan, slots[..., :half], params[:, :half], lengths, h0_parts[0], scan)
        bwd = _run_one_direction(
            plan, reverse_valid(slots[..., half:], lengths), params[:, half:], lengths, h0_parts[1], scan
        )
        bwd = (reverse_valid(bwd[0], lengths), bwd[1], bwd[2])
        steps, final, last = (torch.cat([f, r], -1) for f, r in zip(fwd, bwd))
    else:
        steps, final, last = _run_one_direction(plan, slots, params, lengths, h0, scan)
    output = plan.options.output
    if output == "steps":
        return (steps if plan.output_map is None else map_output(plan, steps, slots, params, lengths)), final
    if output == "last":
        return last, final
    s = plan.storage
    if steps.shape[1] == 0:
        return s.zeros(last.shape, like=last), final
    return s.sum(steps, axis=1), final
