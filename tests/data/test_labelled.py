"""A user's own labelled text (docs/data.md): the formats, the splits, the errors, a fuzz test against a direct
reading, and TREC (6 classes, the vendored files unpacked) trained with ``kleene train sopa --data PATH``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kleene.cli import main
from kleene.data import DataError, DatasetNotFoundError, load, load_classification, load_labelled
from kleene.data.datasets import read_labelled_file
from kleene.errors import FormatError, KleeneError


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


def test_tsv_with_named_labels(tmp_path: Path) -> None:
    lines = [f"{['neg', 'pos', 'mid'][i % 3]}\tWord{i} and  more\t{i}" for i in range(30)]
    data = load_labelled(write(tmp_path / "reviews.tsv", "\n".join(lines) + "\n"))
    assert data.labels == ("mid", "neg", "pos") and data.num_classes == 3
    examples = data.train + data.dev + data.test
    assert len(examples) == 30 and len(data.test) == 3 and len(data.dev) == 3
    # the text after the first tab, whitespace-tokenized and lowercased
    assert sorted(e.tokens for e in examples) == sorted(
        tuple(f"word{i} and  more {i}".split()) for i in range(30)
    )
    by_tokens = {e.tokens[0]: e.label for e in examples}
    assert by_tokens["word0"] == 1 and by_tokens["word1"] == 2 and by_tokens["word2"] == 0


def test_csv_with_quotes_and_header_and_integer_labels(tmp_path: Path) -> None:
    rows = ["label,text"] + [f'{i % 4},"a, b ""{i}"""' for i in range(20)]
    data = load_labelled(write(tmp_path / "x.csv", "\n".join(rows)))
    assert data.labels == () and data.num_classes == 4
    assert sorted(e.tokens for e in data.train + data.dev + data.test)[0] == ("a,", "b", '"0"')


def test_folder_of_splits_and_a_carved_dev_split(tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    write(folder / "corpus.train.txt", "\n".join(f"{i % 2} train{i}" for i in range(40)))
    write(folder / "corpus.test.txt", "\n".join(f"{i % 2} test{i}" for i in range(6)))
    data = load(str(folder), fold=3)
    assert [e.tokens[0] for e in data.test] == [f"test{i}" for i in range(6)]
    assert len(data.dev) == 4 and len(data.train) == 36  # fold 4 of the training file's 10 folds is dev
    assert {e.tokens for e in data.dev}.isdisjoint({e.tokens for e in data.train})
    write(folder / "corpus.dev.txt", "0 dev0\n1 dev1\n")
    data = load_classification(str(folder))
    assert [e.tokens for e in data.dev] == [("dev0",), ("dev1",)] and len(data.train) == 40


def test_windows_1252_text_is_read(tmp_path: Path) -> None:
    text = "\n".join(f"{i % 2} caf\xe9 \u2026 {i}" for i in range(20))
    data = load_labelled(write(tmp_path / "w.txt", text, "cp1252"))
    assert data.train[0].tokens[:2] == ("café", "…")


@pytest.mark.parametrize(
    ("text", "error", "match"),
    [
        ("", DataError, "no labelled lines"),
        ("pos\tgood\nneg\t   \n", FormatError, "line 2"),
        ("pos\tgood\npos\tfine\n", DataError, "at least two classes"),
        ("justalabel\n0 x\n", FormatError, "line 1"),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        load_labelled(write(tmp_path / "bad.tsv", text))


def test_bad_paths_folders_and_folds(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError):
        load_labelled(tmp_path / "missing.tsv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no training file"):
        load_labelled(tmp_path / "empty")
    twice = tmp_path / "twice"
    twice.mkdir()
    write(twice / "a.train", "0 a\n1 b\n")
    write(twice / "b.train", "0 a\n1 b\n")
    with pytest.raises(DataError, match="two train files"):
        load_labelled(twice)
    with pytest.raises(DataError, match=r"fold must be an integer in 0\.\.9"):
        load_labelled(write(tmp_path / "ok.tsv", "0\ta\n1\tb\n"), fold=10)


# -- fuzz: the loader against a direct reading of what was written -------------------------------------------------
LABELS = st.sampled_from(["0", "1", "2", "pos", "neg", "x y", ""])
TEXTS = st.text(alphabet="ab C\t\r,\"'é…", max_size=8)


@pytest.mark.filterwarnings("ignore::kleene.data.DataWarning")  # tiny files: few examples per class
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(LABELS, TEXTS), max_size=25), suffix=st.sampled_from([".tsv", ".txt"]))
@pytest.mark.slow
def test_fuzz_labelled_files(rows: list[tuple[str, str]], suffix: str, tmp_path: Path) -> None:
    path = write(tmp_path / f"fuzz{suffix}", "\n".join(f"{label}\t{text}" for label, text in rows))
    # the oracle reads each written line directly: split at the first tab, skip blank lines
    expected = []
    malformed = False
    for line in "\n".join(f"{label}\t{text}" for label, text in rows).split("\n"):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        label, _, rest = line.partition("\t" if "\t" in line else " ")
        if not label.strip() or not rest.split():
            malformed = True
        expected.append((label.strip(), tuple(rest.lower().split())))
    try:
        got = read_labelled_file(path)
    except FormatError:
        assert malformed
        return
    except DataError:
        assert not expected
        return
    assert not malformed and got == expected
    try:
        data = load_labelled(path)
    except DataError:  # fewer than two classes, or a split too small to be cut out of the file
        assert len({label for label, _ in expected}) < 2 or len(expected) < 10
        return
    assert sorted(e.tokens for e in data.train + data.dev + data.test) == sorted(t for _, t in expected)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200), suffix=st.sampled_from([".csv", ".tsv", ""]))
