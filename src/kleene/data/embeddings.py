"""Pretrained word vectors: the 50-d GloVe 6B subset (vendored)."""

from __future__ import annotations

import functools
import gzip

import numpy as np
import torch

from kleene.data.sources import find_file
from kleene.data.vocab import Vocabulary
from kleene.errors import FormatError

__all__ = ["GLOVE_DIM", "glove_matrix", "load_glove"]

GLOVE_DIM = 50


def load_glove(words: set[str] | None = None) -> dict[str, torch.Tensor]:
    """GloVe vectors (float32, 50-d) of ``words`` (all 38,121 when None), in the file's order; the caller owns them
    (the file is parsed once per process and version, ``_read_glove``).

    Raises:
        FormatError: a line without a word and 50 numbers (names the line).
    """
    path = find_file("glove", "glove/glove.6B.50d.subset.txt.gz", vendored="glove/glove.6B.50d.subset.txt.gz")
    version = path.stat()
    rows, matrix = _read_glove(str(path), version.st_mtime_ns, version.st_size)
    chosen = [word for word in rows if words is None or word in words]
    vectors = torch.from_numpy(matrix[[rows[word] for word in chosen]])  # a copy of the chosen rows
    return dict(zip(chosen, vectors))


@functools.lru_cache(maxsize=2)
def _read_glove(path: str, mtime_ns: int, size: int) -> tuple[dict[str, int], np.ndarray]:
    """Every word of the GloVe file ``path`` (of that modification time and size) with its row (the last line of a
    repeated word), and the rows: (lines, 50) float32, read-only (each number parsed as a double, then rounded).

    Raises:
        FormatError: a line without a word and 50 numbers (names the line).
    """
    rows: dict[str, int] = {}
    texts: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            word, _, rest = line.rstrip("\n").partition(" ")
            if rest.count(" ") != GLOVE_DIM - 1:
                raise FormatError(f"{path}: line {number}: expected {GLOVE_DIM} values, got {len(rest.split(' '))}")
            rows[word] = len(texts)
            texts.append(rest)
    try:
        numbers = np.array(" ".join(texts).split(" "), dtype=np.float64)
    except ValueError:
        bad = next(i for i, text in enumerate(texts) if not _numbers(text))
        raise FormatError(f"{path}: line {bad + 1}: expected {GLOVE_DIM} numbers, got {texts[bad]!r}") from None
    matrix = numbers.astype(np.float32).reshape(len(texts), GLOVE_DIM)
    matrix.flags.writeable = False
    return rows, matrix


def _numbers(text: str) -> bool:
    try:
        np.array(text.split(" "), dtype=np.float64)
    except ValueError:
        return False
    return True


def glove_matrix(
    vocab: Vocabulary, *, normalize: bool = True, seed: int = 0, vectors: dict[str, torch.Tensor] | None = None
) -> tuple[torch.Tensor, float]:
    """A (len(vocab), 50) embedding matrix and the share of non-special tokens that have a GloVe vector.

    Known words get their vector (scaled to unit length when ``normalize``, as in SoPa and Rational Recurrences);
    unknown words, including ``<unk>``, get a random vector of the same scale; ``<pad>`` is zero. ``vectors``: the
    result of a ``load_glove`` call whose words include every vocabulary token (the file is then not read again);
    None reads the file.

    Raises:
        DatasetNotFoundError, FormatError: as ``load_glove``, when the GloVe file is missing or malformed.
    """
    tokens = set(vocab.tokens)
    vectors = load_glove(tokens) if vectors is None else {w: v for w, v in vectors.items() if w in tokens}
    generator = torch.Generator().manual_seed(seed)
    matrix = torch.randn(len(vocab), GLOVE_DIM, generator=generator)
    matrix = matrix / matrix.norm(dim=1, keepdim=True)
    if not normalize:
        typical = torch.stack(list(vectors.values())).norm(dim=1).mean() if vectors else torch.tensor(1.0)
        matrix = matrix * typical
    for i, token in enumerate(vocab.tokens):
        if token in vectors:
            vector = vectors[token]
            matrix[i] = vector / vector.norm() if normalize else vector
    matrix[vocab.pad_id] = 0.0
    regular = len(vocab) - 2
    covered = sum(token in vectors for token in vocab.tokens[2:])
    return matrix, covered / regular if regular else 1.0
