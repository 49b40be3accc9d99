"""Leave-one-out explanations of a SoPa's decisions (SoPa §7), each pattern with its best span in the document."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from kleene.data.vocab import Vocabulary
from kleene.errors import InterpretError
from kleene.extract.reader import Batch, PhraseMatch, Reader, batches, check_documents
from kleene.nn.modes import inference
from kleene.nn.sopa import REFERENCE_ZERO, SoPaClassifier

__all__ = ["Explanation", "PatternContribution", "explain", "leave_one_out", "removed_value"]

Tensor = torch.Tensor


@dataclass(frozen=True)
class PatternContribution:
    """Leave-one-out effect of one pattern: ``delta[c]`` = logit_c(full scores) - logit_c(pattern at zero).

    ``best`` is the pattern's best-matching span in the document (None when it matches nothing).
    """

    pattern: int
    delta: tuple[float, ...]
    best: PhraseMatch | None


@dataclass(frozen=True)
class Explanation:
    """A document's classification and every pattern's contribution, largest |delta[predicted]| first."""

    tokens: tuple[str, ...]
    label: int | None
    predicted: int
    probabilities: tuple[float, ...]
    contributions: tuple[PatternContribution, ...]


def removed_value(model: nn.Module) -> float:
    """What the MLP reads for a pattern that matched nothing: semiring zero as a number.

    0 for max-times (a probability) and real; where zero is infinite (max-plus) the authors' stand-in -100
    (REFERENCE_ZERO), since the MLP cannot take -inf.

    Raises:
        InterpretError: not a SoPa classifier.
    """
    if not isinstance(model, SoPaClassifier):
        raise InterpretError(f"SoPa interpretation needs a SoPaClassifier, got {type(model).__name__}")
    zero = float(model.patterns.algebra.zero)
    return zero if math.isfinite(zero) else REFERENCE_ZERO


def leave_one_out(model: SoPaClassifier, tokens: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """The logits (B, C) of a batch and every pattern's leave-one-out effect ``delta`` (B, P, C) on them.

    ``delta[b, p, c]`` is document b's class-c logit with all pattern scores minus the logit with pattern p's score
    replaced by ``removed_value(model)`` (SoPa §7). ``model`` is a ``SoPaClassifier`` in inference mode; ``tokens``
    and ``lengths`` as the classifier takes them.

    Caution:
        Call it under ``torch.no_grad()`` with the model in eval mode; dropout would make the deltas random.
    """
    scores = model.pattern_scores(tokens, lengths)  # (B, P) as the MLP reads them
    logits = model.mlp(scores)
    count = scores.shape[1]
    ablated = scores[:, None, :].repeat(1, count, 1)  # (B, P, P): row p has pattern p removed
    ablated[:, torch.arange(count), torch.arange(count)] = removed_value(model)
    return logits, (logits[:, None, :] - model.mlp(ablated)).double()


def explain(
    model: nn.Module,
    vocab: Vocabulary,
    tokens: Sequence[str],
    label: int | None = None,
    top: int | None = None,
) -> Explanation:
    """Why the model classifies ``tokens`` as it does: leave-one-out contributions (SoPa §7).

    ``delta[c]`` of a pattern is the class-c logit with all pattern scores minus the logit with that pattern's
    score replaced by ``removed_value(model)``; contributions are sorted by ``|delta[predicted]|`` (largest
    first) and cut to ``top`` when given, each with the pattern's best span in the document.

    Raises:
        InterpretError: not a SoPa classifier, a vocabulary of the wrong size, a label outside the classes,
            ``top`` < 1, or tokens that are not strings.
    """
    reader = Reader(model, vocab)
    sopa = reader.model
    (words,) = check_documents([tokens])
    last = sopa.mlp.layers[-1]
    assert isinstance(last, nn.Linear)
    classes = last.out_features
    if label is not None and not 0 <= label < classes:
        raise InterpretError(f"label {label} is not a class of this model (0..{classes - 1})")
    if top is not None and top < 1:
        raise InterpretError(f"top must be >= 1, got {top}")
    with inference(sopa):
        (batch,) = batches(vocab, [words], 1)
        all_logits, all_delta = leave_one_out(sopa, batch.ids, batch.lengths)
        logits, delta = all_logits[0], all_delta[0]
        predicted = int(logits.argmax())
        ranking = sorted(range(reader.num_patterns), key=lambda p: -abs(float(delta[p, predicted])))[:top]
        best = _best_matches(reader, words, batch, ranking)
        probabilities = torch.softmax(logits.double(), 0)
    return Explanation(
        tuple(words),
        label,
        predicted,
        tuple(float(p) for p in probabilities),
        tuple(PatternContribution(p, tuple(float(d) for d in delta[p]), best[p]) for p in ranking),
    )


def _best_matches(
    reader: Reader, words: list[str], batch: Batch, patterns: list[int]
) -> dict[int, PhraseMatch | None]:
    """Each pattern's best span in a one-document batch (None when nothing matches)."""
    all_groups, lengths = reader.slots(batch.ids, batch.lengths)
    spans: list[tuple[int, int, int]] = []
    wanted = set(patterns)
    for group in all_groups:
        values, starts, ends = reader.best_spans(group, lengths, 1, earliest=True)
        for column in range(group.count):
            pattern = group.first + column
            if pattern in wanted and values[0, 0, column] != reader.storage.zero:
                end = int(ends[0, 0, column])
                spans.append((pattern, int(starts[0, 0, column]), end + 1))
    traced = reader.matches(0, words, spans)
    best: dict[int, PhraseMatch | None] = dict.fromkeys(patterns)
    for (pattern, _, _), match in zip(spans, traced, strict=True):
        best[pattern] = match
    return best
