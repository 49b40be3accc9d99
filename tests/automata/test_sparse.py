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

from kleene.automata import ANY, EPSILON, WFSA, DivergenceError, algorithms, get_semiring, remove_epsilon
from kleene.automata import closure as epsilon_closure_module
from kleene.automata import sparse as sp
from kleene.automata.star import closure_on_useful

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
@pytest.mark.slow
def test_sparse_forward_equals_dense_and_enumeration(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, max_states=5, max_arcs=10))
    word = data.draw(st.lists(st.sampled_from(ALPHABET), max_size=4))
    expected = dense(algorithms.score, a, word)
    if isinstance(expected, DivergenceError):
        # the sparse engine ignores divergent epsilon cycles on no successful path; else it raises too
        with contextlib.suppress(DivergenceError):
            algorithms.score_on_store(a, word)
        return
    assert close(algorithms.score_on_store(a, word), expected, semiring)
    for cap in (0, 1):
        assert close(algorithms.score_on_store(a, word, epsilon_cap=cap), brute_force_score(a, word, cap), semiring)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.slow
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
            score = algorithms.score_on_store(a, word)
            score_cost = score if semiring == "min-plus" else -score
            assert (math.isinf(theirs_word) and math.isinf(score_cost)) or abs(score_cost - theirs_word) <= bound


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_sparse_viterbi_equals_dense(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring, max_states=5, max_arcs=10, signed=False))
    word = data.draw(st.lists(st.sampled_from(ALPHABET), max_size=4))
    expected = dense(algorithms.viterbi, a, word)
    if isinstance(expected, DivergenceError):
        with contextlib.suppress(DivergenceError):
            algorithms.viterbi_of_store(a, word)
        return
    ours = algorithms.viterbi_of_store(a, word)
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
    assert algorithms.score_on_store(fast, ["x", "y"]) == pytest.approx(0.0, abs=1e300)  # scores from the store alone
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


# -- epsilon removal: the sparse closure against the dense one --------------------------------------------------------


