"""Weighted regular expressions: ``regex`` compiles text to a WFSA, ``to_regex`` reads an automaton back as text.

Syntax (``unit="word"``, the default: symbols are words separated by whitespace)::

    good movie              concatenation (juxtaposition)
    good | great            alternation (lowest precedence)
    very*  very+  very?     zero or more, one or more, optional (``x?`` is ``x | ()``)
    very{2}  very{1,3}      bounded repetition: exactly 2, 1 to 3; ``{2,}`` at least 2, ``{,3}`` at most 3
    (very | really)* good   groups
    .                       any symbol (the predicate label ``ANY``)
    [good great fine]       any symbol of the set (``OneOf``)
    [^bad awful]            any symbol outside the set (``NoneOf``)
    ()                      the empty string; ``[]`` matches nothing (the empty language)
    good<2.5>  (very)*<0.5> ⊗ a weight: the expression's score is multiplied (⊗) by it
    "(" \\* "two words"       quoting and escaping: a symbol containing special characters or spaces

Postfix operators (``* + ? {m,n} <w>``) bind tighter than concatenation, which binds tighter than ``|``; they
chain left to right (``a*<2>`` is ``(a*)<2>``). The special characters are ``( ) [ ] | * + ? . < > { } " \\``;
a backslash makes the next character literal and ``"..."`` quotes a run (with ``\\"`` and ``\\\\`` inside).
Quoted runs, escapes and plain characters written without whitespace between them make one symbol (as in a
shell: ``don"'"t`` is ``don't``). ``[^`` must be written without a space; a set member starting with ``^`` is
quoted. Weights are numbers (``2.5``, ``-1e-3``, ``inf``, ``-inf``, ``true``/``false``) checked by the semiring
(``Semiring.check``): in the log semiring ``<-0.7>`` is a log-probability, in min-plus a cost.

With ``unit="char"`` every character is a symbol and whitespace outside quotes is insignificant (write a space
as ``" "`` or ``\\ ``); a postfix operator binds to the last character (``ab*`` is ``a(b*)``), a quoted run
``"ab"`` is the characters ``a b``, and ``[abc]`` is the set of three characters.

Semantics. An expression denotes a formal power series over the semiring: ``|`` is ⊕, concatenation is the
Cauchy product, ``x*`` is ``⊕_k x^k``, ``x{m,n}`` is ``⊕_{k=m..n} x^k`` and ``x<w>`` is ``x ⊗ w``. In
non-idempotent semirings alternatives add up: over the reals ``a | a`` scores ``a`` with 2 and ``(a?)?``
scores the empty string with 2; ``(a?)*`` diverges there (the empty string would be counted infinitely often)
and is refused with a ``DivergenceError``.

Construction. ``regex`` builds the weighted position (Glushkov) automaton directly from the parse tree: one
state per symbol occurrence plus a start state, no epsilon arcs, every arc labelled by the occurrence it enters.
Compared with Thompson's construction through ``ops.union/concat/kleene_star`` it needs no epsilon removal
afterwards (which would need the epsilon closure to converge and would sum the epsilon paths numerically), the
result has at most ``n + 1`` states for ``n`` occurrences, and the predicate labels stay single symbolic arcs.
The construction relies on ⊗ being commutative (all kleene semirings are), which lets the weight of a group be
carried on the arcs that enter it.

Budgets. A short expression can ask for a huge automaton (``(a*){k}`` has k(k+1)/2 arcs): ``regex`` stops with a
``BudgetExceededError`` naming ``max_arcs`` once the arcs, or the symbol occurrences with every ``{m,n}`` expanded,
pass it (``DEFAULT_MAX_ARCS``); groups and postfix operators nest at most ``MAX_NESTING`` deep.

``to_regex`` goes the other way by state elimination (Brzozowski and McCluskey), with the simplifications
listed in its docstring.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Union

from kleene.automata.labels import ANY, AnySymbol, Epsilon, Label, NoneOf, OneOf, Sym, SymbolTable
from kleene.automata.semiring import Semiring, get_semiring
from kleene.automata.weights import Weight, is_symbolic
from kleene.automata.wfsa import WFSA
from kleene.errors import AlphabetError, ArgumentError, BudgetExceededError, DivergenceError, FormatError, WeightError

#: The default bound on the arcs ``regex`` builds (and on its symbol occurrences once ``{m,n}`` is expanded): the
#: position automaton of ``(a*){k}`` has k²/2 arcs, so a short expression can ask for millions. Raise it with
#: ``regex(..., max_arcs=...)``; 100 000 arcs take about a second.
DEFAULT_MAX_ARCS = 100_000
#: The deepest nesting of groups and postfix operators an expression may have (a deeper one is refused: the parser
#: and the compiler recurse on it).
MAX_NESTING = 100
#: The most digits a repetition count ``{m,n}`` may have.
_MAX_COUNT_DIGITS = 18

#: The characters with a meaning of their own (whitespace separates symbols too).
SPECIAL = frozenset('()[]|*+?.<>{}"\\')
UNITS = ("word", "char")

# ----------------------------------------------------------------------------------------
# The expression tree (shared by the parser, the compiler and to_regex's printer)


@dataclass(frozen=True)
class Atom:
    """One symbol occurrence: a ``Sym`` or a predicate label (``ANY``, ``OneOf``, ``NoneOf``)."""

    label: Label


@dataclass(frozen=True)
class Empty:
    """The empty string ``()``."""


@dataclass(frozen=True)
class Alt:
    """Alternation ``x | y | ...`` (⊕)."""

    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Seq:
    """Concatenation ``x y ...``."""

    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Star:
    """``x*``; ``at`` is the 1-based column of the operator (0 when built by ``to_regex``)."""

    item: Expr
    at: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Plus:
    """``x+``."""

    item: Expr
    at: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Opt:
    """``x?``, that is ``x | ()``."""

    item: Expr


@dataclass(frozen=True)
class Repeat:
    """``x{low,high}``; ``high`` None is unbounded."""

    item: Expr
    low: int
    high: int | None
    at: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Weighted:
    """``x<w>``: ``x ⊗ w``."""

    item: Expr
    weight: Any


Expr = Union[Atom, Empty, Alt, Seq, Star, Plus, Opt, Repeat, Weighted]

# ----------------------------------------------------------------------------------------
# Lexer


@dataclass(frozen=True)
class _Token:
    kind: str  # "sym", "weight", "repeat", "end", or the punctuation itself ("(", "[^", "*", ...)
    column: int  # 1-based
    text: str = ""


def _describe(token: _Token) -> str:
    if token.kind == "end":
        return "the end of the expression"
    if token.kind == "sym":
        return f"symbol {token.text!r}"
    if token.kind == "weight":
        return f"weight <{token.text}>"
    if token.kind == "repeat":
        return f"repetition {{{token.text}}}"
    return repr(token.kind)


def _error(column: int, message: str) -> FormatError:
    return FormatError(f"regex column {column}: {message}")


def _read_symbol(text: str, i: int) -> tuple[list[tuple[str, int]], int]:
    """The run of plain characters, escapes and quoted strings at ``i``: [(character, column)], next index."""
    chars: list[tuple[str, int]] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 == n:
                raise _error(i + 1, "expected a character after '\\'")
            chars.append((text[i + 1], i + 1))
            i += 2
        elif c == '"':
            start = i
            i += 1
            while True:
                if i == n:
                    raise _error(start + 1, "unterminated quote (expected a closing '\"')")
                if text[i] == '"':
                    break
                if text[i] == "\\":
                    if i + 1 == n:
                        raise _error(i + 1, "expected a character after '\\'")
                    i += 1
                chars.append((text[i], i + 1))
                i += 1
            if i == start + 1:
                raise _error(start + 1, 'empty quoted symbol ""; write () for the empty string')
            i += 1
        elif c.isspace() or c in SPECIAL:
            break
        else:
            chars.append((c, i + 1))
            i += 1
    return chars, i


def _tokens(text: str, unit: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "<{":
            close = ">" if c == "<" else "}"
            end = text.find(close, i + 1)
            if end < 0:
                raise _error(i + 1, f"expected {close!r} to close the {c!r} opened here")
            out.append(_Token("weight" if c == "<" else "repeat", i + 1, text[i + 1 : end]))
            i = end + 1
        elif c in ">}":
            raise _error(i + 1, f"unexpected {c!r} (nothing to close)")
        elif c == "[" and text.startswith("[^", i):
            out.append(_Token("[^", i + 1))
            i += 2
        elif c in SPECIAL and c not in '"\\':
            out.append(_Token(c, i + 1))
            i += 1
        else:
            chars, i = _read_symbol(text, i)
            if unit == "char":
                out.extend(_Token("sym", column, ch) for ch, column in chars)
            else:
                out.append(_Token("sym", chars[0][1], "".join(ch for ch, _ in chars)))
    out.append(_Token("end", n + 1))
    return out


# ----------------------------------------------------------------------------------------
# Parser (recursive descent)


class _Parser:
    def __init__(self, text: str, unit: str, semiring: Semiring, alphabet: SymbolTable | None):
        self.tokens = _tokens(text, unit)
        self.i = 0
        self.semiring = semiring
        self.alphabet = alphabet
        self.depth = 0  # groups open

    @property
    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def parse(self) -> Expr:
        expr = self.alternation()
        token = self.peek
        if token.kind == ")":
            raise _error(token.column, "unexpected ')' (no group is open)")
        if token.kind != "end":  # pragma: no cover - alternation stops only at ')', '|' or the end
            raise _error(token.column, f"unexpected {_describe(token)}")
        return expr

    def alternation(self) -> Expr:
        items = [self.sequence()]
        while self.peek.kind == "|":
            self.take()
            items.append(self.sequence())
        return items[0] if len(items) == 1 else Alt(tuple(items))

    def sequence(self) -> Expr:
        items: list[Expr] = []
        while self.peek.kind not in ("|", ")", "end"):
            items.append(self.postfix())
        if not items:
            token = self.peek
            raise _error(token.column, f"expected a symbol, '.', '(' or '[' but found {_describe(token)}")
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def postfix(self) -> Expr:
        expr = self.primary()
        while True:
            token = self.peek
            if token.kind == "*":
                expr = Star(expr, token.column)
            elif token.kind == "+":
                expr = Plus(expr, token.column)
            elif token.kind == "?":
                expr = Opt(expr)
            elif token.kind == "weight":
                expr = Weighted(expr, self.weight(token))
            elif token.kind == "repeat":
                low, high = self.bounds(token)
                expr = Repeat(expr, low, high, token.column)
            else:
                return expr
            self.take()

    def primary(self) -> Expr:
        token = self.take()
        if token.kind == "sym":
            return Atom(Sym(self.symbol(token)))
        if token.kind == ".":
            return Atom(ANY)
        if token.kind == "(":
            if self.peek.kind == ")":
                self.take()
                return Empty()
            if self.depth >= MAX_NESTING:
                raise _error(token.column, f"groups nested more than MAX_NESTING={MAX_NESTING} deep")
            self.depth += 1
            inner = self.alternation()
            self.depth -= 1
            if self.peek.kind != ")":
                raise _error(
                    self.peek.column,
                    f"expected ')' to close the group opened at column {token.column} but found {_describe(self.peek)}",
                )
            self.take()
            return inner
        if token.kind in ("[", "[^"):
            members: list[Hashable] = []
            while self.peek.kind == "sym":
                members.append(self.symbol(self.take()))
            if self.peek.kind != "]":
                raise _error(
                    self.peek.column,
                    f"expected a symbol or ']' to close the set opened at column {token.column} "
                    f"but found {_describe(self.peek)}",
                )
            self.take()
            if token.kind == "[^":
                return Atom(NoneOf(members) if members else ANY)
            return Atom(Sym(members[0]) if len(set(members)) == 1 else OneOf(members))
        raise _error(token.column, f"expected a symbol, '.', '(' or '[' but found {_describe(token)}")

    def symbol(self, token: _Token) -> str:
        if self.alphabet is not None and token.text not in self.alphabet:
            raise AlphabetError(
                f"regex column {token.column}: symbol {token.text!r} is not in the alphabet {self.alphabet._preview()}"
            )
        return token.text

    def weight(self, token: _Token) -> Any:
        text = token.text.strip()
        value: Any
        if text.lower() in ("true", "false"):
            value = text.lower() == "true"
        else:
            try:
                value = float(text)
            except ValueError:
                raise _error(token.column, f"weight <{token.text}> is not a number") from None
        return self.semiring.check(value, f"regex column {token.column}: weight <{token.text}>")

    def bounds(self, token: _Token) -> tuple[int, int | None]:
        parts = [p.strip() for p in token.text.split(",")]
        digits = all((p.isascii() and p.isdigit()) or p == "" for p in parts)
        if len(parts) > 2 or not digits or parts == ["", ""] or parts == [""]:
            raise _error(token.column, f"expected {{m}}, {{m,}}, {{,n}} or {{m,n}} with integers, not {{{token.text}}}")
        if any(len(p) > _MAX_COUNT_DIGITS for p in parts):
            raise _error(
                token.column, f"repetition count {{{token.text[:40]}...}} has more than {_MAX_COUNT_DIGITS} digits"
            )
        low = int(parts[0]) if parts[0] else 0
        high: int | None = low if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
        if high is not None and high < low:
            raise _error(token.column, f"repetition {{{token.text}}}: the upper bound {high} is below {low}")
        return low, high


def parse_regex(
    text: str,
    semiring: str | Semiring = "real",
    alphabet: SymbolTable | Iterable[Hashable] | None = None,
    *,
    unit: str = "word",
) -> Expr:
    """The expression tree of ``text`` (see the module docstring for the syntax); weights checked by ``semiring``.

    Raises:
        FormatError: malformed text, naming the 1-based column and what was expected there.
        WeightError: a weight outside the semiring, naming its column.
        AlphabetError: a symbol outside ``alphabet``, naming its column.
    """
    if not isinstance(text, str):
        raise FormatError(f"regex: the expression must be a str, not {type(text).__name__} ({text!r})")
    if unit not in UNITS:
        raise FormatError(f"regex: unit must be 'word' or 'char', not {unit!r}")
    table = alphabet if isinstance(alphabet, SymbolTable) or alphabet is None else SymbolTable(alphabet)
    if not text.strip():
        raise _error(1, "empty expression; write () for the empty string or [] for the empty language")
    expr = _Parser(text, unit, get_semiring(semiring), table).parse()
    if _depth(expr) > MAX_NESTING:
        raise FormatError(f"regex: operators nested more than MAX_NESTING={MAX_NESTING} deep")
    return expr


def _children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (Alt, Seq)):
        return e.items
    if isinstance(e, (Star, Plus, Opt, Repeat, Weighted)):
        return (e.item,)
    return ()


def _depth(e: Expr) -> int:
    """The depth of the tree (without recursion: it is what decides whether recursing is safe)."""
    deepest, stack = 0, [(e, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in _children(node))
    return deepest


def _occurrences(e: Expr) -> int:
    """The symbol occurrences of ``e`` once every ``{m,n}`` is expanded (an exact Python int, however large)."""
    if isinstance(e, Atom):
        return 1
    if isinstance(e, Repeat):
        return _occurrences(e.item) * (e.high if e.high is not None else max(e.low, 1))
    return sum(_occurrences(child) for child in _children(e))


# ----------------------------------------------------------------------------------------
# Compiler: the weighted position (Glushkov) automaton


@dataclass
class _Positions:
    """A subexpression's weight on the empty string, and its entry (first) and exit (last) position weights."""

    null: Any
    first: dict[int, Any]
    last: dict[int, Any]


