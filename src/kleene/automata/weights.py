"""Arc weights: semiring constants, or sympy expressions of the consumed symbol.

A symbolic weight is a sympy expression in which ``ALPHA`` stands for the symbol
the arc consumes. Weight functions are undefined sympy functions applied to it,
``mu(ALPHA)``, and may be combined freely: ``sigmoid(w * v(ALPHA) + b)``.
To evaluate one numerically, give an environment mapping each function name to
a dict ``{symbol: value}`` or a callable ``symbol -> value``, and each other free
symbol (``w``, ``b``) to a number.
"""

from __future__ import annotations

import builtins
import io
import keyword
import math
import sys
import tokenize
from collections.abc import Callable, Hashable, Mapping
from functools import lru_cache
from typing import Any, Union

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kleene.automata.semiring import Semiring
from kleene.errors import FormatError, WeightError, shown

#: The consumed symbol inside symbolic weights.
ALPHA = sympy.Symbol("alpha")

Weight = Union[float, bool, sympy.Expr]
Env = Mapping[str, Any]


class sigmoid(sympy.Function):  # type: ignore[misc]  # sympy is untyped
    """The logistic function ``1 / (1 + exp(-x))``, kept as one named node (printed, parsed and refused by name).

    ``sigmoid(x).rewrite(sympy.exp)`` gives the explicit form; numerically it runs in numpy or mpmath.
    """

    nargs = 1

    @staticmethod
    def _imp_(x: Any) -> Any:
        if type(x).__module__.startswith("mpmath"):
            import mpmath

            return 1 / (1 + mpmath.exp(-x))
        return 1.0 / (1.0 + np.exp(-x))

    def fdiff(self, argindex: int = 1) -> sympy.Expr:
        return sigmoid(self.args[0]) * (1 - sigmoid(self.args[0]))

    def _eval_rewrite_as_exp(self, arg: sympy.Expr, **kwargs: Any) -> sympy.Expr:
        return 1 / (1 + sympy.exp(-arg))

    def _latex(self, printer: Any) -> str:
        return r"\sigma\left(" + str(printer._print(self.args[0])) + r"\right)"


class logsigmoid(sympy.Function):  # type: ignore[misc]  # sympy is untyped
    """``log σ(x)``, kept as one named node: the stable form of the logarithm of a gate (log-weight storage).

    Numerically ``min(x, 0) - log1p(exp(-|x|))``; its derivative is ``σ(-x)``.
    """

    nargs = 1

    @staticmethod
    def _imp_(x: Any) -> Any:
        if type(x).__module__.startswith("mpmath"):
            import mpmath

            return -mpmath.log(1 + mpmath.exp(-x))
        return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))

    def fdiff(self, argindex: int = 1) -> sympy.Expr:
        return sigmoid(-self.args[0])

    def _eval_rewrite_as_exp(self, arg: sympy.Expr, **kwargs: Any) -> sympy.Expr:
        return -sympy.log(1 + sympy.exp(-arg))

    def _latex(self, printer: Any) -> str:
        return r"\log\sigma\left(" + str(printer._print(self.args[0])) + r"\right)"


def weight_functions(*names: str) -> tuple[sympy.Expr, ...]:
    """``mu, phi = weight_functions("mu", "phi")`` gives ``mu(ALPHA), phi(ALPHA)``.

    Caution:
        Each name must be a string; it becomes a sympy function name as given (not checked to be an identifier).
    """
    return tuple(sympy.Function(n)(ALPHA) for n in names)


def is_symbolic(weight: object) -> bool:
    return isinstance(weight, sympy.Basic)


_OPERATORS = frozenset({"+", "-", "*", "/", "**", "(", ")", ",", "<", "<=", ">", ">=", "&", "|", "~"})
#: Names that keep sympy's meaning when called; every other called name is a weight function.
MATH_FUNCTIONS = frozenset({"exp", "log", "tanh", "sqrt", "Max", "Min", "Abs", "Piecewise", "sin", "cos"})
_CONSTANTS = {"pi": sympy.pi, "oo": sympy.oo, "True": sympy.true, "False": sympy.false}


