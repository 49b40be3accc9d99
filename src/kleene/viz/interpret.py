"""Interpreting a trained SoPa (sopa-soft-patterns.md §7): top phrases, explanations, hard patterns.

Everything here reads the model's own modules: transition weights come from ``PatternGroup.transitions``
and the epsilon constants from the compiled recurrence (scales and encoders included), and spans follow the
model's ``mode``:

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

Scores are "as the MLP sees them": probabilities for max-times (the model runs it in log space), plain values
for max-plus and real. The backtrace is exact for the semiring: in the max semirings the best path of a span
*is* the span's score; in the real semiring a span's score is the sum over its paths and ``share`` says how
much of it the best single path carries.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from kleene.automata.labels import ANY, EPSILON, Label, OneOf
from kleene.automata.semiring import Semiring
from kleene.automata.wfsa import WFSA
from kleene.data.vocab import Vocabulary
from kleene.errors import InterpretError
from kleene.nn.sopa import REFERENCE_ZERO, PatternGroup, SoPaClassifier, storage_to_float

__all__ = [
    "END_TOKEN",
    "START_TOKEN",
    "Explanation",
    "HardFidelity",
    "HardPattern",
    "InterpretError",
    "PatternContribution",
    "PatternStep",
    "PhraseMatch",
    "explain",
    "hard_fidelity",
    "hard_patterns",
    "leave_one_out",
    "removed_value",
    "top_phrases",
]

#: How a padding position shows in ``PhraseMatch.tokens`` / ``PatternStep.token``.
START_TOKEN = "<START>"
END_TOKEN = "<END>"

#: How many best words per arc a HardPattern keeps for display.
RANKED_WORDS = 10

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


@dataclass(frozen=True)
class HardPattern:
    """A soft pattern made hard: the words each arc accepts.

    ``main[i]`` is the set of words of the arc i -> i+1 (L-1 arcs), ``self_loops[i]`` those of the self-loop
    on state i (empty sets when the model has no self-loops), ``epsilons[i]`` whether the epsilon
    i -> i+1 is kept. None stands for a wildcard (any word). ``main_ranked`` / ``self_loop_ranked`` list each
    arc's highest-weighted candidate words, best first (for display; empty when unknown).
    """

    pattern: int
    length: int
    main: tuple[frozenset[str] | None, ...]
    self_loops: tuple[frozenset[str] | None, ...]
    epsilons: tuple[bool, ...]
    main_ranked: tuple[tuple[str, ...], ...] = ()
    self_loop_ranked: tuple[tuple[str, ...], ...] = ()

    def wfsa(self, alphabet: object = None) -> WFSA:
        """The pattern as a boolean chain automaton over words (``OneOf``/``ANY`` labels, epsilon arcs).

        ``alphabet`` (an iterable of words or a SymbolTable) is needed only to enumerate wildcard arcs.
        """
        automaton = WFSA("boolean", alphabet=alphabet, name=f"hard pattern {self.pattern}")  # type: ignore[arg-type]
        for state in range(self.length):
            automaton.add_state(f"s{state}")
        automaton.set_initial(0)
        automaton.set_final(self.length - 1)
        for state, words in enumerate(self.main):
            label = _label(words)
            if label is not None:
                automaton.add_arc(state, state + 1, label)
        for state, words in enumerate(self.self_loops):
            label = _label(words)
            if label is not None:
                automaton.add_arc(state, state, label)
        for state, kept in enumerate(self.epsilons):
            if kept:
                automaton.add_arc(state, state + 1, EPSILON)
        return automaton

    def describe(self, max_words: int = 4) -> str:
        """One line, arcs separated by two spaces: ``great|good  *  movie`` (``*`` = any word).

        Words show best first when ranked. A self-loop shows as ``(w1|w2)*`` after its state's incoming arc, a
        kept epsilon as ``?`` after the arc it lets the pattern skip, an arc accepting no word as ``∅``.
        """

        def loop(state: int) -> list[str]:
            words = self.self_loops[state] if self.self_loops else frozenset()
            ranked = self.self_loop_ranked[state] if self.self_loop_ranked else ()
            return [] if words == frozenset() else [f"({_words(words, ranked, max_words)})*"]

        parts = loop(0)
        for arc, words in enumerate(self.main):
            ranked = self.main_ranked[arc] if self.main_ranked else ()
            parts.append(_words(words, ranked, max_words) + ("?" if self.epsilons and self.epsilons[arc] else ""))
            parts += loop(arc + 1)
        return "  ".join(parts)


def _label(words: frozenset[str] | None) -> Label | None:
    if words is None:
        return ANY
    return OneOf(words) if words else None


def _words(words: frozenset[str] | None, ranked: tuple[str, ...], max_words: int) -> str:
    """Up to ``max_words`` of ``words``, ranked ones first, then alphabetically."""
    if words is None:
        return "*"
    if not words:
        return "∅"
    ordered = [w for w in ranked if w in words] + sorted(words - set(ranked))
    return "|".join(ordered[:max_words]) + ("|…" if len(words) > max_words else "")


@dataclass(frozen=True)
class HardFidelity:
    """How the hard-pattern classifier agrees with the soft model on ``count`` documents.

    ``agreement``: fraction of documents where both predict the same class; ``coverage``: fraction of
    (document, pattern) pairs where the hard pattern matches at all; ``soft_accuracy``/``hard_accuracy`` when
    gold labels were given (else None).
    """

    agreement: float
    count: int
    coverage: float
    soft_accuracy: float | None = None
    hard_accuracy: float | None = None


# --------------------------------------------------------------------------------------------
# The model's arcs, read from its own modules
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Caps:
    """How many epsilons a match may take in a row: before its first token (``initial``), right before each
    consumed token (``before``) and right after each consumed token (``after``)."""

    initial: int
    before: int
    after: int


@dataclass(frozen=True)
class _GroupArcs:
    """One pattern group's arc weights in the storage semiring for a batch of padded documents.

    ``main`` (B, T, C, L-1), ``loop`` (B, T, C, L) or None, ``eps`` (C, L-1) or None; ``first`` is the index of
    the group's first pattern in the bank.
    """

    first: int
    length: int
    main: Tensor
    loop: Tensor | None
    eps: Tensor | None
    caps: _Caps

    @property
    def count(self) -> int:
        return int(self.main.shape[2])


def _caps(group: PatternGroup) -> _Caps:
    """The model's epsilon semantics (module docstring): paper = eq. 7, reference = one epsilon before a token."""
    if not group.epsilons:
        return _Caps(0, 0, 0)
    if group.mode == "reference":
        return _Caps(0, 1, 0)
    cap = group.length - 1 if group.epsilon_cap is None else min(group.epsilon_cap, group.length - 1)
    return _Caps(cap, 0, cap)


