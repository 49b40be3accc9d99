"""The rational operations and intersection of kleene against OpenFst (pynini), side by side in one run.

The automata are made here (numpy; a seed), written as AT&T text once and read by both toolkits:

- ``random-log``: 100k states, 1M uniformly random arcs over 100 symbols, log weights (each state's arcs and
  final weight share probability 1, so every sum converges);
- ``trie``: a character trie of random words (about 300k states), tropical, final costs;
- ``chains``: 300k states in chains of 100 from one start state, tropical;
- ``eps-cycles``: 15k states, a quarter of the arcs epsilons that form cycles, log;
- ``ngram``: a word bigram model (20k histories, about 340k arcs) with a backoff epsilon arc from every history
  to the unigram state, log;
- ``small``: 300 random tropical automata of 10 states (with epsilons), folded one at a time.

Operations: ``union`` and ``concat`` of the automaton with a copy of itself, ``closure`` (Kleene star),
``intersect`` with a 3-state automaton over the same symbols (with an epsilon arc, so both sides have epsilons on
the epsilon-heavy automata), the scores of 1,000 strings (``score`` per string and ``score_batch``; OpenFst: the
string's acceptor composed with the automaton, then ``shortestdistance``), the best paths of 300 strings
(``viterbi``; OpenFst: compose, ``shortestpath``, of the tropical image for log), and the 10 best distinct
strings (tropical automata; log ones in their Viterbi semiring on both sides; the n-gram's on a tenth of it, 2k
histories: OpenFst's exhausted 23 GB on the full one). OpenFst runs pynini's ``union``, ``concat``, ``closure``,
``intersect`` (each on a copy, as pynini's functions) and ``shortestpath(nshortest=10, unique=True)``. ``small``
folds 300 automata by union, by concat and, pairwise, intersects each with its neighbour.

Every result is checked against OpenFst's: the scores of 19 strings sampled by random walks (and their
concatenations), kleene's ``score`` against OpenFst's string acceptor composed with its result and
``shortestdistance`` (in ``log64`` for log automata), to 1e-6 relative; the pathsum (``pathsum`` against
``shortestdistance(reverse=True)`` at the start) likewise, except on the 100k-state log automaton (OpenFst's log
distances there take minutes) and on the log closures (the log automata have mass 1, their star diverges); the
connected intersection of the epsilon-free automata has OpenFst's numbers of states and arcs; the ten best weights
agree to 1e-4 (OpenFst's float32).
Times are the best wall-clock seconds of up to 3 runs (fewer past 3 s), after a warm-up call of each function on a
small automaton.

    python benchmarks/algebra_openfst.py --quick      # sizes / 10, < 1 min
    python benchmarks/algebra_openfst.py              # the sizes above
    python benchmarks/algebra_openfst.py --only ngram # one automaton
    python benchmarks/algebra_openfst.py --ops nbest  # one operation
"""

from __future__ import annotations

import argparse
import itertools
import math
import platform
import time
from collections.abc import Callable
from functools import reduce
from typing import Any

import numpy as np
import pynini
import pywrapfst as fst

from kleene.automata import WFSA, SymbolTable, ops, read_att, shortest_paths, trim

Kind = tuple[str, str, str, int]  # AT&T text, kleene semiring, OpenFst arc type, number of symbols


def _att(src: np.ndarray, dst: np.ndarray, label: np.ndarray, cost: np.ndarray, finals: np.ndarray,
         final_cost: np.ndarray, start: int = 0) -> str:
    """AT&T text, the start state's arcs first (labels 0 = epsilon, costs with 6 decimals)."""
    first = np.argsort(src != start, kind="stable")
    lines = [f"{s}\t{d}\t{x}\t{c:.6f}" for s, d, x, c in zip(src[first].tolist(), dst[first].tolist(),
                                                              label[first].tolist(), cost[first].tolist())]
    lines += [f"{q}\t{c:.6f}" for q, c in zip(finals.tolist(), final_cost.tolist())]
    return "\n".join(lines) + "\n"


