"""Rational operations: union, concatenation, Kleene star and plus, intersection,
epsilon removal, trimming and reversal; ``bind`` turns symbolic weights into numbers.

Every operation is a free function that returns a new automaton and never
mutates its operands. Each is written once against the ``Semiring`` interface
and works with constant and symbolic weights alike (symbolic weights combine
with ``sym_times``/``sym_plus``). State names stay readable: binary operations
prefix them with the operand (``a.q0``, ``b.q0``), ``intersect`` pairs them
(``(q0,q1)``), unary operations keep them.

Constant automata whose labels are symbols (no predicate) are united, concatenated, closed and (from
``ARRAY_INTERSECT_MIN_ARCS`` arcs) intersected on their arc stores, in arrays: the result holds its arcs in its own
store (``WFSA.arcs`` lists them on first use), with the same states, names, arcs and weights as the Arc-object
version (``intersect`` numbers its pairs level by level). Symbolic weights and predicate labels take the
Arc-object versions.

Alphabets: a predicate label (``ANY``, ``NoneOf``) ranges over its own
automaton's alphabet. When ``union``/``concat`` merge two different alphabets,
predicates are rewritten as ``OneOf`` sets so that they keep their meaning;
``intersect`` works over the common alphabet.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np

from kleene.automata.algorithms import useful_mask
from kleene.automata.binding import bind as bind  # re-exported: kleene.automata.bind
from kleene.automata.closure import check_epsilon_cap, epsilon_closure_rows
from kleene.automata.labels import EPSILON, AnySymbol, Label, NoneOf, OneOf, Sym, SymbolTable
from kleene.automata.labels import label_of as _label_of
from kleene.automata.labels import meet as _meet
from kleene.automata.semiring import Semiring, sympy_constant
from kleene.automata.sparse import (
    EPSILON_ID,
    ArcStore,
    arc_store,
    make_store,
    remove_epsilon_store,
    store_backed,
)
from kleene.automata.weights import Env, Weight, is_symbolic
from kleene.automata.wfsa import WFSA, Arc, IdNames, LazyNames, WeightVector
from kleene.errors import AlphabetError, SemiringError

Node = TypeVar("Node", bound=Hashable)

# ----------------------------------------------------------------------------------------
# Weights: constants through the semiring's operations, sympy through its symbolic ones


def _times(semiring: Semiring, *weights: Weight) -> Weight:
    """The semiring product of constant or symbolic weights (constant ones dropped from symbolic products)."""
    return _fold(weights, semiring.one, semiring.times, semiring.sym_times)


def _plus(semiring: Semiring, *weights: Weight) -> Weight:
    """The semiring sum of constant or symbolic weights (constant zeros dropped from symbolic sums)."""
    return _fold(weights, semiring.zero, semiring.plus, semiring.sym_plus)


def _fold(
    weights: tuple[Weight, ...], neutral: Weight, combine: Callable[[Any, Any], Any], sym_combine: Callable[..., Any]
) -> Weight:
    """``weights`` combined left to right from ``neutral`` by ``combine``; when one is symbolic, one sympy node
    ``sym_combine`` of the symbolic ones and the constants other than ``neutral``."""
    if any(is_symbolic(w) for w in weights):
        return sym_combine(*(sympy_constant(w) for w in weights if is_symbolic(w) or w != neutral))
    out: Weight = neutral
    for w in weights:
        out = combine(out, w)
    return out


def _is_zero(semiring: Semiring, weight: Weight) -> bool:
    """Whether ``weight`` is the constant zero (symbolic weights never count as zero)."""
    return not is_symbolic(weight) and semiring.is_zero(weight)


# ----------------------------------------------------------------------------------------
# Operands: semirings, alphabets, labels


def _same_semiring(a: WFSA, b: WFSA, operation: str) -> Semiring:
    """The operands' common semiring.

    Raises:
        SemiringError: the operands are over different semirings.
    """
    if a.semiring is not b.semiring:
        raise SemiringError(
            f"{operation}: the operands are over different semirings ({a.semiring.name} and {b.semiring.name}); "
            "build both over the same one"
        )
    return a.semiring


def _copy_table(table: SymbolTable | None) -> SymbolTable | None:
    """A fresh table, so that a result never shares a mutable alphabet with an operand."""
    return None if table is None else SymbolTable(table, epsilon=table.epsilon)


def _mentioned_symbols(wfsa: WFSA) -> list[Hashable]:
    """The alphabet, or when there is none the symbols its labels name (first use first)."""
    if wfsa.alphabet is not None:
        return list(wfsa.alphabet)
    store = _plain_store(wfsa)
    if store is not None:  # no Arc objects needed
        return list(store.symbols)
    found: dict[Hashable, None] = {}
    for arc in wfsa.arcs:
        if isinstance(arc.label, Sym):
            found.setdefault(arc.label.symbol)
        elif isinstance(arc.label, OneOf):
            for symbol in sorted(arc.label.members, key=str):
                found.setdefault(symbol)
    return list(found)


def merged_alphabet(a: WFSA, b: WFSA, operation: str, *more: WFSA) -> SymbolTable | None:
    """The union of the operands' alphabets (``a``'s ids first, then ``b``'s, then ``more``'s), or None when none
    has one.

    Raises:
        AlphabetError: a symbol of one operand is the epsilon marker of another's table.
    """
    operands = [a, b, *more]
    tables = [w.alphabet for w in operands if w.alphabet is not None]
    if not tables:
        return None
    merged = SymbolTable(epsilon=tables[0].epsilon)
    for k, operand in enumerate(operands):
        side = {0: "first", 1: "second"}.get(k, f"operand {k + 1}")
        for symbol in _mentioned_symbols(operand):
            try:
                merged.add(symbol)
            except AlphabetError as exc:
                raise AlphabetError(
                    f"{operation}: cannot merge the alphabet of the {side} operand into a common one: {exc}"
                ) from None
    return merged


def _common_alphabet(a: WFSA, b: WFSA) -> SymbolTable | None:
    """The symbols both operands can read (``a``'s order), or None when neither has an alphabet."""
    if a.alphabet is None or b.alphabet is None:
        return _copy_table(a.alphabet if b.alphabet is None else b.alphabet)
    theirs = b.alphabet
    return SymbolTable((s for s in a.alphabet if s in theirs), epsilon=a.alphabet.epsilon)


def _restrict(label: Label, alphabet: SymbolTable | None) -> Label | None:
    """``label`` limited to ``alphabet``: None when it then accepts no symbol."""
    if not label.consumes or alphabet is None:
        return label
    if isinstance(label, Sym):
        return label if label.symbol in alphabet else None
    if isinstance(label, (AnySymbol, NoneOf)):
        return label if any(label.matches(s) for s in alphabet) else None
    return _label_of(s for s in alphabet if label.matches(s))


def _confine(label: Label, own: SymbolTable) -> Label | None:
    """A predicate of an automaton over ``own`` as the ``OneOf`` set it accepts there.

    Used when a merged alphabet adds symbols ``own`` lacks, which ``ANY`` or
    ``NoneOf`` would otherwise start to accept.
    """
    if not label.consumes or isinstance(label, Sym):
        return label
    return _label_of(s for s in own if label.matches(s))


def _combined_name(template: str, *operands: WFSA) -> str | None:
    names = [w.name for w in operands]
    return template.format(*names) if all(names) else None


# ----------------------------------------------------------------------------------------
# Building results


def _fresh_name(base: str, taken: Collection[str]) -> str:
    """``base``, primed until it differs from every name in ``taken``."""
    name = base
    while name in taken:
        name += "'"
    return name


def _embed(operand: WFSA, out: WFSA, prefix: str = "") -> int:
    """Copy ``operand``'s states (names prefixed) and arcs into ``out``; return the index offset.

    Predicates are confined to the operand's alphabet when ``out``'s is larger
    (see ``_confine``); zero-weight arcs are dropped; initial and final weights are
    left to the caller.
    """
    own, target = operand.alphabet, out.alphabet
    widened = own is not None and target is not None and any(s not in own for s in target)
    offset = out.num_states
    for name in operand.states:
        out.add_state(prefix + name)
    for arc in operand.arcs:
        label = _confine(arc.label, own) if widened and own is not None else arc.label
        if label is not None and not _is_zero(out.semiring, arc.weight):
            out.add_arc(arc.src + offset, arc.dst + offset, label, arc.weight)
    return offset


def _set_weights(out: WFSA, weights: dict[int, Weight], offset: int, final: bool) -> None:
    setter = out.set_final if final else out.set_initial
    for q, w in weights.items():
        setter(q + offset, w)


# ----------------------------------------------------------------------------------------
# The operations on the arc store: constant weights, symbol labels, arrays (no Arc objects)


#: Arcs as arrays (src, dst, weight).
_ArcArrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def _plain_store(wfsa: WFSA) -> ArcStore | None:
    """``wfsa``'s arc store when its weights are constant and no label is a predicate; else None."""
    store = arc_store(wfsa)
    return None if store is None or store.predicates else store


def _array_operands(*operands: WFSA) -> list[ArcStore] | None:
    """The operands' arc stores when the array versions run (every operand has constant weights and symbol labels
    only); else None."""
    stores = [_plain_store(w) for w in operands]
    return None if any(st is None for st in stores) else [st for st in stores if st is not None]


#: ``intersect`` runs on the arc store when the operands have this many arcs together (or one holds its arcs in its
#: store only); below, the Arc-object version is faster (measured: operands of 10 states and 20 arcs, 0.45 ms
#: against 2 ms per intersection).
ARRAY_INTERSECT_MIN_ARCS = 256


def _large(a: WFSA, b: WFSA, threshold: int) -> bool:
    """Whether ``a`` and ``b`` have ``threshold`` arcs together or one holds its arcs in its arc store only."""
    return a.num_arcs + b.num_arcs >= threshold or a._arcs is None or b._arcs is None


def _arc_rank(store: ArcStore) -> np.ndarray:
    """Per stored arc, its rank in the automaton's arc order (0..m-1; ``arc_id`` has gaps where zero arcs were)."""
    ids = store.arc_id
    if not len(ids) or int(ids.max()) == len(ids) - 1:
        return ids
    rank = np.empty(len(ids), dtype=np.int64)
    rank[np.argsort(ids, kind="stable")] = np.arange(len(ids))
    return rank


def _spans_of(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenated ranges ``[starts[i], starts[i] + lengths[i])`` (positions, in order)."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total, dtype=np.int64)


def _states_with_weight(s: Semiring, vector: np.ndarray) -> np.ndarray:
    return np.flatnonzero(vector != s.zero)


class _JoinedNames(LazyNames):
    """The state names of several operands one after another, each prefixed (``a.q0``), made on demand."""

    def __init__(self, parts: list[tuple[str, Sequence[str]]]):
        self.parts = parts
        self.ends = np.cumsum([len(names) for _, names in parts])

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        k = int(index) + len(self) if int(index) < 0 else int(index)
        if not 0 <= k < len(self):
            raise IndexError(index)
        part = int(np.searchsorted(self.ends, k, side="right"))
        prefix, names = self.parts[part]
        return prefix + names[k - (int(self.ends[part - 1]) if part else 0)]

    def __iter__(self) -> Iterator[str]:
        for prefix, names in self.parts:
            yield from (prefix + name for name in names)


class _PairNames(LazyNames):
    """The names ``(p,q)`` of ``intersect``'s states (``(p,q)ε`` once ``b`` has begun its epsilon run), on demand.

    Caution:
        Distinct only when no operand's state name holds ``,``, ``(`` or ``)`` (``_pair_names`` checks).
    """

    def __init__(self, first: Sequence[str], second: Sequence[str], p: np.ndarray, q: np.ndarray, moved: np.ndarray):
        self.first, self.second, self.p, self.q, self.moved = first, second, p, q, moved

    def __len__(self) -> int:
        return len(self.p)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        k = int(index)
        return f"({self.first[int(self.p[k])]},{self.second[int(self.q[k])]})" + ("ε" if self.moved[k] else "")

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))


