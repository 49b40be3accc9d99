"""JSON: ``to_json``/``from_json`` for every WFSA, symbolic weights included.

The document::

    {"format": "kleene.wfsa", "version": 2, "name": null, "semiring": "log",
     "alphabet": {"epsilon": "<eps>", "symbols": ["a", "b"]} | null,
     "states": ["q0", "q1"], "initial": {"q0": 0.0}, "final": {"q1": 0.0},
     "weight_names": {"functions": ["mu"], "symbols": ["gamma"]},
     "arcs": [{"src": "q0", "dst": "q1", "label": {"kind": "symbol", "symbol": "a"},
               "weight": {"expression": {"function": "mu", "args": [{"symbol": "alpha"}]}}}]}

Labels are ``{"kind": "symbol", "symbol": s}``, ``{"kind": "epsilon"}``, ``{"kind": "any"}``,
``{"kind": "one-of", "symbols": [...]}`` and ``{"kind": "none-of", "symbols": [...]}``; symbols
are JSON strings or integers. Weights are numbers (booleans in the boolean semiring), the
strings ``"inf"``/``"-inf"``, or sympy expressions as ``{"expression": tree}`` in the exact tree
form certificates use (``weights.expression_to_tree``: the identical expression comes back, nothing is
re-canonicalised), in which ``alpha`` is the consumed symbol. Expression strings (``str(expr)``, version 1
documents and hand-written ones) still read. ``weight_names`` declares which names in those strings are weight
functions and which are plain symbols; undeclared names follow ``weights.parse_weight``
(a bare name is a Symbol, a called name a weight function unless it is a math function
such as ``exp``).

Expressions are read without ever evaluating arbitrary Python: a string may contain only
numbers, operators, parentheses, commas and names (no attributes, subscripts or strings).
Powers of numbers are bounded before sympy evaluates them (``weights.MAX_NUMBER_BITS``: ``9**9**9**9`` is
refused), expression trees are at most ``weights.MAX_TREE_DEPTH`` deep and the JSON text itself is read without
recursion errors, so that a crafted file answers with a ``FormatError`` or ``WeightError`` at once.
Symbol assumptions (``positive=True``) are not stored. Floats inside expressions are stored at
double precision (53 bits; sympy Floats of higher precision are rounded to it) and read back
exactly, magnitudes beyond the double range included.
"""

from __future__ import annotations

import json
import keyword
import math
from collections.abc import Hashable, Mapping
from typing import Any

import sympy
from sympy.core.function import AppliedUndef

from kleene.automata.labels import ANY, EPSILON, AnySymbol, Epsilon, Label, NoneOf, OneOf, Sym, SymbolTable
from kleene.automata.semiring import Semiring, get_semiring
from kleene.automata.weights import (
    ALPHA,
    Weight,
    expression_from_tree,
    expression_to_tree,
    is_symbolic,
    parse_weight,
)
from kleene.automata.wfsa import WFSA
from kleene.errors import AlphabetError, FormatError, KleeneError, SemiringError, UnknownStateError, WeightError

FORMAT = "kleene.wfsa"
VERSION = 2
#: Version 1 wrote symbolic weights as expression text; it still reads.
READABLE_VERSIONS = (1, 2)

_TOP_KEYS = ("format", "version", "name", "semiring", "alphabet", "states", "initial", "final", "weight_names", "arcs")
_REQUIRED_KEYS = ("format", "version", "semiring", "states", "arcs")

# -- writing -----------------------------------------------------------------------------------


def _symbol_value(symbol: Hashable, where: str) -> str | int:
    if isinstance(symbol, bool) or not isinstance(symbol, (str, int)):
        raise AlphabetError(f"{where}: symbol {symbol!r} is not a JSON string or integer")
    return symbol


def _sorted_symbols(members: frozenset[Hashable], where: str) -> list[str | int]:
    values = [_symbol_value(m, where) for m in members]
    return sorted(values, key=lambda v: (isinstance(v, str), v))


