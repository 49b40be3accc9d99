"""Arc weights: semiring constants, or sympy expressions of the consumed symbol.

A symbolic weight is a sympy expression in which ``ALPHA`` stands for the symbol
the arc consumes. Weight functions are undefined sympy functions applied to it,
``mu(ALPHA)``, and may be combined freely: ``sigmoid(w * v(ALPHA) + b)``.
To evaluate one numerically, give an environment mapping each function name to
a dict ``{symbol: value}`` or a callable ``symbol -> value``, and each other free
symbol (``w``, ``b``) to a number.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from functools import lru_cache
from typing import Any, Union

import sympy
from sympy.core.function import AppliedUndef

from .errors import WeightError
from .semiring import Semiring

#: The consumed symbol inside symbolic weights.
ALPHA = sympy.Symbol("alpha")

Weight = Union[float, bool, sympy.Expr]
Env = Mapping[str, Any]


def sigmoid(x: sympy.Expr) -> sympy.Expr:
    """The logistic function as a sympy expression."""
    return 1 / (1 + sympy.exp(-x))


def weight_functions(*names: str) -> tuple[sympy.Expr, ...]:
    """``mu, phi = weight_functions("mu", "phi")`` gives ``mu(ALPHA), phi(ALPHA)``."""
    return tuple(sympy.Function(n)(ALPHA) for n in names)


def is_symbolic(weight: object) -> bool:
    return isinstance(weight, sympy.Basic)


def normalize_weight(value: Any, semiring: Semiring, where: str, consumes: bool = True) -> Weight:
    """Check ``value`` as an arc/initial/final weight and return its stored form.

    Strings are parsed with sympy (``"mu(alpha)"``); sympy expressions without
    free symbols or functions become constants.

    Raises:
        WeightError: NaN, a value outside the semiring, an unparsable string, or
            a weight that depends on the consumed symbol where nothing is consumed.
    """
    if value is None:
        return semiring.one
    if isinstance(value, str):
        try:
            value = sympy.sympify(value, locals={"alpha": ALPHA})
        except (sympy.SympifyError, SyntaxError, TypeError) as exc:
            raise WeightError(f"{where}: cannot parse weight {value!r}: {exc}") from None
    if isinstance(value, sympy.Basic):
        if not value.free_symbols and not value.atoms(AppliedUndef):
            if value in (sympy.true, sympy.false):
                return semiring.check(bool(value), where)
            try:
                value = float(value)
            except TypeError:
                raise WeightError(f"{where}: weight {value} is not a number") from None
        else:
            if not consumes and _mentions_alpha(value):
                raise WeightError(f"{where}: weight {value} depends on the consumed symbol, but the arc consumes none")
            return value
    return semiring.check(value, where)


def _mentions_alpha(expr: sympy.Basic) -> bool:
    return ALPHA in expr.free_symbols


@lru_cache(maxsize=4096)
def _compile(expr: sympy.Expr) -> tuple[Callable[..., Any], tuple[sympy.Expr, ...], tuple[sympy.Symbol, ...]]:
    calls = tuple(sorted(expr.atoms(AppliedUndef), key=str))
    dummies = [sympy.Dummy(f"call{i}") for i in range(len(calls))]
    replaced = expr.xreplace(dict(zip(calls, dummies)))
    params = tuple(sorted(replaced.free_symbols - set(dummies), key=str))
    fn = sympy.lambdify([*dummies, *params], replaced, modules="math")
    return fn, calls, params


def _lookup(env: Env, name: str, where: str) -> Any:
    if name not in env:
        raise WeightError(f"{where}: no value for {name!r} in the weight environment")
    return env[name]


def evaluate(expr: sympy.Expr, symbol: Hashable | None, env: Env | None, where: str = "weight") -> float:
    """The numeric value of symbolic weight ``expr`` when consuming ``symbol``."""
    env = env or {}
    fn, calls, params = _compile(expr)
    args: list[Any] = []
    for call in calls:
        name = call.func.__name__
        table = _lookup(env, name, where)
        arg = call.args[0] if call.args else None
        if arg != ALPHA or len(call.args) != 1:
            raise WeightError(f"{where}: weight functions take the consumed symbol only; got {call}")
        if callable(table):
            args.append(table(symbol))
        else:
            try:
                args.append(table[symbol])
            except (KeyError, IndexError, TypeError):
                raise WeightError(f"{where}: {name}({symbol!r}) is not defined in the environment") from None
    for p in params:
        if p == ALPHA:
            if not isinstance(symbol, (int, float)):
                raise WeightError(f"{where}: weight {expr} uses the symbol {symbol!r} as a number")
            args.append(symbol)
        else:
            args.append(_lookup(env, p.name, where))
    try:
        return float(fn(*args))
    except (TypeError, ValueError, OverflowError, ZeroDivisionError) as exc:
        raise WeightError(f"{where}: evaluating {expr} at {symbol!r} failed: {exc}") from None


def instantiate(expr: sympy.Expr, symbol: Hashable) -> sympy.Expr:
    """``expr`` with ``ALPHA`` replaced by the sympy symbol standing for ``symbol``."""
    target = symbol if isinstance(symbol, sympy.Basic) else sympy.Symbol(str(symbol))
    return expr.xreplace({ALPHA: target})
