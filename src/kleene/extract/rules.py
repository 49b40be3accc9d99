"""The rules read-back: trained rule layers (``kleene.nn.rules``) as hard automata and regular expressions again.

``hard_automata`` reads each automaton of an ``AutomatonLayer`` back with the words its trained arcs accept;
``read_back`` does so for every rule of a ``RegexClassifier`` and prints each as a regular expression (``to_regex``;
an unchanged rule as written), with the words lost and gained and, given sentences, its fidelity. One threshold,
``READ_BACK_THRESHOLD``, serves both and ``kleene report`` (docs/rules.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from kleene.automata.labels import ANY, AnySymbol, Label, NoneOf, OneOf, Sym
from kleene.automata.ops import trim
from kleene.automata.regexp import to_regex
from kleene.automata.wfsa import WFSA
from kleene.data.checks import check_count
from kleene.data.vocab import Vocabulary
from kleene.errors import RuleError
from kleene.nn.modes import inference
from kleene.nn.rules import AutomatonLayer, RegexClassifier, label_mask, rule_matches

__all__ = ["READ_BACK_THRESHOLD", "HardArc", "RuleReadback", "hard_automata", "read_back"]

Tensor = torch.Tensor

#: The one read-back threshold (``read_back``, ``hard_automata``, ``kleene report``): a trained arc keeps a word whose
#: weight is at least this fraction of the arc's original weight (as a probability).
READ_BACK_THRESHOLD = 0.5


@dataclass(frozen=True)
class HardArc:
    """What training changed on one consuming arc (by its index in the automaton): the words lost and gained."""

    arc: int
    lost: list[str]
    gained: list[str]


@dataclass
class RuleReadback:
    """One trained rule read back: the hard automaton, its regex, the words its arcs lost and gained (any arc),
    and its fidelity."""

    label: str
    original: str
    regex: str
    automaton: WFSA
    lost: list[str] = field(default_factory=list)
    gained: list[str] = field(default_factory=list)
    fidelity: float | None = None


def hard_automata(
    layer: object, embedding: Tensor, threshold: float = READ_BACK_THRESHOLD
) -> list[tuple[WFSA, list[HardArc]]]:
    """Each automaton with the words its trained arcs accept, and per consuming arc the words lost and gained.

    An arc accepts the vocabulary words whose trained weight (``arc_scores``) is at least its original weight
    ⊗ ``threshold`` (as a probability: ``semiring.from_probability``). A label that neither lost nor gained a
    word is kept as written; a predicate (``.``, ``[^...]``) becomes ``[^...]`` of what it excludes now; a set
    or a symbol becomes the set of its words; an arc left without words is dropped. Weights stay the automaton's.
    Words are gained only with a ``leak`` (otherwise the label is an exact mask); ``<pad>`` and ``<unk>`` are
    never counted. With ``random_init`` every label reads as ``.``.

    Raises:
        RuleError: ``layer`` is not an ``AutomatonLayer``, ``threshold`` outside (0, 1], or an embedding table of
            another shape than (V, E).
    """
    if not isinstance(layer, AutomatonLayer):
        raise RuleError(f"hard automata are read from an AutomatonLayer, got {type(layer).__name__}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise RuleError(f"threshold must be a probability in (0, 1], got {threshold!r}")
    if tuple(embedding.shape) != (len(layer.tokens), layer.embedding_dim):
        expected = (len(layer.tokens), layer.embedding_dim)
        raise RuleError(f"embedding has shape {tuple(embedding.shape)}, expected {expected}")
    semiring, storage = layer.algebra, layer.storage
    factor = torch.tensor(semiring.stored_probability(float(threshold)))
    every = torch.arange(len(layer.tokens))
    with torch.no_grad():
        values = layer.arc_scores(every[None], embedding[None].to(layer.arc_weight.dtype))[0].T  # (A, V)
    words = torch.arange(len(layer.tokens)) >= 2
    results: list[tuple[WFSA, list[HardArc]]] = []
    for d, a in enumerate(layer.automata):
        hard = WFSA(semiring, a.alphabet, name=a.name)
        for name in a.states:
            hard.add_state(name)
        for q, w in a.initial.items():
            hard.set_initial(q, w)
        for q, w in a.final.items():
            hard.set_final(q, w)
        consuming = {r.index: n for n, r in enumerate(layer.arc_refs) if r.automaton == d}
        changes: list[HardArc] = []
        for i, arc in enumerate(a.arcs):
            if i not in consuming:
                hard.add_arc(arc.src, arc.dst, arc.label, arc.weight)
                continue
            n = consuming[i]
            label: Label | None = ANY if layer.random_init else arc.label
            assert label is not None
            weight = arc.weight if arc.weight is not None else semiring.one
            original = torch.tensor(float(semiring.to_storage(weight)))
            accepted = (values[n] >= storage.times(original, factor)) & words
            before = label_mask(label, layer.tokens) & words
            lost = sorted(layer.tokens[v] for v in torch.nonzero(before & ~accepted).flatten().tolist())
            gained = sorted(layer.tokens[v] for v in torch.nonzero(accepted & ~before).flatten().tolist())
            changes.append(HardArc(i, lost, gained))
            if lost or gained:
                if isinstance(label, (AnySymbol, NoneOf)):
                    members = label.members if isinstance(label, NoneOf) else frozenset()
                    label = NoneOf((set(members) | set(lost)) - set(gained))
                else:
                    kept = [layer.tokens[v] for v in torch.nonzero(accepted).flatten().tolist()]
                    label = (Sym(kept[0]) if len(kept) == 1 else OneOf(kept)) if kept else None
            if label is not None:
                hard.add_arc(arc.src, arc.dst, label, arc.weight)
        results.append((trim(hard), changes))
    return results


def read_back(
    model: object,
    sentences: Sequence[Sequence[str]] = (),
    threshold: float = READ_BACK_THRESHOLD,
    batch_size: int = 256,
) -> list[RuleReadback]:
    """Every rule of a trained ``RegexClassifier`` as a hard automaton and a regex (``hard_automata``), with the
    words its arcs lost and gained and, given ``sentences`` (lists of words), its fidelity: the fraction of them
    on which the hard rule matches exactly when the soft rule's score is at least ``threshold`` (as a
    probability). A rule whose arcs neither lost nor gained a word reads back as written (its own word order);
    a changed one as ``to_regex`` prints its hard automaton (sets sorted).

    Raises:
        RuleError: ``model`` is not a ``RegexClassifier``, a threshold outside (0, 1] or a batch size that is not an
            integer >= 1.
    """
    if not isinstance(model, RegexClassifier):
        raise RuleError(f"rules are read back from a RegexClassifier, got {type(model).__name__}")
    check_count(batch_size, "batch_size", minimum=1, error=RuleError)
    table = model.embedding.weight.detach()
    in_layers = [pair for layer in model.layers for pair in hard_automata(layer, table, threshold)]
    hard = [in_layers[int(column)] for column in model.rule_order]
    out = []
    for (label, text), (automaton, arcs) in zip(model.ruleset.flat(), hard, strict=True):
        lost = sorted({w for arc in arcs for w in arc.lost})
        gained = sorted({w for arc in arcs for w in arc.gained})
        unchanged = not lost and not gained and not model.layers[0].random_init
        shown = text if unchanged else to_regex(automaton) if automaton.num_states else "[]"
        out.append(RuleReadback(label, text, shown, automaton, lost, gained))
    if sentences:
        agree = _fidelity(model, sentences, [r.automaton for r in out], threshold, batch_size)
        for r, value in zip(out, agree, strict=True):
            r.fidelity = value
    return out


def _fidelity(
    model: RegexClassifier, sentences: Sequence[Sequence[str]], hard: list[WFSA], threshold: float, batch_size: int
) -> list[float]:
    """Per rule, the fraction of ``sentences`` on which its hard automaton matches exactly when the soft rule's score
    reaches ``threshold``."""
    vocabulary = Vocabulary(model.layers[0].tokens)
    semiring = model.layers[0].algebra
    whole = model.ruleset.whole_sentence()
    bar = semiring.stored_probability(float(threshold))
    agree = torch.zeros(len(hard))
    with inference(model):
        for start in range(0, len(sentences), batch_size):
            chunk = sentences[start : start + batch_size]
            lengths = torch.tensor([len(s) for s in chunk])
            encoded = [vocabulary.encode(sentence) for sentence in chunk]
            ids = torch.zeros(len(chunk), int(lengths.max()) if len(chunk) else 0, dtype=torch.long)
            for b, sentence_ids in enumerate(encoded):
                ids[b, : len(sentence_ids)] = torch.tensor(sentence_ids, dtype=torch.long)
            soft = model.rule_scores(ids, lengths) >= bar
            seen = [vocabulary.decode(sentence_ids) for sentence_ids in encoded]  # unknown words as <unk>
            for r, automaton in enumerate(hard):
                hits = torch.tensor([rule_matches(automaton, s, whole[r]) for s in seen])
                agree[r] += (hits == soft[:, r]).sum()
    return (agree / max(len(sentences), 1)).tolist()
