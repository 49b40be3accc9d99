"""The OpenFst oracle: kleene's AT&T reader, writer and scores against real OpenFst through pynini.

Three directions, each on random automata with epsilon arcs and epsilon cycles:

- AT&T text -> OpenFst (``pywrapfst.Compiler``) and -> kleene (``read_att``): string scores
  (compose with the string's acceptor, then the shortest distance to the final states) and
  the pathsum (the shortest distance of the whole machine) must agree;
- kleene automaton -> ``write_att`` -> OpenFst: OpenFst's string scores must equal kleene's;
- automata built with pynini's own operations -> OpenFst's printer -> ``read_att``.

Tropical automata use nonnegative costs on a grid of eighths, which float32 holds exactly, so
their scores must be equal; log automata are substochastic (each state's outgoing probability
plus its final probability is below one, so every epsilon cycle and the pathsum converge) and
are compared with a tolerance for OpenFst's float32 arithmetic and its convergence threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kleene.automata import WFSA, DivergenceError, SymbolTable, read_att, read_symbols, write_att, write_symbols

from .strategies import ALPHABET, wfsas

pynini = pytest.importorskip("pynini", reason="pynini (real OpenFst) is the oracle of this module; pip install pynini")
fst = pytest.importorskip("pywrapfst", reason="pywrapfst ships with pynini")

SYMBOLS = SymbolTable(ALPHABET)  # a=1, b=2, c=3
ARC_TYPES = {"min-plus": "standard", "log": "log"}
WORDS = st.lists(st.sampled_from(ALPHABET), max_size=5)


@pytest.fixture(scope="module")
def openfst_symbols(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """kleene's symbol table, written by ``write_symbols`` and loaded by OpenFst."""
    path = tmp_path_factory.mktemp("symbols") / "abc.syms"
    path.write_text(write_symbols(SYMBOLS))
    return pynini.SymbolTable.read_text(str(path))


# -- OpenFst side -------------------------------------------------------------------------------


def openfst_compile(text: str, semiring: str, symbols: Any = None) -> Any:
    compiler = fst.Compiler(arc_type=ARC_TYPES[semiring], acceptor=True, isymbols=symbols)
    compiler.write(text)
    return compiler.compile()


def openfst_total(machine: Any) -> float:
    """The semiring sum of all path weights in OpenFst's convention (costs, -log p); inf when empty."""
    if machine.start() == pynini.NO_STATE_ID:
        return math.inf
    distances = fst.shortestdistance(machine, delta=1e-7, reverse=True)
    return float(distances[machine.start()]) if machine.start() < len(distances) else math.inf


def openfst_score(machine: Any, word: Sequence[str], semiring: str) -> float:
    lines = [f"{i}\t{i + 1}\t{SYMBOLS.id(x)}" for i, x in enumerate(word)] + [str(len(word))]
    string = openfst_compile("\n".join(lines) + "\n", semiring)
    return openfst_total(fst.compose(machine.copy().arcsort(sort_type="olabel"), string))


def accepted_words(machine: Any, seed: int, count: int = 3) -> list[list[str]]:
    """Strings of successful paths drawn by OpenFst's randgen (so that scores are not all zero)."""
    trimmed = machine.copy().connect()
    if trimmed.start() == pynini.NO_STATE_ID:
        return []
    paths = fst.randgen(trimmed, npath=count, seed=seed, max_length=12)
    if paths.start() == pynini.NO_STATE_ID:  # every drawn path was longer than max_length
        return []
    words: list[list[str]] = []

    def walk(state: int, word: list[str]) -> None:
        if paths.final(state) != fst.Weight.zero(paths.weight_type()):
            words.append(word)
        for arc in paths.arcs(state):
            walk(arc.nextstate, word + ([str(SYMBOLS.symbol(arc.ilabel))] if arc.ilabel else []))

    walk(paths.start(), [])
    return words


def as_openfst(value: float, semiring: str) -> float:
    """A kleene value in OpenFst's convention: min-plus costs as they are, log p negated."""
    return float(value) if semiring == "min-plus" else -float(value)


def agree(kleene: float, openfst: float, semiring: str) -> bool:
    if math.isinf(kleene) or math.isinf(openfst):
        return kleene == openfst
    if semiring == "min-plus":
        return kleene == openfst
    return math.isclose(kleene, openfst, rel_tol=1e-5, abs_tol=1e-4)


def agree_loosely(kleene: float, openfst: float) -> bool:
    """For weights OpenFst rounded to float32 (or printed with 9 digits)."""
    if math.isinf(kleene) or math.isinf(openfst):
        return kleene == openfst
    return math.isclose(kleene, openfst, rel_tol=1e-5, abs_tol=1e-4)


