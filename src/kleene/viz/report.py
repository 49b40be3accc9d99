"""The learned-pattern report: one self-contained HTML page about a trained SoPa checkpoint.

The page (inline CSS and SVG; no script, no external URL) holds, in order:

1. the model's facts: model, semiring, mode, encoder, pattern bank, parameters, data, training settings, metrics;
2. the most important patterns (largest mean leave-one-out effect on the dev documents), each drawn as its chain
   automaton with the best words of every arc, with its top phrases in the corpus as SoPa's Table 2 and its hard
   version;
3. explained dev documents as SoPa's Table 3: prediction, gold label and the best spans of the patterns that push
   the decision most toward and against the explained class;
4. the hard patterns and the fidelity of the hard-pattern classifier to the soft model on the dev set;
5. the training curves recorded in the checkpoint.

A checkpoint of any other model gets the sections that apply to every model (facts and curves) and a note saying
that the pattern sections need a SoPa classifier: its page is still useful, and nothing pretends to interpret a
model that has no patterns.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch

from kleene import __version__
from kleene.automata.draw import format_number
from kleene.data.batching import classification_batches
from kleene.data.datasets import CLASSIFICATION, ClassificationData, Example, is_data_path
from kleene.data.vocab import Vocabulary
from kleene.errors import ReportError
from kleene.extract.hard import HardFidelity, HardPattern, hard_fidelity, hard_patterns
from kleene.extract.reader import END_TOKEN, START_TOKEN, PhraseMatch
from kleene.extract.rules import READ_BACK_THRESHOLD, read_back
from kleene.nn.checkpoint import Checkpoint
from kleene.nn.rules import RegexClassifier
from kleene.nn.sopa import SoPaClassifier
from kleene.viz.draw import (
    FONT_STACK,
    PALETTE,
    PatternWords,
    contribution_margin,
    explanation_html,
    pattern_svg,
    pattern_words,
    phrase_table_html,
    training_curves_svg,
)
from kleene.viz.explain import explain, leave_one_out
from kleene.viz.phrases import top_phrases

__all__ = ["CLASS_NAMES", "HARD_THRESHOLDS", "ReportError", "ReportOptions", "build_report", "write_report"]

T = TypeVar("T")

#: Names of the classes of the classification data sets (see shared/data/README.md).
CLASS_NAMES: dict[str, tuple[str, ...]] = {
    "sst2": ("negative", "positive"),
    "mr": ("negative", "positive"),
    "cr": ("negative", "positive"),
    "subj": ("subjective", "objective"),
}


#: Thresholds whose hard-pattern fidelity the report compares (see ``interpret.hard_patterns``).
HARD_THRESHOLDS = (0.5, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class ReportOptions:
    """What the report shows.

    ``patterns`` patterns (the most important ones), each with its ``phrases`` best phrases in the ``corpus`` split
    (SoPa ranks training phrases) and its diagram's ``words`` best words per arc, taken among the corpus words seen at
    least ``min_count`` times; ``documents`` explained dev documents of 6 to 40 tokens, classes taken in turn;
    pattern importance is measured on at most ``importance_documents`` dev documents and hard fidelity on at most
    ``fidelity_documents`` (None: the whole dev split). Hard patterns are shown at ``hard_threshold`` and their
    fidelity compared at ``HARD_THRESHOLDS`` too: with the sigmoid encoder a word passes an arc when its weight (a
    probability) reaches the threshold; with the identity encoder, whose scores are unbounded, when it reaches the
    threshold times the arc's best weight (``hard_patterns(relative=True)``).
    """

    patterns: int = 20
    documents: int = 6
    phrases: int = 5
    words: int = 3
    corpus: str = "train"
    min_count: int = 2
    importance_documents: int = 300
    fidelity_documents: int | None = None
    hard_threshold: float = 0.7
    progress: bool = True

    def __post_init__(self) -> None:
        least = {"patterns": 0, "documents": 0, "phrases": 1, "words": 1, "min_count": 1, "importance_documents": 1}
        for name, bound in least.items():
            if getattr(self, name) < bound:
                raise ReportError(f"report option {name} must be at least {bound}, got {getattr(self, name)}")
        if self.fidelity_documents is not None and self.fidelity_documents < 1:
            raise ReportError(
                f"report option fidelity_documents must be at least 1 or None, got {self.fidelity_documents}"
            )
        if not 0 < self.hard_threshold <= 1:
            raise ReportError(f"report option hard_threshold must be in (0, 1], got {self.hard_threshold}")
        if self.corpus not in ("train", "dev", "test"):
            raise ReportError(f"report corpus must be train, dev or test, not {self.corpus!r}")


@dataclass
class _Page:
    """The sections of the page as HTML fragments, in order, with their table-of-contents titles."""

    title: str
    subtitle: str
    sections: list[tuple[str, str, str]] = field(default_factory=list)  # (anchor, heading, body)

    def add(self, anchor: str, heading: str, body: str) -> None:
        self.sections.append((anchor, heading, body))

    def render(self) -> str:
        contents = "".join(f'<li><a href="#{a}">{html.escape(h)}</a></li>' for a, h, _ in self.sections)
        body = "".join(f'<section id="{a}"><h2>{html.escape(h)}</h2>{b}</section>' for a, h, b in self.sections)
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(self.title)}</title><style>{_css()}</style></head><body><main>"
            f'<header><h1>{html.escape(self.title)}</h1><p class="subtitle">{self.subtitle}</p>'
            f"<nav><ol>{contents}</ol></nav></header>{body}"
            f"<footer>kleene {html.escape(__version__)} · <code>kleene report</code></footer></main></body></html>\n"
        )


# --------------------------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------------------------
def build_report(
    checkpoint: Checkpoint,
    *,
    data: str | None = None,
    options: ReportOptions | None = None,
    source: str | Path | None = None,
    text_column: str | None = None,
    label_column: str | None = None,
) -> str:
    """The report page of ``checkpoint`` as HTML text; ``data`` overrides the checkpoint's data set and ``source``
    is the checkpoint's path (shown in the facts). A model other than a SoPa classifier gets its facts and curves.
    The data set is read as the model was trained (``Checkpoint.read_data``: its fold, its columns unless
    ``text_column`` / ``label_column`` are given, its classes).

    Raises:
        ReportError: a SoPa checkpoint without a vocabulary, a data set that is not a classification data set, or one
            whose number of classes differs from the model's.
    """
    options = options or ReportOptions()
    metadata = checkpoint.config.get("metadata", {})
    data_name = data or metadata.get("data")
    model_name = str(checkpoint.config.get("model", type(checkpoint.model).__name__))
    page = _Page(
        title=f"kleene report · {model_name}" + (f" on {data_name}" if data_name else ""),
        subtitle=html.escape(str(source)) if source is not None else "",
    )
    page.add("model", "Model", _facts_html(checkpoint, data_name, source))
    model = checkpoint.model
    columns = {"text_column": text_column, "label_column": label_column}
    if isinstance(model, SoPaClassifier):
        _add_pattern_sections(page, checkpoint, model, data_name, options, columns)
    elif isinstance(model, RegexClassifier):
        _add_rule_sections(page, checkpoint, model, data_name, options, columns)
    else:
        page.add(
            "patterns",
            "Patterns",
            f'<p class="note">The pattern sections (diagrams, top phrases, explained documents, hard patterns) need a '
            f"SoPa classifier; this checkpoint holds {html.escape(type(model).__name__)} "
            f"(<code>{html.escape(model_name)}</code>).</p>",
        )
    curves = training_curves_svg(checkpoint.curve, checkpoint.metrics.get("best_step"))
    page.add(
        "curves",
        "Training curves",
        f'<figure class="curves">{curves}<figcaption>Loss and accuracy at every evaluation, on the training batches '
        "since the previous evaluation (train) and on the development set (dev); the dotted line marks the step whose "
        "model the checkpoint holds.</figcaption></figure>"
        if curves
        else '<p class="note">This checkpoint records no training curve.</p>',
    )
    return page.render()


def write_report(path: str | Path, checkpoint: Checkpoint, **kwargs: Any) -> Path:
    """``build_report(checkpoint, **kwargs)`` written to ``path`` (UTF-8); returns the path.

    Raises:
        ReportError: as ``build_report``; nothing is written then.
    """
    path = Path(path)
    path.write_text(build_report(checkpoint, **kwargs), encoding="utf-8")
    return path


def _add_rule_sections(
    page: _Page,
    checkpoint: Checkpoint,
    model: RegexClassifier,
    data_name: str | None,
    options: ReportOptions,
    columns: dict[str, str | None],
) -> None:
    """Every rule before and after training, side by side: the user's regex, the trained automaton read back as a
    regex (``kleene.extract.read_back`` at ``READ_BACK_THRESHOLD``), the words it lost and its fidelity."""
    sentences: list[list[str]] = []
    if data_name is not None and (data_name in CLASSIFICATION or is_data_path(data_name)):
        sentences = [list(e.tokens) for e in _nonempty(_classification(checkpoint, data_name, columns).dev)]
    rules = read_back(model, sentences, threshold=READ_BACK_THRESHOLD)
    rows = []
    for r in rules:
        lost, gained = _word_list(r.lost), _word_list(r.gained)
        fidelity = "" if r.fidelity is None else format_number(r.fidelity, 3)
        rows.append(
            f"<tr><td>{html.escape(r.label)}</td><td><code>{html.escape(r.original)}</code></td>"
            f"<td><code>{html.escape(r.regex)}</code></td><td>{html.escape(gained) or '—'}</td>"
            f"<td>{html.escape(lost) or '—'}</td><td>{fidelity}</td></tr>"
        )
    leak = "" if model.leak is not None else " (its labels are exact masks, so no word is gained)"
    intro = (
        f'<p class="note">Each rule as written and as read back after training: an arc accepts the words whose '
        f"trained weight is at least {READ_BACK_THRESHOLD} times its original weight{leak} (the read-back threshold, "
        "kleene.extract.READ_BACK_THRESHOLD, as kleene.extract.read_back()); a rule that nothing changed reads back "
        "as written. Fidelity: the fraction of the dev sentences on which the hard rule matches exactly when the "
        "trained rule's score reaches the same threshold.</p>"
    )
    table = (
        "<table><thead><tr><th>label</th><th>rule before training</th><th>rule after training</th>"
        "<th>words gained</th><th>words lost</th><th>fidelity</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    page.add("rules", f"Rules before and after training ({len(rules)})", intro + table)


def _word_list(words: Sequence[str], shown: int = 12) -> str:
    return ", ".join(words[:shown]) + (f" … (+{len(words) - shown})" if len(words) > shown else "")


def _classification(checkpoint: Checkpoint, data_name: str, columns: dict[str, str | None]) -> ClassificationData:
    """``data_name`` read as ``checkpoint``'s classifier was trained (``Checkpoint.read_data``)."""
    dataset = checkpoint.read_data(data_name, text_column=columns["text_column"], label_column=columns["label_column"])
    if not isinstance(dataset, ClassificationData):
        raise ReportError(f"{data_name!r} is not a classification data set")
    return dataset


