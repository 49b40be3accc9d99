"""Random automata and checks of determinize, minimize, push, shortest paths and rmepsilon against OpenFst.

Shared by ``test_determinize_minimize.py`` (a few hundred automata per operation) and
``benchmarks/fuzz_openfst_ops.py`` (thousands). Every check takes one random automaton, runs the kleene
operation and pynini's, and raises AssertionError naming what differs:

- scores: the result gives every string up to ``LENGTH`` symbols the input's score (kleene's ``score`` of the
  input is itself checked against OpenFst in ``test_pynini.py``);
- counts: where both results are canonical (the minimal deterministic automaton, the subsets of a
  determinization of a trimmed input) the numbers of states and (symbol-expanded) arcs equal OpenFst's;
- weights: the n best weights, and the multiset of pushed weights, equal OpenFst's.

Tropical weights are eighths (exact in OpenFst's float32, so equal means equal); log weights are substochastic
(every closure converges) and compared with a tolerance for float32 (OpenFst) or for the quantisation ``delta``
of determinization, which may merge residuals that differ by less than ``delta`` once per symbol read.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pynini
import pywrapfst as fst

from kleene.automata import (
    EPSILON,
    WFSA,
    BudgetExceededError,
    SymbolTable,
    determinize,
    get_semiring,
    minimize,
    push,
    remove_epsilon,
    shortest_paths,
    trim,
    write_att,
)
from kleene.automata import closure as epsilon_closure_module
from kleene.automata.determinize import DEFAULT_DELTA
from kleene.automata.paths import _in_semiring

ALPHABET = ("a", "b", "c")
SYMBOLS = SymbolTable(ALPHABET)
LENGTH = 4  # strings up to this length are compared
#: the OpenFst arc type each kleene semiring is written as (through write_att's homomorphisms)
ARC_TYPE = {
    "min-plus": "tropical", "max-plus": "tropical", "max-times": "tropical", "boolean": "tropical", "log": "log"
}
FLOAT32 = 2.0**-20  # relative rounding of OpenFst's float32 weights, with room for a few operations


def random_acceptor(
    rng: random.Random, semiring: str, *, max_states: int = 5, max_arcs: int = 10, epsilons: bool = False,
    acyclic: bool = False, epsilon_rate: float = 0.25,
) -> WFSA:
    """A random acceptor over ALPHABET with one initial state (weight one) and symbol labels (with ``epsilons``, a
    share ``epsilon_rate`` of the arcs are epsilons).

    min-plus costs (and max-plus negated costs, max-times ``e^-cost``) are eighths in [0, 3]; log weights are
    ``log p`` with each state's outgoing plus final probability below one.
    """
    n = rng.randint(1, max_states)
    arcs: list[tuple[int, int, str | None]] = []
    for _ in range(rng.randint(0, max_arcs)):
        src, dst = rng.randrange(n), rng.randrange(n)
        if acyclic and src >= dst:
            continue
        label = None if epsilons and rng.random() < epsilon_rate else rng.choice(ALPHABET)
        arcs.append((src, dst, label))
    finals = [q for q in range(n) if rng.random() < 0.5] or [rng.randrange(n)]
    s = get_semiring(semiring)
    a = WFSA(s, SYMBOLS)
    for _ in range(n):
        a.add_state()
    a.set_initial(0)

    def cost() -> Any:
        eighths = rng.randint(0, 24) / 8
        return {"min-plus": eighths, "max-plus": -eighths, "max-times": math.exp(-eighths)}.get(semiring, True)

    if semiring == "log":
        for q in range(n):
            mine = [i for i, arc in enumerate(arcs) if arc[0] == q]
            raw = [rng.uniform(0.05, 1.0) for _ in range(len(mine) + 1)]
            mass = rng.uniform(0.3, 0.9) / sum(raw)
            for i, r in zip(mine, raw):
                src, dst, label = arcs[i]
                a.add_arc(src, dst, EPSILON if label is None else label, math.log(mass * r))
            if q in finals:
                a.set_final(q, math.log(mass * raw[-1]))
        return a
    for src, dst, label in arcs:
        a.add_arc(src, dst, EPSILON if label is None else label, cost())
    for q in finals:
        a.set_final(q, cost())
    return a


def strings(length: int = LENGTH) -> Iterator[tuple[str, ...]]:
    for k in range(length + 1):
        yield from itertools.product(ALPHABET, repeat=k)


def to_openfst(a: WFSA) -> Any:
    """``a`` compiled by OpenFst from kleene's AT&T text (as tropical or log arcs)."""
    arc_type = ARC_TYPE[a.semiring.name]
    compiler = fst.Compiler(arc_type="standard" if arc_type == "tropical" else "log", acceptor=True)
    compiler.write(write_att(a, SYMBOLS, arc_type=arc_type))
    return compiler.compile()


