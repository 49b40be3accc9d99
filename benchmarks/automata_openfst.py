"""kleene's sparse automata engine against OpenFst (pynini), side by side in one run.

Three automata, each written as AT&T text once and read by both:

- ``random``: states with uniformly random arcs (tropical costs in [0, 5), 100 symbols);
- ``lexicon``: a character trie of up to 50k distinct words from the bundled corpora (tropical, final costs);
- ``eps-cycles``: a log-semiring automaton whose epsilon arcs form cycles (substochastic, so every sum converges).

Operations: read AT&T; score 1000 strings (kleene ``score``; OpenFst: compose the string's acceptor, then the
shortest distance); pathsum (kleene ``pathsum``; OpenFst ``shortestdistance(reverse=True)`` at the start state);
for the epsilon automaton, rmepsilon (kleene ``remove_epsilon``; OpenFst ``rmepsilon(connect=False)``); determinize
(both with a state budget; log automata as their tropical image, since OpenFst's budget needs the path property)
and minimize (of the deterministic part, each state's first arc per label, where the automaton is not
deterministic) of the epsilon-free automaton; the 10 best paths.
Times are wall-clock seconds of one run each (after a warm-up of the reader on a small file); kleene's peak
Python memory while reading is measured with tracemalloc in a second, untimed read and shown as a multiple of the
text size.

    python benchmarks/automata_openfst.py --quick     # small sizes, < 1 min
    python benchmarks/automata_openfst.py             # 100k states / 1M arcs, 50k words, 10k states
    python benchmarks/automata_openfst.py --only eps-cycles   # one automaton (the same one as in a full run)
"""

from __future__ import annotations

import argparse
import gc
import gzip
import math
import platform
import re
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pynini
import pywrapfst as fst

from kleene.automata import (
    SymbolTable,
    determinize,
    minimize,
    read_att,
    remove_epsilon,
    shortest_paths,
    trim,
    write_att,
)
from kleene.automata.sparse import arc_store
from kleene.errors import BudgetExceededError

ROOT = Path(__file__).resolve().parent.parent
CORPORA = [ROOT.parent / "shared" / "data", Path("/work/shared/data")]


