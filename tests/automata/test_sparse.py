"""The sparse engine against the dense matrices, brute-force path enumeration and OpenFst."""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kleene.automata import ANY, EPSILON, WFSA, DivergenceError, algorithms, get_semiring
from kleene.automata import sparse as sp

from .oracle import brute_force_score
from .strategies import ALPHABET, wfsas

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]


def close(a: Any, b: Any, semiring: str) -> bool:
    """Equal up to the round-off of a linear solve (relative 1e-9 of well-conditioned small systems)."""
    if isinstance(a, bool) or semiring == "boolean":
        return bool(a) == bool(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=1e-8, abs_tol=1e-10)


def dense(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn`` on the dense path (the automaton is below the sparse threshold), DivergenceError as a value."""
    try:
        return fn(*args, **kwargs)
    except DivergenceError as exc:
        return exc


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_sparse_forward_equals_dense_and_enumeration(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, max_states=5, max_arcs=10))
    word = data.draw(st.lists(st.sampled_from(ALPHABET), max_size=4))
    expected = dense(algorithms.score, a, word)
    if isinstance(expected, DivergenceError):
        # the sparse engine ignores divergent epsilon cycles on no successful path; else it raises too
        with contextlib.suppress(DivergenceError):
            sp.forward(a, word)
        return
    assert close(sp.forward(a, word), expected, semiring)
    for cap in (0, 1):
        assert close(sp.forward(a, word, epsilon_cap=cap), brute_force_score(a, word, cap), semiring)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_sparse_pathsum_equals_dense(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, max_states=5, max_arcs=10))
    expected = dense(algorithms.pathsum, a)
    assume(not isinstance(expected, DivergenceError))
    assert close(sp.pathsum(a), expected, semiring)


def chain(semiring: str, n: int, weight: Any, loop: Any = None) -> WFSA:
    """q0 -a-> q1 -a-> ... -> q{n-1} (final), with an optional epsilon arc back to q0 of weight ``loop``."""
    a = WFSA(semiring)
    for _ in range(n):
        a.add_state()
    for i in range(n - 1):
        a.add_arc(i, i + 1, "a", weight)
    if loop is not None:
        a.add_arc(n - 1, 0, EPSILON, loop)
    a.set_initial(0)
    a.set_final(n - 1)
    return a


def test_large_chain_pathsum_and_score_are_fast() -> None:
    a = chain("log", 1000, -0.001, loop=-1.0)
    start = time.perf_counter()
    total = a.pathsum()
    assert time.perf_counter() - start < 2.0
    # one pass costs -0.999 (999 arcs), the loop -1: sum_k exp(-0.999 (k+1) - k) = exp(-0.999) / (1 - exp(-1.999))
    assert math.isclose(total, -0.999 - math.log1p(-math.exp(-1.999)), rel_tol=1e-12)
    b = chain("real", 4000, 1.0)
    start = time.perf_counter()
    assert b.score(["a"] * 3999) == 1.0
    assert time.perf_counter() - start < 2.0
    assert b.score(["a"] * 3998) == 0.0


@pytest.mark.parametrize("scale", [1.0, 750.0, 1e4])
def test_log_cycles_are_exact_across_the_float_range(scale: float) -> None:
    """A 100-state cycle whose arcs alternate +scale and -(scale + 1): the cycle weighs -50 whatever the scale."""
    n = 100
    a = WFSA("log")
    for _ in range(n):
        a.add_state()
    for i in range(n):
        a.add_arc(i, (i + 1) % n, "a", scale if i % 2 == 0 else -(scale + 1.0))
    a.set_initial(0, -scale)
    a.set_final(n - 1)
    # paths end at q99 after 99 arcs (+k full cycles): 50 arcs of +scale, 49 of -(scale+1), then cycles of -50
    expected = -scale + 50 * scale - 49 * (scale + 1.0) - math.log1p(-math.exp(-50.0))
    assert math.isclose(a.pathsum(), expected, rel_tol=1e-12, abs_tol=1e-9)
    distances = sp.shortest_distance(a)
    assert math.isclose(distances[0], -scale - math.log1p(-math.exp(-50.0)), rel_tol=1e-12, abs_tol=1e-9)


def test_divergent_cycle_off_every_successful_path_does_not_raise() -> None:
    a = chain("real", 100, 0.5)
    dead = a.add_state("dead")
    a.add_arc(0, dead, EPSILON, 1.0)
    a.add_arc(dead, dead, EPSILON, 2.0)  # diverges, but "dead" reaches no final state
    assert a.score(["a"] * 99) == 0.5**99
    assert math.isclose(a.pathsum(), 0.5**99, rel_tol=1e-12)
    a.set_final(dead)  # now the cycle lies on successful paths
    with pytest.raises(DivergenceError, match="dead -> dead"):
        a.pathsum()
    with pytest.raises(DivergenceError, match="dead"):
        a.score([])


def test_divergent_cycle_on_a_path_is_named() -> None:
    a = chain("max-plus", 300, -1.0, loop=302.0)
    with pytest.raises(DivergenceError, match="cycle q"):
        a.pathsum()
    b = chain("log", 300, 0.0, loop=1.0)
    with pytest.raises(DivergenceError, match="log star diverges"):
        b.pathsum()


def test_store_is_rebuilt_after_a_mutation() -> None:
    a = chain("min-plus", 100, 1.0)
    assert a.score(["a"] * 99) == 99.0
    a.add_arc(0, 99, "a", 5.0)
    assert a.score(["a"]) == 5.0
    a.set_final(50, 1.0)
    assert a.score(["a"] * 50) == 51.0
    a.final.pop(50)  # direct edits of the dicts are seen too
    assert a.score(["a"] * 50) == math.inf


def test_predicates_stay_symbolic_and_are_counted_in_the_pathsum() -> None:
    vocabulary = [f"w{i}" for i in range(20_000)]
    a = WFSA("real", alphabet=vocabulary)
    for _ in range(100):
        a.add_state()
    for i in range(99):
        a.add_arc(i, i + 1, ANY, 1.0 / 20_000)
    a.set_initial(0)
    a.set_final(99)
    store = sp.arc_store(a)
    assert store is not None and store.num_arcs == 99
    assert math.isclose(a.score(["w7"] * 99), 20_000.0**-99, rel_tol=1e-12)
    assert math.isclose(a.pathsum(), 1.0, rel_tol=1e-9)


def test_symbolic_weights_stay_on_the_dense_path() -> None:
    from kleene.automata.weights import weight_functions

    (mu,) = weight_functions("mu")
    a = chain("real", 100, 0.5)
    a.add_arc(0, 1, "b", mu)
    assert sp.engine_store(a) is None
    with pytest.raises(Exception, match="symbolic"):
        sp.shortest_distance(a)


# -- OpenFst ---------------------------------------------------------------------------------------------------------

pynini = pytest.importorskip("pynini")
fst = pytest.importorskip("pywrapfst")


def random_att(rng: np.random.Generator, n: int, m: int, semiring: str, scale: float) -> tuple[str, WFSA]:
    """A random acceptor over {a, b} with epsilon arcs (cycles included) whose cycles are all contracting."""
    lines = []
    # every cycle contracts: arcs cost at least 1 (tropical) / probabilities below exp(-1) (log), after potentials
    potential = rng.uniform(-scale, scale, size=n)
    for _ in range(m):
        s, d = rng.integers(0, n, size=2)
        label = rng.choice(["0", "1", "2"])
        cost = rng.uniform(1.0, 3.0) + potential[d] - potential[s]
        lines.append(f"{s}\t{d}\t{label}\t{float(cost)!r}")
    for q in rng.choice(n, size=max(1, n // 3), replace=False):
        lines.append(f"{q}\t{float(rng.uniform(0.0, 2.0) - potential[q])!r}")
    first = int(rng.integers(1, n)) if n > 1 else 0
    lines.insert(0, f"0\t{first}\t1\t{float(rng.uniform(1.0, 2.0) + potential[first] - potential[0])!r}")
    text = "\n".join(lines) + "\n"
    from kleene.automata import SymbolTable, read_att

    table = SymbolTable(["a", "b"])
    return text, read_att(text, semiring, symbols=table, arc_type="log" if semiring == "log" else "tropical")


@pytest.mark.parametrize("semiring", ["min-plus", "log"])
@pytest.mark.parametrize("scale", [0.0, 100.0, 1e4])
def test_shortest_distance_equals_openfst(semiring: str, scale: float) -> None:
    rng = np.random.default_rng(13)
    for _ in range(15):
        n = int(rng.integers(1, 40))
        text, a = random_att(rng, n, int(rng.integers(0, 4 * n)), semiring, scale)
        compiler = fst.Compiler(arc_type="standard" if semiring == "min-plus" else "log", acceptor=True)
        compiler.write(text)
        machine = compiler.compile()
        theirs = fst.shortestdistance(machine, delta=1e-12, reverse=True)
        total = float(theirs[machine.start()]) if machine.start() < len(theirs) else math.inf
        ours = sp.pathsum(a)
        ours_cost = ours if semiring == "min-plus" else -ours
        # OpenFst holds float32 weights: agreement to float32 precision of the largest magnitude involved
        bound = 1e-6 * max(1.0, abs(total), scale) * 10
        assert (math.isinf(total) and math.isinf(ours_cost)) or abs(ours_cost - total) <= bound, (text, ours, total)
        for _ in range(3):
            word = [str(x) for x in rng.choice(["a", "b"], size=int(rng.integers(0, 4)))]
            lines = [f"{i}\t{i + 1}\t{1 + 'ab'.index(x)}" for i, x in enumerate(word)] + [str(len(word))]
            compiler = fst.Compiler(arc_type=machine.arc_type(), acceptor=True)
            compiler.write("\n".join(lines) + "\n")
            composed = fst.compose(machine.copy().arcsort(sort_type="olabel"), compiler.compile())
            if composed.start() == pynini.NO_STATE_ID:
                theirs_word = math.inf
            else:
                ds = fst.shortestdistance(composed, delta=1e-12, reverse=True)
                theirs_word = float(ds[composed.start()]) if composed.start() < len(ds) else math.inf
            score = sp.forward(a, word)
            score_cost = score if semiring == "min-plus" else -score
            assert (math.isinf(theirs_word) and math.isinf(score_cost)) or abs(score_cost - theirs_word) <= bound


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_sparse_viterbi_equals_dense(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, max_states=5, max_arcs=10, signed=False))
    word = data.draw(st.lists(st.sampled_from(ALPHABET), max_size=4))
    expected = dense(algorithms.viterbi, a, word)
    if isinstance(expected, DivergenceError):
        with contextlib.suppress(DivergenceError):
            sp.viterbi(a, word)
        return
    ours = sp.viterbi(a, word)
    assert close(ours.weight, expected.weight, semiring)
    assert ours.found == expected.found
    if ours.found:  # the backtrace is a path deriving the word, of the reported weight
        s = a.semiring
        weight = a.initial[a.state(ours.start)]
        for step in ours.steps:
            arc = a.arcs[step.arc]
            assert (a.state_name(arc.src), a.state_name(arc.dst)) == (step.src, step.dst)
            weight = s.times(weight, arc.weight)
        weight = s.times(weight, a.final[a.state(ours.end)])
        assert [step.symbol for step in ours.steps if step.symbol is not None] == word
        assert close(weight, ours.weight, semiring)


def test_viterbi_of_a_long_chain_is_sparse_and_names_its_arcs() -> None:
    a = chain("max-plus", 2000, -1.0)
    a.add_arc(5, 5, EPSILON, -0.5)
    path = a.viterbi(["a"] * 1999)
    assert path.weight == -1999.0 and len(path.steps) == 1999
    assert path.steps[0].src == "q0" and path.end == "q1999" and path.steps[-1].arc == 1998


@pytest.mark.parametrize("semiring", ["min-plus", "log", "real", "max-plus"])
def test_fast_att_reader_equals_the_general_reader(semiring: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kleene.automata import SymbolTable, att, read_att

    rng = np.random.default_rng(5)
    n, m = 300, 4000
    lines = [f"{s}\t{d}\t{lab}\t{w:.3f}" for s, d, lab, w in zip(
        rng.integers(0, n, m).tolist(), rng.integers(0, n, m).tolist(), rng.integers(0, 4, m).tolist(),
        rng.uniform(2.0, 4.0, m).tolist())]  # epsilon cycles (label 0) of probability < 1/2: sums converge
    lines = [line.rsplit("\t", 1)[0] if i % 7 == 0 and line.split("\t")[2] != "0" else line  # weight one
             for i, line in enumerate(lines)]
    lines += [f"{q} 0.5" for q in range(0, n, 5)] + ["10", "15 Infinity" if semiring != "real" else "15 0"]
    text = "\n".join(lines) + "\n"
    arc_type = {"min-plus": "standard", "log": "log", "real": "log", "max-plus": "standard"}[semiring]
    table = SymbolTable(["x", "y", "z"])
    monkeypatch.setattr(att, "_FAST_MIN_CHARS", 0)
    fast = read_att(text, semiring, symbols=table, arc_type=arc_type)
    assert fast._arcs is None  # the fast path ran
    assert sp.forward(fast, ["x", "y"]) == pytest.approx(0.0, abs=1e300)  # scores from the store alone
    monkeypatch.setattr(att, "_FAST_MIN_CHARS", 10**12)
    general = read_att(text, semiring, symbols=table, arc_type=arc_type)
    assert (fast.states, fast.initial, fast.final) == (general.states, general.initial, general.final)
    for word in (["x"], ["x", "y"], ["z", "z", "x"]):
        assert close(fast.score(word), general.score(word), semiring)
    assert fast.arcs == general.arcs


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_public_entry_points_agree_across_the_threshold(semiring: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """score, all_spans, viterbi and pathsum of one 80-state automaton with epsilon cycles, sparse against dense."""
    rng = np.random.default_rng(11)
    s = get_semiring(semiring)
    a = WFSA(s, alphabet=ALPHABET)
    n = 80
    for _ in range(n):
        a.add_state()

    def weight(eps: bool) -> Any:
        p = float(rng.uniform(0.01, 0.08 if eps else 0.3))
        return {"real": p, "log": math.log(p), "max-plus": math.log(p), "min-plus": -math.log(p),
                "max-times": p, "boolean": True}[semiring]

    for _ in range(4 * n):
        src, dst = (int(x) for x in rng.integers(0, n, 2))
        label = [EPSILON, "a", "b", "c", ANY][int(rng.integers(0, 5))]
        a.add_arc(src, dst, label, weight(label is EPSILON))
    a.set_initial(0)
    for q in range(0, n, 4):
        a.set_final(q, weight(False))
    words = [["a"], ["a", "b", "c"], ["c", "c", "a", "b"], []]
    sparse_results = [a.score(w) for w in words], [a.all_spans(w).total for w in words], a.pathsum()
    best = [a.viterbi(w) for w in words]
    monkeypatch.setattr(sp, "SPARSE_MIN_STATES", 10**9)
    dense_results = [a.score(w) for w in words], [a.all_spans(w).total for w in words], a.pathsum()
    for ours, theirs in zip(sparse_results[0] + sparse_results[1], dense_results[0] + dense_results[1]):
        assert close(ours, theirs, semiring)
    assert close(sparse_results[2], dense_results[2], semiring)
    for path, word in zip(best, words):
        expected = a.viterbi(word)
        assert close(path.weight, expected.weight, semiring)


def test_the_fast_att_reader_follows_the_general_readers_label_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file large enough for the bulk reader gives the automaton the general reader gives: digit labels are ints,
    the alphabet is closed to the file's symbols (ints first, then strings), the same scores."""
    import random

    from kleene.automata import att, read_att

    rng = random.Random(0)
    lines = [f"{rng.randrange(50)} {rng.randrange(50)} {rng.choice('12ab')} {rng.random():.4f}" for _ in range(6000)]
    text = "\n".join([*lines, "3", "7 0.5"]) + "\n"
    assert len(text) >= att._FAST_MIN_CHARS
    fast = read_att(text, "min-plus")
    monkeypatch.setattr(att, "_FAST_MIN_CHARS", len(text) + 1)
    general = read_att(text, "min-plus")
    assert list(fast.alphabet) == list(general.alphabet) == [1, 2, "a", "b"]
    for symbols in ([1, 2, "a"], ["b", 1], [1, 1, 1, 1, 1], []):
        assert fast.score(symbols) == general.score(symbols)
    assert fast.pathsum() == pytest.approx(general.pathsum(), rel=1e-12)