def counts(machine: Any) -> tuple[int, int]:
    return machine.num_states(), sum(machine.num_arcs(q) for q in machine.states())


def kleene_counts(a: WFSA) -> tuple[int, int]:
    """States, and arcs with each label counted once per symbol it reads (as OpenFst would hold them)."""
    return a.num_states, sum(len(arc.label.symbols(a.alphabet)) for arc in a.arcs)


def scores_agree(expected: WFSA, got: WFSA | Sequence[WFSA], tolerance: float, what: str) -> None:
    """Every string up to LENGTH has the same score in ``expected`` as in ``got`` (one automaton or several: the
    input's scores are computed once) (``tolerance``: absolute on log/tropical values, relative on max-times).

    Each automaton scores all the strings in one ``score_batch`` (checked equal to ``score`` string by string in
    ``test_score_batch.py`` and by the engine's fuzz), which advances them together on epsilon-free automata."""
    results = [got] if isinstance(got, WFSA) else list(got)
    words = list(strings())
    expected_scores = expected.score_batch(words)
    for result in results:
        for word, x, y in zip(words, expected_scores, result.score_batch(words), strict=True):
            if math.isinf(float(x)) or math.isinf(float(y)) or isinstance(x, bool):
                assert x == y, f"{what}: {word} scores {x} in the input, {y} in the result"
            else:
                assert math.isclose(x, y, rel_tol=tolerance, abs_tol=tolerance), f"{what}: {word}: {x} vs {y}"


def tolerance_for(a: WFSA, quantised: bool) -> float:
    """Exact for eighths; for log, a float64 chain of logaddexp, plus ``delta`` per symbol when quantised."""
    if a.semiring.name != "log":
        return 1e-12
    return (LENGTH + 1) * DEFAULT_DELTA if quantised else 1e-9


# -- the checks ------------------------------------------------------------------------------------------------


def check_determinize(a: WFSA) -> bool:
    """kleene's determinization scores like the input; on an epsilon-free input with exact (eighths) weights its
    states and arcs are OpenFst's (the same subsets with the same residuals). Returns False when the twins
    property fails (kleene's budget is exceeded: skipped)."""
    try:
        ours = determinize(a, max_states=200)
    except BudgetExceededError:
        return False
    scores_agree(a, ours, tolerance_for(a, quantised=True), "determinize")
    if a.semiring.name != "log" and not a.has_epsilons:
        theirs = fst.determinize(to_openfst(trim(a)), nstate=1000)
        assert kleene_counts(ours) == counts(theirs), (kleene_counts(ours), counts(theirs), a.to_att())
    return True


def check_minimize(a: WFSA) -> bool:
    """kleene's minimal deterministic automaton scores like the input and has OpenFst's numbers of states and
    arcs (OpenFst: rmepsilon, determinize, push, minimize).

    OpenFst has no initial weight: pushing leaves the total weight on the start state's arcs (or on a new start
    state when the start has incoming arcs), which can keep the start apart from a state kleene merges it with.
    OpenFst therefore gets the input with its final weights divided by the total, so that the total is one.
    """
    try:
        ours = minimize(a, "deterministic", max_states=200)
    except BudgetExceededError:
        return False
    scores_agree(a, ours, tolerance_for(a, quantised=True), "minimize")
    s = a.semiring
    total = a.pathsum()
    if s.is_zero(total):
        assert ours.num_states == 0, ours.to_att()
        return True
    normalised = a.copy()
    normalised.final = {q: s.divide(w, total) for q, w in a.final.items()}
    machine = to_openfst(normalised).rmepsilon().connect()
    machine = fst.determinize(machine, nstate=1000) if s.name != "log" else fst.determinize(machine)
    machine = fst.push(machine, delta=1e-7, push_weights=True).minimize()
    if s.name != "log":
        assert kleene_counts(ours) == counts(machine), (kleene_counts(ours), counts(machine), a.to_att())
        return True
    if _has_cycle(a):  # log residuals around cycles converge and are cut off by delta at points float32 moves
        return True
    # acyclic: exact residuals on both sides (OpenFst's float32 could straddle a quantisation boundary, which
    # has not happened in thousands of runs)
    theirs = _without_added_start(machine)
    assert kleene_counts(ours) == theirs, (kleene_counts(ours), theirs, a.to_att())
    return True