def _add_pattern_sections(
    page: _Page,
    checkpoint: Checkpoint,
    model: SoPaClassifier,
    data_name: str | None,
    options: ReportOptions,
    columns: dict[str, str | None],
) -> None:
    vocab = checkpoint.vocab
    if vocab is None:
        raise ReportError("the checkpoint has no vocabulary; a SoPa report needs the words of its embedding rows")
    if data_name is None:
        raise ReportError("the checkpoint does not record its data set; pass one (--data NAME)")
    if data_name not in CLASSIFICATION and not is_data_path(data_name):
        raise ReportError(
            f"a SoPa report needs a classification data set ({', '.join(CLASSIFICATION)}, or the path of labelled "
            f"text), not {data_name!r}"
        )
    dataset = _classification(checkpoint, data_name, columns)
    classes = model.mlp.layers[-1].out_features  # type: ignore[union-attr]
    if dataset.num_classes != classes:
        raise ReportError(f"data set {data_name!r} has {dataset.num_classes} classes but the model predicts {classes}")
    names = CLASS_NAMES.get(data_name, dataset.labels or tuple(f"class {c}" for c in range(classes)))
    say = _Stages(options.progress)
    dev = _nonempty(dataset.dev)

    sample = dev[: options.importance_documents]
    say(f"ranking the {model.patterns.num_patterns} patterns by their effect on {len(sample)} dev documents")
    importance = _importance(model, vocab, sample)
    shown = sorted(importance, key=lambda p: -importance[p])[: options.patterns]

    corpus = dataset.split(options.corpus)
    counts = Counter(token for example in corpus for token in example.tokens)
    words = [w for w, n in counts.items() if n >= options.min_count and w in vocab]
    say(f"best words of every arc among {len(words)} {options.corpus} words")
    arcs = pattern_words(model, vocab, shown, k=options.words, words=words)
    say(f"top phrases of {len(shown)} patterns in {len(corpus)} {options.corpus} documents")
    documents = [list(example.tokens) for example in corpus]
    phrases = top_phrases(model, vocab, documents, k=options.phrases, patterns=shown, progress=options.progress)

    thresholds = sorted({*HARD_THRESHOLDS, options.hard_threshold})
    checked = dev[: options.fidelity_documents]
    listed = ", ".join(map(str, thresholds))
    say(f"hard patterns at thresholds {listed}; their fidelity on {len(checked)} dev documents")
    candidates = words + ([START_TOKEN, END_TOKEN] if model.boundary else [])
    relative = model.patterns.encoder == "identity"
    hard = {t: hard_patterns(model, vocab, t, words=candidates, relative=relative) for t in thresholds}
    dev_tokens, dev_labels = [e.tokens for e in checked], [e.label for e in checked]
    fidelity = {t: hard_fidelity(model, vocab, hard[t], dev_tokens, dev_labels) for t in thresholds}
    hard_shown = {h.pattern: h for h in hard[options.hard_threshold] if h.pattern in shown}

    cards = [
        _pattern_card(arcs[p], importance[p], phrases.get(p, []), hard_shown[p], model.patterns.semiring, options)
        for p in say.track(shown, "drawing patterns")
    ]
    heading = f"Patterns ({len(shown)} of {model.patterns.num_patterns})"
    page.add("patterns", heading, _patterns_intro(options) + "".join(cards))

    explained = [
        explanation_html(
            explain(model, vocab, list(example.tokens), label=example.label),
            class_names=names,
            title=f"dev document {index}",
        )
        for index, example in say.track(_pick_documents(dataset.dev, options.documents), "explaining documents")
    ]
    page.add("documents", "Explained documents", _documents_intro(names) + "".join(explained))
    page.add("hard", "Hard patterns", _hard_html(hard, fidelity, shown, options.hard_threshold, relative))


