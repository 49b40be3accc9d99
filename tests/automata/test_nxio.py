"""networkx: the MultiDiGraph view of a WFSA, its inverse, and graphs built by hand."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.automata import (
    ANY,
    EPSILON,
    WFSA,
    AlphabetError,
    FormatError,
    Sym,
    WeightError,
    from_networkx,
    to_networkx,
    weight_functions,
)

from .strategies import wfsas
from .test_jsonio import assert_same

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]


def sample() -> WFSA:
    (mu,) = weight_functions("mu")
    a = WFSA("log", ["a", "b"], name="sample")
    a.add_states("p", "q", "r")
    a.set_initial("p")
    a.set_final("r", -0.5)
    a.add_arc("p", "q", "a", -1.0)
    a.add_arc("q", "q", ANY, mu)
    a.add_arc("q", "r", EPSILON, -2.0)
    a.add_arc("q", "r", EPSILON, -3.0)  # a parallel arc: the multigraph keeps both
    return a


def test_graph_shape() -> None:
    g = sample().to_networkx()
    assert isinstance(g, nx.MultiDiGraph)
    assert g.graph["semiring"] == "log"
    assert g.graph["name"] == "sample"
    assert list(g.graph["alphabet"]) == ["a", "b"]
    assert dict(g.nodes(data=True)) == {
        0: {"name": "p", "initial": True, "final": False, "initial_weight": 0.0, "final_weight": None},
        1: {"name": "q", "initial": False, "final": False, "initial_weight": None, "final_weight": None},
        2: {"name": "r", "initial": False, "final": True, "initial_weight": None, "final_weight": -0.5},
    }
    edges = {key: (u, v, data) for u, v, key, data in g.edges(keys=True, data=True)}
    assert edges[0] == (0, 1, {"label": Sym("a"), "weight": -1.0, "kind": "main", "index": 0})
    assert edges[1][2]["kind"] == "self-loop"
    assert str(edges[1][2]["weight"]) == "mu(alpha)"
    assert [edges[k][2]["weight"] for k in (2, 3)] == [-2.0, -3.0]
    assert g.number_of_edges(1, 2) == 2
    assert nx.has_path(g, 0, 2)


def test_round_trip_of_the_sample() -> None:
    a = sample()
    assert_same(a, from_networkx(to_networkx(a)))


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_round_trip_keeps_everything(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring))
    assert_same(a, from_networkx(to_networkx(a)))


def test_arc_order_follows_the_index_attribute() -> None:
    a = sample()
    g = to_networkx(a)
    shuffled = nx.MultiDiGraph(**g.graph)
    shuffled.add_nodes_from(g.nodes(data=True))
    for u, v, key, data in reversed(list(g.edges(keys=True, data=True))):
        shuffled.add_edge(u, v, key=key, **data)
    assert_same(a, from_networkx(shuffled))


def test_hand_built_graphs() -> None:
    g = nx.DiGraph()
    g.add_node("start", initial=True)
    g.add_node("end", final=True, final_weight=2.0)
    g.add_edge("start", "end", label="x")  # a bare symbol, weight one
    g.add_edge("end", "end", label=EPSILON, weight=0.5)
    a = from_networkx(g, "min-plus")
    assert a.states == ["start", "end"]
    assert a.initial == {0: 0.0}
    assert a.final == {1: 2.0}
    assert [(arc.label, arc.weight) for arc in a.arcs] == [(Sym("x"), 0.0), (EPSILON, 0.5)]
    assert a.score(["x"]) == 2.0


def test_graph_errors_name_the_node_or_edge() -> None:
    g = nx.MultiDiGraph()
    g.add_node(0, name="p", initial=True)
    with pytest.raises(FormatError, match="the graph has no 'semiring' attribute; pass semiring="):
        from_networkx(g)
    g.add_node(1, name="p")
    with pytest.raises(FormatError, match="node 1: duplicate state name 'p'"):
        from_networkx(g, "real")
    g.nodes[1]["name"] = "q"
    g.add_edge(0, 1, weight=0.5)
    with pytest.raises(FormatError, match=r"edge 0 -> 1 \(key 0\): no 'label' attribute"):
        from_networkx(g, "real")
    g.edges[0, 1, 0]["label"] = "a"
    g.edges[0, 1, 0]["weight"] = -0.5
    with pytest.raises(WeightError, match=r"edge 0 -> 1 \(key 0\): .*not an element of the max-times semiring"):
        from_networkx(g, "max-times")
    g.graph["alphabet"] = ["b"]
    with pytest.raises(AlphabetError, match=r"edge 0 -> 1 \(key 0\): .*symbol 'a' is not in the alphabet"):
        from_networkx(g, "real")
    g.nodes[1].update(final=True, final_weight=float("nan"))
    with pytest.raises(WeightError, match=r"node 1: .*NaN"):
        from_networkx(g, "real")