def _group_arcs(model: SoPaClassifier, vectors: Tensor) -> list[_GroupArcs]:
    """Every group's arcs over padded word vectors (B, T, E), from ``PatternGroup.transitions`` and the
    recurrence's (encoded, scaled) epsilon constants."""
    arcs: list[_GroupArcs] = []
    first = 0
    for group in model.patterns.groups:
        assert isinstance(group, PatternGroup)
        main, loop = group.transitions(vectors)
        eps = group.recurrence.constants.T if group.epsilons else None
        arcs.append(_GroupArcs(first, group.length, main, loop, eps, _caps(group)))
        first += group.count
    return arcs


def _check_model(model: object, vocab: Vocabulary) -> SoPaClassifier:
    """Raises InterpretError: not a SoPaClassifier, a vocabulary of the wrong size, a model off the CPU, or a
    real semiring with the identity encoder (its weights may be negative, so no single path is "best")."""
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
    if model.patterns.semiring == "real" and model.patterns.encoder == "identity":
        raise InterpretError(
            "a real-semiring SoPa with the identity encoder has signed weights: the best single path is undefined"
        )
    return model


@contextlib.contextmanager
def _inference(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) and no gradients, restoring the model's mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


# --------------------------------------------------------------------------------------------
# Dynamic programs over the storage semiring (vectorised over documents and patterns)
# --------------------------------------------------------------------------------------------
Tracked = tuple[Tensor, Tensor | None]


def _plus(storage: Semiring, a: Tracked, b: Tracked) -> Tracked:
    """⊕ of two values, carrying along the start position of the winning term (max semirings)."""
    value = storage.plus(a[0], b[0])
    if a[1] is None or b[1] is None:
        return value, None
    return value, torch.where(value == a[0], a[1], b[1])


def _shift(x: Tensor, fill: float | int) -> Tensor:
    """Values ``x`` (..., L-1) of the arcs i -> i+1 placed on their targets: (..., L) with ``fill`` on state 0."""
    return torch.cat([torch.full_like(x[..., :1], fill), x], -1)


def _closure(storage: Semiring, state: Tracked, eps: Tensor | None, cap: int) -> Tracked:
    """Take 0..cap epsilons i -> i+1 in a row: ``⊕_k state ⊗ E^k``."""
    if eps is None or cap == 0:
        return state
    result, current = state, state
    for _ in range(cap):
        moved = _shift(storage.times(current[0][..., :-1], eps), storage.zero)
        starts = None if current[1] is None else _shift(current[1][..., :-1], -1)
        current = (moved, starts)
        result = _plus(storage, result, current)
    return result


def _move(storage: Semiring, state: Tracked, main: Tensor, loop: Tensor | None) -> Tracked:
    """Consume one token: main path i -> i+1 ⊕ self-loop i -> i."""
    value, starts = state
    forward = (
        _shift(storage.times(value[..., :-1], main), storage.zero),
        None if starts is None else _shift(starts[..., :-1], -1),
    )
    if loop is None:
        return forward
    return _plus(storage, forward, (storage.times(value, loop), starts))


def _initial(storage: Semiring, arcs: _GroupArcs) -> Tensor:
    """``eps^{≤initial}(π)`` per pattern (C, L): where a match may stand before its first token."""
    start = storage.zeros((arcs.count, arcs.length), like=arcs.main)
    start[:, 0] = storage.one
    return _closure(storage, (start, None), arcs.eps, arcs.caps.initial)[0]