def _has_cycle(a: WFSA) -> bool:
    import networkx as nx

    return not nx.is_directed_acyclic_graph(nx.DiGraph([(arc.src, arc.dst) for arc in a.arcs]))


def _without_added_start(machine: Any) -> tuple[int, int]:
    """OpenFst's counts, less the start state that pushing adds when the start has incoming arcs and the total
    weight is not exactly one (in float32 it is off by ~1e-7): a non-final start whose one arc is an epsilon
    arc of weight ~one."""
    states, arcs = counts(machine)
    start = machine.start()
    if start == pynini.NO_STATE_ID or machine.num_arcs(start) != 1 or float(machine.final(start)) != math.inf:
        return states, arcs
    arc = next(iter(machine.arcs(start)))
    if arc.ilabel == 0 and abs(float(arc.weight)) < 1e-4:
        return states - 1, arcs - 1
    return states, arcs


def check_push(a: WFSA, towards: str = "initial") -> bool:
    """Pushed weights score like the input, and the multiset of arc and final weights equals OpenFst's
    (``push(remove_total_weight=True)`` on the trimmed input)."""
    ours = push(a, towards)  # type: ignore[arg-type]
    scores_agree(a, ours, tolerance_for(a, quantised=False), f"push towards {towards}")
    machine = to_openfst(trim(a))
    theirs = fst.push(machine, delta=1e-7, push_weights=True, remove_total_weight=True,
                      reweight_type="to_initial" if towards == "initial" else "to_final")
    ours_weights = sorted(_openfst_weight(ours, w) for w in [arc.weight for arc in ours.arcs] + _finals(ours))
    added = theirs.num_states() - ours.num_states  # OpenFst may add a start state with an epsilon arc of weight one
    assert added in (0, 1), (theirs.num_states(), ours.num_states)
    skip = {(theirs.start(), 0)} if added else set()
    theirs_weights = sorted(
        [float(arc.weight) for q in theirs.states() for i, arc in enumerate(theirs.arcs(q)) if (q, i) not in skip]
        + [float(theirs.final(q)) for q in theirs.states() if float(theirs.final(q)) != math.inf]
    )
    if towards == "final":  # OpenFst keeps the final weights apart from the total: compare the arcs only
        ours_weights = sorted(_openfst_weight(ours, arc.weight) for arc in ours.arcs)
        theirs_weights = sorted(
            float(arc.weight) for q in theirs.states() for i, arc in enumerate(theirs.arcs(q)) if (q, i) not in skip
        )
    assert len(ours_weights) == len(theirs_weights), (ours_weights, theirs_weights, a.to_att())
    tolerance = _push_tolerance(trim(a))
    for x, y in zip(ours_weights, theirs_weights):
        assert math.isclose(x, y, rel_tol=tolerance, abs_tol=tolerance), (ours_weights, theirs_weights, a.to_att())
    return True


def _push_tolerance(a: WFSA) -> float:
    """OpenFst sums the cycles of a log automaton by iterating until an update is below its delta (1e-7) in
    float32: about 16 / (1 - r) iterations for spectral radius r, each rounding at 2^-24, and a tail of
    delta / (1 - r) left out; four times that bound. Tropical eighths are exact (float32 holds them)."""
    if a.semiring.name != "log" or a.num_states == 0:
        return 1e-6
    step = np.zeros((a.num_states, a.num_states))
    for arc in a.arcs:
        step[arc.src, arc.dst] += math.exp(arc.weight)
    radius = float(np.max(np.abs(np.linalg.eigvals(step))))
    return 4 * (16 * 2.0**-24 + 1e-7) / (1 - radius)