def _pair_names(a: WFSA, b: WFSA, p: np.ndarray, q: np.ndarray, moved: np.ndarray) -> Sequence[str]:
    """``intersect``'s state names: lazy when they are sure to be distinct, else made now (primed where equal)."""
    lazy = _PairNames(a._names, b._names, p, q, moved)
    plain = all(isinstance(w._names, IdNames) or not any(c in name for name in w._names for c in ",()") for w in (a, b))
    if plain:
        return lazy
    taken: set[str] = set()
    names = []
    for name in lazy:
        name = _fresh_name(name, taken)
        taken.add(name)
        names.append(name)
    return names


def _weights(s: Semiring, vector: np.ndarray) -> WeightVector:
    return WeightVector(np.array(vector, dtype=s.numpy_dtype), s.zero)


def _add_symbols(symbols: list[Hashable], ids: dict[Hashable, int], theirs: ArcStore) -> np.ndarray:
    """Append ``theirs``'s symbols missing from ``symbols`` (``ids`` their index, both updated in place) and return
    the new id of each of ``theirs``'s symbol ids."""
    lookup = np.empty(len(theirs.symbols), dtype=np.int64)
    for k, x in enumerate(theirs.symbols):
        if x not in ids:
            ids[x] = len(symbols)
            symbols.append(x)
        lookup[k] = ids[x]
    return lookup