def _pattern_card(
    arcs: PatternWords,
    importance: float,
    phrases: Sequence[PhraseMatch],
    hard: HardPattern,
    semiring: str,
    options: ReportOptions,
) -> str:
    """One pattern: its diagram, its top phrases (SoPa Table 2) and its hard version."""
    pattern = arcs.pattern
    return (
        f'<article class="pattern" id="pattern-{pattern}"><h3>Pattern {pattern} '
        f'<span class="meta">length {arcs.length} · importance {format_number(importance, 3)}</span></h3>'
        f'<div class="diagram">{pattern_svg(arcs)}</div>'
        f"{phrase_table_html(phrases, arcs.length, semiring)}"
        f'<p class="hard">hard ({options.hard_threshold:g}): <code>{html.escape(hard.describe())}</code></p></article>'
    )


# --------------------------------------------------------------------------------------------------------------------
# Pieces
# --------------------------------------------------------------------------------------------------------------------
class _Stages:
    """Progress on stderr: a line per stage and a bar over long loops (rich), or nothing."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.console: Any = None
        if enabled:
            from rich.console import Console

            self.console = Console(stderr=True)

    def __call__(self, message: str) -> None:
        if self.console is not None:
            self.console.print(f"[bold]report:[/bold] {message}")

    def track(self, items: Sequence[T], description: str) -> Iterator[T]:
        if self.console is None:
            yield from items
            return
        from rich.progress import track

        yield from track(items, description=description, console=self.console, transient=True)


def _nonempty(examples: Sequence[Example]) -> list[Example]:
    """The examples with at least one token (empty documents explain nothing)."""
    return [example for example in examples if example.tokens]


def _importance(
    model: SoPaClassifier, vocab: Vocabulary, documents: Sequence[Example], batch_size: int = 32
) -> dict[int, float]:
    """Each pattern's mean absolute leave-one-out effect on the decision: ``contribution_margin`` toward the predicted
    class of the logits with all pattern scores minus those with the pattern's score at ``removed_value`` (the
    batched form of ``explain``'s contributions)."""
    total = torch.zeros(model.patterns.num_patterns, dtype=torch.float64)
    model.eval()
    with torch.no_grad():
        for batch in classification_batches(documents, vocab, batch_size):
            logits, delta = leave_one_out(model, batch.tokens, batch.lengths)  # (B, C), (B, P, C)
            margin = contribution_margin(delta, logits.argmax(-1)[:, None])
            total += margin.abs().sum(0)
    return {pattern: float(value) / max(len(documents), 1) for pattern, value in enumerate(total)}