def random_automaton(rng: np.random.Generator, states: int, arcs: int, symbols: int) -> str:
    src = rng.integers(0, states, arcs)
    src[:states] = np.arange(states)  # every state has an arc out
    dst = rng.integers(0, states, arcs)
    label = rng.integers(1, symbols + 1, arcs)
    cost = np.round(rng.uniform(0, 5, arcs), 3)
    lines = [f"{s}\t{d}\t{lab}\t{c}" for s, d, lab, c in zip(src.tolist(), dst.tolist(), label.tolist(), cost.tolist())]
    lines += [f"{q}\t{c}" for q, c in zip(rng.choice(states, states // 10, replace=False).tolist(),
                                          np.round(rng.uniform(0, 5, states // 10), 3).tolist())]
    return "\n".join(lines) + "\n"


WORD = re.compile(r"[A-Za-z0-9]+(?:['.-][A-Za-z0-9]+)*")


def _corpus_files() -> list[Path]:
    """The text corpora (``../shared/data`` if present, then the vendored ones), GloVe vocabularies last."""
    files: list[Path] = []
    for base in [*CORPORA, ROOT / "src" / "kleene" / "data" / "vendor"]:
        if base.is_dir():
            files += sorted(p for p in base.glob("*/**/*")
                            if p.is_file() and p.name not in ("README.md", "SHA256SUMS", "LICENSE.txt"))
    unique = list(dict.fromkeys(p.resolve() for p in files))
    return sorted(unique, key=lambda p: "glove" in p.name)  # stable: the texts first, then the embeddings' words


def words_from_corpora(count: int) -> list[str]:
    """Up to ``count`` distinct lower-cased ASCII tokens (letters and digits, inner hyphens, apostrophes and
    periods): from the corpora,
    then GloVe's vocabulary (the first field of each line of the embedding files), so that 50k words exist."""
    words: dict[str, None] = {}
    for path in _corpus_files():
        opener: Any = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", errors="ignore") as handle:
            for line in handle:
                tokens = line.split()[:1] if "glove" in path.name else line.split()
                for token in tokens:
                    if WORD.fullmatch(token):
                        words.setdefault(token.lower(), None)
                        if len(words) >= count:
                            return list(words)
    return list(words)


def lexicon_trie(words: list[str], rng: np.random.Generator) -> tuple[str, list[str]]:
    alphabet = sorted({c for w in words for c in w})
    ids = {c: i + 1 for i, c in enumerate(alphabet)}
    children: list[dict[str, int]] = [{}]
    lines, finals = [], []
    for w in words:
        q = 0
        for c in w:
            nxt = children[q].get(c)
            if nxt is None:
                nxt = children[q][c] = len(children)
                children.append({})
                lines.append(f"{q}\t{nxt}\t{ids[c]}\t0")
            q = nxt
        finals.append(f"{q}\t{round(float(rng.uniform(1, 10)), 3)}")
    return "\n".join(lines + finals) + "\n", alphabet


def epsilon_cycles(rng: np.random.Generator, states: int, symbols: int) -> str:
    """Log weights (OpenFst costs -log p): each state splits probability 0.9 over ~4 arcs, 1 in 4 an epsilon."""
    lines = []
    for q in range(states):
        out = 4
        probs = rng.dirichlet(np.ones(out)) * 0.9
        for p in probs:
            d = int(rng.integers(0, states))
            label = 0 if rng.random() < 0.25 else int(rng.integers(1, symbols + 1))
            lines.append(f"{q}\t{d}\t{label}\t{-math.log(p):.6f}")
        lines.append(f"{q}\t{-math.log(0.1):.6f}")
    return "\n".join(lines) + "\n"


def first_arc_per_label(text: str) -> str:
    """The deterministic part of an acceptor's text: each state's first arc per label (final lines kept)."""
    seen: set[tuple[str, str]] = set()
    lines = []
    for line in text.splitlines():
        f = line.split("\t")
        if len(f) >= 3:
            if (f[0], f[2]) in seen:
                continue
            seen.add((f[0], f[2]))
        lines.append(line)
    return "\n".join(lines) + "\n"


def walks(text: str, count: int, length: int, rng: np.random.Generator) -> list[list[int]]:
    """Label-id strings of random walks (epsilons skipped), so that most strings have paths."""
    arcs: dict[int, list[tuple[int, int]]] = {}
    start = None
    for line in text.splitlines():
        f = line.split("\t")
        if start is None:
            start = int(f[0])
        if len(f) >= 3:
            arcs.setdefault(int(f[0]), []).append((int(f[1]), int(f[2])))
    out = []
    for _ in range(count):
        q, word = start or 0, []
        for _ in range(int(rng.integers(1, length + 1))):
            if q not in arcs:
                break
            d, lab = arcs[q][int(rng.integers(0, len(arcs[q])))]
            if lab:
                word.append(lab)
            q = d
        out.append(word)
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds of ``fn()`` and its value; the garbage of earlier steps is collected first (as ``timeit`` keeps the
    collector out of its timings), so that no row pays for another's cyclic garbage."""
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def run(name: str, text: str, semiring: str, arc_type: str, table: SymbolTable, words: list[list[int]]) -> list[Any]:
    rows: list[Any] = []
    symbols_of = {table.id(s): s for s in table}

    def openfst_read() -> Any:
        compiler = fst.Compiler(arc_type=arc_type, acceptor=True)
        compiler.write(text)
        return compiler.compile()

    k_read, automaton = timed(lambda: read_att(text, semiring, symbols=table, arc_type=arc_type))
    tracemalloc.start()  # a second read for the memory (tracemalloc slows allocation-heavy code several times)
    read_att(text, semiring, symbols=table, arc_type=arc_type)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    o_read, machine = timed(openfst_read)
    rows.append((name, "read AT&T", k_read, o_read, peak / len(text)))

    automaton.score([symbols_of[w] for w in words[0]])  # warm-up (the reader already built the arc store)
    strings = [[symbols_of[w] for w in word] for word in words]
    k_score, ours = timed(lambda: [automaton.score(string) for string in strings])
    k_batch, batched = timed(lambda: automaton.score_batch(strings))
    assert all(a == b or abs(a - b) <= 1e-9 * max(1.0, abs(b)) for a, b in zip(batched, ours))
    machine.arcsort(sort_type="olabel")

    def openfst_scores() -> list[float]:
        out = []
        for word in words:
            string = fst.Compiler(arc_type=arc_type, acceptor=True)
            string.write("".join(f"{i}\t{i + 1}\t{w}\n" for i, w in enumerate(word)) + f"{len(word)}\n")
            composed = fst.compose(machine, string.compile())
            d = fst.shortestdistance(composed, reverse=True) if composed.start() >= 0 else []
            out.append(float(d[composed.start()]) if composed.start() >= 0 and len(d) else math.inf)
        return out

    o_score, theirs = timed(openfst_scores)
    rows.append((name, f"score {len(words)} strings, 1 call each", k_score, o_score, None))
    rows.append((name, f"score {len(words)} strings, score_batch", k_batch, o_score, None))
    rows.append(viterbi_row(name, automaton, machine, arc_type, semiring, words[:VITERBI_STRINGS], strings))
    k_sum, total = timed(automaton.pathsum)
    o_sum, distance = timed(lambda: fst.shortestdistance(machine, reverse=True))
    rows.append((name, "pathsum", k_sum, o_sum, None))
    rows += structure(name, automaton, machine, semiring, arc_type, text, table, strings)
    sign = -1.0 if semiring == "log" else 1.0
    mismatch = max(abs(sign * a - b) / max(1.0, abs(b)) for a, b in zip(ours, theirs) if math.isfinite(b))
    print(f"  {name}: max relative score difference {mismatch:.2e}; pathsum kleene {sign * total:.6f} "
          f"OpenFst {float(distance[machine.start()]):.6f}")
    return rows


#: How many of the strings the Viterbi row decodes.
VITERBI_STRINGS = 300


def viterbi_row(name: str, automaton: Any, machine: Any, arc_type: str, semiring: str, words: list[list[int]],
                strings: list[list[Any]]) -> Any:
    """The best path of each string: kleene ``viterbi`` (weight and arcs) against OpenFst's compose + shortestpath
    (of the tropical image for log), the best weights checked equal."""
    k_best, ours = timed(lambda: [automaton.viterbi(string).weight for string in strings[: len(words)]])
    ranked = machine if arc_type != "log" else fst.arcmap(machine, map_type="to_standard")
    ranked.arcsort(sort_type="olabel")

    def openfst_best() -> list[float]:
        out = []
        for word in words:
            string = fst.Compiler(arc_type="standard", acceptor=True)
            string.write("".join(f"{i}\t{i + 1}\t{w}\n" for i, w in enumerate(word)) + f"{len(word)}\n")
            best = fst.shortestpath(fst.compose(ranked, string.compile()))
            d = fst.shortestdistance(best, reverse=True) if best.start() >= 0 else []
            out.append(float(d[best.start()]) if best.start() >= 0 and len(d) else math.inf)
        return out

    o_best, theirs = timed(openfst_best)
    sign = -1.0 if semiring == "log" else 1.0
    differ = [(a, b) for a, b in zip(ours, theirs) if not (sign * a == b or abs(sign * a - b) <= 1e-4 * max(1, abs(b)))]
    assert not differ, f"{name}: Viterbi weights differ from OpenFst's: {differ[:3]}"
    return (name, f"viterbi {len(words)} strings (best path and its arcs)", k_best, o_best, None)


#: The state budget of both determinizations of the random automaton (kleene's max_states, OpenFst's nstate): it
#: lacks the twins property, so neither would finish without one.
DETERMINIZE_BUDGET = 20_000
#: The budget for the epsilon-free eps-cycles automaton: its subsets soon hold most of its states (~60 arcs each), so
#: each costs ~Q x 60 arc visits on both sides (20k of them took 4 minutes at 2k states).
EPSILON_DETERMINIZE_BUDGET = 200


def compiled(text: str, arc_type: str) -> Any:
    compiler = fst.Compiler(arc_type=arc_type, acceptor=True)
    compiler.write(text)
    return compiler.compile()


def structure(name: str, automaton: Any, machine: Any, semiring: str, arc_type: str, text: str,
              table: SymbolTable, strings: list[list[Any]]) -> list[Any]:
    """rmepsilon, determinize, minimize and the 10 best paths, side by side (what ran is said in the row's name); the
    epsilon-free and the minimized automata must score ``strings`` as the automata they came from."""
    rows: list[Any] = []
    budget = DETERMINIZE_BUDGET if "random" in name else 1_000_000  # the lexicon determinizes fully
    original, original_machine = automaton, machine
    if automaton.has_epsilons:
        # both on the same states, unconnected (kleene's remove_epsilon keeps the states; OpenFst's connect=False)
        k_rm, plain = timed(lambda: remove_epsilon(automaton))
        o_rm, free = timed(lambda: machine.copy().rmepsilon(connect=False))
        arcs = sum(free.num_arcs(q) for q in free.states())
        what = f"{arc_store(plain).num_arcs} / OpenFst {arcs} arcs, {plain.num_states} states"
        rows.append((name, f"rmepsilon ({what})", k_rm, o_rm, None))
        before, after = automaton.score_batch(strings), plain.score_batch(strings)
        drift = max((abs(a - b) / max(1.0, abs(a)) for a, b in zip(before, after) if a != b), default=0.0)
        assert drift <= 1e-9, f"{name}: the epsilon-free automaton scores a string {drift} away"
        print(f"  {name}: epsilon-free = input on {len(strings)} strings (max relative difference {drift:.1e})")
        # determinize and minimize get kleene's epsilon-free automaton on both sides, as one AT&T text: its initial
        # weights (the start state's closure) are written as epsilon arcs from a fresh start state, which OpenFst's
        # rmepsilon folds into that start state (untimed)
        single_start = compiled(write_att(trim(plain), table, arc_type=arc_type), arc_type).rmepsilon()
        text = single_start.print(acceptor=True)
        automaton = read_att(text, semiring, symbols=table, arc_type=arc_type)
        machine = compiled(text, arc_type)
        budget = EPSILON_DETERMINIZE_BUDGET
    # determinize: OpenFst's state budget needs weights with the path property, so log automata are determinized as
    # their tropical image (the same costs, min for plus) on both sides
    det_semiring, det_type = ("min-plus", "standard") if arc_type == "log" else (semiring, arc_type)
    det_input = automaton if det_type == arc_type else read_att(text, det_semiring, symbols=table, arc_type=det_type)
    det_machine = machine if det_type == arc_type else compiled(text, det_type)
    image = " of the tropical image" if det_type != arc_type else ""

    def kleene_determinize() -> str:
        try:
            return f"{determinize(det_input, max_states=budget).num_states} states"
        except BudgetExceededError:
            return f"budget of {budget} states hit"

    k_det, what = timed(kleene_determinize)
    o_det, theirs = timed(lambda: fst.determinize(det_machine, nstate=budget))
    rows.append((name, f"determinize{image} ({what}; OpenFst {theirs.num_states()})", k_det, o_det, None))
    deterministic = automaton
    min_machine = machine
    what = ""
    if "lexicon" not in name:  # not determinizable: minimize its deterministic part (first arc per state and label)
        det_text = first_arc_per_label(text)
        deterministic = read_att(det_text, semiring, symbols=table, arc_type=arc_type)
        min_machine = compiled(det_text, arc_type)
        what = f", deterministic part: {deterministic.num_states} states"
    k_min, small = timed(lambda: minimize(deterministic, "deterministic"))
    o_min, theirs = timed(lambda: min_machine.copy().minimize())
    rows.append((name, f"minimize ({small.num_states} / OpenFst {theirs.num_states()} states{what})", k_min,
                 o_min, None))
    before, after = deterministic.score_batch(strings), small.score_batch(strings)
    drift = max((abs(a - b) for a, b in zip(before, after) if a != b), default=0.0)
    assert drift <= 1e-9, f"{name}: the minimized automaton scores a string {drift} away"
    print(f"  {name}: minimized = input on {len(strings)} strings (max difference {drift:.1e})")
    automaton, machine = original, original_machine
    k_paths, paths = timed(lambda: shortest_paths(automaton, 10, unique=False))
    tropical = machine if arc_type != "log" else None

    def openfst_paths() -> Any:
        ranked = tropical if tropical is not None else fst.arcmap(machine, map_type="to_standard")
        return fst.shortestdistance(fst.shortestpath(ranked, nshortest=10), reverse=True)

    o_paths, distance = timed(openfst_paths)
    best = paths[0][1] if paths else math.inf
    rows.append((name, "10 best paths (shortest_paths / shortestpath)", k_paths, o_paths, None))
    sign = -1.0 if semiring == "log" else 1.0
    print(f"  {name}: best path kleene {sign * best:.4f} OpenFst {float(distance[0]):.4f}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=["random", "lexicon", "eps-cycles"], action="append",
                        help="run only this automaton (repeatable; the others' texts are still drawn, for the seed)")
    args = parser.parse_args()
    chosen = set(args.only or ["random", "lexicon", "eps-cycles"])
    rng = np.random.default_rng(args.seed)
    big = not args.quick
    states, arcs = (100_000, 1_000_000) if big else (10_000, 100_000)
    word_count = 50_000 if big else 5_000
    eps_states = 10_000 if big else 2_000
    print(f"# {platform.processor() or platform.machine()}, pynini {pynini.__version__}, sizes: random {states} states "
          f"{arcs} arcs, lexicon {word_count} words, epsilon cycles {eps_states} states")
    numbers = SymbolTable([str(i) for i in range(1, 101)])
    read_att("0\t1\t1\t0.5\n1\n", "min-plus", symbols=numbers, arc_type="tropical")  # warm-up
    rows = []
    text = random_automaton(rng, states, arcs, 100)
    random_walks = walks(text, 1000, 8, rng)
    if "random" in chosen:
        rows += run("random", text, "min-plus", "standard", numbers, random_walks)
    words = words_from_corpora(word_count)
    text, alphabet = lexicon_trie(words, rng)
    letters = SymbolTable(alphabet)
    lexicon_walks = walks(text, 1000, 12, rng)
    if "lexicon" in chosen:
        rows += run(f"lexicon ({len(words)} words)", text, "min-plus", "standard", letters, lexicon_walks)
    text = epsilon_cycles(rng, eps_states, 20)
    twenty = SymbolTable([str(i) for i in range(1, 21)])
    if "eps-cycles" in chosen:
        rows += run("eps-cycles", text, "log", "log", twenty, walks(text, 1000, 8, rng))
    print(f"\n{'automaton':<24} {'operation':<60} {'kleene s':>9} {'OpenFst s':>9} {'ratio':>7} {'mem/text':>9}")
    for name, op, ours, theirs, memory in rows:
        mem = f"{memory:.1f}x" if memory is not None else ""
        print(f"{name:<24} {op:<60} {ours:9.3f} {theirs:9.3f} {ours / theirs:7.1f} {mem:>9}")


if __name__ == "__main__":
    main()
