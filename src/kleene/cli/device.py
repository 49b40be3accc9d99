"""``--device`` for every command that builds or runs a model (train, evaluate, report, extract, generate).

``add_device_option(parser)`` adds the option; ``device_from(args)`` parses and checks it: ``cpu``, ``cuda`` or
``cuda:N``; without the option, ``cuda`` when a GPU is present (with a one-line note on stderr), else ``cpu``.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_FORM = re.compile(r"cpu|cuda(:\d+)?")


def add_device_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        metavar="DEVICE",
        help="cpu, cuda or cuda:N (default: cuda when a GPU is present, else cpu); checkpoints load on any device",
    )


def parse_device(text: str | None) -> torch.device:
    """The device ``text`` names (None: the default, see the module docstring).

    Raises:
        DeviceError: ``text`` is not cpu, cuda or cuda:N, or names a GPU this machine does not have.
    """
    import torch

    from kleene.errors import DeviceError

    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if text is None:
        if available:
            print(f"kleene: using cuda ({torch.cuda.get_device_name(0)}); --device cpu for the CPU", file=sys.stderr)
            return torch.device("cuda")
        return torch.device("cpu")
    if not isinstance(text, str) or not _FORM.fullmatch(text):
        raise DeviceError(f"--device must be cpu, cuda or cuda:N; got {text!r}")
    device = torch.device(text)
    if device.type == "cuda":
        if not available:
            raise DeviceError(f"--device {text}: no CUDA GPU is available here (torch {torch.__version__}); use cpu")
        if device.index is not None and device.index >= available:
            raise DeviceError(f"--device {text}: this machine has {available} GPU(s), cuda:0..cuda:{available - 1}")
    return device


def device_from(args: argparse.Namespace) -> torch.device:
    """``parse_device(args.device)`` (see ``parse_device``)."""
    return parse_device(args.device)
