"""``score``'s epsilon closure is computed once per automaton and cap (``WFSA.memo``), dropped by every change of the
automaton, and still raises only for a divergent cycle on a successful path of the string scored. The values are
checked against ``engine_fuzz.Dense``, the fuzz's independent oracle (Gauss-Jordan elimination in the semiring, per
string, on the states useful for it)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from itertools import product
from typing import Any

import pytest
import sympy

from kleene.automata import EPSILON, WFSA, algorithms, get_semiring, weight_functions
from kleene.automata.labels import Sym
from kleene.automata.sparse import arc_store, store_backed
from kleene.automata.wfsa import Arc
from kleene.errors import DivergenceError

from . import engine_fuzz

WORDS = [list(w) for n in range(4) for w in product("ab", repeat=n)]


def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the epsilon closures ``score`` computes (one entry per call of ``epsilon_closure_rows``)."""
    calls: list[int] = []
    original = algorithms.epsilon_closure_rows

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(algorithms, "epsilon_closure_rows", counting)
    return calls


def cyclic() -> WFSA:
    """Real weights, an epsilon cycle 0 -> 1 -> 0 of weight 0.12 (convergent), a symbol cycle through state 2."""
    a = WFSA("real", alphabet=["a", "b"])
    a.add_states("q0", "q1", "q2")
    a.set_initial(0)
    a.set_final(2, 0.5)
    a.add_arc(0, 1, EPSILON, 0.4)
    a.add_arc(1, 0, EPSILON, 0.3)
    a.add_arc(0, 2, "a", 1.0)
    a.add_arc(1, 2, "a", 2.0)
    a.add_arc(2, 0, "b", 0.7)
    a.add_arc(2, 2, EPSILON, 0.1)
    return a


def oracle(a: WFSA, word: Sequence[Hashable], cap: int | None = None) -> Any:
    return engine_fuzz.Dense.of(a).score(word, cap)


def test_score_computes_the_closure_once_for_many_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    a = cyclic()
    calls = counted(monkeypatch)
    for word in WORDS * 3:
        assert a.score(word) == pytest.approx(oracle(a, word), rel=1e-12, abs=1e-15)
    assert len(calls) == 1
    for word in WORDS:  # a cap is another closure, computed once too
        assert a.score(word, epsilon_cap=1) == pytest.approx(oracle(a, word, 1), rel=1e-12, abs=1e-15)
    assert len(calls) == 2
    span = a.all_spans(["a", "b", "a"])  # all_spans reads the same closure (every string's)
    assert len(calls) == 2
    for _ in range(3):  # a constant-weight batch runs on the arc store, whose closure is cached on the store
        assert a.score_batch(WORDS) == [a.score(w) for w in WORDS]
    assert len(calls) == 3
    assert span.total == pytest.approx(sum(oracle(a, ["a", "b", "a"][i:j]) for i in range(3) for j in range(i + 1, 4)),
                                       rel=1e-12)


def symbolic_over(symbols: str) -> WFSA:
    """q0 -x/mu-> q1 for each of ``symbols`` (a symbolic weight), q1 -ε/0.5-> q0; alphabet {a, b}."""
    (mu,) = weight_functions("mu")
    a = WFSA("real", alphabet=["a", "b"])
    a.add_states("q0", "q1")
    a.set_initial(0)
    a.set_final(1)
    for x in symbols:
        a.add_arc(0, 1, x, mu)
    a.add_arc(1, 0, EPSILON, 0.5)
    return a


