"""The ``kleene`` console script: one subcommand per module.

Each module ``kleene.cli.<name>`` listed in ``SUBCOMMANDS`` exposes ``register(subparsers)``, which adds its parser
and sets the default ``handler``, a function ``(args) -> exit code``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from kleene import __version__
from kleene.errors import KleeneError

#: Modules of ``kleene.cli``, one per subcommand, in the order ``kleene --help`` lists them.
SUBCOMMANDS: list[str] = [
    "tour",
    "bench",
    "prove",
    "train",
    "evaluate",
    "extract",
    "report",
    "generate",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kleene", description="Weighted finite-state automata with neural compilation."
    )
    parser.add_argument("--version", action="version", version=f"kleene {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"kleene.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kleene`` with ``argv`` (default: the command line) and return its exit code.

    A ``KleeneError`` or an ``OSError`` (a file that cannot be written, ...) is reported on stderr as
    ``kleene COMMAND: error: ...`` with exit code 1; bad arguments exit with argparse's code 2.
    """
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except BrokenPipeError:  # the reader (`kleene ... | head`) stopped reading: not our error, say nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # the shell's code for SIGPIPE
    except (KleeneError, OSError) as exc:
        print(f"kleene {args.command}: error: {exc}", file=sys.stderr)
        return 1
