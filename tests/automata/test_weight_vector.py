"""Final weights held as a vector (``WeightVector``, what the bulk AT&T readers make): read as the dict of their
non-zero entries, turned into a plain ``Weights`` in place by the first change, and the arc store cached on the
automaton rebuilt after it; the readers' results equal the general reader's. State names of ids 0..n-1 without an
array (``IdNames`` of a count)."""

from __future__ import annotations

import copy
import math
import pickle
from collections.abc import Callable
from operator import eq, ne
from typing import Any

import numpy as np
import pytest

from kleene.automata import att as att_module
from kleene.automata import minimize, native, trim
from kleene.automata.att import read_att
from kleene.automata.sparse import arc_store
from kleene.automata.wfsa import WFSA, IdIndex, IdNames, Weights, WeightVector

INF = math.inf


def _vector() -> WeightVector:
    return WeightVector(np.array([INF, 1.5, INF, 2.0, 0.25]), INF)


def test_reads_as_the_dict_of_its_nonzero_entries() -> None:
    w = _vector()
    d = {1: 1.5, 3: 2.0, 4: 0.25}
    assert eq(w, d) and eq(d, w) and not ne(w, d) and not ne(d, w)  # both operands' sides, both operators
    assert ne(w, {1: 1.5}) and ne({1: 1.5}, w) and not eq({1: 1.5}, w) and ne(w, {1: 1.5, 3: 2.0, 4: 0.5})
    assert len(w) == 3 and bool(w) and list(w) == [1, 3, 4] and list(reversed(w)) == [4, 3, 1]
    assert list(w.keys()) == [1, 3, 4] and list(w.values()) == [1.5, 2.0, 0.25]
    assert list(w.items()) == [(1, 1.5), (3, 2.0), (4, 0.25)] and (3, 2.0) in w.items()
    assert dict(w) == d and {**w} == d and dict(w.items()) == d and repr(w) == repr(d)
    updated: dict[int, Any] = {}
    updated.update(w)
    assert updated == d
    assert w[1] == 1.5 and type(w[1]) is float and w[np.int64(3)] == 2.0 and w.get(np.int32(4)) == 0.25
    for missing in (0, 2, 5, -1, 10**20, "1", 1.5, None):
        assert missing not in w and w.get(missing, "no") == "no"  # type: ignore[call-overload]
        with pytest.raises(KeyError):
            w[missing]  # type: ignore[index]
    assert w | {7: 1.0} == {**d, 7: 1.0} and {7: 1.0} | w == {7: 1.0, **d}
    assert w == WeightVector(np.array([INF, 1.5, INF, 2.0, 0.25, INF]), INF)
    assert w != WeightVector(np.array([INF, 1.5, INF, 2.0, INF]), INF)
    empty = WeightVector(np.full(4, INF), INF)
    assert not empty and len(empty) == 0 and empty == {} and list(empty.items()) == []
    assert WeightVector(np.zeros(0), 0.0) == {}
    assert isinstance(w, dict) and isinstance(w, Weights)


def test_vector_is_read_only_and_copies_share_it() -> None:
    w = _vector()
    with pytest.raises(ValueError):
        w.vector[0] = 1.0
    twin = w.copy()
    assert type(twin) is WeightVector and twin is not w and twin.vector is w.vector and twin == w
    twin[0] = 9.0  # changes the copy only
    assert twin == {0: 9.0, 1: 1.5, 3: 2.0, 4: 0.25} and w == {1: 1.5, 3: 2.0, 4: 0.25}
    for clone in (pickle.loads(pickle.dumps(w)), copy.deepcopy(w), copy.copy(w)):
        assert type(clone) is WeightVector and clone == w and not clone.vector.flags.writeable


CHANGES: list[tuple[str, Callable[[Weights], Any], dict[int, float]]] = [
    ("setitem", lambda w: w.__setitem__(0, 3.0), {0: 3.0, 1: 1.5, 3: 2.0, 4: 0.25}),
    ("setitem existing", lambda w: w.__setitem__(3, 5.0), {1: 1.5, 3: 5.0, 4: 0.25}),
    ("delitem", lambda w: w.__delitem__(3), {1: 1.5, 4: 0.25}),
    ("pop", lambda w: w.pop(1), {3: 2.0, 4: 0.25}),
    ("pop default", lambda w: w.pop(2, None), {1: 1.5, 3: 2.0, 4: 0.25}),
    ("popitem", lambda w: w.popitem(), {1: 1.5, 3: 2.0}),
    ("clear", lambda w: w.clear(), {}),
    ("update", lambda w: w.update({2: 7.0}), {1: 1.5, 2: 7.0, 3: 2.0, 4: 0.25}),
    ("setdefault", lambda w: w.setdefault(2, 7.0), {1: 1.5, 2: 7.0, 3: 2.0, 4: 0.25}),
    ("ior", lambda w: w.__ior__({1: 0.5}), {1: 0.5, 3: 2.0, 4: 0.25}),
]