def _finals(a: WFSA) -> list[Any]:
    return list(a.final.values())


def _openfst_weight(a: WFSA, value: Any) -> float:
    """A kleene value as the OpenFst weight write_att would write."""
    if a.semiring.name == "log":
        return -float(value)
    return {"min-plus": float(value), "max-plus": -float(value)}.get(a.semiring.name, 0.0)


def check_shortest_paths(a: WFSA, n: int) -> bool:
    """The n best (unique) strings come best first, each with the weight of its best path (kleene's Viterbi,
    itself checked against brute force), and their weights equal the n shortest paths of OpenFst's
    determinization (log automata as tropical: the Viterbi order), where every string is one path.

    OpenFst is asked only when the automaton has a finite determinization in the Viterbi semiring:
    ``shortestpath(unique=True)``, which determinizes lazily, exhausted memory on automata with zero-cost
    cycles, where kleene's lazy search answers."""
    ours = shortest_paths(a, n, max_states=2000)
    viterbi = a.semiring.viterbi
    costs = [_cost(viterbi.name, w) for _, w in ours]
    assert costs == sorted(costs), ours
    for word, weight in ours:
        best = a.viterbi(list(word)).weight
        assert math.isclose(weight, best, rel_tol=1e-9, abs_tol=1e-12), (word, weight, best, a.to_att())
    words = [w for w, _ in ours]
    assert len(set(words)) == len(words), ours
    try:
        determinize(_in_semiring(a, viterbi, "test"), max_states=200)
    except BudgetExceededError:
        return True
    text = write_att(a, SYMBOLS, arc_type=ARC_TYPE[a.semiring.name])
    compiler = fst.Compiler(arc_type="standard", acceptor=True)
    compiler.write(text)
    tropical = compiler.compile().rmepsilon()
    deterministic = fst.determinize(tropical, nstate=1000)  # finite: kleene's took at most 200 states
    best_paths = fst.shortestpath(deterministic, nshortest=n)  # in a DFA every string is one path
    theirs = sorted(_path_costs(best_paths))
    assert len(costs) == len(theirs), (ours, theirs, a.to_att())
    for x, y in zip(costs, theirs):
        assert math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-5), (ours, theirs, a.to_att())
    return True


def _cost(viterbi: str, value: Any) -> float:
    if viterbi == "min-plus":
        return float(value)
    if viterbi == "max-times":
        return -math.log(value)
    return -float(value)  # max-plus (log-probabilities, or negated costs)


def _path_costs(machine: Any) -> list[float]:
    if machine.start() == pynini.NO_STATE_ID:
        return []
    found: list[float] = []
    stack = [(machine.start(), 0.0)]  # the result is a tree of paths (zero-cost cycles can make them long)
    while stack:
        state, cost = stack.pop()
        final = float(machine.final(state))
        if final != math.inf:
            found.append(cost + final)
        stack.extend((arc.nextstate, cost + float(arc.weight)) for arc in machine.arcs(state))
    return found


def check_rmepsilon(a: WFSA) -> bool:
    """kleene's epsilon removal scores every string as the input and as OpenFst's rmepsilon, and its pathsum (all
    strings, any length) is the shortest distance of OpenFst's result.

    OpenFst runs in double precision (log64 arcs; min-plus eighths are exact in float32) with its closures and
    distances iterated to delta 1e-12 (its default 1e-6 stops geometric series of ratio ~0.9 about 1e-5 short);
    its weights print 8 significant digits, hence the 2e-7 tolerance. Small automata take the dense closure; the
    sparse one is checked too (forced)."""
    dense = remove_epsilon(a)
    saved = epsilon_closure_module.DENSE_CLOSURE_STATES
    epsilon_closure_module.DENSE_CLOSURE_STATES = 0
    try:
        sparse = remove_epsilon(a)
    finally:
        epsilon_closure_module.DENSE_CLOSURE_STATES = saved
    scores_agree(a, (dense, sparse), tolerance_for(a, quantised=False), "remove_epsilon")
    if a.semiring.name not in ("log", "min-plus"):
        return True
    compiler = fst.Compiler(arc_type="log64" if a.semiring.name == "log" else "standard", acceptor=True)
    compiler.write(write_att(a, SYMBOLS, arc_type=ARC_TYPE[a.semiring.name]))
    theirs = compiler.compile().rmepsilon(delta=1e-12)

    def agree(got: float, expected: float, what: Any) -> None:
        if math.isinf(got) or math.isinf(expected):
            assert got == expected, (what, got, expected, a.to_att())
        else:
            assert math.isclose(got, expected, rel_tol=2e-7, abs_tol=2e-7), (what, got, expected, a.to_att())

    distances = fst.shortestdistance(theirs, delta=1e-12, reverse=True) if theirs.start() != pynini.NO_STATE_ID else []
    total = float(distances[theirs.start()]) if len(distances) else math.inf
    for ours in (dense, sparse):
        agree(_openfst_weight(ours, ours.pathsum()), total, "pathsum")
    words = list(strings(3))
    scored = [ours.score_batch(words) for ours in (dense, sparse)]
    for i, word in enumerate(words):
        expected = _openfst_score(theirs, word)
        for ours, scores in zip((dense, sparse), scored):
            agree(_openfst_weight(ours, scores[i]), expected, word)
    return True


