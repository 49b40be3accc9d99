"""Triton source for a plan: one program per (sequence, block of dimensions), states in registers.

``generate_triton(plan)`` returns the text of a Python module defining two ``@triton.jit``
kernels (the contract ``kleene.compile.runtime.gpu`` launches)::

    kleene_forward(slots, params, lengths, h0, out, final_state, states, T, D, HALF,
                   HAS_H0: constexpr, SAVE_STATES: constexpr, BLOCK: constexpr)
    kleene_backward(slots, params, lengths, h0, states, out, grad_out, grad_final,
                    grad_slots, grad_params, grad_h0, T, D, HALF, HAS_H0: constexpr, BLOCK: constexpr)

with the shapes of ``kleene.compile.template``: slots (B, T, S, D), params (K, D), lengths
(B,) int64, h0 / final_state / grad_h0 (B, Q, D), states (B, T, Q, D) (the closed state after
each consumed step), out / grad_out (B, T, D) or (B, D), grad_params (B, K, D) (per sequence,
summed by the caller). The grid is (B, ceil(HALF / BLOCK) + ceil((D - HALF) / BLOCK)): the
blocks past HALF hold the reversed dimensions (HALF = D when not bidirectional), so a block
never mixes directions. Positions the kernels do not write (padding steps of ``out``,
``grad_slots``) must be pre-filled by the caller (semiring zero, 0).

The per-step body is straight-line code written by ``LaneWriter`` from the plan's moves and
closure entries -- the same writer emits the CUDA kernels of ``kleene.compile.codegen.cuda``
in another ``Dialect``. The backward pass recomputes each step from the stored previous state
and runs the reverse mode of that body (real/log: sums and softmax weights; max/min: the
whole gradient to the first best term, found again rather than stored), as codegen_cpp does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from kleene.compile.template import Plan

# --------------------------------------------------------------------------------------------
# Dialects: how an expression of the kernel algebra is spelled
# --------------------------------------------------------------------------------------------


class Dialect(ABC):
    """Spelling of values, statements and the kernel algebra in one target language.

    ``zero``/``one`` are the storage semiring's zero and one and ``fzero`` the number 0 of
    gradients, each as an expression of the lane's shape (a vector in Triton).
    """

    zero = "ZERO"
    one = "ONE"
    fzero = "FZERO"

    def __init__(self, plan: Plan):
        self.plan = plan
        self.algebra = plan.algebra

    @abstractmethod
    def let(self, name: str, expr: str, kind: str = "float") -> str:
        """A statement binding a new name (``kind``: "float", "int" or "bool")."""

    @abstractmethod
    def assign(self, name: str, expr: str) -> str:
        """A statement updating a mutable (loop-carried) float variable."""

    @abstractmethod
    def plus(self, a: str, b: str) -> str:
        ...

    @abstractmethod
    def times(self, a: str, b: str) -> str:
        ...

    @abstractmethod
    def where(self, cond: str, a: str, b: str) -> str:
        ...

    @abstractmethod
    def exp(self, x: str) -> str:
        ...

    @abstractmethod
    def neg_inf(self) -> str:
        ...


_TRITON_ALGEBRA: dict[str, tuple[str, str, str, str]] = {
    # name: (plus, times, zero, one) in Triton syntax
    "real": ("({a} + {b})", "({a} * {b})", "0.0", "1.0"),
    "log": ("_logaddexp({a}, {b})", "({a} + {b})", 'float("-inf")', "0.0"),
    "max-plus": ("tl.maximum({a}, {b})", "({a} + {b})", 'float("-inf")', "0.0"),
    "min-plus": ("tl.minimum({a}, {b})", "({a} + {b})", 'float("inf")', "0.0"),
    "max-times": ("tl.maximum({a}, {b})", "({a} + {b})", 'float("-inf")', "0.0"),
}


class TritonDialect(Dialect):
    """Triton: every value is a vector of BLOCK lanes; conditionals are ``tl.where``."""

    def __init__(self, plan: Plan):
        super().__init__(plan)
        self._plus, self._times, self.zero_literal, self.one_literal = _TRITON_ALGEBRA[plan.algebra.name]

    def let(self, name: str, expr: str, kind: str = "float") -> str:
        return f"{name} = {expr}"

    def assign(self, name: str, expr: str) -> str:
        return f"{name} = {expr}"

    def plus(self, a: str, b: str) -> str:
        return self._plus.format(a=a, b=b)

    def times(self, a: str, b: str) -> str:
        return self._times.format(a=a, b=b)

    def where(self, cond: str, a: str, b: str) -> str:
        return f"tl.where({cond}, {a}, {b})"

    def exp(self, x: str) -> str:
        return f"tl.exp({x})"

    def neg_inf(self) -> str:
        return 'float("-inf")'


# --------------------------------------------------------------------------------------------
# The lane writer: one step of the recurrence and its reverse mode, dialect-neutral
# --------------------------------------------------------------------------------------------
def param(k: int) -> str:
    """The register holding static parameter k (loaded once, before the time loop)."""
    return f"p{k}"


def slot(s: int) -> str:
    """The register holding slot s of the current step."""
    return f"x{s}"


@dataclass
class StepNames:
    """Names one step binds: inputs of the moves, their terms, pre-closure and new states."""

    z_in: list[str]
    move_factors: list[list[str]]
    pre_terms: list[list[str]]
    closure_terms: list[list[str]]
    new: list[str]


class LaneWriter:
    """Straight-line code of one lane (one dimension of one sequence) in a dialect.

    Statements are appended to ``lines`` at the current ``depth`` (4 spaces per level for
    Triton, 2 for C); the caller writes loads, stores and loops around them.
    """

    def __init__(self, plan: Plan, dialect: Dialect, indent: str):
        self.plan, self.d, self.indent = plan, dialect, indent
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append(self.indent * self.depth + line)

    # -- algebra helpers ----------------------------------------------------------------------
    def product(self, factors: list[str]) -> str:
        if not factors:
            return self.d.one
        out = factors[0]
        for f in factors[1:]:
            out = self.d.times(out, f)
        return out

    def reduce(self, terms: list[str]) -> str:
        if not terms:
            return self.d.zero
        out = terms[0]
        for t in terms[1:]:
            out = self.d.plus(out, t)
        return out

    def add(self, grads: list[str]) -> str:
        """The ordinary sum of gradient expressions."""
        return " + ".join(grads) if grads else self.d.fzero

    def accumulate(self, name: str, grad: str) -> None:
        self(self.d.assign(name, f"{name} + {grad}"))

    # -- forward ------------------------------------------------------------------------------
    def step(self, z: list[str]) -> StepNames:
        """Emit one step from states ``z``; returns the names it bound."""
        plan, d = self.plan, self.d
        q = plan.num_states
        z_in = []
        for j in range(q):
            p = plan.start[j]
            if plan.options.restart and p is not None:
                self(d.let(f"zin{j}", d.plus(z[j], param(p))))
                z_in.append(f"zin{j}")
            else:
                z_in.append(z[j])
        move_factors: list[list[str]] = []
        pre_terms: list[list[str]] = [[] for _ in range(q)]
        for m, move in enumerate(plan.moves):
            factors = [z_in[move.src]] + [slot(s) for s in move.slots]
            if move.param is not None:
                factors.append(param(move.param))
            move_factors.append(factors)
            self(d.let(f"mv{m}", self.product(factors)))
            pre_terms[move.dst].append(f"mv{m}")
        for j in range(q):
            self(d.let(f"pre{j}", self.reduce(pre_terms[j])))
        closure_terms: list[list[str]] = [[] for _ in range(q)]
        for c, entry in enumerate(plan.closure):
            if entry.param is None:
                closure_terms[entry.dst].append(f"pre{entry.src}")
            else:
                self(d.let(f"cl{c}", d.times(f"pre{entry.src}", param(entry.param))))
                closure_terms[entry.dst].append(f"cl{c}")
        for j in range(q):
            self(d.let(f"n{j}", self.reduce(closure_terms[j])))
        return StepNames(z_in, move_factors, pre_terms, closure_terms, [f"n{j}" for j in range(q)])

    def emit_terms(self, z: list[str]) -> list[str]:
        """The terms of ``y = ⊕_(q, ρ) z[q] ⊗ ρ``."""
        return [z[q] if p is None else self.d.times(z[q], param(p)) for q, p in self.plan.final]

    # -- reverse mode -------------------------------------------------------------------------
    def reduce_grads(self, terms: list[str], result: str, grad: str, name: str) -> list[str]:
        """The gradient of each term of ``result = ⊕ terms`` given ``grad`` of the result."""
        d, rule = self.d, self.plan.algebra.plus_rule
        if not terms:
            return []
        if len(terms) == 1 or rule == "sum":
            return [grad] * len(terms)
        if rule == "softmax":
            self(d.let(f"{name}_dead", f"{result} == {d.neg_inf()}", "bool"))
            self(d.let(f"{name}_ref", d.where(f"{name}_dead", d.fzero, result)))
            out = []
            for k, t in enumerate(terms):
                self(d.let(f"{name}_{k}", d.where(f"{name}_dead", d.fzero, f"{grad} * {d.exp(f'{t} - {name}_ref')}")))
                out.append(f"{name}_{k}")
            return out
        better = ">" if self.plan.algebra.best == "max" else "<"
        self(d.let(f"{name}_b0", terms[0]))
        self(d.let(f"{name}_a0", "0", "int"))
        for k, t in enumerate(terms[1:], start=1):
            self(d.let(f"{name}_u{k}", f"{t} {better} {name}_b{k - 1}", "bool"))
            self(d.let(f"{name}_b{k}", d.where(f"{name}_u{k}", t, f"{name}_b{k - 1}")))
            self(d.let(f"{name}_a{k}", d.where(f"{name}_u{k}", str(k), f"{name}_a{k - 1}"), "int"))
        last = f"{name}_a{len(terms) - 1}"
        return [d.where(f"{last} == {k}", grad, d.fzero) for k in range(len(terms))]

    def factor_grads(self, factors: list[str], grad: str) -> list[str]:
        """The gradient of each factor of ``⊗ factors`` given ``grad`` of the product."""
        if self.plan.algebra.times_rule == "add":
            return [grad] * len(factors)
        return [" * ".join([grad, *factors[:k], *factors[k + 1 :]]) for k in range(len(factors))]

    def output_grad(self, y: str, agg: str, gagg: str) -> str:
        """The gradient of step output ``y`` from the gradient ``gagg`` of ``agg = ⊕_t y_t``."""
        d, rule = self.d, self.plan.algebra.plus_rule
        if rule == "sum":
            return gagg
        if rule == "softmax":
            safe = d.where(f"{agg} == {d.neg_inf()}", d.fzero, agg)
            return d.where(f"{agg} == {d.neg_inf()}", d.fzero, f"{gagg} * {d.exp(f'{y} - {safe}')}")
        return d.where(f"{y} == {agg}", gagg, d.fzero)

    def emit_backward(self, z: list[str], grad: str, name: str) -> list[str]:
        """Reverse of ``y = ⊕ z[q] ⊗ ρ_q``: adds ρ gradients to the ``gp`` accumulators, returns
        the gradient of each state."""
        terms = self.emit_terms(z)
        self(self.d.let(f"{name}_y", self.reduce(terms)))
        term_grads = self.reduce_grads(terms, f"{name}_y", grad, f"{name}_g")
        per_state: list[list[str]] = [[] for _ in range(self.plan.num_states)]
        for (q, p), g in zip(self.plan.final, term_grads):
            if p is None:
                per_state[q].append(g)
            else:
                self(self.d.let(f"{name}_t{q}", g))
                fg = self.factor_grads([z[q], param(p)], f"{name}_t{q}")
                per_state[q].append(fg[0])
                self.accumulate(f"gp{p}", fg[1])
        return [self.add(g) for g in per_state]

    def step_backward(self, step: StepNames, z_prev: list[str], gn: list[str]) -> tuple[list[str], list[str]]:
        """Reverse of one step given the gradients ``gn`` of its new states: accumulates parameter
        gradients; returns (gradient of each slot, gradient of each previous state)."""
        plan, d = self.plan, self.d
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
                    fg = self.factor_grads([f"pre{entry.src}", param(entry.param)], f"gcl{c}")
                    gpre[entry.src].append(fg[0])
                    self.accumulate(f"gp{entry.param}", fg[1])
        for j in range(q):
            self(d.let(f"gpre{j}", self.add(gpre[j])))
        gzin: list[list[str]] = [[] for _ in range(q)]
        gslot: list[list[str]] = [[] for _ in range(plan.num_slots)]
        moves_by_dst: list[list[int]] = [[] for _ in range(q)]
        for m, move in enumerate(plan.moves):
            moves_by_dst[move.dst].append(m)
        for j in range(q):
            term_grads = self.reduce_grads(step.pre_terms[j], f"pre{j}", f"gpre{j}", f"gm{j}")
            for m, g in zip(moves_by_dst[j], term_grads):
                move = plan.moves[m]
                self(d.let(f"gmv{m}", g))
                fg = self.factor_grads(step.move_factors[m], f"gmv{m}")
                gzin[move.src].append(fg[0])
                for s, g_s in zip(move.slots, fg[1 : 1 + len(move.slots)]):
                    gslot[s].append(g_s)
                if move.param is not None:
                    self.accumulate(f"gp{move.param}", fg[-1])
        for s in range(plan.num_slots):
            self(d.let(f"gx{s}", self.add(gslot[s])))
        g_prev = []
        for j in range(q):
            p = plan.start[j]
            self(d.let(f"gzin{j}", self.add(gzin[j])))
            if plan.options.restart and p is not None:
                grads = self.reduce_grads([z_prev[j], param(p)], f"zin{j}", f"gzin{j}", f"gr{j}")
                self.accumulate(f"gp{p}", grads[1])
                g_prev.append(grads[0])
            else:
                g_prev.append(f"gzin{j}")
        return [f"gx{s}" for s in range(plan.num_slots)], g_prev


# --------------------------------------------------------------------------------------------
# Triton kernels
# --------------------------------------------------------------------------------------------
_PRELUDE = '''"""Generated by kleene.compile.codegen.triton -- do not edit."""
import triton
import triton.language as tl


@triton.jit
def _logaddexp(a, b):
    hi = tl.maximum(a, b)
    lo = tl.minimum(a, b)
    safe = tl.where(hi == float("-inf"), 0.0, hi)
    return hi + tl.log(1.0 + tl.exp(lo - safe))
'''


class _TritonWriter(LaneWriter):
    def __init__(self, plan: Plan):
        self.tri = TritonDialect(plan)
        super().__init__(plan, self.tri, "    ")

    def open_if(self, cond: str) -> None:
        self(f"if {cond}:")
        self.depth += 1


def _lane_setup(w: _TritonWriter, dtype_of: str) -> None:
    """Program ids -> b, direction, lanes ``d`` and ``mask``, ``length``, constant vectors."""
    w("b = tl.program_id(0).to(tl.int64)")
    w("blk = tl.program_id(1)")
    w("blocks_lo = (HALF + BLOCK - 1) // BLOCK  # (tl.cdiv is itself a jit function: avoided for the interpreter)")
    w("rev = (blk >= blocks_lo).to(tl.int32)  # 1 for the reversed upper half")
    w("d = blk * BLOCK + rev * (HALF - blocks_lo * BLOCK) + tl.arange(0, BLOCK)")
    w("end = HALF + rev * (D - HALF)")
    w("mask = d < end")
    w("length = tl.load(lengths + b)")
    w(f"FZERO = tl.full([BLOCK], 0.0, {dtype_of}.dtype.element_ty)  # (builtins only: tl.zeros is a jit function)")
    w(f"ZERO = FZERO + {w.tri.zero_literal}")
    w(f"ONE = FZERO + {w.tri.one_literal}")
    for k in range(w.plan.num_params):
        w(f"{param(k)} = tl.load(params + {k} * D + d, mask=mask, other=0.0)")


def _initial_states(w: _TritonWriter) -> list[str]:
    """Bind ``init{j}``: h0 when given, else zero (restart) or the start weight."""
    plan = w.plan
    for j in range(plan.num_states):
        p = plan.start[j]
        base = "ZERO" if (plan.options.restart or p is None) else param(p)
        w(f"init{j} = {base}")
    w.open_if("HAS_H0")
    for j in range(plan.num_states):
        w(f"init{j} = tl.load(h0 + (b * {plan.num_states} + {j}) * D + d, mask=mask, other=0.0)")
    w.depth -= 1
    return [f"init{j}" for j in range(plan.num_states)]


def _triton_forward(plan: Plan) -> list[str]:
    w = _TritonWriter(plan)
    q, n_slots, output = plan.num_states, plan.num_slots, plan.options.output
    w("@triton.jit")
    w("def kleene_forward(slots, params, lengths, h0, out, final_state, states, T, D, HALF,")
    w("                   HAS_H0: tl.constexpr, SAVE_STATES: tl.constexpr, BLOCK: tl.constexpr):")
    w.depth += 1
    _lane_setup(w, "slots")
    z = _initial_states(w)
    for j in range(q):
        w(f"z{j} = {z[j]}")
    z = [f"z{j}" for j in range(q)]
    w("agg = ZERO")
    w("for t in range(0, length):")
    w.depth += 1
    w("tt = t + rev * (length - 1 - 2 * t)")
    w(f"base = (b * T + tt) * {n_slots} * D")
    for s in range(n_slots):
        w(f"{slot(s)} = tl.load(slots + base + {s} * D + d, mask=mask, other=0.0)")
    step = w.step(z)
    for j in range(q):
        w(f"z{j} = {step.new[j]}")
    w.open_if("SAVE_STATES")
    for j in range(q):
        w(f"tl.store(states + ((b * T + tt) * {q} + {j}) * D + d, z{j}, mask=mask)")
    w.depth -= 1
    if output != "last":
        w(f"y = {w.reduce(w.emit_terms(step.new))}")
        if output == "steps":
            w("tl.store(out + (b * T + tt) * D + d, y, mask=mask)")
        else:
            w(f"agg = {w.d.plus('agg', 'y')}")
    w.depth -= 1
    for j in range(q):
        w(f"tl.store(final_state + (b * {q} + {j}) * D + d, z{j}, mask=mask)")
    if output == "sum":
        w("tl.store(out + b * D + d, agg, mask=mask)")
    elif output == "last":
        w(f"tl.store(out + b * D + d, {w.reduce(w.emit_terms(z))}, mask=mask)")
    return w.lines


def _triton_backward(plan: Plan) -> list[str]:
    w = _TritonWriter(plan)
    q, n_slots, k_params, output = plan.num_states, plan.num_slots, plan.num_params, plan.options.output
    w("@triton.jit")
    w("def kleene_backward(slots, params, lengths, h0, states, out, grad_out, grad_final,")
    w("                    grad_slots, grad_params, grad_h0, T, D, HALF, HAS_H0: tl.constexpr, BLOCK: tl.constexpr):")
    w.depth += 1
    _lane_setup(w, "slots")
    init = _initial_states(w)
    for k in range(k_params):
        w(f"gp{k} = FZERO")
    for j in range(q):
        w(f"gf{j} = tl.load(grad_final + (b * {q} + {j}) * D + d, mask=mask, other=0.0)")
    if output == "last":
        w("has_steps = length > 0")
        w("mask_steps = d < end * has_steps.to(tl.int32)  # (no `&` of masks: the 3.9 interpreter mistypes it)")
        w("t_last = (1 - rev) * (length - 1)  # the position of the last consumed step")
        for j in range(q):
            w(f"zl{j} = tl.load(states + ((b * T + t_last) * {q} + {j}) * D + d, mask=mask_steps, other=0.0)")
            w(f"zf{j} = tl.where(has_steps, zl{j}, {init[j]})")
        grads = w.emit_backward(
            [f"zf{j}" for j in range(q)], "tl.load(grad_out + b * D + d, mask=mask, other=0.0)", "el"
        )
        for j in range(q):
            w(f"g{j} = gf{j} + {grads[j]}")
    else:
        for j in range(q):
            w(f"g{j} = gf{j}")
    if output == "sum":
        w("agg = tl.load(out + b * D + d, mask=mask, other=0.0)")
        w("gagg = tl.load(grad_out + b * D + d, mask=mask, other=0.0)")
    w("for t_back in range(0, length):")
    w.depth += 1
    w("t = length - 1 - t_back")
    w("tt = t + rev * (length - 1 - 2 * t)")
    w("tp = tt - 1 + 2 * rev  # the position of the previous step")
    w("has_prev = t > 0")
    w("mask_prev = d < end * has_prev.to(tl.int32)")
    w(f"base = (b * T + tt) * {n_slots} * D")
    for s in range(n_slots):
        w(f"{slot(s)} = tl.load(slots + base + {s} * D + d, mask=mask, other=0.0)")
    for j in range(q):
        w(f"zs{j} = tl.load(states + ((b * T + tp) * {q} + {j}) * D + d, mask=mask_prev, other=0.0)")
        w(f"zp{j} = tl.where(has_prev, zs{j}, {init[j]})")
    z_prev = [f"zp{j}" for j in range(q)]
    step = w.step(z_prev)
    gn = [f"g{j}" for j in range(q)]
    if output != "last":
        if output == "steps":
            w("gy = tl.load(grad_out + (b * T + tt) * D + d, mask=mask, other=0.0)")
        else:
            w(f"y = {w.reduce(w.emit_terms(step.new))}")
            w(f"gy = {w.output_grad('y', 'agg', 'gagg')}")
        emitted = w.emit_backward(step.new, "gy", "eo")
        for j in range(q):
            w(f"gn{j} = g{j} + {emitted[j]}")
        gn = [f"gn{j}" for j in range(q)]
    gx, g_prev = w.step_backward(step, z_prev, gn)
    for s in range(n_slots):
        w(f"tl.store(grad_slots + base + {s} * D + d, {gx[s]}, mask=mask)")
    for j in range(q):
        w(f"g{j} = {g_prev[j]}")
    w.depth -= 1
    w.open_if("HAS_H0")
    for j in range(q):
        w(f"tl.store(grad_h0 + (b * {q} + {j}) * D + d, g{j}, mask=mask)")
    w.depth -= 1
    if not plan.options.restart:
        starts = [(j, p) for j, p in enumerate(plan.start) if p is not None]
        if starts:
            w.open_if("not HAS_H0")
            for j, p in starts:
                w.accumulate(f"gp{p}", f"g{j}")
            w.depth -= 1
    for k in range(k_params):
        w(f"tl.store(grad_params + (b * {k_params} + {k}) * D + d, gp{k}, mask=mask)")
    return w.lines


def generate_triton(plan: Plan) -> str:
    """The Python source of ``plan``'s Triton forward and backward kernels (see the module docstring)."""
    header = f"# plan: {plan.template.name}, semiring {plan.algebra.name}, {plan.options}"
    parts = [_PRELUDE, header, "", "", *_triton_forward(plan), "", "", *_triton_backward(plan)]
    return "\n".join(parts) + "\n"