def _probabilities(rng: np.random.Generator, src: np.ndarray, n: int, final_share: np.ndarray) -> np.ndarray:
    """Per arc, a probability: each state's arcs share ``1 - final_share[state]`` at random."""
    raw = rng.uniform(0.05, 1.0, len(src))
    total = np.bincount(src, weights=raw, minlength=n)
    return np.asarray(raw / total[src] * (1.0 - final_share[src]))


def random_log(rng: np.random.Generator, states: int, arcs: int, symbols: int) -> Kind:
    src = rng.integers(0, states, arcs)
    src[:states] = np.arange(states)
    dst = rng.integers(0, states, arcs)
    label = rng.integers(1, symbols + 1, arcs)
    final_share = np.where(rng.random(states) < 0.1, rng.uniform(0.05, 0.5, states), 0.0)
    cost = -np.log(_probabilities(rng, src, states, final_share))
    finals = np.flatnonzero(final_share > 0)
    return _att(src, dst, label, cost, finals, -np.log(final_share[finals])), "log", "log", symbols


def trie(rng: np.random.Generator, states: int) -> Kind:
    children: list[dict[int, int]] = [{}]
    src, dst, label, finals = [], [], [], []
    while len(children) < states:
        q = 0
        for x in rng.integers(1, 27, int(rng.integers(3, 15))).tolist():
            nxt = children[q].get(x)
            if nxt is None:
                nxt = children[q][x] = len(children)
                children.append({})
                src.append(q)
                dst.append(nxt)
                label.append(x)
            q = nxt
        finals.append(q)
    final = np.unique(np.asarray(finals))
    return (_att(np.asarray(src), np.asarray(dst), np.asarray(label), np.zeros(len(src)), final,
                 np.round(rng.uniform(1, 10, len(final)), 3)), "min-plus", "standard", 26)


def chains(rng: np.random.Generator, states: int, length: int, symbols: int) -> Kind:
    count = states // length
    heads = 1 + np.arange(count) * length
    body = np.arange(1, count * length + 1).reshape(count, length)
    src = np.concatenate([np.zeros(count, dtype=np.int64), body[:, :-1].ravel()])
    dst = np.concatenate([heads, body[:, 1:].ravel()])
    label = rng.integers(1, symbols + 1, len(src))
    cost = np.round(rng.uniform(0, 5, len(src)), 3)
    return _att(src, dst, label, cost, body[:, -1], np.round(rng.uniform(0, 5, count), 3)), "min-plus", "standard", \
        symbols


def epsilon_cycles(rng: np.random.Generator, states: int, symbols: int) -> Kind:
    src = np.repeat(np.arange(states), 4)
    dst = rng.integers(0, states, len(src))
    label = np.where(rng.random(len(src)) < 0.25, 0, rng.integers(1, symbols + 1, len(src)))
    final_share = np.full(states, 0.1)
    cost = -np.log(_probabilities(rng, src, states, final_share))
    return _att(src, dst, label, cost, np.arange(states), -np.log(final_share)), "log", "log", symbols


def ngram(rng: np.random.Generator, histories: int, per_history: int) -> Kind:
    """State 0 the unigram state (an arc per word to its history state), states 1..V the histories: each reads
    ``per_history`` words (Zipf-like choice) and backs off to 0 by an epsilon arc; every history is final."""
    vocabulary = histories
    zipf = 1.0 / np.arange(1, vocabulary + 1)
    zipf /= zipf.sum()
    words = np.arange(1, vocabulary + 1)
    h_src = np.repeat(np.arange(1, histories + 1), per_history)
    h_word = rng.choice(words, len(h_src), p=zipf)
    keep = np.unique(h_src * (vocabulary + 1) + h_word, return_index=True)[1]
    h_src, h_word = h_src[keep], h_word[keep]
    src = np.concatenate([np.zeros(vocabulary, dtype=np.int64), h_src, np.arange(1, histories + 1)])
    dst = np.concatenate([words, h_word, np.zeros(histories, dtype=np.int64)])
    label = np.concatenate([words, h_word, np.zeros(histories, dtype=np.int64)])
    n = histories + 1
    final_share = np.concatenate([[0.0], np.full(histories, 0.05)])
    backoff = np.concatenate([np.zeros(vocabulary + len(h_src), dtype=bool), np.ones(histories, dtype=bool)])
    prob = _probabilities(rng, src, n, final_share + np.where(np.arange(n) > 0, 0.3, 0.0))
    prob[backoff] = 0.3
    return (_att(src, dst, label, -np.log(prob), np.arange(1, n), -np.log(final_share[1:])), "log", "log",
            vocabulary)