def test_the_closure_does_not_depend_on_env_unless_an_epsilon_weight_is_symbolic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Symbolic weights on symbol arcs: one closure for every env. A symbolic epsilon weight: the closure of each
    call's env (nothing cached), so a new env gives its own score."""
    a = symbolic_over("a")
    calls = counted(monkeypatch)
    for k in range(1, 5):
        env = {"mu": {"a": 0.1 * k, "b": 0.0}}
        m = 0.1 * k  # a a: m (0.5 m) ; the epsilon arc 1 -> 0 is taken once between the two a's
        assert a.score(["a", "a"], env) == pytest.approx(m * 0.5 * m, rel=1e-12)
    assert len(calls) == 1
    g = sympy.Symbol("g")
    b = WFSA("real", alphabet=["a"])
    b.add_states("q0", "q1")
    b.set_initial(0)
    b.set_final(1)
    b.add_arc(0, 1, "a", 1.0)
    b.add_arc(1, 1, EPSILON, g)
    for k in range(1, 5):  # 1 / (1 - g)
        assert b.score(["a"], {"g": 0.1 * k}) == pytest.approx(1 / (1 - 0.1 * k), rel=1e-12)
    assert len(calls) == 1 + 4


def _add_epsilon_arc(a: WFSA) -> None:
    a.add_arc(2, 1, EPSILON, 0.25)


def _add_state_and_arcs(a: WFSA) -> None:
    q = a.add_state()
    a.add_arc(0, q, EPSILON, 0.5)
    a.add_arc(q, 2, "b", 1.0)


