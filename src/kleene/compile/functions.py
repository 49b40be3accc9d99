"""Weight functions: a slot's weight as an elementwise expression of raw per-step inputs, run inside the kernels.

A template weight such as ``(1 - sigmoid(f(α))) * u(α)`` in real, or ``sigmoid(f(α))`` in max-times, is a product
of bare slots (``u(α)``: the stored value the network writes) and **weight functions** (``1 - sigmoid(f)``,
``sigmoid(f)``): elementwise sympy expressions over the raw numbers ``f`` the network writes into the kernel's
slots. A weight function's value is an element of the template's semiring; the kernels compute its storage form
(``Semiring.sym_to_storage``: the logarithm for max-times), in a numerically stable spelling (``stabilize``:
``log σ(x)`` is ``logsigmoid(x)``, ``log(1 - σ(x))`` is ``logsigmoid(-x)``, logarithms of products are sums), in the
load path of the forward; the backward adds ``grad(weight) * d weight / d raw`` (``sympy.diff``) to each raw input's
gradient. The torch reference evaluates the same expression (``torch_function``).

An **output map** (``kleene.compile.template.OutputMap``) is an expression in the same vocabulary whose value is a
real number (a layer's output, not a semiring element) over the step output ``y`` (``OUTPUT``, storage form), raw
slots and per-dimension constants; ``lower_output`` gives its stable spelling and derivatives, which the kernels use
in their store path and backward, and ``torch_expression`` evaluates it for the torch reference.

The vocabulary (``CALLS``): numbers, raw inputs, ``+``, ``*``, integer powers and the calls exp, log, log1p, tanh,
sigmoid and logsigmoid (``kleene.automata.weights``); every dialect spells each call (``Dialect.call_forms``).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
from sympy.codegen.cfunctions import log1p

from kleene.automata.semiring import Semiring
from kleene.automata.weights import logsigmoid, sigmoid
from kleene.errors import CompileError

#: The calls a weight function may make, by the key of their spelling in ``Dialect.call_forms``.
CALLS: dict[type, str] = {
    sympy.exp: "exp",
    sympy.log: "log",
    log1p: "log1p",
    sympy.tanh: "tanh",
    sigmoid: "sigmoid",
    logsigmoid: "logsigmoid",
}


def check_elementwise(expr: sympy.Expr, inputs: Sequence[str], where: str) -> None:
    """Check that ``expr`` is in the weight-function vocabulary (``CALLS``) over the raw ``inputs``.

    Raises:
        CompileError: another symbol, a non-integer power, a call outside ``CALLS`` or a non-finite number,
            naming ``where`` and the offending part.
    """
    names = set(inputs)

    def walk(e: sympy.Basic) -> None:
        if isinstance(e, sympy.Symbol):
            if e.name not in names:
                raise CompileError(f"{where}: weight function {expr} reads {e}, not a raw input {tuple(inputs)}")
            return
        if isinstance(e, sympy.Number):
            if not math.isfinite(float(e)):
                raise CompileError(f"{where}: weight function {expr} holds the non-finite number {e}")
            return
        if isinstance(e, sympy.Pow):
            if not e.exp.is_Integer:
                raise CompileError(f"{where}: weight function {expr} has the non-integer power {e}")
            walk(e.base)
            return
        if isinstance(e, (sympy.Add, sympy.Mul)) or type(e) in CALLS:
            if type(e) in CALLS and len(e.args) != 1:
                raise CompileError(f"{where}: weight function {expr}: {e} takes one argument")
            for a in e.args:
                walk(a)
            return
        raise CompileError(
            f"{where}: weight function {expr} is not elementwise in the kernel vocabulary (numbers, raw inputs, "
            f"+, *, integer powers, {', '.join(sorted(CALLS.values()))}); offending part: {e}"
        )

    walk(expr)


def _stable_log(arg: sympy.Expr) -> sympy.Expr:
    """``log(arg)`` rewritten into stable pieces (products to sums, gates to logsigmoid)."""
    if isinstance(arg, sympy.Mul):
        return sympy.Add(*[_stable_log(a) for a in arg.args])
    if isinstance(arg, sympy.Pow) and arg.exp.is_Integer:
        return arg.exp * _stable_log(arg.base)
    if isinstance(arg, sympy.exp):
        return arg.args[0]
    if isinstance(arg, sigmoid):
        return logsigmoid(arg.args[0])
    if isinstance(arg, sympy.Add) and len(arg.args) == 2 and sympy.S.One in arg.args:
        return log1p(arg.args[0] if arg.args[1] == sympy.S.One else arg.args[1])  # (1 - σ(x) arrives as σ(-x))
    return sympy.log(arg)


def _complement(e: sympy.Expr) -> sympy.Expr | None:
    """``σ(-x)`` when ``e`` is ``1 - σ(x)`` (which cancels to 0 where σ(x) rounds to 1), else ``None``."""
    if isinstance(e, sympy.Add) and len(e.args) == 2 and sympy.S.One in e.args:
        other = e.args[0] if e.args[1] == sympy.S.One else e.args[1]
        if isinstance(-other, sigmoid):
            return sigmoid(-(-other).args[0])
    return None


def stabilize(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with ``1 - σ(x)`` as ``σ(-x)`` and every logarithm rewritten by ``_stable_log`` (innermost first)."""
    if not expr.args:
        return expr
    args = [stabilize(a) for a in expr.args]
    if isinstance(expr, sympy.log):
        return _stable_log(args[0])
    rebuilt = expr.func(*args)
    return _complement(rebuilt) or rebuilt


