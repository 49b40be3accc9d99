"""A small language for recurrences, written with sympy the way the papers write them.

A ``Recurrence`` declares state components with initial values, input-dependent
functions of the current input (and optionally of previous inputs), constants,
the semiring, one update per component and one or more outputs::

    rec = Recurrence("example-6", semiring="real", dims="d")
    c = rec.state("c", init=0)                 # the symbol c_{t-1}
    f, g = rec.inputs("f g")                   # f(x_t), g(x_t)
    rec.update(c, f * c + (1 - f) * g)         # Eq. 5c with Eq. 5b inlined
    rec.output("c", c)                         # the output map, in the current state c_t

Updates are ordinary sympy expressions in the semiring's symbolic realisation
(``Add``/``Mul`` for real, ``Max``/``Add`` for max-plus, ...); ``rec.plus`` and
``rec.times`` build them from the ``Semiring`` object. ``rec.now(c)`` refers to a
component's value at the current step (what the papers write ``z_t^{(0)} gamma``);
an update that uses it becomes an epsilon arc. ``dims="d"`` says that the
declared equations describe one hidden unit of an elementwise model of width d.

``SemiringSyntax`` reads an expression back as a sum of products in the semiring;
both the prover and the certificate use it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kleene.automata.semiring import Semiring, get_semiring
from kleene.automata.weights import ALPHA, lambdify_calls, parse_weight
from kleene.automata.weights import sigmoid as sigmoid  # the recurrence language's logistic function
from kleene.errors import RecurrenceError, WeightError

#: The padding symbol standing for inputs before the start of the string (x_0, x_{-1}, ...).
BOS = "<s>"


tanh = sympy.tanh


#: The current value of the bias (start) state, always the semiring's one: ``rec.times(ONE_NOW, gamma)``
#: is an epsilon arc from the start state (SoPa's epsilon out of START, Fig. 4's q0 -ε/γ-> q3).
ONE_NOW = sympy.Symbol("one_t")


def input_symbol(lag: int) -> sympy.Symbol:
    """``x_t`` for lag 0, ``x_{t-1}`` for lag 1, ..."""
    return sympy.Symbol("x_t" if lag == 0 else f"x_{{t-{lag}}}")


def symbol_atom(symbol: Hashable) -> sympy.Symbol:
    """The sympy atom standing for one concrete alphabet symbol (quoted: ``'a'``)."""
    return sympy.Symbol(repr(str(symbol)))


def histories(alphabet: Sequence[Hashable], window: int) -> list[tuple[Hashable, ...]]:
    """Every possible tuple of the last K−1 inputs: BOS-padded prefixes, then full windows."""
    if window <= 1:
        return [()]
    out: list[tuple[Hashable, ...]] = []
    frontier: list[tuple[Hashable, ...]] = [()]
    for k in range(window):
        out.extend((BOS,) * (window - 1 - k) + w for w in frontier)
        frontier = [(*w, a) for w in frontier for a in alphabet]
    return out


def specialise(expr: sympy.Expr, history: tuple[Hashable, ...]) -> sympy.Expr:
    """``expr`` with ``x_{t-k}`` replaced by the k-th last symbol of ``history``."""
    return expr.xreplace({input_symbol(k): symbol_atom(history[-k]) for k in range(1, len(history) + 1)})


def canonical_numbers(expr: sympy.Basic) -> sympy.Basic:
    """``expr`` with integral floats as integers (the semirings' ``one`` is ``1.0``)."""
    floats = {f: sympy.Integer(int(f)) for f in expr.atoms(sympy.Float) if float(f).is_integer()}
    return expr.xreplace(floats) if floats else expr


def same(a: Any, b: Any) -> bool:
    """Structural equality up to integral floats (``0`` and ``0.0`` are the same constant)."""
    return bool(canonical_numbers(sympy.sympify(a)) == canonical_numbers(sympy.sympify(b)))


def _latex_base(name: str) -> str:
    """``c1`` -> ``c^{(1)}``; ``doc`` -> ``\\mathrm{doc}``; ``c`` -> ``c``."""
    stem = name.rstrip("0123456789")
    digits = name[len(stem) :]
    if len(stem) > 1:
        stem = rf"\mathrm{{{stem}}}"
    return f"{stem}^{{({digits})}}" if digits and stem else stem


def _is_identifier(name: str) -> bool:
    return name.isidentifier()


# ---------------------------------------------------------------------------------------------
# Reading expressions as sums of products in a semiring
# ---------------------------------------------------------------------------------------------


class NotInSemiring(Exception):
    """Internal: a node containing ``blocked`` symbols that is neither a semiring sum nor product."""

    def __init__(self, node: sympy.Basic, symbol: sympy.Symbol):
        super().__init__(str(node))
        self.node = node
        self.symbol = symbol


class SemiringSyntax:
    """How a semiring's symbolic operations look in sympy, read back.

    ``plus_args(e)`` / ``times_args(e)`` give the operands when ``e`` is a semiring
    sum / product node, else ``None``. ``expand`` distributes products over sums.
    """

    def __init__(self, semiring: Semiring):
        self.semiring = semiring
        self.name = semiring.name

    def plus_args(self, e: sympy.Basic) -> tuple[sympy.Basic, ...] | None:
        return self.semiring.sym_plus_args(e)

    def times_args(self, e: sympy.Basic) -> tuple[sympy.Basic, ...] | None:
        return self.semiring.sym_times_args(e)

    def expand(self, e: sympy.Basic, blocked: frozenset[sympy.Symbol] | None = None) -> list[list[sympy.Basic]]:
        """``e`` as a list of products (lists of factors): the semiring sum of the products.

        With ``blocked``, only nodes containing one of those symbols are opened; other
        subexpressions stay single factors. Without it, every node is opened.

        Raises:
            NotInSemiring: a node containing a blocked symbol that is no semiring operation.
        """
        if blocked is not None and not (e.free_symbols & blocked):
            return [[e]]
        if blocked is not None and e in blocked:
            return [[e]]
        parts = self.plus_args(e)
        if parts is not None:
            return [term for p in parts for term in self.expand(p, blocked)]
        factors = self.times_args(e)
        if factors is not None:
            products: list[list[sympy.Basic]] = [[]]
            for f in factors:
                products = [p + q for p in products for q in self.expand(f, blocked)]
            return products
        if blocked is None:
            return [[e]]
        symbol = sorted(e.free_symbols & blocked, key=str)[0]
        raise NotInSemiring(e, symbol)

    def monomials(self, e: sympy.Basic) -> Any:
        """A canonical form of ``e`` as a formal semiring polynomial.

        Two expressions with equal canonical forms are equal in every commutative
        semiring of this kind (idempotent ones compare sets of monomials, the others
        multisets). ``residual`` decides the real semiring with sympy's ``expand`` and the
        log semiring through its isomorphism ``exp`` onto the non-negative reals.
        """
        s = self.semiring
        image = s.sym_to_real(e)
        if image is not None and image == e:  # the real field itself: sympy's polynomial normal form
            return sympy.expand(e)
        terms = [s.sym_times(*p) for p in self.expand(e)]
        terms = [t for t in terms if t != s.sym_zero]
        numbers = [t for t in terms if t.is_number]
        others = [t for t in terms if not t.is_number]
        if numbers and s.idempotent:
            others.append(s.sym_plus(*numbers) if len(numbers) > 1 else numbers[0])
        elif numbers:
            others.extend(numbers)
        if s.idempotent:
            return frozenset(others)
        return tuple(sorted(sympy.srepr(t) for t in others))

    def equal(self, a: sympy.Basic, b: sympy.Basic) -> bool:
        """Whether ``a`` and ``b`` are equal as semiring polynomials (see ``monomials``)."""
        return self.residual(a, b) == ""

    def residual(self, a: sympy.Basic, b: sympy.Basic) -> str:
        """``""`` when ``a == b`` is decided true; otherwise the difference, printed."""
        a, b = canonical_numbers(a), canonical_numbers(b)
        image_a, image_b = self.semiring.sym_to_real(a), self.semiring.sym_to_real(b)
        if image_a is not None and image_b is not None:  # decided in the real field (log: through exp)
            a, b = sympy.expand(image_a), sympy.expand(image_b)
            diff = sympy.expand(a - b)
            if diff != 0 and sympy.simplify(diff) != 0:
                return str(diff)
            return ""
        ma, mb = self.monomials(a), self.monomials(b)
        if ma == mb:
            return ""
        if isinstance(ma, frozenset):
            return f"only left: {sorted(map(str, ma - mb))}; only right: {sorted(map(str, mb - ma))}"
        return f"{ma} != {mb}"


# ---------------------------------------------------------------------------------------------
# The recurrence
# ---------------------------------------------------------------------------------------------


@dataclass
class Component:
    """One state component: its name, previous/current symbols, initial value and update."""

    name: str
    prev: sympy.Symbol
    now: sympy.Symbol
    init: sympy.Expr
    update: sympy.Expr | None = None


@dataclass
class InputFunction:
    """An input-dependent function ``f(x_{t-lags}, ..., x_t)`` with an optional meaning."""

    name: str
    lags: int
    call: sympy.Expr
    meaning: str = ""


#: The semiring the papers state their recurrences in (the default of ``Recurrence``): the real numbers.
PAPER_SEMIRING = "real"


@dataclass
class Recurrence:
    """A recurrence over a semiring: components, inputs, constants, updates, outputs.

    Args:
        name: a short name (used in tables and file names).
        semiring: a ``Semiring`` or its name.
        dims: ``"d"`` (or any text) when the equations describe one hidden unit of an
            elementwise model of that width; ``None`` when they describe the whole model.
        alphabet: the finite input alphabet, needed when inputs depend on previous inputs.
        doc: one line describing the model and its source.
    """

    name: str
    semiring: Semiring | str = PAPER_SEMIRING
    dims: str | None = None
    alphabet: Sequence[Hashable] | None = None
    doc: str = ""
    components: list[Component] = field(default_factory=list)
    input_functions: list[InputFunction] = field(default_factory=list)
    constant_symbols: list[sympy.Symbol] = field(default_factory=list)
    outputs: dict[str, sympy.Expr] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.semiring = get_semiring(self.semiring)
        if self.alphabet is not None:
            self.alphabet = list(self.alphabet)

    @property
    def in_paper_semiring(self) -> bool:
        """Whether the recurrence is over ``PAPER_SEMIRING``, the one its paper states it in."""
        return self.ring == get_semiring(PAPER_SEMIRING)

    # -- declarations ---------------------------------------------------------------------
    @property
    def ring(self) -> Semiring:
        assert isinstance(self.semiring, Semiring)
        return self.semiring

    def _check_new_name(self, name: str) -> None:
        if not _is_identifier(name):
            raise RecurrenceError(f"{self.name}: {name!r} is not a valid name (use letters, digits, _)")
        taken = {c.name for c in self.components} | {f.name for f in self.input_functions}
        taken |= {s.name for s in self.constant_symbols}
        if name in taken:
            raise RecurrenceError(f"{self.name}: the name {name!r} is declared twice")
        if name in ("alpha", "x_t", "t", "one"):
            raise RecurrenceError(f"{self.name}: {name!r} is reserved (the consumed symbol / the input / time)")

    def state(self, name: str, init: Any = None) -> sympy.Symbol:
        """Declare a component; return the symbol of its previous value ``name_{t-1}``.

        ``init`` (a number or an expression in constants) defaults to the semiring's zero.
        """
        self._check_new_name(name)
        initial = self.ring.sym_zero if init is None else sympy.sympify(init)
        comp = Component(name, sympy.Symbol(f"{name}_{{t-1}}"), sympy.Symbol(f"{name}_t"), initial)
        self.components.append(comp)
        return comp.prev

    def states(self, names: str, init: Any = None) -> tuple[sympy.Symbol, ...]:
        return tuple(self.state(n, init) for n in names.split())

    def input(self, name: str, lags: int = 0, meaning: str = "") -> sympy.Expr:
        """Declare an input-dependent function; return its application ``name(x_{t-lags}, ..., x_t)``."""
        self._check_new_name(name)
        if lags < 0:
            raise RecurrenceError(f"{self.name}: input {name!r} has negative lags {lags}")
        args = [input_symbol(k) for k in range(lags, -1, -1)]
        call = sympy.Function(name)(*args)
        self.input_functions.append(InputFunction(name, lags, call, meaning))
        return call

    def inputs(self, names: str, lags: int = 0) -> tuple[sympy.Expr, ...]:
        return tuple(self.input(n, lags) for n in names.split())

    def constant(self, name: str) -> sympy.Symbol:
        """Declare a constant (a learned scalar such as an epsilon weight or a final weight)."""
        self._check_new_name(name)
        sym = sympy.Symbol(name)
        self.constant_symbols.append(sym)
        return sym

    def constants(self, names: str) -> tuple[sympy.Symbol, ...]:
        return tuple(self.constant(n) for n in names.split())

    def now(self, prev: sympy.Symbol) -> sympy.Symbol:
        """The current-step symbol ``c_t`` of the component whose previous symbol is ``prev``."""
        return self.component_of(prev).now

    @property
    def one_now(self) -> sympy.Symbol:
        """The start state's current value (semiring one); multiply it by a constant for an epsilon arc."""
        return ONE_NOW

    def plus(self, *terms: Any) -> sympy.Expr:
        return self.ring.sym_plus(*map(sympy.sympify, terms))

    def times(self, *factors: Any) -> sympy.Expr:
        return self.ring.sym_times(*map(sympy.sympify, factors))

    def expression(self, expr: Any, where: str) -> sympy.Basic:
        """``expr`` as a sympy expression: a sympy expression or a number as it is, or text in which the declared
        names stand for what their declarations returned (a component ``c`` for ``c_{t-1}``, an input ``f`` for
        ``f(x_t)``, a constant for itself), parsed without evaluating Python (``weights.parse_weight``).

        Raises:
            RecurrenceError: another type, or text that does not parse (naming ``where``).
        """
        if isinstance(expr, str):
            declared: dict[str, Any] = {c.name: c.prev for c in self.components}
            declared |= {f.name: f.call for f in self.input_functions}
            declared |= {c.name: c for c in self.constant_symbols}
            try:
                return parse_weight(expr, f"{self.name}: {where}", declared)
            except WeightError as exc:
                raise RecurrenceError(f"{exc} (in text, a component name is its previous value and an input name "
                                      "its application to the current input)") from None
        if isinstance(expr, sympy.Basic) or (isinstance(expr, (int, float)) and not isinstance(expr, bool)):
            return sympy.sympify(expr)
        raise RecurrenceError(
            f"{self.name}: {where} must be a sympy expression, a number or a string, got {type(expr).__name__} "
            f"({expr!r:.80})"
        )

    def update(self, prev: sympy.Symbol, expr: Any) -> None:
        """Set the update of the component ``prev`` (an expression in previous/current states; text as in
        ``expression``)."""
        comp = self.component_of(prev)
        if comp.update is not None:
            raise RecurrenceError(f"{self.name}: component {comp.name} is updated twice")
        expr = self.expression(expr, f"the update of {comp.name}")
        self._check_symbols(expr, f"the update of {comp.name}")
        comp.update = expr

    def output(self, name: str, expr: Any) -> None:
        """Declare an output: an expression in the current state (written with the state symbols; text as in
        ``expression``)."""
        expr = self.expression(expr, f"output {name}")
        self._check_symbols(expr, f"output {name}")
        self.outputs[name] = expr.xreplace({c.prev: c.now for c in self.components})

    # -- lookups ----------------------------------------------------------------------------
    def component_of(self, ref: sympy.Symbol | str) -> Component:
        for c in self.components:
            if ref in (c.prev, c.now, c.name):
                return c
        raise RecurrenceError(f"{self.name}: {ref} is not a declared state component")

    @property
    def prev_symbols(self) -> frozenset[sympy.Symbol]:
        return frozenset(c.prev for c in self.components)

    @property
    def now_symbols(self) -> frozenset[sympy.Symbol]:
        return frozenset(c.now for c in self.components)

    @property
    def window(self) -> int:
        """K: the number of inputs (current and previous) the input functions read."""
        return 1 + max((f.lags for f in self.input_functions), default=0)

    def input_named(self, name: str) -> InputFunction | None:
        return next((f for f in self.input_functions if f.name == name), None)

    def input_calls(self, expr: sympy.Basic) -> list[sympy.Expr]:
        """The applications of declared input functions inside ``expr``."""
        return sorted((a for a in expr.atoms(AppliedUndef) if self.input_named(a.func.__name__)), key=str)

    def depends_on_input(self, expr: sympy.Basic) -> bool:
        return bool(self.input_calls(expr)) or ALPHA in expr.free_symbols

    def _check_symbols(self, expr: sympy.Basic, where: str) -> None:
        known = set(self.prev_symbols | self.now_symbols) | set(self.constant_symbols) | {ONE_NOW}
        known |= {input_symbol(k) for k in range(self.window + 8)}
        unknown = sorted(expr.free_symbols - known, key=str)
        if unknown:
            raise RecurrenceError(
                f"{self.name}: {where} uses undeclared symbol(s) {', '.join(map(str, unknown))}; "
                "declare them with state(), input() or constant()"
            )
        for call in expr.atoms(AppliedUndef):
            fn = self.input_named(call.func.__name__)
            if fn is None:
                raise RecurrenceError(f"{self.name}: {where} applies undeclared function {call.func.__name__}")
            if call != fn.call:
                raise RecurrenceError(f"{self.name}: {where} applies {call}; declared as {fn.call}")

    def validate(self) -> None:
        """Raise ``RecurrenceError`` unless every component has an update and there is an output."""
        if not self.components:
            raise RecurrenceError(f"{self.name}: no state components")
        for c in self.components:
            if c.update is None:
                raise RecurrenceError(f"{self.name}: component {c.name} has no update")
            if c.init.free_symbols - set(self.constant_symbols):
                raise RecurrenceError(f"{self.name}: the initial value of {c.name} must be a constant, got {c.init}")
        if not self.outputs:
            raise RecurrenceError(f"{self.name}: no output declared (use rec.output(name, expr))")
        if self.window > 1 and not self.alphabet:
            raise RecurrenceError(
                f"{self.name}: inputs read previous inputs (window {self.window}); supply a finite alphabet"
            )

    def now_order(self) -> list[Component]:
        """Components in an order where every current-step reference is computed first.

        Raises:
            RecurrenceError: current-step references form a cycle.
        """
        order: list[Component] = []
        state: dict[str, int] = {}

        def visit(c: Component, path: list[str]) -> None:
            if state.get(c.name) == 2:
                return
            if state.get(c.name) == 1:
                raise RecurrenceError(f"{self.name}: current-step references form a cycle {' -> '.join(path)}")
            state[c.name] = 1
            assert c.update is not None
            for sym in sorted(c.update.free_symbols & self.now_symbols, key=str):
                dep = self.component_of(sym)
                visit(dep, [*path, dep.name])
            state[c.name] = 2
            order.append(c)

        for c in self.components:
            visit(c, [c.name])
        return order

    def initial_values(self) -> dict[sympy.Symbol, sympy.Expr]:
        """``c_0`` per component: the initial value ⊕ the update's current-step terms at t = 0.

        A current-step reference is an epsilon arc, and the Forward algorithm closes the
        initial weights under epsilon arcs too; so the top-level products of an update that
        read a current value (``now(c)`` or ``one_now``) also apply at t = 0. Updates that
        are not sums of products in the semiring start from their initial value alone.
        """
        s = self.ring
        syntax = SemiringSyntax(s)
        blocked = self.prev_symbols | self.now_symbols | {ONE_NOW}
        values: dict[sympy.Symbol, sympy.Expr] = {ONE_NOW: s.sym_one}
        for comp in self.now_order():
            assert comp.update is not None
            extra: list[sympy.Expr] = []
            try:
                products = syntax.expand(comp.update, blocked)
            except NotInSemiring:
                products = []
            for product in products:
                if any(f in self.now_symbols or f == ONE_NOW for f in product):
                    extra.append(s.sym_times(*product).xreplace(values))
            start = [] if same(comp.init, s.sym_zero) else [comp.init]
            values[comp.now] = s.sym_plus(*start, *extra) if extra else comp.init
        return {c.prev: values[c.now] for c in self.components}

    # -- numeric evaluation -------------------------------------------------------------------
    def run(
        self, symbols: Sequence[Hashable], env: Mapping[str, Any], precision: int | None = None
    ) -> list[dict[str, Any]]:
        """Run the recurrence numerically; return the outputs after each prefix (t = 0..n).

        ``env`` maps each input function to a table (``{symbol: value}``, or
        ``{(x_{t-k}, ..., x_t): value}`` for lagged inputs) or a callable taking the
        symbols, and each constant to a number. Positions before the start read ``BOS``.

        Raises:
            RecurrenceError: an invalid recurrence (``validate``), an input function or constant that ``env``
                gives no value, or a symbol that is not hashable.
        """
        return self._runs([symbols], env, precision)[0]

    def run_prefixes(
        self, strings: Sequence[Sequence[Hashable]], env: Mapping[str, Any], precision: int | None = None
    ) -> dict[tuple[Hashable, ...], dict[str, Any]]:
        """``run`` of several strings at once: the outputs after every prefix of every string, by prefix. A prefix
        that strings share is run once (the values are those ``run`` gives: the same steps from the same state).

        Raises:
            RecurrenceError: as ``run``.
        """
        out: dict[tuple[Hashable, ...], dict[str, Any]] = {}
        for string, runs in zip(strings, self._runs(strings, env, precision)):
            prefix = tuple(string)
            out.update((prefix[:t], outputs) for t, outputs in enumerate(runs))
        return out

    def _runs(
        self, strings: Sequence[Sequence[Hashable]], env: Mapping[str, Any], precision: int | None
    ) -> list[list[dict[str, Any]]]:
        """For each string, the outputs after each prefix (t = 0..n), stepping a tree of the strings' prefixes:
        node k is reached from its parent by one symbol, holds the state after its prefix, and is stepped once."""
        self.validate()
        order = self.now_order()
        evaluator = NumericEvaluator(self, env, precision)
        start = {p: evaluator.value(e, {}, ()) for p, e in self.initial_values().items()}
        history: tuple[Hashable, ...] = (BOS,) * (self.window - 1)
        states = [(start, history)]
        outputs = [self._outputs(evaluator, start, (*history, BOS))]
        child: dict[tuple[int, Hashable], int] = {}
        results = []
        for symbols in strings:
            node = 0
            runs = [outputs[0]]
            for position, x in enumerate(symbols):
                try:
                    found = child.get((node, x))
                except TypeError:  # the prefix tree is keyed by symbols
                    raise RecurrenceError(
                        f"{self.name}: symbol {x!r} at position {position} is not hashable (symbols are table keys)"
                    ) from None
                if found is None:
                    state, history = states[node]
                    window = (*history, x)
                    values: dict[sympy.Symbol, Any] = {**state, ONE_NOW: as_float(self.ring.one)}
                    now: dict[sympy.Symbol, Any] = {}
                    for c in order:
                        assert c.update is not None
                        now[c.now] = evaluator.value(c.update, {**values, **now}, window)
                    state = {c.prev: now[c.now] for c in self.components}
                    found = child[node, x] = len(states)
                    states.append((state, window[1:]))
                    outputs.append(self._outputs(evaluator, state, window))
                node = found
                runs.append(outputs[node])
            results.append(runs)
        return results

    def _outputs(
        self, evaluator: NumericEvaluator, state: dict[sympy.Symbol, Any], window: tuple[Hashable, ...]
    ) -> dict[str, Any]:
        current = {c.now: state[c.prev] for c in self.components}
        return {name: evaluator.value(expr, current, window) for name, expr in self.outputs.items()}

    # -- display -----------------------------------------------------------------------------
    def equations(self) -> list[tuple[str, sympy.Expr, sympy.Expr]]:
        """``(kind, lhs, rhs)`` rows: initial values ``c_0`` (after the epsilon closure, see
        ``initial_values``), updates ``c_t = ...`` and outputs (identity outputs omitted)."""
        rows: list[tuple[str, sympy.Expr, sympy.Expr]] = []
        initial = self.initial_values() if all(c.update is not None for c in self.components) else {}
        for c in self.components:
            rows.append(("init", sympy.Symbol(f"{c.name}_0"), initial.get(c.prev, c.init)))
        for c in self.components:
            assert c.update is not None
            rows.append(("update", c.now, c.update))
        for name, expr in self.outputs.items():
            if name in self._component_names() and expr == self.component_of(name).now:
                continue
            rows.append(("output", sympy.Symbol(f"{name}_t"), expr))
        return rows

    def latex(self, expr: sympy.Basic) -> str:
        """LaTeX in the papers' notation: ``c1_{t-1}`` as ``c^{(1)}_{t-1}``, ``one_t`` as ``\\bar{1}``."""
        names: dict[sympy.Basic, str] = {ONE_NOW: r"\bar{1}"}
        for c in self.components:
            base = _latex_base(c.name)
            names[c.prev] = f"{base}_{{t-1}}"
            names[c.now] = f"{base}_{{t}}"
            names[sympy.Symbol(f"{c.name}_0")] = f"{base}_{{0}}"
        for name in self.outputs:
            names[sympy.Symbol(f"{name}_t")] = f"{_latex_base(name)}_{{t}}"
        return sympy.latex(expr, symbol_names=names)

    def _component_names(self) -> set[str]:
        return {c.name for c in self.components}


class NumericEvaluator:
    """Evaluates recurrence expressions with input functions read from tables or callables."""

    def __init__(self, rec: Recurrence, env: Mapping[str, Any], precision: int | None = None):
        self.rec = rec
        self.env = env
        self.precision = precision

    def call(self, name: str, args: tuple[Hashable, ...]) -> Any:
        """The value of input function ``name`` at the given input window."""
        if name not in self.env:
            raise RecurrenceError(f"{self.rec.name}: no value for input function {name!r} in the environment")
        table = self.env[name]
        if callable(table):
            return float(table(*args))
        key: Any = args[0] if len(args) == 1 else tuple(args)
        try:
            return float(table[key])
        except (KeyError, TypeError, IndexError):
            raise RecurrenceError(f"{self.rec.name}: {name}{tuple(args)!r} is not defined in the environment") from None

    def value(self, expr: sympy.Basic, values: Mapping[sympy.Symbol, Any], window: tuple[Hashable, ...]) -> Any:
        """``expr`` at the given state values; ``window`` is (x_{t-K+1}, ..., x_t).

        Floats, or mpmath numbers with ``precision`` decimal digits when the evaluator has one.
        """
        fn, calls, params = lambdify_calls(expr, "numpy" if self.precision is None else "mpmath")
        args: list[Any] = []
        for call in calls:
            concrete = tuple(self._argument(a, window) for a in call.args)
            args.append(self.call(call.func.__name__, concrete))
        for p in params:
            if p in values:
                args.append(values[p])
            elif p.name in self.env:
                args.append(self.env[p.name])
            else:
                raise RecurrenceError(f"{self.rec.name}: no value for {p} while evaluating {expr}")
        if self.precision is not None:
            import mpmath

            with mpmath.workdps(self.precision):
                return fn(*[mpmath.mpf(a) for a in args])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = fn(*args)
        return float(out)

    def _argument(self, arg: sympy.Basic, window: tuple[Hashable, ...]) -> Hashable:
        for lag in range(len(window)):
            if arg == input_symbol(lag):
                return window[len(window) - 1 - lag]
        if isinstance(arg, sympy.Symbol) and arg.name.startswith("'"):
            text: str = arg.name[1:-1]
            return text
        raise RecurrenceError(f"{self.rec.name}: cannot evaluate input argument {arg}")


def as_float(value: Any) -> float:
    """A semiring value as a float (booleans become 0/1)."""
    return float(value) if not isinstance(value, (bool, np.bool_)) else float(bool(value))


def close(a: float, b: float, tol: float = 1e-9) -> bool:
    """Numeric equality allowing infinities (the zero of max-plus is -inf)."""
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def iter_strings(alphabet: Sequence[Hashable], max_length: int) -> Iterable[tuple[Hashable, ...]]:
    """All strings over ``alphabet`` of length 0..max_length, shortest first."""
    frontier: list[tuple[Hashable, ...]] = [()]
    for _ in range(max_length + 1):
        yield from frontier
        frontier = [(*s, a) for s in frontier for a in alphabet]
