"""Dataset loaders against the per-split counts in the data READMEs; encodings, folds, vocabularies, batching."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from kleene.data import (
    VENDOR_DIR,
    Batch,
    DataError,
    DatasetNotFoundError,
    Example,
    UnknownDatasetError,
    Vocabulary,
    classification_batches,
    cross_validation_folds,
    data_roots,
    find_file,
    glove_matrix,
    language_model_batches,
    load,
    load_classification,
    load_glove,
    load_language_model,
    pad_sequences,
    read_classification_file,
)
from kleene.errors import FormatError


def shared_file(relative: str) -> Path:
    """A file of the shared data folder; skips the test (naming the paths tried) when it is absent."""
    try:
        return find_file(relative.split("/")[0], relative)
    except DatasetNotFoundError as missing:
        pytest.skip(f"non-vendored data absent: {missing}")


def load_or_skip(name: str):
    try:
        return load(name)
    except DatasetNotFoundError as missing:
        pytest.skip(f"non-vendored data absent: {missing}")


def label_counts(examples: list[Example]) -> dict[int, int]:
    return dict(Counter(example.label for example in examples))


# -- vendored data ---------------------------------------------------------------------------------------------------


def test_sst2_split_counts_from_vendored_copy():
    data = load_classification("sst2")
    assert find_file("sst2", "sst2/stsa.binary.train", vendored="sst2/stsa.binary.train.gz").is_relative_to(VENDOR_DIR)
    assert (len(data.train), len(data.dev), len(data.test)) == (6920, 872, 1821)
    assert label_counts(data.train) == {0: 3310, 1: 3610}
    assert label_counts(data.dev) == {0: 428, 1: 444}
    assert label_counts(data.test) == {0: 912, 1: 909}
    assert max(len(example.tokens) for split in (data.train, data.dev, data.test) for example in split) == 56
    assert data.train[0].tokens[:3] == ("a", "stirring", ",")
    assert any("crème" in example.tokens for split in (data.train, data.dev, data.test) for example in split)


@pytest.mark.parametrize(
    ("vendored", "shared"),
    [
        ("sst2/stsa.binary.train.gz", "sst2/stsa.binary.train"),
        ("sst2/stsa.binary.dev.gz", "sst2/stsa.binary.dev"),
        ("sst2/stsa.binary.test.gz", "sst2/stsa.binary.test"),
        ("tinyshakespeare/input.txt.gz", "tinyshakespeare/input.txt"),
        ("trec/TREC.train.all.gz", "trec/TREC.train.all"),
        ("trec/TREC.test.all.gz", "trec/TREC.test.all"),
    ],
)
def test_vendored_files_are_byte_identical_to_the_shared_copies(vendored, shared):
    assert gzip.decompress((VENDOR_DIR / vendored).read_bytes()) == shared_file(shared).read_bytes()


def test_vendored_files_carry_attribution():
    for folder in ("sst2", "tinyshakespeare", "glove", "trec"):
        text = (VENDOR_DIR / folder / "README.md").read_text(encoding="utf-8")
        assert "**Source" in text and "**Citation" in text and "License" in text, folder


def test_trec_from_vendored_copy():
    data = load_classification("trec")
    assert data.labels == ("DESC", "ENTY", "ABBR", "HUM", "LOC", "NUM")
    assert (len(data.train) + len(data.dev), len(data.test)) == (5452, 500)  # the README's counts
    assert label_counts(data.train + data.dev) == {0: 1162, 1: 1250, 2: 86, 3: 1223, 4: 835, 5: 896}
    assert label_counts(data.test) == {0: 138, 1: 94, 2: 9, 3: 65, 4: 81, 5: 113}
    assert data.train[0].tokens[:3] == ("how", "did", "serfdom")  # lowercased
    assert any("ð" in token for example in data.train + data.dev for token in example.tokens)  # read as cp1252


def test_tinyshakespeare_characters():
    data = load_language_model("tinyshakespeare")
    text = data.train + data.valid + data.test
    assert len(text) == 1_115_394 and len(set(text)) == 65
    assert len(data.train) == int(0.9 * 1_115_394) and data.level == "char"


@pytest.mark.slow
def test_glove_subset():
    vectors = load_glove({"the", "movie", "zzzz-not-a-word"})
    assert set(vectors) == {"the", "movie"}
    assert vectors["the"][:3].tolist() == pytest.approx([0.418, 0.24968, -0.41242])
    sst2 = load_classification("sst2")
    vocab = Vocabulary.build(example.tokens for split in (sst2.train, sst2.dev, sst2.test) for example in split)
    matrix, coverage = glove_matrix(vocab)
    assert matrix.shape == (len(vocab), 50) and len(vocab) == 17573 + 2
    assert coverage == pytest.approx(16114 / 17573)  # the GloVe README's SST-2 type coverage
    assert not matrix[vocab.pad_id].any()
    torch.testing.assert_close(matrix[2:].norm(dim=1), torch.ones(len(vocab) - 2))
    # vectors read once for more words than the vocabulary (as `prepare` does) give the same matrices
    more = load_glove(set(vocab.tokens) | {"giraffe", "kilowatt"})  # two words SST-2 lacks
    assert len(more) == sum(token in more for token in vocab.tokens) + 2
    for normalize in (True, False):
        read, _ = glove_matrix(vocab, normalize=normalize)
        given, given_coverage = glove_matrix(vocab, normalize=normalize, vectors=more)
        assert torch.equal(read, given) and given_coverage == coverage


def test_glove_reader_keeps_the_last_of_a_repeated_word_and_names_a_malformed_line(tmp_path: Path) -> None:
    from kleene.data.embeddings import _read_glove

    def read(text: str) -> tuple[dict[str, int], np.ndarray]:
        path = tmp_path / f"glove{len(text)}.txt.gz"
        path.write_bytes(gzip.compress(text.encode()))
        return _read_glove(str(path), path.stat().st_mtime_ns, path.stat().st_size)

    halves, ones = " ".join(["0.5"] * 50), " ".join(["1"] * 50)
    rows, matrix = read(f"a {halves}\nb {halves}\na {ones}\n")
    assert rows == {"a": 2, "b": 1} and list(rows) == ["a", "b"]  # the first place, the last vector
    assert matrix.shape == (3, 50) and matrix[2].tolist() == [1.0] * 50 and not matrix.flags.writeable
    with pytest.raises(FormatError, match=r"line 2: expected 50 values, got 2"):
        read(f"a {halves}\nb 1 2\n")
    with pytest.raises(FormatError, match=r"line 3: expected 50 numbers, got 'x 0.5"):
        read(f"a {halves}\nb {halves}\nc {halves.replace('0.5', 'x', 1)}\n")


# -- data-root datasets ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "relative", "lines", "labels", "empty"),
    [
        ("subj", "subj/subj.all", 10000, {0: 5000, 1: 5000}, 0),
        ("mr", "mr/rt-polarity.all", 10662, {0: 5331, 1: 5331}, 0),
        ("cr", "cr/custrev.all", 3775, {0: 1368, 1: 2407}, 4),
    ],
)
def test_cross_validated_dataset_counts(name, relative, lines, labels, empty):
    raw = shared_file(relative).read_bytes().decode("cp1252").split("\n")
    assert raw[-1] == "" and len(raw) - 1 == lines
    assert dict(Counter(int(line.partition(" ")[0]) for line in raw[:-1])) == labels
    data = load_or_skip(name)
    assert len(data.train) + len(data.dev) + len(data.test) == lines - empty  # empty texts are dropped
    assert len(data.test) in (lines // 10, lines // 10 + 1) and len(data.dev) in (lines // 10, lines // 10 + 1)


@pytest.mark.parametrize(
    ("name", "relative", "latin1_lines"), [("mr", "mr/rt-polarity.all", 10685), ("subj", "subj/subj.all", 10021)]
)
def test_cp1252_decoding_keeps_the_ellipsis_inside_lines(name, relative, latin1_lines):
    raw = shared_file(relative).read_bytes()
    assert len(raw.decode("latin-1").splitlines()) == latin1_lines  # the pitfall the README warns about
    data = load_or_skip(name)
    everything = data.train + data.dev + data.test
    assert len(everything) == {"mr": 10662, "subj": 10000}[name]
    assert any("…" in token for example in everything for token in example.tokens)
    assert not any("\x85" in token for example in everything for token in example.tokens)


def test_ptb_token_counts():
    data = load_or_skip("ptb")
    assert (len(data.train), len(data.valid), len(data.test)) == (929_589, 73_760, 82_430)
    assert len(set(data.train)) == 10_000 and data.train.count("<eos>") == 42_068
    assert set(data.valid) <= set(data.train) and set(data.test) <= set(data.train)


def test_folds_are_a_deterministic_partition():
    folds = cross_validation_folds(103)
    assert folds == cross_validation_folds(103)
    assert sorted(i for fold in folds for i in fold) == list(range(103))
    assert sorted(len(fold) for fold in folds) == [10] * 7 + [11] * 3
    assert folds != cross_validation_folds(103, seed=5)


def test_cross_validation_splits_are_disjoint_and_rotate():
    first, second = load_or_skip("cr"), load_classification("cr", fold=1)
    assert first.dev == second.test  # fold f's dev set is fold f + 1
    train = Counter((e.tokens, e.label) for e in first.train)
    test = Counter((e.tokens, e.label) for e in first.test)
    assert sum((train & test).values()) <= 8  # only the README's 8 duplicate lines may repeat
    with pytest.raises(DataError, match=r"fold must be an integer in 0\.\.9"):
        load_classification("cr", fold=10)


def test_missing_data_root_names_dataset_and_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("KLEENE_DATA", str(tmp_path))
    assert data_roots() == [tmp_path]
    with pytest.raises(DatasetNotFoundError, match=rf"dataset 'subj': subj/subj.all not found \(tried {tmp_path}"):
        load_classification("subj")
    assert len(load_classification("sst2").train) == 6920  # vendored data needs no data root


def test_unknown_dataset_and_malformed_label(tmp_path):
    with pytest.raises(UnknownDatasetError, match="unknown dataset 'imdb'"):
        load("imdb")
    bad = tmp_path / "bad.all"
    bad.write_bytes(b"1 fine\npositive not a label\n")
    with pytest.raises(FormatError, match="line 2: expected '<label> <text>'"):
        read_classification_file(bad, "utf-8")


# -- vocabulary and batching ------------------------------------------------------------------------------------


def test_vocabulary():
    vocab = Vocabulary.build([["b", "a", "b"], ["c", "a", "b"]], min_count=2)
    assert vocab.tokens == ["<pad>", "<unk>", "b", "a"]
    assert vocab.encode(["a", "zzz", "b"]) == [3, 1, 2] and vocab.decode([3, 2]) == ["a", "b"]
    assert Vocabulary.from_json(vocab.to_json()).tokens == vocab.tokens
    with pytest.raises(FormatError, match="must start with"):
        Vocabulary(["a", "b"])
    with pytest.raises(FormatError, match="duplicate tokens"):
        Vocabulary(["<pad>", "<unk>", "a", "a"])
    with pytest.raises(FormatError, match="JSON list"):
        Vocabulary.from_json({"a": 1})


def test_pad_sequences():
    tokens, lengths = pad_sequences([[5, 6, 7], [], [8]])
    assert tokens.tolist() == [[5, 6, 7], [0, 0, 0], [8, 0, 0]] and lengths.tolist() == [3, 1, 1]


def test_classification_batches_shard_across_ranks():
    examples = [Example((str(i),), i % 2) for i in range(23)]
    vocab = Vocabulary.build(e.tokens for e in examples)
    kwargs = {"shuffle": True, "seed": 3, "epoch": 1, "world_size": 2}
    ranks = [classification_batches(examples, vocab, 4, rank=rank, **kwargs) for rank in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == 3  # 6 batches of which the last (3 examples) is kept: even count
    seen = [vocab.decode(b.tokens[:, 0].tolist()) for batches in ranks for b in batches]
    flat = [token for batch in seen for token in batch]
    assert len(flat) == len(set(flat))
    again = classification_batches(examples, vocab, 4, rank=0, **kwargs)
    assert all(torch.equal(a.tokens, b.tokens) for a, b in zip(again, ranks[0]))
    other_epoch = classification_batches(examples, vocab, 4, rank=0, **{**kwargs, "epoch": 2})
    assert not all(torch.equal(a.tokens, b.tokens) for a, b in zip(other_epoch, ranks[0]))


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_both_batchers_take_the_same_share_of_one_order(world_size: int, shuffle: bool) -> None:
    """Classification and language-model batches of 11 items (examples or windows), batch size 2: each rank gets
    every world_size-th batch of one epoch order, a multiple of world_size batches in all, the same for both."""
    count, window = 11, 3
    examples = [Example((str(i),), 0) for i in range(count)]
    vocab = Vocabulary.build(e.tokens for e in examples)
    stream = list(range(count * window + 1))
    kwargs = {"shuffle": shuffle, "seed": 5, "epoch": 2, "world_size": world_size}

    def ids(batches: list[Batch]) -> list[list[int]]:
        return [[int(word) for word in vocab.decode(b.tokens[:, 0].tolist())] for b in batches]

    whole_ids = ids(classification_batches(examples, vocab, 2, shuffle=shuffle, seed=5, epoch=2))
    assert sorted(i for batch in whole_ids for i in batch) == list(range(count))
    assert (whole_ids == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10]]) is not shuffle
    usable = len(whole_ids) - len(whole_ids) % world_size
    for rank in range(world_size):
        expected = whole_ids[rank:usable:world_size]
        assert ids(classification_batches(examples, vocab, 2, rank=rank, **kwargs)) == expected
        windows = language_model_batches(stream, 2, window, rank=rank, **kwargs)
        assert [(b.tokens[:, 0] // window).tolist() for b in windows] == expected
    for rank in (-1, world_size):
        with pytest.raises(DataError, match=f"rank {rank} outside"):
            classification_batches(examples, vocab, 2, rank=rank, world_size=world_size)
        with pytest.raises(DataError, match=f"rank {rank} outside"):
            language_model_batches(stream, 2, window, rank=rank, world_size=world_size)


def test_language_model_batches_predict_the_next_token():
    batches = language_model_batches(list(range(20)), batch_size=2, window=4)
    assert [b.tokens.tolist() for b in batches] == [[[0, 1, 2, 3], [4, 5, 6, 7]], [[8, 9, 10, 11], [12, 13, 14, 15]]]
    for batch in batches:
        assert torch.equal(batch.targets, batch.tokens + 1) and batch.lengths.tolist() == [4, 4]
    with pytest.raises(ValueError, match="shorter than one window"):
        language_model_batches([1, 2], batch_size=1, window=4)