def _scan(storage: Semiring, arcs: _GroupArcs, lengths: Tensor, track: bool) -> Tracked:
    """Best (max semirings) or total (real) over the spans ending after each token: y (B, T, C) and, when
    ``track``, the start of the best span (B, T, C) in padded positions. Spans may start at any token (the
    restart of eq. 7b); the empty span (END reachable by epsilons alone) counts at every step, as in the model.

    Note:
        ``track`` is meaningful only in idempotent semirings, where ⊕ picks one term.
    """
    batch, steps = arcs.main.shape[:2]
    init = _initial(storage, arcs).expand(batch, -1, -1)
    state: Tracked = (storage.zeros((batch, arcs.count, arcs.length), like=arcs.main), None)
    if track:
        state = (state[0], torch.full(state[0].shape, -1, dtype=torch.long))
    ends, starts = [], []
    for t in range(steps):
        fresh: Tracked = (init, torch.full_like(state[1], t) if state[1] is not None else None)
        state = _plus(storage, state, fresh)
        state = _closure(storage, state, arcs.eps, arcs.caps.before)
        state = _move(storage, state, arcs.main[:, t], None if arcs.loop is None else arcs.loop[:, t])
        state = _closure(storage, state, arcs.eps, arcs.caps.after)
        empty = (init[..., -1], None if state[1] is None else torch.full_like(state[1][..., -1], t + 1))
        end_value, end_start = _plus(
            storage, (state[0][..., -1], None if state[1] is None else state[1][..., -1]), empty
        )
        ends.append(end_value)
        if end_start is not None:
            starts.append(end_start)
    values = _mask(storage, torch.stack(ends, 1), lengths)
    return values, (torch.stack(starts, 1) if track else None)


def _scan_all_starts(storage: Semiring, order: Semiring, arcs: _GroupArcs, lengths: Tensor) -> Tracked:
    """For each end, the span with the best total (in the ``order`` of single values) and its start.

    One Forward per start position (O(T²) per pattern): the real semiring's span totals are sums over paths, so
    the best start cannot be carried along a single pass.
    """
    batch, steps = arcs.main.shape[:2]
    init = _initial(storage, arcs)
    live = storage.zeros((batch, steps, arcs.count, arcs.length), like=arcs.main)
    ends, starts = [], []
    positions = torch.arange(steps + 1)
    for t in range(steps):
        live[:, t] = init
        state: Tracked = (live[:, : t + 1], None)
        state = _closure(storage, state, arcs.eps, arcs.caps.before)
        loop = None if arcs.loop is None else arcs.loop[:, t, None]
        state = _move(storage, state, arcs.main[:, t, None], loop)
        state = _closure(storage, state, arcs.eps, arcs.caps.after)
        live[:, : t + 1] = state[0]
        candidates = torch.cat([state[0][..., -1], init[None, None, :, -1].expand(batch, 1, -1)], 1)
        best = order.sum(candidates, axis=1)
        first_best = (candidates == best[:, None]).to(torch.int8).argmax(1)
        ends.append(best)
        starts.append(positions[: t + 2][first_best])
    return _mask(storage, torch.stack(ends, 1), lengths), torch.stack(starts, 1)


def _mask(storage: Semiring, values: Tensor, lengths: Tensor) -> Tensor:
    """Semiring zero at the steps past each document's length."""
    valid = torch.arange(values.shape[1])[None, :] < lengths[:, None]
    return torch.where(valid[..., None], values, storage.zeros((), like=values))


def _document_scores(storage: Semiring, arcs: Sequence[_GroupArcs], lengths: Tensor) -> Tensor:
    """Every pattern's document score (B, P) in storage form: ⊕ over ends of the span scores (eq. 8)."""
    return torch.cat([storage.sum(_scan(storage, a, lengths, track=False)[0], axis=1) for a in arcs], 1)


# --------------------------------------------------------------------------------------------
# The exact backtrace of one pattern over one span (plain floats, float64)
# --------------------------------------------------------------------------------------------
#: A step before it is placed in a document: (kind, source, target, index in the span or None, storage weight).
_RawStep = tuple[StepKind, int, int, int | None, float]
#: Per state: (best single-path weight, its steps, total over paths), or None where no path reaches the state.
_Cell = tuple[float, tuple[_RawStep, ...], float] | None


@dataclass(frozen=True)
class _SpanArcs:
    """One pattern's storage-form weights over one span: ``main`` (m, L-1), ``loop`` (m, L) or None, ``eps``
    (L-1,) or None."""

    main: np.ndarray
    loop: np.ndarray | None
    eps: np.ndarray | None
    caps: _Caps