def test_fuzz_arbitrary_bytes_give_data_or_a_kleene_error(raw: bytes, suffix: str, tmp_path: Path) -> None:
    path = tmp_path / f"bytes{suffix}"
    path.write_bytes(raw)
    try:
        data = load_labelled(path)
    except KleeneError:
        return
    assert data.num_classes >= 2 and data.train and data.dev and data.test


# -- TREC: a multi-class data set trained through --data -----------------------------------------------------------
VENDORED_TREC = Path(__file__).resolve().parents[2] / "src" / "kleene" / "data" / "vendor" / "trec"


@pytest.mark.slow
def test_sopa_trains_on_trec_through_data_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A user's folder of TREC's original files (the vendored copy, unpacked as the source distributes it)."""
    torch.set_num_threads(1)
    folder = tmp_path / "trec"
    folder.mkdir()
    for name in ("train", "test"):
        packed = VENDORED_TREC / f"TREC.{name}.all.gz"
        (folder / f"TREC.{name}.all").write_bytes(gzip.decompress(packed.read_bytes()))
    out = tmp_path / "sopa-trec"
    argv = ["train", "sopa", "--data", str(folder), "--out", str(out), "--max-steps", "3", "--batch-size", "16"]
    argv += ["--set", "patterns=\"3-4_4-4\"", "--set", "mlp_hidden=8", "--no-progress", "--json"]
    assert main(argv) == 0
    trained = json.loads(capsys.readouterr().out)
    config = json.loads((out / "config.json").read_text())
    assert config["kwargs"]["num_classes"] == 6 and config["metadata"]["data"] == str(folder.resolve())
    assert main(["evaluate", str(out), "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["split"] == "dev" and evaluated["accuracy"] == pytest.approx(trained["dev_accuracy"], abs=1e-12)
    report = tmp_path / "trec.html"
    argv = ["report", str(out), "-o", str(report), "--patterns", "2", "--documents", "1", "--no-progress"]
    assert main(argv) == 0
    assert report.stat().st_size > 1000
