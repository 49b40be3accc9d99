"""Dataset loaders: sentence classification (SST-2, subj, CR, MR) and language modelling (PTB, tiny-shakespeare).

Classification files hold ``<label> <text>`` per line, split at the first space; tokens are the whitespace tokens of
the (already lowercased, tokenized) text. SST-2 has an official train/dev/test split. subj, CR and MR have none: a
deterministic 10-fold cross-validation is used, where the examples are shuffled with a fixed seed, fold ``f`` is the
test set, fold ``f + 1 (mod 10)`` the dev set and the other eight folds the training set.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kleene.data.sources import find_file, read_lines, read_text
from kleene.errors import FormatError, UnknownDatasetError

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
    name: str
    train: list[Example]
    dev: list[Example]
    test: list[Example]
    num_classes: int

    def split(self, name: str) -> list[Example]:
        """``"train"``, ``"dev"`` (alias ``"valid"``) or ``"test"``."""
        splits = {"train": self.train, "dev": self.dev, "valid": self.dev, "test": self.test}
        if name not in splits:
            raise KeyError(f"{self.name}: unknown split {name!r} (expected train, dev or test)")
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
            raise KeyError(f"{self.name}: unknown split {name!r} (expected train, valid or test)")
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
    if not 0 <= fold < 10:
        raise ValueError(f"{name}: fold must be in 0..9, got {fold}")
    examples = read_classification_file(find_file(name, relative), encoding)
    folds = cross_validation_folds(len(examples))
    dev_fold = (fold + 1) % len(folds)
    test = [examples[i] for i in folds[fold]]
    dev = [examples[i] for i in folds[dev_fold]]
    train = [examples[i] for f, chunk in enumerate(folds) if f not in (fold, dev_fold) for i in chunk]
    return ClassificationData(name, train, dev, test, num_classes=1 + max(e.label for e in examples))


#: Classification datasets: name -> loader(fold).
CLASSIFICATION: dict[str, Callable[[int], ClassificationData]] = {
    "sst2": lambda fold: _sst2(),
    "subj": lambda fold: _cross_validated("subj", "subj/subj.all", "cp1252", fold),
    "cr": lambda fold: _cross_validated("cr", "cr/custrev.all", "ascii", fold),
    "mr": lambda fold: _cross_validated("mr", "mr/rt-polarity.all", "cp1252", fold),
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


def load_classification(name: str, fold: int = 0) -> ClassificationData:
    """SST-2 (official split) or subj / CR / MR (fold ``fold`` of the 10-fold cross-validation).

    Raises:
        UnknownDatasetError: ``name`` is not a classification dataset.
        DatasetNotFoundError: the files are not vendored and not under any data root.
    """
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
    """Any dataset by name."""
    if name in LANGUAGE_MODELLING:
        return load_language_model(name)
    if name in CLASSIFICATION:
        return load_classification(name, fold)
    known = ", ".join(sorted([*CLASSIFICATION, *LANGUAGE_MODELLING]))
    raise UnknownDatasetError(f"unknown dataset {name!r} (known: {known})")