class _Glushkov:
    def __init__(self, semiring: Semiring, max_arcs: int):
        self.s = semiring
        self.labels: list[Label] = []
        self.follow: dict[tuple[int, int], Any] = {}
        self.max_arcs = max_arcs

    def scale(self, weights: dict[int, Any], w: Any) -> dict[int, Any]:
        """Every weight ⊗ ``w`` (zeros dropped)."""
        scaled = {p: self.s.times(v, w) for p, v in weights.items()}
        return {p: v for p, v in scaled.items() if not self.s.is_zero(v)}

    def merge(self, *parts: dict[int, Any]) -> dict[int, Any]:
        out: dict[int, Any] = {}
        for part in parts:
            for p, v in part.items():
                out[p] = self.s.plus(out[p], v) if p in out else v
        return out

    def link(self, last: dict[int, Any], middle: Any, first: dict[int, Any]) -> None:
        s = self.s
        for p, u in last.items():
            for q, v in first.items():
                w = s.times(s.times(u, middle), v)
                if s.is_zero(w):
                    continue
                if (p, q) in self.follow:
                    self.follow[(p, q)] = s.plus(self.follow[(p, q)], w)
                elif len(self.follow) >= self.max_arcs:
                    raise _too_many_arcs(self.max_arcs, "arcs")
                else:
                    self.follow[(p, q)] = w

    def star(self, null: Any, at: int, operator: str) -> Any:
        try:
            return self.s.star(null)
        except DivergenceError as exc:
            raise DivergenceError(
                f"regex column {at}: the operand of {operator!r} scores the empty string with {null!r}, "
                f"so the repetition counts it infinitely often ({exc})"
            ) from None

    def visit(self, e: Expr) -> _Positions:
        s = self.s
        if isinstance(e, Atom):
            self.labels.append(e.label)
            p = len(self.labels) - 1
            return _Positions(s.zero, {p: s.one}, {p: s.one})
        if isinstance(e, Empty):
            return _Positions(s.one, {}, {})
        if isinstance(e, Alt):
            parts = [self.visit(x) for x in e.items]
            null = s.zero
            for part in parts:
                null = s.plus(null, part.null)
            return _Positions(null, self.merge(*(p.first for p in parts)), self.merge(*(p.last for p in parts)))
        if isinstance(e, Seq):
            out = _Positions(s.one, {}, {})
            for x in e.items:
                out = self.concat(out, self.visit(x))
            return out
        if isinstance(e, (Star, Plus)):
            inner = self.visit(e.item)
            closure = self.star(inner.null, e.at, "*" if isinstance(e, Star) else "+")
            self.link(inner.last, closure, inner.first)
            # (n ⊕ x')* = n* (x' n*)*  and  (n ⊕ x')+ = n n* ⊕ n* (x' n*)+  (n: the empty-string weight)
            null = closure if isinstance(e, Star) else s.times(inner.null, closure)
            return _Positions(null, self.scale(inner.first, closure), self.scale(inner.last, closure))
        if isinstance(e, Opt):
            inner = self.visit(e.item)
            return _Positions(s.plus(inner.null, s.one), inner.first, inner.last)
        if isinstance(e, Weighted):
            inner = self.visit(e.item)
            return _Positions(s.times(inner.null, e.weight), self.scale(inner.first, e.weight), inner.last)
        if isinstance(e, Repeat):
            return self.repeat(e)
        raise TypeError(f"not a regex node: {e!r}")  # pragma: no cover - Expr is closed

    def repeat(self, e: Repeat) -> _Positions:
        """``x{m,n}`` as ``x ... x (() | x (() | x ...))`` (every count from m to n exactly once), or ``x ... x x*``
        for ``{m,}``; each copy of ``x`` is visited anew (fresh positions), iteratively (no deeper recursion)."""
        s = self.s
        tail: _Positions | None = None
        if e.high is None:
            tail = self.visit(Star(e.item, e.at))
        else:
            for _ in range(e.high - e.low):  # innermost first: (() | x tail)
                copy = self.visit(e.item)
                inner = copy if tail is None else self.concat(copy, tail)
                tail = _Positions(s.plus(inner.null, s.one), inner.first, inner.last)
        out = _Positions(s.one, {}, {})
        for _ in range(e.low):
            out = self.concat(out, self.visit(e.item))
        return out if tail is None else self.concat(out, tail)

    def concat(self, x: _Positions, y: _Positions) -> _Positions:
        s = self.s
        self.link(x.last, s.one, y.first)
        first = self.merge(x.first, self.scale(y.first, x.null))
        last = self.merge(y.last, self.scale(x.last, y.null))
        return _Positions(s.times(x.null, y.null), first, last)


