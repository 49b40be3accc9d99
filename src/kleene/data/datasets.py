"""Dataset loaders: sentence classification (SST-2, subj, CR, MR) and language modelling (PTB, tiny-shakespeare).

Classification files hold ``<label> <text>`` per line, split at the first space; tokens are the whitespace tokens of
the (already lowercased, tokenized) text. SST-2 has an official train/dev/test split. subj, CR and MR have none: a
deterministic 10-fold cross-validation is used, where the examples are shuffled with a fixed seed, fold ``f`` is the
test set, fold ``f + 1 (mod 10)`` the dev set and the other eight folds the training set.

A user's own labelled text (``load_labelled``, or any path given where a data set name is expected) follows the
format of docs/data.md: one ``LABEL<TAB>TEXT`` (or ``LABEL,TEXT`` in a .csv file, or ``LABEL TEXT``) per line,
in one file (cut into folds as subj) or a folder of train/dev/test files (a missing dev or test split is cut from
the training file the same way).
"""

from __future__ import annotations

import csv
import io
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kleene.data.sources import find_file, read_lines, read_text
from kleene.errors import DataError, DatasetNotFoundError, FormatError, UnknownDatasetError

__all__ = [
    "CLASSIFICATION",
    "LANGUAGE_MODELLING",
    "ClassificationData",
    "Example",
    "LanguageModelData",
    "UnknownDatasetError",
    "cross_validation_folds",
    "load",
    "load_classification",
    "load_labelled",
    "load_language_model",
    "read_classification_file",
]

#: Seed of the shuffle before the cross-validation folds are cut.
FOLD_SEED = 1234


@dataclass(frozen=True)
class Example:
    """One labelled sentence."""

    tokens: tuple[str, ...]
    label: int


@dataclass(frozen=True)
class ClassificationData:
    """Three splits of labelled sentences; ``labels`` names the classes 0..num_classes-1 when the files did."""

    name: str
    train: list[Example]
    dev: list[Example]
    test: list[Example]
    num_classes: int
    labels: tuple[str, ...] = ()

    def majority_rate(self, split: str) -> float:
        """The accuracy of always predicting the most frequent label of ``split`` (0.0 for an empty split)."""
        examples = self.split(split)
        if not examples:
            return 0.0
        counts: dict[int, int] = {}
        for example in examples:
            counts[example.label] = counts.get(example.label, 0) + 1
        return max(counts.values()) / len(examples)

    def chance_bound(self, split: str) -> float:
        """The accuracy a model must beat to be told from chance on ``split``: the majority rate ``p`` plus two
        standard errors of an accuracy measured on its ``n`` examples, ``2 sqrt(p (1 - p) / n)``."""
        rate, count = self.majority_rate(split), len(self.split(split))
        return rate + 2 * (rate * (1 - rate) / max(count, 1)) ** 0.5

    def split(self, name: str) -> list[Example]:
        """``"train"``, ``"dev"`` (alias ``"valid"``) or ``"test"``."""
        splits = {"train": self.train, "dev": self.dev, "valid": self.dev, "test": self.test}
        if name not in splits:
            raise DataError(f"{self.name}: unknown split {name!r} (expected train, dev or test)")
        return splits[name]


@dataclass(frozen=True)
class LanguageModelData:
    """Token streams; ``level`` is ``"word"`` (PTB, with ``<eos>`` after each line) or ``"char"``."""

    name: str
    train: list[str]
    valid: list[str]
    test: list[str]
    level: str

    def split(self, name: str) -> list[str]:
        splits = {"train": self.train, "dev": self.valid, "valid": self.valid, "test": self.test}
        if name not in splits:
            raise DataError(f"{self.name}: unknown split {name!r} (expected train, valid or test)")
        return splits[name]


def read_classification_file(path: Path, encoding: str, *, keep_empty: bool = False) -> list[Example]:
    """``<label> <text>`` lines of ``path`` as examples; blank lines are skipped, and so are empty texts unless
    ``keep_empty``.

    Raises:
        FormatError: a label that is not a non-negative integer (the message names the file and line).
    """
    examples = []
    for number, line in enumerate(read_lines(path, encoding), start=1):
        if not line.strip():
            continue
        label, _, text = line.partition(" ")
        if not label.isdigit():
            raise FormatError(f"{path}: line {number}: expected '<label> <text>', got label {label!r}")
        tokens = tuple(text.split())
        if tokens or keep_empty:
            examples.append(Example(tokens, int(label)))
    return examples


