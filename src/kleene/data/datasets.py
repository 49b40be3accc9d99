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
import json
import random
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kleene.data.sources import find_file, read_lines, read_text
from kleene.errors import DataError, DatasetNotFoundError, FormatError, UnknownDatasetError, shown

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
    """Indices ``0..count-1`` shuffled with ``seed`` and cut into ``folds`` folds whose sizes differ by at most one.

    Caution:
        ``count >= 0`` and ``folds >= 1`` are not checked (``folds = 0`` raises Python's ``ValueError``).
    """
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


def _decode(raw: bytes, path: Path) -> str:
    """UTF-8 (an initial byte-order mark dropped), else Windows-1252, else Latin-1 (which decodes any bytes).

    Raises:
        FormatError: bytes that are not text (a NUL byte, as in every binary format); nothing of them is echoed.
    """
    if b"\x00" in raw:
        raise FormatError(f"{path}: not a text file (it holds NUL bytes: a binary file?); see docs/data.md")
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return raw.decode("latin-1")


#: Header names recognized as the text, the label and an identifier column (lowercase).
TEXT_NAMES = frozenset(
    {
        "text",
        "sentence",
        "sentences",
        "review",
        "document",
        "content",
        "body",
        "message",
        "tweet",
        "question",
        "comment",
        "utterance",
        "input",
    }
)
LABEL_NAMES = frozenset(
    {"label", "labels", "class", "category", "target", "sentiment", "polarity", "tag", "y", "output", "topic", "intent"}
)
ID_NAMES = frozenset({"id", "idx", "index", "uid", "guid", "key", "qid"})

#: Suffixes of JSON Lines files (one JSON object per line).
JSONL_SUFFIXES = (".jsonl", ".ndjson")


def _is_header(cells: list[str], chosen: set[str], *, all_known: bool = False) -> bool:
    """Whether a first row names its columns: distinct non-empty one-word cells, one of them (``all_known``: every
    one) a known text, label (or identifier) name or a column chosen by name."""
    names = [cell.strip().lower() for cell in cells]
    if len(set(names)) != len(names) or not all(names) or any(len(name.split()) != 1 for name in names):
        return False
    if any(name.replace(".", "").replace("-", "").isdigit() for name in names):  # numbers are data, not names
        return False
    if all_known:
        return set(names) <= TEXT_NAMES | LABEL_NAMES | ID_NAMES | chosen
    return bool(set(names) & (TEXT_NAMES | LABEL_NAMES | chosen))


def _listed(names: list[str], limit: int = 120) -> str:
    """``names`` joined with commas, cut to about ``limit`` characters (a header can be a whole line of data)."""
    text = ", ".join(name[:30] for name in names)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _column_index(chosen: str, header: list[str] | None, width: int, what: str, path: Path) -> int:
    """The 0-based index of the column ``chosen`` (a header name, else a column number from 1)."""
    names = [cell.strip().lower() for cell in header] if header is not None else []
    if chosen.strip().lower() in names:
        return names.index(chosen.strip().lower())
    if chosen.strip().isdigit() and 1 <= int(chosen) <= width:
        return int(chosen) - 1
    columns = f"columns: {_listed(header)}" if header is not None else f"no header row, {width} columns"
    raise DataError(
        f"{path}: --{what}-column {shown(chosen)} is neither a column name nor a number 1..{width} ({columns})"
    )


def _choose_columns(
    header: list[str], text_column: str | None, label_column: str | None, path: Path
) -> tuple[int, int]:
    """(text index, label index) of a file whose columns are named by ``header``: the chosen ones, else the columns
    named as a text / a label, else the one column left once identifiers and the other column are set aside.

    Raises:
        DataError: a chosen column that does not exist, or columns that cannot be told apart (the message lists them).
    """
    names = [cell.strip().lower() for cell in header]
    text = _column_index(text_column, header, len(header), "text", path) if text_column is not None else None
    label = _column_index(label_column, header, len(header), "label", path) if label_column is not None else None
    for kind, known in (("text", TEXT_NAMES), ("label", LABEL_NAMES)):
        if (text if kind == "text" else label) is None:
            matches = [i for i, name in enumerate(names) if name in known and i not in (text, label)]
            if len(matches) == 1:
                if kind == "text":
                    text = matches[0]
                else:
                    label = matches[0]
    left = [i for i, name in enumerate(names) if name not in ID_NAMES and i not in (text, label)]
    if text is None and label is not None and len(left) == 1:
        text = left[0]
    elif label is None and text is not None and len(left) == 1:
        label = left[0]
    elif text is None and label is None and len(left) == 2:
        raise DataError(
            f"{path}: cannot tell the text column from the label column (columns: {_listed(header)}); "
            "pass --text-column NAME and --label-column NAME"
        )
    if text is None or label is None or text == label:
        missing = "text" if text is None or text == label else "label"
        raise DataError(
            f"{path}: cannot tell which column is the {missing} (columns: {_listed(header)}); pass "
            f"--{missing}-column NAME"
        )
    return text, label