def _symbol_map(ours: ArcStore, theirs: ArcStore) -> tuple[list[Hashable], np.ndarray]:
    """A symbol list holding ``ours``'s symbols (same ids) and then ``theirs``'s others, and the new id of each of
    ``theirs``'s symbol ids."""
    symbols = list(ours.symbols)
    return symbols, _add_symbols(symbols, dict(ours.symbol_ids), theirs)


def _relabelled(store: ArcStore, lookup: np.ndarray) -> np.ndarray:
    """``store``'s label ids through ``lookup`` (epsilon stays epsilon)."""
    label = store.label
    if not len(lookup):
        return label.copy()
    return np.where(label >= 0, lookup[np.maximum(label, 0)], label)


def _sorted_store(s: Semiring, n: int, parts: list[ArcStore], offsets: list[int], labels: list[np.ndarray],
                  extra: _ArcArrays, symbols: list[Hashable], initial: np.ndarray, final: np.ndarray) -> ArcStore:
    """One store holding the arcs of the stores ``parts`` (states shifted by ``offsets``, labels ``labels``), one
    after another in arc order, and the epsilon arcs ``extra`` (after them in arc order), without a sort: the
    parts' arcs are sorted by source already and the extra ones are inserted after their source's arcs."""
    indptr = np.zeros(n + 1, dtype=np.int64)
    src, dst, arc_id, at, before = [], [], [], 0, 0
    for part, offset in zip(parts, offsets):
        indptr[offset + 1 : offset + part.num_states + 1] = part.indptr[1:] + at
        src.append(part.src + offset)
        dst.append(part.dst + offset)
        arc_id.append(_arc_rank(part) + before)
        at += part.num_arcs
        before += part.num_arcs
    covered = offsets[-1] + parts[-1].num_states
    indptr[covered + 1 :] = at
    out = [np.concatenate(src), np.concatenate(dst), np.concatenate(labels), np.concatenate([p.weight for p in parts]),
           np.concatenate(arc_id)]
    e_src, e_dst, e_weight = extra
    if len(e_src):
        order = np.argsort(e_src, kind="stable")
        e_src, e_dst, e_weight = e_src[order], e_dst[order], e_weight[order]
        where = indptr[e_src + 1]  # after the arcs their source has
        new = [e_src, e_dst, np.full(len(e_src), EPSILON_ID, dtype=np.int64), e_weight,
               at + order]
        out = [np.insert(column, where, values) for column, values in zip(out, new)]
        indptr += np.searchsorted(e_src, np.arange(-1, n), side="right")
    no_predicates = np.broadcast_to(np.int64(-1), (len(out[0]),))  # a read-only view: no memory per arc
    ids = {x: k for k, x in enumerate(symbols)}
    return ArcStore(s, n, indptr, out[0], out[1], out[2], out[3], out[4], symbols, ids, [], no_predicates, initial,
                    final, [])


def _side_by_side(a: WFSA, b: WFSA, sa: ArcStore, sb: ArcStore, alphabet: SymbolTable | None, name: str | None,
                  extra: _ArcArrays, initial: np.ndarray, final: np.ndarray) -> WFSA:
    """``a``'s and ``b``'s arcs in one store (``b``'s states after ``a``'s, names ``a.*`` and ``b.*``) plus the epsilon
    arcs ``extra`` = (src, dst, weight) over the joint numbering; the joint initial and final vectors."""
    s = a.semiring
    symbols, lookup = _symbol_map(sa, sb)
    store = _sorted_store(s, sa.num_states + sb.num_states, [sa, sb], [0, sa.num_states],
                          [sa.label, _relabelled(sb, lookup)], extra, symbols, initial, final)
    names = _JoinedNames([("a.", a._names), ("b.", b._names)])
    return store_backed(s, alphabet, name, names, store, _weights(s, initial), _weights(s, final))


