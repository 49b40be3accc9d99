"""kleene.viz: looking inside learned models -- SoPa interpretation, pattern diagrams, reports.

``interpret`` turns a trained SoPa into top phrases per pattern, leave-one-out explanations of documents and
hard (symbolic) patterns; drawing and HTML reports build on it.
"""

from kleene.viz.draw import (
    PatternWords,
    explanation_html,
    pattern_svg,
    pattern_words,
    phrase_table_html,
    training_curves_svg,
)
from kleene.viz.interpret import (
    END_TOKEN,
    START_TOKEN,
    Explanation,
    HardFidelity,
    HardPattern,
    InterpretError,
    PatternContribution,
    PatternStep,
    PhraseMatch,
    explain,
    hard_fidelity,
    hard_patterns,
    leave_one_out,
    removed_value,
    top_phrases,
)
from kleene.viz.report import ReportError, ReportOptions, build_report, write_report

__all__ = [
    "END_TOKEN",
    "START_TOKEN",
    "Explanation",
    "HardFidelity",
    "HardPattern",
    "InterpretError",
    "PatternContribution",
    "PatternStep",
    "PatternWords",
    "PhraseMatch",
    "ReportError",
    "ReportOptions",
    "build_report",
    "explain",
    "explanation_html",
    "hard_fidelity",
    "hard_patterns",
    "leave_one_out",
    "pattern_svg",
    "pattern_words",
    "phrase_table_html",
    "removed_value",
    "top_phrases",
    "training_curves_svg",
    "write_report",
]