def epsilon_automaton(rng: np.random.Generator, semiring: str, n: int, epsilons: int, consuming: int,
                      diverge: bool = False) -> WFSA:
    """A random automaton whose epsilon arcs (``epsilons`` of them, so many cycles) keep the closure convergent:
    each state's epsilon weights sum to at most 0.9 in the real image (real: in absolute value, signs mixed),
    idempotent ones make every cycle weigh less than one. ``diverge``: one epsilon self-loop whose star diverges."""
    s = get_semiring(semiring)
    a = WFSA(s, alphabet=ALPHABET)
    for _ in range(n):
        a.add_state()
    src, dst = rng.integers(0, n, epsilons), rng.integers(0, n, epsilons)
    share = rng.uniform(0.1, 1.0, epsilons)
    share *= 0.9 / np.maximum(np.bincount(src, weights=share, minlength=n), 0.9)[src]
    for p, q, u in zip(src.tolist(), dst.tolist(), share.tolist()):
        weight = {"real": u * rng.choice([1.0, -1.0]), "log": math.log(u), "max-plus": math.log(u),
                  "min-plus": -math.log(u), "max-times": u, "boolean": True}[semiring]
        a.add_arc(p, q, EPSILON, weight)
    if diverge:
        q = int(rng.integers(0, n))
        a.add_arc(q, q, EPSILON, {"real": 1.5, "log": 0.5, "max-plus": 0.5, "min-plus": -0.5,
                                  "max-times": 1.5, "boolean": True}[semiring])
    labels = [*ALPHABET, ANY]
    for _ in range(consuming):
        u = float(rng.uniform(0.1, 2.0))
        weight = {"real": u * rng.choice([1.0, -1.0]), "log": math.log(u), "max-plus": math.log(u),
                  "min-plus": -math.log(u), "max-times": u, "boolean": True}[semiring]
        a.add_arc(int(rng.integers(0, n)), int(rng.integers(0, n)), labels[int(rng.integers(0, 4))], weight)
    for q in rng.choice(n, min(n, 2), replace=False).tolist():
        a.set_initial(q, 0.5 if semiring == "real" else s.one)
    for q in rng.choice(n, max(1, n // 3), replace=False).tolist():
        a.set_final(q, 0.25 if semiring == "real" else s.one)
    return a


def sparse_closure_as_dense(a: WFSA) -> np.ndarray:
    s = a.semiring
    e = a.epsilon_matrix()
    src, dst = np.nonzero(e != s.zero)
    rows = sp.epsilon_closure(s, a.num_states, src, dst, e[src, dst], a.states)
    out: np.ndarray = s.zeros((a.num_states, a.num_states))
    owner, cols, vals = rows.expand(np.arange(a.num_states))
    out[owner, cols] = vals
    for q in range(a.num_states):  # each row's columns ascend, without repeats
        c = rows.cols[rows.start[q] : rows.start[q] + rows.length[q]]
        assert np.all(np.diff(c) > 0)
    return out


def agree(x: Any, y: Any, semiring: str, scale: float) -> bool:
    """Equal up to round-off: exact for boolean; the closures here have ||(I - E)^-1|| <= 10 (real image), so a
    float64 result differs by a few ulps times 10 per accumulated term: 1e-11 relative to the largest entry."""
    if semiring == "boolean":
        return bool(x) == bool(y)
    x, y = float(x), float(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= 1e-11 * max(1.0, scale)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.slow
def test_sparse_epsilon_closure_equals_closure_matrix(semiring: str) -> None:
    """On many random epsilon graphs (1-40 states, up to 3 epsilon arcs per state: components of every size, a
    divergent loop in one case of five), the sparse closure is the dense ``closure_matrix`` star, or both raise."""
    s = get_semiring(semiring)
    for seed in range(60):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(1, 41))
        a = epsilon_automaton(rng, semiring, n, int(rng.integers(0, 3 * n + 1)), 0, diverge=seed % 5 == 4)
        expected = dense(algorithms.closure_matrix, a.epsilon_matrix(), s, None, a.states)
        if isinstance(expected, DivergenceError):
            with pytest.raises(DivergenceError, match="cycle"):
                sparse_closure_as_dense(a)
            continue
        got = sparse_closure_as_dense(a)
        values = np.asarray(expected, dtype=float)
        scale = float(np.max(np.abs(np.where(np.isfinite(values), values, 0.0))))
        mismatch = [(i, j) for i in range(n) for j in range(n) if not agree(got[i, j], expected[i, j], semiring, scale)]
        assert not mismatch, (seed, mismatch[:3], got[mismatch[0]], expected[mismatch[0]])


@pytest.mark.parametrize("semiring", ["real", "log", "max-plus", "boolean"])
@pytest.mark.slow
def test_sparse_epsilon_closure_of_a_component_larger_than_a_dense_block(semiring: str) -> None:
    """A 270-state epsilon cycle with chords (one component above ``DENSE_BLOCK``: per-row solves)."""
    s = get_semiring(semiring)
    rng = np.random.default_rng(7)
    a = epsilon_automaton(rng, semiring, 270, 130, 0)
    for q in range(270):
        a.add_arc(q, (q + 1) % 270, EPSILON, {"real": 0.05, "log": math.log(0.05), "max-plus": math.log(0.05),
                                             "boolean": True}[semiring])
    assert sp.DENSE_BLOCK < 270
    expected = algorithms.closure_matrix(a.epsilon_matrix(), s, None, a.states)
    got = sparse_closure_as_dense(a)
    if semiring == "boolean":
        assert np.array_equal(got, expected)
    else:
        finite = np.isfinite(expected)
        assert np.array_equal(finite, np.isfinite(got))
        assert np.allclose(got[finite], expected[finite], rtol=1e-10, atol=1e-12 if semiring == "real" else 1e-10)


def dense_transcription(a: WFSA) -> tuple[dict[tuple[int, int, Any], Any], dict[int, Any]]:
    """``remove_epsilon``'s docstring read literally on the dense closure C = closure_matrix(E): arcs
    ``p -x/(w ⊗ C[q, r])-> r`` plus-merged per (p, r, label), initial weights ``lambda ⊗ C``."""
    s = a.semiring
    c = closure_on_useful(a.epsilon_matrix(), s, None, a.states, lambda: algorithms.useful_mask(a))
    arcs: dict[tuple[int, int, Any], Any] = {}
    for arc in a.arcs:
        if arc.label.consumes:
            for r in range(a.num_states):
                w = s.times(arc.weight, c[arc.dst, r])
                key = (arc.src, r, arc.label)
                arcs[key] = s.plus(arcs.get(key, s.zero), w)
    initial = {r: s.sum(np.array([s.times(lam, c[p, r]) for p, lam in a.initial.items()]), axis=0)
               for r in range(a.num_states)}
    return ({k: w for k, w in arcs.items() if w != s.zero}, {r: w for r, w in initial.items() if w != s.zero})


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("closure", ["sparse", "dense"])
@pytest.mark.slow
def test_remove_epsilon_equals_the_dense_transcription_and_keeps_scores(
    semiring: str, closure: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On random automata with epsilon cycles (divergent ones off every successful path allowed), remove_epsilon
    gives the arcs and initial weights of the docstring's formula on the dense closure, keeps the states' names,
    and scores random strings as the input does; with the sparse closure (forced for these small automata) and
    the dense one."""
    monkeypatch.setattr(epsilon_closure_module, "DENSE_CLOSURE_STATES", 0 if closure == "sparse" else 10**9)
    checked = 0
    for seed in range(40):
        rng = np.random.default_rng(1000 + seed)
        n = int(rng.integers(1, 31))
        a = epsilon_automaton(rng, semiring, n, int(rng.integers(1, 2 * n + 1)), int(rng.integers(1, 3 * n + 1)),
                              diverge=seed % 4 == 3)
        try:
            arcs, initial = dense_transcription(a)
        except DivergenceError:
            with pytest.raises(DivergenceError, match="cycle"):
                remove_epsilon(a)
            continue
        plain = remove_epsilon(a)
        checked += 1
        assert not plain.has_epsilons and plain.states == a.states and plain.final == a.final
        got = {(arc.src, arc.dst, arc.label): arc.weight for arc in plain.arcs}
        assert len(got) == len(plain.arcs) and got.keys() == arcs.keys()
        assert plain.initial.keys() == initial.keys()
        values = [*arcs.values(), *initial.values()]
        scale = max([abs(float(v)) for v in values if math.isfinite(float(v))], default=1.0)
        for key, w in arcs.items():
            assert agree(got[key], w, semiring, scale), (seed, key, got[key], w)
        for q, w in initial.items():
            assert agree(plain.initial[q], w, semiring, scale), (seed, q, plain.initial[q], w)
        for _ in range(5):
            word = [ALPHABET[i] for i in rng.integers(0, 3, int(rng.integers(0, 4)))]
            x, y = a.score(word), plain.score(word)
            if semiring == "boolean":
                assert x == y
            else:
                assert math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9 * max(1.0, scale)), (seed, word, x, y)
    assert checked >= 20


@pytest.mark.parametrize("closure", ["sparse", "dense"])
def test_remove_epsilon_names_a_divergent_cycle_of_several_states(closure: str, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    monkeypatch.setattr(epsilon_closure_module, "DENSE_CLOSURE_STATES", 0 if closure == "sparse" else 10**9)
    for semiring, w in (("real", 1.2), ("log", 0.1), ("max-plus", 0.1), ("min-plus", -0.1), ("max-times", 1.2)):
        a = WFSA(semiring, alphabet=ALPHABET)
        a.add_states("p", "q", "r", "t")
        a.set_initial("p")
        a.set_final("t")
        a.add_arc("p", "q", EPSILON, w)
        a.add_arc("q", "r", EPSILON, w)
        a.add_arc("r", "p", EPSILON, w)
        a.add_arc("r", "t", "a", w)
        with pytest.raises(DivergenceError, match=r"cycle (p -> q -> r -> p|q -> r -> p -> q|r -> p -> q -> r)"):
            remove_epsilon(a)
        a.set_final("t", get_semiring(semiring).zero)  # no successful path: the cycle is off them all
        a.final = {}
        assert remove_epsilon(a).num_states == 4


@pytest.mark.slow
def test_remove_epsilon_of_a_large_automaton_is_sparse() -> None:
    """20k states with epsilon chains and loops: a dense closure would be a 20k x 20k matrix (3.2 GB)."""
    rng = np.random.default_rng(3)
    a = epsilon_automaton(rng, "log", 20_000, 20_000, 20_000)
    start = time.perf_counter()
    plain = remove_epsilon(a)
    elapsed = time.perf_counter() - start
    assert not plain.has_epsilons
    assert elapsed < 10.0, elapsed
    for word in (["a"], ["a", "b"], ["c", "c", "a"]):
        assert math.isclose(a.score(word), plain.score(word), rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("closure", ["sparse", "dense"])
def test_remove_epsilon_keeps_symbolic_arcs_over_either_closure(closure: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Symbolic consuming weights stay symbolic (the arcs are built one by one, over the closure's sparse rows);
    a symbolic epsilon weight is evaluated in ``env``."""
    import sympy

    from kleene.automata import weight_functions

    monkeypatch.setattr(epsilon_closure_module, "DENSE_CLOSURE_STATES", 0 if closure == "sparse" else 10**9)
    (mu,) = weight_functions("mu")
    gamma = sympy.Symbol("gamma")
    rng = np.random.default_rng(5)
    a = epsilon_automaton(rng, "real", 12, 20, 15)
    a.add_arc(3, 4, EPSILON, gamma)
    a.add_arc(4, 3, "a", mu)
    a.add_arc(5, 5, ANY, mu)
    plain = remove_epsilon(a, env={"gamma": 0.1})
    assert not plain.has_epsilons and any(arc.weight.has(mu) for arc in plain.arcs if hasattr(arc.weight, "has"))
    env = {"gamma": 0.1, "mu": {"a": 0.5, "b": 0.2, "c": -0.3}}
    for word in ([], ["a"], ["a", "b"], ["c", "a", "a"], ["b", "b", "c"]):
        x, y = a.score(word, env=env), plain.score(word, env=env)
        assert math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12), (word, x, y)


@pytest.mark.parametrize("big", [False, True])
def test_plus_merge_sorts_and_sums_equal_keys(big: bool) -> None:
    """Both key encodings (one int64 key; the columns sorted as such when a combined key would overflow)."""
    s = get_semiring("log")
    rng = np.random.default_rng(11)
    first_column = rng.integers(0, 4, 500) * (2**58 if big else 1)  # 3 * 2**58 * 5 overflows int64 keys
    keys = [first_column, rng.integers(0, 5, 500), rng.integers(0, 3, 500)]
    vals = rng.normal(size=500)
    first, sums = sp._plus_merge(s, keys, vals)
    expected: dict[tuple[int, ...], list[float]] = {}
    for i, key in enumerate(zip(*(k.tolist() for k in keys))):
        expected.setdefault(key, []).append(vals[i])
    got = [tuple(int(k[i]) for k in keys) for i in first]
    assert got == sorted(expected)
    assert all(first[j] == min(i for i, key in enumerate(zip(*(k.tolist() for k in keys))) if key == got[j])
               for j in range(len(got)))
    assert np.allclose(sums, [np.logaddexp.reduce(expected[key]) for key in got], rtol=1e-13, atol=0.0)