@dataclass(frozen=True)
class Load:
    """A lowered weight function: its storage-form value ``expr`` over the raw inputs (symbols named after the
    template's slots), the slots it reads (``inputs``) and ``grads[i] = d expr / d inputs[i]``."""

    expr: sympy.Expr
    inputs: tuple[int, ...]
    grads: tuple[sympy.Expr, ...]


def lower_function(expr: sympy.Expr, semiring: Semiring, slots: Sequence[str]) -> Load:
    """The kernel form of weight function ``expr`` (an element of ``semiring`` over raw inputs named ``slots``)."""
    stored = stabilize(semiring.sym_to_storage(expr))
    names = sorted((s.name for s in stored.free_symbols), key=list(slots).index)
    inputs = tuple(list(slots).index(n) for n in names)
    grads = tuple(sympy.diff(stored, sympy.Symbol(n)) for n in names)
    return Load(stored, inputs, grads)


class Spelling:
    """Spells weight-function expressions in a dialect, binding each call once (``let(name, expr)`` emits the
    binding; later occurrences of the same call reuse the name).

    ``slot(s)`` spells raw input s, ``index`` maps input names to slot indices; bound names are ``prefix``, a
    counter and ``suffix``.
    """

    def __init__(
        self,
        dialect: object,
        slot: Callable[[int], str],
        index: dict[str, int],
        let: Callable[[str, str], None],
        prefix: str,
        suffix: str = "",
    ):
        self.d, self.slot, self.index, self.let = dialect, slot, index, let
        self.prefix, self.suffix = prefix, suffix
        self.memo: dict[sympy.Basic, str] = {}

    def _name(self) -> str:
        return f"{self.prefix}{len(self.memo)}{self.suffix}"

    def bind(self, expr: sympy.Expr) -> str:
        """A name bound to ``expr``'s value (the expression itself when it is a raw input or number)."""
        text = self(expr)
        if expr in self.memo or isinstance(expr, (sympy.Symbol, sympy.Number)):
            return text
        name = self._name()
        self.let(name, text)
        self.memo[expr] = name
        return name

    def number(self, value: float) -> str:
        return self.d.typed_form.format(value=self.d.number(value))  # type: ignore[attr-defined]

    def __call__(self, expr: sympy.Basic) -> str:
        if expr in self.memo:
            return self.memo[expr]
        if isinstance(expr, sympy.Symbol):
            return self.slot(self.index[expr.name])
        if isinstance(expr, sympy.Number):
            return self.number(float(expr))
        if isinstance(expr, sympy.Add):
            return "(" + " + ".join(self(a) for a in expr.args) + ")"
        if isinstance(expr, sympy.Mul):
            return "(" + " * ".join(self(a) for a in expr.args) + ")"
        if isinstance(expr, sympy.Pow):
            n = int(expr.exp)
            base = self.bind(expr.base)
            power = " * ".join([base] * abs(n)) if n else self.number(1.0)
            return f"({self.number(1.0)} / ({power}))" if n < 0 else f"({power})"
        form = self.d.call_forms[CALLS[type(expr)]]  # type: ignore[attr-defined]
        return self.bind_call(expr, form.format(x=self(expr.args[0])))

    def bind_call(self, expr: sympy.Basic, text: str) -> str:
        name = self._name()
        self.let(name, text)
        self.memo[expr] = name
        return name