# -- random AT&T text with epsilon cycles -------------------------------------------------------


@st.composite
def att_texts(draw: st.DrawFn, semiring: str, names: bool) -> str:
    """AT&T text of a random acceptor with an epsilon cycle, sparse shuffled state ids and symbol labels.

    Tropical costs are eighths in [0, 3]; log weights are -log p with each state's outgoing
    plus final probability summing to a random mass below one.
    """
    n = draw(st.integers(1, 5))  # states, joined by one epsilon cycle (label None) and random arcs
    ids = draw(st.permutations([3 * i + 1 for i in range(n)]))  # sparse, in shuffled order
    cycle = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    arcs: list[tuple[int, int, str | None]] = [(cycle[i], cycle[(i + 1) % len(cycle)], None) for i in range(len(cycle))]
    for _ in range(draw(st.integers(0, 3 * n))):
        label = draw(st.one_of(st.none(), st.sampled_from(ALPHABET)))
        arcs.append((draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)), label))
    finals = draw(st.sets(st.integers(0, n - 1), min_size=1))

    weights: dict[tuple[str, int], float] = {}  # ("arc", index) or ("final", state) -> file weight
    for q in range(n):
        outgoing = [("arc", i) for i, arc in enumerate(arcs) if arc[0] == q] + ([("final", q)] if q in finals else [])
        if semiring == "min-plus":
            for key in outgoing:
                weights[key] = draw(st.integers(0, 24)) / 8
        elif outgoing:
            raw = [draw(st.floats(0.05, 1.0)) for _ in outgoing]
            mass = draw(st.floats(0.3, 0.9))
            for key, r in zip(outgoing, raw, strict=True):
                weights[key] = -math.log(mass * r / sum(raw))

    def label_text(label: str | None) -> str:
        if label is None:
            return "<eps>" if names else "0"
        return label if names else str(SYMBOLS.id(label))

    lines = [f"{ids[s]}\t{ids[d]}\t{label_text(x)}\t{weights[('arc', i)]!r}" for i, (s, d, x) in enumerate(arcs)]
    lines += [f"{ids[q]}\t{weights[('final', q)]!r}" for q in sorted(finals)]
    lines = draw(st.permutations(lines))
    start = draw(st.sampled_from(lines))  # the start state is the source of the first line
    lines.remove(start)
    return "\n".join([start, *lines]) + "\n"