def _trace(storage: Semiring, order: Semiring, arcs: _SpanArcs) -> tuple[float, tuple[_RawStep, ...], float] | None:
    """The best single path over the whole span (ranked by ``order``, the storage semiring's Viterbi order), its
    steps, and the span's total (⊕ over all paths in ``storage``); None when no path derives the span.

    The phases mirror ``_scan``: ``initial`` epsilons, then per token ``before`` epsilons, the move, ``after``
    epsilons.
    """
    length = arcs.main.shape[1] + 1
    layer: list[_Cell] = [(order.one, (), storage.one)] + [None] * (length - 1)
    layer = _trace_epsilons(storage, order, layer, arcs.eps, arcs.caps.initial)
    for i in range(arcs.main.shape[0]):
        layer = _trace_epsilons(storage, order, layer, arcs.eps, arcs.caps.before)
        moved: list[_Cell] = [None] * length
        for state, cell in enumerate(layer):
            if cell is None:
                continue
            if arcs.loop is not None:
                moved[state] = _offer(
                    storage, order, moved[state], cell, ("self-loop", state, state, i, arcs.loop[i, state])
                )
            if state + 1 < length:
                step: _RawStep = ("main", state, state + 1, i, float(arcs.main[i, state]))
                moved[state + 1] = _offer(storage, order, moved[state + 1], cell, step)
        layer = _trace_epsilons(storage, order, moved, arcs.eps, arcs.caps.after)
    return layer[-1]


def _trace_epsilons(
    storage: Semiring, order: Semiring, layer: list[_Cell], eps: np.ndarray | None, cap: int
) -> list[_Cell]:
    """``⊕_{k ≤ cap} layer ⊗ E^k`` with the best path per state."""
    if eps is None or cap == 0:
        return layer
    result, current = list(layer), layer
    for _ in range(cap):
        shifted: list[_Cell] = [None] * len(layer)
        for state, cell in enumerate(current[:-1]):
            if cell is not None:
                shifted[state + 1] = _offer(storage, order, None, cell, ("epsilon", state, state + 1, None, eps[state]))
        result = [_merge(storage, order, a, b) for a, b in zip(result, shifted, strict=True)]
        current = shifted
    return result


def _offer(storage: Semiring, order: Semiring, target: _Cell, source: _Cell, step: _RawStep) -> _Cell:
    """``target ⊕ source ⊗ step``."""
    assert source is not None
    weight = float(step[4])
    if storage.is_zero(weight):
        return target
    extended: _Cell = (
        order.times(source[0], weight),
        (*source[1], (step[0], step[1], step[2], step[3], weight)),
        storage.times(source[2], weight),
    )
    return _merge(storage, order, target, extended)


def _merge(storage: Semiring, order: Semiring, a: _Cell, b: _Cell) -> _Cell:
    """Both cells' totals ⊕-added; the better single path kept (``a`` on ties)."""
    if a is None or b is None:
        return a if b is None else b
    best = b if order.better(b[0], a[0]) else a
    return (best[0], best[1], storage.plus(a[2], b[2]))


# --------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Batch:
    """Documents ``indices`` as padded ids (B, T) and their lengths (B,)."""

    indices: tuple[int, ...]
    ids: Tensor
    lengths: Tensor


def _check_documents(documents: Sequence[Sequence[str]]) -> list[list[str]]:
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


def _batches(vocab: Vocabulary, documents: list[list[str]], batch_size: int) -> list[_Batch]:
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
        batches.append(_Batch(indices, ids, lengths))
    return batches


def _padded_tokens(model: SoPaClassifier, tokens: Sequence[str]) -> list[str]:
    """The document as the patterns read it: ``boundary`` START tokens, the words, ``boundary`` END tokens."""
    return [START_TOKEN] * model.boundary + list(tokens) + [END_TOKEN] * model.boundary


def _progress(items: Sequence[_Batch], enabled: bool, description: str) -> Iterable[_Batch]:
    """``items`` with a rich progress bar on stderr when ``enabled``."""
    if not enabled:
        return items
    from rich.console import Console
    from rich.progress import track

    return track(items, description=description, console=Console(stderr=True), transient=True)


