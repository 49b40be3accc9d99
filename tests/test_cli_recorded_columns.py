"""Issue 23: ``kleene report`` and ``kleene extract`` read a user's CSV in the columns recorded at training (as
``kleene evaluate`` does) when ``--data`` comes without ``--text-column`` / ``--label-column``.

The files have an id column, two text columns (headline, blurb) and a label column (genre), none of them named as a
text or a label is, so the columns cannot be detected: a command that ignored the recorded ones reads the first
row as data, the ids as labels and the rest of each line as text."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from kleene.cli import main
from kleene.data import DataWarning
from kleene.extract.checkpoint import extract_checkpoint
from kleene.extract.readable import WORDS_PER_ARC

BLURB = ["good", "bad", "film", "plot", "great", "dull", "fine", "boring"]
HEADLINE = ["zebra", "quartz", "violin"]  # words of the headline column only


def write_csv(path: Path, rows: int, topics: list[str], seed: int) -> Path:
    rng = random.Random(seed)
    lines = ["id,headline,blurb,genre"]
    for i in range(rows):
        lines.append(f"{i},{' '.join(rng.choices(HEADLINE, k=2))},{' '.join(rng.choices(BLURB, k=5))},{topics[i % 2]}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint, other.csv): a tiny SoPa trained with --text-column blurb --label-column genre; other.csv has the
    same columns, other rows and its genres in another order."""
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("columns")
    data = write_csv(folder / "train.csv", 60, ["art", "sport"], seed=0)
    other = write_csv(folder / "other.csv", 30, ["sport", "art"], seed=1)
    out = folder / "run"
    argv = ["train", "sopa", "--data", str(data), "--out", str(out), "--max-steps", "2", "--pretrained", "none"]
    argv += ["--text-column", "blurb", "--label-column", "genre", "--no-progress", "--batch-size", "16"]
    argv += ["--set", 'patterns="3-2"', "--set", "embedding_dim=4", "--set", "mlp_hidden=4"]
    assert main(argv) == 0
    return out, other


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_file_needs_its_columns(trained: tuple[Path, Path]) -> None:
    """The premise: without the recorded columns the file is read otherwise (ids as labels)."""
    from kleene.data import load

    with pytest.warns(DataWarning, match="31 classes for 31 examples"):
        assert load(str(trained[1])).num_classes == 31  # type: ignore[union-attr]


def test_report_reads_the_recorded_columns(trained: tuple[Path, Path], tmp_path: Path, capsys: Any) -> None:
    checkpoint, other = trained
    page = tmp_path / "r.html"
    argv = ["report", str(checkpoint), "--data", str(other), "-o", str(page), "--patterns", "2", "--documents", "2"]
    code, _, err = run([*argv, "--no-progress"], capsys)
    assert code == 0, err
    text = page.read_text(encoding="utf-8")
    assert any(word in text for word in BLURB) and not any(word in text for word in HEADLINE)


def test_extract_reads_the_recorded_columns(trained: tuple[Path, Path], capsys: Any) -> None:
    checkpoint, other = trained
    code, out, err = run(["extract", str(checkpoint), "--data", str(other), "--sentences", "5", "--json"], capsys)
    assert code == 0, err
    result = extract_checkpoint(checkpoint, data=str(other), sentences=5)
    assert json.loads(out)["sentences"] == len(result.sentences) > 0
    assert {word for sentence in result.sentences for word in sentence} <= set(BLURB)


def test_columns_given_anew_win_over_the_recorded_ones(trained: tuple[Path, Path], capsys: Any) -> None:
    """--text-column headline reads the headlines: words the model never saw, so every one reads <unk>."""
    checkpoint, other = trained
    result = extract_checkpoint(checkpoint, data=str(other), sentences=5, text_column="headline")
    assert {word for sentence in result.sentences for word in sentence} == {"<unk>"}
    code, _, err = run(["evaluate", str(checkpoint), "--data", str(other), "--label-column", "headline"], capsys)
    assert code == 1 and "never saw" in err and "zebra" in err, err


def test_extract_passes_words_per_arc_to_the_exporter(trained: tuple[Path, Path], tmp_path: Path, capsys: Any) -> None:
    """``--words-per-arc`` reaches ``Extraction.export`` (tests/extract/test_export_drawings.py checks the drawing):
    2 words per arc, the exporter's default without the option, every word with 0."""
    checkpoint, other = trained
    base = ["extract", str(checkpoint), "--data", str(other), "--sentences", "3", "--format", "dot"]
    captions = {}
    for name, flags in {"two": ["--words-per-arc", "2"], "default": [], "every": ["--words-per-arc", "0"]}.items():
        code, _, err = run([*base, "--out", str(tmp_path / name), *flags], capsys)
        assert code == 0, err
        captions[name] = re.findall(r"the best \d+ of \d+ words per arc", (tmp_path / name / "unit000.dot").read_text())
    vocabulary = len(BLURB) + 2  # every blurb word (60 rows of 5 draws) and the start and end of a document
    assert captions == {
        "two": [f"the best 2 of {vocabulary} words per arc"],
        "default": [f"the best {WORDS_PER_ARC} of {vocabulary} words per arc"],
        "every": [],
    }