def _label_json(label: Label, where: str) -> dict[str, Any]:
    if isinstance(label, Sym):
        return {"kind": "symbol", "symbol": _symbol_value(label.symbol, where)}
    if isinstance(label, Epsilon):
        return {"kind": "epsilon"}
    if isinstance(label, AnySymbol):
        return {"kind": "any"}
    if isinstance(label, OneOf):
        return {"kind": "one-of", "symbols": _sorted_symbols(label.members, where)}
    if isinstance(label, NoneOf):
        return {"kind": "none-of", "symbols": _sorted_symbols(label.members, where)}
    raise FormatError(f"{where}: label {label!r} has no JSON form")


def _weight_json(weight: Weight, semiring: Semiring) -> Any:
    if is_symbolic(weight):
        return {"expression": expression_to_tree(weight)}
    if isinstance(semiring.one, bool):  # truth values stay JSON booleans
        return bool(weight)
    number = float(weight)
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return number


def _weight_names(weights: list[Weight], where: str) -> dict[str, list[str]]:
    """The weight functions and free symbols of all symbolic weights (``alpha`` excluded)."""
    functions: set[str] = set()
    symbols: set[str] = set()
    for w in weights:
        if is_symbolic(w):
            functions |= {call.func.__name__ for call in w.atoms(AppliedUndef)}  # type: ignore[union-attr]
            symbols |= {s.name for s in w.free_symbols if s != ALPHA}  # type: ignore[union-attr]
    for name in functions | symbols:
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            raise FormatError(f"{where}: the name {name!r} in a symbolic weight cannot be written as an expression")
    clash = functions & symbols
    if clash:
        raise FormatError(f"{where}: {sorted(clash)} name both weight functions and symbols")
    return {"functions": sorted(functions), "symbols": sorted(symbols)}


def to_document(wfsa: WFSA) -> dict[str, Any]:
    """The JSON document of ``wfsa`` as Python data (see the module docstring).

    Raises:
        AlphabetError: a symbol that is not a string or an integer (naming where).
        FormatError: a symbolic weight using a name that cannot be written.
    """
    s = wfsa.semiring
    names = wfsa.states
    alphabet = None
    if wfsa.alphabet is not None:
        symbols = [_symbol_value(x, "alphabet") for x in wfsa.alphabet]
        alphabet = {"epsilon": wfsa.alphabet.epsilon, "symbols": symbols}
    weights = [a.weight for a in wfsa.arcs] + list(wfsa.initial.values()) + list(wfsa.final.values())
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": wfsa.name,
        "semiring": s.name,
        "alphabet": alphabet,
        "states": names,
        "initial": {names[q]: _weight_json(w, s) for q, w in wfsa.initial.items()},
        "final": {names[q]: _weight_json(w, s) for q, w in wfsa.final.items()},
        "weight_names": _weight_names(weights, "weights"),
        "arcs": [
            {
                "src": names[a.src],
                "dst": names[a.dst],
                "label": _label_json(a.label, f"arcs[{i}].label"),
                "weight": _weight_json(a.weight, s),
            }
            for i, a in enumerate(wfsa.arcs)
        ],
    }


def to_json(wfsa: WFSA, indent: int | None = 2) -> str:
    """``wfsa`` as JSON text (``from_json`` reads it back to an equal automaton).

    Raises:
        FormatError: a label, or a name in a symbolic weight, that has no JSON form (the message names it).
        AlphabetError: a symbol that is neither a string nor an integer.
    """
    return json.dumps(to_document(wfsa), indent=indent, ensure_ascii=False, allow_nan=False)


# -- reading -----------------------------------------------------------------------------------


def _fail(path: str, message: str) -> FormatError:
    return FormatError(f"{path}: {message}")