# --------------------------------------------------------------------------------------------
# Spans and matches
# --------------------------------------------------------------------------------------------
class _Reader:
    """A checked SoPa model with its semirings: finds best spans and turns them into ``PhraseMatch``es."""

    def __init__(self, model: object, vocab: Vocabulary):
        self.model = _check_model(model, vocab)
        self.vocab = vocab
        group = self.model.patterns.groups[0]
        assert isinstance(group, PatternGroup)
        self.algebra = group.recurrence.plan.algebra
        self.storage: Semiring = self.algebra.storage
        self.order = self.storage.viterbi
        self.semiring = self.model.patterns.semiring
        self.num_patterns = self.model.patterns.num_patterns

    def arcs(self, ids: Tensor, lengths: Tensor) -> tuple[list[_GroupArcs], Tensor]:
        """Every group's arcs over the padded documents, and the padded lengths."""
        vectors, padded_lengths = self.model.embed(ids, lengths)
        return _group_arcs(self.model, vectors), padded_lengths

    def best_by_end(self, arcs: _GroupArcs, lengths: Tensor) -> Tracked:
        """Per padded end position: the best span's storage score (total in the real semiring) and its start."""
        if self.storage.idempotent:
            return _scan(self.storage, arcs, lengths, track=True)
        return _scan_all_starts(self.storage, self.order, arcs, lengths)

    def number(self, value: float) -> float:
        """A storage value as the MLP reads it (max-times: a probability)."""
        return float(storage_to_float(torch.tensor(value, dtype=torch.float64), self.semiring))

    def matches(
        self, document: int, tokens: Sequence[str], spans: Sequence[tuple[int, int, int]]
    ) -> list[PhraseMatch | None]:
        """``PhraseMatch``es of (pattern, padded start, padded end) spans of one document (None: no path)."""
        ids = torch.tensor(self.vocab.encode(tokens), dtype=torch.long).reshape(1, len(tokens))
        arcs, _ = self.arcs(ids, torch.tensor([len(tokens)]))
        where = {a.first + c: (a, c) for a in arcs for c in range(a.count)}
        padded = _padded_tokens(self.model, tokens)
        result: list[PhraseMatch | None] = []
        for pattern, start, end in spans:
            group, column = where[pattern]
            span = _SpanArcs(
                group.main[0, start:end, column].double().numpy(),
                None if group.loop is None else group.loop[0, start:end, column].double().numpy(),
                None if group.eps is None else group.eps[column].double().numpy(),
                group.caps,
            )
            traced = _trace(self.storage, self.order, span)
            result.append(None if traced is None else self._match(pattern, document, padded, start, end, traced))
        return result

    def _match(
        self,
        pattern: int,
        document: int,
        padded: list[str],
        start: int,
        end: int,
        traced: tuple[float, tuple[_RawStep, ...], float],
    ) -> PhraseMatch:
        best, raw_steps, total = traced
        offset = self.model.boundary
        steps = tuple(
            PatternStep(
                kind,
                source,
                target,
                None if index is None else start + index - offset,
                None if index is None else padded[start + index],
                self.number(weight),
            )
            for kind, source, target, index, weight in raw_steps
        )
        score, span_score = self.number(best), self.number(total)
        share = None if self.storage.idempotent else (score / span_score if span_score else None)
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


def _pattern_indices(reader: _Reader, patterns: Iterable[int] | None) -> list[int]:
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
        The corpus is scanned in batches (one pass per pattern group, vectorised over patterns; the real
        semiring needs one pass per start position); only the selected phrases are traced.

    Raises:
        InterpretError: not a SoPa classifier, a vocabulary of the wrong size, a pattern index outside the bank,
            ``k`` or ``per_document`` < 1, or a malformed document.
    """
    reader = _Reader(model, vocab)
    wanted = _pattern_indices(reader, patterns)
    if k < 1 or per_document < 1:
        raise InterpretError(f"k and per_document must be >= 1, got k={k}, per_document={per_document}")
    texts = _check_documents(documents)
    found: list[np.ndarray] = []  # rows (score, document, pattern, padded start, padded end)
    wanted_mask = torch.zeros(reader.num_patterns, dtype=torch.bool)
    wanted_mask[wanted] = True
    with _inference(reader.model):
        for batch in _progress(_batches(vocab, texts, batch_size), progress, "top phrases"):
            all_arcs, lengths = reader.arcs(batch.ids, batch.lengths)
            for arcs in all_arcs:
                columns = wanted_mask[arcs.first : arcs.first + arcs.count]
                if not columns.any():
                    continue
                scores, starts = reader.best_by_end(arcs, lengths)
                assert starts is not None
                # every storage order here ranks larger values first (max-plus on logs, max-plus, real totals)
                values, ends = scores.topk(min(per_document, scores.shape[1]), dim=1)
                begins = starts.gather(1, ends)
                keep = (values != reader.storage.zero) & columns[None, None, :]
                row, _, column = keep.nonzero(as_tuple=True)
                documents_of = torch.tensor(batch.indices)[row]
                found.append(
                    torch.stack(
                        [
                            values[keep].double(),
                            documents_of.double(),
                            (column + arcs.first).double(),
                            begins[keep].double(),
                            ends[keep].double() + 1,
                        ],
                        1,
                    ).numpy()
                )
        table = np.concatenate(found) if found else np.zeros((0, 5))
        return _select_phrases(reader, texts, table, wanted, k)


def _select_phrases(
    reader: _Reader, texts: list[list[str]], table: np.ndarray, wanted: list[int], k: int
) -> dict[int, list[PhraseMatch]]:
    """The ``k`` best distinct phrases per pattern from candidate rows (score, document, pattern, start, end)."""
    chosen: dict[int, list[tuple[int, int, int]]] = {pattern: [] for pattern in wanted}
    for pattern in wanted:
        rows = table[table[:, 2] == pattern]
        seen: set[tuple[str, ...]] = set()
        for row in rows[np.argsort(-rows[:, 0], kind="stable")]:
            document, start, end = int(row[1]), int(row[3]), int(row[4])
            phrase = tuple(_padded_tokens(reader.model, texts[document])[start:end])
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


def removed_value(model: nn.Module) -> float:
    """What the MLP reads for a pattern that matched nothing: semiring zero as a number.

    0 for max-times (a probability) and real; for max-plus the authors' stand-in -100 (REFERENCE_ZERO), since
    the MLP cannot take -inf.

    Raises:
        InterpretError: not a SoPa classifier.
    """
    if not isinstance(model, SoPaClassifier):
        raise InterpretError(f"SoPa interpretation needs a SoPaClassifier, got {type(model).__name__}")
    return REFERENCE_ZERO if model.patterns.semiring == "max-plus" else 0.0


def leave_one_out(model: SoPaClassifier, tokens: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """The logits (B, C) of a batch and every pattern's leave-one-out effect ``delta`` (B, P, C) on them.

    ``delta[b, p, c]`` is document b's class-c logit with all pattern scores minus the logit with pattern p's score
    replaced by ``removed_value(model)`` (SoPa §7). ``model`` is a ``SoPaClassifier`` in inference mode; ``tokens``
    and ``lengths`` as the classifier takes them.
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
    reader = _Reader(model, vocab)
    sopa = reader.model
    (words,) = _check_documents([tokens])
    last = sopa.mlp.layers[-1]
    assert isinstance(last, nn.Linear)
    classes = last.out_features
    if label is not None and not 0 <= label < classes:
        raise InterpretError(f"label {label} is not a class of this model (0..{classes - 1})")
    if top is not None and top < 1:
        raise InterpretError(f"top must be >= 1, got {top}")
    with _inference(sopa):
        (batch,) = _batches(vocab, [words], 1)
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
    reader: _Reader, words: list[str], batch: _Batch, patterns: list[int]
) -> dict[int, PhraseMatch | None]:
    """Each pattern's best span in a one-document batch (None when nothing matches)."""
    all_arcs, lengths = reader.arcs(batch.ids, batch.lengths)
    spans: list[tuple[int, int, int]] = []
    wanted = set(patterns)
    for arcs in all_arcs:
        scores, starts = reader.best_by_end(arcs, lengths)
        assert starts is not None
        values, ends = scores[0].max(0)  # larger storage values rank first in every SoPa semiring
        for column in range(arcs.count):
            pattern = arcs.first + column
            if pattern in wanted and values[column] != reader.storage.zero:
                end = int(ends[column])
                spans.append((pattern, int(starts[0, end, column]), end + 1))
    traced = reader.matches(0, words, spans)
    best: dict[int, PhraseMatch | None] = dict.fromkeys(patterns)
    for (pattern, _, _), match in zip(spans, traced, strict=True):
        best[pattern] = match
    return best


