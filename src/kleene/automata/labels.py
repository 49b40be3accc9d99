"""Arc labels and symbol tables.

An arc consumes one symbol (``Sym``), nothing (``EPSILON``), or any symbol that a
predicate over the alphabet accepts (``ANY``, ``OneOf``, ``NoneOf``): labels in
the sense of symbolic automata. Symbols are any hashable values, usually strings.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Union

from kleene.errors import AlphabetError


class Label(ABC):
    """Base class of arc labels."""

    consumes: bool = True

    @abstractmethod
    def matches(self, symbol: Hashable) -> bool:
        ...

    def symbols(self, alphabet: SymbolTable | None) -> list[Hashable]:
        """The symbols of ``alphabet`` this label accepts.

        Raises:
            AlphabetError: a predicate label with no alphabet to enumerate.
        """
        if alphabet is None:
            raise AlphabetError(f"label {self} needs an alphabet to enumerate its symbols")
        return [s for s in alphabet if self.matches(s)]


@dataclass(frozen=True)
class Sym(Label):
    """Consume exactly one given symbol."""

    symbol: Hashable

    def matches(self, symbol: Hashable) -> bool:
        return bool(symbol == self.symbol)

    def symbols(self, alphabet: SymbolTable | None) -> list[Hashable]:
        return [self.symbol]

    def __str__(self) -> str:
        return str(self.symbol)


@dataclass(frozen=True)
class Epsilon(Label):
    """Consume nothing."""

    consumes = False

    def matches(self, symbol: Hashable) -> bool:
        return False

    def symbols(self, alphabet: SymbolTable | None) -> list[Hashable]:
        return []

    def __str__(self) -> str:
        return "ε"


@dataclass(frozen=True)
class AnySymbol(Label):
    """Consume any symbol of the alphabet (drawn ``∀α``)."""

    def matches(self, symbol: Hashable) -> bool:
        return True

    def __str__(self) -> str:
        return "∀α"


@dataclass(frozen=True)
class _SymbolSet(Label):
    """A predicate label over a set of symbols (``OneOf``, ``NoneOf``), built from any iterable and held frozen."""

    members: frozenset[Hashable]

    def __init__(self, members: Iterable[Hashable]):
        object.__setattr__(self, "members", frozenset(members))

    def _braced(self) -> str:
        return "{" + ",".join(sorted(map(str, self.members))) + "}"


@dataclass(frozen=True, init=False)
class OneOf(_SymbolSet):
    """Consume any symbol of a given set."""

    def matches(self, symbol: Hashable) -> bool:
        return symbol in self.members

    def symbols(self, alphabet: SymbolTable | None) -> list[Hashable]:
        if alphabet is None:
            return sorted(self.members, key=str)
        return [s for s in alphabet if s in self.members]

    def __str__(self) -> str:
        return self._braced()


@dataclass(frozen=True, init=False)
class NoneOf(_SymbolSet):
    """Consume any symbol of the alphabet outside a given set (a complement)."""

    def matches(self, symbol: Hashable) -> bool:
        return symbol not in self.members

    def __str__(self) -> str:
        return "Σ∖" + self._braced()


EPSILON = Epsilon()
ANY = AnySymbol()

LabelLike = Union[Label, Hashable]


def as_label(label: LabelLike) -> Label:
    """A ``Label`` from a label or a bare symbol."""
    return label if isinstance(label, Label) else Sym(label)


class SymbolTable:
    """A bijection between symbols and integer ids; id 0 is epsilon, as in OpenFst."""

    EPSILON_ID = 0

    def __init__(self, symbols: Iterable[Hashable] = (), epsilon: str = "<eps>"):
        self.epsilon = epsilon
        self._symbols: list[Hashable] = []
        self._ids: dict[Hashable, int] = {}
        for s in symbols:
            self.add(s)

    def add(self, symbol: Hashable, id: int | None = None) -> int:
        """Add ``symbol`` (idempotent) and return its id."""
        if symbol in self._ids:
            return self._ids[symbol]
        if symbol == self.epsilon:
            raise AlphabetError(f"{symbol!r} is the epsilon symbol of this table and cannot be a symbol")
        new_id = len(self._symbols) + 1
        if id is not None and id != new_id:
            raise AlphabetError(f"symbol {symbol!r}: ids must be dense from 1; expected {new_id}, got {id}")
        self._symbols.append(symbol)
        self._ids[symbol] = new_id
        return new_id

    def id(self, symbol: Hashable) -> int:
        """The id of ``symbol``; raises ``AlphabetError`` naming it when absent."""
        try:
            return self._ids[symbol]
        except (KeyError, TypeError):
            raise AlphabetError(f"symbol {symbol!r} is not in the alphabet {self._preview()}") from None

    def symbol(self, id: int) -> Hashable:
        if id == self.EPSILON_ID:
            return self.epsilon
        if not 1 <= id <= len(self._symbols):
            raise AlphabetError(f"symbol id {id} is not in the table (ids 1..{len(self._symbols)})")
        return self._symbols[id - 1]

    def copy(self) -> SymbolTable:
        """A fresh table with the same symbols, ids and epsilon (so that a result never shares an operand's)."""
        return SymbolTable(self._symbols, epsilon=self.epsilon)

    def _preview(self) -> str:
        shown = ", ".join(map(repr, self._symbols[:8]))
        more = ", ..." if len(self._symbols) > 8 else ""
        return "{" + shown + more + "}"

    def __contains__(self, symbol: object) -> bool:
        try:
            return symbol in self._ids
        except TypeError:
            return False

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._symbols)

    def __len__(self) -> int:
        return len(self._symbols)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymbolTable) and self._symbols == other._symbols

    def __hash__(self) -> int:
        return hash(tuple(self._symbols))

    def __repr__(self) -> str:
        return f"SymbolTable({self._symbols!r})"


def label_of(members: Iterable[Hashable]) -> Label | None:
    """The simplest label accepting exactly ``members``: None (nothing), ``Sym`` or ``OneOf``."""
    unique = list(dict.fromkeys(members))
    if not unique:
        return None
    return Sym(unique[0]) if len(unique) == 1 else OneOf(unique)


def meet(x: Label, y: Label) -> Label | None:
    """The label accepting the symbols both consuming labels accept (None: no symbol).

    Raises:
        AlphabetError: a label type this function does not know how to intersect.
    """
    if isinstance(x, AnySymbol):
        return y
    if isinstance(y, AnySymbol):
        return x
    if isinstance(x, Sym):
        return x if y.matches(x.symbol) else None
    if isinstance(y, Sym):
        return y if x.matches(y.symbol) else None
    if isinstance(x, OneOf):
        return label_of(s for s in sorted(x.members, key=str) if y.matches(s))
    if isinstance(y, OneOf):
        return label_of(s for s in sorted(y.members, key=str) if x.matches(s))
    if isinstance(x, NoneOf) and isinstance(y, NoneOf):
        return NoneOf(x.members | y.members)
    kinds = f"{type(x).__name__} and {type(y).__name__}"
    raise AlphabetError(f"intersect: cannot intersect labels {x} and {y} ({kinds})")