def partner(semiring: str, symbols: int, epsilon: bool) -> str:
    """A 3-state automaton over symbols 1..``symbols``: symbol x moves state q to (q + x) mod 3 (cost 0.1, or
    probability 1 / (4 symbols) in log); states 0 and 1 final; ``epsilon``: an epsilon arc 0 -> 2."""
    cost = 0.1 if semiring != "log" else math.log(4 * symbols)
    lines = [f"{q}\t{(q + x) % 3}\t{x}\t{cost:.6f}" for q in range(3) for x in range(1, symbols + 1)]
    if epsilon:
        lines.append(f"0\t2\t0\t{cost:.6f}")
    return "\n".join([*lines, "0\t0.5", "1\t0.25"]) + "\n"


def small_ones(rng: np.random.Generator, count: int) -> list[str]:
    out = []
    for _ in range(count):
        src = rng.integers(0, 10, 20)
        label = np.where(rng.random(20) < 0.2, 0, rng.integers(1, 6, 20))
        out.append(_att(src, rng.integers(0, 10, 20), label, np.round(rng.uniform(0, 3, 20), 3),
                        np.array([9]), np.array([0.5])))
    return out


# ----------------------------------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """The best wall time of up to 3 runs (fewer when the runs so far took 3 s; the machine may be shared), and the
    last run's value."""
    best, spent, runs = math.inf, 0.0, 0
    while runs < 3 and spent < 3.0:
        start = time.perf_counter()
        value = fn()
        took = time.perf_counter() - start
        best, spent, runs = min(best, took), spent + took, runs + 1
    return best, value


def compiled(text: str, arc_type: str) -> Any:
    """A pynini ``Fst`` from AT&T text."""
    compiler = fst.Compiler(arc_type=arc_type, acceptor=True)
    compiler.write(text)
    return pynini.Fst.from_pywrapfst(compiler.compile())


def theirs_pathsum(machine: Any) -> float:
    """OpenFst's shortest distance to the end from the start, as a cost (double precision for log)."""
    if machine.start() == pynini.NO_STATE_ID:
        return math.inf
    if machine.arc_type() == "log":
        machine = fst.arcmap(machine, map_type="to_log64")
    distance = fst.shortestdistance(machine, delta=1e-12, reverse=True)
    return float(distance[machine.start()]) if len(distance) else math.inf


def theirs_score(machine: Any, word: list[str]) -> float:
    """OpenFst's score of one string (as a cost): the string's acceptor composed with ``machine``, then the
    shortest distance (double precision for log)."""
    line = fst.Compiler(arc_type=machine.arc_type(), acceptor=True)
    line.write("".join(f"{i}\t{i + 1}\t{x}\n" for i, x in enumerate(word)) + f"{len(word)}\n")
    lattice = fst.compose(line.compile(), machine)  # the string's single arcs need no sort of ``machine``
    return theirs_pathsum(lattice)


def walks(text: str, count: int, length: int, rng: np.random.Generator) -> list[list[str]]:
    """Label strings of random walks from the start state (epsilons skipped): strings most automata score."""
    arcs: dict[str, list[tuple[str, str]]] = {}
    for line in text.splitlines():
        f = line.split("\t")
        if len(f) >= 3:
            arcs.setdefault(f[0], []).append((f[1], f[2]))
    start = text.split("\t", 1)[0]
    out = []
    for _ in range(count):
        q, word = start, []
        for _ in range(int(rng.integers(1, length + 1))):
            if q not in arcs:
                break
            q, label = arcs[q][int(rng.integers(0, len(arcs[q])))]
            if label != "0":
                word.append(label)
        out.append(word)
    return out