def _expect(value: Any, kind: type | tuple[type, ...], path: str, description: str) -> Any:
    """``value`` if it has JSON type ``kind`` (a boolean is no integer here), else a FormatError."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise _fail(path, f"expected {description}, got {json.dumps(value)}")
    return value


def _expect_keys(obj: Mapping[str, Any], allowed: tuple[str, ...], required: tuple[str, ...], path: str) -> None:
    prefix = f"{path}." if path else ""
    for key in obj:
        if key not in allowed:
            raise _fail(f"{prefix}{key}", f"unknown key (expected one of {', '.join(allowed)})")
    for key in required:
        if key not in obj:
            raise _fail(f"{prefix}{key}", "missing")


def _read_symbol(value: Any, path: str) -> str | int:
    return _expect(value, (str, int), path, "a symbol (a string or an integer)")  # type: ignore[no-any-return]


def _read_label(value: Any, path: str) -> Label:
    obj = _expect(value, dict, path, "a label object")
    kind = _expect(obj.get("kind"), str, f"{path}.kind", "a label kind string")
    if kind == "symbol":
        _expect_keys(obj, ("kind", "symbol"), ("symbol",), path)
        return Sym(_read_symbol(obj["symbol"], f"{path}.symbol"))
    if kind in ("epsilon", "any"):
        _expect_keys(obj, ("kind",), (), path)
        return EPSILON if kind == "epsilon" else ANY
    if kind in ("one-of", "none-of"):
        _expect_keys(obj, ("kind", "symbols"), ("symbols",), path)
        members = _expect(obj["symbols"], list, f"{path}.symbols", "a list of symbols")
        symbols = [_read_symbol(m, f"{path}.symbols[{i}]") for i, m in enumerate(members)]
        return OneOf(symbols) if kind == "one-of" else NoneOf(symbols)
    raise _fail(f"{path}.kind", f"unknown label kind {kind!r} (symbol, epsilon, any, one-of, none-of)")


def _read_weight(value: Any, semiring: Semiring, locals_: dict[str, Any], path: str) -> Any:
    """A weight from JSON: a number, "inf"/"-inf", a boolean (boolean semiring) or an expression."""
    if isinstance(value, bool):
        if not isinstance(semiring.one, bool):
            raise WeightError(f"{path}: {json.dumps(value)} is not a weight of the {semiring.name} semiring")
        return value
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            raise WeightError(f"{path}: {value} is too large for a float weight") from None
    if isinstance(value, dict) and set(value) == {"expression"}:
        try:
            return expression_from_tree(value["expression"], f"{path}.expression")
        except FormatError as exc:
            raise _fail(f"{path}.expression", str(exc)) from None
    if not isinstance(value, str):
        raise _fail(
            path, f"expected a number, 'inf', '-inf', an expression tree or string, got {json.dumps(value)}"
        )
    if value.strip() in ("inf", "-inf"):
        return float(value)
    try:
        return parse_weight(value, path, locals_)
    except WeightError as exc:
        raise FormatError(str(exc)) from None


def _read_weight_names(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    obj = _expect(value, dict, "weight_names", "an object")
    _expect_keys(obj, ("functions", "symbols"), (), "weight_names")
    locals_: dict[str, Any] = {}
    for key, make in (("functions", sympy.Function), ("symbols", sympy.Symbol)):
        names = _expect(obj.get(key, []), list, f"weight_names.{key}", "a list of names")
        for i, name in enumerate(names):
            path = f"weight_names.{key}[{i}]"
            if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name[0] == "_":
                raise _fail(path, f"{json.dumps(name)} is not a usable name")
            if name in locals_ or name == ALPHA.name:
                raise _fail(path, f"{name!r} is declared twice (or is alpha)")
            locals_[name] = make(name)
    return locals_


def _read_alphabet(value: Any) -> SymbolTable | None:
    if value is None:
        return None
    obj = _expect(value, dict, "alphabet", "an object or null")
    _expect_keys(obj, ("epsilon", "symbols"), ("symbols",), "alphabet")
    epsilon = _expect(obj.get("epsilon", "<eps>"), str, "alphabet.epsilon", "a string")
    symbols = _expect(obj["symbols"], list, "alphabet.symbols", "a list of symbols")
    table = SymbolTable(epsilon=epsilon)
    for i, symbol in enumerate(symbols):
        path = f"alphabet.symbols[{i}]"
        if _read_symbol(symbol, path) in table:
            raise _fail(path, f"duplicate symbol {symbol!r}")
        try:
            table.add(symbol)
        except AlphabetError as exc:
            raise _fail(path, str(exc)) from None
    return table


def _rethrow(exc: KleeneError, path: str) -> KleeneError:
    """``exc`` re-raised with the JSON path in front, keeping its type."""
    return type(exc)(f"{path}: {exc}")


def from_document(doc: Any) -> WFSA:
    """A ``WFSA`` from its JSON document as Python data.

    Raises:
        FormatError: a wrong format or version, an unknown or missing key, a value of the wrong
            type, an unknown state (naming the JSON path, e.g. ``arcs[3].dst``).
        WeightError: a weight outside the semiring (naming the path).
        AlphabetError: a symbol outside the declared alphabet (naming the path).
    """
    doc = _expect(doc, dict, "(document)", "a JSON object")
    _expect_keys(doc, _TOP_KEYS, _REQUIRED_KEYS, "")
    if doc["format"] != FORMAT:
        raise _fail("format", f"expected {FORMAT!r}, got {json.dumps(doc['format'])}")
    if doc["version"] not in READABLE_VERSIONS or isinstance(doc["version"], bool):
        raise _fail("version", f"this kleene reads versions 1 and 2, got {json.dumps(doc['version'])}")
    try:
        semiring = get_semiring(_expect(doc["semiring"], str, "semiring", "a semiring name"))
    except SemiringError as exc:
        raise _fail("semiring", str(exc)) from None
    name = doc.get("name")
    if name is not None:
        _expect(name, str, "name", "a string or null")
    wfsa = WFSA(semiring, _read_alphabet(doc.get("alphabet")), name)
    locals_ = _read_weight_names(doc.get("weight_names"))

    for i, state in enumerate(_expect(doc["states"], list, "states", "a list of state names")):
        try:
            wfsa.add_state(_expect(state, str, f"states[{i}]", "a state name"))
        except UnknownStateError:
            raise _fail(f"states[{i}]", f"duplicate state name {state!r}") from None

    def state_ref(value: Any, path: str) -> int:
        try:
            return wfsa.state(_expect(value, str, path, "a state name"))
        except UnknownStateError:
            raise _fail(path, f"unknown state {value!r}") from None

    for key, setter in (("initial", wfsa.set_initial), ("final", wfsa.set_final)):
        for state, weight in _expect(doc.get(key, {}), dict, key, "an object of state: weight").items():
            path = f"{key}.{state}"
            q = state_ref(state, path)
            try:
                setter(q, _read_weight(weight, semiring, locals_, path))
            except (WeightError, AlphabetError) as exc:
                raise _rethrow(exc, path) from None

    for i, arc in enumerate(_expect(doc["arcs"], list, "arcs", "a list of arcs")):
        path = f"arcs[{i}]"
        _expect(arc, dict, path, "an arc object")
        _expect_keys(arc, ("src", "dst", "label", "weight"), ("src", "dst", "label"), path)
        src, dst = state_ref(arc["src"], f"{path}.src"), state_ref(arc["dst"], f"{path}.dst")
        label = _read_label(arc["label"], f"{path}.label")
        weight = _read_weight(arc.get("weight"), semiring, locals_, f"{path}.weight") if "weight" in arc else None
        try:
            wfsa.add_arc(src, dst, label, weight)
        except AlphabetError as exc:
            raise _rethrow(exc, f"{path}.label") from None
        except WeightError as exc:
            raise _rethrow(exc, f"{path}.weight") from None
    return wfsa


def _reject_non_json_constant(name: str) -> Any:
    raise FormatError(f"{name} is not JSON; write infinities as the strings 'inf' and '-inf'")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise FormatError(f"duplicate key {key!r} in a JSON object")
        obj[key] = value
    return obj


def from_json(text: str) -> WFSA:
    """A ``WFSA`` from JSON text written by ``to_json`` (or by hand, following the module docstring).

    Raises:
        FormatError: text that is not JSON (naming the line and column) or a malformed document
            (naming the JSON path); see ``from_document`` for the other errors.
    """
    try:
        doc = json.loads(text, parse_constant=_reject_non_json_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise FormatError(f"line {exc.lineno}, column {exc.colno}: not JSON: {exc.msg}") from None
    except RecursionError:
        raise FormatError("not a kleene.wfsa document: the JSON is nested too deeply to read") from None
    except ValueError as exc:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise FormatError(f"not JSON kleene can read: {exc}") from None
    return from_document(doc)