def cross_validation_folds(count: int, folds: int = 10, seed: int = FOLD_SEED) -> list[list[int]]:
    """Indices ``0..count-1`` shuffled with ``seed`` and cut into ``folds`` folds whose sizes differ by at most one."""
    indices = list(range(count))
    random.Random(seed).shuffle(indices)
    return [indices[fold::folds] for fold in range(folds)]


def _sst2() -> ClassificationData:
    def split(name: str) -> list[Example]:
        path = find_file("sst2", f"sst2/stsa.binary.{name}", vendored=f"sst2/stsa.binary.{name}.gz")
        return read_classification_file(path, "utf-8")

    return ClassificationData("sst2", split("train"), split("dev"), split("test"), num_classes=2)


def _cross_validated(name: str, relative: str, encoding: str, fold: int) -> ClassificationData:
    if isinstance(fold, bool) or not isinstance(fold, int) or not 0 <= fold < 10:
        raise DataError(f"{name}: fold must be an integer in 0..9, got {fold!r}")
    examples = read_classification_file(find_file(name, relative), encoding)
    folds = cross_validation_folds(len(examples))
    dev_fold = (fold + 1) % len(folds)
    test = [examples[i] for i in folds[fold]]
    dev = [examples[i] for i in folds[dev_fold]]
    train = [examples[i] for f, chunk in enumerate(folds) if f not in (fold, dev_fold) for i in chunk]
    return ClassificationData(name, train, dev, test, num_classes=1 + max(e.label for e in examples))


#: TREC's coarse classes, in the order of the class ids of its files (vendor/trec/README.md).
TREC_LABELS = ("DESC", "ENTY", "ABBR", "HUM", "LOC", "NUM")


def _trec() -> ClassificationData:
    """TREC (Li and Roth 2002): the official train and test files, lowercased; fold 1 of the training file's 10
    seeded folds is the dev set (the data has none)."""

    def read(name: str, encoding: str) -> list[Example]:
        path = find_file("trec", f"trec/TREC.{name}.all", vendored=f"trec/TREC.{name}.all.gz")
        return [Example(tuple(t.lower() for t in e.tokens), e.label) for e in read_classification_file(path, encoding)]

    train = read("train", "cp1252")
    dev_fold = cross_validation_folds(len(train))[1]
    taken = set(dev_fold)
    return ClassificationData(
        "trec",
        [e for i, e in enumerate(train) if i not in taken],
        [train[i] for i in dev_fold],
        read("test", "ascii"),
        num_classes=len(TREC_LABELS),
        labels=TREC_LABELS,
    )


#: Classification datasets: name -> loader(fold).
CLASSIFICATION: dict[str, Callable[[int], ClassificationData]] = {
    "sst2": lambda fold: _sst2(),
    "subj": lambda fold: _cross_validated("subj", "subj/subj.all", "cp1252", fold),
    "cr": lambda fold: _cross_validated("cr", "cr/custrev.all", "ascii", fold),
    "mr": lambda fold: _cross_validated("mr", "mr/rt-polarity.all", "cp1252", fold),
    "trec": lambda fold: _trec(),
}


def _ptb() -> LanguageModelData:
    def split(name: str) -> list[str]:
        lines = read_lines(find_file("ptb", f"ptb/ptb.{name}.txt"), "ascii")
        return [token for line in lines for token in [*line.split(), "<eos>"]]

    return LanguageModelData("ptb", split("train"), split("valid"), split("test"), level="word")


def _tinyshakespeare() -> LanguageModelData:
    """Characters; the first 90% train, the next 5% valid, the last 5% test (the file has no official split)."""
    text = read_text(
        find_file("tinyshakespeare", "tinyshakespeare/input.txt", vendored="tinyshakespeare/input.txt.gz"), "ascii"
    )
    train_end, valid_end = int(0.9 * len(text)), int(0.95 * len(text))
    return LanguageModelData(
        "tinyshakespeare", list(text[:train_end]), list(text[train_end:valid_end]), list(text[valid_end:]), "char"
    )


