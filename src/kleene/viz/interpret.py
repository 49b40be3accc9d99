"""Interpreting a trained SoPa (sopa-soft-patterns.md §7): top phrases, explanations, hard patterns.

The work is split by concern -- ``kleene.viz.reader`` (result types, the model's layer as a span finder and path
tracer), ``kleene.viz.phrases`` (top phrases), ``kleene.viz.explain`` (leave-one-out), ``kleene.viz.hard`` (hard
patterns) -- and this module gathers their public names.
"""

from __future__ import annotations

from kleene.errors import InterpretError
from kleene.viz.explain import Explanation, PatternContribution, explain, leave_one_out, removed_value
from kleene.viz.hard import HardFidelity, HardPattern, hard_fidelity, hard_patterns
from kleene.viz.phrases import top_phrases
from kleene.viz.reader import END_TOKEN, START_TOKEN, PatternStep, PhraseMatch

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