def _too_many_arcs(max_arcs: int, what: str) -> BudgetExceededError:
    return BudgetExceededError(
        f"regex: the position automaton would have more than max_arcs={max_arcs} {what}; "
        "raise max_arcs (e.g. regex(text, max_arcs=...)) or write the repetition with fewer copies"
    )


def _check_max_arcs(max_arcs: int) -> None:
    if isinstance(max_arcs, bool) or not isinstance(max_arcs, int) or max_arcs < 1:
        raise ArgumentError(f"regex: max_arcs must be a positive integer, got {max_arcs!r}")


def compile_regex(
    expr: Expr,
    semiring: str | Semiring = "real",
    alphabet: SymbolTable | Iterable[Hashable] | None = None,
    *,
    max_arcs: int = DEFAULT_MAX_ARCS,
) -> WFSA:
    """The trimmed, epsilon-free position automaton of an expression tree (weights already in ``semiring``).

    States: ``start`` and one state per surviving symbol occurrence, named by its position (``1``, ``2``, ...).

    Caution:
        The tree must be at most ``MAX_NESTING`` deep (``parse_regex`` checks it); the compiler recurses on it.

    Raises:
        DivergenceError: a starred operand whose empty-string weight has no star in the semiring.
        BudgetExceededError: more than ``max_arcs`` arcs between positions, or more symbol occurrences than that.
        ArgumentError: a ``max_arcs`` that is not a positive integer.
    """
    from kleene.automata.ops import trim

    _check_max_arcs(max_arcs)
    if _occurrences(expr) > max_arcs:
        raise _too_many_arcs(max_arcs, "symbol occurrences (repetitions expanded)")
    s = get_semiring(semiring)
    builder = _Glushkov(s, max_arcs)
    top = builder.visit(expr)
    out = WFSA(s, alphabet)
    out.add_state("start")
    for p in range(len(builder.labels)):
        out.add_state(str(p + 1))
    out.set_initial(0)
    if not s.is_zero(top.null):
        out.set_final(0, top.null)
    for p, w in top.first.items():
        out.add_arc(0, p + 1, builder.labels[p], w)
    for (p, q), w in builder.follow.items():
        out.add_arc(p + 1, q + 1, builder.labels[q], w)
    for p, w in top.last.items():
        out.set_final(p + 1, w)
    return trim(out)


