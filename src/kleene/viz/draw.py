"""Pictures of a trained SoPa: pattern diagrams, explained documents, phrase tables and training curves.

Every picture uses one palette (``PALETTE``) and one font stack, so that a report reads as one document:

* a learned pattern as its chain automaton (graphviz, left to right, in the style of ``kleene.automata.draw``): each
  main-path arc and self-loop lists its best words with their weights, each epsilon arc its weight;
* a pattern's top phrases as SoPa's Table 2 (one column per main-path arc, self-loop words marked ``SL``, skipped
  states marked ``ε``);
* a document's explanation as SoPa's Table 3 (spans coloured by the sign and size of the contribution of the
  pattern that matched them, bold green for, italic orange against, with tooltips);
* training curves (matplotlib, SVG): loss and accuracy per step, train against dev.

Weights are shown as the MLP reads them (``Semiring.from_storage``): probabilities in the max-times and real semirings.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import graphviz
import torch

from kleene.automata.draw import format_number, format_state_name
from kleene.automata.semiring import Semiring, get_semiring
from kleene.data.vocab import PAD, UNK, Vocabulary
from kleene.errors import InterpretError, ReportError
from kleene.extract.hard import candidate_vectors, pattern_arcs
from kleene.extract.readable import WORDS_PER_ARC, readable_automaton, readable_dot
from kleene.extract.reader import END_TOKEN, START_TOKEN, PhraseMatch
from kleene.nn.sopa import SoPaClassifier
from kleene.viz.explain import Explanation

__all__ = [
    "FONT_STACK",
    "PALETTE",
    "WORDS_PER_ARC",
    "PatternWords",
    "contribution_margin",
    "explanation_html",
    "pattern_dot",
    "pattern_svg",
    "pattern_words",
    "phrase_table_html",
    "readable_automaton",
    "readable_dot",
    "svg_fragment",
    "training_curves_svg",
]

#: The colours of every picture: ink, the three kinds of pattern arc, the two directions of a contribution, and
#: the train / dev series of the curves.
PALETTE: dict[str, str] = {
    "ink": "#1f2933",
    "muted": "#7b8794",
    "grid": "#e4e7eb",
    "main": "#2b6cb0",
    "self-loop": "#805ad5",
    "epsilon": "#8a94a3",
    "positive": "#1e7b3c",
    "negative": "#d4620f",
    "train": "#2b6cb0",
    "dev": "#d4620f",
}
#: Fonts of the HTML pages and graphviz diagrams (graphviz takes the first available family).
FONT_STACK = "Helvetica, Arial, 'Liberation Sans', sans-serif"
_GRAPHVIZ_FONT = "Helvetica"


# --------------------------------------------------------------------------------------------------------------------
# The words of a pattern's arcs
# --------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PatternWords:
    """The ``k`` best words of each arc of one pattern, with their weights as the MLP reads them.

    ``main[i]`` lists the words of the main-path arc i -> i+1, ``self_loops[i]`` those of the self-loop on state i
    (``None``: the model has no self-loops), ``epsilons[i]`` the weight of the epsilon arc i -> i+1 (``None``: no
    epsilons). Words are ``(word, weight)`` pairs, best first.
    """

    pattern: int
    length: int
    main: tuple[tuple[tuple[str, float], ...], ...]
    self_loops: tuple[tuple[tuple[str, float], ...], ...] | None
    epsilons: tuple[float, ...] | None


def pattern_words(
    model: SoPaClassifier,
    vocab: Vocabulary,
    patterns: Sequence[int],
    k: int = 3,
    words: Sequence[str] | None = None,
) -> dict[int, PatternWords]:
    """For each pattern in ``patterns``, the ``k`` best words of each arc among ``words`` (default: the vocabulary
    without the padding and unknown tokens) plus the boundary tokens when the model pads documents.

    Weights come from ``kleene.extract.hard.pattern_arcs`` (the layer's own transitions) on the word embeddings
    (and on the START/END vectors), so they follow the model's semiring, encoder, mode and scales.

    Raises:
        InterpretError: a model that is not a SoPa classifier, a pattern index outside the bank, ``k`` < 1, or a word
            of ``words`` that is not in ``vocab``.
    """
    if not isinstance(model, SoPaClassifier):
        raise InterpretError(f"pattern diagrams need a SoPaClassifier, got {type(model).__name__}")
    if k < 1:
        raise InterpretError(f"k must be at least 1, got {k}")
    candidates = [w for w in vocab.tokens if w not in (PAD, UNK)] if words is None else list(words)
    missing = [w for w in candidates if w not in vocab]
    if missing:
        raise InterpretError(f"words not in the vocabulary: {missing[:5]!r}")
    if not candidates:
        raise InterpretError("no candidate words")
    bank = model.patterns.num_patterns
    for pattern in patterns:
        if not 0 <= pattern < bank:
            raise InterpretError(f"pattern {pattern} is not in the bank (patterns 0..{bank - 1})")
    labels = list(candidates) + ([START_TOKEN, END_TOKEN] if model.boundary > 0 else [])
    algebra = model.patterns.algebra
    result: dict[int, PatternWords] = {}
    with torch.no_grad():
        for arcs in pattern_arcs(model, candidate_vectors(model, vocab, labels)):
            mine = [p for p in patterns if arcs.first <= p < arcs.first + arcs.count]
            if not mine:
                continue
            main = algebra.from_storage(arcs.main)
            loop = None if arcs.loop is None else algebra.from_storage(arcs.loop)
            eps = None if arcs.eps is None else algebra.from_storage(arcs.eps)
            for pattern in mine:
                local = pattern - arcs.first
                result[pattern] = PatternWords(
                    pattern=pattern,
                    length=arcs.length,
                    main=_best_words(main[:, local], labels, k),
                    self_loops=None if loop is None else _best_words(loop[:, local], labels, k),
                    epsilons=None if eps is None else tuple(float(v) for v in eps[local]),
                )
    return {p: result[p] for p in patterns}


def _best_words(weights: torch.Tensor, labels: Sequence[str], k: int) -> tuple[tuple[tuple[str, float], ...], ...]:
    """Per arc (column of ``weights``, shape (V, arcs)), the ``k`` largest weights with their words."""
    top = torch.topk(weights, min(k, weights.shape[0]), dim=0)
    return tuple(
        tuple((labels[int(i)], float(v)) for v, i in zip(top.values[:, arc], top.indices[:, arc]))
        for arc in range(weights.shape[1])
    )


# --------------------------------------------------------------------------------------------------------------------
# A pattern as its chain automaton
# --------------------------------------------------------------------------------------------------------------------
def _word_table(words: Sequence[tuple[str, float]], colour: str, precision: int) -> str:
    """A graphviz HTML label: one row per word, the word in ``colour`` and its weight in muted small type."""
    rows = "".join(
        f'<TR><TD ALIGN="LEFT"><FONT COLOR="{colour}">{html.escape(word)}</FONT></TD>'
        f'<TD ALIGN="RIGHT"><FONT COLOR="{PALETTE["muted"]}" POINT-SIZE="10">{format_number(weight, precision)}'
        "</FONT></TD></TR>"
        for word, weight in words
    )
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">{rows}</TABLE>>'


def pattern_dot(words: PatternWords, title: str | None = None, precision: int = 2) -> graphviz.Digraph:
    """The chain automaton of one pattern: states ``q₀ … q_{L-1}`` (START bold, END a double circle), main-path arcs
    (solid, blue) and self-loops (above their state, purple) labelled with their best words and weights, epsilon
    arcs (dashed, grey) labelled ``ε`` and their weight. Tooltips repeat each arc's words."""
    ink, font = PALETTE["ink"], {"fontname": _GRAPHVIZ_FONT}
    dot = graphviz.Digraph(name=f"pattern{words.pattern}")
    dot.attr(rankdir="LR", nodesep="0.3", ranksep="0.35", pad="0.1", bgcolor="transparent", **font)
    if title:
        dot.attr(label=graphviz.escape(title), labelloc="t", labeljust="l", fontsize="13", fontcolor=ink)
    dot.attr("node", shape="circle", fontsize="15", margin="0.03", color=ink, fontcolor=ink, **font)
    dot.attr("edge", fontsize="12", arrowsize="0.6", color=ink, **font)
    last = words.length - 1
    for state in range(words.length):
        attrs = {"shape": "doublecircle"} if state == last else {}
        if state == 0:
            attrs["penwidth"] = "2.2"
        role = "START" if state == 0 else "END" if state == last else f"state {state}"
        dot.node(f"s{state}", format_state_name(f"q{state}"), tooltip=f"{role} of pattern {words.pattern}", **attrs)
    for arc, arc_words in enumerate(words.main):
        colour = PALETTE["main"]
        dot.edge(
            f"s{arc}",
            f"s{arc + 1}",
            label=_word_table(arc_words, colour, precision),
            color=colour,
            penwidth="1.6",
            tooltip=_arc_tooltip(f"main path q{arc} → q{arc + 1}", arc_words, precision),
        )
    if words.epsilons is not None:
        colour = PALETTE["epsilon"]
        for arc, weight in enumerate(words.epsilons):
            dot.edge(
                f"s{arc}",
                f"s{arc + 1}",
                label=f"ε / {format_number(weight, precision)}",
                style="dashed",
                color=colour,
                fontcolor=colour,
                tooltip=f"epsilon q{arc} → q{arc + 1}: {format_number(weight, precision)}",
            )
    if words.self_loops is not None:
        colour = PALETTE["self-loop"]
        for state, loop_words in enumerate(words.self_loops):
            dot.edge(
                f"s{state}",
                f"s{state}",
                label=_word_table(loop_words, colour, precision),
                color=colour,
                tailport="n",
                headport="n",
                tooltip=_arc_tooltip(f"self-loop on q{state}", loop_words, precision),
            )
    return dot


def _arc_tooltip(arc: str, words: Sequence[tuple[str, float]], precision: int) -> str:
    return f"{arc}: " + ", ".join(f"{word} {format_number(weight, precision)}" for word, weight in words)


def svg_fragment(svg: str) -> str:
    """An SVG document as an element to inline in HTML: without the XML prolog, doctype and comments.

    Raises:
        ReportError: ``svg`` has no ``<svg`` element.
    """
    start = svg.find("<svg")
    if start < 0:
        raise ReportError(f"svg: not an SVG document (no <svg> element), got {svg[:60]!r}")
    return re.sub(r"<!--.*?-->\s*", "", svg[start:], flags=re.DOTALL).strip()


def pattern_svg(words: PatternWords, title: str | None = None, precision: int = 2) -> str:
    """``pattern_dot`` rendered by graphviz's ``dot`` as an inline SVG element, sized one CSS pixel per graphviz
    point so that every diagram of a page has the same scale (a 12 pt label reads as 12 px text).

    Raises:
        graphviz.ExecutableNotFound: graphviz's ``dot`` program is not installed.
    """
    svg = svg_fragment(pattern_dot(words, title, precision).pipe(format="svg", encoding="utf-8"))
    start_tag, rest = svg.split(">", 1)
    return re.sub(r'\b(width|height)="([\d.]+)pt"', r'\1="\2px"', start_tag) + ">" + rest


# --------------------------------------------------------------------------------------------------------------------
# Phrases (SoPa Table 2)
# --------------------------------------------------------------------------------------------------------------------
def _phrase_cells(match: PhraseMatch, length: int) -> list[list[str]]:
    """The HTML of each main-path column of ``match``: column i holds the self-loop words read on state i and the
    main-path word (or ``ε``) of arc i -> i+1; the END state's self-loop words join the last column."""
    cells: list[list[str]] = [[] for _ in range(length - 1)]
    for step in match.steps:
        column = min(step.source, length - 2)
        weight = format_number(step.weight, 2)
        if step.kind == "epsilon":
            tip = f"epsilon q{step.source} → q{step.target}: {weight}"
            cells[column].append(f'<span class="step eps" title="{html.escape(tip)}">ε</span>')
            continue
        token = _token_html(step.token or "")
        if step.kind == "self-loop":
            tip = f"self-loop on q{step.source}: {weight}"
            cells[column].append(f'<span class="step sl" title="{html.escape(tip)}">{token}<sub>SL</sub></span>')
        else:
            tip = f"main path q{step.source} → q{step.target}: {weight}"
            cells[column].append(f'<span class="step main" title="{html.escape(tip)}">{token}</span>')
    return cells


def phrase_table_html(matches: Sequence[PhraseMatch], length: int, semiring: str | Semiring = "max-times") -> str:
    """The top phrases of one pattern as SoPa's Table 2: a row per phrase, a column per main-path arc, then the
    phrase's score; in a summing semiring (real), the span's total over its paths and the best path's share of it.

    Self-loop words carry a ``SL`` subscript and epsilon-skipped states an ``ε``; every step's weight is its tooltip.

    Raises:
        SemiringError: ``semiring`` names no registered semiring (checked when there are matches to show).
    """
    if not matches:
        return '<p class="empty">no phrase matched this pattern</p>'
    head = "".join(f"<th>{format_state_name(f'q{i}')}→{format_state_name(f'q{i + 1}')}</th>" for i in range(length - 1))
    real = not get_semiring(semiring).idempotent  # spans total several paths
    head += "<th>span score</th><th>best path</th>" if real else "<th>score</th>"
    rows = []
    for match in matches:
        cells = "".join(f"<td>{' '.join(cell)}</td>" for cell in _phrase_cells(match, length))
        if real:
            share = "–" if match.share is None else f"{match.share:.0%}"
            cells += f'<td class="num">{format_number(match.span_score, 3)}</td><td class="num">{share}</td>'
        else:
            cells += f'<td class="num">{format_number(match.score, 3)}</td>'
        tip = html.escape(f"document {match.document}, tokens {match.start}–{match.end}: {' '.join(match.tokens)}")
        rows.append(f'<tr title="{tip}">{cells}</tr>')
    return f'<table class="phrases"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


# --------------------------------------------------------------------------------------------------------------------
# Explained documents (SoPa Table 3)
# --------------------------------------------------------------------------------------------------------------------
def contribution_margin(delta: torch.Tensor, toward: torch.Tensor | int) -> torch.Tensor:
    """How much patterns move the decision toward class ``toward``: the leave-one-out change of that class's logit
    minus the mean change of the other classes' logits (for two classes, the change of the log-odds).

    ``delta`` is (..., classes), as ``PatternContribution.delta`` stacked; ``toward`` a class or a tensor of classes
    broadcasting against ``delta[..., 0]``.

    Note:
        Softmax ignores a shift common to all logits, so only differences of logits carry meaning.
    """
    classes = delta.shape[-1]
    index = torch.as_tensor(toward, dtype=torch.long).expand(delta.shape[:-1])
    own = delta.gather(-1, index[..., None])[..., 0]
    if classes == 1:
        return own
    return own - (delta.sum(-1) - own) / (classes - 1)


def explanation_html(
    explanation: Explanation,
    *,
    toward: int | None = None,
    top: int = 3,
    class_names: Sequence[str] | None = None,
    title: str | None = None,
) -> str:
    """A document with the best spans of its most contributing patterns highlighted (SoPa Table 3).

    ``toward`` is the class whose decision the colours explain (default: class 1 of a binary classifier, as the paper's
    "toward positive", else the predicted class). The ``top`` patterns pushing toward it and the ``top`` pushing
    against it are shown: their spans are bold green (for) or italic orange (against), with an opacity that grows
    with the contribution; each highlighted word's tooltip names the pattern and its contribution. A table lists those
    patterns with their margins and spans.

    Caution:
        ``toward`` must be a class index of the explanation and ``class_names`` name every class; neither is checked.
    """
    classes = len(explanation.probabilities)
    toward = (1 if classes == 2 else explanation.predicted) if toward is None else toward
    names = list(class_names) if class_names is not None else [f"class {c}" for c in range(classes)]
    matched = [c for c in explanation.contributions if c.best is not None]
    margins = (
        contribution_margin(torch.tensor([c.delta for c in matched], dtype=torch.float64), toward)
        if matched
        else torch.zeros(0)
    )
    scored = [(float(margin), c) for margin, c in zip(margins, matched)]
    ranked = sorted(scored, key=lambda pair: -pair[0])
    chosen = [pair for pair in ranked[:top] if pair[0] > 0] + [pair for pair in ranked[::-1][:top] if pair[0] < 0]
    largest = max((abs(m) for m, _ in chosen), default=1.0) or 1.0
    # each token takes the colour of the strongest chosen pattern whose best span covers it
    owner: dict[int, tuple[float, int, PhraseMatch]] = {}
    for margin, contribution in chosen:
        best = contribution.best
        assert best is not None
        for position in range(max(best.start, 0), min(best.end, len(explanation.tokens))):
            if position not in owner or abs(margin) > abs(owner[position][0]):
                owner[position] = (margin, contribution.pattern, best)
    words = []
    for position, token in enumerate(explanation.tokens):
        text = html.escape(token)
        if position not in owner:
            words.append(f'<span class="tok">{text}</span>')
            continue
        margin, pattern, _ = owner[position]
        kind = "pos" if margin > 0 else "neg"
        strength = 0.25 + 0.75 * min(abs(margin) / largest, 1.0)
        background = _rgba(PALETTE["positive" if margin > 0 else "negative"], 0.28 * strength)
        tip = f"pattern {pattern}: {margin:+.3f} toward {names[toward]}"
        words.append(
            f'<span class="tok {kind}" style="background:{background}" title="{html.escape(tip)}">{text}</span>'
        )
    verdict = _verdict_html(explanation, names)
    rows = "".join(
        f'<tr class="{"pos" if margin > 0 else "neg"}"><td class="num">{contribution.pattern}</td>'
        f'<td class="num">{margin:+.3f}</td><td>{_span_text(contribution.best)}</td></tr>'
        for margin, contribution in chosen
    )
    table = (
        f'<table class="contributions"><thead><tr><th>pattern</th><th>toward {html.escape(names[toward])}</th>'
        f"<th>best span</th></tr></thead><tbody>{rows}</tbody></table>"
        if rows
        else '<p class="empty">no pattern contributes to this decision</p>'
    )
    heading = f"<h3>{html.escape(title)}</h3>" if title else ""
    return f'<div class="explanation">{heading}{verdict}<p class="document">{" ".join(words)}</p>{table}</div>'


def _rgba(colour: str, alpha: float) -> str:
    """``#rrggbb`` with an opacity, as CSS ``rgba(...)``."""
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha:.2f})"


