"""``kleene tour``: a walk through the toolkit on the paper's automata (see ``kleene.tour``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "tour",
        help="a walk through the toolkit on the paper's automata B, C and F",
        description="Build the rational-recurrences paper's automata B, C and F; score a sentence symbolically and "
        "numerically, check the scores against the paper's equations, find the Viterbi path, and draw them; prove "
        "recurrences rational, compile one into a kernel, train RRNN(B) and SoPa on SST-2, extract their automata "
        "and write a report of the learned patterns.",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("out/tour"), help="where to write files (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights (default: %(default)s)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="train for a tenth of the steps, verify on fewer sentences, write a smaller report (a smoke run)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kleene.cli._shared import check_output_dir

    check_output_dir(args.out, "--out")  # before minutes of work

    from kleene.tour import run_tour

    run_tour(args.out, seed=args.seed, quick=args.quick)
    return 0