def ours_score(a: WFSA, word: list[str]) -> float:
    value = float(a.score(word))
    return -value if a.semiring.name == "log" else value


def ours_pathsum(a: WFSA) -> float:
    value = float(a.pathsum())
    return -value if a.semiring.name == "log" else value


def agree(what: str, ours: float, theirs: float, tolerance: float = 1e-6) -> None:
    if math.isinf(ours) or math.isinf(theirs):
        assert ours == theirs, f"{what}: kleene {ours}, OpenFst {theirs}"
    else:
        assert math.isclose(ours, theirs, rel_tol=tolerance, abs_tol=tolerance), \
            f"{what}: kleene {ours}, OpenFst {theirs}"


def read_both(text: str, semiring: str, arc_type: str, table: SymbolTable) -> tuple[WFSA, Any]:
    return read_att(text, semiring, symbols=table, arc_type=arc_type), compiled(text, arc_type)


def side_by_side(name: str, kind: Kind, table: SymbolTable, partner_text: str, epsilons: bool, chosen: set[str],
                 nbest_kind: Kind | None = None) -> list[Any]:
    """The chosen operations on ``kind`` (the n-best on ``nbest_kind`` when given), each checked; the rows."""
    text, semiring, arc_type, _ = kind
    rows: list[Any] = []
    a, x = read_both(text, semiring, arc_type, table)
    b, y = read_both(text, semiring, arc_type, table)
    p, z = read_both(partner_text, semiring, arc_type, table)
    z.arcsort(sort_type="ilabel")  # pynini's intersect needs one side label-sorted
    print(f"  {name}: {a.num_states} states, {a.num_arcs} arcs", flush=True)
    words = walks(text, 10, 6, np.random.default_rng(0))
    words += [w + v for w, v in itertools.pairwise(words)]  # concatenations: what concat and closure also accept
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any], float]] = [
        ("union", lambda: ops.union(a, b), lambda: pynini.union(x, y), 1e-6),
        ("concat", lambda: ops.concat(a, b), lambda: pynini.concat(x, y), 1e-6),
        ("closure", lambda: ops.kleene_star(a), lambda: pynini.closure(x), 1e-6),
        ("intersect 3-state + trim", lambda: trim(ops.intersect(a, p)), lambda: pynini.intersect(x, z), 1e-6),
    ]
    for op, ours, theirs, tolerance in cases:
        if op.split()[0] not in chosen:
            continue
        k, result = timed(ours)
        o, machine = timed(theirs)
        rows.append((name, op, k, o))
        print(f"    {op}: kleene {k:.4f} s, OpenFst {o:.4f} s", flush=True)
        for word in words:  # every result: the scores of sampled strings
            agree(f"{name} {op} score of {word}", ours_score(result, word), theirs_score(machine, word), tolerance)
        # the log automata have total mass 1 (their star diverges); OpenFst's log distances on 100k cyclic states
        # take minutes
        if semiring != "log" or (a.num_states <= 50_000 and op != "closure"):
            agree(f"{name} {op} pathsum", ours_pathsum(result), theirs_pathsum(machine), tolerance)
        if op.startswith("intersect") and not epsilons:  # both connected: the same product states and arcs
            theirs_counts = (machine.num_states(), sum(machine.num_arcs(q) for q in machine.states()))
            assert (result.num_states, result.num_arcs) == theirs_counts, (result, theirs_counts)
    if "score" in chosen:
        rows += scoring(name, a, x, text)
    if "viterbi" in chosen:
        rows += best_paths(name, a, x, text)
    if "nbest" not in chosen:
        return rows
    if nbest_kind is not None:
        a, x = read_both(nbest_kind[0], semiring, arc_type, table)
        name = f"{name} ({a.num_states} states)"
    viterbi = x if arc_type != "log" else pynini.Fst.from_pywrapfst(fst.arcmap(x, map_type="to_std"))
    k, best = timed(lambda: shortest_paths(a, 10))
    # OpenFst's unique strings need an epsilon-free input (kleene's shortest_paths removes them itself)
    o, paths = timed(lambda: pynini.shortestpath(viterbi.copy().rmepsilon() if epsilons else viterbi, nshortest=10,
                                                 unique=True))
    rows.append((name, "10 best distinct strings", k, o))
    print(f"    10 best distinct strings: kleene {k:.4f} s, OpenFst {o:.4f} s", flush=True)
    ours_costs = sorted(-w if semiring == "log" else w for _, w in best)
    theirs_costs = sorted(_path_costs(paths))
    assert len(ours_costs) == len(theirs_costs), (ours_costs, theirs_costs)
    for u, v in zip(ours_costs, theirs_costs):
        agree(f"{name} n-best", u, v, 1e-4)  # OpenFst's float32 costs
    return rows


