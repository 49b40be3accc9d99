"""``kleene tour``: a walk through the toolkit on the paper's automata (see ``kleene.tour``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "tour",
        help="a walk through the toolkit on the paper's automata B, C and F",
        description="Build the rational-recurrences paper's automata B, C and F; score a sentence symbolically and "
        "numerically, check the scores against the paper's equations, find the Viterbi path, and draw them.",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("out/tour"), help="where to write files (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights (default: %(default)s)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kleene.tour import run_tour

    run_tour(args.out, seed=args.seed)
    return 0
