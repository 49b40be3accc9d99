"""The ``kleene`` console script: one subcommand per module.

Each module ``kleene.cli.<name>`` listed in ``SUBCOMMANDS`` exposes ``register(subparsers)``, which adds its parser
and sets the default ``handler``, a function ``(args) -> exit code``.

Caution: building the parser must not import torch, NumPy or the automata (``kleene --help`` answers in well under a
second): a module imports its heavy dependencies inside its handler, and help text that needs them (model names) is
filled in only when shown (``kleene.cli._shared.filled_help``).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

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
    "convert",
    "models",
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


@contextmanager
def _warnings_as_lines(command: str) -> Iterator[None]:
    """Show each warning raised while ``command`` runs as one line ``kleene COMMAND: warning: ...`` on stderr; the
    deprecation notices of other packages (torch's exporter, ...) are for their developers, not shown."""

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        print(f"kleene {command}: warning: {_one_line(Exception(str(message)))}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
            warnings.filterwarnings("ignore", category=category, module=r"(?!kleene(\.|$))")
        warnings.showwarning = show
        yield


def _missing_dot(exc: BaseException) -> bool:
    """Whether ``exc`` is graphviz's "dot not found" (graphviz is imported only by the commands that draw)."""
    graphviz = sys.modules.get("graphviz")
    return graphviz is not None and isinstance(exc, graphviz.ExecutableNotFound)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kleene`` with ``argv`` (default: the command line) and return its exit code.

    A ``KleeneError``, an ``OSError`` (a file that cannot be written, ...) or a missing graphviz ``dot`` is
    reported on stderr as one line ``kleene COMMAND: error: ...`` with exit code 1 (a warning as one line
    ``kleene COMMAND: warning: ...``); any other exception (a bug) as one line ``kleene COMMAND:
    internal error: ...`` with exit code 70; ``--debug`` re-raises instead, showing the traceback. Bad arguments
    exit with argparse's code 2.
    """
    args = build_parser().parse_args(argv)
    try:
        with _warnings_as_lines(args.command):
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
        if _missing_dot(exc):
            from kleene.cli._shared import DOT_INSTALL

            print(f"kleene {args.command}: error: {DOT_INSTALL}", file=sys.stderr)
            return 1
        print(
            f"kleene {args.command}: internal error: {type(exc).__name__}: {_one_line(exc)} "
            "(a bug in kleene; rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 70


def run() -> NoReturn:
    """The console script (``kleene``, ``python -m kleene.cli``): ``main()`` on the command line, then a quick exit.

    Once the command has finished, the exit handlers run (``atexit``: temporary folders, log handlers, torch's own)
    and the standard streams are flushed; then the process ends without tearing the interpreter's modules down
    one object at a time. With torch and sympy loaded that teardown alone costs about 0.4 s on a 2-core machine,
    a fifth of ``kleene evaluate`` of a small model, and changes nothing a command wrote.

    Caution: for the command line only, never for a caller inside a Python program (use ``main``): threads still
    running are stopped, and objects whose finalizers write (files left open, not closed by a ``with``) are not
    finalized -- kleene's commands close what they write before they return.
    """
    try:
        code = main()
    except SystemExit as done:  # argparse's --help, --version and usage errors
        if done.code is None or isinstance(done.code, int):
            code = done.code or 0
        else:  # a message: Python's own exit prints it and returns 1
            print(done.code, file=sys.stderr)
            code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader stopped reading, or the stream is closed
            code = code or 128 + 13
    os._exit(code)