def _openfst_score(machine: Any, word: Sequence[str]) -> float:
    lines = [f"{i}\t{i + 1}\t{SYMBOLS.id(x)}" for i, x in enumerate(word)] + [str(len(word))]
    compiler = fst.Compiler(arc_type=machine.arc_type(), acceptor=True)
    compiler.write("\n".join(lines) + "\n")
    composed = fst.compose(machine.copy().arcsort(sort_type="olabel"), compiler.compile())
    if composed.start() == pynini.NO_STATE_ID:
        return math.inf
    distances = fst.shortestdistance(composed, reverse=True)
    return float(distances[composed.start()]) if composed.start() < len(distances) else math.inf


# -- running many --------------------------------------------------------------------------------------------

Check = Callable[[random.Random, str], bool]

def _size(rng: random.Random) -> dict[str, Any]:
    """Mostly small automata (where disagreements are readable), some larger, some acyclic."""
    states = rng.choice([2, 3, 5, 5, 8])
    return {"max_states": states, "max_arcs": 2 * states, "epsilons": rng.random() < 0.3, "acyclic": rng.random() < 0.2}


CHECKS: dict[str, tuple[tuple[str, ...], Check]] = {
    "determinize": (
        ("min-plus", "max-plus", "max-times", "boolean", "log"),
        lambda rng, s: check_determinize(random_acceptor(rng, s, **_size(rng))),
    ),
    "minimize": (
        ("min-plus", "max-plus", "max-times", "boolean", "log"),
        lambda rng, s: check_minimize(random_acceptor(rng, s, **_size(rng))),
    ),
    "push": (
        ("min-plus", "log"),
        lambda rng, s: check_push(random_acceptor(rng, s, **_size(rng)), rng.choice(["initial", "final"])),
    ),
    "shortest_paths": (
        ("min-plus", "max-plus", "max-times", "log"),
        lambda rng, s: check_shortest_paths(random_acceptor(rng, s, **_size(rng)), rng.randint(1, 6)),
    ),
    "rmepsilon": (
        ("min-plus", "log"),
        lambda rng, s: check_rmepsilon(random_acceptor(rng, s, **{**_size(rng), "epsilons": True}) if rng.random() < 0.7
                                       else random_acceptor(rng, s, max_states=12, max_arcs=30, epsilons=True,
                                                            epsilon_rate=0.5)),
    ),
}


def run(operation: str, count: int, seed: int = 0) -> tuple[int, int]:
    """Run ``count`` random checks of ``operation`` (cycling through its semirings); returns (checked, skipped).

    Raises:
        AssertionError: the first disagreement, prefixed with the seed that reproduces it.
    """
    semirings, check = CHECKS[operation]
    checked = skipped = 0
    for i in range(count):
        semiring = semirings[i % len(semirings)]
        rng = random.Random(f"{seed}:{operation}:{i}")
        try:
            ok = check(rng, semiring)
        except AssertionError as exc:
            raise AssertionError(f"{operation} #{i} ({semiring}, seed {seed}): {exc}") from None
        checked += ok
        skipped += not ok
    return checked, skipped
