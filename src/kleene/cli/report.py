"""``kleene report CHECKPOINT [--data NAME] [-o report.html]``: a self-contained HTML page about a trained model.

For a SoPa classifier: its facts, its most important patterns drawn as automata with their top phrases (SoPa
Table 2), explained dev documents (SoPa Table 3), hard patterns with their fidelity, and the training curves. Any
regex classifier (``kleene train regex --rules FILE``): every rule before and after training, side by side. Any
other checkpoint gets its facts and curves. Examples::

    kleene report runs/sopa-sst2 -o sopa.html
    kleene report runs/sopa-sst2 --patterns 40 --documents 10 --corpus dev
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kleene.cli._shared import add_column_options


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write an HTML report of a trained model (SoPa: patterns, phrases, explanations)",
        description="Assemble one self-contained HTML page (inline SVG and CSS, no scripts or external files) about a "
        "checkpoint: the model's facts and training curves and, for a SoPa classifier, its most important patterns as "
        "automata with their top phrases, explained dev documents and hard patterns with their fidelity.",
    )
    parser.add_argument("checkpoint", type=Path, help="checkpoint directory")
    parser.add_argument("--data", help="classification data set (default: the one recorded in the checkpoint)")
    add_column_options(parser)
    parser.add_argument("-o", "--output", type=Path, default=Path("report.html"), help="HTML file to write")
    parser.add_argument("--patterns", type=int, default=20, help="patterns to show, most important first")
    parser.add_argument("--documents", type=int, default=6, help="dev documents to explain")
    parser.add_argument("--phrases", type=int, default=5, help="top phrases per pattern")
    parser.add_argument("--words", type=int, default=3, help="best words per arc in the diagrams")
    parser.add_argument(
        "--importance-documents", type=int, default=300, help="dev documents the patterns are ranked on (at most)"
    )
    parser.add_argument(
        "--fidelity-documents", type=int, help="dev documents the hard patterns' fidelity is measured on (default: all)"
    )
    parser.add_argument(
        "--hard-threshold",
        type=float,
        default=0.7,
        help="hard patterns keep the words whose arc weight reaches this probability (identity encoder: this fraction "
        "of the arc's best weight)",
    )
    parser.add_argument("--corpus", default="train", choices=["train", "dev", "test"], help="split of the phrases")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--no-progress", action="store_true", help="no progress output")
    parser.set_defaults(handler=run)


def warn_if_chance(accuracy: Any, data: Any, split: str) -> bool:
    """Print a visible warning on stderr when ``accuracy`` on ``split`` of classification ``data`` does not beat
    chance (``ClassificationData.chance_bound``: the majority rate plus two standard errors); returns whether it
    warned."""
    from kleene.data import ClassificationData

    if not isinstance(data, ClassificationData) or not isinstance(accuracy, (int, float)):
        return False
    bound, majority = data.chance_bound(split), data.majority_rate(split)
    if accuracy > bound:
        return False
    print(
        f"WARNING: the model is at chance level on {data.name} {split}: accuracy {accuracy:.4f} does not beat "
        f"always predicting the most frequent label ({majority:.4f}; +2 standard errors = {bound:.4f}). "
        "Train longer or check the data before reading its patterns.",
        file=sys.stderr,
    )
    return True


def run(args: argparse.Namespace) -> int:
    from kleene.cli._shared import check_output_file, set_threads

    check_output_file(args.output, "-o/--output")  # before the model is read and the report assembled

    from kleene.nn import RegexClassifier, SoPaClassifier, load_checkpoint
    from kleene.viz.report import ReportOptions, write_report

    set_threads(args.threads)
    options = ReportOptions(
        patterns=args.patterns,
        documents=args.documents,
        phrases=args.phrases,
        words=args.words,
        importance_documents=args.importance_documents,
        fidelity_documents=args.fidelity_documents,
        corpus=args.corpus,
        hard_threshold=args.hard_threshold,
        progress=not args.no_progress,
    )
    checkpoint = load_checkpoint(args.checkpoint)
    if not isinstance(checkpoint.model, (SoPaClassifier, RegexClassifier)):
        name = type(checkpoint.model).__name__
        print(f"kleene report: note: {name} has no patterns; the report holds its facts and curves", file=sys.stderr)
    columns = {"text_column": args.text_column, "label_column": args.label_column}
    path = write_report(args.output, checkpoint, data=args.data, options=options, source=args.checkpoint, **columns)
    metadata = checkpoint.config.get("metadata") or {}
    if isinstance(args.data or metadata.get("data"), str) and checkpoint.metrics.get("dev_accuracy") is not None:
        warn_if_chance(checkpoint.metrics["dev_accuracy"], checkpoint.read_data(args.data, **columns), "dev")
    print(f"wrote {path} ({path.stat().st_size / 1024:,.0f} KiB)")
    return 0
