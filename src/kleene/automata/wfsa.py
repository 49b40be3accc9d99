"""The ``WFSA`` type: named states, labelled weighted arcs, initial and final weights."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Hashable, ItemsView, Iterable, Iterator, KeysView, Mapping, Sequence, ValuesView
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kleene.automata.labels import Label, LabelLike, SymbolTable, as_label
from kleene.automata.semiring import Semiring, get_semiring
from kleene.automata.weights import Env, Weight, evaluate, is_symbolic, normalize_weight
from kleene.errors import AlphabetError, UnknownStateError, WeightError

if TYPE_CHECKING:  # pragma: no cover
    from kleene.automata import algorithms, att, draw, equivalence, jsonio, nxio, ops

StateRef = int | str


class HeldArcs(Protocol):
    """What a ``WFSA`` asks of the arc store that holds its arcs (``kleene.automata.sparse.ArcStore``) when they
    were read or built into the store only."""

    @property
    def num_arcs(self) -> int: ...

    def arc_list(self) -> list[Arc]:
        """The ``Arc`` objects, in arc order."""
        ...

    def has_epsilon_arcs(self) -> bool: ...


def delegate(module: str, function: str, binary: bool = False) -> Any:
    """A ``WFSA`` method that calls ``kleene.automata.<module>.<function>(self, ...)``: the algorithms live in
    modules above this one and are imported on the method's first call (so that no module of kleene.automata
    imports a module that imports it). ``binary``: an operator, ``NotImplemented`` for an operand not a WFSA."""
    target: list[Any] = []

    def method(self: WFSA, *args: Any, **kwargs: Any) -> Any:
        if binary and not isinstance(args[0], WFSA):
            return NotImplemented
        if not target:
            target.append(getattr(importlib.import_module(f"kleene.automata.{module}"), function))
        return target[0](self, *args, **kwargs)

    method.__name__ = function
    method.__doc__ = f"``kleene.automata.{module}.{function}(self, ...)``: see its documentation."
    return method


@dataclass(frozen=True)
class Arc:
    """A transition ``src --label/weight--> dst`` (states by index)."""

    src: int
    dst: int
    label: Label
    weight: Weight

    @property
    def kind(self) -> str:
        """``"epsilon"``, ``"self-loop"`` or ``"main"`` (a consuming move to another state)."""
        if not self.label.consumes:
            return "epsilon"
        return "self-loop" if self.src == self.dst else "main"


class Weights(dict[int, Any]):
    """Initial or final weights: a dict that counts its changes in ``version``, so that the sparse arc store cached
    on an automaton knows when they changed without keeping a copy. (The other two slots are ``WeightVector``'s.)"""

    __slots__ = ("_vector", "_zero", "version")

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.version = 0
        self._vector: np.ndarray | None = None
        self._zero: Any = None

    def __setitem__(self, key: int, value: Any) -> None:
        super().__setitem__(key, value)
        self.version += 1

    def __delitem__(self, key: int) -> None:
        super().__delitem__(key)
        self.version += 1

    def pop(self, *args: Any) -> Any:
        self.version += 1
        return super().pop(*args)

    def popitem(self) -> tuple[int, Any]:
        self.version += 1
        return super().popitem()

    def clear(self) -> None:
        self.version += 1
        super().clear()

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.version += 1
        super().update(*args, **kwargs)

    def setdefault(self, key: int, default: Any = None) -> Any:
        self.version += 1
        return super().setdefault(key, default)

    def __ior__(self, other: Any) -> Weights:  # type: ignore[override,misc]
        self.version += 1
        super().__ior__(other)
        return self

    def copy(self) -> Weights:
        """An independent copy (the same kind: a ``WeightVector`` shares its read-only vector)."""
        return Weights(self)

    def __reduce__(self) -> Any:
        return (Weights, (dict(self),))


class WeightVector(Weights):
    """Initial or final weights held as a dense vector over the states (``vector[q]``; the semiring's ``zero`` means
    "not a key") instead of one Python entry per state: what the bulk AT&T readers make, sharing the vector with the
    arc store. It reads as the dict of its non-zero entries (in increasing state order); the first change (any
    mutating method) turns it, in place, into a plain ``Weights`` holding those entries (same object, so the arc
    store's cache key stays valid, and ``version`` counts the change as usual).

    Caution:
        takes ``vector`` over: it is made read-only (the arc store may share it); values are read back as Python
        numbers (``vector[q].item()``). C code that reads a dict's own table instead of its methods (the ``json``
        module's encoder) sees an empty dict: pass it ``dict(weights)``.
    """

    __slots__ = ()

    def __init__(self, vector: np.ndarray, zero: Any):
        super().__init__()
        vector.flags.writeable = False
        self._vector, self._zero = vector, zero

    @property
    def vector(self) -> np.ndarray:
        """The dense read-only vector (zero where a state has no weight)."""
        assert self._vector is not None
        return self._vector

    def _states(self) -> np.ndarray:
        return np.flatnonzero(self.vector != self._zero)

    def _position(self, key: Any) -> int:
        if isinstance(key, (int, np.integer)):
            q = int(key)
            if 0 <= q < len(self.vector) and self.vector[q] != self._zero:
                return q
        return -1

    def _thaw(self) -> None:
        states = self._states()
        entries = zip(states.tolist(), self.vector[states].tolist())
        self._vector = self._zero = None
        self.__class__ = Weights  # type: ignore[assignment]
        dict.update(self, entries)

    # -- reading ----------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        q = self._position(key)
        if q < 0:
            raise KeyError(key)
        return self.vector[q].item()

    def get(self, key: Any, default: Any = None) -> Any:
        q = self._position(key)
        return default if q < 0 else self.vector[q].item()

    def __contains__(self, key: object) -> bool:
        return self._position(key) >= 0

    def __len__(self) -> int:
        return int(np.count_nonzero(self.vector != self._zero))

    def __iter__(self) -> Iterator[int]:
        return iter(self._states().tolist())

    def __reversed__(self) -> Iterator[int]:
        return iter(self._states()[::-1].tolist())

    def keys(self) -> KeysView[int]:  # type: ignore[override]
        return KeysView(self)

    def values(self) -> ValuesView[Any]:  # type: ignore[override]
        return _VectorValues(self)

    def items(self) -> ItemsView[int, Any]:  # type: ignore[override]
        return _VectorItems(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, WeightVector):
            return dict(self.items()) == dict(other.items())
        if isinstance(other, dict):
            return dict(self.items()) == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]

    def __or__(self, other: Any) -> Any:
        return dict(self.items()) | other if isinstance(other, dict) else NotImplemented

    def __ror__(self, other: Any) -> Any:
        return other | dict(self.items()) if isinstance(other, dict) else NotImplemented

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def copy(self) -> WeightVector:
        return WeightVector(self.vector, self._zero)

    def __reduce__(self) -> Any:
        return (WeightVector, (self.vector, self._zero))

    # -- changing: first a plain Weights ----------------------------------------------------
    def __setitem__(self, key: int, value: Any) -> None:
        self._thaw()
        self[key] = value

    def __delitem__(self, key: int) -> None:
        self._thaw()
        del self[key]

    def pop(self, *args: Any) -> Any:
        self._thaw()
        return self.pop(*args)

    def popitem(self) -> tuple[int, Any]:
        self._thaw()
        return self.popitem()

    def clear(self) -> None:
        self._thaw()
        self.clear()

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._thaw()
        self.update(*args, **kwargs)

    def setdefault(self, key: int, default: Any = None) -> Any:
        self._thaw()
        return self.setdefault(key, default)

    def __ior__(self, other: Any) -> Weights:  # type: ignore[override]
        self._thaw()
        return Weights.__ior__(self, other)