def _joins(s: Semiring, final: np.ndarray, initial: np.ndarray, offset: int) -> _ArcArrays:
    """Epsilon arcs (src, dst, weight) from every final state to every initial state (+ ``offset``), ``rho ⊗ lambda``;
    zero products left out."""
    f, i = _states_with_weight(s, final), _states_with_weight(s, initial)
    src, dst = np.repeat(f, len(i)), np.tile(i, len(f))
    weight = s.times(np.repeat(final[f], len(i)), np.tile(initial[i], len(f)))
    live = weight != s.zero
    return src[live], dst[live] + offset, weight[live]


def _union_store(operands: list[WFSA], stores: list[ArcStore], alphabet: SymbolTable | None) -> WFSA:
    """``union`` of two or more automata on their arc stores: their states one after another, named as the fold
    ``union(union(a, b), c)`` names them (``a.a.q0``, ``a.b.q0``, ``b.q0``)."""
    s = operands[0].semiring
    symbols, ids = list(stores[0].symbols), dict(stores[0].symbol_ids)
    labels = [stores[0].label]
    for store in stores[1:]:
        labels.append(_relabelled(store, _add_symbols(symbols, ids, store)))
    offsets = np.concatenate([[0], np.cumsum([st.num_states for st in stores])]).tolist()
    none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), s.zeros((0,)))
    initial = np.concatenate([st.initial for st in stores])
    final = np.concatenate([st.final for st in stores])
    store = _sorted_store(s, offsets[-1], stores, offsets[:-1], labels, none, symbols, initial, final)
    k = len(operands)
    prefixes = ["a." * (k - 1)] + ["a." * (k - 1 - i) + "b." for i in range(1, k)]
    names = _JoinedNames([(prefix, w._names) for prefix, w in zip(prefixes, operands)])
    name = operands[0].name
    for w in operands[1:]:
        name = None if name is None or w.name is None else f"({name} ∪ {w.name})"
    return store_backed(s, alphabet, name, names, store, _weights(s, initial), _weights(s, final))


def _concat_store(a: WFSA, b: WFSA, sa: ArcStore, sb: ArcStore, alphabet: SymbolTable | None) -> WFSA:
    s = a.semiring
    joins = _joins(s, sa.final, sb.initial, sa.num_states)
    return _side_by_side(a, b, sa, sb, alphabet, _combined_name("({} · {})", a, b), joins,
                         np.concatenate([sa.initial, s.zeros((sb.num_states,))]),
                         np.concatenate([s.zeros((sa.num_states,)), sb.final]))


def _plus_store(a: WFSA, sa: ArcStore, star: bool) -> WFSA:
    """``kleene_plus`` (``star``: ``kleene_star``, with the extra state last) on the arc store."""
    s = a.semiring
    joins = _joins(s, sa.final, sa.initial, 0)
    initial, final = sa.initial, sa.final
    if star:
        initial = np.concatenate([initial, np.full(1, s.one, dtype=s.numpy_dtype)])
        final = np.concatenate([final, np.full(1, s.one, dtype=s.numpy_dtype)])
    store = _sorted_store(s, sa.num_states + star, [sa], [0], [sa.label], joins, list(sa.symbols), initial, final)
    names: Sequence[str] = a._names
    if star:
        names = _JoinedNames([("", a._names), ("", [_fresh_name("star", _StateNames(a))])])
    name = _combined_name("({})*" if star else "({})+", a)
    return store_backed(s, _copy_table(a.alphabet), name, names, store, _weights(s, initial), _weights(s, final))


class _StateNames(Collection[str]):
    """``a``'s state names as a collection for membership tests (through its index: no list of names made)."""

    def __init__(self, a: WFSA):
        self.a = a

    def __contains__(self, name: object) -> bool:
        return name in self.a._index

    def __iter__(self) -> Iterator[str]:
        return iter(self.a._names)

    def __len__(self) -> int:
        return self.a.num_states


class _PairIds:
    """Ids of the product states ``(p, q, moved)``, numbered in order of discovery: a dense table when the key space
    is small enough, else a dict."""

    DENSE_UP_TO = 1 << 25

    def __init__(self, na: int, nb: int):
        self.nb = nb
        self.size = 0
        space = 2 * na * nb
        self.table: np.ndarray | None = np.full(space, -1, dtype=np.int64) if space <= self.DENSE_UP_TO else None
        self.ids: dict[int, int] = {}

    def key(self, p: np.ndarray, q: np.ndarray, moved: np.ndarray) -> np.ndarray:
        out: np.ndarray = (p * self.nb + q) * 2 + moved
        return out

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The id of each key (new keys numbered in order of first appearance) and the new keys (in id order)."""
        if self.table is not None:
            ids = self.table[keys]
            unseen = keys[ids < 0]
        else:
            ids = np.fromiter((self.ids.get(k, -1) for k in keys.tolist()), dtype=np.int64, count=len(keys))
            unseen = keys[ids < 0]
        if len(unseen):
            distinct, first = np.unique(unseen, return_index=True)
            fresh = distinct[np.argsort(first, kind="stable")]
            numbers = np.arange(self.size, self.size + len(fresh), dtype=np.int64)
            self.size += len(fresh)
            if self.table is not None:
                self.table[fresh] = numbers
                ids = self.table[keys]
            else:
                self.ids.update(zip(fresh.tolist(), numbers.tolist()))
                ids = np.fromiter((self.ids[k] for k in keys.tolist()), dtype=np.int64, count=len(keys))
            return ids, fresh
        return ids, unseen


class _LabelIndex:
    """One operand's arcs for the product: consuming arcs sorted by (source, label) with a CSR pointer by source and
    the sorted keys ``source * width + label`` for label lookups; epsilon arcs with their own CSR pointer."""

    def __init__(self, store: ArcStore, label: np.ndarray, width: int):
        n = store.num_states
        consuming = np.flatnonzero(label >= 0)
        order = np.lexsort((label[consuming], store.src[consuming]))
        self.c_src, self.c_label = store.src[consuming][order], label[consuming][order]
        self.c_dst, self.c_weight = store.dst[consuming][order], store.weight[consuming][order]
        self.c_indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.c_src, minlength=n), out=self.c_indptr[1:])
        self.width = width
        self.c_key = self.c_src * width + self.c_label
        eps = np.flatnonzero(label == EPSILON_ID)  # stored arcs are sorted by source already
        self.e_dst, self.e_weight = store.dst[eps], store.weight[eps]
        self.e_indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(store.src[eps], minlength=n), out=self.e_indptr[1:])
        self.mean_degree = len(consuming) / max(n, 1)

    def out(self, states: np.ndarray, epsilon: bool) -> tuple[np.ndarray, np.ndarray]:
        """(owner, position): the consuming (``epsilon``: epsilon) arcs leaving ``states[owner]``."""
        indptr = self.e_indptr if epsilon else self.c_indptr
        starts = indptr[states]
        lengths = indptr[states + 1] - starts
        return np.repeat(np.arange(len(states), dtype=np.int64), lengths), _spans_of(starts, lengths)

    def find(self, states: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(owner, position): the consuming arcs leaving ``states[i]`` with label ``labels[i]``."""
        keys = states * self.width + labels
        lo = np.searchsorted(self.c_key, keys, side="left")
        hi = np.searchsorted(self.c_key, keys, side="right")
        return np.repeat(np.arange(len(keys), dtype=np.int64), hi - lo), _spans_of(lo, hi - lo)


