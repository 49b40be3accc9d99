"""The one code writer: a plan's step and its reverse mode, derived once and spelled in a dialect.

A **dialect** is a table of spellings (statements, conditionals, numbers, loads and stores of one
lane, the semiring's ⊕/⊗ through ``Semiring.kernel_algebra()``) plus the kernel skeleton of its
target. ``LaneWriter`` writes the straight-line code of one lane -- one step of the recurrence of
``kleene.compile.template`` and the reverse mode of that step -- in any dialect; the C++ CPU kernels
(``codegen.cpp``) wrap it in a thread pool with checkpoints, and ``lane_kernels`` wraps it in the
one-lane-per-thread skeleton that CUDA (``codegen.cuda``) and Triton (``codegen.triton``) share.

The reverse mode of an n-ary ⊕ or ⊗ follows from its kernel operation's ``rule`` (see
``kleene.automata.semiring.KernelOp``): ``sum`` (the gradient to every operand), ``product`` (times
the other operands), ``softmax`` (times ``exp(operand - result)``) or ``select`` (all of it to the
first operand equal to the result: the argmax route of max and min).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from kleene.automata.semiring import KernelOp
from kleene.compile.functions import OUTPUT, Spelling
from kleene.compile.template import Plan


class Dialect:
    """Spelling of values, statements and the kernel algebra in one target language: a table of format
    strings (class attributes) that a new dialect fills in.

    ``zero``/``one`` are the storage semiring's zero and one and ``fzero`` the number 0 of gradients,
    each as an expression of the lane's shape (a vector in Triton).

    Raises:
        CompileError: (on construction) the plan's semiring has no kernel realisation.
    """

    #: The key of ``KernelOp.spellings``.
    name = ""
    zero = "ZERO"
    one = "ONE"
    fzero = "FZERO"
    #: Numbers: +inf, -inf and a finite ``{value}``.
    inf = neg_inf = finite = ""
    #: Statements binding a new name, by kind ("float", "int", "bool"), ``{name}``, ``{expr}``.
    let_forms: ClassVar[dict[str, str]] = {}
    #: Declaring and updating a mutable float variable.
    var_form = assign_form = ""
    #: Expressions: ``{cond}``, ``{a}``, ``{b}``; ``{x}``.
    where_form = exp_form = ""
    #: Weight functions (``kleene.compile.functions.CALLS``): each call of ``{x}`` (NaN in, NaN out), and a number
    #: ``{value}`` (spelled by ``number``) in the lane's type.
    call_forms: ClassVar[dict[str, str]] = {}
    typed_form = "{value}"
    #: The one-lane skeleton (CUDA, Triton): the lane's value at ``{pointer}[{offset} + lane]``, the same where
    #: the scalar ``{cond}`` holds (only then read) else ``{fallback}``, a store of ``{value}``.
    load_form = load_if_form = store_form = ""
    #: Blocks: a loop of ``{var}`` over ``0, {step}, 2·{step}, ...`` below ``{stop}``, a conditional, and the line
    #: closing a block (``""``: indentation alone closes it).
    for_form = if_form = close_form = ""
    #: Conditions of the skeleton: an initial state is given (and not), states are saved (forward).
    has_h0 = no_h0 = save_states = ""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.kernel = plan.semiring.kernel_algebra()

    def plus(self, a: str, b: str) -> str:
        return self.kernel.plus.spell(self.name, a, b)

    def times(self, a: str, b: str) -> str:
        return self.kernel.times.spell(self.name, a, b)

    def number(self, value: float) -> str:
        """A float literal (``±inf`` included)."""
        if math.isinf(value):
            return self.inf if value > 0 else self.neg_inf
        value = float(value)
        return self.finite.format(value=int(value) if value.is_integer() else repr(value))

    def let(self, name: str, expr: str, kind: str = "float") -> str:
        return self.let_forms[kind].format(name=name, expr=expr)

    def var(self, name: str, expr: str) -> str:
        return self.var_form.format(name=name, expr=expr)

    def assign(self, name: str, expr: str) -> str:
        return self.assign_form.format(name=name, expr=expr)

    def where(self, cond: str, a: str, b: str) -> str:
        return self.where_form.format(cond=cond, a=a, b=b)

    def exp(self, x: str) -> str:
        return self.exp_form.format(x=x)

    def load(self, pointer: str, offset: str) -> str:
        return self.load_form.format(pointer=pointer, offset=offset)

    def load_if(self, cond: str, pointer: str, offset: str, fallback: str) -> str:
        return self.load_if_form.format(cond=cond, pointer=pointer, offset=offset, fallback=fallback)

    def store(self, pointer: str, offset: str, value: str) -> str:
        return self.store_form.format(pointer=pointer, offset=offset, value=value)

    def open_for(self, var: str, stop: str, step: int = 1) -> str:
        return self.for_form.format(var=var, stop=stop, step=step)

    def open_if(self, cond: str) -> str:
        return self.if_form.format(cond=cond)


#: The name of the static parameter table (K, D) in the kernels' argument lists. Not ``params``: Triton's launcher
#: binds a kernel's arguments in a generated function whose own local ``params`` would shadow it (Triton 3.5-3.6:
#: "failed to specialize argument of type: dict"); tests/compile/test_triton_names.py checks every generated kernel.
PARAM_TABLE = "param_table"
#: The lane kernels' arguments before the sizes (CUDA and Triton; ``kleene.compile.runtime.gpu`` passes them in order).
FORWARD_ARGS = ("slots", PARAM_TABLE, "lengths", "h0", "out", "final_state", "states")
BACKWARD_ARGS = (
    "slots",
    PARAM_TABLE,
    "lengths",
    "h0",
    "states",
    "out",
    "grad_out",
    "grad_final",
    "grad_slots",
    "grad_params",
    "grad_h0",
)


def param(k: int) -> str:
    """The register holding static parameter k (loaded once, before the time loop)."""
    return f"p{k}"


def slot(s: int) -> str:
    """The register holding slot s of the current step."""
    return f"x{s}"


def param_grad(k: int) -> str:
    """The accumulator of static parameter k's gradient."""
    return f"gp{k}"