def _pick_documents(examples: Sequence[Example], count: int) -> list[tuple[int, Example]]:
    """``count`` dev documents of 6 to 40 tokens, in file order, taking the classes in turn."""
    by_class: dict[int, list[tuple[int, Example]]] = {}
    for index, example in enumerate(examples):
        if 6 <= len(example.tokens) <= 40:
            by_class.setdefault(example.label, []).append((index, example))
    queues = [iter(by_class[label]) for label in sorted(by_class)]
    chosen: list[tuple[int, Example]] = []
    while len(chosen) < count and queues:
        for queue in list(queues):
            item = next(queue, None)
            if item is None:
                queues.remove(queue)
            elif len(chosen) < count:
                chosen.append(item)
    return chosen


def _facts_html(checkpoint: Checkpoint, data_name: str | None, source: str | Path | None) -> str:
    config, model = checkpoint.config, checkpoint.model
    metadata, metrics = config.get("metadata", {}), checkpoint.metrics
    rows: list[tuple[str, str]] = [("model", f"{config.get('model')} ({type(model).__name__})")]
    if isinstance(model, SoPaClassifier):
        bank = model.patterns
        rows += [
            ("semiring", bank.semiring),
            ("mode", bank.mode),
            ("encoder", bank.encoder),
            (
                "pattern bank",
                ", ".join(f"{count} × length {length}" for length, count in bank.spec.items())
                + f" ({bank.num_patterns} patterns)",
            ),
            (
                "arcs",
                "main path"
                + (", self-loops" if bank.self_loops else "")
                + (f" (shared with the main path, {bank.shared_self_loops} scale)" if bank.shared_self_loops else "")
                + (f", epsilons (at most {bank.epsilon_cap} in a row)" if bank.epsilons else ""),
            ),
            (
                "MLP",
                " → ".join(str(layer.in_features) for layer in model.mlp.layers)  # type: ignore[union-attr]
                + f" → {model.mlp.layers[-1].out_features}",
            ),  # type: ignore[union-attr]
        ]
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    rows.append(("parameters", f"{sum(p.numel() for p in model.parameters()):,} ({trainable:,} trainable)"))
    if checkpoint.vocab is not None:
        rows.append(("vocabulary", f"{len(checkpoint.vocab):,} words"))
    if data_name:
        extra = [f"fold {metadata['fold']}" for _ in [0] if metadata.get("fold")]
        if metadata.get("train_size"):
            extra.append(f"{metadata['train_size']} training examples")
        if metadata.get("pretrained"):
            extra.append(f"{metadata['pretrained']} embeddings")
        rows.append(("data", data_name + (f" ({', '.join(extra)})" if extra else "")))
    training = metadata.get("training", {})
    if training:
        rows.append(
            (
                "training",
                ", ".join(
                    f"{key} {value}"
                    for key, value in training.items()
                    if key in ("epochs", "max_steps", "batch_size", "lr", "seed") and value is not None
                ),
            )
        )
    for key in ("dev_accuracy", "test_accuracy", "dev_loss", "test_loss", "steps", "best_step", "train_seconds"):
        if key in metrics:
            value = metrics[key]
            rows.append((key.replace("_", " "), format_number(value, 4) if isinstance(value, float) else str(value)))
    if source is not None:
        rows.append(("checkpoint", f"<code>{html.escape(str(source))}</code>"))
    body = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{v if k == 'checkpoint' else html.escape(v)}</td></tr>" for k, v in rows
    )
    return f'<table class="facts">{body}</table>'