@pytest.mark.parametrize("name, change, expected", CHANGES, ids=[c[0] for c in CHANGES])
def test_first_change_makes_a_plain_weights_in_place(
    name: str, change: Callable[[Weights], Any], expected: dict[int, float]
) -> None:
    w = _vector()
    vector = w.vector
    before = id(w)
    change(w)
    assert type(w) is Weights and id(w) == before and w.version == 1 and w == expected
    assert np.array_equal(vector, [INF, 1.5, INF, 2.0, 0.25])  # the shared vector is untouched
    w[8] = 1.0
    assert w.version == 2


def _lexicon_text(rng: np.random.Generator, words: int = 1800) -> str:
    """A character trie (as the benchmark's lexicon: one arc per state) with final costs; some final lines repeat
    a state (the last wins), some have no weight (one) and some the tropical zero (the state stops being final)."""
    children: list[dict[int, int]] = [{}]
    arcs, finals = [], []
    for _ in range(words):
        q = 0
        for c in rng.integers(1, 8, int(rng.integers(1, 9))).tolist():
            nxt = children[q].get(c)
            if nxt is None:
                nxt = children[q][c] = len(children)
                children.append({})
                arcs.append(f"{q}\t{nxt}\t{c}\t{rng.integers(0, 4) / 4}")
            q = nxt
        finals.append(f"{q}\t{rng.integers(1, 40) / 8}")
    finals += [finals[k].split("\t")[0] for k in range(0, len(finals), 7)]  # weight one
    finals += [f"{finals[k].split(chr(9))[0]}\tInfinity" for k in range(3, len(finals), 11)]  # zero: not final
    finals += [f"{finals[k].split(chr(9))[0]}\t0.5" for k in range(5, len(finals), 13)]  # final again
    order = rng.permutation(len(arcs) + len(finals))
    lines = [arcs[0], *[(arcs + finals)[k] for k in order.tolist() if k != 0]]  # state 0 first: the start state
    text = "\n".join(lines) + "\n"
    assert len(text) >= att_module._FAST_MIN_CHARS  # read in bulk
    return text


def _general(text: str, *args: Any, **kwargs: Any) -> WFSA:
    saved = att_module._FAST_MIN_CHARS
    att_module._FAST_MIN_CHARS = 1 << 62
    try:
        return read_att(text, *args, **kwargs)
    finally:
        att_module._FAST_MIN_CHARS = saved


def _bulk_paths() -> list[str]:
    return ["numpy"] + (["compiled"] if native.library() is not None else [])