#: How many strings the score rows score, and how many of them the Viterbi row decodes.
SCORED_STRINGS, VITERBI_STRINGS = 1000, 300


def scoring(name: str, a: WFSA, machine: Any, text: str) -> list[Any]:
    """Scores of ``SCORED_STRINGS`` random-walk strings: kleene ``score`` per string and ``score_batch`` against
    OpenFst's string acceptor composed with the automaton, then ``shortestdistance`` (``theirs_score``), each score
    checked to 1e-6 relative."""
    words = walks(text, SCORED_STRINGS, 8, np.random.default_rng(1))
    k, ours = timed(lambda: [a.score(word) for word in words])
    kb, batch = timed(lambda: a.score_batch(words))
    o, theirs = timed(lambda: [theirs_score(machine, word) for word in words])
    sign = -1.0 if a.semiring.name == "log" else 1.0
    for word, u, v, w in zip(words, ours, batch, theirs):
        agree(f"{name} score of {word}", sign * float(u), w)
        agree(f"{name} score_batch of {word}", sign * float(v), w)
    print(f"    score {len(words)} strings: kleene {k:.4f} s (score_batch {kb:.4f} s), OpenFst {o:.4f} s", flush=True)
    return [(name, f"score {len(words)} strings", k, o), (name, f"score_batch {len(words)} strings", kb, o)]


def best_paths(name: str, a: WFSA, machine: Any, text: str) -> list[Any]:
    """The best path of ``VITERBI_STRINGS`` random-walk strings: kleene ``viterbi`` (weight and arcs) against
    OpenFst's string acceptor composed with the automaton (its tropical image for log), ``shortestpath`` and the
    path's ``shortestdistance``, each best weight checked to 1e-4 relative (OpenFst's float32 costs)."""
    words = walks(text, VITERBI_STRINGS, 8, np.random.default_rng(2))
    ranked = machine if machine.arc_type() != "log" else fst.arcmap(machine, map_type="to_std")

    def theirs_best(word: list[str]) -> float:
        line = fst.Compiler(arc_type="standard", acceptor=True)
        line.write("".join(f"{i}\t{i + 1}\t{x}\n" for i, x in enumerate(word)) + f"{len(word)}\n")
        best = fst.shortestpath(fst.compose(line.compile(), ranked))
        if best.start() == pynini.NO_STATE_ID:
            return math.inf
        distance = fst.shortestdistance(best, reverse=True)
        return float(distance[best.start()]) if len(distance) else math.inf

    k, ours = timed(lambda: [a.viterbi(word) for word in words])
    o, theirs = timed(lambda: [theirs_best(word) for word in words])
    sign = -1.0 if a.semiring.name == "log" else 1.0
    for word, path, w in zip(words, ours, theirs):
        agree(f"{name} viterbi of {word}", sign * float(path.weight), w, 1e-4)
    print(f"    viterbi {len(words)} strings: kleene {k:.4f} s, OpenFst {o:.4f} s", flush=True)
    return [(name, f"viterbi {len(words)} strings", k, o)]


def _path_costs(machine: Any) -> list[float]:
    if machine.start() == pynini.NO_STATE_ID:
        return []
    found, stack = [], [(machine.start(), 0.0)]
    while stack:
        state, cost = stack.pop()
        final = float(machine.final(state))
        if final != math.inf:
            found.append(cost + final)
        stack.extend((arc.nextstate, cost + float(arc.weight)) for arc in machine.arcs(state))
    return found


