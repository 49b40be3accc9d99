"""What every SoPa interpretation shares: the result types, the checked model and its documents, and the reader.

The reader asks the layer (``kleene.nn.sopa.PatternGroup``) for everything it computes: transition weights from
``transitions``/``slots``, epsilon weights from the compiled recurrence, the best span ending at each token from
``end_scores`` and ``best_starts`` (the gradient of the Viterbi score marks the best path), span totals from
``span_totals`` (real semiring: a span's total over its paths), and the arcs of a match from ``best_paths``. So
spans follow the model's ``mode`` exactly as the layer does:

* ``"paper"``: a match starting at token ``s`` takes at most ``epsilon_cap`` epsilons before its first token
  and after every consumed token (eq. 7); a pattern whose END is reachable by epsilons alone also matches
  the empty span (``start == end``).
* ``"reference"``: at most one epsilon, taken right before a consumed token; the START state may be entered
  at any token and keeps its self-loop. The authors' -100 stand-in for semiring zero (initial non-START states,
  floor of the document score) is not a path: spans here are real paths, so a score differs from the model's
  only where every span of the document scores below -100 (log space: e^-100).

Positions are token indices of the *unpadded* document. SoPaClassifier pads each document with
``boundary`` START vectors before and END vectors after it; a match that uses them has ``start < 0`` or
``end > len(document)``, and its ``tokens`` show them as ``START_TOKEN`` / ``END_TOKEN``. An empty match has
``start == end`` at the first position where it is the best span (it has no position of its own).

Scores are "as the MLP sees them" (the semiring's elements, ``from_storage``): probabilities for max-times (the
model runs it in log space), plain values for max-plus and real. In the selecting semirings the best path of a
span *is* the span's score; in the real semiring a span's score is the sum over its paths and ``share`` says how
much of it the best single path (Viterbi, in max-times) carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from kleene.data.vocab import Vocabulary
from kleene.errors import InterpretError
from kleene.nn.sopa import PathStep, PatternGroup, SoPaClassifier

#: How a padding position shows in ``PhraseMatch.tokens`` / ``PatternStep.token``.
START_TOKEN = "<START>"
END_TOKEN = "<END>"

StepKind = Literal["main", "self-loop", "epsilon"]
Tensor = torch.Tensor


@dataclass(frozen=True)
class PatternStep:
    """One arc of a match: ``source -> target`` between pattern states 0..L-1.

    ``position`` is the consumed token's index in the unpadded document (negative or >= its length inside the
    START/END padding; None for an epsilon), ``token`` its text (None for an epsilon) and ``weight`` the
    arc's weight as the MLP reads numbers (probability for max-times).
    """

    kind: StepKind
    source: int
    target: int
    position: int | None
    token: str | None
    weight: float


@dataclass(frozen=True)
class PhraseMatch:
    """The best path of ``pattern`` over the span ``[start, end)`` of document ``document``.

    ``start``/``end`` index the unpadded document; ``start < 0`` or ``end > len(document)`` when the span
    reaches into the boundary padding (shown as START_TOKEN/END_TOKEN in ``tokens``). ``score`` is the best
    path's weight as the MLP sees it (probability for max-times); ``span_score`` the span's total over all its
    paths (equal to ``score`` in the max semirings); ``share`` = score / span_score in the real semiring, None
    otherwise. ``steps`` are the path's arcs in order.
    """

    pattern: int
    document: int
    start: int
    end: int
    tokens: tuple[str, ...]
    score: float
    share: float | None
    steps: tuple[PatternStep, ...]
    span_score: float = float("nan")


def check_model(model: object, vocab: Vocabulary) -> SoPaClassifier:
    """Raises InterpretError: not a SoPaClassifier, a vocabulary of the wrong size, a model off the CPU, or a
    summing semiring (not selecting: real) with the identity encoder (its weights may be negative, so no single path is
    "best")."""
    if not isinstance(model, SoPaClassifier):
        raise InterpretError(f"SoPa interpretation needs a SoPaClassifier, got {type(model).__name__}")
    rows = model.embedding.num_embeddings
    if not isinstance(vocab, Vocabulary):
        raise InterpretError(f"expected a kleene.data.Vocabulary, got {type(vocab).__name__}")
    if len(vocab) != rows:
        raise InterpretError(f"the vocabulary has {len(vocab)} tokens but the model embeds {rows}")
    devices = {parameter.device.type for parameter in model.parameters()}
    if devices != {"cpu"}:
        raise InterpretError(f"interpretation runs on the CPU; the model is on {sorted(devices)} (call model.cpu())")
    algebra = model.patterns.algebra
    if not algebra.best and model.patterns.encoder == "identity":
        raise InterpretError(
            f"a {algebra.name}-semiring SoPa with the identity encoder has signed weights: the best single path is "
            "undefined"
        )
    return model


@dataclass(frozen=True)
class Batch:
    """Documents ``indices`` as padded ids (B, T) and their lengths (B,)."""

    indices: tuple[int, ...]
    ids: Tensor
    lengths: Tensor


def check_documents(documents: Sequence[Sequence[str]]) -> list[list[str]]:
    """Raises InterpretError: a document that is a bare string or holds a non-string token (named by index)."""
    checked = []
    for number, document in enumerate(documents):
        if isinstance(document, str):
            raise InterpretError(f"document {number} is a string; pass its tokens (a list of words)")
        for position, token in enumerate(document):
            if not isinstance(token, str):
                raise InterpretError(f"document {number}, token {position}: {token!r} is not a string")
        checked.append(list(document))
    return checked


def batches(vocab: Vocabulary, documents: list[list[str]], batch_size: int) -> list[Batch]:
    """Documents encoded (unknown words -> ``<unk>``), grouped by similar length."""
    if batch_size < 1:
        raise InterpretError(f"batch_size must be >= 1, got {batch_size}")
    ordered = sorted(range(len(documents)), key=lambda i: len(documents[i]))
    batches = []
    for first in range(0, len(ordered), batch_size):
        indices = tuple(ordered[first : first + batch_size])
        width = max(1, max(len(documents[i]) for i in indices))
        ids = torch.full((len(indices), width), vocab.pad_id, dtype=torch.long)
        for row, i in enumerate(indices):
            ids[row, : len(documents[i])] = torch.tensor(vocab.encode(documents[i]), dtype=torch.long)
        lengths = torch.tensor([len(documents[i]) for i in indices], dtype=torch.long)
        batches.append(Batch(indices, ids, lengths))
    return batches


def padded_tokens(model: SoPaClassifier, tokens: Sequence[str]) -> list[str]:
    """The document as the patterns read it: ``boundary`` START tokens, the words, ``boundary`` END tokens."""
    return [START_TOKEN] * model.boundary + list(tokens) + [END_TOKEN] * model.boundary


def progress_bar(items: Sequence[Batch], enabled: bool, description: str) -> Iterable[Batch]:
    """``items`` with a rich progress bar on stderr when ``enabled``."""
    if not enabled:
        return items
    from rich.console import Console
    from rich.progress import track

    return track(items, description=description, console=Console(stderr=True), transient=True)


# --------------------------------------------------------------------------------------------
# Spans and matches, from the layer
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GroupSlots:
    """One pattern group's slots (B, T, S, C) in storage form over a batch of padded documents; ``first`` is the
    index of the group's first pattern in the bank."""

    first: int
    group: PatternGroup
    slots: Tensor

    @property
    def count(self) -> int:
        return self.group.count