def _intersect_store(a: WFSA, b: WFSA, sa: ArcStore, sb: ArcStore, alphabet: SymbolTable | None) -> WFSA:
    """``intersect`` on the arc stores: a breadth-first search over the reachable pairs, one level at a time in
    arrays (the same pairs, epsilon filter, labels and weights as the Arc-object version)."""
    s = a.semiring
    _, lookup = _symbol_map(sa, sb)
    own = len(sa.symbols)
    label_b = _relabelled(sb, lookup)
    label_b = np.where(label_b >= own, -3, label_b)  # symbols a never reads: no product arc (nor epsilon)
    width = own + 1
    ma, mb = _LabelIndex(sa, sa.label, width), _LabelIndex(sb, label_b, width)
    ids = _PairIds(sa.num_states, sb.num_states)
    ia, ib = _states_with_weight(s, sa.initial), _states_with_weight(s, sb.initial)
    p0, q0 = np.repeat(ia, len(ib)), np.tile(ib, len(ia))
    lam = s.times(sa.initial[p0], sb.initial[q0])
    live = lam != s.zero
    p0, q0, lam = p0[live], q0[live], lam[live]
    start_ids, fresh = ids.lookup(ids.key(p0, q0, np.zeros(len(p0), dtype=np.int64)))
    pairs = [fresh]
    arcs: list[tuple[np.ndarray, ...]] = []
    frontier, first_id = fresh, 0
    a_leads = ma.mean_degree <= mb.mean_degree  # walk the sparser side's arcs, look the other's up by label
    while len(frontier):
        moved = frontier & 1
        q = (frontier >> 1) % sb.num_states
        p = (frontier >> 1) // sb.num_states
        here = first_id + np.arange(len(frontier), dtype=np.int64)
        first_id += len(frontier)
        srcs, p1, q1, m1, labels, weights = [], [], [], [], [], []
        if a_leads:  # consuming: both move
            owner, pos_a = ma.out(p, epsilon=False)
            hit, pos_b = mb.find(q[owner], ma.c_label[pos_a])
            owner, pos_a = owner[hit], pos_a[hit]
        else:
            owner, pos_b = mb.out(q, epsilon=False)
            hit, pos_a = ma.find(p[owner], mb.c_label[pos_b])
            owner, pos_b = owner[hit], pos_b[hit]
        srcs.append(here[owner])
        p1.append(ma.c_dst[pos_a])
        q1.append(mb.c_dst[pos_b])
        m1.append(np.zeros(len(owner), dtype=np.int64))
        labels.append(ma.c_label[pos_a])
        weights.append(s.times(ma.c_weight[pos_a], mb.c_weight[pos_b]))
        still = np.flatnonzero(moved == 0)  # a's epsilons: only before b has moved
        owner, pos = ma.out(p[still], epsilon=True)
        owner = still[owner]
        srcs.append(here[owner])
        p1.append(ma.e_dst[pos])
        q1.append(q[owner])
        m1.append(np.zeros(len(owner), dtype=np.int64))
        labels.append(np.full(len(owner), EPSILON_ID, dtype=np.int64))
        weights.append(ma.e_weight[pos])
        owner, pos = mb.out(q, epsilon=True)  # b's epsilons
        srcs.append(here[owner])
        p1.append(p[owner])
        q1.append(mb.e_dst[pos])
        m1.append(np.ones(len(owner), dtype=np.int64))
        labels.append(np.full(len(owner), EPSILON_ID, dtype=np.int64))
        weights.append(mb.e_weight[pos])
        dst, frontier = ids.lookup(ids.key(np.concatenate(p1), np.concatenate(q1), np.concatenate(m1)))
        pairs.append(frontier)
        arcs.append((np.concatenate(srcs), dst, np.concatenate(labels), np.concatenate(weights)))
    keys = np.concatenate(pairs)
    moved = keys & 1
    q = (keys >> 1) % sb.num_states
    p = (keys >> 1) // sb.num_states
    n, m = len(keys), sum(len(x[0]) for x in arcs)
    initial = s.zeros((n,))
    s.scatter_plus(initial, start_ids, lam)
    final = s.times(sa.final[p], sb.final[q])
    src, dst, label = (np.concatenate([x[k] for x in arcs]) if arcs else np.zeros(0, dtype=np.int64) for k in range(3))
    weight = np.concatenate([x[3] for x in arcs]) if arcs else s.zeros((0,))
    store = make_store(s, n, src, dst, label, weight, np.arange(m, dtype=np.int64), list(sa.symbols), [],
                       np.full(m, -1, dtype=np.int64), initial, final, [])
    names = _pair_names(a, b, p, q, moved)
    return store_backed(s, alphabet, _combined_name("({} ∩ {})", a, b), names, store, _weights(s, initial),
                        _weights(s, final))