# --------------------------------------------------------------------------------------------
# Hard patterns
# --------------------------------------------------------------------------------------------
class _Lexicon:
    """The words a hard pattern may name: vocabulary tokens (ids as the vocabulary's) and, when the model pads
    documents, START_TOKEN / END_TOKEN (ids ``len(vocab)`` and ``len(vocab) + 1``), each with its vector."""

    def __init__(self, vocab: Vocabulary):
        self.vocab = vocab
        self.start_id, self.end_id = len(vocab), len(vocab) + 1
        self.size = len(vocab) + 2
        self._ids = {token: i for i, token in enumerate(vocab.tokens)} | {
            START_TOKEN: self.start_id,
            END_TOKEN: self.end_id,
        }

    def ids(self, words: Iterable[str], where: str) -> Tensor:
        """The lexicon ids of ``words``.

        Raises:
            InterpretError: a word outside the vocabulary (``where`` names the arc).
        """
        try:
            return torch.tensor([self._ids[word] for word in words], dtype=torch.long)
        except KeyError as missing:
            raise InterpretError(f"{where}: {missing.args[0]!r} is not in the vocabulary") from None

    def vectors(self, model: SoPaClassifier, ids: Tensor) -> Tensor:
        """The vectors the model reads for ``ids`` (1, N, E)."""
        table = torch.cat([model.embedding.weight, model.start_vector[None], model.end_vector[None]])
        return table[ids][None]

    def padded_ids(self, model: SoPaClassifier, batch: _Batch) -> Tensor:
        """Ids aligned with ``model.embed``'s padded vectors: START ids, the words, END ids, then padding."""
        p = model.boundary
        width = batch.ids.shape[1] + 2 * p
        position = torch.arange(width)[None, :]
        ends = batch.lengths[:, None] + p
        ids = torch.nn.functional.pad(batch.ids, (p, p), value=self.vocab.pad_id)
        ids = torch.where(position < p, self.start_id, ids)
        return torch.where((position >= ends) & (position < ends + p), self.end_id, ids)


