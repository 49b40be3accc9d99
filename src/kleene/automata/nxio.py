"""networkx: ``to_networkx``/``from_networkx``, a ``MultiDiGraph`` view of a WFSA.

Nodes are state indices with attributes ``name``, ``initial``/``final`` (booleans) and
``initial_weight``/``final_weight`` (the weight, or None). Edges are keyed by arc index and
carry ``label`` (a ``Label``), ``weight``, ``kind`` ("main", "self-loop", "epsilon") and
``index``. The graph attributes hold ``semiring`` (its name), ``alphabet`` and ``name``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from kleene.automata.labels import SymbolTable
from kleene.automata.semiring import Semiring
from kleene.automata.wfsa import WFSA
from kleene.errors import AlphabetError, FormatError, UnknownStateError, WeightError

if TYPE_CHECKING:  # pragma: no cover  (networkx is imported where it is used: kleene.automata loads without it)
    import networkx as nx


def to_networkx(wfsa: WFSA) -> nx.MultiDiGraph:
    """The automaton as a ``networkx.MultiDiGraph`` (see the module docstring).

    Caution:
        The graph shares the arcs' label and weight objects with ``wfsa`` (sympy weights are immutable; nothing is
        copied).
    """
    import networkx as nx

    graph = nx.MultiDiGraph(semiring=wfsa.semiring.name, alphabet=wfsa.alphabet, name=wfsa.name)
    for q, name in enumerate(wfsa.states):
        graph.add_node(
            q,
            name=name,
            initial=q in wfsa.initial,
            final=q in wfsa.final,
            initial_weight=wfsa.initial.get(q),
            final_weight=wfsa.final.get(q),
        )
    for i, arc in enumerate(wfsa.arcs):
        graph.add_edge(arc.src, arc.dst, key=i, label=arc.label, weight=arc.weight, kind=arc.kind, index=i)
    return graph


def _edge_order(item: tuple[Hashable, Hashable, Hashable, dict[str, Any]], position: int) -> tuple[int, int, int]:
    """Sort edges by their ``index`` attribute when they have one, else keep the graph's order."""
    index = item[3].get("index")
    return (0, index, position) if isinstance(index, int) and not isinstance(index, bool) else (1, 0, position)


def from_networkx(graph: nx.MultiDiGraph | nx.DiGraph, semiring: str | Semiring | None = None) -> WFSA:
    """A ``WFSA`` from a graph shaped like ``to_networkx``'s output.

    Nodes become states in the graph's node order, named by their ``name`` attribute (else
    ``str(node)``); ``initial``/``final`` mark them, with ``initial_weight``/``final_weight``
    (semiring one when absent). Edges need a ``label`` (a ``Label`` or a bare symbol) and may
    carry a ``weight`` (one when absent); they are added in ``index`` order when present.

    Args:
        semiring: the semiring; None takes the graph's ``semiring`` attribute.

    Raises:
        FormatError: no semiring, duplicate state names, or an edge without a label (naming it).
        WeightError, AlphabetError: an invalid weight or symbol (naming the edge).
    """
    chosen = semiring if semiring is not None else graph.graph.get("semiring")
    if chosen is None:
        raise FormatError("the graph has no 'semiring' attribute; pass semiring=")
    alphabet = graph.graph.get("alphabet")
    if alphabet is not None and not isinstance(alphabet, SymbolTable):
        alphabet = SymbolTable(alphabet)
    wfsa = WFSA(chosen, alphabet, graph.graph.get("name"))
    state_of: dict[Hashable, int] = {}
    for node, data in graph.nodes(data=True):
        name = data.get("name", str(node))
        try:
            state_of[node] = wfsa.add_state(name)
        except UnknownStateError:
            raise FormatError(f"node {node!r}: duplicate state name {name!r}") from None
        for role, setter in (("initial", wfsa.set_initial), ("final", wfsa.set_final)):
            if data.get(role):
                try:
                    setter(state_of[node], data.get(f"{role}_weight"))
                except WeightError as exc:
                    raise WeightError(f"node {node!r}: {exc}") from None

    edges = list(graph.edges(keys=True, data=True)) if graph.is_multigraph() else list(graph.edges(data=True))
    ordered = sorted(enumerate(edges), key=lambda pair: _edge_order(_as_keyed(pair[1]), pair[0]))
    for _, edge in ordered:
        u, v, key, data = _as_keyed(edge)
        where = f"edge {u!r} -> {v!r}" + (f" (key {key!r})" if key is not None else "")
        if data.get("label") is None:
            raise FormatError(f"{where}: no 'label' attribute")
        try:
            wfsa.add_arc(state_of[u], state_of[v], data["label"], data.get("weight"))
        except (WeightError, AlphabetError) as exc:
            raise type(exc)(f"{where}: {exc}") from None
    return wfsa


def _as_keyed(edge: tuple[Any, ...]) -> tuple[Hashable, Hashable, Hashable, dict[str, Any]]:
    """``(u, v, key, data)`` from a multigraph edge, or ``(u, v, None, data)`` from a plain one."""
    if len(edge) == 4:
        return edge[0], edge[1], edge[2], edge[3]
    return edge[0], edge[1], None, edge[2]
