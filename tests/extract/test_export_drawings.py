"""Issue 23: ``Extraction.export(fmt="dot")`` draws the best ``words_per_arc`` words of each arc (default
``WORDS_PER_ARC``), never the padding or unknown token, or every word with ``words_per_arc=None``; the CLI passes its
``--words-per-arc`` to the exporter. Oracle: the automaton's own arc weights (``Extraction.wfsa``)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from kleene.errors import ExtractionError
from kleene.extract import Extraction, from_linear_rnn
from kleene.extract.readable import WORDS_PER_ARC

WORDS = ["<pad>", "<unk>", *(f"w{i}" for i in range(10))]
EDGE = re.compile(r'^\ts(\d+) -> s(\d+) \[label="(\S+) / ', re.MULTILINE)


@pytest.fixture(scope="module")
def extraction() -> Extraction:
    """A linear Elman RNN with 2 units over 12 words (real semiring: larger weights are better)."""
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(2, 3)), 0.3 * rng.normal(size=(2, 2)), rng.normal(size=2), rng.normal(size=(12, 3))
    return from_linear_rnn(*weights, WORDS)


def drawn_words(path: Path) -> dict[tuple[int, int], list[str]]:
    """The words drawn on each (source state, target state) of a dot file written by ``to_dot``."""
    drawn: dict[tuple[int, int], list[str]] = defaultdict(list)
    for src, dst, word in EDGE.findall(path.read_text()):
        drawn[int(src), int(dst)].append(word)
    return drawn


def check_best(extraction: Extraction, index: int, drawn: dict[tuple[int, int], list[str]], per_arc: int) -> None:
    """Each state pair shows min(per_arc, words) words, none hidden, each weighing at least every word left out."""
    weights: dict[tuple[int, int], dict[str, float]] = defaultdict(dict)
    for arc in extraction.wfsa(index, WORDS).arcs:
        weights[arc.src, arc.dst][str(arc.label)] = float(arc.weight)
    assert set(drawn) == set(weights)
    for pair, words in drawn.items():
        candidates = {word: weight for word, weight in weights[pair].items() if word not in ("<pad>", "<unk>")}
        assert len(words) == len(set(words)) == min(per_arc, len(candidates)) and set(words) <= set(candidates)
        left_out = [weight for word, weight in candidates.items() if word not in words]
        assert not left_out or min(candidates[word] for word in words) >= max(left_out)


def test_dot_export_draws_the_best_words_per_arc_by_default(extraction: Extraction, tmp_path: Path) -> None:
    paths = extraction.export(tmp_path, "dot")
    assert len(paths) == 2
    for index, path in enumerate(paths):
        check_best(extraction, index, drawn_words(path), WORDS_PER_ARC)
        assert f"the best {WORDS_PER_ARC} of 10 words per arc" in path.read_text()


def test_dot_export_takes_the_number_of_words_or_every_word(extraction: Extraction, tmp_path: Path) -> None:
    for index, path in enumerate(extraction.export(tmp_path / "two", "dot", words_per_arc=2)):
        check_best(extraction, index, drawn_words(path), 2)
    for index, path in enumerate(extraction.export(tmp_path / "all", "dot", words_per_arc=None)):
        drawn = drawn_words(path)
        arcs = extraction.wfsa(index, WORDS).arcs
        assert sum(map(len, drawn.values())) == len(arcs)  # every arc, <pad> and <unk> included
        assert {"<pad>", "<unk>"} <= {word for words in drawn.values() for word in words}


@pytest.mark.parametrize("bad", [0, -1, 2.5, "5", True])
def test_dot_export_refuses_a_bad_number_of_words(extraction: Extraction, tmp_path: Path, bad: object) -> None:
    with pytest.raises(ExtractionError, match=r"words_per_arc must be None \(every word\) or an integer >= 1"):
        extraction.export(tmp_path, "dot", words_per_arc=bad)  # type: ignore[arg-type]