def parse_weight(text: str, where: str, declared: Mapping[str, Any] | None = None) -> sympy.Expr:
    """Parse a weight expression such as ``"sigmoid(w*v(alpha) + b)"`` without evaluating Python.

    Only numbers, operators, parentheses, commas and names (not Python builtins such as
    ``open``; use ``Max``, not ``max``) get through. ``alpha`` is the
    consumed symbol; a bare name is a Symbol (``gamma``, ``E`` and ``beta`` included, so that
    parameters never turn into sympy's constants); a called name is a weight function unless it
    is one of ``MATH_FUNCTIONS`` or ``sigmoid``; ``declared`` overrides both (name -> sympy object).

    Caution:
        Powers of numbers beyond ``MAX_NUMBER_BITS`` are refused before sympy evaluates them.

    Raises:
        WeightError: anything else in the text, text sympy cannot parse, or a power of numbers too large.
    """
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text.strip()).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise WeightError(f"{where}: cannot parse weight {text!r}: {exc}") from None
    names: dict[str, Any] = {"Float": _double_float, "alpha": ALPHA, "sigmoid": sigmoid}
    for i, tok in enumerate(tokens):
        if tok.type in (tokenize.NUMBER, tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
            continue
        if tok.type == tokenize.OP and tok.string in _OPERATORS:
            continue
        name = tok.string
        if tok.type != tokenize.NAME or name.startswith("_") or keyword.iskeyword(name) or _is_builtin(name):
            raise WeightError(f"{where}: weight {text!r}: {name!r} is not allowed in a weight expression")
        called = i + 1 < len(tokens) and tokens[i + 1].string == "("
        if declared is not None and name in declared:
            names[name] = declared[name]
        elif name in _CONSTANTS:
            names[name] = _CONSTANTS[name]
        elif called and name in MATH_FUNCTIONS:
            names[name] = getattr(sympy, name)
        elif name not in names:
            names[name] = sympy.Function(name) if called else sympy.Symbol(name)
    try:
        unevaluated = sympy.sympify(text, locals=names, evaluate=False)
    except (sympy.SympifyError, SyntaxError, TypeError, ValueError, AttributeError) as exc:
        raise WeightError(f"{where}: cannot parse weight {text!r}: {exc}") from None
    except (RecursionError, MemoryError):
        raise WeightError(f"{where}: weight {text[:40]!r}... is nested too deeply to parse") from None
    check_number_size(unevaluated, where)
    try:
        expr = sympy.sympify(text, locals=names)
    except (sympy.SympifyError, SyntaxError, TypeError, ValueError, AttributeError) as exc:
        raise WeightError(f"{where}: cannot parse weight {text!r}: {exc}") from None
    except (RecursionError, MemoryError):
        raise WeightError(f"{where}: weight {text[:40]!r}... is nested too deeply to parse") from None
    if not isinstance(expr, sympy.Basic):
        raise WeightError(f"{where}: weight {text!r} is not an expression")
    return expr


def _is_builtin(name: str) -> bool:
    """Python's builtins (``open``, ``max``, ...) and sympy's non-expression helpers (``sympify``)
    are refused outright, even as weight names."""
    if name in _CONSTANTS:
        return False
    helper = getattr(sympy, name, None)
    is_expression = isinstance(helper, sympy.Basic) or (isinstance(helper, type) and issubclass(helper, sympy.Basic))
    return hasattr(builtins, name) or (helper is not None and not is_expression)


def _double_float(text: str) -> sympy.Float:
    """sympy's parser turns each decimal literal into ``Float(text)``: read it at double precision."""
    return sympy.Float(text, precision=53)


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
        value = parse_weight(value, where)
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
def lambdify_calls(
    expr: sympy.Basic, module: str = "math"
) -> tuple[Callable[..., Any], tuple[sympy.Expr, ...], tuple[sympy.Symbol, ...]]:
    """``expr`` as a Python function (``sympy.lambdify`` for ``module``: math, numpy, mpmath) of its function calls
    (``mu(alpha)``, ``f(x)``, ..., in ``str`` order) and then its free symbols; returns (function, calls, symbols).

    The calls become plain symbols ``_kleene_call<i>`` (valid Python names, which lambdify prints as they are:
    ``Dummy`` arguments make it substitute each one through the whole expression first, seconds for the affine
    forms of a few hundred terms that extraction writes); ``Dummy`` symbols where ``expr`` already uses such a
    name."""
    calls = tuple(sorted(expr.atoms(AppliedUndef), key=str))
    taken = {symbol.name for symbol in expr.free_symbols}
    names = [f"_kleene_call{i}" for i in range(len(calls))]
    dummies = ([sympy.Dummy(f"call{i}") for i in range(len(calls))] if taken.intersection(names)
               else [sympy.Symbol(name) for name in names])
    replaced = expr.xreplace(dict(zip(calls, dummies)))
    params = tuple(sorted(replaced.free_symbols - set(dummies), key=str))
    fn = sympy.lambdify([*dummies, *params], replaced, modules=module)
    return fn, calls, params


def _lookup(env: Env, name: str, where: str) -> Any:
    if name not in env:
        raise WeightError(f"{where}: no value for {name!r} in the weight environment")
    return env[name]


def evaluate(expr: sympy.Expr, symbol: Hashable | None, env: Env | None, where: str = "weight") -> float:
    """The numeric value of symbolic weight ``expr`` when consuming ``symbol``."""
    env = env or {}
    fn, calls, params = lambdify_calls(expr)
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


# ----------------------------------------------------------------------------------------
# Expressions as JSON trees (certificates store recurrences and parameterisations this way)

#: Expression nodes a tree may hold besides numbers, symbols and weight functions.
TREE_OPERATIONS: dict[str, Any] = {
    "Add": sympy.Add,
    "Mul": sympy.Mul,
    "Pow": sympy.Pow,
    "Max": sympy.Max,
    "Min": sympy.Min,
    "exp": sympy.exp,
    "log": sympy.log,
    "tanh": sympy.tanh,
    "sigmoid": sigmoid,
    "logsigmoid": logsigmoid,
    "And": sympy.And,
    "Or": sympy.Or,
    "Not": sympy.Not,
}


def expression_to_tree(e: sympy.Basic) -> Any:
    """A sympy expression as a JSON tree (numbers, symbols, applied weight functions and ``TREE_OPERATIONS``).

    Unlike the text form of ``parse_weight``, the tree rebuilds the identical expression (no re-canonicalisation).

    Raises:
        FormatError: a node outside that vocabulary, named.
    """
    if e is sympy.true or e is sympy.false:
        return {"bool": bool(e)}
    if e.is_Integer:
        return {"int": int(e)}
    if e.is_Rational:
        return {"rational": [int(e.p), int(e.q)]}
    if e.is_Float:  # at double precision; magnitudes a double cannot hold as text with 17 digits, read back exactly
        value = float(e)
        if e.is_zero or (math.isfinite(value) and abs(value) >= sys.float_info.min):
            return {"float": value}
        return {"float": str(sympy.Float(e, 17))}
    if e in (sympy.oo, -sympy.oo):
        return {"float": float("inf") if e == sympy.oo else float("-inf")}
    if e.is_Symbol:
        return {"symbol": e.name}
    if isinstance(e, AppliedUndef):
        return {"function": e.func.__name__, "args": [expression_to_tree(a) for a in e.args]}
    if isinstance(e, sympy.NumberSymbol):  # pi, E, ...: the constants the text form reads by name
        return {"constant": type(e).__name__}
    name = type(e).__name__
    if _tree_operation(name) is None:
        raise FormatError(f"cannot store expression node {name} ({e}) as a JSON tree")
    return {"op": name, "args": [expression_to_tree(a) for a in e.args]}


#: The largest magnitude, in bits, that a number written in a weight's text or tree may reach once evaluated
#: (``9**9**9**9`` would take sympy forever); about 3000 decimal digits, below Python's 4300-digit conversion limit.
MAX_NUMBER_BITS = 10_000
#: The deepest expression tree ``expression_from_tree`` reads (it recurses on it).
MAX_TREE_DEPTH = 200


def _log2_bound(e: sympy.Basic) -> float | None:
    """An upper bound on ``log2 |value|`` of an unevaluated numeric expression (integers, rationals, floats, sums,
    products and powers of them); None for anything else (a symbol, a function: sympy does not evaluate those)."""
    if e.is_Integer or e.is_Rational:
        return max(math.log2(abs(int(e.p))) if e.p else 0.0, math.log2(int(e.q)))
    if e.is_Float:
        _, mantissa, exponent, size = e._mpf_
        return float(abs(exponent + size)) if mantissa else 0.0
    parts = [_log2_bound(a) for a in e.args] if isinstance(e, (sympy.Add, sympy.Mul, sympy.Pow)) else [None]
    if any(p is None for p in parts):
        return None
    bounds = [p for p in parts if p is not None]
    if isinstance(e, sympy.Pow):
        base, exponent = bounds
        return base * 2.0 ** min(exponent, 1000.0) if base else 0.0
    return sum(bounds) + len(bounds)


def check_number_size(e: sympy.Basic, where: str) -> None:
    """Refuse an unevaluated expression with a power of numbers larger than ``MAX_NUMBER_BITS`` before sympy
    evaluates it.

    Raises:
        WeightError: such a power, named.
    """
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, sympy.Pow):
            bound = _log2_bound(node)
            if bound is not None and bound > MAX_NUMBER_BITS:
                raise WeightError(
                    f"{where}: the number {node} would have more than MAX_NUMBER_BITS={MAX_NUMBER_BITS} bits"
                )
        stack.extend(node.args)