@pytest.fixture(params=_bulk_paths())
def bulk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which bulk reader runs: the compiled scanner (when a compiler exists) or numpy (``KLEENE_NO_NATIVE=1``)."""
    monkeypatch.setenv("KLEENE_NO_NATIVE", "" if request.param == "compiled" else "1")
    return str(request.param)


@pytest.mark.parametrize("semiring, arc_type", [("min-plus", None), ("log", "log"), ("real", "log")])
@pytest.mark.slow
def test_bulk_readers_hold_final_weights_in_a_vector(bulk: str, semiring: str, arc_type: str | None) -> None:
    text = _lexicon_text(np.random.default_rng(5))
    fast, general = read_att(text, semiring, arc_type=arc_type), _general(text, semiring, arc_type=arc_type)
    assert isinstance(fast.final, WeightVector) and type(general.final) is Weights
    assert fast._arcs is None  # read into the arc store
    assert fast.final == general.final and general.final == fast.final and len(fast.final) == len(general.final)
    assert sorted(fast.final.items()) == sorted(general.final.items())
    zero = general.semiring.zero
    assert not any(w == zero for w in fast.final.values())
    store = arc_store(fast)
    assert store is not None and store.final is fast.final.vector  # shared, not copied
    assert np.array_equal(fast.vector(fast.final), general.vector(general.final))
    assert fast.initial == general.initial and fast.states == general.states
    assert fast.num_arcs == general.num_arcs == len(general.arcs) and fast._arcs is None  # counted, not listed
    assert fast.num_arcs == len(fast.arcs)
    strings = [[1, 2], [3], [1, 1, 4], []]
    assert fast.score_batch(strings) == pytest.approx(general.score_batch(strings), rel=1e-12)
    assert fast.pathsum() == pytest.approx(general.pathsum(), rel=1e-12)


def test_changing_final_weights_after_a_read_invalidates_the_arc_store(bulk: str) -> None:
    text = _lexicon_text(np.random.default_rng(6))
    a, b = read_att(text, "min-plus"), _general(text, "min-plus")
    before = arc_store(a)
    assert before is not None and a.pathsum() == b.pathsum()
    q = next(iter(a.final))  # a final state: change it, then remove it, then make a non-final one final
    other = int(np.flatnonzero(before.final == INF)[0])
    steps: list[Callable[[WFSA], Any]] = [
        lambda x: x.final.__setitem__(q, -3.0),
        lambda x: x.final.pop(q),
        lambda x: x.set_final(other, -5.0),
        lambda x: x.final.clear(),
    ]
    versions = []
    for step in steps:
        step(a)
        step(b)
        versions.append(a.final.version)
        assert type(a.final) is Weights and a.final == b.final
        after = arc_store(a)
        assert after is not None and after is not before
        assert np.array_equal(after.final, b.vector(b.final))
        assert a.pathsum() == b.pathsum()
        before = after
    assert versions == sorted(set(versions))  # every change counted
    assert math.isinf(a.pathsum())  # no final state left: the zero of min-plus


def test_copy_and_added_states_after_a_read(bulk: str) -> None:
    text = _lexicon_text(np.random.default_rng(7))
    a = read_att(text, "min-plus")
    twin = a.copy()
    assert isinstance(twin.final, WeightVector) and twin.final == a.final and twin.final is not a.final
    total = a.pathsum()
    twin.set_final(0, -2.0)
    assert 0 not in a.final and a.final == read_att(text, "min-plus").final and a.pathsum() == total
    assert twin.pathsum() == pytest.approx(min(total, -2.0))
    q = a.add_state("new")
    dense = a.vector(a.final)
    assert len(dense) == a.num_states and dense[q] == INF and q not in a.final
    dense[0] = 1.0  # a new array, not the shared vector
    assert 0 not in a.final
    a.set_final(q, 1.0)
    assert a.final[q] == 1.0 and a.vector(a.final)[q] == 1.0


def test_a_read_without_final_lines_has_empty_final_weights(bulk: str) -> None:
    text = "".join(f"{k}\t{k + 1}\t{k % 5 + 1}\t0.5\n" for k in range(6000))
    a, b = read_att(text, "min-plus"), _general(text, "min-plus")
    assert isinstance(a.final, WeightVector) and not a.final and a.final == {} == b.final
    assert math.isinf(a.pathsum()) and math.isinf(b.pathsum())
    assert a.score([1, 2]) == b.score([1, 2]) == INF


def test_a_zero_final_weight_in_the_real_semiring_is_no_final_weight(bulk: str) -> None:
    lines = [f"{k}\t{k + 1}\t1\t0.5" for k in range(6000)] + ["6000\t0.25", "3\t-0", "4\t0", "4\t2", "5\t0"]
    text = "\n".join(lines) + "\n"
    a, b = read_att(text, "real"), _general(text, "real")
    assert a.final == b.final == {6000: 0.25, 4: 2.0}
    assert 3 not in a.final and 5 not in a.final
    store = arc_store(a)
    assert store is not None and math.copysign(1.0, store.final[3]) == 1.0  # -0: stored as the zero itself


def test_state_names_of_dense_ids_hold_no_array() -> None:
    names = IdNames(5)
    assert names._ids is None and len(names) == 5 and list(names) == ["0", "1", "2", "3", "4"]
    assert names[3] == "3" and names[-1] == "4" and names[np.int64(2)] == "2" and names[1:4] == ["1", "2", "3"]
    assert np.array_equal(names.ids, np.arange(5))
    with pytest.raises(IndexError):
        names[5]
    index = IdIndex(names)
    assert len(index) == 5 and list(index) == list(names) and index["4"] == 4
    for missing in ("5", "-1", "01", "x", "", 3):
        assert missing not in index
    sparse_ids = IdNames(np.array([2, 5, 9]))
    assert list(sparse_ids) == ["2", "5", "9"] and IdIndex(sparse_ids)["9"] == 2 and "3" not in IdIndex(sparse_ids)


def test_a_dense_id_read_names_states_by_their_ids(bulk: str) -> None:
    text = _lexicon_text(np.random.default_rng(8))
    a, b = read_att(text, "min-plus"), _general(text, "min-plus")
    assert a.states == b.states == [str(k) for k in range(a.num_states)]
    if bulk == "compiled":  # the numpy reader makes a list
        assert isinstance(a._names, IdNames) and a._names._ids is None
    q = a.num_states - 1
    assert a.state(str(q)) == q and a.state_name(q) == str(q)
    trimmed = trim(a)
    assert trimmed.states == trim(b).states and trimmed.final == trim(b).final
    small = minimize(a, "deterministic")
    assert small.num_states == minimize(b, "deterministic").num_states
    assert small.score_batch([[1, 2], [3, 3]]) == pytest.approx(a.score_batch([[1, 2], [3, 3]]), rel=1e-12)
