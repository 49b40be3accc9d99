"""Top phrases per pattern (SoPa Table 2): the corpus's best spans, found and traced by the layer."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from kleene.data.vocab import Vocabulary
from kleene.errors import InterpretError
from kleene.extract.reader import (
    PhraseMatch,
    Reader,
    batches,
    check_documents,
    padded_tokens,
    pattern_indices,
    progress_bar,
)
from kleene.nn.modes import inference

__all__ = ["top_phrases"]


def top_phrases(
    model: nn.Module,
    vocab: Vocabulary,
    documents: Sequence[Sequence[str]],
    k: int = 4,
    patterns: Iterable[int] | None = None,
    progress: bool = True,
    *,
    per_document: int = 1,
    batch_size: int = 64,
) -> dict[int, list[PhraseMatch]]:
    """Per pattern, the ``k`` best-scoring phrases of the corpus (SoPa Table 2), best first.

    A candidate is the best span ending at some token (spans sharing an end are variants of one match); at most
    ``per_document`` of them per document, and a phrase (the same tokens) appears once, from its best document.
    Spans are ranked by their score (max semirings) or their total over paths (real). Tokens are the documents'
    own words (out-of-vocabulary words are read by the model as ``<unk>``).

    Note:
        The corpus is scanned in batches by the layer (one pass per pattern group, vectorised over patterns, and
        one backward pass per ``per_document`` for the starts; the real semiring needs one pass per start
        position); only the selected phrases are traced.

    Raises:
        InterpretError: not a SoPa classifier, a vocabulary of the wrong size, a pattern index outside the bank,
            ``k`` or ``per_document`` < 1, or a malformed document.
    """
    reader = Reader(model, vocab)
    wanted = pattern_indices(reader, patterns)
    if k < 1 or per_document < 1:
        raise InterpretError(f"k and per_document must be >= 1, got k={k}, per_document={per_document}")
    texts = check_documents(documents)
    found: list[np.ndarray] = []  # rows (score, document, pattern, padded start, padded end)
    wanted_mask = torch.zeros(reader.num_patterns, dtype=torch.bool)
    wanted_mask[wanted] = True
    with inference(reader.model):
        for batch in progress_bar(batches(vocab, texts, batch_size), progress, "top phrases"):
            all_groups, lengths = reader.slots(batch.ids, batch.lengths)
            for group in all_groups:
                columns = wanted_mask[group.first : group.first + group.count]
                if not columns.any():
                    continue
                values, begins, ends = reader.best_spans(group, lengths, min(per_document, group.slots.shape[1]))
                keep = (values != reader.storage.zero) & columns[None, None, :]
                row, _, column = keep.nonzero(as_tuple=True)
                documents_of = torch.tensor(batch.indices)[row]
                found.append(
                    torch.stack(
                        [
                            values[keep].double(),
                            documents_of.double(),
                            (column + group.first).double(),
                            begins[keep].double(),
                            ends[keep].double() + 1,
                        ],
                        1,
                    ).numpy()
                )
        table = np.concatenate(found) if found else np.zeros((0, 5))
        return _select_phrases(reader, texts, table, wanted, k)


def _select_phrases(
    reader: Reader, texts: list[list[str]], table: np.ndarray, wanted: list[int], k: int
) -> dict[int, list[PhraseMatch]]:
    """The ``k`` best distinct phrases per pattern from candidate rows (score, document, pattern, start, end)."""
    chosen: dict[int, list[tuple[int, int, int]]] = {pattern: [] for pattern in wanted}
    for pattern in wanted:
        rows = table[table[:, 2] == pattern]
        seen: set[tuple[str, ...]] = set()
        for row in rows[np.argsort(-rows[:, 0], kind="stable")]:
            document, start, end = int(row[1]), int(row[3]), int(row[4])
            phrase = tuple(padded_tokens(reader.model, texts[document])[start:end])
            if phrase in seen:
                continue
            seen.add(phrase)
            chosen[pattern].append((document, start, end))
            if len(chosen[pattern]) == k:
                break
    by_document: dict[int, list[tuple[int, int, int]]] = {}
    for pattern, spans in chosen.items():
        for document, start, end in spans:
            by_document.setdefault(document, []).append((pattern, start, end))
    traced: dict[tuple[int, int, int, int], PhraseMatch] = {}
    for document, requests in by_document.items():
        for (pattern, start, end), match in zip(requests, reader.matches(document, texts[document], requests)):
            assert match is not None, "a selected span has a nonzero score, so a path derives it"
            traced[pattern, document, start, end] = match
    return {
        pattern: [traced[pattern, document, start, end] for document, start, end in spans]
        for pattern, spans in chosen.items()
    }