def _tree_integer(value: Any, node: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(f"malformed expression node {shown(node, 80)}: expected an integer, got {shown(value, 80)}")
    return value


def expression_from_tree(node: Any, where: str = "expression", *, _depth: int = 0) -> sympy.Expr:
    """The inverse of ``expression_to_tree``; never evaluates text.

    Caution:
        Trees deeper than ``MAX_TREE_DEPTH`` and powers of numbers beyond ``MAX_NUMBER_BITS`` are refused.

    Raises:
        FormatError: a malformed or unknown node, or a tree deeper than ``MAX_TREE_DEPTH``.
        WeightError: a power of numbers beyond ``MAX_NUMBER_BITS``.
    """
    if _depth > MAX_TREE_DEPTH:
        raise FormatError(f"expression tree nested more than MAX_TREE_DEPTH={MAX_TREE_DEPTH} deep")
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise FormatError(f"malformed expression node {shown(node, 80)}")

    def children(args: Any) -> list[sympy.Expr]:
        if not isinstance(args, list):
            raise FormatError(f"malformed expression node {shown(node, 80)}: 'args' must be a list")
        return [expression_from_tree(a, where, _depth=_depth + 1) for a in args]

    if "bool" in node and isinstance(node["bool"], bool):
        return sympy.true if node["bool"] else sympy.false
    if "int" in node:
        return sympy.Integer(_tree_integer(node["int"], node))
    if "rational" in node:
        pair = node["rational"]
        if not isinstance(pair, list) or len(pair) != 2:
            raise FormatError(f"malformed expression node {shown(node, 80)}: expected [numerator, denominator]")
        p, q = (_tree_integer(v, node) for v in pair)
        if q == 0:
            raise FormatError(f"malformed expression node {shown(node, 80)}: the denominator is 0")
        return sympy.Rational(p, q)
    if "float" in node:
        value = node["float"]
        if isinstance(value, str):
            try:
                return sympy.Float(value, precision=53)
            except (ValueError, TypeError):
                raise FormatError(f"malformed expression node {shown(node, 80)}: not a number") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FormatError(f"malformed expression node {shown(node, 80)}: expected a number or a string")
        value = float(value)
        if value in (float("inf"), float("-inf")):
            return sympy.oo if value > 0 else -sympy.oo
        return sympy.Float(value)
    if "symbol" in node and isinstance(node["symbol"], str):
        return sympy.Symbol(node["symbol"])
    if "function" in node and isinstance(node["function"], str):
        if "args" not in node:
            raise FormatError(f"malformed expression node {shown(node, 80)}: a function needs 'args'")
        return sympy.Function(node["function"])(*children(node["args"]))
    if "constant" in node and isinstance(node["constant"], str):
        constant = getattr(sympy.S, node["constant"], None)
        if isinstance(constant, sympy.NumberSymbol):
            return constant
    if "op" in node and isinstance(node["op"], str):
        operation = _tree_operation(node["op"])
        if operation is not None and isinstance(node.get("args"), list):
            args = children(node["args"])
            if operation is sympy.Pow and len(args) == 2:
                check_number_size(sympy.Pow(*args, evaluate=False), where)
            try:
                return operation(*args)
            except (TypeError, ValueError) as exc:
                raise FormatError(f"malformed expression node {shown(node, 80)}: {exc}") from None
    raise FormatError(f"unknown expression node {shown(node, 80)}")


def _tree_operation(name: str) -> Any:
    """The operation a tree node names: one of ``TREE_OPERATIONS`` or a sympy function class (``sin``, ``Abs``: the
    names the text form reads as math functions); None for anything else (nothing is evaluated from text)."""
    if name in TREE_OPERATIONS:
        return TREE_OPERATIONS[name]
    found = getattr(sympy, name, None)
    elementary = getattr(found, "__module__", "").startswith("sympy.functions.elementary")
    if elementary and isinstance(found, type) and issubclass(found, sympy.Function):  # not factorial(10**9)
        return found
    return None