# ----------------------------------------------------------------------------------------
# The operations


def union(a: WFSA, b: WFSA, *more: WFSA) -> WFSA:
    """The automaton scoring every string ``a(x) ⊕ b(x)`` (states ``a.*`` and ``b.*``); with ``more`` operands,
    the fold ``union(union(a, b), c)...`` made in one pass (as pynini's ``union(*fsts)``).

    Raises:
        SemiringError: the operands are over different semirings.
        AlphabetError: their alphabets cannot be merged.
    """
    operands = [a, b, *more]
    for other in operands[1:]:
        semiring = _same_semiring(a, other, "union")
    alphabet = merged_alphabet(a, b, "union", *more)
    stores = _array_operands(*operands)
    if stores is not None:
        return _union_store(operands, stores, alphabet)
    if more:
        return union(union(a, b), *more)
    out = WFSA(semiring, alphabet, _combined_name("({} ∪ {})", a, b))
    for prefix, operand in (("a.", a), ("b.", b)):
        offset = _embed(operand, out, prefix)
        _set_weights(out, operand.initial, offset, final=False)
        _set_weights(out, operand.final, offset, final=True)
    return out


def concat(a: WFSA, b: WFSA) -> WFSA:
    """The automaton scoring ``x`` as ``⊕ over x = uv of a(u) ⊗ b(v)`` (states ``a.*`` and ``b.*``).

    Each final state of ``a`` is joined to each initial state of ``b`` by an
    epsilon arc weighted ``rho ⊗ lambda``.

    Raises:
        SemiringError: ``a`` and ``b`` are over different semirings.
        AlphabetError: their alphabets cannot be merged.
    """
    semiring = _same_semiring(a, b, "concat")
    alphabet = merged_alphabet(a, b, "concat")
    stores = _array_operands(a, b)
    if stores is not None:
        return _concat_store(a, b, stores[0], stores[1], alphabet)
    out = WFSA(semiring, alphabet, _combined_name("({} · {})", a, b))
    offset_a = _embed(a, out, "a.")
    offset_b = _embed(b, out, "b.")
    _set_weights(out, a.initial, offset_a, final=False)
    _set_weights(out, b.final, offset_b, final=True)
    _join_finals_to_initials(out, a.final, offset_a, b.initial, offset_b)
    return out


def _join_finals_to_initials(
    out: WFSA, final: dict[int, Weight], final_offset: int, initial: dict[int, Weight], initial_offset: int
) -> None:
    """Epsilon arcs from every final state to every initial state, weighted ``rho ⊗ lambda``."""
    for f, rho in final.items():
        for i, lam in initial.items():
            weight = _times(out.semiring, rho, lam)
            if not _is_zero(out.semiring, weight):
                out.add_arc(f + final_offset, i + initial_offset, EPSILON, weight)


def kleene_plus(a: WFSA) -> WFSA:
    """The automaton scoring ``x`` as ``⊕ over k >= 1 and x = x1..xk of a(x1) ⊗ ... ⊗ a(xk)``.

    Built on ``a``'s own states by epsilon arcs from each final state back to each
    initial state (weight ``rho ⊗ lambda``).

    Caution:
        When ``a`` accepts the empty string the sum over factorizations is
        infinite: scoring with exact epsilon closure then needs ``a(ε)*`` to
        converge, and raises ``DivergenceError`` otherwise.
    """
    stores = _array_operands(a)
    if stores is not None:
        return _plus_store(a, stores[0], star=False)
    out = WFSA(a.semiring, _copy_table(a.alphabet), _combined_name("({})+", a))
    _embed(a, out)
    _set_weights(out, a.initial, 0, final=False)
    _set_weights(out, a.final, 0, final=True)
    _join_finals_to_initials(out, a.final, 0, a.initial, 0)
    return out


def kleene_star(a: WFSA) -> WFSA:
    """``ε ⊕ kleene_plus(a)``: adds one state ``star`` that is initial and final with weight one.

    Caution:
        See ``kleene_plus`` on automata that accept the empty string.
    """
    stores = _array_operands(a)
    if stores is not None:
        return _plus_store(a, stores[0], star=True)
    out = kleene_plus(a)
    out.name = _combined_name("({})*", a)
    start = out.add_state(_fresh_name("star", out.states))
    out.set_initial(start)
    out.set_final(start)
    return out


def reverse(a: WFSA) -> WFSA:
    """The automaton scoring ``x`` as ``a`` scores ``x`` reversed: arcs flipped, initial and final swapped.

    Caution:
        Needs a commutative semiring (all of kleene's are). Every epsilon run
        stays one run, so scores agree with any ``epsilon_cap`` too.
    """
    out = WFSA(a.semiring, _copy_table(a.alphabet), _combined_name("reverse({})", a))
    for name in a.states:
        out.add_state(name)
    for arc in a.arcs:
        out.add_arc(arc.dst, arc.src, arc.label, arc.weight)
    _set_weights(out, a.final, 0, final=False)
    _set_weights(out, a.initial, 0, final=True)
    return out