@dataclass
class StepNames:
    """Names one step binds: inputs of the moves, their terms, pre-closure and new states."""

    z_in: list[str]
    move_factors: list[list[str]]
    pre_terms: list[list[str]]
    closure_terms: list[list[str]]
    new: list[str]
    tag: str
    #: The spelling of the step's weight functions (its bound calls are reused by the reverse mode).
    loads: Spelling | None = None


class LaneWriter:
    """Straight-line code of one lane (one dimension of one sequence) in a dialect.

    Statements are appended to ``lines`` at the current ``depth``; the caller writes loads, stores and
    loops around them. ``param``/``slot``/``param_grad`` name the registers of static parameters, slots
    and parameter-gradient accumulators (the C++ CPU kernel reads them from memory instead).
    """

    def __init__(
        self,
        plan: Plan,
        dialect: Dialect,
        indent: str,
        param: Callable[[int], str] = param,
        slot: Callable[[int], str] = slot,
        param_grad: Callable[[int], str] = param_grad,
    ):
        self.plan, self.d, self.indent = plan, dialect, indent
        self.param, self.slot, self.param_grad = param, slot, param_grad
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append(self.indent * self.depth + line)

    def open(self, line: str) -> None:
        self(line)
        self.depth += 1

    def close(self, tail: str = "") -> None:
        self.depth -= 1
        if self.d.close_form:
            self(self.d.close_form + tail)

    # -- algebra helpers ----------------------------------------------------------------------
    @staticmethod
    def _fold(terms: list[str], combine: Callable[[str, str], str], empty: str) -> str:
        """``terms`` combined left to right by ``combine`` (``empty`` when there are none)."""
        return functools.reduce(combine, terms) if terms else empty

    def product(self, factors: list[str]) -> str:
        return self._fold(factors, self.d.times, self.d.one)

    def reduce(self, terms: list[str]) -> str:
        return self._fold(terms, self.d.plus, self.d.zero)

    def add(self, grads: list[str]) -> str:
        """The ordinary sum of gradient expressions."""
        return " + ".join(grads) if grads else self.d.fzero

    def accumulate(self, name: str, grad: str) -> None:
        self(self.d.assign(name, f"{name} + {grad}"))

    # -- forward ------------------------------------------------------------------------------
    def step(self, z: list[str], tag: str = "") -> StepNames:
        """Emit one step from states ``z``; returns the names it bound (each suffixed with ``tag``)."""
        plan, d = self.plan, self.d
        q = plan.num_states
        z_in = []
        for j in range(q):
            p = plan.start[j]
            if plan.options.restart and p is not None:
                self(d.let(f"zin{j}{tag}", d.plus(z[j], self.param(p))))
                z_in.append(f"zin{j}{tag}")
            else:
                z_in.append(z[j])
        loads = self.loads(tag)
        values = [loads.bind(load.expr) for load in plan.loads]
        move_factors: list[list[str]] = []
        pre_terms: list[list[str]] = [[] for _ in range(q)]
        for m, move in enumerate(plan.moves):
            factors = [z_in[move.src]] + [self.slot(s) for s in move.slots] + [values[f] for f in move.functions]
            if move.param is not None:
                factors.append(self.param(move.param))
            move_factors.append(factors)
            self(d.let(f"mv{m}{tag}", self.product(factors)))
            pre_terms[move.dst].append(f"mv{m}{tag}")
        for j in range(q):
            self(d.let(f"pre{j}{tag}", self.reduce(pre_terms[j])))
        closure_terms: list[list[str]] = [[] for _ in range(q)]
        for c, entry in enumerate(plan.closure):
            if entry.param is None:
                closure_terms[entry.dst].append(f"pre{entry.src}{tag}")
            else:
                self(d.let(f"cl{c}{tag}", d.times(f"pre{entry.src}{tag}", self.param(entry.param))))
                closure_terms[entry.dst].append(f"cl{c}{tag}")
        for j in range(q):
            self(d.let(f"n{j}{tag}", self.reduce(closure_terms[j])))
        return StepNames(z_in, move_factors, pre_terms, closure_terms, [f"n{j}{tag}" for j in range(q)], tag, loads)

    def loads(self, tag: str) -> Spelling:
        """A spelling of weight functions over this step's slots, binding names ``ld<k><tag>``."""
        index = {name: s for s, name in enumerate(self.plan.template.slots)}
        return Spelling(self.d, self.slot, index, lambda name, expr: self(self.d.let(name, expr)), "ld", tag)

    def emit_terms(self, z: list[str]) -> list[str]:
        """The terms of ``y = ⊕_(q, ρ) z[q] ⊗ ρ``."""
        return [z[q] if p is None else self.d.times(z[q], self.param(p)) for q, p in self.plan.final]

    def emit(self, z: list[str]) -> str:
        """``y = ⊕_(q, ρ) z[q] ⊗ ρ`` as an expression."""
        return self.reduce(self.emit_terms(z))

    # -- the output map (``Template.output_map``) ----------------------------------------------
    def output_spelling(self, y: str, tag: str) -> Spelling:
        """A spelling of the output map's expressions with ``y`` the step output, binding names ``om<k><tag>``."""
        plan = self.plan
        om = plan.output_map
        assert om is not None
        names = (OUTPUT, *plan.template.slots, *om.constants)
        spelled = [y] + [self.slot(s) for s in range(plan.num_slots)]
        spelled += [self.param(plan.output_constant(c)) for c in range(len(om.constants))]
        index = {name: k for k, name in enumerate(names)}
        return Spelling(self.d, spelled.__getitem__, index, lambda name, expr: self(self.d.let(name, expr)), "om", tag)

    def map_output(self, y: str, tag: str = "") -> str:
        """The output map's value h at step output ``y`` (the step's slot registers), as an expression; ``y`` itself
        without a map."""
        if self.plan.output_map is None:
            return y
        return self.output_spelling(y, tag)(self.plan.output_map.expr)

    def map_output_backward(self, y: str, gh: str, tag: str = "") -> tuple[str, dict[int, str]]:
        """Reverse of ``h = map(y, slots, constants)`` given ``gh``: adds the constants' gradients to their
        accumulators; returns (the gradient of y, the gradient of each slot the map reads, by slot index)."""
        om = self.plan.output_map
        if om is None:
            return gh, {}
        spell = self.output_spelling(y, tag)
        self(self.d.let(f"omg{tag}", gh))
        gy = f"omg{tag} * {spell(om.y_grad)}"
        slot_grads = {s: f"omg{tag} * {spell(g)}" for s, g in zip(om.slots, om.slot_grads)}
        for c, g in enumerate(om.constant_grads):
            self.accumulate(self.param_grad(self.plan.output_constant(c)), f"omg{tag} * {spell(g)}")
        return gy, slot_grads

    # -- reverse mode -------------------------------------------------------------------------
    def op_grads(self, op: KernelOp, operands: list[str], result: str, grad: str, name: str) -> list[str]:
        """The gradient of each operand of ``result = operands[0] ∘ operands[1] ∘ ...`` given ``grad`` of the
        result (``∘`` the kernel operation ``op``); may bind names starting with ``name``."""
        d = self.d
        if not operands:
            return []
        if len(operands) == 1 or op.rule == "sum":
            return [grad] * len(operands)
        if op.rule == "product":
            return [" * ".join([grad, *operands[:k], *operands[k + 1 :]]) for k in range(len(operands))]
        if op.rule == "softmax":
            dead = f"{result} == {d.number(-math.inf)}"
            out = []
            for k, t in enumerate(operands):
                self(d.let(f"{name}_{k}", d.where(dead, d.fzero, f"{grad} * {d.exp(f'{t} - {result}')}")))
                out.append(f"{name}_{k}")
            return out
        # select: the whole gradient to the first operand equal to the result (branch-free, so it vectorizes)
        self(d.var(f"{name}_left", grad))
        out = []
        for k, t in enumerate(operands[:-1]):
            self(d.let(f"{name}_{k}", d.where(f"{t} == {result}", f"{name}_left", d.fzero)))
            self(d.assign(f"{name}_left", d.where(f"{t} == {result}", d.fzero, f"{name}_left")))
            out.append(f"{name}_{k}")
        return [*out, f"{name}_left"]

    def reduce_grads(self, terms: list[str], result: str, grad: str, name: str) -> list[str]:
        """The gradient of each term of ``result = ⊕ terms``."""
        return self.op_grads(self.d.kernel.plus, terms, result, grad, name)

    def factor_grads(self, factors: list[str], result: str, grad: str, name: str) -> list[str]:
        """The gradient of each factor of ``result = ⊗ factors``."""
        return self.op_grads(self.d.kernel.times, factors, result, grad, name)

    def output_grad(self, y: str, agg: str, gagg: str) -> str:
        """The gradient of step output ``y`` from the gradient ``gagg`` of ``agg = ⊕_t y_t``."""
        d, rule = self.d, self.d.kernel.plus.rule
        if rule == "sum":
            return gagg
        if rule == "softmax":
            return d.where(f"{agg} == {d.number(-math.inf)}", d.fzero, f"{gagg} * {d.exp(f'{y} - {agg}')}")
        if rule == "select":
            return d.where(f"{y} == {agg}", gagg, d.fzero)
        raise AssertionError(f"a ⊕ with rule {rule!r}")  # product: ⊕ is never a product

    def emit_backward(self, z: list[str], grad: str, name: str) -> list[str]:
        """Reverse of ``y = ⊕ z[q] ⊗ ρ_q``: adds ρ gradients to their accumulators, returns the gradient of
        each state."""
        terms = self.emit_terms(z)
        self(self.d.let(f"{name}_y", self.reduce(terms)))
        term_grads = self.reduce_grads(terms, f"{name}_y", grad, f"{name}_g")
        per_state: list[list[str]] = [[] for _ in range(self.plan.num_states)]
        for (q, p), g, term in zip(self.plan.final, term_grads, terms):
            if p is None:
                per_state[q].append(g)
            else:
                self(self.d.let(f"{name}_t{q}", g))
                fg = self.factor_grads([z[q], self.param(p)], term, f"{name}_t{q}", f"{name}_f{q}")
                per_state[q].append(fg[0])
                self.accumulate(self.param_grad(p), fg[1])
        return [self.add(g) for g in per_state]

    def step_backward(self, step: StepNames, z_prev: list[str], gn: list[str]) -> tuple[list[str], list[str]]:
        """Reverse of one step given the gradients ``gn`` of its new states: accumulates parameter
        gradients; returns (gradient of each slot, gradient of each previous state)."""
        plan, d, tag = self.plan, self.d, step.tag
        q = plan.num_states
        gpre: list[list[str]] = [[] for _ in range(q)]
        closure_by_dst: list[list[int]] = [[] for _ in range(q)]
        for c, entry in enumerate(plan.closure):
            closure_by_dst[entry.dst].append(c)
        for j in range(q):
            term_grads = self.reduce_grads(step.closure_terms[j], step.new[j], gn[j], f"gc{j}")
            for c, g in zip(closure_by_dst[j], term_grads):
                entry = plan.closure[c]
                if entry.param is None:
                    gpre[entry.src].append(g)
                else:
                    self(d.let(f"gcl{c}", g))
                    factors = [f"pre{entry.src}{tag}", self.param(entry.param)]
                    fg = self.factor_grads(factors, f"cl{c}{tag}", f"gcl{c}", f"gcf{c}")
                    gpre[entry.src].append(fg[0])
                    self.accumulate(self.param_grad(entry.param), fg[1])
        for j in range(q):
            self(d.let(f"gpre{j}", self.add(gpre[j])))
        gzin: list[list[str]] = [[] for _ in range(q)]
        gslot: list[list[str]] = [[] for _ in range(plan.num_slots)]
        gfun: list[list[str]] = [[] for _ in range(plan.num_functions)]
        moves_by_dst: list[list[int]] = [[] for _ in range(q)]
        for m, move in enumerate(plan.moves):
            moves_by_dst[move.dst].append(m)
        for j in range(q):
            term_grads = self.reduce_grads(step.pre_terms[j], f"pre{j}{tag}", f"gpre{j}", f"gm{j}")
            for m, g in zip(moves_by_dst[j], term_grads):
                move = plan.moves[m]
                self(d.let(f"gmv{m}", g))
                fg = self.factor_grads(step.move_factors[m], f"mv{m}{tag}", f"gmv{m}", f"gmf{m}")
                gzin[move.src].append(fg[0])
                for s, g_s in zip(move.slots, fg[1 : 1 + len(move.slots)]):
                    gslot[s].append(g_s)
                start = 1 + len(move.slots)
                for f, g_f in zip(move.functions, fg[start : start + len(move.functions)]):
                    gfun[f].append(g_f)
                if move.param is not None:
                    self.accumulate(self.param_grad(move.param), fg[-1])
        # the chain rule through the weight functions: grad(raw) += grad(weight) * d weight / d raw
        loads = step.loads if step.loads is not None else self.loads(tag)
        for f, load in enumerate(plan.loads):
            if not gfun[f]:
                continue
            self(d.let(f"gw{f}", self.add(gfun[f])))
            for s, derivative in zip(load.inputs, load.grads):
                gslot[s].append(f"gw{f} * {loads(derivative)}")
        for s in range(plan.num_slots):
            self(d.let(f"gx{s}", self.add(gslot[s])))
        g_prev = []
        for j in range(q):
            p = plan.start[j]
            self(d.let(f"gzin{j}", self.add(gzin[j])))
            if plan.options.restart and p is not None:
                grads = self.reduce_grads([z_prev[j], self.param(p)], f"zin{j}{tag}", f"gzin{j}", f"gr{j}")
                self.accumulate(self.param_grad(p), grads[1])
                g_prev.append(grads[0])
            else:
                g_prev.append(f"gzin{j}")
        return [f"gx{s}" for s in range(plan.num_slots)], g_prev


