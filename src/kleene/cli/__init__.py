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
    "export",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kleene", description="Weighted finite-state automata with neural compilation."
    )
    parser.add_argument("--version", action="version", version=f"kleene {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"kleene.cli.{name}").register(subparsers)
    return parser


def _one_line(exc: BaseException) -> str:
    """The error's message on one line (a multi-line message is joined with " | ")."""
    text = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return text or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kleene`` with ``argv`` (default: the command line) and return its exit code.

    A ``KleeneError`` or an ``OSError`` (a file that cannot be written, ...) is reported on stderr as one line
    ``kleene COMMAND: error: ...`` with exit code 1; any other exception (a bug) as one line ``kleene COMMAND:
    internal error: ...`` with exit code 70; ``--debug`` re-raises instead, showing the traceback. Bad arguments
    exit with argparse's code 2.
    """
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except BrokenPipeError:  # the reader (`kleene ... | head`) stopped reading: not our error, say nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # the shell's code for SIGPIPE
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"kleene {args.command}: interrupted", file=sys.stderr)
        return 130
    except (KleeneError, OSError) as exc:
        if args.debug:
            raise
        print(f"kleene {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if args.debug:
            raise
        print(
            f"kleene {args.command}: internal error: {type(exc).__name__}: {_one_line(exc)} "
            "(a bug in kleene; rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 70