@pytest.mark.parametrize("semiring", ["min-plus", "log"])
@pytest.mark.parametrize("names", [False, True], ids=["ids", "names"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_att_text_means_the_same_in_kleene_and_openfst(
    semiring: str, names: bool, data: st.DataObject, openfst_symbols: Any
) -> None:
    text = data.draw(att_texts(semiring, names))
    machine = openfst_compile(text, semiring, openfst_symbols if names else None)
    ours = read_att(text, semiring, symbols=SYMBOLS, acceptor=True)
    words = [data.draw(WORDS) for _ in range(4)] + [[]] + accepted_words(machine, data.draw(st.integers(0, 2**31)))
    for word in words:
        expected = openfst_score(machine, word, semiring)
        got = as_openfst(ours.score(word), semiring)
        assert agree(got, expected, semiring), (word, got, expected, text)
    expected_total, got_total = openfst_total(machine), as_openfst(ours.pathsum(), semiring)
    assert agree(got_total, expected_total, semiring), (got_total, expected_total, text)


@pytest.mark.parametrize("semiring", ["min-plus", "log"])
@pytest.mark.parametrize("names", [False, True], ids=["ids", "names"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_kleene_automata_written_as_att_score_the_same_in_openfst(
    semiring: str, names: bool, data: st.DataObject, openfst_symbols: Any
) -> None:
    """Several weighted initial states, predicate labels and epsilon cycles, through write_att."""
    ours: WFSA = data.draw(wfsas(semiring, max_states=4, max_arcs=8))
    words = [data.draw(WORDS) for _ in range(5)] + [[]]
    try:
        scores = [as_openfst(ours.score(word), semiring) for word in words]
    except DivergenceError:
        assume(False)  # an epsilon star that diverges has no score on either side
        return
    text = write_att(ours, None if names else SYMBOLS)
    machine = openfst_compile(text, semiring, openfst_symbols if names else None)
    for word, got in zip(words, scores, strict=True):
        expected = openfst_score(machine, word, semiring)
        assert agree_loosely(got, expected), (word, got, expected, text)


# -- OpenFst's printer -> kleene ----------------------------------------------------------------


@st.composite
def pynini_machines(draw: st.DrawFn, semiring: str) -> Any:
    """A machine built by pynini's rational operations (union, concatenation, closure: epsilon arcs)."""
    arc_type = ARC_TYPES[semiring]

    def word_acceptor() -> Any:
        word = draw(st.lists(st.sampled_from(ALPHABET), max_size=2))
        cost = draw(st.integers(8, 24)) / 8  # probability below e^-1 keeps every closure convergent
        return pynini.accep(" ".join(word), token_type=pynini_symbols(), weight=cost, arc_type=arc_type)

    machine = word_acceptor()
    for _ in range(draw(st.integers(1, 4))):
        operation = draw(st.sampled_from(["union", "concat", "closure", "ques"]))
        if operation == "union":
            machine = pynini.union(machine, word_acceptor())
        elif operation == "concat":
            machine = pynini.concat(machine, word_acceptor())
        else:
            other = pynini.union(word_acceptor(), word_acceptor())  # at most two words of probability < e^-1
            machine = pynini.concat(machine, other.closure() if operation == "closure" else other.ques)
    return machine


def pynini_symbols() -> Any:
    table = pynini.SymbolTable()
    table.add_symbol("<epsilon>", 0)
    for symbol in ALPHABET:
        table.add_symbol(symbol, SYMBOLS.id(symbol))
    return table


@pytest.mark.parametrize("semiring", ["min-plus", "log"])
@pytest.mark.parametrize(
    ("printing", "infer"),
    [
        ({"acceptor": False}, False),
        ({"acceptor": False, "isymbols": True}, True),  # "a a [w]" lines: never ambiguous
        ({"acceptor": True, "isymbols": True}, False),
        ({"acceptor": True, "isymbols": True, "show_weight_one": True}, False),
        ({"acceptor": False, "isymbols": True, "show_weight_one": True}, True),
    ],
    ids=["transducer-ids", "transducer-names", "acceptor-names", "acceptor-names-ones", "transducer-names-ones"],
)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_kleene_reads_what_openfst_prints(
    semiring: str, printing: dict[str, bool], infer: bool, data: st.DataObject
) -> None:
    machine = data.draw(pynini_machines(semiring))
    table = pynini_symbols() if printing.get("isymbols") else None
    text = machine.print(
        isymbols=table,
        osymbols=table,
        acceptor=printing["acceptor"],
        show_weight_one=printing.get("show_weight_one", False),
    )
    # Four-field lines can be ambiguous ("0 1 2 2", "0 1 <epsilon> 0"); where they can, say what was printed.
    acceptor = None if infer else printing["acceptor"]
    ours = read_att(text, semiring, symbols=SymbolTable(ALPHABET, epsilon="<epsilon>"), acceptor=acceptor)
    words = [data.draw(WORDS) for _ in range(3)] + [[]] + accepted_words(machine, data.draw(st.integers(0, 2**31)))
    for word in words:
        expected = openfst_score(machine, word, semiring)
        got = as_openfst(ours.score(word), semiring)
        assert agree_loosely(got, expected), (word, got, expected, text)
    assert agree_loosely(as_openfst(ours.pathsum(), semiring), openfst_total(machine)), text


def test_epsilon_closure_keeps_unreachable_pairs_at_zero() -> None:
    """Found by the random test above: no epsilon path leads from 13 to 10, so "c b b" has probability 0.

    An exact log closure computed by a linear solve must not turn its round-off into paths.
    """
    text = (
        "1 7 0 2.367123614131617\n7 1 0 1.3862943611198906\n"
        + "1 1 0 2.367123614131617\n" * 6
        + "4 1 0 2.0794415416798357\n10 1 0 0.6931471805599453\n13 1 0 1.3862943611198906\n"
        "7 13 0 1.3862943611198906\n10 13 2 1.3862943611198906\n4 1 0 2.0794415416798357\n"
        "4 1 0 2.0794415416798357\n13 10 3 1.3862943611198906\n1 2.367123614131617\n4 2.0794415416798357\n"
    )
    machine = openfst_compile(text, "log")
    ours = read_att(text, "log", symbols=SYMBOLS, acceptor=True)
    for word in (["c", "b"], ["c", "b", "b"], ["c", "b", "c", "b"]):
        assert agree(as_openfst(ours.score(word), "log"), openfst_score(machine, word, "log"), "log"), word


def test_printer_output_with_only_input_symbols(openfst_symbols: Any) -> None:
    """OpenFst prints "a 1" when only the input side has a table: the labels still agree."""
    machine = openfst_compile("0 1 a 0.5\n1 2 <eps>\n2 1 b 0.25\n2 0.125\n", "min-plus", openfst_symbols)
    text = machine.print(isymbols=openfst_symbols)
    assert "a\t1\t0.5" in text
    ours = read_att(text, symbols=SYMBOLS)
    assert ours.score(["a", "b"]) == openfst_score(machine, ["a", "b"], "min-plus") == 0.875


def test_bytes_labels_with_a_sparse_symbols_file(tmp_path: Path) -> None:
    machine = pynini.union(pynini.accep("ab", weight=1.5), pynini.accep("ba", weight=0.25)).closure()
    table = pynini.SymbolTable()
    for symbol, ident in (("<epsilon>", 0), ("a", 97), ("b", 98)):
        table.add_symbol(symbol, ident)
    path = tmp_path / "bytes.syms"
    table.write_text(str(path))
    ours = read_att(machine.print(), symbols=path.read_text(), acceptor=False)
    assert ours.alphabet == SymbolTable(["a", "b"])
    assert ours.score(["a", "b", "b", "a"]) == 1.75
    assert ours.score(["b", "a", "b", "a"]) == 0.5
    assert ours.score(["a"]) == math.inf


def test_symbol_tables_cross_both_ways(tmp_path: Path, openfst_symbols: Any) -> None:
    assert [(openfst_symbols.find(i), i) for i in range(4)] == [("<eps>", 0), ("a", 1), ("b", 2), ("c", 3)]
    path = tmp_path / "printed.syms"
    pynini_symbols().write_text(str(path))
    back = read_symbols(path.read_text())
    assert back == SYMBOLS
    assert back.epsilon == "<epsilon>"


# -- files, symbol-table files and integer labels (issue 12) ------------------------------------


def openfst_score_ids(machine: Any, word: Sequence[int], semiring: str) -> float:
    """OpenFst's score of a string of integer labels (no symbol table)."""
    lines = [f"{i}\t{i + 1}\t{x}" for i, x in enumerate(word)] + [str(len(word))]
    string = openfst_compile("\n".join(lines) + "\n", semiring)
    return openfst_total(fst.compose(machine.copy().arcsort(sort_type="olabel"), string))


@pytest.mark.parametrize("semiring", ["min-plus", "log"])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_integer_labels_without_tables_mean_the_same_both_ways(semiring: str, data: st.DataObject) -> None:
    """OpenFst's own labels are ints: its printed machines score int strings in kleene, and back."""
    machine = data.draw(pynini_machines(semiring))
    ours = read_att(machine.print(acceptor=True), semiring)  # ids, no table: ints
    assert all(isinstance(x, int) for x in ours.alphabet)  # type: ignore[union-attr]
    words = [[SYMBOLS.id(x) for x in w] for w in [data.draw(WORDS) for _ in range(3)]] + [[]]
    for word in words:
        expected = openfst_score_ids(machine, word, semiring)
        if any(x not in ours.alphabet for x in word):  # type: ignore[operator]
            assert expected == math.inf  # a label the machine never names: OpenFst scores zero, kleene refuses
            continue
        assert agree_loosely(as_openfst(ours.score(word), semiring), expected), (word, machine.print())
    back = openfst_compile(write_att(ours), semiring)  # kleene's int labels, read by OpenFst without a table
    for word in words:
        if all(x in ours.alphabet for x in word):  # type: ignore[operator]
            assert agree_loosely(as_openfst(ours.score(word), semiring), openfst_score_ids(back, word, semiring))


@pytest.mark.parametrize("semiring", ["min-plus", "log"])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_att_and_symbol_files_cross_between_pynini_and_kleene(semiring: str, data: st.DataObject) -> None:
    import tempfile

    machine = data.draw(pynini_machines(semiring))
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        # OpenFst -> files -> kleene: the printed machine and pynini's symbol table, both as paths
        pynini_symbols().write_text(str(directory / "in.syms"))
        (directory / "in.att").write_text(machine.print(isymbols=pynini_symbols(), acceptor=True))
        ours = read_att(directory / "in.att", semiring, isymbols=str(directory / "in.syms"))
        with (directory / "in.att").open("rb") as handle:
            again = read_att(handle, semiring, symbols=directory / "in.syms")
        # kleene -> files -> OpenFst: write_att and write_symbols into files that OpenFst reads
        write_att(ours, file=directory / "out.att")
        write_symbols(ours.alphabet, file=directory / "out.syms")  # type: ignore[arg-type]
        table = pynini.SymbolTable.read_text(str(directory / "out.syms"))
        back = openfst_compile((directory / "out.att").read_text(), semiring, table)
        for word in [data.draw(WORDS) for _ in range(3)] + [[]]:
            expected = openfst_score(machine, word, semiring)
            assert agree_loosely(as_openfst(ours.score(word), semiring), expected), word
            assert ours.score(word) == again.score(word)
            assert agree_loosely(as_openfst(ours.score(word), semiring), openfst_score(back, word, semiring)), word