def _verdict_html(explanation: Explanation, names: Sequence[str]) -> str:
    predicted = explanation.predicted
    probability = explanation.probabilities[predicted]
    parts = [f"predicted <b>{html.escape(names[predicted])}</b> ({probability:.2f})"]
    if explanation.label is not None:
        mark = "correct" if explanation.label == predicted else "wrong"
        parts.append(f'gold <b>{html.escape(names[explanation.label])}</b> <span class="{mark}">{mark}</span>')
    return f'<p class="verdict">{" · ".join(parts)}</p>'


def _span_text(match: PhraseMatch | None) -> str:
    if match is None:
        return ""
    return " ".join(
        f'<span class="step {_STEP_CLASS[s.kind]}">{_token_html(s.token or "ε")}'
        f"{'<sub>SL</sub>' if s.kind == 'self-loop' else ''}</span>"
        for s in match.steps
    )


_STEP_CLASS = {"main": "main", "self-loop": "sl", "epsilon": "eps"}


def _token_html(token: str) -> str:
    """A token as HTML; the boundary padding tokens in a muted ``boundary`` span."""
    if token in (START_TOKEN, END_TOKEN):
        return f'<span class="boundary">{html.escape(token)}</span>'
    return html.escape(token)


# --------------------------------------------------------------------------------------------------------------------
# Training curves
# --------------------------------------------------------------------------------------------------------------------
def training_curves_svg(curve: Sequence[Mapping[str, Any]], best_step: int | None = None) -> str | None:
    """Loss and accuracy against the optimizer step, train (blue) and dev (orange), as an inline SVG element; a
    dotted line marks ``best_step``. ``None`` when the curve is empty or records neither loss nor accuracy.

    Caution:
        ``curve`` is ``Checkpoint.curve``: one mapping per evaluation with ``step`` and ``train_*`` / ``dev_*`` keys.
    """
    from matplotlib.figure import Figure

    panels = [name for name in ("loss", "accuracy") if any(f"{split}_{name}" in p for p in curve for split in _SPLITS)]
    if not curve or not panels:
        return None
    figure = Figure(figsize=(4.2 * len(panels), 2.9), layout="constrained")
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, name in zip(axes, panels):
        for split in _SPLITS:
            points = [(p["step"], _finite(p.get(f"{split}_{name}"))) for p in curve]
            points = [(x, y) for x, y in points if y is not None]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o", markersize=3.5, linewidth=1.8, color=PALETTE[split], label=split)
        if best_step is not None:
            ax.axvline(best_step, color=PALETTE["muted"], linestyle=":", linewidth=1.2, label="best")
        ax.set_title(name, color=PALETTE["ink"], fontsize=11, loc="left")
        ax.set_xlabel("step", color=PALETTE["ink"], fontsize=9)
        ax.grid(color=PALETTE["grid"], linewidth=0.8)
        ax.tick_params(colors=PALETTE["muted"], labelsize=8)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        for side in ("left", "bottom"):
            ax.spines[side].set_color(PALETTE["muted"])
        ax.legend(frameon=False, fontsize=8)
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None}, transparent=True)
    return svg_fragment(buffer.getvalue())


_SPLITS = ("train", "dev")


def _finite(value: Any) -> float | None:
    """A number from a curve point (checkpoints store non-finite floats as strings), or None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