class _VectorValues(ValuesView[Any]):
    _mapping: WeightVector

    def __iter__(self) -> Iterator[Any]:
        vector = self._mapping.vector
        return iter(vector[self._mapping._states()].tolist())


class _VectorItems(ItemsView[int, Any]):
    _mapping: WeightVector

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        states = self._mapping._states()
        return zip(states.tolist(), self._mapping.vector[states].tolist())


class LazyNames(Sequence[str]):
    """State names made on demand (instead of one Python string per state held from the start); immutable.
    ``WFSA.add_state`` turns them into a list first."""

    def __repr__(self) -> str:
        return repr(list(self))


class LazyIndex(Mapping[str, int]):
    """The index of each name of a ``LazyNames``, built (as a dict) on first use."""

    def __init__(self, names: Sequence[str]):
        self.names = names
        self._dict: dict[str, int] | None = None

    def _table(self) -> dict[str, int]:
        if self._dict is None:
            self._dict = {n: k for k, n in enumerate(self.names)}
        return self._dict

    def __contains__(self, name: object) -> bool:
        return name in self._table()

    def __getitem__(self, name: str) -> int:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self.names)


class IdNames(LazyNames):
    """State names that are the decimal text of a sorted array of distinct non-negative ints (the state ids of an
    AT&T file), made on demand instead of one Python string per state. ``ids`` given as a count ``n`` stands for
    the ids 0..n-1 without an array (``IdNames.ids`` then makes one on each use)."""

    def __init__(self, ids: np.ndarray | int):
        self._ids = None if isinstance(ids, int) else ids
        self._count = ids if isinstance(ids, int) else len(ids)

    @property
    def ids(self) -> np.ndarray:
        """The ids, ascending (a new ``arange`` when they are 0..n-1)."""
        return np.arange(self._count, dtype=np.int64) if self._ids is None else self._ids

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if self._ids is None:
            picked = range(self._count)[index]
            return [str(i) for i in picked] if isinstance(index, slice) else str(picked)
        if isinstance(index, slice):
            return [str(i) for i in self._ids[index].tolist()]
        return str(int(self._ids[index]))

    def __iter__(self) -> Iterator[str]:
        if self._ids is None:
            return (str(i) for i in range(self._count))
        return (str(i) for i in self._ids.tolist())


