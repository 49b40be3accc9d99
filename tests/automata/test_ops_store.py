"""union, concat, closure and intersect on the arc store (constant weights, symbol labels) against the Arc-object
versions (the same named states, arcs and weights), against OpenFst (pynini) with epsilons on both sides, and
against brute force on the score of every short string, in every semiring."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from typing import Any

import pytest

from kleene.automata import EPSILON, WFSA, get_semiring, ops, trim
from kleene.errors import SemiringError

from .openfst_ops import ALPHABET, to_openfst
from .openfst_ops import _openfst_score as openfst_score

pynini = pytest.importorskip("pynini", reason="pynini (OpenFst) is the oracle of this module")

@pytest.fixture(autouse=True)
def intersect_on_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """The array version of intersect even for small operands (test_ops.py checks the Arc-object one)."""
    monkeypatch.setattr(ops, "ARRAY_INTERSECT_MIN_ARCS", 0)


SEMIRINGS = ("min-plus", "max-plus", "max-times", "boolean", "log", "real")
STRINGS = [w for k in range(4) for w in itertools.product(ALPHABET, repeat=k)]


def random_automaton(rng: random.Random, semiring: str, names: str = "q{}") -> WFSA:
    """Up to 4 states, 8 arcs (a quarter epsilons); weights that keep every closure convergent (real and log:
    each state's arcs and final weight below probability 1; min-plus costs >= 0, max-plus <= 0, max-times <= 1)."""
    s = get_semiring(semiring)
    n = rng.randint(1, 4)
    a = WFSA(s, ALPHABET)
    for q in range(n):
        a.add_state(names.format(q))
    arcs = [(rng.randrange(n), rng.randrange(n), None if rng.random() < 0.25 else rng.choice(ALPHABET))
            for _ in range(rng.randint(0, 8))]
    finals = [q for q in range(n) if rng.random() < 0.5] or [n - 1]

    def weight(share: float) -> Any:
        cost = rng.randint(0, 16) / 8
        return {"min-plus": cost, "max-plus": -cost, "max-times": math.exp(-cost), "boolean": True,
                "log": math.log(share), "real": share}[semiring]

    for q in range(n):
        mine = [arc for arc in arcs if arc[0] == q]
        share = rng.uniform(0.2, 0.9) / (len(mine) + 1)
        for src, dst, label in mine:
            a.add_arc(src, dst, EPSILON if label is None else label, weight(share * rng.uniform(0.5, 1.0)))
        if q in finals:
            a.set_final(q, weight(share))
    a.set_initial(0, weight(0.9))
    if rng.random() < 0.3 and n > 1:
        a.set_initial(n - 1, weight(0.5))
    return a


def close(semiring: str, x: Any, y: Any, tolerance: float = 1e-9) -> bool:
    if isinstance(x, bool) or isinstance(y, bool):
        return bool(x) == bool(y)
    x, y = float(x), float(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return math.isclose(x, y, rel_tol=tolerance, abs_tol=tolerance)


OPERATIONS: dict[str, Callable[[WFSA, WFSA], WFSA]] = {
    "union": ops.union,
    "concat": ops.concat,
    "plus": lambda a, _: ops.kleene_plus(a),
    "star": lambda a, _: ops.kleene_star(a),
    "intersect": ops.intersect,
}


def listing(w: WFSA) -> tuple[Any, ...]:
    """The automaton by state names: names, arcs (as a sorted list), initial and final weights."""
    names = w.states
    arcs = sorted((names[x.src], names[x.dst], str(x.label), x.weight) for x in w.arcs)
    return (sorted(names), arcs, sorted((names[q], v) for q, v in w.initial.items()),
            sorted((names[q], v) for q, v in w.final.items()))


def in_order(w: WFSA) -> list[tuple[Any, ...]]:
    return [(w.state_name(x.src), w.state_name(x.dst), str(x.label), x.weight) for x in w.arcs]


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_the_array_versions_build_what_the_arc_versions_build(operation: str, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """The same named states, arcs, labels and weights (exactly: the same semiring operations on the same numbers);
    the array result holds its arcs in its arc store only."""
    for i in range(60):
        rng = random.Random(f"{operation}:{i}")
        semiring = SEMIRINGS[i % len(SEMIRINGS)]
        a, b = random_automaton(rng, semiring), random_automaton(rng, semiring, names="r{}")
        fast = OPERATIONS[operation](a, b)
        assert fast._arcs is None  # built on the arc store
        with monkeypatch.context() as patch:
            patch.setattr(ops, "_array_operands", lambda *operands: None)
            slow = OPERATIONS[operation](a, b)
        assert fast.num_states == slow.num_states and fast.num_arcs == slow.num_arcs
        assert listing(fast) == listing(slow), (operation, semiring, a.to_att(), b.to_att())
        if operation != "intersect":  # the same arc order too (intersect numbers its pairs level by level)
            assert in_order(fast) == in_order(slow)
        assert fast.alphabet is not None and list(fast.alphabet) == list(slow.alphabet or [])


def brute(operation: str, a: WFSA, b: WFSA, word: tuple[str, ...]) -> Any:
    """The score the operation's definition gives ``word`` from the operands' scores (None: not finite here)."""
    s = a.semiring
    if operation == "union":
        return s.plus(a.score(word), b.score(word))
    if operation == "intersect":
        return s.times(a.score(word), b.score(word))
    if operation == "concat":
        total = s.zero
        for k in range(len(word) + 1):
            total = s.plus(total, s.times(a.score(word[:k]), b.score(word[k:])))
        return total
    if not s.is_zero(a.score(())):  # a star over factors that may be empty: an infinite sum
        return None
    # plus/star: ⊕ over factorisations into non-empty factors (star adds the empty string's one)
    best: list[Any] = [s.one if operation == "star" else s.zero] + [s.zero] * len(word)
    plus_from: list[Any] = [s.zero] * (len(word) + 1)
    for end in range(1, len(word) + 1):
        for start in range(end):
            head = s.one if start == 0 else plus_from[start]
            plus_from[end] = s.plus(plus_from[end], s.times(head, a.score(word[start:end])))
    if not word:
        return best[0]
    return plus_from[len(word)]


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_scores_follow_the_definitions_in_every_semiring(operation: str) -> None:
    for i in range(12):
        rng = random.Random(f"brute:{operation}:{i}")
        semiring = SEMIRINGS[i % len(SEMIRINGS)]
        a, b = random_automaton(rng, semiring), random_automaton(rng, semiring)
        result = OPERATIONS[operation](a, b)
        for word in STRINGS:
            expected = brute(operation, a, b, word)
            if expected is not None:
                got = result.score(word)
                assert close(semiring, got, expected), (operation, semiring, word, got, expected, a.to_att())


OPENFST = {
    "union": lambda x, y: pynini.union(x, y),
    "concat": lambda x, y: pynini.concat(x, y),
    "plus": lambda x, _: pynini.closure(x, 1),
    "star": lambda x, _: pynini.closure(x),
    "intersect": lambda x, y: pynini.intersect(x, y.arcsort("ilabel")),
}


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_scores_agree_with_openfst_with_epsilons_on_both_sides(operation: str) -> None:
    """min-plus (exact eighths) and log (OpenFst's float32: 1e-5); every operand has epsilon arcs."""
    for i in range(16):
        rng = random.Random(f"openfst:{operation}:{i}")
        semiring = ("min-plus", "log")[i % 2]
        a, b = random_automaton(rng, semiring), random_automaton(rng, semiring)
        a.add_arc(rng.randrange(a.num_states), rng.randrange(a.num_states), EPSILON, a.semiring.one if semiring ==
                  "min-plus" else math.log(0.05))
        b.add_arc(rng.randrange(b.num_states), rng.randrange(b.num_states), EPSILON, b.semiring.one if semiring ==
                  "min-plus" else math.log(0.05))
        ours = OPERATIONS[operation](a, b)
        x, y = (pynini.Fst.from_pywrapfst(to_openfst(w)) for w in (a, b))
        theirs = OPENFST[operation](x, y)
        for word in STRINGS:
            expected = openfst_score(theirs, word)
            got = float(ours.score(word))
            got = -got if semiring == "log" else got
            assert close(semiring, got, expected, 1e-5), (operation, word, got, expected, a.to_att(), b.to_att())


def test_intersect_connected_has_openfsts_states_and_arcs_without_epsilons() -> None:
    """Without epsilons both products are the reachable pairs: once trimmed, OpenFst's connected result."""
    for i in range(40):
        rng = random.Random(f"counts:{i}")
        a, b = random_automaton(rng, "min-plus"), random_automaton(rng, "min-plus")
        for w in (a, b):
            w.arcs = [arc for arc in w.arcs if arc.label.consumes]
        a.initial = {0: 0.0}
        b.initial = {0: 0.0}
        ours = trim(ops.intersect(a, b))
        x, y = (pynini.Fst.from_pywrapfst(to_openfst(w)) for w in (a, b))
        theirs = pynini.intersect(x, y.arcsort("ilabel"))
        assert (ours.num_states, ours.num_arcs) == (theirs.num_states(), sum(theirs.num_arcs(q)
                                                                           for q in theirs.states()))


def test_intersect_numbers_pairs_by_a_dict_when_the_pair_space_is_large(monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(10):
        rng = random.Random(f"dict:{i}")
        a, b = random_automaton(rng, "log"), random_automaton(rng, "log")
        dense = ops.intersect(a, b)
        monkeypatch.setattr(ops._PairIds, "DENSE_UP_TO", 0)
        sparse = ops.intersect(a, b)
        monkeypatch.undo()
        assert listing(dense) == listing(sparse)


def test_intersect_primes_pair_names_that_would_be_equal() -> None:
    """States named ``x,y`` and ``x`` / ``y,z`` would both make ``(x,y,z)``: the second is primed (as the Arc
    version does)."""
    a = WFSA("min-plus", ALPHABET)
    a.add_states("x,y", "x")
    b = WFSA("min-plus", ALPHABET)
    b.add_states("z", "y,z")
    a.set_initial("x,y")
    a.set_initial("x")
    b.set_initial("z")
    b.set_initial("y,z")
    names = ops.intersect(a, b).states
    assert len(set(names)) == 4 and "(x,y,z)" in names and "(x,y,z)'" in names


def test_union_of_many_is_the_fold_of_unions() -> None:
    """``union(a, b, c, ...)`` in one pass: the states, names, arcs (in order), weights, alphabet and name of
    ``union(union(a, b), c)...``."""
    for i in range(30):
        rng = random.Random(f"many:{i}")
        semiring = SEMIRINGS[i % len(SEMIRINGS)]
        operands = [random_automaton(rng, semiring, names=f"s{k}.{{}}") for k in range(rng.randint(3, 5))]
        for k, w in enumerate(operands):
            w.name = f"w{k}" if i % 3 else None
        together = ops.union(*operands)
        folded = operands[0]
        for w in operands[1:]:
            folded = ops.union(folded, w)
        assert together.states == folded.states and together.name == folded.name
        assert in_order(together) == in_order(folded)
        assert dict(together.initial) == dict(folded.initial) and dict(together.final) == dict(folded.final)
        assert list(together.alphabet or []) == list(folded.alphabet or [])


def test_union_of_many_refuses_mixed_semirings() -> None:
    a, b, c = WFSA("log", ALPHABET), WFSA("log", ALPHABET), WFSA("min-plus", ALPHABET)
    with pytest.raises(SemiringError, match="log and min-plus"):
        ops.union(a, b, c)


def test_best_strings_of_an_automaton_held_in_its_store_are_those_of_its_arcs() -> None:
    """``shortest_paths`` reads a store-held automaton's arcs state by state (the subsets it visits, no Arc list;
    log and max-times automata reach it store-held, as their Viterbi image): the same weights as on the same
    automaton with its Arc list."""
    from kleene.automata import shortest_paths

    for i in range(30):
        rng = random.Random(f"best:{i}")
        semiring = ("min-plus", "log", "max-times")[i % 3]
        held = ops.union(random_automaton(rng, semiring), random_automaton(rng, semiring))
        ours = shortest_paths(held, 4)
        listed = held.copy()  # reads the arcs: an Arc list
        assert listed._arcs is not None
        theirs = shortest_paths(listed, 4)
        assert [w for _, w in ours] == pytest.approx([w for _, w in theirs], rel=1e-12)