def _is_void(label: Label, alphabet: SymbolTable | None) -> bool:
    """Whether a consuming label can never match a symbol (an empty ``OneOf``, a full ``NoneOf``)."""
    if isinstance(label, Sym):
        return alphabet is not None and label.symbol not in alphabet
    if isinstance(label, OneOf) and not label.members:
        return True
    return label.consumes and alphabet is not None and _restrict(label, alphabet) is None


def _useful_arcs(a: WFSA) -> list[Arc]:
    return [arc for arc in a.arcs if not _is_zero(a.semiring, arc.weight) and not _is_void(arc.label, a.alphabet)]


def reachable(seeds: Iterable[Node], edges: Iterable[tuple[Node, Node]]) -> set[Node]:
    """The nodes reachable from ``seeds`` (included) along the directed ``edges``, by a depth-first search in plain
    Python: for small graphs of any hashable nodes (the array form, for stores, is ``sparse.useful_states``)."""
    successors: dict[Node, list[Node]] = {}
    for tail, head in edges:
        successors.setdefault(tail, []).append(head)
    seen = set(seeds)
    stack = list(seen)
    while stack:
        for head in successors.get(stack.pop(), ()):
            if head not in seen:
                seen.add(head)
                stack.append(head)
    return seen


def trim(a: WFSA) -> WFSA:
    """Keep only states on some successful path; drop zero-weight arcs and arcs no symbol can take.

    A state survives when it is reachable from a state with non-zero initial
    weight and reaches a state with non-zero final weight, through useful arcs.
    Surviving states keep their names and relative order.

    Caution:
        Symbolic weights are never taken for zero, so their arcs and states are kept.
    """
    from .sparse import array_store, trim_store

    store = array_store(a)
    if store is not None:
        return trim_store(a, store)
    s = a.semiring
    arcs = _useful_arcs(a)
    starts = [q for q, w in a.initial.items() if not _is_zero(s, w)]
    ends = [q for q, w in a.final.items() if not _is_zero(s, w)]
    forward = reachable(starts, [(arc.src, arc.dst) for arc in arcs])
    keep = sorted(forward & reachable(ends, [(arc.dst, arc.src) for arc in arcs]))
    index = {q: i for i, q in enumerate(keep)}
    if len(keep) == a.num_states:  # every state stays, under its own index: the (immutable) arcs are reused
        kept = arcs
    else:
        kept = [Arc(index[arc.src], index[arc.dst], arc.label, arc.weight) for arc in arcs
                if arc.src in index and arc.dst in index]
    initial = {index[q]: a.initial[q] for q in keep if q in a.initial and not _is_zero(s, a.initial[q])}
    final = {index[q]: a.final[q] for q in keep if q in a.final and not _is_zero(s, a.final[q])}
    return WFSA.assembled(s, _copy_table(a.alphabet), a.name, [a.state_name(q) for q in keep], kept, initial, final)


def remove_epsilon(a: WFSA, cap: int | None = None, env: Env | None = None) -> WFSA:
    """An equivalent automaton without epsilon arcs, on the same states.

    With ``C = closure_matrix(E, cap)`` of the epsilon matrix ``E``, the initial
    weights become ``lambda ⊗ C`` and each consuming arc ``p -x/w-> q`` becomes
    arcs ``p -x/(w ⊗ C[q, r])-> r``; parallel arcs with the same label are
    plus-merged (the order of the resulting arcs is unspecified). ``cap=k``
    reproduces ``score(..., epsilon_cap=k)`` exactly (at most k epsilons in a row
    at the start and after each symbol).

    The closure is ``closure.epsilon_closure_rows`` (the exact one dense Q x Q up
    to ``DENSE_CLOSURE_STATES`` states, sparse above and when capped), and with
    constant weights the arcs are built as arrays into an arc store: on large
    automata, time and memory grow with the closure's non-zeros and the arcs
    produced, not with Q².

    Note:
        Scores are preserved, single best paths are not (the closure sums paths).
        Epsilon weights must be numeric: symbolic ones are evaluated in ``env``.
        States reachable only through epsilon arcs stay, unreachable; ``trim``
        removes them.

    Raises:
        ArgumentError: ``cap`` is neither None nor an integer >= 0.
        DivergenceError: the exact closure (``cap=None``) diverges; names a cycle.
        WeightError: a symbolic epsilon weight that ``env`` does not determine.
    """
    check_epsilon_cap(cap, "remove_epsilon")
    s = a.semiring
    if not a.has_epsilons:
        out = WFSA(s, _copy_table(a.alphabet), a.name)
        _embed(a, out)
        _set_weights(out, a.initial, 0, final=False)
        _set_weights(out, a.final, 0, final=True)
        return out
    closure = epsilon_closure_rows(a, cap, env, useful=lambda: useful_mask(a))
    store = arc_store(a)
    if store is not None:
        return remove_epsilon_store(a, store, closure)
    out = WFSA(s, _copy_table(a.alphabet), a.name)
    for name in a.states:
        out.add_state(name)
    reach: dict[int, list[tuple[int, Weight]]] = {}

    def row(q: int) -> list[tuple[int, Weight]]:
        if q not in reach:
            reach[q] = list(zip(*closure.row(q)))
        return reach[q]

    initial: dict[int, Weight] = {}
    for p, lam in a.initial.items():
        for r, c in row(p):
            initial[r] = _plus(s, initial[r], _times(s, lam, c)) if r in initial else _times(s, lam, c)
    merged: dict[tuple[int, int, Label], Weight] = {}
    for arc in a.arcs:
        if not arc.label.consumes:
            continue
        for r, c in row(arc.dst):
            key = (arc.src, r, arc.label)
            weight = _times(s, arc.weight, c)
            merged[key] = _plus(s, merged[key], weight) if key in merged else weight
    for (src, dst, label), weight in merged.items():
        if not _is_zero(s, weight):
            out.add_arc(src, dst, label, weight)
    _set_weights(out, {q: w for q, w in initial.items() if not _is_zero(s, w)}, 0, final=False)
    _set_weights(out, a.final, 0, final=True)
    return out


