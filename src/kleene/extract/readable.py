"""Readable drawings of extracted automata: an extracted automaton has one arc per vocabulary word between two
states, so a drawing keeps the best few words of each arc (``WORDS_PER_ARC`` by default) and never the padding or
unknown token. ``Extraction.export(fmt="dot")`` and ``kleene extract --format dot`` draw with these."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kleene.automata.draw import to_dot
from kleene.automata.wfsa import WFSA, Arc
from kleene.data.vocab import PAD, UNK
from kleene.errors import InterpretError

if TYPE_CHECKING:  # pragma: no cover  (graphviz is imported by to_dot)
    import graphviz

__all__ = ["WORDS_PER_ARC", "readable_automaton", "readable_dot"]

#: Words drawn per arc of an extracted automaton by default (``readable_automaton``).
WORDS_PER_ARC = 5


def readable_automaton(wfsa: WFSA, words_per_arc: int = WORDS_PER_ARC, hidden: Sequence[str] = (PAD, UNK)) -> WFSA:
    """A copy of ``wfsa`` (an extracted automaton: one arc per word) that keeps, between each pair of states, the
    ``words_per_arc`` arcs whose weights are best in the semiring's Viterbi order, and never an arc reading one of
    ``hidden`` (the padding and unknown tokens are not words); epsilon arcs, initial and final weights stay.

    Caution: the result draws the automaton, it no longer computes it (the other words' arcs are gone); the weights
    must be numbers (a constant automaton, as extracted).
    Raises:
        InterpretError: ``words_per_arc`` that is not an integer >= 1.
    """
    if isinstance(words_per_arc, bool) or not isinstance(words_per_arc, int) or words_per_arc < 1:
        raise InterpretError(f"words_per_arc must be an integer >= 1, got {words_per_arc!r}")
    larger_is_better = wfsa.semiring.viterbi.better(1.0, 0.0)  # max-times, max-plus; min-plus ranks the other way
    kept: list[Arc] = []
    groups: dict[tuple[int, int], list[Arc]] = {}
    for arc in wfsa.arcs:
        if not arc.label.consumes:
            kept.append(arc)
        elif str(arc.label) not in hidden:
            groups.setdefault((arc.src, arc.dst), []).append(arc)
    for arcs in groups.values():
        kept += sorted(arcs, key=lambda arc: float(arc.weight), reverse=larger_is_better)[:words_per_arc]
    out = wfsa.copy()
    out.arcs = kept
    return out


def readable_dot(wfsa: WFSA, words_per_arc: int = WORDS_PER_ARC, precision: int = 2) -> graphviz.Digraph:
    """``kleene.automata.draw.to_dot`` of ``readable_automaton(wfsa, words_per_arc)``, captioned with how many of
    the words each arc shows.

    Raises:
        InterpretError: ``words_per_arc`` that is not an integer >= 1.
    """
    words = len({str(arc.label) for arc in wfsa.arcs if arc.label.consumes} - {PAD, UNK})
    title = f"{wfsa.name or 'automaton'}: the best {min(words_per_arc, words)} of {words} words per arc"
    return to_dot(readable_automaton(wfsa, words_per_arc), precision=precision, title=title)