def regex(
    text: str,
    semiring: str | Semiring = "real",
    alphabet: SymbolTable | Iterable[Hashable] | None = None,
    *,
    unit: str = "word",
    max_arcs: int = DEFAULT_MAX_ARCS,
) -> WFSA:
    """Compile a weighted regular expression (syntax in the module docstring) to a trimmed epsilon-free WFSA.

    Args:
        text: the expression.
        semiring: the semiring of the result and of the weights written in ``<...>``.
        alphabet: the result's alphabet (a ``SymbolTable`` or symbols); every symbol the text names must be in
            it, and ``.``/``[^...]`` range over it. Without one the predicates stay unrestricted.
        unit: ``"word"`` (symbols are whitespace-separated words) or ``"char"`` (every character is a symbol).
        max_arcs: the budget: the most arcs the construction may build, and the most symbol occurrences once
            ``{m,n}`` is expanded (default ``DEFAULT_MAX_ARCS``, 100 000: about a second).

    Predicate labels (``.``, ``[...]``, ``[^...]``) become one arc each, never expanded over the alphabet.

    Raises:
        FormatError: malformed text, naming the 1-based column and what was expected there.
        WeightError: a weight outside the semiring (naming its column).
        AlphabetError: a symbol outside ``alphabet`` (naming its column).
        DivergenceError: a repeated operand that scores the empty string with a weight whose star diverges,
            e.g. ``(a?)*`` over the reals.
        BudgetExceededError: more than ``max_arcs`` arcs or symbol occurrences (``(a*){1000}`` has 500 500 arcs).
        ArgumentError: a ``max_arcs`` that is not a positive integer.
    """
    _check_max_arcs(max_arcs)
    s = get_semiring(semiring)
    table = alphabet if isinstance(alphabet, SymbolTable) or alphabet is None else SymbolTable(alphabet)
    return compile_regex(parse_regex(text, s, table, unit=unit), s, table, max_arcs=max_arcs)