def intersect(a: WFSA, b: WFSA) -> WFSA:
    """The automaton scoring every string ``a(x) ⊗ b(x)``: the product construction.

    States are pairs ``(p,q)`` reachable from the initial pairs. Consuming arcs
    pair up when their labels overlap (predicates are intersected as predicates:
    ``ANY ∩ x = x``, ``OneOf(A) ∩ NoneOf(B) = OneOf(A - B)``, ...), over the
    symbols both alphabets share. Epsilon arcs go through the epsilon-sequencing
    filter: between two symbols, ``a``'s epsilons come first, then ``b``'s,
    so each pair of epsilon runs is counted exactly once; states where ``b`` has
    started its run are named ``(p,q)ε``.

    Note:
        Needs a commutative semiring (all of kleene's are). With ``epsilon_cap``
        the result counts the epsilons of both operands in one run.

    Raises:
        SemiringError: ``a`` and ``b`` are over different semirings.
    """
    s = _same_semiring(a, b, "intersect")
    alphabet = _common_alphabet(a, b)
    stores = _array_operands(a, b) if _large(a, b, ARRAY_INTERSECT_MIN_ARCS) else None
    if stores is not None:
        return _intersect_store(a, b, stores[0], stores[1], alphabet)
    (moves_a, symbolic_a), (moves_b, symbolic_b) = _moves_by_state(a), _moves_by_state(b)
    symbolic = symbolic_a or symbolic_b

    def times(x: Weight, y: Weight) -> Weight:
        return _times(s, x, y) if symbolic else s.times(x, y)

    names_a, names_b = a._names, b._names
    index: dict[tuple[int, int, bool], int] = {}
    names: list[str] = []
    taken: set[str] = set()
    arcs: list[Arc] = []
    initial: dict[int, Weight] = {}
    final: dict[int, Weight] = {}
    pending: deque[tuple[int, int, bool]] = deque()

    def pair(p: int, q: int, b_moved: bool) -> int:
        key = (p, q, b_moved)
        found = index.get(key)
        if found is None:
            name = _fresh_name(f"({names_a[p]},{names_b[q]})" + ("ε" if b_moved else ""), taken)
            taken.add(name)
            found = index[key] = len(names)
            names.append(name)
            pending.append(key)
        return found

    for p, lam_a in a.initial.items():
        for q, lam_b in b.initial.items():
            weight = _times(s, lam_a, lam_b)
            if not _is_zero(s, weight):
                initial[pair(p, q, False)] = weight
    while pending:
        p, q, b_moved = pending.popleft()
        here = index[(p, q, b_moved)]
        if p in a.final and q in b.final:
            final[here] = _times(s, a.final[p], b.final[q])
        ma, mb = moves_a[p], moves_b[q]
        by_symbol = mb.by_symbol()
        if by_symbol is not None and ma.only_symbols():  # symbols only: b's arcs of x's symbol, in b's order
            for x in ma.consuming:
                symbol = x.label.symbol  # type: ignore[attr-defined]
                if alphabet is None or symbol in alphabet:
                    for y in by_symbol.get(symbol, ()):
                        arcs.append(Arc(here, pair(x.dst, y.dst, False), x.label, times(x.weight, y.weight)))
        else:
            for x in ma.consuming:
                for y in mb.consuming:
                    label = _meet(x.label, y.label)
                    label = None if label is None else _restrict(label, alphabet)
                    if label is not None:
                        arcs.append(Arc(here, pair(x.dst, y.dst, False), label, times(x.weight, y.weight)))
        if not b_moved:
            for x in ma.epsilon:
                arcs.append(Arc(here, pair(x.dst, q, False), EPSILON, x.weight))
        for y in mb.epsilon:
            arcs.append(Arc(here, pair(p, y.dst, True), EPSILON, y.weight))
    return WFSA.assembled(s, alphabet, _combined_name("({} ∩ {})", a, b), names, arcs, initial, final)


class _Moves:
    """The useful arcs leaving one state, split by whether they consume."""

    def __init__(self) -> None:
        self.consuming: list[Arc] = []
        self.epsilon: list[Arc] = []
        self._by_symbol: dict[Hashable, list[Arc]] | None = None

    def only_symbols(self) -> bool:
        """Whether every consuming arc reads one symbol (no predicate label)."""
        return all(isinstance(x.label, Sym) for x in self.consuming)

    def by_symbol(self) -> dict[Hashable, list[Arc]] | None:
        """The consuming arcs by their symbol, in arc order; None when a label is a predicate."""
        if self._by_symbol is None and self.only_symbols():
            self._by_symbol = {}
            for x in self.consuming:
                self._by_symbol.setdefault(x.label.symbol, []).append(x)  # type: ignore[attr-defined]
        return self._by_symbol


def _moves_by_state(a: WFSA) -> tuple[list[_Moves], bool]:
    """The useful arcs (as ``_useful_arcs``) of each state; whether an arc weight is symbolic."""
    s, alphabet = a.semiring, a.alphabet
    moves = [_Moves() for _ in range(a.num_states)]
    symbolic = False
    for arc in a.arcs:
        if is_symbolic(arc.weight):
            symbolic = True
        elif s.is_zero(arc.weight):
            continue
        if not arc.label.consumes:
            moves[arc.src].epsilon.append(arc)
        elif not _is_void(arc.label, alphabet):
            moves[arc.src].consuming.append(arc)
    return moves, symbolic
