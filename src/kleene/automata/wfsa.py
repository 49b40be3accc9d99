"""The ``WFSA`` type: named states, labelled weighted arcs, initial and final weights."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import AlphabetError, UnknownStateError, WeightError
from .labels import Label, LabelLike, SymbolTable, as_label
from .semiring import Semiring, get_semiring
from .weights import Env, Weight, evaluate, is_symbolic, normalize_weight

if TYPE_CHECKING:  # pragma: no cover
    import graphviz
    import networkx

    from .algorithms import ViterbiPath

StateRef = int | str


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
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._arcs: list[Arc] | None = []
        self.initial: dict[int, Weight] = {}
        self.final: dict[int, Weight] = {}

    # -- arcs ---------------------------------------------------------------------------
    @property
    def arcs(self) -> list[Arc]:
        """The arcs, in insertion order (a fast AT&T read keeps them in its arc store until first asked for)."""
        if self._arcs is None:
            from .sparse import materialize_arcs

            self._arcs = materialize_arcs(self)
        return self._arcs

    @arcs.setter
    def arcs(self, arcs: list[Arc]) -> None:
        self._arcs = arcs
        self._version += 1

    def _arcs_key(self) -> tuple[int, int, int, int]:
        """Identifies the arcs, states and version the sparse arc store was built for (no materialisation)."""
        arcs = self._arcs
        return (self._version, id(arcs), -1 if arcs is None else len(arcs), len(self._names))

    # -- construction -------------------------------------------------------------------
    def add_state(self, name: str | None = None) -> int:
        """Add a state (named ``q{index}`` by default) and return its index."""
        index = len(self._names)
        name = f"q{index}" if name is None else str(name)
        if name in self._index:
            raise UnknownStateError(f"state {name!r} already exists")
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
            from .labels import Sym

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
    def states(self) -> list[str]:
        """State names, in index order."""
        return list(self._names)

    def state_name(self, index: int) -> str:
        return self._names[index]

    def arcs_from(self, state: StateRef) -> Iterator[Arc]:
        q = self.state(state)
        return (a for a in self.arcs if a.src == q)

    @property
    def is_symbolic(self) -> bool:
        """Whether any weight is a sympy expression."""
        weights = [a.weight for a in self.arcs] + list(self.initial.values()) + list(self.final.values())
        return any(is_symbolic(w) for w in weights)

    @property
    def has_epsilons(self) -> bool:
        return any(not a.label.consumes for a in self.arcs)

    def copy(self) -> WFSA:
        out = WFSA(self.semiring, self.alphabet, self.name)
        out._names = list(self._names)
        out._index = dict(self._index)
        out.arcs = list(self.arcs)
        out.initial = dict(self.initial)
        out.final = dict(self.final)
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
            raise AlphabetError(f"symbol {symbol!r}{at} is not in the alphabet {self.alphabet._preview()}")

    def arc_weight(self, arc_index: int, symbol: Hashable | None, env: Env | None = None) -> Any:
        arc = self.arcs[arc_index]
        return self.numeric(arc.weight, symbol, env, f"arc {arc_index}")

    def vector(self, which: dict[int, Weight], env: Env | None = None) -> np.ndarray:
        """The initial or final weights as a dense semiring vector."""
        out: np.ndarray = self.semiring.zeros((self.num_states,))
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

    # -- algorithms (free functions in kleene.automata.algorithms) ----------------------
    def score(self, symbols: Sequence[Hashable], env: Env | None = None, epsilon_cap: int | None = None) -> Any:
        """The Forward score: the semiring sum over all paths deriving ``symbols``."""
        from .algorithms import score

        return score(self, symbols, env=env, epsilon_cap=epsilon_cap)

    def viterbi(self, symbols: Sequence[Hashable], env: Env | None = None) -> ViterbiPath:
        """The best single path deriving ``symbols``, with its weight and arcs."""
        from .algorithms import viterbi

        return viterbi(self, symbols, env=env)

    def pathsum(self, env: Env | None = None, epsilon_cap: int | None = None) -> Any:
        """The semiring sum of the scores of all strings (shortest distance)."""
        from .algorithms import pathsum

        return pathsum(self, env=env)

    def score_symbolic(self, symbols: Sequence[Hashable], epsilon_cap: int | None = None) -> Any:
        """The score of ``symbols`` as a sympy expression in the weight functions."""
        from .algorithms import score_symbolic

        return score_symbolic(self, symbols, epsilon_cap=epsilon_cap)

    def all_spans(self, symbols: Sequence[Hashable], env: Env | None = None, epsilon_cap: int | None = None) -> Any:
        """SoPa's search score over all non-empty substrings, and the per-position end scores."""
        from .algorithms import all_spans

        return all_spans(self, symbols, env=env, epsilon_cap=epsilon_cap)

    def to_att(self, *args: Any, **kwargs: Any) -> str:
        from .att import write_att

        return write_att(self, *args, **kwargs)

    def to_json(self) -> str:
        from .jsonio import to_json

        return to_json(self)

    def to_networkx(self) -> networkx.MultiDiGraph:
        from .nxio import to_networkx

        return to_networkx(self)

    def to_dot(self, **kwargs: Any) -> graphviz.Digraph:
        from .draw import to_dot

        return to_dot(self, **kwargs)

    def _repr_svg_(self) -> str:
        return str(self.to_dot().pipe(format="svg").decode("utf-8"))