@dataclass(frozen=True)
class OutputLoad:
    """A lowered output map (``kleene.compile.template.OutputMap``): its value ``expr`` (stable spelling) over the
    step output ``y`` (symbol ``OUTPUT``), the raw slots ``slots`` (indices into the template's slots) and the
    per-dimension constants (symbols named ``constants``), with ``y_grad = d expr / d y``, ``slot_grads[i] = d expr
    / d slots[i]`` and ``constant_grads[c] = d expr / d constants[c]``."""

    expr: sympy.Expr
    slots: tuple[int, ...]
    constants: tuple[str, ...]
    y_grad: sympy.Expr
    slot_grads: tuple[sympy.Expr, ...]
    constant_grads: tuple[sympy.Expr, ...]


#: The name of the step output ``y_t`` (storage form) in an output map.
OUTPUT = "y"


def lower_output(expr: sympy.Expr, slots: Sequence[str], constants: Sequence[str]) -> OutputLoad:
    """The kernel form of output map ``expr`` (a real number) over ``OUTPUT``, raw ``slots`` and ``constants``."""
    stable = stabilize(expr)
    free = {s.name for s in stable.free_symbols}
    used = tuple(i for i, n in enumerate(slots) if n in free)
    y = sympy.Symbol(OUTPUT)
    return OutputLoad(
        expr=stable,
        slots=used,
        constants=tuple(constants),
        y_grad=sympy.diff(stable, y),
        slot_grads=tuple(sympy.diff(stable, sympy.Symbol(slots[i])) for i in used),
        constant_grads=tuple(sympy.diff(stable, sympy.Symbol(c)) for c in constants),
    )


def torch_function(load: Load, slots: Sequence[str]) -> Callable[..., Any]:
    """``load.expr`` as a torch function of the input tensors (in ``load.inputs`` order), built from the same
    expression tree the kernels spell (sympy's lambdify would call the numpy ``_imp_`` of sigmoid)."""
    return torch_expression(load.expr, [slots[i] for i in load.inputs])


def torch_expression(expr: sympy.Expr, names: Sequence[str]) -> Callable[..., Any]:
    """``expr`` (in the weight-function vocabulary) as a torch function of one tensor (or number) per name of
    ``names``, in that order."""
    import torch

    table: dict[str, Callable[[Any], Any]] = {
        "sigmoid": torch.sigmoid,
        "logsigmoid": torch.nn.functional.logsigmoid,
        "exp": torch.exp,
        "log": torch.log,
        "log1p": torch.log1p,
        "tanh": torch.tanh,
    }
    position = {name: k for k, name in enumerate(names)}

    def build(e: sympy.Basic) -> Callable[[Sequence[Any]], Any]:
        if isinstance(e, sympy.Symbol):
            k = position[e.name]
            return lambda xs: xs[k]
        if isinstance(e, sympy.Number):
            value = float(e)
            return lambda xs: value
        parts = [build(a) for a in e.args]
        if isinstance(e, sympy.Add):
            return lambda xs: functools.reduce(operator.add, [p(xs) for p in parts])
        if isinstance(e, sympy.Mul):
            return lambda xs: functools.reduce(operator.mul, [p(xs) for p in parts])
        if isinstance(e, sympy.Pow):
            n = int(e.exp)
            return lambda xs: parts[0](xs) ** n
        call = table[CALLS[type(e)]]
        return lambda xs: call(parts[0](xs))

    run = build(expr)
    return lambda *xs: run(xs)