# ----------------------------------------------------------------------------------------
# Back to text: state elimination


class _Algebra:
    """Smart constructors that keep expressions small without changing their series.

    Expressions are kept as ``core`` or ``Weighted(core, w)`` with ``w`` not the semiring one. A concatenation
    keeps each factor's weight on the factor and gathers the weights of empty factors (initial and final weights)
    outside (⊗ commutes); an alternation merges equal branches by ⊕-ing their weights and unites the labels of
    atom branches of equal weight when the sets are disjoint (or always, in an idempotent semiring).
    """

    def __init__(self, semiring: Semiring):
        self.s = semiring

    def split(self, e: Expr) -> tuple[Expr, Any]:
        return (e.item, e.weight) if isinstance(e, Weighted) else (e, self.s.one)

    def make(self, core: Expr, weight: Any) -> Expr:
        return core if weight == self.s.one else Weighted(core, weight)

    def seq(self, *parts: Expr) -> Expr:
        s = self.s
        factors: list[tuple[Expr, Any]] = []
        for part in parts:
            core, w = self.split(part)
            if isinstance(core, Seq):
                factors.append((Empty(), w))
                factors.extend((x, s.one) for x in core.items)
            else:
                factors.append((core, w))
        items: list[Expr] = []
        total = s.one
        for core, w in factors:
            if isinstance(core, Empty):
                total = s.times(total, w)
                continue
            _push(items, self.make(core, w))
        if not items:
            return self.make(Empty(), total)
        if len(items) == 1:
            core, w = self.split(items[0])
            return self.make(core, s.times(w, total))
        return self.make(Seq(tuple(items)), total)

    def alt(self, x: Expr | None, y: Expr) -> Expr:
        total = _Sum(self)
        if x is not None:
            total.extend(self.branches(x))  # already merged among themselves
        total.add(y)
        return total.expr()

    def branches(self, e: Expr) -> list[tuple[Expr, Any]]:
        """The (core, weight) branches of an alternation (one branch for anything else)."""
        core, w = self.split(e)
        if not isinstance(core, Alt):
            return [(core, w)]
        parts = [self.split(b) for b in core.items]
        return parts if w == self.s.one else [(b, self.s.times(v, w)) for b, v in parts]

    def ends(self, core: Expr, w: Any) -> tuple[Expr, Expr]:
        """The first and last factors of the branch ``core<w>`` as ``combine`` compares them."""
        if isinstance(core, Seq):
            return core.items[0], core.items[-1]
        whole = self.make(core, w)
        return whole, whole

    def combine(self, x: Expr, v: Any, y: Expr, w: Any) -> Expr | None:
        """One expression for ``x<v> | y<w>`` when a rule applies: equal branches (⊕ of the weights), atoms of
        equal weight with a common label, a common prefix or suffix factored out (⊗ distributes over ⊕)."""
        if x == y:
            return self.make(x, self.s.plus(v, w))
        if isinstance(x, Atom) and isinstance(y, Atom):
            label = _label_union(x.label, y.label, self.s.idempotent) if v == w else None
            return None if label is None else self.make(Atom(label), v)
        if not isinstance(x, Seq):
            x, v = self.make(x, v), self.s.one
        if not isinstance(y, Seq):
            y, w = self.make(y, w), self.s.one
        fx, fy = _factors(x), _factors(y)
        prefix = 0
        while prefix < min(len(fx), len(fy)) and fx[prefix] == fy[prefix]:
            prefix += 1
        suffix = 0
        while suffix < min(len(fx), len(fy)) - prefix and fx[-1 - suffix] == fy[-1 - suffix]:
            suffix += 1
        if prefix == suffix == 0:
            return None
        if prefix >= suffix:
            rest = self.alt(self.make(_product(fx[prefix:]), v), self.make(_product(fy[prefix:]), w))
            return self.seq(*fx[:prefix], rest)
        rest = self.alt(self.make(_product(fx[:-suffix]), v), self.make(_product(fy[:-suffix]), w))
        return self.seq(rest, *fx[-suffix:])

    def star(self, e: Expr) -> Expr:
        return Star(e)


