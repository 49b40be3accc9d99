"""OpenFst AT&T text: ``read_att``/``write_att`` and symbol tables (``read_symbols``/``write_symbols``).

The meaning of a file is OpenFst's (``fstcompile``/``fstprint``):

- arc lines ``src dst label [weight]`` (acceptor format) or ``src dst ilabel olabel [weight]``
  (transducer format; kleene automata are acceptors, so ilabel and olabel must name the same label);
- final lines ``state [weight]``; a state's last final line wins, and a final weight equal to
  the semiring zero makes the state non-final;
- the state of the first line is the start state; a missing weight is the semiring one;
- fields are separated by spaces or tabs; blank lines are skipped (there are no comments);
  a carriage return before a newline is ignored;
- label 0 is epsilon.

Labels (one rule for reading and writing). Without a symbol table, a label made of digits is
an integer, as in OpenFst (``1`` reads as the int ``1``, so ``score([1])`` is the natural call),
``0``, ``<eps>`` and ``<epsilon>`` are epsilon, and any other label is a string (a kleene
extension: OpenFst needs a table for those). The automaton's alphabet is then closed: the
symbols that occur in the file (ints ascending, then strings), so scoring any other symbol
raises ``AlphabetError`` naming it and its position instead of scoring zero. With a table, a
label made of digits is a symbol id and any other label is a symbol name (the table's epsilon
name is epsilon); symbols are the table's (strings when it is read from a symbols file), and
the table is the alphabet. The writer follows the same rule: without a table, each symbol must
read back as itself (ints, and strings that are neither digits nor an epsilon spelling; others
need a table), and two distinct symbols that print the same (``1`` and ``'1'``) are refused.

Sources. ``read_att``, ``read_symbols`` and the ``symbols``/``isymbols``/``osymbols`` arguments
take text (``str``), ``bytes`` (UTF-8), a ``pathlib.Path`` (any ``os.PathLike``) naming a file,
or a file object (text or binary). A ``str`` names a file when it holds no line break and a
file of that name exists; any other ``str`` is the text itself. ``write_att``/``write_symbols``
return the text and also write it to ``file`` (a path or a file object) when given.

Weights and semirings. A file holds bare numbers whose meaning depends on its arc type. By
default (``arc_type=None``) the numbers are in the kleene semiring's own convention:
``min-plus`` holds costs exactly as OpenFst's ``tropical`` (``standard``) arcs; ``log`` holds
``log p`` where OpenFst's ``log`` arcs hold ``-log p``, so it is negated on read and write;
``real``, ``max-plus``, ``max-times`` and ``boolean`` (0/1) are written as they are. With
``arc_type="tropical"`` or ``"log"`` the numbers are OpenFst weights of that arc type, mapped
into the kleene semiring by a semiring homomorphism: tropical -> min-plus (identity),
max-plus (negation), max-times (``exp(-c)``), boolean (finite or not); log -> log (negation),
real (``exp(-c)``), boolean (finite or not). Infinity is spelled ``Infinity``/``inf`` (any
case). kleene keeps float64 weights; OpenFst's standard arcs hold float32.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kleene.automata.labels import EPSILON, Epsilon, Label, Sym, SymbolTable
from kleene.automata.semiring import Semiring, get_semiring
from kleene.automata.weights import Env, is_symbolic
from kleene.automata.wfsa import WFSA, IdIndex, IdNames, WeightVector
from kleene.errors import AlphabetError, FormatError, SemiringError, WeightError

_DIGITS = re.compile(r"[0-9]+")
#: The largest state or label id (OpenFst's ids are 64-bit); larger ones are refused, not read.
_MAX_ID = 2**63 - 1
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEXADECIMAL = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?")
_INFINITY = re.compile(r"([+-]?)(?:inf|infinity)", re.IGNORECASE)
_SEPARATORS = re.compile(r"[ \t]+")
_EPSILON_SPELLINGS = ("<eps>", "<epsilon>")
_ARC_TYPES = {"tropical": "tropical", "standard": "tropical", "log": "log"}

# -- weights -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _WeightCodec:
    """Maps file numbers to kleene semiring values (``decode``) and back (``encode``)."""

    decode: Callable[[float], Any]
    encode: Callable[[Any], float]


def _codec(semiring: Semiring, arc_type: str | None) -> _WeightCodec:
    """The weight mapping for ``semiring`` and an OpenFst arc type (None: the native convention)."""
    if arc_type is None:
        return _WeightCodec(*semiring.openfst_codec(None))
    kind = _ARC_TYPES.get(arc_type.strip().lower())
    if kind is None:
        raise SemiringError(f"unknown OpenFst arc type {arc_type!r}; known: tropical (standard), log")
    return _WeightCodec(*semiring.openfst_codec(kind))


def _parse_number(text: str) -> float | None:
    """A float from OpenFst weight text (decimal, hexadecimal, inf/Infinity), or None."""
    infinity = _INFINITY.fullmatch(text)
    if infinity:
        return -math.inf if infinity.group(1) == "-" else math.inf
    if _DECIMAL.fullmatch(text):
        return float(text)
    if _HEXADECIMAL.fullmatch(text):
        return float.fromhex(text)
    if text.lower() in ("nan", "+nan", "-nan"):
        return math.nan
    return None


def _format_number(value: float) -> str:
    """OpenFst-style text of a float: ``Infinity``, integers without a point, else shortest repr."""
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


# -- sources -----------------------------------------------------------------------------------

_SOURCE_KINDS = "text (str), bytes, a pathlib.Path or file name, or a file object"


def _names_a_file(source: str) -> bool:
    """The rule for a ``str``: a file name when it holds no line break and a file of that name exists."""
    if not source or "\n" in source or "\r" in source:
        return False
    try:
        return Path(source).is_file()
    except (OSError, ValueError):  # a name too long for the OS, a NUL character, ...
        return False


def _read_path(path: Path, argument: str, function: str) -> str:
    try:
        return _decoded(path.read_bytes(), f"{argument} (file {str(path)!r})", function)
    except OSError as exc:
        raise FormatError(f"{function}: {argument} names {str(path)!r}, which cannot be read: {exc.strerror}") from None


def _decoded(data: bytes, argument: str, function: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1]
        raise FormatError(f"{function}: {argument} is not UTF-8 text (byte {exc.start}: {bad!r})") from None


def _text_of(source: Any, argument: str, function: str) -> str:
    """The text held or named by ``source`` (see "Sources" in the module docstring).

    Raises:
        FormatError: a type that is none of the accepted ones, an unreadable file or bytes that are not UTF-8,
            naming ``argument``.
    """
    if isinstance(source, str):
        return _read_path(Path(source), argument, function) if _names_a_file(source) else source
    if isinstance(source, os.PathLike):
        return _read_path(Path(source), argument, function)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _decoded(bytes(source), argument, function)
    read = getattr(source, "read", None)
    if callable(read):
        content = read()
        if isinstance(content, (bytes, bytearray)):
            return _decoded(bytes(content), argument, function)
        if isinstance(content, str):
            return content
        raise FormatError(f"{function}: {argument}.read() returned {type(content).__name__}, not text or bytes")
    shown = repr(source)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise FormatError(f"{function}: {argument} must be {_SOURCE_KINDS}; got {type(source).__name__} {shown}")


def _write_to(file: Any, text: str, function: str) -> None:
    """Write ``text`` to ``file``: a path (``str`` or ``os.PathLike``) or a file object (text or binary)."""
    if isinstance(file, (str, os.PathLike)):
        try:
            Path(file).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise FormatError(f"{function}: file {str(file)!r} cannot be written: {exc.strerror}") from None
        return
    write = getattr(file, "write", None)
    if not callable(write):
        raise FormatError(f"{function}: file must be a path or a writable file object; got {type(file).__name__}")
    try:
        write(text)
    except TypeError:  # a binary file
        write(text.encode("utf-8"))


# -- symbol tables -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _LabelTable:
    """Label text -> Label, for one file: by id (digits) or by name."""

    by_id: Mapping[int, Hashable]
    by_name: Mapping[str, Hashable]
    epsilon: str

    @classmethod
    def from_symbol_table(cls, table: SymbolTable) -> _LabelTable:
        by_id = {table.id(s): s for s in table}
        return cls(by_id, _names_of(by_id.values()), table.epsilon)

    @classmethod
    def from_source(cls, source: Any, argument: str) -> tuple[_LabelTable, SymbolTable]:
        """The table of a ``SymbolTable`` or of OpenFst symbols text (keeping its ids), and the alphabet it gives."""
        if isinstance(source, SymbolTable):
            return cls.from_symbol_table(source), source
        by_id, epsilon, _ = _parse_symbols(_text_of(source, argument, "read_att"))
        alphabet = SymbolTable((by_id[i] for i in sorted(by_id)), epsilon=epsilon)
        return cls(by_id, _names_of(by_id.values()), epsilon), alphabet

    def resolve(self, text: str) -> Label:
        if _DIGITS.fullmatch(text):
            number = _id_number(text, "label")
            if number == SymbolTable.EPSILON_ID:
                return EPSILON
            if number not in self.by_id:
                raise AlphabetError(f"label id {number} is not in the symbol table")
            return Sym(self.by_id[number])
        if text == self.epsilon:
            return EPSILON
        if text not in self.by_name:
            raise AlphabetError(f"label {text!r} is not a symbol of the symbol table")
        return Sym(self.by_name[text])


def _names_of(symbols: Any) -> dict[str, Hashable]:
    """Symbol text -> symbol.

    Raises:
        FormatError: two distinct symbols print the same (naming both): a file could not tell them apart.
    """
    names: dict[str, Hashable] = {}
    for symbol in symbols:
        text = str(symbol)
        if text in names and names[text] != symbol:
            raise FormatError(
                f"symbols {names[text]!r} and {symbol!r} both print as {text!r}: an AT&T or symbols file cannot "
                "tell them apart"
            )
        names[text] = symbol
    return names


def _id_number(text: str, what: str) -> int:
    """The id of a field of ASCII digits.

    Raises:
        FormatError: an id beyond ``_MAX_ID`` (named, shortened).
    """
    if len(text) > len(str(_MAX_ID)) or int(text) > _MAX_ID:
        shown = text if len(text) <= 30 else f"{text[:20]}... ({len(text)} digits)"
        raise FormatError(f"{what} id {shown} is larger than 2^63 - 1 (OpenFst's ids are 64-bit)")
    return int(text)


def _resolve_without_table(text: str) -> Label:
    """Labels without a table: digits are ints (0 is epsilon), the epsilon spellings epsilon, the rest strings."""
    if text in _EPSILON_SPELLINGS:
        return EPSILON
    if _DIGITS.fullmatch(text):
        number = _id_number(text, "label")
        return EPSILON if number == SymbolTable.EPSILON_ID else Sym(number)
    return Sym(text)


def _numbered_lines(text: str) -> list[tuple[int, str, list[str]]]:
    """(1-based line number, line, fields) of each non-blank line; fields split at spaces and tabs, as OpenFst does."""
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        fields = [f for f in _SEPARATORS.split(line) if f]
        if fields:
            out.append((number, line, fields))
    return out


def _where(number: int, line: str) -> str:
    """``line N ('text')``, the text shortened to 80 characters (a long line is not echoed whole)."""
    text = line.strip()
    return f"line {number} ({text if len(text) <= 80 else text[:60] + f'... ({len(text)} characters)'!r})"


def _parse_symbols(text: str) -> tuple[dict[int, str], str, dict[int, int]]:
    """OpenFst symbols text -> ({id: symbol} without epsilon, epsilon name, {id: line number})."""
    symbols: dict[int, str] = {}
    lines: dict[int, int] = {}
    seen: set[str] = set()
    epsilon = _EPSILON_SPELLINGS[0]
    for number, line, fields in _numbered_lines(text):
        if len(fields) != 2 or not _DIGITS.fullmatch(fields[1]):
            raise FormatError(f"{_where(number, line)}: a symbols line is 'symbol id' with a non-negative integer id")
        name, ident = fields[0], int(fields[1])
        if ident in lines or name in seen:
            taken = "id" if ident in lines else "symbol"
            raise FormatError(f"{_where(number, line)}: duplicate {taken} in the symbol table")
        lines[ident] = number
        seen.add(name)
        if ident == SymbolTable.EPSILON_ID:
            epsilon = name
        else:
            symbols[ident] = name
    return symbols, epsilon, lines


def read_symbols(source: Any) -> SymbolTable:
    """A ``SymbolTable`` from OpenFst symbols text (``symbol id`` per line; id 0 names epsilon).

    ``source`` is the text, bytes, a path or a file object (see "Sources" in the module docstring).

    Note:
        kleene tables number symbols densely from 1, so the ids must be 1..n. Tables with
        gaps (e.g. byte-valued ids) can be passed as text straight to ``read_att(symbols=...)``,
        which keeps their ids.

    Raises:
        FormatError: a malformed line, a duplicate symbol or id, or ids with a gap (naming the line); a source
            of the wrong type.
    """
    symbols, epsilon, lines = _parse_symbols(_text_of(source, "source", "read_symbols"))
    table = SymbolTable(epsilon=epsilon)
    for expected, ident in enumerate(sorted(symbols), start=1):
        if ident != expected:
            raise FormatError(
                f"line {lines[ident]}: symbol id {ident} leaves a gap (expected {expected}); kleene symbol tables "
                "are dense from 1 - pass the text to read_att(symbols=...) to keep OpenFst's ids"
            )
        table.add(symbols[ident])
    return table


def _field_text(symbol: Hashable, what: str) -> str:
    text = str(symbol)
    if not text or any(c.isspace() for c in text):
        raise AlphabetError(f"{what} {symbol!r} cannot be written as an AT&T field (empty or containing whitespace)")
    return text


def write_symbols(table: SymbolTable, file: Any = None) -> str:
    """OpenFst symbols text for ``table``: its epsilon with id 0, then ``symbol<TAB>id`` lines.

    Also written to ``file`` (a path or a file object) when given.

    Raises:
        AlphabetError: a symbol whose text is empty or contains whitespace.
        FormatError: two distinct symbols that print the same (naming both), or an unwritable ``file``.
    """
    if not isinstance(table, SymbolTable):
        raise FormatError(f"write_symbols: table must be a SymbolTable; got {type(table).__name__}")
    _names_of([table.epsilon, *table])
    lines = [f"{_field_text(table.epsilon, 'epsilon name')}\t0"]
    lines += [f"{_field_text(s, 'symbol')}\t{table.id(s)}" for s in table]
    text = "\n".join(lines) + "\n"
    if file is not None:
        _write_to(file, text, "write_symbols")
    return text


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Line:
    number: int
    text: str
    fields: list[str]


def _arc_columns(
    lines: list[_Line],
    acceptor: bool | None,
    resolve: Callable[[str], Label],
    resolve_output: Callable[[str], Label],
    means_one: Callable[[str], bool],
) -> bool:
    """Decide the acceptor format (True) or transducer format (False) of the arc lines.

    Only four-field lines can be either ``src dst label weight`` or ``src dst ilabel olabel``;
    a file whose every four-field line fits both readings is ambiguous, unless both readings give
    the same automaton (every such weight field is the semiring one, e.g. ``0 0 0 0`` in min-plus).
    """
    if acceptor is not None:
        return acceptor
    widths = {len(line.fields) for line in lines if len(line.fields) >= 3}
    if 3 in widths and 5 in widths:
        first = next(line for line in lines if len(line.fields) == 5)
        raise FormatError(f"{_where(first.number, first.text)}: 5 fields, but other arc lines have 3 (acceptor)")
    if widths & {3, 5}:
        return 3 in widths

    def same_label(ilabel: str, olabel: str) -> bool:
        try:
            return resolve(ilabel) == resolve_output(olabel)
        except AlphabetError:
            return False

    fours = [line for line in lines if len(line.fields) == 4]
    weighted = {line.number: _parse_number(line.fields[3]) is not None for line in fours}
    relabelled = {line.number: same_label(line.fields[2], line.fields[3]) for line in fours}
    as_acceptor = [line for line in fours if weighted[line.number] and not relabelled[line.number]]
    as_transducer = [line for line in fours if relabelled[line.number] and not weighted[line.number]]
    if as_acceptor and as_transducer:
        line = max(as_acceptor[0], as_transducer[0], key=lambda line: line.number)
        raise FormatError(f"{_where(line.number, line.text)}: arc lines mix acceptor and transducer columns")
    if as_acceptor or as_transducer:
        return bool(as_acceptor)
    if fours and all(weighted.values()) and all(relabelled.values()):
        if all(means_one(line.fields[3]) for line in fours):
            return True  # "src dst x 1" and "src dst x:x" mean the same arc
        raise FormatError(
            f"{_where(fours[0].number, fours[0].text)}: ambiguous - an acceptor arc with weight "
            f"{fours[0].fields[3]} or a transducer arc with equal labels; pass acceptor=True or acceptor=False"
        )
    return True


def read_att(
    source: Any,
    semiring: str | Semiring = "min-plus",
    symbols: Any = None,
    *,
    isymbols: Any = None,
    osymbols: Any = None,
    acceptor: bool | None = None,
    arc_type: str | None = None,
    name: str | None = None,
) -> WFSA:
    """A ``WFSA`` from OpenFst AT&T text (see the module docstring for the exact meaning).

    Args:
        source: the AT&T text, bytes, a path or a file object (see "Sources" in the module
            docstring: a ``str`` without a line break that names an existing file is read from it).
        semiring: the kleene semiring of the result (default min-plus, OpenFst's tropical).
        symbols: a ``SymbolTable``, or OpenFst symbols text, bytes, a path or a file object;
            digit labels are its ids and other labels its names. The table (with OpenFst's ids
            renumbered densely, in id order) becomes the automaton's alphabet. Without one, digit
            labels are ints and other labels strings, and the alphabet is the file's symbols.
        isymbols: the same as ``symbols`` (pynini's name); give one of the two.
        osymbols: the table of the output column of transducer-format lines (default: the input
            table); each arc's input and output labels must name the same symbol.
        acceptor: whether arc lines have one label column (True) or two (False); None infers it
            from the field counts and raises when a file is ambiguous.
        arc_type: "tropical"/"standard" or "log" to read OpenFst weights of that arc type into
            ``semiring``; None reads numbers in ``semiring``'s own convention.
        name: the automaton's name.

    States are named by their ids in the file and indexed in increasing id order. A large file read in bulk keeps
    its arcs in the arc store (``WFSA.arcs`` is made on first use) and its final weights in a ``WeightVector`` (a
    dict of the final states read from one vector, shared with the arc store; a plain dict after its first change).

    Raises:
        FormatError: a malformed line or inconsistent labels, naming the 1-based line number; a
            source or table of the wrong type, or a file that cannot be read, naming the argument.
        WeightError: a weight outside the semiring, naming the line.
        AlphabetError: a label not in the symbol table, naming the line.
        SemiringError: an unknown arc type or one that does not map onto ``semiring``.
    """
    text = _text_of(source, "source", "read_att")
    try:
        return _read_att_text(text, semiring, symbols, isymbols, osymbols, acceptor, arc_type, name)
    except FormatError as exc:
        one_line = isinstance(source, str) and "\n" not in source and "\r" not in source
        if one_line and str(exc).startswith("line "):  # the text did not parse: say it named no file either
            raise FormatError(f"{exc} (and no file named {source!r} exists)") from None
        raise


def _read_att_text(
    text: str,
    semiring: str | Semiring,
    symbols: Any,
    isymbols: Any,
    osymbols: Any,
    acceptor: bool | None,
    arc_type: str | None,
    name: str | None,
) -> WFSA:
    semiring = get_semiring(semiring)
    codec = _codec(semiring, arc_type)
    if symbols is not None and isymbols is not None:
        raise FormatError("read_att: give the input symbol table as symbols or as isymbols, not both")
    symbols = isymbols if symbols is None else symbols
    table: _LabelTable | None = None
    alphabet: SymbolTable | None = None
    if symbols is not None:
        table, alphabet = _LabelTable.from_source(symbols, "symbols" if isymbols is None else "isymbols")
    output_table = table if osymbols is None else _LabelTable.from_source(osymbols, "osymbols")[0]

    def resolve(field: str) -> Label:
        return _resolve_without_table(field) if table is None else table.resolve(field)

    def resolve_output(field: str) -> Label:
        return _resolve_without_table(field) if output_table is None else output_table.resolve(field)

    def means_one(field: str) -> bool:
        number = _parse_number(field)
        try:
            return number is not None and bool(codec.decode(number) == semiring.one)
        except (ArithmeticError, ValueError):
            return False

    if len(text) >= _FAST_MIN_CHARS:
        fast = _read_att_native(text, semiring, codec, resolve, alphabet, acceptor, name)
        if fast is None:
            fast = _read_att_fast(text, semiring, codec, resolve, alphabet, acceptor, name)
        if fast is not None:
            return fast
    lines = [_Line(*numbered) for numbered in _numbered_lines(text)]
    one_label = _arc_columns(lines, acceptor, resolve, resolve_output, means_one)
    widths = {"arc": (3, 4) if one_label else (4, 5), "final": (1, 2)}
    for line in lines:
        width = len(line.fields)
        if width not in widths["arc"] + widths["final"]:
            layout = "src dst label [weight]" if one_label else "src dst ilabel olabel [weight]"
            raise FormatError(f"{_where(line.number, line.text)}: expected 'state [weight]' or '{layout}'")
        for field in line.fields[: 2 if width in widths["arc"] else 1]:
            if not _DIGITS.fullmatch(field):
                raise FormatError(f"{_where(line.number, line.text)}: state {field!r} is not a non-negative integer")
            try:
                _id_number(field, "state")
            except FormatError as exc:
                raise FormatError(f"{_where(line.number, line.text)}: {exc}") from None

    wfsa = WFSA(semiring, alphabet, name)
    ids = sorted({int(f) for line in lines for f in line.fields[: 2 if len(line.fields) in widths["arc"] else 1]})
    state_of = {ident: wfsa.add_state(str(ident)) for ident in ids}
    if lines:
        wfsa.set_initial(state_of[int(lines[0].fields[0])])

    def weight_of(line: _Line, field: str | None) -> Any:
        if field is None:
            return semiring.one
        number = _parse_number(field)
        if number is None:
            raise FormatError(f"{_where(line.number, line.text)}: weight {field!r} is not a number")
        where = _where(line.number, line.text)
        try:
            return semiring.check(codec.decode(number), where)
        except WeightError as exc:
            raise WeightError(f"{exc} (read from {field!r})") from None

    def label_of(line: _Line, field: str, output: bool = False) -> Label:
        try:
            return resolve_output(field) if output else resolve(field)
        except (AlphabetError, FormatError) as exc:
            raise type(exc)(f"{_where(line.number, line.text)}: {exc}") from None

    found: dict[Hashable, None] = {}  # the symbols of a file read without a table, in order

    for line in lines:
        f = line.fields
        if len(f) in widths["final"]:
            state = state_of[int(f[0])]
            weight = weight_of(line, f[1] if len(f) == 2 else None)
            if semiring.is_zero(weight):
                wfsa.final.pop(state, None)
            else:
                wfsa.set_final(state, weight)
            continue
        label = label_of(line, f[2])
        if isinstance(label, Sym):
            found[label.symbol] = None
        if not one_label and label_of(line, f[3], output=True) != label:
            raise FormatError(
                f"{_where(line.number, line.text)}: input label {f[2]!r} and output label {f[3]!r} differ; "
                "kleene reads acceptors only"
            )
        weight_field = f[3 if one_label else 4] if len(f) == widths["arc"][1] else None
        wfsa.add_arc(state_of[int(f[0])], state_of[int(f[1])], label, weight_of(line, weight_field))
    if alphabet is None:  # the file's own symbols: ints ascending, then strings
        wfsa.alphabet = SymbolTable(sorted(found, key=lambda s: (isinstance(s, str), s)))
    return wfsa


#: Files from this size on try the numpy fast path first.
_FAST_MIN_CHARS = 1 << 16
#: Whitespace other than spaces, tabs and newlines (``str.split`` would take it as a separator, OpenFst does not).
_OTHER_SPACE = re.compile(r"[^\S \t\n\r]|\r(?!\n)")


def _read_att_native(
    text: str, semiring: Semiring, codec: _WeightCodec, resolve: Callable[[str], Label], alphabet: SymbolTable | None,
    acceptor: bool | None, name: str | None,
) -> WFSA | None:
    """``read_att`` through the compiled scanner (``kleene.automata.native``): integer states and labels, decimal
    weights, acceptor columns, filled straight into the sparse arc store in CSR order (``WFSA.arcs`` is materialised
    on first use). None when the scanner is unavailable or the file needs the general reader (which then names any
    bad line): a field it does not read, a label outside the table, a weight outside the semiring or equal to its
    zero, a non-float semiring."""
    import numpy as np

    from . import native, sparse

    if acceptor is False or semiring.numpy_dtype is not np.float64:
        return None
    scanned = native.scan_att(text, ambiguous4=acceptor is None)
    if scanned is None:
        return None
    label = scanned.label
    top = int(label.max(initial=0))
    block = 1 << 16  # label arrays are indexed by blocks: numpy would copy a whole one as int64 indices
    if top <= 4 * len(label) + 1024:
        seen = np.zeros(top + 1, dtype=bool)
        for begin in range(0, len(label), block):
            seen[label[begin : begin + block]] = True
        values = np.flatnonzero(seen)
    else:
        values = np.unique(label)
    lut = np.full(int(values[-1]) + 1 if values.size else 1, sparse.EPSILON_ID, dtype=np.int32)
    symbols: list[Hashable] = []
    try:
        for value in values.tolist():
            lab = resolve(str(value))
            if isinstance(lab, Sym):
                lut[value] = len(symbols)
                symbols.append(lab.symbol)
    except (AlphabetError, FormatError):
        return None
    for begin in range(0, len(label), block):  # in place: "clip" (the ids are within lut) spares a buffered output
        part = label[begin : begin + block]
        np.take(lut, part, out=part, mode="clip")
    weights = scanned.weight
    with np.errstate(invalid="ignore", over="ignore"):
        decoded = [_decode_missing_one(semiring, codec, w) for w in (weights, scanned.final_weight)]
    if any(d is None for d in decoded):
        return None
    weights, final_weights = decoded
    try:
        for array in (weights, final_weights):
            for value in {*np.unique(array[~np.isfinite(array)]).tolist(), array.min(initial=0.0),
                          array.max(initial=0.0)}:
                semiring.check(value)
    except WeightError:
        return None
    if np.any(weights == semiring.zero):
        return None
    if alphabet is None:  # the file's own symbols, as the general reader closes the alphabet: ints, then strings
        alphabet = SymbolTable(sorted(symbols, key=lambda s: (isinstance(s, str), s)))
    names = IdNames(scanned.ids)
    final = _final_vector(semiring, len(names), scanned.final_state, final_weights)
    start, indptr, src, dst, arc_id = scanned.start, scanned.indptr, scanned.src, scanned.dst, scanned.arc_id
    del scanned, decoded, final_weights, array  # the final lines' arrays: freed before the arc store is made
    wfsa = WFSA(semiring, alphabet, name)
    wfsa._names, wfsa._index = names, IdIndex(names)
    wfsa._arcs = None
    wfsa.initial = {start: semiring.one}
    wfsa.final = final
    no_predicates = np.broadcast_to(np.int8(-1), label.shape)  # a read-only view: no byte per arc
    store = sparse.ArcStore(
        semiring, len(names), indptr, src, dst, label, weights, arc_id, symbols, {x: k for k, x in enumerate(symbols)},
        [], no_predicates, wfsa.vector(wfsa.initial), final.vector, wfsa._names,
    )
    sparse.cache_store(wfsa, store)
    return wfsa


def _final_vector(semiring: Semiring, n: int, states: Any, weights: Any) -> WeightVector:
    """The final weights of ``n`` states from the final lines' states and (decoded) weights in file order, as a
    ``WeightVector`` (no Python object per state): a state's last line wins; a zero weight makes it non-final."""
    import numpy as np

    if len(states) > 1 and len(np.unique(states)) < len(states):  # repeated states: keep each one's last line
        _, first_from_end = np.unique(states[::-1], return_index=True)
        last = len(states) - 1 - first_from_end
        states, weights = states[last], weights[last]
    vector = np.full(n, semiring.zero, dtype=np.float64)
    vector[states] = weights
    vector[vector == semiring.zero] = semiring.zero  # -0.0 in the real semiring: its zero
    return WeightVector(vector, semiring.zero)


def _decode_missing_one(semiring: Semiring, codec: _WeightCodec, numbers: Any) -> Any:
    """File numbers (NaN: no weight) as semiring values in place (a missing weight is the one); None when decoding
    makes a finite number infinite or NaN (the general reader then reports it)."""
    import numpy as np

    from .semiring import openfst_decode_array

    missing = np.isnan(numbers)
    finite = np.isfinite(numbers)
    decoded = openfst_decode_array(codec.decode, numbers)
    if np.any(~np.isfinite(decoded) & finite):
        return None
    if decoded is numbers:
        numbers[missing] = semiring.one
        return numbers
    decoded = np.asarray(decoded, dtype=np.float64)
    decoded[missing] = semiring.one
    return decoded


def _read_att_fast(
    text: str, semiring: Semiring, codec: _WeightCodec, resolve: Callable[[str], Label], alphabet: SymbolTable | None,
    acceptor: bool | None, name: str | None,
) -> WFSA | None:
    """``read_att`` for large acceptor files of decimal weights, parsed in bulk and filled straight into the sparse
    arc store (``WFSA.arcs`` is materialised on first use); None when the file needs the general reader (which then
    reads it, naming any bad line): transducer columns, an ambiguous 4-field line, a malformed field, a label
    outside the table, a weight outside the semiring or equal to its zero, a non-float semiring."""
    import numpy as np

    from . import sparse

    if acceptor is False or semiring.numpy_dtype is not np.float64 or _OTHER_SPACE.search(text):
        return None
    rows = [line.split() for line in text.split("\n")]
    rows = [r for r in rows if r]
    if not rows:
        return None
    arcs3 = [r for r in rows if len(r) == 3]
    arcs4 = [r for r in rows if len(r) == 4]
    finals = [r for r in rows if len(r) <= 2]
    if len(arcs3) + len(arcs4) + len(finals) != len(rows):
        return None
    labels: dict[str, Label] = {}
    try:
        for r in (*arcs3, *arcs4):
            if r[2] not in labels:
                labels[r[2]] = resolve(r[2])
    except (AlphabetError, FormatError):
        return None
    if acceptor is None:  # a 4-field line whose 4th field names its 3rd's label may be a transducer arc
        for ilabel, field in {(r[2], r[3]) for r in arcs4 if r[3] in labels or _DIGITS.fullmatch(r[3])}:
            try:
                if resolve(field) == labels[ilabel]:
                    return None  # the general reader decides the columns (or calls the file ambiguous)
            except (AlphabetError, FormatError):
                continue
    arc_rows = arcs3 + arcs4  # arc order is file order within each width: restore it below
    line_of = {id(r): i for i, r in enumerate(rows)}
    arc_rows.sort(key=lambda r: line_of[id(r)])
    fields = [f for r in arc_rows for f in r[:2]] + [r[0] for r in finals]
    joined = "".join(fields)
    if not (joined.isascii() and joined.isdigit()) or any(len(f) > 18 for f in fields):
        return None  # the general reader names the field (ids of 19 digits and more are checked there)
    numbers: dict[str, float | None] = {"nan": math.nan}  # the general reader's own number syntax (_parse_number)
    for r in (*arc_rows, *finals):
        if len(r) in (2, 4) and r[-1] not in numbers:
            numbers[r[-1]] = _parse_number(r[-1])
    if any(number is None or math.isnan(number) for text, number in numbers.items() if text != "nan"):
        return None
    ends = np.array([int(f) for f in fields], dtype=np.int64)
    weights = np.array([numbers[r[3] if len(r) == 4 else "nan"] for r in arc_rows], dtype=float)
    final_weights = np.array([numbers[r[1] if len(r) == 2 else "nan"] for r in finals], dtype=float)
    has_weight = np.array([len(r) == 4 for r in arc_rows], dtype=bool)
    if np.isnan(weights[has_weight]).any() or np.isnan(final_weights[[len(r) == 2 for r in finals]]).any():
        return None
    decode = np.frompyfunc(codec.decode, 1, 1)
    weights = np.where(has_weight, decode(np.where(has_weight, weights, 0.0)).astype(float), semiring.one)
    final_has = np.array([len(r) == 2 for r in finals], dtype=bool)
    final_weights = np.where(final_has, decode(np.where(final_has, final_weights, 0.0)).astype(float), semiring.one)
    try:
        for value in {*np.unique(weights[~np.isfinite(weights)]).tolist(), weights.min(initial=0.0),
                      weights.max(initial=0.0), *np.unique(final_weights[~np.isfinite(final_weights)]).tolist()}:
            semiring.check(value)
        if final_weights.size:
            semiring.check(final_weights.min())
            semiring.check(final_weights.max())
    except WeightError:
        return None
    if np.any(weights == semiring.zero):
        return None
    m = len(arc_rows)
    ids = np.unique(np.concatenate([ends, [int(rows[0][0])]]))
    src = np.searchsorted(ids, ends[0 : 2 * m : 2])
    dst = np.searchsorted(ids, ends[1 : 2 * m : 2])
    symbols: dict[Hashable, int] = {}
    label_id: dict[str, int] = {}
    for text_label, lab in labels.items():
        label_id[text_label] = symbols.setdefault(lab.symbol, len(symbols)) if isinstance(lab, Sym) else -1
    label = np.array([label_id[r[2]] for r in arc_rows], dtype=np.int64)
    if alphabet is None:  # the file's own symbols, as the general reader closes the alphabet: ints, then strings
        alphabet = SymbolTable(sorted(symbols, key=lambda s: (isinstance(s, str), s)))
    wfsa = WFSA(semiring, alphabet, name)
    wfsa._names = [str(i) for i in ids.tolist()]
    wfsa._index = {n: k for k, n in enumerate(wfsa._names)}
    wfsa._arcs = None
    wfsa.initial = {int(np.searchsorted(ids, int(rows[0][0]))): semiring.one}
    n = len(ids)
    wfsa.final = final = _final_vector(semiring, n, np.searchsorted(ids, ends[2 * m :]), final_weights)
    store = sparse.make_store(
        semiring, n, src, dst, label, weights, np.arange(m), list(symbols), [], np.full(m, -1, dtype=np.int64),
        wfsa.vector(wfsa.initial), final.vector, wfsa._names,
    )
    sparse.cache_store(wfsa, store)
    return wfsa


# -- writing -----------------------------------------------------------------------------------


def _numeric(wfsa: WFSA, weight: Any, symbol: Hashable | None, env: Env | None, where: str) -> Any:
    if is_symbolic(weight) and env is None:
        raise WeightError(f"{where}: weight {weight} is symbolic; pass env= to bind it before writing AT&T")
    return wfsa.numeric(weight, symbol, env, where)


def _arc_description(wfsa: WFSA, index: int) -> str:
    arc = wfsa.arcs[index]
    return f"arc {index} ({wfsa.state_name(arc.src)} -{arc.label}-> {wfsa.state_name(arc.dst)})"


def _label_writer(symbols: Any, epsilon: str) -> Callable[[Label, str], str]:
    """label, where -> label text: ids of ``symbols``, or symbol text (and ``epsilon``) without a table."""
    ids: dict[Hashable, int] | None = None
    if symbols is not None and not isinstance(symbols, SymbolTable):
        by_id, _, _ = _parse_symbols(_text_of(symbols, "symbols", "write_att"))
        ids = {symbol: ident for ident, symbol in by_id.items()}

    def write(label: Label, where: str) -> str:
        if not label.consumes:
            return "0" if symbols is not None else epsilon
        assert isinstance(label, Sym)
        if ids is not None:
            if label.symbol not in ids:
                raise AlphabetError(f"{where}: symbol {label.symbol!r} is not in the symbol table")
            return str(ids[label.symbol])
        if symbols is not None:
            try:
                return str(symbols.id(label.symbol))
            except AlphabetError as exc:
                raise AlphabetError(f"{where}: {exc}") from None
        text = _field_text(label.symbol, f"{where}: symbol")
        if text == epsilon or _resolve_without_table(text) == EPSILON:
            raise AlphabetError(f"{where}: symbol {text!r} would read back as epsilon; write with a symbol table")
        back = _resolve_without_table(text)
        assert isinstance(back, Sym)
        if back.symbol != label.symbol or isinstance(back.symbol, str) != isinstance(label.symbol, str):
            raise AlphabetError(
                f"{where}: symbol {label.symbol!r} would read back as {back.symbol!r} "
                "(without a table, digit labels are ints and others strings); write with a symbol table"
            )
        return text

    return write


def write_att(
    wfsa: WFSA,
    symbols: Any = None,
    arc_type: str | None = None,
    *,
    env: Env | None = None,
    acceptor: bool = True,
    show_weight_one: bool = False,
    file: Any = None,
) -> str:
    """OpenFst AT&T text for ``wfsa`` (``read_att`` reads it back to an equivalent automaton).

    Args:
        symbols: write labels as this table's ids (epsilon 0): a ``SymbolTable``, or OpenFst
            symbols text, bytes, a path or a file object; without one, labels are the
            symbols' text and epsilon is the alphabet's epsilon name (``<eps>`` without an
            alphabet), so the file loads in OpenFst with ``write_symbols(wfsa.alphabet)``;
            when every symbol is an int, epsilon is ``0`` and OpenFst needs no table.
        arc_type: "tropical"/"standard" or "log" to write OpenFst weights of that arc type
            (see the module docstring); None writes the semiring's own convention.
        env: binds symbolic weights (see ``kleene.automata.weights.evaluate``).
        acceptor: one label column (True) or OpenFst's transducer layout with equal labels.
        show_weight_one: also write weights equal to the semiring one.
        file: also write the text to this path (``str`` or ``os.PathLike``) or file object.

    Note:
        Several initial states, or an initial weight other than one, become a fresh start
        state with epsilon arcs carrying the initial weights. Predicate labels (``ANY``,
        ``OneOf``, ``NoneOf``) are expanded into one arc per symbol of the alphabet.

    Raises:
        AlphabetError: a predicate label with no alphabet, a symbol outside ``symbols``, a
            symbol that cannot be written as a field, or (without a table) one that would not read
            back as itself (naming the arc).
        FormatError: without a table, two distinct symbols that print the same (naming both);
            an unwritable ``file``.
        WeightError: a symbolic weight without ``env`` or a value with no file form (naming it).
    """
    if not isinstance(wfsa, WFSA):
        raise FormatError(f"write_att: wfsa must be a WFSA; got {type(wfsa).__name__}")
    semiring = wfsa.semiring
    codec = _codec(semiring, arc_type)
    mentioned = [*(wfsa.alphabet or ()), *(arc.label.symbol for arc in wfsa.arcs if isinstance(arc.label, Sym))]
    if symbols is None:  # labels are the symbols' text: distinct symbols must print differently
        _names_of(mentioned)
    if all(isinstance(x, int) and not isinstance(x, bool) for x in mentioned):
        epsilon = "0"  # OpenFst's own integer labels: the file loads without a symbol table
    else:
        epsilon = wfsa.alphabet.epsilon if wfsa.alphabet is not None else _EPSILON_SPELLINGS[0]
    label_text = _label_writer(symbols, epsilon)

    def weight_text(value: Any, where: str) -> str | None:
        try:
            number = codec.encode(value)
        except WeightError as exc:
            raise WeightError(f"{where}: {exc}") from None
        if not show_weight_one and number == codec.encode(semiring.one):
            return None
        return _format_number(number)

    def arc_line(src: int, dst: int, label: Label, weight: Any, where: str) -> str:
        text = label_text(label, where)
        fields = [str(src), str(dst), text] if acceptor else [str(src), str(dst), text, text]
        shown = weight_text(weight, where)
        if not acceptor and shown is None and _parse_number(text) is not None:
            shown = _format_number(codec.encode(weight))  # "s d 2 2" would also read as an acceptor arc
        ambiguous = shown is not None and _DIGITS.fullmatch(shown) and (shown == text or not label.consumes)
        if acceptor and ambiguous and (shown == text or int(str(shown)) == SymbolTable.EPSILON_ID):
            shown = repr(float(str(shown)))  # "s d 0 0" would also read as a transducer arc: write "0.0"
        return "\t".join(fields + ([shown] if shown is not None else []))

    arc_lines: list[tuple[int, str]] = []  # (source state, line)
    for index, arc in enumerate(wfsa.arcs):
        where = _arc_description(wfsa, index)
        try:
            consumed: list[Hashable | None] = arc.label.symbols(wfsa.alphabet) if arc.label.consumes else [None]
        except AlphabetError as exc:
            raise AlphabetError(f"{where}: {exc}") from None
        for symbol in consumed:
            label = EPSILON if symbol is None else Sym(symbol)
            weight = _numeric(wfsa, arc.weight, symbol, env, where)
            arc_lines.append((arc.src, arc_line(arc.src, arc.dst, label, weight, where)))

    initial = {
        q: _numeric(wfsa, w, None, env, f"initial weight of {wfsa.state_name(q)}") for q, w in wfsa.initial.items()
    }
    if len(initial) == 1 and next(iter(initial.values())) == semiring.one:
        start = next(iter(initial))
    else:
        start = wfsa.num_states
        entries = [
            (start, arc_line(start, q, EPSILON, w, f"initial weight of {wfsa.state_name(q)}"))
            for q, w in initial.items()
        ]
        arc_lines = entries + arc_lines

    final_lines: dict[int, str] = {}
    for q, w in wfsa.final.items():
        where = f"final weight of {wfsa.state_name(q)}"
        value = _numeric(wfsa, w, None, env, where)
        shown = weight_text(value, where)
        final_lines[q] = str(q) if shown is None else f"{q}\t{shown}"

    from_start = [line for src, line in arc_lines if src == start]
    others = [line for src, line in arc_lines if src != start]
    if from_start:
        first = from_start
    elif start in final_lines:
        first = [final_lines.pop(start)]
    else:  # a start state with no lines: a zero final weight names it without making it final
        first = [f"{start}\t{_format_number(codec.encode(semiring.zero))}"]
    body = first + others + [final_lines[q] for q in sorted(final_lines)]
    text = "".join(line + "\n" for line in body)
    if file is not None:
        _write_to(file, text, "write_att")
    return text


def listing(wfsa: WFSA) -> str:
    """The AT&T listing of ``wfsa`` (its ``str``): arc lines ``src dst label [weight]`` (start state first), then
    final lines.

    A numeric automaton is written by ``write_att`` (weights in its convention, e.g. ``-log p`` for log), except
    that predicate labels are shown as labels (``∀α``, ``{a,b}``, ``Σ∖{a}``), never expanded over the alphabet, and
    symbols that are not AT&T fields are shown quoted. A symbolic automaton is listed in the same layout with every
    weight as stored (semiring values and sympy expressions).
    """
    if not wfsa.is_symbolic:
        return write_att(_displayed(wfsa))
    return _symbolic_listing(wfsa)


def _displayed(wfsa: WFSA) -> WFSA:
    """A copy whose labels all have an AT&T text: predicates and awkward symbols become display symbols."""
    epsilon_names = {"0", "<eps>", "<epsilon>", wfsa.alphabet.epsilon if wfsa.alphabet is not None else ""}

    def field(text: str) -> str:  # whitespace would split the AT&T field
        return "".join(f"\\u{ord(c):04x}" if c.isspace() else c for c in text)

    def shown(label: Label) -> Label:
        if isinstance(label, Epsilon):
            return label
        if isinstance(label, Sym):
            text = str(label.symbol)
            fits = text and not any(c.isspace() for c in text) and text not in epsilon_names
            return label if fits else Sym(field(repr(text)))
        return Sym(field(str(label)))

    out = wfsa.copy()
    out.arcs = [replace(arc, label=shown(arc.label)) for arc in wfsa.arcs]
    return out


def _symbolic_listing(wfsa: WFSA) -> str:
    one = wfsa.semiring.one
    weights = list(wfsa.initial.values())
    if len(weights) == 1 and not is_symbolic(weights[0]) and weights[0] == one:
        start, lines = next(iter(wfsa.initial)), []
    else:  # as write_att: a fresh start state with epsilon arcs carrying the initial weights
        start = wfsa.num_states
        lines = [f"{start}\t{q}\t<eps>\t{w}" for q, w in wfsa.initial.items()]
    arcs = sorted(wfsa.arcs, key=lambda arc: arc.src != start)
    for arc in arcs:
        label = "<eps>" if not arc.label.consumes else str(arc.label)
        shown = "" if not is_symbolic(arc.weight) and arc.weight == one else f"\t{arc.weight}"
        lines.append(f"{arc.src}\t{arc.dst}\t{label}{shown}")
    for q in sorted(wfsa.final):
        w = wfsa.final[q]
        lines.append(str(q) if not is_symbolic(w) and w == one else f"{q}\t{w}")
    return "".join(line + "\n" for line in lines)