# --------------------------------------------------------------------------------------------
# The one-lane-per-thread skeleton shared by CUDA and Triton
# --------------------------------------------------------------------------------------------
class LaneLayout:
    """Where one lane's values sit in the lane kernels' tensors: offsets (expressions of ``b``, ``Tn``, ``D`` and a
    step's position) to which the dialect adds the lane ``d``. This one is the template kernels' (the shapes of
    ``kleene.compile.template``: slots (B, T, S, D), states (B, T, Q, D), rows (B, Q, D), out (B, T, D) or (B, D),
    grad_params (B, K, D)); a bank of plans (``kleene.compile.codegen.bank``) places each plan's block in its rows.
    """

    def __init__(self, plan: Plan):
        self.plan = plan

    def param(self, k: int) -> str:
        """Static parameter ``k`` in the parameter table (read once, before the time loop)."""
        return f"{k} * D"

    def slot(self, s: int, position: str = "tt") -> str:
        return f"((b * Tn + {position}) * {self.plan.num_slots} + {s}) * D"

    def state(self, j: int, position: str) -> str:
        """A saved state (after the step at ``position``)."""
        return f"((b * Tn + {position}) * {self.plan.num_states} + {j}) * D"

    def row(self, j: int) -> str:
        """State ``j`` in a per-sequence row: h0, final_state, grad_h0, grad_final."""
        return f"(b * {self.plan.num_states} + {j}) * D"

    def out(self, position: str | None = None) -> str:
        """The output (and its gradient) at ``position`` (output "steps"), or the sequence's one."""
        return "b * D" if position is None else f"(b * Tn + {position}) * D"

    def grad_param(self, k: int) -> str:
        """The per-sequence gradient of static parameter ``k``."""
        return f"(b * {self.plan.num_params} + {k}) * D"


