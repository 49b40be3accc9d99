"""What every loader of ``kleene.nn.original`` shares: reading the original's checkpoint without unpickling it, and
reading the original's own arguments (a dict or an ``argparse.Namespace``, the original's key names) with the
original's defaults."""

from __future__ import annotations

import argparse
import os
import pickle
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from kleene.errors import OriginalCodeError

__all__ = ["Checkpoint", "OriginalArgs", "check_size", "read_args", "read_state_dict"]

Tensor = torch.Tensor

#: The original's checkpoint: a state dict, or the path of a file holding one (``.safetensors``, or a torch file
#: read with ``torch.load(weights_only=True)``: tensors and plain containers only, never arbitrary objects).
Checkpoint = Mapping[str, Tensor] | str | os.PathLike[str]

#: The original's constructor or command-line arguments: a mapping or an ``argparse.Namespace``.
OriginalArgs = Mapping[str, Any] | argparse.Namespace


def read_state_dict(checkpoint: Checkpoint, code: str) -> dict[str, Tensor]:
    """The state dict of ``checkpoint`` (see ``Checkpoint``); a file holding ``{"state_dict": ...}`` (a training
    script's bundle) gives that entry.

    Raises:
        OriginalCodeError: a missing file, a file that is not safetensors or a weights-only torch file (a pickle of
            arbitrary objects is refused, never run), or a mapping that is not from names to tensors.
    """
    if isinstance(checkpoint, (str, os.PathLike)):
        path = Path(checkpoint)
        if not path.is_file():
            raise OriginalCodeError(f"{code} checkpoint {str(path)!r}: no such file")
        loaded: Any
        if path.suffix == ".safetensors":
            from safetensors import SafetensorError
            from safetensors.torch import load_file

            try:
                loaded = load_file(str(path))
            except (SafetensorError, OSError) as error:
                raise OriginalCodeError(f"{code} checkpoint {str(path)!r}: not a safetensors file: {error}") from error
        else:
            try:
                with warnings.catch_warnings():  # its note on pickle protocols says nothing to the caller
                    warnings.simplefilter("ignore", UserWarning)
                    loaded = torch.load(path, map_location="cpu", weights_only=True)
            except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, AttributeError) as error:
                first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise OriginalCodeError(
                    f"{code} checkpoint {str(path)!r} is not a weights-only torch file (kleene never unpickles "
                    f"arbitrary objects; save the model's state_dict()): {first}"
                ) from error
        if isinstance(loaded, Mapping) and isinstance(loaded.get("state_dict"), Mapping):
            loaded = loaded["state_dict"]
        checkpoint = loaded
    if not isinstance(checkpoint, Mapping):
        raise OriginalCodeError(f"a {code} checkpoint must be a state dict (names to tensors); got {type(checkpoint)}")
    bad = [key for key, value in checkpoint.items() if not isinstance(key, str) or not isinstance(value, Tensor)]
    if bad:
        raise OriginalCodeError(f"a {code} state dict maps names to tensors; not so for {bad[:5]!r}")
    return dict(checkpoint)


def read_args(
    args: OriginalArgs | None, code: str, defaults: Mapping[str, Any], ignored: Iterable[str] = ()
) -> dict[str, Any]:
    """``defaults`` (the original's own, by its key names) updated with ``args``; keys in ``ignored`` (options that
    change no value at evaluation: data files, training settings, devices) are accepted and dropped.

    Raises:
        OriginalCodeError: ``args`` that is neither a mapping nor a namespace, or a key the original does not have.
    """
    if args is None:
        given: dict[str, Any] = {}
    elif isinstance(args, argparse.Namespace):
        given = dict(vars(args))
    elif isinstance(args, Mapping):
        given = dict(args)
    else:
        raise OriginalCodeError(f"{code} args must be a dict or an argparse.Namespace; got {type(args).__name__}")
    ignored = set(ignored)
    unknown = sorted(str(key) for key in given if key not in defaults and key not in ignored)
    if unknown:
        raise OriginalCodeError(f"unknown {code} arguments {unknown}; known: {sorted(set(defaults) | ignored)}")
    return {**defaults, **{key: value for key, value in given.items() if key in defaults}}


def check_size(options: Mapping[str, Any], key: str, found: int, code: str) -> None:
    """Check a size the original's arguments state (``options[key]``, None: not stated) against the weights.

    Raises:
        OriginalCodeError: a stated size that differs from ``found``.
    """
    stated = options.get(key)
    if stated is not None and (isinstance(stated, bool) or stated != found):
        raise OriginalCodeError(f"{code} argument {key}={stated!r}, but the checkpoint's weights have {key}={found}")