def _patterns_intro(options: ReportOptions) -> str:
    return (
        '<p class="intro">Each pattern is a chain automaton read left to right, from START q₀ to END. '
        f"Arcs list their {options.words} best words with their weights: "
        f'<span class="key main">main path</span>, <span class="key sl">self-loop</span> (drawn above its state), '
        f'<span class="key eps">ε</span> (dashed, no word consumed). Below each diagram, the pattern\'s '
        f"{options.phrases} best-scoring phrases in the {options.corpus} set (as SoPa's Table 2): one column per "
        "main-path arc, self-loop words marked <sub>SL</sub>, states skipped by an ε marked ε; hover a word for its "
        "weight. Patterns are ordered by importance, the mean absolute leave-one-out effect on the decision "
        "over dev documents.</p>"
    )


def _documents_intro(names: Sequence[str]) -> str:
    toward = names[1] if len(names) == 2 else "the predicted class"
    return (
        f'<p class="intro">Dev documents with the best-matching spans of the patterns that push the decision most '
        f'toward {html.escape(toward)} (<span class="key pos">bold green</span>) and against it '
        f"(<span class=\"key neg\">italic orange</span>), as SoPa's Table 3. A pattern's effect is its leave-one-out "
        "change of the log-odds (the model with the pattern's score replaced by the semiring zero); hover a "
        "highlighted word for the pattern and its effect.</p>"
    )


