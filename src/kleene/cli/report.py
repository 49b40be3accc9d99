"""``kleene report CHECKPOINT [--data NAME] [-o report.html]``: a self-contained HTML page about a trained model.

For a SoPa classifier: its facts, its most important patterns drawn as automata with their top phrases (SoPa
Table 2), explained dev documents (SoPa Table 3), hard patterns with their fidelity, and the training curves. Any
other checkpoint gets its facts and curves. Examples::

    kleene report runs/sopa-sst2 -o sopa.html
    kleene report runs/sopa-sst2 --patterns 40 --documents 10 --corpus dev
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


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
    parser.add_argument("-o", "--output", type=Path, default=Path("report.html"), help="HTML file to write")
    parser.add_argument("--patterns", type=int, default=20, help="patterns to show, most important first")
    parser.add_argument("--documents", type=int, default=6, help="dev documents to explain")
    parser.add_argument("--phrases", type=int, default=5, help="top phrases per pattern")
    parser.add_argument("--words", type=int, default=3, help="best words per arc in the diagrams")
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


def run(args: argparse.Namespace) -> int:
    import torch

    from kleene.nn import SoPaClassifier, load_checkpoint
    from kleene.viz.report import ReportOptions, write_report

    if args.threads:
        torch.set_num_threads(args.threads)
    options = ReportOptions(
        patterns=args.patterns,
        documents=args.documents,
        phrases=args.phrases,
        words=args.words,
        corpus=args.corpus,
        hard_threshold=args.hard_threshold,
        progress=not args.no_progress,
    )
    checkpoint = load_checkpoint(args.checkpoint)
    if not isinstance(checkpoint.model, SoPaClassifier):
        name = type(checkpoint.model).__name__
        print(f"kleene report: note: {name} has no patterns; the report holds its facts and curves", file=sys.stderr)
    path = write_report(args.output, checkpoint, data=args.data, options=options, source=args.checkpoint)
    print(f"wrote {path} ({path.stat().st_size / 1024:,.0f} KiB)")
    return 0