def hard_patterns(
    model: nn.Module,
    vocab: Vocabulary,
    threshold: float = 0.5,
    wildcard_fraction: float = 0.5,
    words: Iterable[str] | None = None,
    *,
    relative: bool = False,
) -> list[HardPattern]:
    """Every soft pattern as a hard one: the words whose arc weight passes ``threshold``.

    By default a word passes an arc when its weight as the MLP reads it (a probability for the sigmoid encoder)
    is at least ``threshold``: with 0.5, the arc is more likely taken on that word than not; an epsilon is kept
    when its weight is at least ``threshold``. With ``relative``, a word passes when its weight is at least
    ``threshold`` times the weight of the arc's best candidate word (for max-plus: a score within
    ``-ln threshold`` of the best, the same ratio in exp space), and an epsilon when it passes that test against
    the best word of the main arc it skips; an arc no word likes then still keeps its best words, so relative
    thresholds suit the identity encoder's unbounded scores rather than probabilities. An arc where more than
    ``wildcard_fraction`` of the candidates pass becomes a wildcard (None).
    Candidates are ``words`` (default: the whole vocabulary but the padding token) plus START_TOKEN/END_TOKEN
    when the model pads documents.

    Raises:
        InterpretError: not a SoPa classifier, a vocabulary of the wrong size, a threshold outside (0, 1] when
            relative, a wildcard_fraction outside [0, 1], or a candidate word outside the vocabulary.
    """
    reader = _Reader(model, vocab)
    sopa = reader.model
    if relative and not 0 < threshold <= 1:
        raise InterpretError(f"a relative threshold must be in (0, 1], got {threshold}")
    if not 0 <= wildcard_fraction <= 1:
        raise InterpretError(f"wildcard_fraction must be in [0, 1], got {wildcard_fraction}")
    lexicon = _Lexicon(vocab)
    names = list(vocab.tokens[1:]) if words is None else list(words)
    if sopa.boundary and words is None:
        names += [START_TOKEN, END_TOKEN]
    if not names:
        raise InterpretError("no candidate words")
    ids = lexicon.ids(names, "candidate words")
    storage = reader.storage
    if relative:  # value >= best ⊗ ratio, the ratio in storage form (a log for the log-space semirings)
        ratio = threshold if storage.name == "real" else float(np.log(threshold))

        def passing(values: Tensor, best: Tensor) -> Tensor:
            return values >= storage.times(best, ratio)

    else:  # the weight as the MLP reads it >= threshold
        to_storage = reader.algebra.to_storage

        def passing(values: Tensor, best: Tensor) -> Tensor:
            return values >= to_storage(threshold)

    hard: list[HardPattern] = []
    with _inference(sopa):
        for arcs in _group_arcs(sopa, lexicon.vectors(sopa, ids)):
            main = arcs.main[0]  # (N, C, L-1)
            best_main = storage.sum(main, axis=0)  # (C, L-1)
            main_sets = _word_sets(passing(main, best_main), names, wildcard_fraction)
            main_ranked = _ranked(main, names)
            if arcs.loop is not None:
                loop = arcs.loop[0]
                loop_sets = _word_sets(passing(loop, storage.sum(loop, axis=0)), names, wildcard_fraction)
                loop_ranked = _ranked(loop, names)
            else:
                loop_sets = [[frozenset()] * arcs.length for _ in range(arcs.count)]
                loop_ranked = [[()] * arcs.length for _ in range(arcs.count)]
            no_epsilons = torch.zeros_like(best_main, dtype=torch.bool)
            kept = no_epsilons if arcs.eps is None else passing(arcs.eps, best_main)
            for column in range(arcs.count):
                hard.append(
                    HardPattern(
                        arcs.first + column,
                        arcs.length,
                        tuple(main_sets[column]),
                        tuple(loop_sets[column]),
                        tuple(bool(k) for k in kept[column]),
                        tuple(main_ranked[column]),
                        tuple(loop_ranked[column]),
                    )
                )
    return hard


def _ranked(values: Tensor, names: list[str], count: int = RANKED_WORDS) -> list[list[tuple[str, ...]]]:
    """Per pattern and arc, the ``count`` candidates of highest weight (N, C, A) -> [C][A], best first."""
    top = values.topk(min(count, values.shape[0]), dim=0).indices  # larger storage values are better here
    return [
        [tuple(names[i] for i in top[:, c, a].tolist()) for a in range(values.shape[2])] for c in range(values.shape[1])
    ]


def _word_sets(passes: Tensor, names: list[str], wildcard_fraction: float) -> list[list[frozenset[str] | None]]:
    """Per pattern and arc, the passing words (N, C, A) -> [C][A], None where more than the fraction pass."""
    count = passes.shape[0]
    fraction = passes.double().mean(0)
    sets: list[list[frozenset[str] | None]] = []
    for column in range(passes.shape[1]):
        row: list[frozenset[str] | None] = []
        for arc in range(passes.shape[2]):
            if count and float(fraction[column, arc]) > wildcard_fraction:
                row.append(None)
            else:
                row.append(frozenset(names[i] for i in passes[:, column, arc].nonzero().flatten().tolist()))
        sets.append(row)
    return sets