#: Language-modelling datasets: name -> loader.
LANGUAGE_MODELLING: dict[str, Callable[[], LanguageModelData]] = {"ptb": _ptb, "tinyshakespeare": _tinyshakespeare}


# -- a user's own labelled text ---------------------------------------------------------------------------------
#: Split names recognized in the file names of a data folder (as a word of the name: ``train.tsv``, ``TREC.test.all``).
SPLIT_WORDS = {"train": "train", "dev": "dev", "valid": "dev", "validation": "dev", "test": "test"}


def _decode(raw: bytes) -> str:
    """UTF-8 (an initial byte-order mark dropped), else Windows-1252, else Latin-1 (which decodes any bytes)."""
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return raw.decode("latin-1")


def read_labelled_file(path: str | Path) -> list[tuple[str, tuple[str, ...]]]:
    """(label, tokens) per non-blank line of ``path``; see docs/data.md.

    A ``.csv`` file is read with Python's csv module (quotes allowed; a first row ``label,text`` is a header);
    otherwise a line holding a tab is split at its first tab and any other line at its first space. Tokens are the
    whitespace tokens of the text, lowercased.

    Raises:
        FormatError: a line without a label and a text (the message names the file and line).
        DataError: a file without any example.
    """
    path = Path(path)
    text = _decode(path.read_bytes())
    rows: list[tuple[int, str, str]] = []
    if path.suffix.lower() == ".csv":
        for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
            if not row or not "".join(row).strip():
                continue
            if number == 1 and [cell.strip().lower() for cell in row] == ["label", "text"]:
                continue
            if len(row) < 2:
                raise FormatError(f"{path}: line {number}: expected 'LABEL,TEXT', got {','.join(row)[:60]!r}")
            rows.append((number, row[0], ",".join(row[1:])))
    else:
        for number, line in enumerate(text.split("\n"), start=1):
            line = line.removesuffix("\r")
            if not line.strip():
                continue
            label, _, rest = line.partition("\t" if "\t" in line else " ")
            rows.append((number, label, rest))
    examples = []
    for number, label, rest in rows:
        tokens = tuple(rest.lower().split())
        if not label.strip() or not tokens:
            raise FormatError(f"{path}: line {number}: expected 'LABEL<TAB>TEXT' with a label and a non-empty text")
        examples.append((label.strip(), tokens))
    if not examples:
        raise DataError(f"{path}: no labelled lines (expected 'LABEL<TAB>TEXT' per line; see docs/data.md)")
    return examples


