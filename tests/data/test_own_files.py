"""Issue 23, own data: CSV/TSV/JSONL files with or without a header, columns chosen by name or detected when
unambiguous (an ``id`` column is never the text), refused in one line when ambiguous; a warning when the classes
are nearly as many as the examples; plain text for language models; "file not found"; binary files refused without
echoing them; labels a model never saw refused by name."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import pytest

import kleene.data
from kleene.data import DatasetNotFoundError, LanguageModelData, load, load_labelled
from kleene.data.datasets import read_labelled_file
from kleene.errors import DataError, FormatError, KleeneError

WORDS = ["good", "bad", "film", "plot", "great", "dull", "a", "the", "fine", "boring"]
TOPICS = ["sport", "art", "tech"]


def rows(count: int = 60, seed: int = 0) -> list[tuple[int, str, str]]:
    """(id, text, label) rows: texts of 2-6 words, three topics."""
    rng = random.Random(seed)
    return [(i, " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))), TOPICS[i % 3]) for i in range(count)]


def expected(data: list[tuple[int, str, str]]) -> list[tuple[str, tuple[str, ...]]]:
    return [(label, tuple(text.split())) for _, text, label in data]


def test_csv_header_id_text_label_reads_the_text_and_label_columns(tmp_path: Path) -> None:
    data = rows()
    path = tmp_path / "topics.csv"
    path.write_text("id,text,label\n" + "".join(f"{i},{t},{lab}\n" for i, t, lab in data))
    assert read_labelled_file(path) == expected(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # three classes for 60 examples: no warning
        loaded = load_labelled(path)
    assert loaded.num_classes == 3 and loaded.labels == ("art", "sport", "tech")


@pytest.mark.parametrize(
    "order", [("text", "label"), ("label", "text"), ("label", "id", "text"), ("text", "id", "label")]
)
def test_any_column_order_with_a_header(order: tuple[str, ...], tmp_path: Path) -> None:
    data = rows()
    path = tmp_path / "t.csv"
    cell = {"id": lambda r: str(r[0]), "text": lambda r: r[1], "label": lambda r: r[2]}
    path.write_text(",".join(order) + "\n" + "".join(",".join(cell[c](r) for c in order) + "\n" for r in data))
    assert read_labelled_file(path) == expected(data)


def test_tsv_and_jsonl_with_other_column_names_and_chosen_columns(tmp_path: Path) -> None:
    data = rows()
    tsv = tmp_path / "t.tsv"
    tsv.write_text("qid\treview\tsentiment\n" + "".join(f"{i}\t{t}\t{lab}\n" for i, t, lab in data))
    assert read_labelled_file(tsv) == expected(data)
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"uid": i, "title": t, "summary": "x y", "stars": lab}) + "\n" for i, t, lab in data)
    )
    with pytest.raises(DataError, match=r"cannot tell .* \(columns: uid, title, summary, stars\).*--text-column"):
        read_labelled_file(jsonl)
    assert read_labelled_file(jsonl, text_column="title", label_column="stars") == expected(data)
    assert read_labelled_file(jsonl, text_column="2", label_column="4") == expected(data)  # numbers from 1
    with pytest.raises(DataError, match="--text-column 'body' is neither a column name"):
        read_labelled_file(jsonl, text_column="body", label_column="stars")


def test_headerless_file_with_columns_chosen_by_number(tmp_path: Path) -> None:
    data = rows()
    path = tmp_path / "t.tsv"
    path.write_text("".join(f"{i}\t{t}\t{lab}\n" for i, t, lab in data))
    assert read_labelled_file(path, text_column="2", label_column="3") == expected(data)
    with pytest.raises(DataError, match="no header row"):
        read_labelled_file(path, text_column="2")


def test_a_space_separated_first_example_is_not_a_header(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("pos question\nneg other words here\n")
    assert read_labelled_file(path) == [("pos", ("question",)), ("neg", ("other", "words", "here"))]
    path.write_text("label text\nneg other words here\n")
    assert read_labelled_file(path) == [("neg", ("other", "words", "here"))]


def test_many_classes_for_few_examples_warn(tmp_path: Path) -> None:
    path = tmp_path / "ids.tsv"  # no header: the id is read as the label, one class per example
    path.write_text("".join(f"{i}\t{t}\n" for i, t, _ in rows(40)))
    with pytest.warns(kleene.data.DataWarning, match="40 classes for 40 examples"):
        load_labelled(path)


def test_plain_text_is_a_language_model_data_set(tmp_path: Path) -> None:
    text = "once upon a time there was a cat.\n" * 20
    path = tmp_path / "story.txt"
    path.write_text(text)
    data = load(str(path), task="language_model")
    assert isinstance(data, LanguageModelData) and data.level == "char"
    assert "".join(data.train + data.valid + data.test) == text  # every character, in order
    assert len(data.test) == len(text) // 20 and len(data.valid) == len(text) // 20
    assert kleene.data.load_text(path) == data


def test_missing_path_is_file_not_found(tmp_path: Path) -> None:
    for task in (None, "language_model"):
        with pytest.raises(DatasetNotFoundError, match="file not found"):
            load("nosuch.tsv", task=task)
        with pytest.raises(DatasetNotFoundError, match="file not found"):
            load(str(tmp_path / "nosuch"), task=task)


def test_binary_file_is_refused_without_echoing_it(tmp_path: Path) -> None:
    path = tmp_path / "blob.tsv"
    path.write_bytes(bytes(range(256)) * 10)
    for task in (None, "language_model"):
        with pytest.raises(FormatError, match="not a text file") as caught:
            load(str(path), task=task)
        assert len(str(caught.value)) < 200


def test_echoed_labels_are_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "one.tsv"
    path.write_text("".join(f"{'x' * 3000}\tsome text {i}\n" for i in range(5)))
    with pytest.raises(DataError, match="at least two classes") as caught:
        load_labelled(path)
    assert len(str(caught.value)) < 200


def test_labels_outside_the_trained_ones_are_named(tmp_path: Path) -> None:
    path = tmp_path / "other.tsv"
    path.write_text("".join(f"{lab}\t{t}\n" for _, t, lab in rows()).replace("tech\t", "food\t"))
    with pytest.raises(DataError, match=r"never saw in training: 'food' \(it knows 'art', 'sport', 'tech'\)"):
        load_labelled(path, labels=["art", "sport", "tech"])
    data = load_labelled(path, labels=["sport", "art", "food"])  # numbered as the trained model numbers them
    assert data.labels == ("sport", "art", "food") and {e.label for e in data.train} == {0, 1, 2}


def test_every_error_of_a_user_file_is_a_kleene_error(tmp_path: Path) -> None:
    cases = {
        "bad.jsonl": '{"text": "a"}\n[1, 2]\n',
        "bad2.jsonl": "{not json\n",
        "nested.jsonl": '{"text": {"a": 1}}\n',
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(KleeneError):
            load_labelled(tmp_path / name)