def _hard_html(
    hard: dict[float, list[HardPattern]],
    fidelity: dict[float, HardFidelity],
    shown: Sequence[int],
    threshold: float,
    relative: bool,
) -> str:
    """The fidelity of the hard classifier at every threshold, then the shown patterns made hard at ``threshold``."""
    first = next(iter(fidelity.values()))
    rows = []
    for t, result in fidelity.items():
        arcs = [words for pattern in hard[t] for words in pattern.main]
        wildcards = sum(words is None for words in arcs) / max(len(arcs), 1)
        hard_accuracy = "–" if result.hard_accuracy is None else f"{result.hard_accuracy:.1%}"
        mark = ' class="chosen"' if t == threshold else ""
        rows.append(
            f'<tr{mark}><td class="num">{t:g}</td><td class="num">{result.agreement:.1%}</td>'
            f'<td class="num">{hard_accuracy}</td><td class="num">{result.coverage:.1%}</td>'
            f'<td class="num">{wildcards:.0%}</td></tr>'
        )
    soft = "" if first.soft_accuracy is None else f" (soft model accuracy {first.soft_accuracy:.1%})"
    table = (
        '<table class="hardlist"><thead><tr><th>threshold</th><th>agreement</th><th>hard accuracy</th>'
        f"<th>matches</th><th>wildcard arcs</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    by_pattern = {h.pattern: h for h in hard[threshold]}
    measure = " times the arc's best weight" if relative else " (a probability)"
    patterns = "".join(
        f'<tr><td class="num"><a href="#pattern-{p}">{p}</a></td><td class="num">{by_pattern[p].length}</td>'
        f"<td><code>{html.escape(by_pattern[p].describe())}</code></td></tr>"
        for p in shown
    )
    return (
        '<p class="intro">Every soft pattern made hard: an arc keeps the words whose weight is at least the threshold'
        f"{measure}, and becomes a wildcard <code>*</code> "
        "where more than half of the words pass (<code>∅</code>: none passes); "
        "<code>?</code> marks an arc an ε may skip, <code>(…)*</code> a self-loop, words best first. The hard "
        "classifier is the same MLP fed by hard scores (each pattern may read only its hard words); agreement is the "
        f"share of the {first.count:,} dev documents it decides as the soft model does{soft}, matches the share of "
        f"(document, pattern) pairs where the hard pattern matches at all.</p>{table}"
        f"<h3>The patterns above at threshold {threshold:g}</h3>"
        f'<table class="hardlist"><thead><tr><th>pattern</th><th>length</th><th>hard pattern</th></tr></thead>'
        f"<tbody>{patterns}</tbody></table>"
    )


def _css() -> str:
    p = PALETTE
    return f"""
:root {{ --ink:{p["ink"]}; --muted:{p["muted"]}; --grid:{p["grid"]}; --main:{p["main"]}; --sl:{p["self-loop"]};
  --eps:{p["epsilon"]}; --pos:{p["positive"]}; --neg:{p["negative"]}; }}
* {{ box-sizing: border-box; }}
body {{ margin: 0; background: #f5f7fa; color: var(--ink); font: 15px/1.5 {FONT_STACK}; }}
main {{ max-width: 1160px; margin: 0 auto; padding: 28px 32px 48px; }}
header h1 {{ font-size: 26px; margin: 0 0 2px; letter-spacing: -0.01em; }}
.subtitle {{ color: var(--muted); margin: 0 0 12px; font-family: ui-monospace, monospace; font-size: 13px; }}
nav ol {{ display: flex; flex-wrap: wrap; gap: 6px 18px; list-style: none; padding: 0; margin: 0 0 8px; }}
nav a, td a {{ color: var(--main); text-decoration: none; }}
section {{ background: #fff; border: 1px solid var(--grid); border-radius: 10px; padding: 18px 24px;
  margin: 18px 0; }}
h2 {{ font-size: 20px; margin: 0 0 10px; border-bottom: 2px solid var(--grid); padding-bottom: 6px; }}
h3 {{ font-size: 16px; margin: 0 0 6px; }}
.meta {{ color: var(--muted); font-weight: normal; font-size: 13px; margin-left: 8px; }}
.intro, .note {{ color: #3e4c59; margin: 0 0 14px; }}
.note {{ background: #fff8e6; border-left: 4px solid var(--neg); padding: 8px 12px; }}
table {{ border-collapse: collapse; margin: 6px 0 10px; }}
th, td {{ padding: 3px 10px; text-align: left; vertical-align: top; }}
table.facts th {{ color: var(--muted); font-weight: 600; white-space: nowrap; }}
table.phrases, table.contributions, table.hardlist {{ font-size: 14px; }}
table.phrases thead th, table.contributions thead th, table.hardlist thead th {{ color: var(--muted);
  font-weight: 600; border-bottom: 1px solid var(--grid); }}
table.phrases tbody tr:nth-child(odd), table.hardlist tbody tr:nth-child(odd) {{ background: #f8fafc; }}
tr.chosen td {{ font-weight: 700; color: var(--ink); }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; color: #52606d; }}
.pattern {{ border-top: 1px solid var(--grid); padding: 14px 0 6px; }}
.pattern:first-of-type {{ border-top: none; }}
.diagram {{ overflow-x: auto; }}
.diagram svg {{ max-width: 100%; height: auto; }}
.hard {{ margin: 2px 0 4px; color: var(--muted); font-size: 13px; }}
code {{ font-family: ui-monospace, 'DejaVu Sans Mono', monospace; font-size: 13px; color: var(--ink); }}
.step.main {{ color: var(--main); }}
.step.sl {{ color: var(--sl); font-style: italic; }}
.step.sl sub {{ font-size: 10px; font-style: normal; }}
.step.eps {{ color: var(--eps); }}
.boundary {{ color: var(--muted); font-size: 12px; }}
.key {{ padding: 0 4px; border-radius: 3px; }}
.key.main {{ color: var(--main); }} .key.sl {{ color: var(--sl); }} .key.eps {{ color: var(--eps); }}
.explanation {{ border-top: 1px solid var(--grid); padding: 12px 0 4px; }}
.explanation:first-of-type {{ border-top: none; }}
.verdict {{ margin: 0 0 4px; color: #3e4c59; font-size: 14px; }}
.verdict .correct {{ color: var(--pos); }} .verdict .wrong {{ color: var(--neg); font-weight: 700; }}
.document {{ font-size: 17px; line-height: 1.9; margin: 4px 0 6px; }}
.tok {{ border-radius: 3px; padding: 1px 1px; }}
.tok.pos, .key.pos {{ color: var(--pos); font-weight: 700; }}
.tok.neg, .key.neg {{ color: var(--neg); font-style: italic; }}
table.contributions tr.pos td:nth-child(2) {{ color: var(--pos); }}
table.contributions tr.neg td:nth-child(2) {{ color: var(--neg); }}
.curves svg {{ max-width: 100%; height: auto; }}
figure {{ margin: 0; }} figcaption {{ color: var(--muted); font-size: 13px; }}
footer {{ color: var(--muted); font-size: 12px; text-align: center; margin-top: 24px; }}
"""
