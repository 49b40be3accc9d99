"""Hard patterns (SoPa §7): each soft pattern as the words its arcs accept, and how faithful the hard bank is."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from kleene.automata.labels import ANY, EPSILON, Label, OneOf
from kleene.automata.wfsa import WFSA
from kleene.data.vocab import Vocabulary
from kleene.errors import InterpretError
from kleene.extract.reader import (
    END_TOKEN,
    START_TOKEN,
    Batch,
    Reader,
    batches,
    check_documents,
    progress_bar,
)
from kleene.nn.modes import inference
from kleene.nn.sopa import PatternGroup, SoPaClassifier

__all__ = [
    "HardFidelity",
    "HardPattern",
    "PatternArcs",
    "candidate_vectors",
    "hard_fidelity",
    "hard_patterns",
    "pattern_arcs",
]

#: How many best words per arc a HardPattern keeps for display.
RANKED_WORDS = 10

Tensor = torch.Tensor


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

    def padded_ids(self, model: SoPaClassifier, batch: Batch) -> Tensor:
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
    reader = Reader(model, vocab)
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
    if relative:  # value >= best ⊗ ratio, the ratio stored as a probability (Semiring.stored_probabilities)
        ratio = float(reader.algebra.stored_probabilities(threshold))

        def passing(values: Tensor, best: Tensor) -> Tensor:
            return values >= storage.times(best, ratio)

    else:  # the weight as the MLP reads it >= threshold
        to_storage = reader.algebra.to_storage

        def passing(values: Tensor, best: Tensor) -> Tensor:
            return values >= to_storage(threshold)

    hard: list[HardPattern] = []
    with inference(sopa):
        for arcs in pattern_arcs(sopa, lexicon.vectors(sopa, ids)):
            main = arcs.main  # (N, C, L-1)
            best_main = storage.sum(main, axis=0)  # (C, L-1)
            main_sets = _word_sets(passing(main, best_main), names, wildcard_fraction)
            main_ranked = _ranked(main, names)
            if arcs.loop is not None:
                loop = arcs.loop
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
    reader = Reader(model, vocab)
    sopa = reader.model
    texts = check_documents(documents)
    if labels is not None and len(labels) != len(texts):
        raise InterpretError(f"{len(labels)} labels for {len(texts)} documents")
    lexicon = _Lexicon(vocab)
    tables = _hard_tables(reader, lexicon, hard)
    groups = [group for group in sopa.patterns.groups if isinstance(group, PatternGroup)]
    soft_predictions = torch.zeros(len(texts), dtype=torch.long)
    hard_predictions = torch.zeros(len(texts), dtype=torch.long)
    matched = 0
    with inference(sopa):
        for batch in progress_bar(batches(vocab, texts, batch_size), progress, "hard fidelity"):
            index = torch.tensor(batch.indices, dtype=torch.long)
            soft_predictions[index] = sopa(batch.ids, batch.lengths).argmax(1)
            vectors, lengths = sopa.embed(batch.ids, batch.lengths)
            ids = lexicon.padded_ids(sopa, batch)
            parts = [_hard_scores(g, table, vectors, ids, lengths) for g, table in zip(groups, tables, strict=True)]
            scores = torch.cat(parts, 1)
            matched += int((scores != reader.storage.zero).sum())
            numbers = reader.algebra.from_storage(scores)
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


def _hard_tables(reader: Reader, lexicon: _Lexicon, hard: Sequence[HardPattern]) -> list[_HardTable]:
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


def _hard_scores(group: PatternGroup, table: _HardTable, vectors: Tensor, ids: Tensor, lengths: Tensor) -> Tensor:
    """The group's document scores (B, C) with its soft weights where the hard pattern accepts the token (and keeps
    the epsilon), semiring zero elsewhere: the layer's own score, without reference mode's -100 floor."""
    storage = group.storage
    main, loop = group.transitions(vectors)
    accepted = group.slots(table.main[ids], table.loop[ids] if loop is not None else None)
    slots = torch.where(accepted, group.slots(main, loop), storage.zeros((), like=main))
    eps = group.epsilon_constants()
    constants = None if eps is None else torch.where(table.eps.T, eps, storage.zeros((), like=eps))
    return group.score(slots, lengths, constants=constants, floor=False)


@dataclass(frozen=True)
class PatternArcs:
    """One pattern group's arc weights in storage form over a sequence of N candidate words: ``main`` (N, C, L-1),
    ``loop`` (N, C, L) or None (no self-loops), ``eps`` (C, L-1) or None (no epsilons); ``first`` is the group's
    first pattern in the bank, ``length`` its patterns' number of states L."""

    first: int
    length: int
    main: Tensor
    loop: Tensor | None
    eps: Tensor | None

    @property
    def count(self) -> int:
        return int(self.main.shape[1])


def pattern_arcs(model: SoPaClassifier, vectors: Tensor) -> list[PatternArcs]:
    """Every pattern group's arc weights over word vectors (1, N, E), from the layer's own ``transitions`` and
    epsilon constants (so they follow its semiring, encoder, mode and scales), in bank order.

    Caution:
        ``model`` is a SoPa classifier already checked (``reader.check_model``); run it under ``inference`` (or
        ``torch.no_grad``) unless gradients of the weights are wanted.
    """
    found = []
    first = 0
    for group in model.patterns.groups:
        assert isinstance(group, PatternGroup)
        main, loop = group.transitions(vectors)
        eps = group.epsilon_constants()
        loop = None if loop is None else loop[0]
        found.append(PatternArcs(first, group.length, main[0], loop, None if eps is None else eps.T))
        first += group.count
    return found


def candidate_vectors(model: SoPaClassifier, vocab: Vocabulary, words: Sequence[str]) -> Tensor:
    """The vectors (1, N, E) the model reads for candidate ``words`` (vocabulary tokens, START_TOKEN, END_TOKEN).

    Raises:
        InterpretError: a word outside the vocabulary.
    """
    lexicon = _Lexicon(vocab)
    return lexicon.vectors(model, lexicon.ids(words, "candidate words"))