def _json_rows(text: str, path: Path) -> tuple[list[str] | None, list[tuple[int, list[str]]]]:
    """(column names, (line number, cells)) of a JSON Lines file: one object per line, strings and numbers."""
    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise FormatError(f"{path}: line {number}: not a JSON object ({shown(line)})") from None
        if not isinstance(record, dict):
            raise FormatError(f"{path}: line {number}: expected a JSON object, got {type(record).__name__}")
        if header is None:
            header = [str(key) for key in record]
        cells = []
        for key in header:
            value = record.get(key, "")
            if isinstance(value, (dict, list)):
                raise FormatError(
                    f"{path}: line {number}: {key!r} holds a JSON {type(value).__name__}, expected a string or a number"
                )
            cells.append("" if value is None else str(value))
        rows.append((number, cells))
    return header, rows


def read_labelled_file(
    path: str | Path, *, text_column: str | None = None, label_column: str | None = None
) -> list[tuple[str, tuple[str, ...]]]:
    """(label, tokens) per non-blank line of ``path``; see docs/data.md.

    ``.jsonl`` / ``.ndjson``: one JSON object per line. ``.csv``: Python's csv dialect. Any other file: a line holding
    a tab is split at tabs, any other line at its first space. A first row that names its columns (``text``,
    ``label``, ``id``, ...; see ``TEXT_NAMES``, ``LABEL_NAMES``, ``ID_NAMES``) is a header: the text and label
    columns are then found by name (``text_column`` / ``label_column``: a header name or a column number from 1),
    and identifier columns are never the text. Without a header the label is the first field and the text the rest
    of the line, unless columns are chosen by number. Tokens are the whitespace tokens of the text, lowercased.

    Raises:
        FormatError: a binary file, or a line without a label and a text (the message names the file and line).
        DataError: a file without any example, or columns that cannot be told apart.
    """
    path = Path(path)
    text = _decode(path.read_bytes(), path)
    chosen = {name.strip().lower() for name in (text_column, label_column) if name is not None}
    suffix = path.suffix.lower()
    rows: list[tuple[int, list[str]]]
    header: list[str] | None
    if suffix in JSONL_SUFFIXES:
        header, rows = _json_rows(text, path)
    else:
        if suffix == ".csv":
            rows = [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text)), start=1) if "".join(row).strip()]
        else:
            lines = [(n, line.removesuffix("\r")) for n, line in enumerate(text.split("\n"), start=1)]
            rows = [(n, line.split("\t") if "\t" in line else line.split(" ", 1)) for n, line in lines if line.strip()]
        # a "LABEL TEXT" line (split at its first space) is a header only when both words are column names
        spaced = suffix != ".csv" and bool(rows) and "\t" not in text.split("\n", 1)[0]
        header = rows[0][1] if rows and _is_header(rows[0][1], chosen, all_known=spaced) else None
        if header is not None:
            rows = rows[1:]
    if header is not None or text_column is not None or label_column is not None:
        if header is not None:
            text_index, label_index = _choose_columns(header, text_column, label_column, path)
        else:
            if text_column is None or label_column is None:
                raise DataError(
                    f"{path}: no header row: choose both columns by number, --text-column N --label-column N"
                )
            width = max((len(cells) for _, cells in rows), default=0)
            text_index = _column_index(text_column, None, width, "text", path)
            label_index = _column_index(label_column, None, width, "label", path)
        pairs = [
            (
                n,
                cells[label_index] if label_index < len(cells) else "",
                cells[text_index] if text_index < len(cells) else "",
            )
            for n, cells in rows
        ]
    else:  # LABEL<sep>TEXT: the first field is the label, the rest of the line the text
        separator = "," if suffix == ".csv" else "\t"
        pairs = [(n, cells[0], separator.join(cells[1:])) for n, cells in rows]
    examples = []
    for number, label, rest in pairs:
        tokens = tuple(rest.lower().split())
        if not label.strip() or not tokens:
            raise FormatError(f"{path}: line {number}: expected a label and a non-empty text (see docs/data.md)")
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


class DataWarning(UserWarning):
    """A data set that loads but looks wrong (``kleene`` prints it as one ``warning:`` line)."""


def _check_fold(fold: object, where: str) -> int:
    if isinstance(fold, bool) or not isinstance(fold, int) or not 0 <= fold < 10:
        raise DataError(f"{where}fold must be an integer in 0..9, got {shown(fold)}")
    return fold