class _Sum:
    """A growing alternation: each added branch is merged with the first branch ``_Algebra.combine`` can merge
    it with, found through indexes (equal core, atom of equal weight, equal first or last factor) so that
    adding a branch does not scan the others."""

    def __init__(self, algebra: _Algebra):
        self.algebra = algebra
        self.items: dict[int, tuple[Expr, Any]] = {}  # insertion order is the printed order
        self.index: dict[tuple[str, Any], set[int]] = {}
        self.count = 0

    def keys(self, core: Expr, w: Any) -> list[tuple[str, Any]]:
        first, last = self.algebra.ends(core, w)
        keys: list[tuple[str, Any]] = [("core", core), ("first", first), ("last", last)]
        return [*keys, ("atom", w)] if isinstance(core, Atom) else keys

    def extend(self, branches: list[tuple[Expr, Any]]) -> None:
        """Add branches known not to merge with each other or with the present ones."""
        for core, w in branches:
            self.register(core, w)

    def register(self, core: Expr, w: Any) -> None:
        self.items[self.count] = (core, w)
        for key in self.keys(core, w):
            self.index.setdefault(key, set()).add(self.count)
        self.count += 1

    def remove(self, i: int) -> None:
        core, w = self.items.pop(i)
        for key in self.keys(core, w):
            self.index[key].discard(i)

    def add(self, e: Expr) -> None:
        pending = self.algebra.branches(e)
        while pending:
            core, w = pending.pop(0)
            candidates = sorted(set().union(*(self.index.get(key, set()) for key in self.keys(core, w))))
            for i in candidates:
                other, v = self.items[i]
                merged = self.algebra.combine(other, v, core, w)
                if merged is not None:
                    self.remove(i)
                    pending[:0] = self.algebra.branches(merged)
                    break
            else:
                self.register(core, w)

    def expr(self) -> Expr:
        s = self.algebra.s
        branches = list(self.items.values())
        empty = next((w for b, w in branches if isinstance(b, Empty)), None)
        for i, (b, w) in enumerate(branches):
            if w != empty:
                continue
            if isinstance(b, Plus) or (isinstance(b, Star) and s.idempotent):  # () | x+ = x*, and () | x* = x*
                branches = [(Star(b.item), w) if j == i else c for j, c in enumerate(branches) if c != (Empty(), w)]
                break
        if len(branches) == 1:
            return self.algebra.make(*branches[0])
        weights = [w for _, w in branches]
        if all(w == weights[0] for w in weights):
            return self.algebra.make(Alt(tuple(b for b, _ in branches)), weights[0])
        return Alt(tuple(self.algebra.make(b, w) for b, w in branches))


def _factors(e: Expr) -> tuple[Expr, ...]:
    return e.items if isinstance(e, Seq) else (e,)


def _push(items: list[Expr], e: Expr) -> None:
    """Append the factor ``e`` to a concatenation, rewriting ``z z*`` and ``z* z`` as ``z+`` and sliding
    ``x (y x)*`` to ``(x y)* x`` (identities of formal power series, so weights are kept)."""
    if isinstance(e, Star):
        z = _factors(e.item)
        if _ends_with(items, z):
            del items[len(items) - len(z) :]
            items.append(Plus(e.item))
            return
        for k in range(len(z) - 1, 0, -1):
            x, y = z[len(z) - k :], z[: len(z) - k]
            if _ends_with(items, x):
                del items[len(items) - k :]
                items.append(Star(Seq(x + y)))
                items.extend(x)
                return
    items.append(e)
    for k in range(1, len(items)):
        star = items[-k - 1]
        if isinstance(star, Star) and _factors(star.item) == tuple(items[-k:]):
            del items[len(items) - k - 1 :]
            items.append(Plus(star.item))
            return


