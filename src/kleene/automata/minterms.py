"""Minterms of predicate labels: the coarsest partition of the alphabet that every label respects.

Determinize and minimize treat a group of symbols that no label tells apart as one letter, so that an automaton
with wildcard arcs (``ANY``, ``NoneOf``) over a 20k-word vocabulary is never expanded symbol by symbol. The
symbols the labels name explicitly ("mentioned" symbols) are grouped by which labels accept them; every symbol
nobody names behaves alike (only ``ANY``/``NoneOf`` labels accept it) and forms one more minterm, written
``NoneOf(mentioned)``. Work is proportional to the total size of the labels, never to the alphabet.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from kleene.errors import AlphabetError

from .labels import ANY, AnySymbol, Label, NoneOf, OneOf, Sym, SymbolTable


@dataclass(frozen=True)
class Minterms:
    """A partition of the symbols some labels can read.

    ``groups[i]`` are the mentioned symbols of minterm ``i`` (empty for the minterm of unmentioned symbols, which
    is ``other`` when it exists); ``covers[j]`` lists the minterms inside label ``j`` of the input.
    """

    groups: list[tuple[Hashable, ...]]
    other: int | None
    mentioned: frozenset[Hashable]
    covers: list[list[int]]

    def __len__(self) -> int:
        return len(self.groups)

    def label(self, i: int) -> Label:
        """The label that accepts exactly minterm ``i``."""
        return self.union([i])

    def union(self, indices: Iterable[int]) -> Label:
        """The simplest label accepting exactly the union of the minterms ``indices`` (one at least)."""
        chosen = set(indices)
        if self.other in chosen:
            inside = {s for i in chosen for s in self.groups[i]}
            outside = self.mentioned - inside
            return NoneOf(outside) if outside else ANY
        symbols = [s for i in sorted(chosen) for s in self.groups[i]]
        if not symbols:
            raise AlphabetError("a union of no minterm has no label")
        return Sym(symbols[0]) if len(symbols) == 1 else OneOf(symbols)

    def size(self, i: int, alphabet: SymbolTable | None) -> int | None:
        """How many symbols minterm ``i`` holds (None: the unmentioned symbols of an automaton without alphabet)."""
        if i != self.other:
            return len(self.groups[i])
        if alphabet is None:
            return None
        return len(alphabet) - sum(1 for s in self.mentioned if s in alphabet)


def _members(label: Label) -> Sequence[Hashable]:
    if isinstance(label, Sym):
        return [label.symbol]
    if isinstance(label, (OneOf, NoneOf)):
        return sorted(label.members, key=str)
    if isinstance(label, AnySymbol):
        return []
    raise AlphabetError(f"minterms: label {label} ({type(label).__name__}) is neither a symbol nor a known predicate")


def minterms(labels: Sequence[Label], alphabet: SymbolTable | None) -> Minterms:
    """The minterms of consuming ``labels`` over ``alphabet`` (None: an open alphabet), empty minterms dropped.

    Raises:
        AlphabetError: an epsilon label, or a label type that is neither ``Sym`` nor a known predicate.
    """
    positive: dict[Hashable, list[int]] = {}  # symbol -> the Sym/OneOf labels naming it
    excluded: dict[Hashable, list[int]] = {}  # symbol -> the NoneOf labels excluding it
    complements: list[int] = []  # the ANY/NoneOf labels: they accept every unmentioned symbol
    for j, label in enumerate(labels):
        if not label.consumes:
            raise AlphabetError(f"minterms: label {j} is epsilon, which reads no symbol")
        is_complement = isinstance(label, (AnySymbol, NoneOf))
        if is_complement:
            complements.append(j)
        for symbol in _members(label):
            if alphabet is not None and symbol not in alphabet:
                continue
            (excluded if is_complement else positive).setdefault(symbol, []).append(j)
            (positive if is_complement else excluded).setdefault(symbol, [])
    groups: list[tuple[Hashable, ...]] = []
    accepting: list[list[int]] = []
    by_signature: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    members: list[list[Hashable]] = []
    for symbol, named in positive.items():
        signature = (tuple(sorted(set(named))), tuple(sorted(set(excluded[symbol]))))
        if signature not in by_signature:
            outside = set(signature[1])
            accepted = sorted(set(named) | {j for j in complements if j not in outside})
            if not accepted:
                continue
            by_signature[signature] = len(members)
            members.append([])
            accepting.append(accepted)
        members[by_signature[signature]].append(symbol)
    groups = [tuple(m) for m in members]
    mentioned = frozenset(positive)
    other: int | None = None
    if complements and (alphabet is None or len(alphabet) > len(mentioned)):
        other = len(groups)
        groups.append(())
        accepting.append(list(complements))
    covers: list[list[int]] = [[] for _ in labels]
    for i, accepted in enumerate(accepting):
        for j in accepted:
            covers[j].append(i)
    return Minterms(groups, other, mentioned, covers)