class Reader:
    """A checked SoPa model: finds best spans with its layer and turns them into ``PhraseMatch``es."""

    def __init__(self, model: object, vocab: Vocabulary):
        self.model = check_model(model, vocab)
        self.vocab = vocab
        self.algebra = self.model.patterns.algebra
        self.storage = self.algebra.storage
        self.num_patterns = self.model.patterns.num_patterns

    def groups(self, vectors: Tensor) -> list[GroupSlots]:
        """Every group's slots over padded word vectors (B, T, E)."""
        found: list[GroupSlots] = []
        first = 0
        for group in self.model.patterns.groups:
            assert isinstance(group, PatternGroup)
            found.append(GroupSlots(first, group, group.slots(*group.transitions(vectors))))
            first += group.count
        return found

    def slots(self, ids: Tensor, lengths: Tensor) -> tuple[list[GroupSlots], Tensor]:
        """Every group's slots over the padded documents, and the padded lengths."""
        vectors, padded_lengths = self.model.embed(ids, lengths)
        return self.groups(vectors), padded_lengths

    def best_spans(
        self, found: GroupSlots, lengths: Tensor, k: int, *, earliest: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The ``k`` best ends per document and pattern: values, starts and ends (B, k, C), padded positions.

        A value is the best span's storage score among the spans ending there (the selecting semirings) or the
        largest span total (real); ties prefer the earlier start (and the earlier end with ``earliest``, k = 1).
        ``start == end + 1`` is the empty span.
        """
        group, slots = found.group, found.slots
        if self.algebra.best:
            values, ends = _top(group.end_scores(slots, lengths), k, earliest)
            starts = torch.stack([group.best_starts(slots, lengths, ends[:, j]) for j in range(k)], 1)
            return values, starts, ends
        steps = slots.shape[1]
        totals = group.span_totals(slots, lengths).transpose(1, 2)  # (B, end, start, C)
        empty = group.empty_span()
        if empty is not None:
            valid = torch.arange(steps)[None, :, None] < lengths[:, None, None]
            extra = torch.where(valid, empty.to(totals.dtype), self.storage.zeros((), like=totals))
            totals = torch.cat([totals, extra[:, :, None]], 2)  # the empty span is the last candidate
        best, first = _first_max(totals, 2)
        ends_all = torch.arange(steps)[None, :, None]
        starts_all = torch.where(first == steps, ends_all + 1, first)
        values, ends = _top(best, k, earliest)
        return values, starts_all.gather(1, ends), ends

    def matches(
        self, document: int, tokens: Sequence[str], spans: Sequence[tuple[int, int, int]]
    ) -> list[PhraseMatch | None]:
        """``PhraseMatch``es of (pattern, padded start, padded end) spans of one document (None: no path)."""
        ids = torch.tensor(self.vocab.encode(tokens), dtype=torch.long).reshape(1, len(tokens))
        found, _ = self.slots(ids, torch.tensor([len(tokens)]))
        padded = padded_tokens(self.model, tokens)
        result: list[PhraseMatch | None] = [None] * len(spans)
        for group in found:
            mine = [n for n, (pattern, _, _) in enumerate(spans) if 0 <= pattern - group.first < group.count]
            if not mine:
                continue
            width = max(spans[n][2] - spans[n][1] for n in mine)
            zero = self.storage.zero
            rows = group.slots.new_full((len(mine), max(width, 1), *group.slots.shape[2:]), zero)
            for row, n in enumerate(mine):
                _, start, end = spans[n]
                rows[row, : end - start] = group.slots[0, start:end]
            lengths = torch.tensor([spans[n][2] - spans[n][1] for n in mine])
            traced = group.group.best_paths(rows, lengths, [spans[n][0] - group.first for n in mine])
            for n, path in zip(mine, traced, strict=True):
                if path is not None:
                    pattern, start, end = spans[n]
                    result[n] = self._match(pattern, document, padded, start, end, path)
        return result

    def number(self, value: Tensor) -> float:
        """A storage value as the MLP reads it (the semiring's element; max-times: a probability)."""
        return float(self.algebra.from_storage(value.double()))

    def _match(
        self,
        pattern: int,
        document: int,
        padded: list[str],
        start: int,
        end: int,
        path: tuple[Tensor, Tensor, list[PathStep]],
    ) -> PhraseMatch:
        best, total, raw_steps = path
        offset = self.model.boundary
        steps = tuple(
            PatternStep(
                kind,  # type: ignore[arg-type]
                source,
                target,
                None if index is None else start + index - offset,
                None if index is None else padded[start + index],
                self.number(weight),
            )
            for kind, source, target, index, weight in raw_steps
        )
        score, span_score = self.number(best), self.number(total)
        share = None if self.algebra.idempotent else (score / span_score if span_score else None)
        return PhraseMatch(
            pattern,
            document,
            start - offset,
            end - offset,
            tuple(padded[start:end]),
            score,
            share,
            steps,
            span_score,
        )


def _top(values: Tensor, k: int, earliest: bool) -> tuple[Tensor, Tensor]:
    """The ``k`` largest values along dimension 1 and their indices (``earliest``: k = 1, the first maximum)."""
    if earliest:
        best, index = values.max(1, keepdim=True)
        return best, index
    found = values.topk(k, dim=1)
    return found.values, found.indices


def _first_max(values: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    """The maximum along ``dim`` and the first index reaching it (larger storage values are better in SoPa)."""
    best = values.amax(dim)
    first = (values == best.unsqueeze(dim)).to(torch.int8).argmax(dim)
    return best, first


def pattern_indices(reader: Reader, patterns: Iterable[int] | None) -> list[int]:
    """Raises InterpretError: a pattern index outside the bank."""
    if patterns is None:
        return list(range(reader.num_patterns))
    chosen = []
    for pattern in patterns:
        if isinstance(pattern, bool) or not isinstance(pattern, (int, np.integer)):
            raise InterpretError(f"pattern {pattern!r} is not an index")
        if not 0 <= pattern < reader.num_patterns:
            raise InterpretError(f"pattern {pattern} is not in the bank (patterns 0..{reader.num_patterns - 1})")
        chosen.append(int(pattern))
    return chosen


