"""What the subcommands share: help text filled in only when shown, and checks of output paths made before the work.

Nothing here imports torch or the automata: building ``kleene``'s parser must stay fast (``kleene --help``).
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from kleene.errors import ArgumentError

#: How to get graphviz's ``dot``, which draws automata.
DOT_INSTALL = (
    "graphviz's `dot` program is not installed (it draws the automata): install graphviz "
    "(apt install graphviz, brew install graphviz or conda install graphviz)"
)


def filled_help(*, raw: bool = False, **placeholders: Callable[[], str]) -> type[argparse.HelpFormatter]:
    """A help formatter (``raw``: the description as written) whose placeholders ``NAME`` become
    ``placeholders[NAME]()``, computed only when the help is shown (model and zoo names need imports that ``kleene
    --help`` must not pay for)."""
    base = argparse.RawDescriptionHelpFormatter if raw else argparse.HelpFormatter

    class Filled(base):  # type: ignore[valid-type, misc]
        def _fill(self, text: str) -> str:
            for name, fill in placeholders.items():
                if name in text:
                    text = text.replace(name, fill())
            return text

        def _format_text(self, text: str) -> str:  # the description and the epilog, filled before wrapping
            return str(super()._format_text(self._fill(text)))

        def _expand_help(self, action: argparse.Action) -> str:  # an argument's help
            return self._fill(str(super()._expand_help(action)))

    return Filled


def integer_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: the argument as an integer ``>= minimum``; anything else is refused with a message that
    says what was expected (argparse prints it in its one usage line)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def check_output_file(path: Path | None, flag: str, *, create_folder: bool = False) -> Path | None:
    """``path`` (a file the command will write), checked before the work: its folder exists (or, with
    ``create_folder``, can be created) and is writable, and it is not a folder itself. ``None`` passes.

    Raises:
        ArgumentError: the message names the flag, the path and what is wrong.
    """
    if path is None:
        return None
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ArgumentError(f"{flag} {path}: is a folder; give a file name")
    if create_folder:
        check_output_dir(folder, flag)
        return path
    if not folder.is_dir():
        raise ArgumentError(f"{flag} {path}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ArgumentError(f"{flag} {path}: not writable")
    return path


def check_output_dir(path: Path | None, flag: str) -> Path | None:
    """``path`` (a folder the command will create or fill), checked before the work: not a file, and inside a folder
    that exists (or can be created) and is writable. ``None`` passes.

    Raises:
        ArgumentError: the message names the flag, the path and what is wrong.
    """
    if path is None:
        return None
    if path.exists() and not path.is_dir():
        raise ArgumentError(f"{flag} {path}: is a file, expected a folder")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ArgumentError(f"{flag} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ArgumentError(f"{flag} {path}: the folder {existing} is not writable")
    return path


def add_column_options(parser: argparse.ArgumentParser) -> None:
    """``--text-column`` / ``--label-column`` of a command that reads data for a checkpoint (``Checkpoint.read_data``:
    when not given, the columns recorded at training are read)."""
    parser.add_argument("--text-column", help="own data: the text column (default: the training one, else detected)")
    parser.add_argument("--label-column", help="own data: the label column (default: the training one, else detected)")


def set_threads(threads: int | None) -> None:
    """Apply a command's ``--threads``: torch's intra-op threads (``None``: torch's choice, nothing changes).

    Raises:
        KleeneError: ``threads`` that is not an integer >= 1 (the message names ``--threads``).
    """
    if threads is None:
        return
    import torch

    from kleene.data.checks import check_count
    from kleene.errors import KleeneError

    torch.set_num_threads(check_count(threads, "--threads", minimum=1, error=KleeneError))


def require_dot(flag: str) -> None:
    """Check that graphviz's ``dot`` is on ``PATH`` before a command that draws (``flag`` names the option).

    Raises:
        ArgumentError: ``dot`` is missing; the message says how to install it.
    """
    if shutil.which("dot") is None:
        raise ArgumentError(f"{DOT_INSTALL}, or leave out {flag}")