def _ends_with(items: list[Expr], tail: tuple[Expr, ...]) -> bool:
    return len(items) >= len(tail) and tuple(items[len(items) - len(tail) :]) == tail


def _product(factors: tuple[Expr, ...]) -> Expr:
    if not factors:
        return Empty()
    return factors[0] if len(factors) == 1 else Seq(factors)


def _as_set(label: Label) -> tuple[bool, frozenset[Hashable]]:
    """(is a complement, members) of a consuming label."""
    if isinstance(label, Sym):
        return False, frozenset([label.symbol])
    if isinstance(label, OneOf):
        return False, label.members
    if isinstance(label, NoneOf):
        return True, label.members
    if isinstance(label, AnySymbol):
        return True, frozenset()
    raise AlphabetError(f"to_regex: label {label} ({type(label).__name__}) has no regex form")


def _from_set(complement: bool, members: frozenset[Hashable]) -> Label:
    if complement:
        return NoneOf(members) if members else ANY
    return Sym(next(iter(members))) if len(members) == 1 else OneOf(members)


def _label_union(x: Label, y: Label, idempotent: bool) -> Label | None:
    """One label accepting what ``x`` or ``y`` accepts, when that keeps the series (disjoint labels, or an
    idempotent semiring where overlaps do not add up); None otherwise."""
    (cx, mx), (cy, my) = _as_set(x), _as_set(y)
    if not cx and not cy:
        return _from_set(False, mx | my) if idempotent or not mx & my else None
    if cx and cy:
        return _from_set(True, mx & my) if idempotent else None
    outside, inside = (mx, my) if cx else (my, mx)
    return _from_set(True, outside - inside) if idempotent or inside <= outside else None


def to_regex_tree(a: WFSA) -> Expr | None:
    """``a``'s series as an expression tree by state elimination (None: the empty language). See ``to_regex``."""
    from kleene.automata.ops import remove_epsilon, trim

    for where, w in _weights(a):
        if is_symbolic(w):
            raise WeightError(f"to_regex: {where} has the symbolic weight {w}; bind it first (ops.bind)")
    s = a.semiring
    b = trim(a)
    if b.has_epsilons:
        b = trim(remove_epsilon(b))
    algebra = _Algebra(s)
    n = b.num_states
    start, end = n, n + 1
    edges: dict[tuple[int, int], _Sum] = {}
    succ: dict[int, set[int]] = {q: set() for q in range(n + 2)}
    pred: dict[int, set[int]] = {q: set() for q in range(n + 2)}

    def add(p: int, q: int, e: Expr) -> None:
        edges.setdefault((p, q), _Sum(algebra)).add(e)
        succ[p].add(q)
        pred[q].add(p)

    def take(p: int, q: int) -> Expr:
        return edges.pop((p, q)).expr()

    for arc in b.arcs:
        add(arc.src, arc.dst, algebra.make(Atom(arc.label), arc.weight))
    for q, w in b.initial.items():
        add(start, q, algebra.make(Empty(), w))
    for q, w in b.final.items():
        add(q, end, algebra.make(Empty(), w))
    def cost(r: int) -> int:
        return (len(pred[r]) - (r in pred[r])) * (len(succ[r]) - (r in succ[r]))

    queue = [(cost(q), q) for q in range(n)]  # lazy: an entry is used only when its cost is current
    heapq.heapify(queue)
    done: set[int] = set()
    while queue:
        c, q = heapq.heappop(queue)
        if q in done:
            continue
        if c != cost(q):
            heapq.heappush(queue, (cost(q), q))
            continue
        done.add(q)
        loop = take(q, q) if (q, q) in edges else None
        ins = [(p, take(p, q)) for p in sorted(pred[q] - {q})]
        outs = [(r, take(q, r)) for r in sorted(succ[q] - {q})]
        for p, _ in ins:
            succ[p].discard(q)
        for r, _ in outs:
            pred[r].discard(q)
        middle = [algebra.star(loop)] if loop is not None else []
        for p, into in ins:
            for r, out in outs:
                add(p, r, algebra.seq(into, *middle, out))
        for neighbour in {p for p, _ in ins} | {r for r, _ in outs}:
            if neighbour < n and neighbour not in done:
                heapq.heappush(queue, (cost(neighbour), neighbour))
    return take(start, end) if (start, end) in edges else None


def _weights(a: WFSA) -> list[tuple[str, Weight]]:
    out: list[tuple[str, Weight]] = [(f"arc {i}", arc.weight) for i, arc in enumerate(a.arcs)]
    out += [(f"the initial weight of {a.state_name(q)}", w) for q, w in a.initial.items()]
    out += [(f"the final weight of {a.state_name(q)}", w) for q, w in a.final.items()]
    return out


