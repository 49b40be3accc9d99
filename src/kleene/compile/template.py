"""Templates: WFSA topologies whose weights are filled by a network, and their lowered plan.

The intermediate representation (frozen; every backend reads only this)
=========================================================================

A **Template** is a topology run as ``D`` independent copies, one per hidden
dimension. Every weight is a semiring product (``Factor``) of

* **slots** ``slots[b, t, s, d]`` -- per-step values filled by the network (μ(x_t), φ(x_t));
* **constants** ``constants[c, d]`` -- learned per-dimension values (γ, ρ1, ...);
* a **literal** -- one number in the template's semiring (``None`` = semiring one);
* **weight functions** ``functions[f]`` -- elementwise sympy expressions over raw slots (symbols named after
  ``slots``), whose value is an element of the template's semiring: ``sigmoid(f)``, ``(1 - sigmoid(f))``,
  ``log(sigmoid(f))``, ``2*mu``. The kernels compute their storage form from the raw slots in their load path and
  the chain rule in their backward (``kleene.compile.functions``).

An optional **output map** (``OutputMap``) turns each step's output into the layer's value inside the kernels:
``h[b, t, d] = map(y[b, t, d], slots[b, t, :, d], output_constants[:, d])``, a real number (not a semiring
element) written in the weight-function vocabulary over the symbol ``y`` (``functions.OUTPUT``: the step output in
storage form), raw slots (the template may have slots only the map reads, such as SRU's reset gate and skip input)
and named per-dimension constants (passed by the caller at each call, after the static parameters). Only with
``output="steps"``; padding positions of h are 0. The kernels spell it in their store path and its chain rule in
their backward; the torch reference evaluates the same expression (``functions.torch_expression``).

Consuming arcs (``moves``) match any symbol (∀α); ``epsilons``, initial and final
weights may not use slots. ``Template.from_wfsa`` reads a kleene ``WFSA`` whose weights
are such products (``mu(ALPHA)`` -> slot ``mu``, free symbol ``gamma`` -> constant, a factor holding slots in any
other elementwise form -> weight function). Caution: a bare slot is the *stored* value the network writes (for
max-times a log-weight); inside a weight function a slot is that raw number (``sigmoid(f(ALPHA))`` in max-times is
the probability σ(f), stored by the kernel as log σ(f)).

``lower(template, semiring, options)`` turns it into a **Plan**, which is what kernels run.
A plan fixes the semiring (whose ``kernel_algebra()`` the code generators spell) and a table
of per-dimension **static parameters** ``params[k, d]`` (built in torch by ``kleene.compile.reference.static_params``,
differentiable, once per call): the constant/literal part of each move, the entries of the
epsilon closure ``C = E*`` (exact, Lehmann's algorithm) or ``I ⊕ E ⊕ ... ⊕ E^cap``, the
start vector ``λ ⊗ C`` and the final weights ρ. With ``⊕``/``⊗`` those of ``plan.storage``
(the semiring's storage form), every backend computes for each sequence b and dimension d::

    z_0 = h0[b, :, d]  if given, else (zero vector if restart else start)
    for t in 0 .. length[b]-1 (dimensions with reverse[d] read step length[b]-1-t):
        z_in[q] = z_{t-1}[q] ⊕ start[q]    if restart else z_{t-1}[q]
        pre[j]  = ⊕_{m in moves, m.dst = j} z_in[m.src] ⊗ (⊗_{s in m.slots} slots[b,t,s,d])
                      ⊗ (⊗_{f in m.functions} load_f(slots[b,t,:,d])) ⊗ params[m.param, d]
        z_t[j]  = ⊕_{e in closure, e.dst = j} pre[e.src] ⊗ params[e.param, d]   (e.param None: one)
        y_t     = ⊕_{(q, p) in final} z_t[q] ⊗ params[p, d]
    outputs: "steps" y[b, t, d] (semiring zero at padding, stored at the consumed position),
             "sum" ⊕_t y_t, "last" the score of the whole sequence (⊕ z_len ⊗ ρ);
    final_state[b, :, d] = z_{length[b]}.

The ``reverse`` dimensions are the upper half when ``options.bidirectional`` (D even):
those run right to left over each sequence's own valid steps, so padding never matters.
Any semiring whose storage form has a ``kernel`` algebra compiles: ``real`` (+, ×), ``log``
(logaddexp, +), ``max-plus`` (max, +), ``min-plus`` (min, +), user-defined ones (see docs/semirings.md);
``max-times`` runs as max-plus on log values (as SoPa does): its slots, constants and
outputs are log-weights and its literals are converted with ``to_storage``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import sympy
from sympy.core.function import AppliedUndef

from kleene.automata.labels import ANY, EPSILON, AnySymbol
from kleene.automata.semiring import Semiring, get_semiring
from kleene.automata.weights import ALPHA
from kleene.automata.wfsa import WFSA
from kleene.compile.functions import OUTPUT, Load, OutputLoad, check_elementwise, lower_function, lower_output
from kleene.errors import CompileError

OutputMode = Literal["steps", "sum", "last"]


# --------------------------------------------------------------------------------------------
# The template
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Factor:
    """A semiring product of slots, constants (by index), an optional literal and weight functions (by index)."""

    slots: tuple[int, ...] = ()
    constants: tuple[int, ...] = ()
    literal: float | None = None
    functions: tuple[int, ...] = ()


@dataclass(frozen=True)
class OutputMap:
    """A template's output map: ``expr`` over the symbol ``y`` (``functions.OUTPUT``, the step output in storage
    form), raw slots (symbols named after the template's slots) and the per-dimension ``constants`` (symbols with
    these names), in the weight-function vocabulary (``functions.CALLS``); its value is a real number."""

    expr: sympy.Expr
    constants: tuple[str, ...] = ()


@dataclass(frozen=True)
class TemplateArc:
    """One move of a template: from state ``src`` to state ``dst`` (indices), weighted by the product ``weight``."""

    src: int
    dst: int
    weight: Factor


@dataclass(frozen=True)
class Template:
    """A WFSA topology with slot/constant/literal weights (see the module docstring).

    ``semiring`` names the semiring the literals are written in; compiling for another
    semiring is allowed when every literal is that semiring's one.
    """

    states: tuple[str, ...]
    slots: tuple[str, ...]
    constants: tuple[str, ...]
    moves: tuple[TemplateArc, ...]
    epsilons: tuple[TemplateArc, ...] = ()
    initial: tuple[tuple[int, Factor], ...] = ()
    final: tuple[tuple[int, Factor], ...] = ()
    semiring: str = "real"
    name: str = "template"
    functions: tuple[sympy.Expr, ...] = ()
    output_map: OutputMap | None = None

    def __post_init__(self) -> None:
        n = len(self.states)
        where_all = [(f"move {i}", a) for i, a in enumerate(self.moves)]
        where_all += [(f"epsilon {i}", a) for i, a in enumerate(self.epsilons)]
        for where, arc in where_all:
            if not (0 <= arc.src < n and 0 <= arc.dst < n):
                raise CompileError(f"{self.name}: {where} joins unknown states {arc.src}->{arc.dst} ({n} states)")
        for where, arc in where_all[len(self.moves) :]:
            if arc.weight.slots or arc.weight.functions:
                raise CompileError(
                    f"{self.name}: {where} ({self._arc_text(arc)}) uses a slot; epsilon weights "
                    "must be constants or literals (they consume no step)"
                )
        for kind, pairs in (("initial", self.initial), ("final", self.final)):
            for q, w in pairs:
                if not 0 <= q < n:
                    raise CompileError(f"{self.name}: {kind} weight on unknown state {q}")
                if w.slots or w.functions:
                    raise CompileError(f"{self.name}: the {kind} weight of {self.states[q]} uses a slot")
        everything = [a.weight for _, a in where_all] + [w for _, w in self.initial + self.final]
        for w in everything:
            for s in w.slots:
                if not 0 <= s < len(self.slots):
                    raise CompileError(f"{self.name}: slot index {s} out of range")
            for c in w.constants:
                if not 0 <= c < len(self.constants):
                    raise CompileError(f"{self.name}: constant index {c} out of range")
            for f in w.functions:
                if not 0 <= f < len(self.functions):
                    raise CompileError(f"{self.name}: weight function index {f} out of range")
        for f, expr in enumerate(self.functions):
            if not isinstance(expr, sympy.Expr):
                raise CompileError(f"{self.name}: weight function {f} must be a sympy expression, got {expr!r}")
            check_elementwise(expr, self.slots, f"{self.name}: weight function {f}")
        if not self.final:
            raise CompileError(f"{self.name}: the template has no final state")
        if self.output_map is not None:
            self._check_output_map(self.output_map)

    def _check_output_map(self, om: OutputMap) -> None:
        if not isinstance(om, OutputMap) or not isinstance(om.expr, sympy.Expr):
            raise CompileError(f"{self.name}: output_map must be an OutputMap of a sympy expression, got {om!r}")
        names = (OUTPUT, *self.slots, *om.constants)
        if len(set(names)) != len(names):
            raise CompileError(
                f"{self.name}: the output map's names {names} repeat (y, the slots and its constants must differ)"
            )
        check_elementwise(om.expr, names, f"{self.name}: output map")

    def _arc_text(self, arc: TemplateArc) -> str:
        return f"{self.states[arc.src]} -> {self.states[arc.dst]}"

    @property
    def num_states(self) -> int:
        return len(self.states)

    # -- construction from a WFSA -------------------------------------------------------------
    @classmethod
    def from_wfsa(cls, wfsa: WFSA, name: str | None = None, slots: Sequence[str] = ()) -> Template:
        """Read a template from a WFSA with symbolic weights.

        Note:
            Consuming arcs must be labelled ∀α (``ANY``): the network, not the label, decides
            each step's weight. A weight is a semiring product (``*`` for real/max-times,
            ``+`` for log/max-plus/min-plus) of ``f(ALPHA)`` (a slot named f), free symbols
            (constants), numbers (literals) and weight functions: elementwise expressions of
            slots such as ``sigmoid(f(ALPHA))`` or ``1 - sigmoid(f(ALPHA))`` (see the module
            docstring); literal-zero arcs are dropped. ``slots`` fixes the order of the first
            slots (the layout of the network's slot tensor); the others follow in order of use.

        Raises:
            CompileError: a label other than ∀α or ε, a weight outside that form (naming the arc), or a semiring
                without a kernel realisation.
        """
        semiring = wfsa.semiring
        semiring.kernel_algebra()
        slot_names: list[str] = []
        for s in slots:
            _intern(slot_names, s)
        constants: list[str] = []
        functions: list[sympy.Expr] = []

        def factor(weight: object, where: str, allow_slots: bool) -> Factor | None:
            return _parse_factor(weight, semiring, slot_names, constants, where, allow_slots, functions)

        moves: list[TemplateArc] = []
        epsilons: list[TemplateArc] = []
        for i, arc in enumerate(wfsa.arcs):
            where = f"arc {i} ({wfsa.state_name(arc.src)} -{arc.label}-> {wfsa.state_name(arc.dst)})"
            if arc.label.consumes and not isinstance(arc.label, AnySymbol):
                raise CompileError(f"{where}: template arcs consume any symbol (∀α); got label {arc.label}")
            f = factor(arc.weight, where, arc.label.consumes)
            if f is not None:
                (moves if arc.label.consumes else epsilons).append(TemplateArc(arc.src, arc.dst, f))
        initial = _weight_pairs(wfsa.initial, wfsa, "initial", factor)
        final = _weight_pairs(wfsa.final, wfsa, "final", factor)
        return cls(
            states=tuple(wfsa.states),
            slots=tuple(slot_names),
            constants=tuple(constants),
            moves=tuple(moves),
            epsilons=tuple(epsilons),
            initial=initial,
            final=final,
            semiring=semiring.name,
            name=name or wfsa.name or "template",
            functions=tuple(functions),
        )

    def to_wfsa(self) -> WFSA:
        """The template as a WFSA over its semiring with symbolic weights (for drawing and oracles)."""
        s = get_semiring(self.semiring)
        out = WFSA(s, name=self.name)
        for state_name in self.states:
            out.add_state(state_name)
        for arc in self.moves:
            out.add_arc(arc.src, arc.dst, ANY, self.weight_expr(arc.weight))
        for arc in self.epsilons:
            out.add_arc(arc.src, arc.dst, EPSILON, self.weight_expr(arc.weight))
        for q, w in self.initial:
            out.set_initial(q, self.weight_expr(w))
        for q, w in self.final:
            out.set_final(q, self.weight_expr(w))
        return out

    def weight_expr(self, weight: Factor) -> sympy.Expr | float:
        """A factor as a sympy expression (or a plain literal) in the template's semiring."""
        s = get_semiring(self.semiring)
        parts: list[sympy.Expr] = [sympy.Function(self.slots[i])(ALPHA) for i in weight.slots]
        parts += [sympy.Symbol(self.constants[c]) for c in weight.constants]
        applied = {sympy.Symbol(n): sympy.Function(n)(ALPHA) for n in self.slots}
        parts += [self.functions[f].xreplace(applied) for f in weight.functions]
        if not parts:
            return s.one if weight.literal is None else weight.literal
        if weight.literal is not None:
            parts.append(sympy.Float(weight.literal))
        return s.sym_times(*parts) if len(parts) > 1 else parts[0]


def _weight_pairs(
    which: dict[int, object], wfsa: WFSA, kind: str, factor: Callable[[object, str, bool], Factor | None]
) -> tuple[tuple[int, Factor], ...]:
    pairs = []
    for q, w in sorted(which.items()):
        f = factor(w, f"{kind} weight of {wfsa.state_name(q)}", False)
        if f is not None:
            pairs.append((q, f))
    return tuple(pairs)


def _parse_factor(
    weight: object,
    semiring: Semiring,
    slots: list[str],
    constants: list[str],
    where: str,
    allow_slots: bool,
    functions: list[sympy.Expr],
) -> Factor | None:
    """Split a weight into slots, constants, a literal and weight functions; ``None`` for a literal zero."""
    if not isinstance(weight, sympy.Basic):
        value = float(weight)  # type: ignore[arg-type]
        if semiring.is_zero(value):
            return None
        return Factor(literal=None if value == semiring.one else value)
    parts = semiring.sym_times_args(weight) or (weight,)
    slot_ids: list[int] = []
    const_ids: list[int] = []
    literal: float | None = None
    function_ids: list[int] = []
    for part in parts:
        if isinstance(part, AppliedUndef) and part.args == (ALPHA,):
            if not allow_slots:
                raise CompileError(f"{where}: {part} is a per-step slot, but this weight consumes no step")
            slot_ids.append(_intern(slots, part.func.__name__))
        elif isinstance(part, sympy.Symbol) and part != ALPHA:
            const_ids.append(_intern(constants, part.name))
        elif isinstance(part, sympy.Number):
            value = semiring.check(float(part), where)
            literal = value if literal is None else semiring.times(literal, value)
        elif part.atoms(AppliedUndef):
            if not allow_slots:
                raise CompileError(f"{where}: {part} reads per-step slots, but this weight consumes no step")
            function_ids.append(_intern(functions, _weight_function(part, slots, where)))  # type: ignore[arg-type]
        else:
            head = semiring.sym_times_head.__name__ if semiring.sym_times_head else "?"
            raise CompileError(
                f"{where}: weight {weight} is not a {semiring.name} product ({head}) of slots f(alpha), "
                f"constants and numbers (offending part: {part})"
            )
    if literal is not None and semiring.is_zero(literal):
        return None
    if literal is not None and literal == semiring.one:
        literal = None
    return Factor(tuple(slot_ids), tuple(const_ids), literal, tuple(function_ids))


def _weight_function(part: sympy.Expr, slots: list[str], where: str) -> sympy.Expr:
    """A factor holding slots ``f(ALPHA)`` as a weight function over raw inputs (symbols named f), checked."""
    applied = part.atoms(AppliedUndef)
    for call in applied:
        if call.args != (ALPHA,):
            raise CompileError(f"{where}: weight {part}: {call} is not a per-step slot f(alpha)")
    expr = part.xreplace({call: sympy.Symbol(call.func.__name__) for call in applied})
    names = [call.func.__name__ for call in sorted(applied, key=str)]
    stray = expr.free_symbols - {sympy.Symbol(n) for n in names}
    if stray:
        raise CompileError(
            f"{where}: weight function {part} may read slots f(alpha) and numbers only, constants enter as "
            f"separate factors (offending part: {', '.join(sorted(map(str, stray)))})"
        )
    check_elementwise(expr, names, where)
    for n in names:
        _intern(slots, n)
    return expr


def _intern(names: list[str], name: str) -> int:
    if name not in names:
        names.append(name)
    return names.index(name)


# --------------------------------------------------------------------------------------------
# Ready-made templates
# --------------------------------------------------------------------------------------------
def sopa_pattern(length: int, self_loops: bool = True, epsilons: bool = True, semiring: str = "max-times") -> Template:
    """A SoPa pattern (sopa-soft-patterns.md §3.1) with ``length`` states.

    State i has a main-path move to i+1 (slot ``mu{i}``), a self-loop (slot ``phi{i}``,
    on every state as in the paper) and an epsilon to i+1 (constant ``eps{i}``). START
    is initial, END final. Compile with ``restart=True`` and ``output="sum"`` for SoPa's
    document score over all spans.

    Raises:
        CompileError: ``length`` < 2.
    """
    if length < 2:
        raise CompileError(f"a SoPa pattern needs at least 2 states, got {length}")
    states = tuple(f"s{i}" for i in range(length))
    slots: list[str] = []
    constants: list[str] = []
    moves: list[TemplateArc] = []
    eps: list[TemplateArc] = []
    for i in range(length):
        if i + 1 < length:
            moves.append(TemplateArc(i, i + 1, Factor((_intern(slots, f"mu{i}"),))))
            if epsilons:
                eps.append(TemplateArc(i, i + 1, Factor(constants=(_intern(constants, f"eps{i}"),))))
        if self_loops:
            moves.append(TemplateArc(i, i, Factor((_intern(slots, f"phi{i}"),))))
    return Template(
        states=states,
        slots=tuple(slots),
        constants=tuple(constants),
        moves=tuple(moves),
        epsilons=tuple(eps),
        initial=((0, Factor()),),
        final=((length - 1, Factor()),),
        semiring=semiring,
        name=f"sopa{length}",
    )


def sopa_bank(lengths: Sequence[int] = (2, 3, 4, 5, 6, 7), **kwargs: object) -> tuple[Template, ...]:
    """One SoPa pattern template per length (each compiled for its own share of dimensions); ``kwargs`` go to
    ``sopa_pattern``.

    Raises:
        CompileError: as ``sopa_pattern`` for a length or option it refuses.
    """
    return tuple(sopa_pattern(n, **kwargs) for n in lengths)  # type: ignore[arg-type]


def dense_template(num_states: int, name: str = "isan") -> Template:
    """Every state to every state, each move its own slot (an ISAN-style input-switched recurrence).

    Raises:
        CompileError: ``num_states`` < 1 (``Template`` refuses an initial weight on a state it does not have).
    """
    moves = []
    slots = []
    for i in range(num_states):
        for j in range(num_states):
            slots.append(f"a{i}_{j}")
            moves.append(TemplateArc(i, j, Factor((len(slots) - 1,))))
    return Template(
        states=tuple(f"q{i}" for i in range(num_states)),
        slots=tuple(slots),
        constants=(),
        moves=tuple(moves),
        initial=((0, Factor()),),
        final=tuple((q, Factor()) for q in range(num_states)),
        name=name,
    )


# --------------------------------------------------------------------------------------------
# Options and the lowered plan
# --------------------------------------------------------------------------------------------
#: Default ``Options.state_budget``: 256 MiB of stored forward states.
DEFAULT_STATE_BUDGET = 256 << 20


@dataclass(frozen=True)
class Options:
    """How a template runs.

    ``restart``: SoPa's search -- the start vector is ⊕-added before every step, so outputs
    score all spans ending at each step. ``output``: "steps", "sum" (⊕ over valid steps) or
    "last". ``epsilon_cap``: ``None`` for the exact closure E*, k for at most k epsilons in a
    row. ``bidirectional``: the upper half of the dimensions reads each sequence backwards.
    ``state_budget``: bytes a generated kernel's forward may spend on storing every state (B, T, Q, D) for
    its backward; larger runs save checkpoints and the backward recomputes from them (gradients are the same).
    """

    restart: bool = False
    output: OutputMode = "steps"
    epsilon_cap: int | None = None
    bidirectional: bool = False
    state_budget: int = DEFAULT_STATE_BUDGET

    def __post_init__(self) -> None:
        if self.output not in ("steps", "sum", "last"):
            raise CompileError(f"output must be 'steps', 'sum' or 'last', not {self.output!r}")
        if self.epsilon_cap is not None and self.epsilon_cap < 0:
            raise CompileError(f"epsilon_cap must be None (exact) or >= 0, not {self.epsilon_cap}")
        if isinstance(self.state_budget, bool) or not isinstance(self.state_budget, int) or self.state_budget < 0:
            raise CompileError(f"state_budget must be an integer number of bytes >= 0, not {self.state_budget!r}")


@dataclass(frozen=True)
class PlanMove:
    """``pre[dst] ⊕= z_in[src] ⊗ slots[...] ⊗ params[param]`` (param ``None``: one)."""

    src: int
    dst: int
    slots: tuple[int, ...]
    param: int | None
    functions: tuple[int, ...] = ()


@dataclass(frozen=True)
class PlanClosure:
    """``z[dst] ⊕= pre[src] ⊗ params[param]`` (param ``None``: one)."""

    src: int
    dst: int
    param: int | None


@dataclass(frozen=True)
class ParamSource:
    """Where static parameter k comes from: ``kind`` is "move", "closure", "start" or "final";
    ``index`` the move index, (src, dst) closure pair, or state."""

    kind: Literal["move", "closure", "start", "final"]
    index: int | tuple[int, int]


@dataclass(frozen=True)
class Plan:
    """The lowered template a kernel runs (see the module docstring for its semantics)."""

    template: Template
    semiring: Semiring
    options: Options
    moves: tuple[PlanMove, ...]
    closure: tuple[PlanClosure, ...]
    start: tuple[int | None, ...]
    final: tuple[tuple[int, int | None], ...]
    params: tuple[ParamSource, ...] = field(default=())
    #: The weight functions as the kernels load them (storage form, stable spelling, derivatives).
    loads: tuple[Load, ...] = field(default=())
    #: The output map as the kernels store it (stable spelling, derivatives), if the template has one.
    output_map: OutputLoad | None = None

    @property
    def storage(self) -> Semiring:
        """The semiring the kernels compute in (``semiring.storage``)."""
        return self.semiring.storage

    @property
    def num_states(self) -> int:
        return self.template.num_states

    @property
    def num_slots(self) -> int:
        return len(self.template.slots)

    @property
    def num_params(self) -> int:
        """Rows of the kernels' parameter table: the static parameters, then the output map's constants."""
        return len(self.params) + self.num_output_constants

    @property
    def padding(self) -> float:
        """The "steps" output at padding positions: the storage semiring's zero, or 0 under an output map."""
        return float(self.storage.zero) if self.output_map is None else 0.0

    @property
    def num_static_params(self) -> int:
        """Rows of the static parameter table (``reference.static_params``)."""
        return len(self.params)

    @property
    def num_output_constants(self) -> int:
        return 0 if self.output_map is None else len(self.output_map.constants)

    def output_constant(self, c: int) -> int:
        """The row of the parameter table holding output-map constant ``c``."""
        return len(self.params) + c

    @property
    def num_functions(self) -> int:
        return len(self.loads)

    @property
    def has_closure(self) -> bool:
        """Whether the closure step is more than the identity."""
        return any(e.src != e.dst or e.param is not None for e in self.closure)

    def key(self) -> str:
        """A stable text identifying everything generated code depends on."""
        return repr(
            (
                self.semiring.name,
                self.options,
                self.moves,
                self.closure,
                self.start,
                self.final,
                self.num_states,
                self.num_slots,
                self.num_params,
                tuple((str(load.expr), load.inputs, tuple(map(str, load.grads))) for load in self.loads),
                None if self.output_map is None else (str(self.output_map.expr), self.output_map.constants),
            )
        )


def epsilon_reach(template: Template, cap: int | None) -> tuple[set[tuple[int, int]], set[int]]:
    """Structural closure pairs (i, j), i != j, reachable by 1..cap epsilons, and the states on
    an epsilon cycle of length <= cap (whose diagonal closure entry is not plain one)."""
    n = template.num_states
    step = {(a.src, a.dst) for a in template.epsilons}
    reach: set[tuple[int, int]] = set()
    frontier = set(step)
    depth = 1
    while frontier and (cap is None or depth <= cap):
        new = frontier - reach
        reach |= new
        frontier = {(i, k) for (i, j) in new for (j2, k) in step if j == j2}
        depth += 1
        if depth > n * n + 1 and cap is None:
            break
    cyclic = {i for i in range(n) if (i, i) in reach}
    return {(i, j) for (i, j) in reach if i != j}, cyclic


def lower(template: Template, semiring: str | Semiring, options: Options | None = None) -> Plan:
    """Lower ``template`` for ``semiring`` and ``options`` into a kernel plan.

    Raises:
        CompileError: the semiring has no kernel realisation, or a literal other than one when ``semiring`` is
            not the template's.
    """
    options = options or Options()
    if template.output_map is not None and options.output != "steps":
        raise CompileError(
            f"{template.name}: an output map applies to every step's output (output='steps'), not {options.output!r}"
        )
    target = get_semiring(semiring)
    target.kernel_algebra()
    if template.functions and target is not get_semiring(template.semiring):
        raise CompileError(
            f"{template.name}: weight functions are written in the {template.semiring} semiring and cannot be "
            f"compiled for {target.name}"
        )
    if target is not get_semiring(template.semiring):
        literal_arcs = [a for a in template.moves + template.epsilons if a.weight.literal is not None]
        literal_ends = [w for _, w in template.initial + template.final if w.literal is not None]
        if literal_arcs or literal_ends:
            raise CompileError(
                f"{template.name}: literals are written in the {template.semiring} semiring and cannot be "
                f"compiled for {target.name} (only literal one/zero carry over)"
            )
    params: list[ParamSource] = []

    def new_param(source: ParamSource) -> int:
        params.append(source)
        return len(params) - 1

    moves = []
    for i, arc in enumerate(template.moves):
        w = arc.weight
        param = new_param(ParamSource("move", i)) if (w.constants or w.literal is not None) else None
        moves.append(PlanMove(arc.src, arc.dst, w.slots, param, w.functions))
    moves.sort(key=lambda m: (m.dst, m.src))
    pairs, cyclic = epsilon_reach(template, options.epsilon_cap)
    closure = []
    for j in range(template.num_states):
        diag = new_param(ParamSource("closure", (j, j))) if j in cyclic else None
        closure.append(PlanClosure(j, j, diag))
        for i in sorted(i for (i, jj) in pairs if jj == j):
            closure.append(PlanClosure(i, j, new_param(ParamSource("closure", (i, j)))))
    reach_from_initial = {q for q, _ in template.initial} | {j for (i, j) in pairs if i in dict(template.initial)}
    start = tuple(
        new_param(ParamSource("start", q)) if q in reach_from_initial else None for q in range(template.num_states)
    )
    final = tuple(
        (q, new_param(ParamSource("final", q)) if (w.constants or w.literal is not None) else None)
        for q, w in template.final
    )
    loads = tuple(lower_function(expr, target, template.slots) for expr in template.functions)
    om = template.output_map
    mapped = None if om is None else lower_output(om.expr, template.slots, om.constants)
    return Plan(template, target, options, tuple(moves), tuple(closure), start, final, tuple(params), loads, mapped)