def folded(texts: list[str], table: SymbolTable) -> list[Any]:
    ours = [read_att(t, "min-plus", symbols=table, arc_type="standard") for t in texts]
    theirs = [compiled(t, "standard") for t in texts]
    rows: list[Any] = []
    name = f"small ({len(texts)} x 10 states)"
    for op, k_fn, o_fn in (("union, folded", ops.union, pynini.union), ("concat, folded", ops.concat, pynini.concat)):
        k, result = timed(lambda k_fn=k_fn: reduce(k_fn, ours))  # type: ignore[misc]
        o, machine = timed(lambda o_fn=o_fn: reduce(o_fn, theirs))  # type: ignore[misc]
        rows.append((name, op, k, o))
        agree(f"{name} {op} pathsum", ours_pathsum(result), theirs_pathsum(machine))
    pairs = list(itertools.pairwise(ours))
    for machine in theirs:
        machine.arcsort(sort_type="ilabel")
    k, results = timed(lambda: [trim(ops.intersect(u, v)) for u, v in pairs])
    o, machines = timed(lambda: [pynini.intersect(u, v) for u, v in itertools.pairwise(theirs)])
    rows.append((name, f"intersect + trim, {len(pairs)} pairs", k, o))
    for r, m in zip(results[:50], machines[:50]):
        agree(f"{name} intersect pathsum", ours_pathsum(r), theirs_pathsum(m))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="sizes / 10")
    parser.add_argument("--seed", type=int, default=0)
    kinds = ["random-log", "trie", "chains", "eps-cycles", "ngram", "small"]
    parser.add_argument("--only", choices=kinds, action="append", help="run only this automaton (repeatable)")
    operations = ["union", "concat", "closure", "intersect", "score", "viterbi", "nbest"]
    parser.add_argument("--ops", choices=operations, action="append", help="run only this operation (repeatable)")
    args = parser.parse_args()
    chosen = args.only or kinds
    chosen_ops = set(args.ops or operations)
    scale = 10 if args.quick else 1
    print(f"# {platform.processor() or platform.machine()}, pynini {pynini.__version__}, seed {args.seed}"
          f"{', quick (sizes / 10)' if args.quick else ''}")
    rows: list[Any] = []
    for kind in chosen:
        rng = np.random.default_rng([args.seed, kinds.index(kind)])
        if kind == "small":
            table = SymbolTable([str(i) for i in range(1, 6)])
            warm = small_ones(rng, 3)
            folded(warm, table)
            rows += folded(small_ones(rng, 300 // scale), table)
            continue
        sizes = {
            "random-log": lambda k, rng=rng: random_log(rng, 100_000 // k, 1_000_000 // k, 100),
            "trie": lambda k, rng=rng: trie(rng, 300_000 // k),
            "chains": lambda k, rng=rng: chains(rng, 300_000 // k, 100, 50),
            "eps-cycles": lambda k, rng=rng: epsilon_cycles(rng, 15_000 // k, 20),
            "ngram": lambda k, rng=rng: ngram(rng, 20_000 // k, 17),
        }[kind]
        warm, made = sizes(1000), sizes(scale)
        table = SymbolTable([str(i) for i in range(1, made[3] + 1)])
        has_epsilons = kind in ("eps-cycles", "ngram")
        side_by_side("warm-up", warm, table, partner(made[1], made[3], has_epsilons), has_epsilons, chosen_ops)
        # the n-gram's 10 best strings at a tenth of its size: OpenFst's (rmepsilon, then unique shortest paths)
        # exhausted 23 GB of memory on the full one
        smaller = sizes(10 * scale) if kind == "ngram" else None
        rows += side_by_side(kind, made, table, partner(made[1], made[3], has_epsilons), has_epsilons, chosen_ops,
                             smaller)
    print(f"\n{'automaton':<26} {'operation':<28} {'kleene s':>9} {'OpenFst s':>9} {'ratio':>7}")
    for name, op, ours, theirs in rows:
        print(f"{name:<26} {op:<28} {ours:9.4f} {theirs:9.4f} {ours / theirs:7.2f}")


if __name__ == "__main__":
    main()