MUTATIONS: dict[str, Callable[[WFSA], None]] = {
    "add_arc": _add_epsilon_arc,
    "add_state": _add_state_and_arcs,
    "set_initial": lambda a: a.set_initial(1, 0.5),
    "set_final": lambda a: a.set_final(0, 2.0),
    "assign arcs": lambda a: setattr(a, "arcs", [*a.arcs[:-1], Arc(2, 2, EPSILON, 0.6)]),
    "assign initial": lambda a: setattr(a, "initial", {1: 1.0}),
    "assign final": lambda a: setattr(a, "final", {0: 1.0, 2: 0.5}),
    "initial dict": lambda a: a.initial.__setitem__(1, 3.0),
    "final dict": lambda a: a.final.update({1: 1.5}),
    "final dict removal": lambda a: a.final.pop(2),
    "append to arcs": lambda a: a.arcs.append(Arc(1, 1, EPSILON, 0.5)),
    "remove from arcs": lambda a: a.arcs.pop(),
    "append a symbol arc": lambda a: a.arcs.append(Arc(0, 0, Sym("b"), 1.0)),
    "assign semiring": lambda a: setattr(a, "semiring", get_semiring("max-times")),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_every_change_of_the_automaton_drops_the_cached_closure(
    mutation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = cyclic()
    calls = counted(monkeypatch)
    before = [a.score(w) for w in WORDS]
    assert len(calls) == 1
    MUTATIONS[mutation](a)
    after = [a.score(w) for w in WORDS]
    assert len(calls) == 2
    assert after == pytest.approx([oracle(a, w) for w in WORDS], rel=1e-12, abs=1e-15)
    assert after != before  # every mutation above changes some score
    assert [a.score(w) for w in WORDS] == after and len(calls) == 2  # and the new closure is cached in turn


def test_divergence_off_the_strings_paths_with_the_cache_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    """A divergent epsilon cycle at a useful state (read after b only) and one at a dead state: strings that do not
    reach the first score finitely, every time, the others raise, every time, before and after each other."""
    a = WFSA("real", alphabet=["a", "b", "c"])
    a.add_states("start", "end", "loop", "dead")
    a.set_initial(0)
    a.set_final(1)
    a.add_arc(0, 1, "a", 0.5)
    a.add_arc(0, 2, "b", 1.0)
    a.add_arc(2, 2, EPSILON, 2.0)  # 1 + 2 + 4 + ...: diverges
    a.add_arc(2, 1, "c", 1.0)
    a.add_arc(0, 3, EPSILON, 1.0)
    a.add_arc(3, 3, EPSILON, 3.0)  # diverges too, but no path through "dead" is successful
    calls = counted(monkeypatch)
    for _ in range(3):
        assert a.score(["a"]) == 0.5
        assert a.score(["c"]) == 0.0
        with pytest.raises(DivergenceError, match="loop"):
            a.score(["b", "c"])
        assert a.score_batch([["a"], ["a"]]) == [0.5, 0.5]
    # one closure of the useful states (cached: it diverges) and one of the arc store's (score_batch's, cached
    # too), then each score's own closure for its string, as before the cache
    assert len(calls) == 2 + 3 * 3
    a.add_arc(1, 1, "a", 1.0)
    del a.arcs[a.arcs.index(Arc(2, 2, EPSILON, 2.0))]
    for _ in range(3):  # only the dead state's cycle diverges now: the useful states' closure is cached and read
        assert a.score(["b", "c"]) == 1.0
        assert a.score(["a", "a"]) == 0.5
    assert len(calls) == 2 + 3 * 3 + 1


def matrices_built(monkeypatch: pytest.MonkeyPatch) -> list[Hashable]:
    """The symbols whose transition matrix ``WFSA.transition_matrix`` builds from now on (one entry per build)."""
    built: list[Hashable] = []
    original = WFSA.transition_matrix

    def counting(self: WFSA, symbol: Hashable | None, env: Any = None) -> Any:
        built.append(symbol)
        return original(self, symbol, env)

    monkeypatch.setattr(WFSA, "transition_matrix", counting)
    return built


def test_constant_weights_build_each_symbols_matrix_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The matrices of the first ``SHARED_MATRICES`` symbols are the automaton's (built once for every string); the
    symbols read after them are built per call, and every score stays the oracle's."""
    a = WFSA("real", alphabet=list("abcde"))
    a.add_states("q0", "q1")
    a.set_initial(0)
    a.set_final(1)
    for k, x in enumerate("abcde"):
        a.add_arc(0, 1, x, 0.1 * (k + 1))
        a.add_arc(1, 1, x, 0.5)
    a.add_arc(1, 0, EPSILON, 0.25)
    built = matrices_built(monkeypatch)
    monkeypatch.setattr(algorithms, "SHARED_MATRICES", 2)
    words = [list(w) for w in product("abcde", repeat=2)]
    for _ in range(2):
        assert [a.score(w) for w in words] == pytest.approx([oracle(a, w) for w in words], rel=1e-12)
    assert sorted(x for x in built if x in ("a", "b")) == ["a", "b"]  # the first two symbols read: once
    assert len([x for x in built if x == "e"]) == 2 * 9  # the others: once per call that reads them


def test_a_symbolic_batch_evaluates_each_symbols_matrix_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Symbolic weights: ``score_batch`` evaluates each symbol's matrix in ``env`` once for the batch (``score``
    once per call), and scores as ``score`` does."""
    a = symbolic_over("ab")
    built = matrices_built(monkeypatch)
    for k in range(1, 3):
        env = {"mu": {"a": 0.1 * k, "b": 0.3}}
        built.clear()
        batch = a.score_batch(WORDS, env)
        assert sorted(x for x in built if x is not None) == ["a", "b"]
        assert batch == [a.score(w, env) for w in WORDS]
        m = {"a": 0.1 * k, "b": 0.3}
        assert batch[WORDS.index(["a", "b"])] == pytest.approx(m["a"] * 0.5 * m["b"], rel=1e-12)


def test_listing_arcs_held_in_the_arc_store_keeps_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """An automaton whose arcs live in its arc store only lists them when the closure is first computed: the same
    arcs, so the closure stays cached."""
    a = cyclic()
    store = arc_store(a)
    assert store is not None
    held = store_backed(a.semiring, a.alphabet, None, a.states, store, dict(a.initial), dict(a.final))
    assert held._arcs is None
    builds: list[int] = []

    def build() -> int:
        builds.append(1)
        return len(builds)

    assert held.memo("probe", build) == 1
    calls = counted(monkeypatch)
    assert [held.score(w) for w in WORDS * 2] == [a.score(w) for w in WORDS * 2]
    assert held._arcs is not None and len(calls) == 2  # one closure each
    assert held.memo("probe", build) == 1 and len(builds) == 1  # listing the arcs changed nothing
    held.add_arc(0, 0, "b", 0.5)
    assert held.memo("probe", build) == 2
