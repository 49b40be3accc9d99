"""kleene.viz: looking inside learned models -- SoPa interpretation, pattern diagrams, reports.

Interpretation turns a trained SoPa into top phrases per pattern (``phrases``) and leave-one-out explanations of
documents (``explain``), on what ``kleene.extract`` reads from the model (its spans and paths, ``extract.reader``;
its hard patterns, ``extract.hard``, re-exported here); drawing (``draw``) and HTML reports (``report``) build on
them. Nothing here runs a pattern group's internals: viz reads the classifier's configuration and public calls
(``pattern_scores``, ``mlp``) and asks ``kleene.extract`` for weights, spans, paths and read-backs.
"""

from kleene.errors import InterpretError
from kleene.extract.hard import HardFidelity, HardPattern, hard_fidelity, hard_patterns
from kleene.extract.reader import END_TOKEN, START_TOKEN, PatternStep, PhraseMatch
from kleene.viz.draw import (
    PatternWords,
    explanation_html,
    pattern_svg,
    pattern_words,
    phrase_table_html,
    training_curves_svg,
)
from kleene.viz.explain import Explanation, PatternContribution, explain, leave_one_out, removed_value
from kleene.viz.phrases import top_phrases
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