def _existing(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise DatasetNotFoundError(f"data {str(path)!r}: file not found (no such file or folder)")
    return path


def _carve(splits: dict[str, list], fold: int) -> dict[str, list]:
    """Fill a missing test (dev) split with fold ``fold`` (``fold + 1``) of the training split's 10 seeded folds."""
    missing = [split for split in ("test", "dev") if split not in splits]
    if missing:
        train = splits["train"]
        folds = cross_validation_folds(len(train))
        cut = {"test": fold, "dev": (fold + 1) % len(folds)}
        taken = {cut[split] for split in missing}
        for split in missing:
            splits[split] = [train[i] for i in folds[cut[split]]]
        splits["train"] = [train[i] for f, chunk in enumerate(folds) if f not in taken for i in chunk]
    return splits


def load_labelled(
    path: str | Path,
    fold: int = 0,
    *,
    text_column: str | None = None,
    label_column: str | None = None,
    labels: tuple[str, ...] | list[str] | None = None,
) -> ClassificationData:
    """A user's labelled text: one file, or a folder of train (required), dev and test files; see docs/data.md.

    Labels that are all non-negative integers are the class ids; any other labels are sorted and numbered 0, 1, ...
    (``labels`` keeps their names). Given ``labels`` (a trained model's class names), the classes are numbered in
    that order and a label outside them is refused. A single file is cut into 10 seeded folds as subj: fold
    ``fold`` is the test set, fold ``fold + 1`` the dev set. A folder without a dev (test) file takes fold
    ``fold + 1`` (``fold``) of the training file's 10 folds as its dev (test) set. ``text_column`` /
    ``label_column``: see ``read_labelled_file``. Warns (``DataWarning``) when the classes are more than half as
    many as the examples (an identifier or a text read as the label?).

    Raises:
        DatasetNotFoundError: ``path`` does not exist.
        FormatError: a binary file or a malformed line.
        DataError: no training file, fewer than two classes, a fold outside 0..9, an empty split, columns that
            cannot be told apart, or labels outside ``labels``.
    """
    path = _existing(path)
    _check_fold(fold, f"{path}: ")
    files = _split_files(path) if path.is_dir() else {"train": path}
    raw = {
        split: read_labelled_file(file, text_column=text_column, label_column=label_column)
        for split, file in files.items()
    }
    names = sorted({label for rows in raw.values() for label, _ in rows})
    if labels:
        unseen = [label for label in names if label not in labels]
        if unseen:
            listed = ", ".join(shown(label) for label in unseen[:10]) + (", ..." if len(unseen) > 10 else "")
            raise DataError(
                f"{path}: labels the model never saw in training: {listed} (it knows "
                f"{', '.join(shown(label) for label in labels[:20])})"
            )
        ids = {label: i for i, label in enumerate(labels)}
        names_kept, num_classes = tuple(labels), len(labels)
    elif all(label.isdigit() for label in names):
        ids = {label: int(label) for label in names}
        names_kept, num_classes = (), 1 + max(ids.values())
    else:
        ids = {label: i for i, label in enumerate(names)}
        names_kept, num_classes = tuple(names), len(names)
    if len(names) < 2 and not labels:
        found = ", ".join(shown(label) for label in names)
        raise DataError(f"{path}: a classifier needs at least two classes; the files hold only {found}")
    count = sum(len(rows) for rows in raw.values())
    if not labels and len(names) * 2 > count:
        warnings.warn(
            f"{path}: {len(names)} classes for {count} examples; is an identifier or the text read as the label? "
            "(choose columns with --text-column / --label-column; docs/data.md)",
            DataWarning,
            stacklevel=2,
        )
    splits = _carve(
        {split: [Example(tokens, ids[label]) for label, tokens in rows] for split, rows in raw.items()}, fold
    )
    for split, examples in splits.items():
        if not examples:
            raise DataError(f"{path}: the {split} split is empty")
    name = path.name or str(path)
    return ClassificationData(name, splits["train"], splits["dev"], splits["test"], num_classes, names_kept)


def load_text(path: str | Path) -> LanguageModelData:
    """A user's plain text for a language model, as characters: one file (the first 90% train, the next 5% valid,
    the last 5% test, as tiny-shakespeare) or a folder of train (required), dev and test files (a missing one is
    the last 5% of the training text, each). The encoding is found as for labelled files (docs/data.md).

    Raises:
        DatasetNotFoundError: ``path`` does not exist.
        FormatError: a binary file.
        DataError: no training file, or a text too short for three non-empty splits (20 characters).
    """
    path = _existing(path)
    files = _split_files(path) if path.is_dir() else {"train": path}
    texts = {split: _decode(file.read_bytes(), file) for split, file in files.items()}
    train = texts["train"]
    for split in ("test", "dev"):
        if split not in texts:
            cut = len(train) - max(1, len(texts["train"]) // 20)
            train, texts[split] = train[:cut], train[cut:]
    texts["train"] = train
    for split, text in texts.items():
        if not text:
            raise DataError(f"{path}: the {split} split of the text is empty (a language model needs a longer text)")
    name = path.name or str(path)
    return LanguageModelData(name, list(texts["train"]), list(texts["dev"]), list(texts["test"]), "char")


def is_data_path(name: str) -> bool:
    """Whether ``name`` (not a built-in data set name) names an existing file or folder (of labelled or plain text).

    Caution:
        Only existence is checked; reading the path may still raise ``DataError``.
    """
    return name not in CLASSIFICATION and name not in LANGUAGE_MODELLING and Path(name).expanduser().exists()


def _looks_like_path(name: object) -> bool:
    """Whether ``name`` was meant as a file (a separator or a suffix) rather than a data set name."""
    return isinstance(name, Path) or (isinstance(name, str) and ("/" in name or "\\" in name or "." in name))


def load_classification(
    name: str,
    fold: int = 0,
    *,
    text_column: str | None = None,
    label_column: str | None = None,
    labels: tuple[str, ...] | list[str] | None = None,
) -> ClassificationData:
    """SST-2 (official split), subj / CR / MR (fold ``fold`` of the 10-fold cross-validation), or the path of a
    user's labelled text (``load_labelled``, which takes the keyword arguments).

    Raises:
        UnknownDatasetError: ``name`` is neither a classification dataset nor an existing path.
        DatasetNotFoundError: the files are not vendored and not under any data root, or a path that does not exist.
    """
    _check_fold(fold, "")
    if isinstance(name, (str, Path)) and (is_data_path(str(name)) or _looks_like_path(name)):
        return load_labelled(name, fold, text_column=text_column, label_column=label_column, labels=labels)
    if name not in CLASSIFICATION:
        raise UnknownDatasetError(
            f"unknown classification dataset {shown(name)} (known: {', '.join(sorted(CLASSIFICATION))}; or the path "
            "of a file or folder of labelled text, docs/data.md)"
        )
    return CLASSIFICATION[name](fold)


def load_language_model(name: str) -> LanguageModelData:
    """PTB (words, ``<eos>`` per line), tiny-shakespeare (characters), or the path of a user's plain text
    (``load_text``: characters).

    Raises:
        UnknownDatasetError: ``name`` is neither a language-modelling dataset nor an existing path.
        DatasetNotFoundError: the files are not vendored and not under any data root, or a path that does not exist.
    """
    if isinstance(name, (str, Path)) and (is_data_path(str(name)) or _looks_like_path(name)):
        return load_text(name)
    if name not in LANGUAGE_MODELLING:
        known = ", ".join(sorted(LANGUAGE_MODELLING))
        raise UnknownDatasetError(
            f"unknown language-modelling dataset {shown(name)} (known: {known}; or the path of a text file)"
        )
    return LANGUAGE_MODELLING[name]()


#: The two tasks a data set serves, as the models' ``task`` attribute names them.
TASKS = ("classification", "language_model")


def load(
    name: str,
    fold: int = 0,
    *,
    task: str | None = None,
    text_column: str | None = None,
    label_column: str | None = None,
    labels: tuple[str, ...] | list[str] | None = None,
) -> ClassificationData | LanguageModelData:
    """Any dataset by name, or the path of a user's file or folder: labelled text (``load_labelled``, the default)
    or, with ``task="language_model"``, plain text (``load_text``).

    Raises:
        UnknownDatasetError: an unknown name that does not look like a path.
        DatasetNotFoundError: a path that does not exist ("file not found").
        DataError: a ``task`` that is not one of ``TASKS``, or a built-in data set of the other task.
    """
    _check_fold(fold, "")
    if task is not None and task not in TASKS:
        raise DataError(f"task must be one of {', '.join(TASKS)}, got {shown(task)}")
    if isinstance(name, (str, Path)) and (is_data_path(str(name)) or _looks_like_path(name)):
        if task == "language_model":
            return load_text(name)
        return load_labelled(name, fold, text_column=text_column, label_column=label_column, labels=labels)
    if name in LANGUAGE_MODELLING:
        return load_language_model(name)
    if name in CLASSIFICATION:
        return load_classification(name, fold)
    known = ", ".join(sorted([*CLASSIFICATION, *LANGUAGE_MODELLING]))
    raise UnknownDatasetError(
        f"unknown dataset {shown(name)} (known: {known}; or the path of a file or folder of text, docs/data.md)"
    )