def _initial_states(w: LaneWriter, at: LaneLayout) -> list[str]:
    """Bind ``init{j}``: h0 when given, else zero (restart) or the start weight."""
    plan, d = w.plan, w.d
    for j in range(plan.num_states):
        p = plan.start[j]
        w(d.var(f"init{j}", d.zero if (plan.options.restart or p is None) else param(p)))
    w.open(d.open_if(d.has_h0))
    for j in range(plan.num_states):
        w(d.assign(f"init{j}", d.load("h0", at.row(j))))
    w.close()
    return [f"init{j}" for j in range(plan.num_states)]


#: The most steps a lane kernel reads ahead (``prefetch_depth``), and the registers it may spend on them.
MAX_PREFETCH = 8
PREFETCH_REGISTERS = 48


def prefetch_depth(loads_per_step: int) -> int:
    """How many steps a lane kernel (CUDA, Triton) loads at once before running them one after the other.

    A lane's step reads its slots (and, backwards, the saved states and the output's gradient) at addresses that do
    not depend on the recurrence; loading several steps together keeps that many loads in flight per thread, where
    a plain loop waits one memory latency per step (the kernels were latency-bound on an H200: issue 22). The depth
    is bounded by ``PREFETCH_REGISTERS`` registers of read-ahead values per lane.
    """
    return max(1, min(MAX_PREFETCH, PREFETCH_REGISTERS // max(1, loads_per_step)))


#: What a block of steps reads for step k: integers (name, expression, seen by the step) and loads (name, pointer,
#: offset, condition, fallback), each bound as ``{name}_{k}``; expressions may use ``i{k}`` (the step's index) and
#: earlier names. The step sees every load and the integers marked so, under their names without the suffix.
StepReads = tuple[list[tuple[str, str, bool]], list[tuple[str, str, str, str, str]]]


def _time_blocks(
    w: LaneWriter, depth: int, reads: Callable[[int], StepReads], step: Callable[[LaneWriter], None]
) -> None:
    """The time loop in blocks of ``depth`` steps: each block first binds what ``reads(k)`` lists for each of its
    steps k (``i{k}`` = the step's index; a load happens only where its condition holds), then runs ``step`` for
    each step that exists, with those names bound again without their suffix."""
    d = w.d
    w.open(d.open_for("t0", "n_steps", depth))
    names: list[list[tuple[str, str]]] = []
    for k in range(depth):
        w(d.let(f"i{k}", f"t0 + {k}", "int"))
        ints, loads = reads(k)
        for name, expr, _ in ints:
            w(d.let(f"{name}_{k}", expr, "int"))
        for name, pointer, offset, cond, fallback in loads:
            w(d.let(f"{name}_{k}", d.load_if(cond, pointer, offset, fallback)))
        names.append([(n, "int") for n, _, seen in ints if seen] + [(n, "float") for n, *_ in loads])
    for k in range(depth):
        w.open(d.open_if(f"i{k} < n_steps"))
        for name, kind in names[k]:
            w(d.let(name, f"{name}_{k}", kind))
        step(w)
        w.close()
    w.close()


def lane_forward(w: LaneWriter, at: LaneLayout | None = None) -> None:
    """The body of the forward kernel after the dialect's lane setup (``b``, ``rev``, ``n_steps``, the
    parameters ``p{k}``): one lane's states through its sequence, saving them when asked; the steps are read
    ``prefetch_depth`` at a time. ``at``: where the lane's values sit (default: the template kernels' layout)."""
    plan, d = w.plan, w.d
    at = LaneLayout(plan) if at is None else at
    q, output = plan.num_states, plan.options.output
    init = _initial_states(w, at)
    for j in range(q):
        w(d.var(f"z{j}", init[j]))
    z = [f"z{j}" for j in range(q)]
    if output == "sum":
        w(d.var("agg", d.zero))

    def reads(k: int) -> StepReads:
        ints = [("tt", f"i{k} + rev * (n_steps - 1 - 2 * i{k})", True)]
        cond = f"i{k} < n_steps"
        return ints, [
            (slot(s), "slots", at.slot(s, f"tt_{k}"), cond, d.fzero) for s in range(plan.num_slots)
        ]

    def one_step(w: LaneWriter) -> None:
        step = w.step(z)
        for j in range(q):
            w(d.assign(f"z{j}", step.new[j]))
        w.open(d.open_if(d.save_states))
        for j in range(q):
            w(d.store("states", at.state(j, "tt"), f"z{j}"))
        w.close()
        if output == "steps":
            w(d.let("y", w.emit(step.new)))
            w(d.store("out", at.out("tt"), w.map_output("y")))
        elif output == "sum":
            w(d.let("y", w.emit(step.new)))
            w(d.assign("agg", d.plus("agg", "y")))

    _time_blocks(w, prefetch_depth(plan.num_slots), reads, one_step)
    for j in range(q):
        w(d.store("final_state", at.row(j), f"z{j}"))
    if output == "sum":
        w(d.store("out", at.out(), "agg"))
    elif output == "last":
        w(d.store("out", at.out(), w.emit(z)))


def lane_backward(w: LaneWriter, at: LaneLayout | None = None) -> None:
    """The body of the backward kernel after the dialect's lane setup: reverse mode through one lane's
    sequence, recomputing each step from the saved previous state (``at`` as in ``lane_forward``)."""
    plan, d = w.plan, w.d
    at = LaneLayout(plan) if at is None else at
    q, k_params, output = plan.num_states, plan.num_params, plan.options.output
    init = _initial_states(w, at)
    for k in range(k_params):
        w(d.var(param_grad(k), d.fzero))
    if output == "last":
        last = "(1 - rev) * (n_steps - 1)"  # the position of the last consumed step
        for j in range(q):
            w(d.let(f"zf{j}", d.load_if("n_steps > 0", "states", at.state(j, last), init[j])))
        grads = w.emit_backward([f"zf{j}" for j in range(q)], d.load("grad_out", at.out()), "el")
        for j in range(q):
            w(d.var(f"g{j}", f"{d.load('grad_final', at.row(j))} + {grads[j]}"))
    else:
        for j in range(q):
            w(d.var(f"g{j}", d.load("grad_final", at.row(j))))
    if output == "sum":
        w(d.let("agg", d.load("out", at.out())))
        w(d.let("gagg", d.load("grad_out", at.out())))
    grad_out_read = output == "steps"

    def reads(k: int) -> StepReads:
        ints = [
            ("t", f"n_steps - 1 - i{k}", False),  # (negative past the sequence's start: nothing is read there)
            ("tt", f"t_{k} + rev * (n_steps - 1 - 2 * t_{k})", True),
            ("tp", f"tt_{k} - 1 + 2 * rev", False),  # the position of the previous step
        ]
        valid = f"t_{k} >= 0"
        loads = [(slot(s), "slots", at.slot(s, f"tt_{k}"), valid, d.fzero) for s in range(plan.num_slots)]
        loads += [(f"zp{j}", "states", at.state(j, f"tp_{k}"), f"t_{k} > 0", init[j]) for j in range(q)]
        if grad_out_read:
            loads.append(("gout", "grad_out", at.out(f"tt_{k}"), valid, d.fzero))
        return ints, loads

    def one_step(w: LaneWriter) -> None:
        z_prev = [f"zp{j}" for j in range(q)]
        step = w.step(z_prev)
        gn = [f"g{j}" for j in range(q)]
        mapped: dict[int, str] = {}
        if output != "last":
            if output == "steps":
                w(d.let("y", w.emit(step.new)))
                gy, mapped = w.map_output_backward("y", "gout")
                w(d.let("gy", gy))
            else:
                w(d.let("y", w.emit(step.new)))
                w(d.let("gy", w.output_grad("y", "agg", "gagg")))
            emitted = w.emit_backward(step.new, "gy", "eo")
            for j in range(q):
                w(d.let(f"gn{j}", f"g{j} + {emitted[j]}"))
            gn = [f"gn{j}" for j in range(q)]
        gx, g_prev = w.step_backward(step, z_prev, gn)
        for s in range(plan.num_slots):
            w(d.store("grad_slots", at.slot(s), f"{gx[s]} + {mapped[s]}" if s in mapped else gx[s]))
        for j in range(q):
            w(d.assign(f"g{j}", g_prev[j]))

    loads_per_step = plan.num_slots + q + int(grad_out_read)
    _time_blocks(w, prefetch_depth(loads_per_step), reads, one_step)
    w.open(d.open_if(d.has_h0))
    for j in range(q):
        w(d.store("grad_h0", at.row(j), f"g{j}"))
    w.close()
    starts = [(j, p) for j, p in enumerate(plan.start) if p is not None]
    if not plan.options.restart and starts:
        w.open(d.open_if(d.no_h0))
        for j, p in starts:
            w.accumulate(param_grad(p), f"g{j}")
        w.close()
    for k in range(k_params):
        w(d.store("grad_params", at.grad_param(k), param_grad(k)))