def to_regex(a: WFSA, *, unit: str = "word") -> str:
    """A regular expression for ``a`` (``regex(to_regex(a), a.semiring, a.alphabet)`` is equivalent to ``a``).

    State elimination (Brzozowski-McCluskey) over ``a``'s labels after trimming and epsilon removal, choosing
    at each step the state with the fewest in x out edges. Simplifications that keep the weighted series:
    weights are shown as ``<w>`` only where they differ from the semiring's one; equal branches merge (``a | a``
    is ``a`` in an idempotent semiring, ``a<2>`` over the reals); atom branches of equal weight merge into sets
    (``[a b]``, ``[^a]``) when disjoint or when the semiring is idempotent; common prefixes and suffixes of
    branches are factored out; ``z z*`` becomes ``z+``, ``x (y x)*`` slides to ``(x y)* x``, ``() | x+``
    becomes ``x*`` (``() | x*`` too when idempotent); ``x | ()`` prints as ``x?``; parentheses only where
    precedence needs them. Weights print as the shortest decimal that reads back to the same float.

    Caution:
        The expression can grow exponentially with the number of states; meant for small automata (patterns,
        extracted rules). Symbols are written with ``str`` and read back as strings. Predicates (``.``, ``[^..]``)
        range over the alphabet, so pass ``a.alphabet`` to ``regex`` when reading the text back.

    Args:
        unit: ``"word"`` writes symbols as words separated by spaces; ``"char"`` needs one-character symbols
            and writes them without separators.

    Raises:
        WeightError: a symbolic weight (bind it first).
        AlphabetError: with ``unit="char"``, a symbol longer than one character.
        DivergenceError: an epsilon closure that diverges (from epsilon removal).
    """
    if unit not in UNITS:
        raise FormatError(f"to_regex: unit must be 'word' or 'char', not {unit!r}")
    tree = to_regex_tree(a)
    return "[]" if tree is None else format_regex(tree, unit)


# ----------------------------------------------------------------------------------------
# Printing

_ALT, _SEQ, _POSTFIX = 0, 1, 2


def format_regex(e: Expr, unit: str = "word") -> str:
    """The text of an expression tree (parentheses only where needed); ``parse_regex`` reads it back.

    Raises:
        AlphabetError: a symbol that cannot be written in ``unit`` (empty, or longer than a character in char mode).
    """
    return _Printer(unit).show(e, _ALT)


class _Printer:
    def __init__(self, unit: str):
        self.unit = unit

    def show(self, e: Expr, level: int) -> str:
        text, own = self.text(e)
        return f"({text})" if own < level else text

    def text(self, e: Expr) -> tuple[str, int]:
        sep = " " if self.unit == "word" else ""
        if isinstance(e, Atom):
            return self.label(e.label), _POSTFIX
        if isinstance(e, Empty):
            return "()", _POSTFIX
        if isinstance(e, Alt):
            rest = tuple(x for x in e.items if not isinstance(x, Empty))
            if len(rest) < len(e.items):  # x | () is x?
                body = rest[0] if len(rest) == 1 else Alt(rest)
                return self.show(body, _POSTFIX) + "?", _POSTFIX
            bar = " | " if self.unit == "word" else "|"
            return bar.join(self.show(x, _SEQ) for x in e.items), _ALT
        if isinstance(e, Seq):
            return sep.join(self.show(x, _SEQ) for x in e.items), _SEQ
        if isinstance(e, Star):
            return self.show(e.item, _POSTFIX) + "*", _POSTFIX
        if isinstance(e, Plus):
            return self.show(e.item, _POSTFIX) + "+", _POSTFIX
        if isinstance(e, Opt):
            return self.show(e.item, _POSTFIX) + "?", _POSTFIX
        if isinstance(e, Repeat):
            bounds = f"{e.low}" if e.high == e.low else f"{e.low},{'' if e.high is None else e.high}"
            return self.show(e.item, _POSTFIX) + "{" + bounds + "}", _POSTFIX
        if isinstance(e, Weighted):
            return self.show(e.item, _POSTFIX) + f"<{_format_weight(e.weight)}>", _POSTFIX
        raise TypeError(f"not a regex node: {e!r}")  # pragma: no cover - Expr is closed

    def label(self, label: Label) -> str:
        if isinstance(label, Sym):
            return self.symbol(label.symbol)
        if isinstance(label, AnySymbol):
            return "."
        if isinstance(label, (OneOf, NoneOf)):
            opening = "[^" if isinstance(label, NoneOf) else "["
            sep = " " if self.unit == "word" else ""
            return opening + sep.join(self.symbol(m) for m in sorted(label.members, key=str)) + "]"
        if isinstance(label, Epsilon):
            return "()"
        raise AlphabetError(f"to_regex: label {label} ({type(label).__name__}) has no regex form")

    def symbol(self, symbol: Hashable) -> str:
        text = str(symbol)
        if self.unit == "char":
            if len(text) != 1:
                raise AlphabetError(f"to_regex: symbol {symbol!r} is not one character; use unit='word'")
            return "\\" + text if text in SPECIAL or text.isspace() or text == "^" else text
        if not text:
            raise AlphabetError("to_regex: the empty symbol '' cannot be written in a regex")
        if any(c in SPECIAL or c.isspace() for c in text) or text.startswith("^"):
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return text


def _format_weight(w: Any) -> str:
    """The shortest text that reads back to the same value (``2``, ``0.1``, ``-inf``, ``true``)."""
    if isinstance(w, bool):
        return "true" if w else "false"
    number = float(w)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return repr(number)


__all__ = [
    "Alt",
    "Atom",
    "Empty",
    "Expr",
    "Opt",
    "Plus",
    "Repeat",
    "Seq",
    "Star",
    "Weighted",
    "compile_regex",
    "format_regex",
    "parse_regex",
    "regex",
    "to_regex",
    "to_regex_tree",
]