def _split_files(folder: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        words = {SPLIT_WORDS[w] for w in re.split(r"[^a-z]+", path.name.lower()) if w in SPLIT_WORDS}
        if len(words) != 1:
            continue
        (split,) = words
        if split in found:
            raise DataError(f"{folder}: two {split} files, {found[split].name} and {path.name}")
        found[split] = path
    if "train" not in found:
        raise DataError(
            f"{folder}: no training file (expected a file named like train.tsv, train.csv or NAME.train.txt, and "
            "optionally dev and test files; see docs/data.md)"
        )
    return found


def load_labelled(path: str | Path, fold: int = 0) -> ClassificationData:
    """A user's labelled text: one file, or a folder of train (required), dev and test files; see docs/data.md.

    Labels that are all non-negative integers are the class ids; any other labels are sorted and numbered 0, 1, ...
    (``labels`` keeps their names). A single file is cut into 10 seeded folds as subj: fold ``fold`` is the test
    set, fold ``fold + 1`` the dev set. A folder without a dev (test) file takes fold ``fold + 1`` (``fold``) of the
    training file's 10 folds as its dev (test) set.

    Raises:
        DatasetNotFoundError: ``path`` does not exist.
        FormatError: a malformed line.
        DataError: no training file, fewer than two classes, a fold outside 0..9, or an empty split.
    """
    path = Path(path)
    if not path.exists():
        raise DatasetNotFoundError(f"data {str(path)!r}: no such file or folder")
    if isinstance(fold, bool) or not isinstance(fold, int) or not 0 <= fold < 10:
        raise DataError(f"{path}: fold must be an integer in 0..9, got {fold!r}")
    files = _split_files(path) if path.is_dir() else {"train": path}
    raw = {split: read_labelled_file(file) for split, file in files.items()}
    names = sorted({label for rows in raw.values() for label, _ in rows})
    if all(label.isdigit() for label in names):
        ids = {label: int(label) for label in names}
        labels: tuple[str, ...] = ()
        num_classes = 1 + max(ids.values())
    else:
        ids = {label: i for i, label in enumerate(names)}
        labels, num_classes = tuple(names), len(names)
    if len(names) < 2:
        raise DataError(f"{path}: a classifier needs at least two classes; the files hold only {names!r}")
    splits = {split: [Example(tokens, ids[label]) for label, tokens in rows] for split, rows in raw.items()}
    missing = [split for split in ("test", "dev") if split not in splits]
    if missing:
        train = splits["train"]
        folds = cross_validation_folds(len(train))
        cut = {"test": fold, "dev": (fold + 1) % len(folds)}
        taken = {cut[split] for split in missing}
        for split in missing:
            splits[split] = [train[i] for i in folds[cut[split]]]
        splits["train"] = [train[i] for f, chunk in enumerate(folds) if f not in taken for i in chunk]
    for split, examples in splits.items():
        if not examples:
            raise DataError(f"{path}: the {split} split is empty")
    name = path.name or str(path)
    return ClassificationData(name, splits["train"], splits["dev"], splits["test"], num_classes, labels)


def is_data_path(name: str) -> bool:
    """Whether ``name`` (not a built-in data set name) names an existing file or folder of labelled text."""
    return name not in CLASSIFICATION and name not in LANGUAGE_MODELLING and Path(name).expanduser().exists()


def load_classification(name: str, fold: int = 0) -> ClassificationData:
    """SST-2 (official split), subj / CR / MR (fold ``fold`` of the 10-fold cross-validation), or the path of a
    user's labelled text (``load_labelled``).

    Raises:
        UnknownDatasetError: ``name`` is neither a classification dataset nor an existing path.
        DatasetNotFoundError: the files are not vendored and not under any data root.
    """
    if isinstance(fold, bool) or not isinstance(fold, int) or not 0 <= fold < 10:
        raise DataError(f"fold must be an integer in 0..9, got {fold!r}")
    if isinstance(name, (str, Path)) and is_data_path(str(name)):
        return load_labelled(Path(str(name)).expanduser(), fold)
    if name not in CLASSIFICATION:
        raise UnknownDatasetError(
            f"unknown classification dataset {name!r} (known: {', '.join(sorted(CLASSIFICATION))})"
        )
    return CLASSIFICATION[name](fold)


def load_language_model(name: str) -> LanguageModelData:
    """PTB (words, ``<eos>`` per line) or tiny-shakespeare (characters).

    Raises:
        UnknownDatasetError: ``name`` is not a language-modelling dataset.
        DatasetNotFoundError: the files are not vendored and not under any data root.
    """
    if name not in LANGUAGE_MODELLING:
        known = ", ".join(sorted(LANGUAGE_MODELLING))
        raise UnknownDatasetError(f"unknown language-modelling dataset {name!r} (known: {known})")
    return LANGUAGE_MODELLING[name]()


def load(name: str, fold: int = 0) -> ClassificationData | LanguageModelData:
    """Any dataset by name, or the path of a user's labelled text (``load_labelled``)."""
    if isinstance(fold, bool) or not isinstance(fold, int) or not 0 <= fold < 10:
        raise DataError(f"fold must be an integer in 0..9, got {fold!r}")
    if isinstance(name, (str, Path)) and is_data_path(str(name)):
        return load_labelled(Path(str(name)).expanduser(), fold)
    if name in LANGUAGE_MODELLING:
        return load_language_model(name)
    if name in CLASSIFICATION:
        return load_classification(name, fold)
    known = ", ".join(sorted([*CLASSIFICATION, *LANGUAGE_MODELLING]))
    raise UnknownDatasetError(
        f"unknown dataset {name!r} (known: {known}; or the path of a file or folder of labelled text, docs/data.md)"
    )
