"""``kleene extract CHECKPOINT [--out DIR] [--format att|json|dot] [--json]``: exact extraction of a trained model.

A SoPa classifier becomes one WFSA per pattern that scores a whole padded document; any other rational model
(RRNN, SRU, QRNN, RCNN, ISAN) has its first layer taken apart into one WFSA per hidden unit. The automata's
Forward is checked against the model's own numbers (pattern scores, cell states) on sentences of the data set,
and the maximum absolute error is printed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kleene.cli._shared import add_column_options
from kleene.cli.device import add_device_option, device_from


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "extract",
        help="extract per-unit (per-pattern) WFSAs from a trained rational model",
        description="Take a SoPa classifier's patterns, or the first rational layer of a checkpoint, apart into "
        "one WFSA per pattern or hidden unit over the vocabulary, verify the automata against the model on real "
        "sentences, and export them.",
    )
    parser.add_argument("checkpoint", type=Path, help="checkpoint directory")
    parser.add_argument("--out", type=Path, help="directory for the exported automata (default: no export)")
    parser.add_argument(
        "--format",
        default="att",
        choices=["att", "json", "dot"],
        help="att (OpenFst text + words.syms), json, or dot: drawings that show the best --words-per-arc words per "
        "arc (never <pad> or <unk>)",
    )
    parser.add_argument(
        "--words-per-arc",
        type=int,
        help="--format dot: words drawn per arc, the best in the semiring's order (default: the exporter's, "
        "kleene.extract.readable.WORDS_PER_ARC = 5; 0: every word, the whole automaton)",
    )
    parser.add_argument(
        "--data", help="classification data set of the verification sentences (default: the training one)"
    )
    add_column_options(parser)
    parser.add_argument("--sentences", type=int, default=200, help="verification sentences (dev split)")
    parser.add_argument("--max-words", type=int, default=1000, help="export over the first N vocabulary words")
    parser.add_argument(
        "--history-words",
        type=int,
        default=40,
        help="QRNN window 2: the automata track the previous word, so they are built (and verified) "
        "over the words of the first sentences, at most this many",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_device_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kleene.cli._shared import check_output_dir
    from kleene.data.checks import check_count
    from kleene.errors import ArgumentError

    check_output_dir(args.out, "--out")  # before the model is read
    if args.words_per_arc is not None:
        check_count(args.words_per_arc, "--words-per-arc", minimum=0, error=ArgumentError)

    from rich.console import Console

    from kleene.extract.checkpoint import extract_checkpoint

    result = extract_checkpoint(
        args.checkpoint,
        data=args.data,
        sentences=args.sentences,
        max_words=args.max_words,
        history_words=args.history_words,
        device=device_from(args),
        text_column=args.text_column,
        label_column=args.label_column,
        progress=Console(stderr=True).status,  # a spinner on the terminal, silent when stderr is not one
    )
    extraction, sentences, data_name = result.extraction, result.sentences, result.data
    paths = []
    if args.out:
        with Console(stderr=True).status(f"writing {args.format} files over {len(result.export_words)} words"):
            per_arc = {} if args.words_per_arc is None else {"words_per_arc": args.words_per_arc or None}
            paths = extraction.export(args.out, args.format, result.export_words, **per_arc)
    summary = {**extraction.summary(), "data": data_name, "sentences": len(sentences), "files": [str(p) for p in paths]}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{extraction.model}: {summary['automata']} automata over {summary['vocabulary']} words")
        print(
            f"verified on {len(sentences)} {data_name} sentences ({summary['checked_tokens']} tokens): "
            f"max |automaton - model| = {summary['max_abs_error']:.3g}"
        )
        if paths:
            print(f"wrote {len(paths)} files to {args.out}")
    return 0