class IdIndex(Mapping[str, int]):
    """The index of each name of an ``IdNames`` (a binary search, no dict)."""

    def __init__(self, names: IdNames):
        self.names = names

    def _find(self, name: object) -> int:
        if not isinstance(name, str) or not name.isascii() or not name.isdigit() or str(int(name)) != name:
            return -1
        ids, value = self.names._ids, int(name)
        if ids is None:
            return value if value < self.names._count else -1
        k = int(np.searchsorted(ids, value))
        return k if k < len(ids) and int(ids[k]) == value else -1

    def __contains__(self, name: object) -> bool:
        return self._find(name) >= 0

    def __getitem__(self, name: str) -> int:
        k = self._find(name)
        if k < 0:
            raise KeyError(name)
        return k

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


class WFSA:
    """A weighted finite-state automaton over a semiring.

    States are named (``add_state("q0")``) and referred to by name or index.
    Weights are semiring constants or sympy expressions of the consumed symbol
    (see ``kleene.automata.weights``). ``alphabet`` (a ``SymbolTable`` or an
    iterable of symbols) is required for predicate labels such as ``ANY`` to be
    enumerated and lets ``score`` reject unknown symbols.
    """

    def __init__(
        self,
        semiring: str | Semiring = "real",
        alphabet: SymbolTable | Iterable[Hashable] | None = None,
        name: str | None = None,
    ):
        self.semiring: Semiring = get_semiring(semiring)
        self.alphabet: SymbolTable | None = (
            alphabet if isinstance(alphabet, SymbolTable) or alphabet is None else SymbolTable(alphabet)
        )
        self.name = name
        #: Bumped by every mutating method; the sparse arc store (``kleene.automata.sparse``) is cached per version.
        self._version = 0
        self._sparse_cache: Any = None
        #: ``memo``'s values, with the ``_content_key`` they were computed for.
        self._memo: tuple[Hashable, dict[Hashable, Any]] | None = None
        self._names: list[str] | LazyNames = []
        self._index: dict[str, int] | Mapping[str, int] = {}
        self._arcs: list[Arc] | None = []
        self._initial = Weights()
        self._final = Weights()

    @classmethod
    def assembled(
        cls, semiring: Semiring, alphabet: SymbolTable | None, name: str | None, names: list[str], arcs: list[Arc],
        initial: dict[int, Weight], final: dict[int, Weight],
    ) -> WFSA:
        """An automaton from its parts as they are, for algorithms that build results from checked operands.

        Caution:
            Nothing is checked: ``names`` must be distinct, every arc's states in range, its label in ``alphabet``
            and every weight an element of ``semiring`` (``add_arc``'s checks); the lists and dicts are taken over.
        """
        out = cls(semiring, alphabet, name)
        out._names, out._index = names, {n: k for k, n in enumerate(names)}
        out._arcs = arcs
        out._initial, out._final = Weights(initial), Weights(final)
        return out

    @property
    def initial(self) -> Weights:
        """The initial weights by state index (a dict, or a ``WeightVector`` read as one; assigning a mapping other
        than a ``Weights`` stores a copy)."""
        return self._initial

    @initial.setter
    def initial(self, weights: dict[int, Weight]) -> None:
        self._initial = weights if isinstance(weights, Weights) else Weights(weights)
        self._version += 1

    @property
    def final(self) -> Weights:
        """The final weights by state index (a dict, or a ``WeightVector`` read as one; assigning a mapping other
        than a ``Weights`` stores a copy)."""
        return self._final

    @final.setter
    def final(self, weights: dict[int, Weight]) -> None:
        self._final = weights if isinstance(weights, Weights) else Weights(weights)
        self._version += 1

    # -- arcs ---------------------------------------------------------------------------
    @property
    def arcs(self) -> list[Arc]:
        """The arcs, in insertion order (a fast AT&T read keeps them in its arc store until first asked for)."""
        if self._arcs is None:
            cached = self._sparse_cache
            memo = self._memo if self._memo is not None and self._memo[0] == self._content_key() else None
            self._arcs = self._held_arcs().arc_list()
            self._sparse_cache = (self._arcs_key(), *cached[1:])  # the store stays cached for the list
            if memo is not None:  # and so do ``memo``'s values: the same arcs, now listed
                self._memo = (self._content_key(), memo[1])
        return self._arcs

    @arcs.setter
    def arcs(self, arcs: list[Arc]) -> None:
        self._arcs = arcs
        self._version += 1

    def _held_arcs(self) -> HeldArcs:
        """The arc store holding the arcs of an automaton whose ``_arcs`` is None (read or built into it)."""
        cached = self._sparse_cache
        assert cached is not None and cached[3] is not None, "arcs held nowhere"
        held: HeldArcs = cached[3]
        return held

    def _arcs_key(self) -> tuple[int, int, int, int]:
        """Identifies the arcs, states and version the sparse arc store was built for (no materialisation)."""
        arcs = self._arcs
        return (self._version, id(arcs), -1 if arcs is None else len(arcs), len(self._names))

    def _content_key(self) -> tuple[Hashable, ...]:
        """Identifies the arcs, states, initial and final weights and semiring ``memo``'s values were computed for."""
        initial, final = self._initial, self._final
        return (self._arcs_key(), id(initial), initial.version, id(final), final.version, id(self.semiring))

    def memo(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """``build()``, computed once per ``key`` while the automaton is unchanged (what an algorithm derives from
        the automaton alone, such as ``score``'s epsilon closure). Every change drops every value: the mutating
        methods (``add_state``, ``add_arc``, ``set_initial``, ``set_final``), assigning ``arcs``, ``initial``,
        ``final`` or ``semiring``, changing the ``initial``/``final`` dicts, adding arcs to or removing arcs from
        the ``arcs`` list.

        Caution:
            Replacing an arc in place (``a.arcs[i] = arc``, or a removal and an addition) is not seen: assign
            ``arcs`` instead (the sparse arc store has the same rule). Every caller gets the same value: never
            modify it (arrays are best made read-only), unless it is a cache itself (a dict filled on demand).
        """
        current = self._content_key()
        if self._memo is None or self._memo[0] != current:
            self._memo = (current, {})
        values = self._memo[1]  # build() may list arcs held in the arc store: ``arcs`` then keeps this dict
        if key not in values:
            values[key] = build()
        return values[key]

    # -- construction -------------------------------------------------------------------
    def add_state(self, name: str | None = None) -> int:
        """Add a state (named ``q{index}`` by default) and return its index."""
        index = len(self._names)
        name = f"q{index}" if name is None else str(name)
        if name in self._index:
            raise UnknownStateError(f"state {name!r} already exists")
        if not isinstance(self._names, list) or not isinstance(self._index, dict):  # lazy names: make them real
            self._names = list(self._names)
            self._index = {n: k for k, n in enumerate(self._names)}
        self._names.append(name)
        self._index[name] = index
        self._version += 1
        return index

    def add_states(self, *names: str) -> list[int]:
        return [self.add_state(n) for n in names]

    def state(self, ref: StateRef) -> int:
        """The index of a state given by index or name."""
        if isinstance(ref, (int, np.integer)) and not isinstance(ref, bool):
            if 0 <= ref < len(self._names):
                return int(ref)
            raise UnknownStateError(f"no state with index {ref} (the automaton has {len(self._names)} states)")
        if isinstance(ref, str) and ref in self._index:
            return self._index[ref]
        raise UnknownStateError(f"no state named {ref!r}; states are {self._names}")

    def add_arc(self, src: StateRef, dst: StateRef, label: LabelLike, weight: Any = None) -> int:
        """Add an arc and return its index.

        Raises:
            UnknownStateError: ``src`` or ``dst`` is not a state.
            AlphabetError: a symbol label outside a declared alphabet.
            WeightError: a weight outside the semiring.
        """
        lab = as_label(label)
        where = f"arc {len(self.arcs)} ({self._name_of(src)} -{lab}-> {self._name_of(dst)})"
        try:
            s, d = self.state(src), self.state(dst)
        except UnknownStateError as exc:
            raise UnknownStateError(f"{where}: {exc}") from None
        if self.alphabet is not None and lab.consumes:
            from kleene.automata.labels import Sym

            if isinstance(lab, Sym) and lab.symbol not in self.alphabet:
                raise AlphabetError(f"{where}: symbol {lab.symbol!r} is not in the alphabet")
        w = normalize_weight(weight, self.semiring, where, consumes=lab.consumes)
        self.arcs.append(Arc(s, d, lab, w))
        self._version += 1
        return len(self.arcs) - 1

    def set_initial(self, state: StateRef, weight: Any = None) -> None:
        """Make ``state`` initial with weight lambda (semiring one by default)."""
        q = self.state(state)
        self.initial[q] = normalize_weight(weight, self.semiring, f"initial weight of {self._names[q]}", False)
        self._version += 1

    def set_final(self, state: StateRef, weight: Any = None) -> None:
        """Make ``state`` final with weight rho (semiring one by default)."""
        q = self.state(state)
        self.final[q] = normalize_weight(weight, self.semiring, f"final weight of {self._names[q]}", False)
        self._version += 1

    def _name_of(self, ref: StateRef) -> str:
        try:
            return self._names[self.state(ref)]
        except UnknownStateError:
            return repr(ref)

    # -- inspection ---------------------------------------------------------------------
    @property
    def num_states(self) -> int:
        return len(self._names)

    @property
    def num_arcs(self) -> int:
        """The number of arcs, epsilon arcs included (``len(a.arcs)`` without making the arc list of an automaton
        whose arcs are held in the arc store only)."""
        if self._arcs is None:
            return self._held_arcs().num_arcs
        return len(self._arcs)

    @property
    def states(self) -> list[str]:
        """State names, in index order."""
        return list(self._names)

    def state_name(self, index: int) -> str:
        return self._names[index]

    @property
    def is_symbolic(self) -> bool:
        """Whether any weight is a sympy expression."""
        arcs = [] if self._arcs is None else self._arcs  # arcs held in the arc store only are numeric
        weights = [a.weight for a in arcs] + list(self.initial.values()) + list(self.final.values())
        return any(is_symbolic(w) for w in weights)

    @property
    def has_epsilons(self) -> bool:
        if self._arcs is None:  # arcs held in the arc store only
            return self._held_arcs().has_epsilon_arcs()
        return any(not a.label.consumes for a in self.arcs)

    def copy(self) -> WFSA:
        """An independent copy (states, arcs, weights and a fresh alphabet table; labels and weights are immutable)."""
        table = None if self.alphabet is None else SymbolTable(self.alphabet, epsilon=self.alphabet.epsilon)
        out = WFSA(self.semiring, table, self.name)
        out._names = self._names if isinstance(self._names, LazyNames) else list(self._names)  # lazy ones: immutable
        out._index = self._index if isinstance(self._names, LazyNames) else dict(self._index)
        out.arcs = list(self.arcs)
        out.initial = self.initial.copy()
        out.final = self.final.copy()
        return out

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return f"<WFSA{name} over {self.semiring.name}: {self.num_states} states, {len(self.arcs)} arcs>"

    # -- numeric weights --------------------------------------------------------------
    def numeric(self, weight: Weight, symbol: Hashable | None, env: Env | None, where: str) -> Any:
        """The semiring value of ``weight`` (constant or symbolic) when consuming ``symbol``."""
        if not is_symbolic(weight):
            return weight
        value = evaluate(weight, symbol, env, where)
        try:
            return self.semiring.check(value, where)
        except WeightError as exc:
            raise WeightError(f"{exc} (from {weight} at {symbol!r})") from None

    def check_symbol(self, symbol: Hashable, position: int | None = None) -> None:
        if self.alphabet is not None and symbol not in self.alphabet:
            at = f" at position {position}" if position is not None else ""
            alike = [s for s in self.alphabet if str(s) == str(symbol)]
            hint = f" (it has {alike[0]!r}, a {type(alike[0]).__name__})" if alike else ""
            raise AlphabetError(f"symbol {symbol!r}{at} is not in the alphabet {self.alphabet._preview()}{hint}")

    def arc_weight(self, arc_index: int, symbol: Hashable | None, env: Env | None = None) -> Any:
        arc = self.arcs[arc_index]
        return self.numeric(arc.weight, symbol, env, f"arc {arc_index}")

    def vector(self, which: dict[int, Weight], env: Env | None = None) -> np.ndarray:
        """The initial or final weights as a dense semiring vector (a new array)."""
        out: np.ndarray = self.semiring.zeros((self.num_states,))
        if isinstance(which, WeightVector):  # numeric weights in a vector already
            out[: len(which.vector)] = which.vector
            return out
        for q, w in which.items():
            out[q] = self.numeric(w, None, env, f"weight of state {self._names[q]}")
        return out

    def transition_matrix(self, symbol: Hashable | None, env: Env | None = None) -> np.ndarray:
        """The Q x Q matrix of ``symbol``'s arcs (``None``: the epsilon arcs), plus-merged."""
        s = self.semiring
        out: np.ndarray = s.zeros((self.num_states, self.num_states))
        for i, arc in enumerate(self.arcs):
            hit = (not arc.label.consumes) if symbol is None else arc.label.matches(symbol)
            if hit:
                w = self.numeric(arc.weight, symbol, env, f"arc {i}")
                out[arc.src, arc.dst] = s.plus(out[arc.src, arc.dst], w)
        return out

    def epsilon_matrix(self, env: Env | None = None) -> np.ndarray:
        return self.transition_matrix(None, env)

    # -- operations: one-line delegations to the free functions (declared once, resolved on first call) ---------
    if TYPE_CHECKING:  # the functions themselves, so that type checkers see their signatures
        __or__ = ops.union
        __add__ = ops.concat
        __and__ = ops.intersect
        star = ops.kleene_star
        plus = ops.kleene_plus
        equivalent = equivalence.equivalent
        score = algorithms.score
        score_batch = algorithms.score_batch
        viterbi = algorithms.viterbi
        pathsum = algorithms.pathsum
        score_symbolic = algorithms.score_symbolic
        all_spans = algorithms.all_spans
        __str__ = att.listing
        to_att = att.write_att
        to_json = jsonio.to_json
        to_networkx = nxio.to_networkx
        to_dot = draw.to_dot
    else:
        __or__ = delegate("ops", "union", binary=True)  # a | b
        __add__ = delegate("ops", "concat", binary=True)  # a + b (concatenation, as in pynini)
        __and__ = delegate("ops", "intersect", binary=True)  # a & b
        star = delegate("ops", "kleene_star")
        plus = delegate("ops", "kleene_plus")  # a method: ``+`` is concatenation
        equivalent = delegate("equivalence", "equivalent")  # ``==`` stays identity
        score = delegate("algorithms", "score")
        score_batch = delegate("algorithms", "score_batch")
        viterbi = delegate("algorithms", "viterbi")
        pathsum = delegate("algorithms", "pathsum")
        score_symbolic = delegate("algorithms", "score_symbolic")
        all_spans = delegate("algorithms", "all_spans")
        __str__ = delegate("att", "listing")
        to_att = delegate("att", "write_att")
        to_json = delegate("jsonio", "to_json")
        to_networkx = delegate("nxio", "to_networkx")
        to_dot = delegate("draw", "to_dot")

    def _repr_svg_(self) -> str:
        return str(self.to_dot().pipe(format="svg").decode("utf-8"))