def hard_fidelity(
    model: nn.Module,
    vocab: Vocabulary,
    hard: Sequence[HardPattern],
    documents: Sequence[Sequence[str]],
    labels: Sequence[int] | None = None,
    *,
    batch_size: int = 64,
    progress: bool = False,
) -> HardFidelity:
    """How often the hard-pattern classifier decides as the soft model does on ``documents``.

    The hard classifier is the same MLP fed by hard scores: each pattern runs with its soft weights on the words
    its hard pattern accepts and semiring zero on every other word (and on dropped epsilons), so a hard pattern
    scores a document only through phrases it matches symbolically.

    Raises:
        InterpretError: not a SoPa classifier, a vocabulary of the wrong size, ``hard`` not exactly one hard
            pattern per pattern of the bank (or of the wrong length), a word outside the vocabulary, labels of
            the wrong number or malformed documents.
    """
    reader = _Reader(model, vocab)
    sopa = reader.model
    texts = _check_documents(documents)
    if labels is not None and len(labels) != len(texts):
        raise InterpretError(f"{len(labels)} labels for {len(texts)} documents")
    lexicon = _Lexicon(vocab)
    tables = _hard_tables(reader, lexicon, hard)
    soft_predictions = torch.zeros(len(texts), dtype=torch.long)
    hard_predictions = torch.zeros(len(texts), dtype=torch.long)
    matched = 0
    with _inference(sopa):
        for batch in _progress(_batches(vocab, texts, batch_size), progress, "hard fidelity"):
            index = torch.tensor(batch.indices, dtype=torch.long)
            soft_predictions[index] = sopa(batch.ids, batch.lengths).argmax(1)
            arcs, lengths = reader.arcs(batch.ids, batch.lengths)
            ids = lexicon.padded_ids(sopa, batch)
            masked = [_mask_arcs(reader.storage, a, t, ids) for a, t in zip(arcs, tables, strict=True)]
            scores = _document_scores(reader.storage, masked, lengths)
            matched += int((scores != reader.storage.zero).sum())
            numbers = storage_to_float(scores, reader.semiring)
            hard_predictions[index] = sopa.mlp(numbers).argmax(1)
    count = len(texts)
    agreement = float((soft_predictions == hard_predictions).double().mean()) if count else float("nan")
    soft_accuracy = hard_accuracy = None
    if labels is not None and count:
        gold = torch.tensor(list(labels), dtype=torch.long)
        soft_accuracy = float((soft_predictions == gold).double().mean())
        hard_accuracy = float((hard_predictions == gold).double().mean())
    coverage = matched / (count * reader.num_patterns) if count else float("nan")
    return HardFidelity(agreement, count, coverage, soft_accuracy, hard_accuracy)


@dataclass(frozen=True)
class _HardTable:
    """Which lexicon ids each arc of a group accepts: ``main`` (N, C, L-1), ``loop`` (N, C, L), ``eps`` (C, L-1)."""

    main: Tensor
    loop: Tensor
    eps: Tensor


def _hard_tables(reader: _Reader, lexicon: _Lexicon, hard: Sequence[HardPattern]) -> list[_HardTable]:
    """Per group, the acceptance tables of its hard patterns (checked against the bank)."""
    by_pattern = {h.pattern: h for h in hard}
    missing = sorted(set(range(reader.num_patterns)) - set(by_pattern))
    extra = sorted(set(by_pattern) - set(range(reader.num_patterns)))
    if missing or extra or len(hard) != reader.num_patterns:
        raise InterpretError(
            f"hard patterns must cover the bank's {reader.num_patterns} patterns once each "
            f"(missing {missing[:10]}, unknown {extra[:10]}, {len(hard)} given)"
        )
    tables = []
    first = 0
    for group in reader.model.patterns.groups:
        assert isinstance(group, PatternGroup)
        length, count = group.length, group.count
        main = torch.zeros(lexicon.size, count, length - 1, dtype=torch.bool)
        loop = torch.zeros(lexicon.size, count, length, dtype=torch.bool)
        eps = torch.zeros(count, length - 1, dtype=torch.bool)
        for column in range(count):
            pattern = by_pattern[first + column]
            if pattern.length != length or len(pattern.main) != length - 1:
                raise InterpretError(
                    f"hard pattern {pattern.pattern} has length {pattern.length}; the model's has {length}"
                )
            for arc, words in enumerate(pattern.main):
                _accept(main[:, column, arc], words, lexicon, f"hard pattern {pattern.pattern}, main arc {arc}")
            for state, words in enumerate(pattern.self_loops):
                _accept(loop[:, column, state], words, lexicon, f"hard pattern {pattern.pattern}, self-loop {state}")
            eps[column, : len(pattern.epsilons)] = torch.tensor(pattern.epsilons, dtype=torch.bool)
        tables.append(_HardTable(main, loop, eps))
        first += count
    return tables


def _accept(row: Tensor, words: frozenset[str] | None, lexicon: _Lexicon, where: str) -> None:
    """Mark the ids of ``words`` (all ids for a wildcard) in ``row``."""
    if words is None:
        row[:] = True
    elif words:
        row[lexicon.ids(words, where)] = True


def _mask_arcs(storage: Semiring, arcs: _GroupArcs, table: _HardTable, ids: Tensor) -> _GroupArcs:
    """The soft arcs where the hard pattern accepts the token, semiring zero elsewhere."""
    zero = storage.zeros((), like=arcs.main)
    main = torch.where(table.main[ids], arcs.main, zero)
    loop = None if arcs.loop is None else torch.where(table.loop[ids], arcs.loop, zero)
    eps = None if arcs.eps is None else torch.where(table.eps, arcs.eps, zero)
    return _GroupArcs(arcs.first, arcs.length, main, loop, eps, arcs.caps)
