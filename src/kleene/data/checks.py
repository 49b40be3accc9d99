"""Checks of the tensors and settings handed to kleene's modules: token ids, lengths, feature widths, counts.

One place for the rules every entry point shares (each caller passes the exception class of its own layer, so a
compiled module raises ``CompileError`` and a layer ``LayerError``):

- lengths: one integer per sequence (an integer tensor or a sequence of Python ints; floats are refused, never
  truncated), each in ``0..T``;
- token ids: an integer tensor (B, T) with every id in ``0..vocab_size-1``;
- features: a real floating tensor (B, T, width) (complex values are refused, never cast);
- counts and sizes: Python integers (not bools) with a lower bound.

Empty batches (B = 0) and empty sequences (T = 0) pass every check.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import torch

from kleene.errors import KleeneError

__all__ = ["check_count", "check_features", "check_lengths", "check_real", "check_tokens"]

Tensor = torch.Tensor

_REAL_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _describe(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def check_count(value: Any, name: str, *, minimum: int = 0, error: type[KleeneError] = KleeneError) -> int:
    """``value`` as an int, checked to be an integer (not a bool, not a float) ``>= minimum``.

    Raises:
        error: anything else (the message names ``name``, the value and the bound).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{name} must be an integer >= {minimum}, got {_describe(value)}")
    if value < minimum:
        raise error(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def check_real(
    value: Any, name: str, *, minimum: float | None = None, below: float | None = None, error: type[KleeneError]
) -> float:
    """``value`` as a finite float, ``>= minimum`` and ``< below`` when given.

    Raises:
        error: a bool, a non-number, NaN or infinity, or a value out of range.
    """
    expected = "a finite number" + (f" >= {minimum}" if minimum is not None else "") + (
        f" and < {below}" if below is not None else ""
    )
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be {expected}, got {_describe(value)}")
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise error(f"{name} must be {expected}, got {number}")
    if (minimum is not None and number < minimum) or (below is not None and number >= below):
        raise error(f"{name} must be {expected}, got {number}")
    return number


def check_lengths(
    lengths: Tensor | Sequence[int] | None,
    batch: int,
    steps: int,
    *,
    error: type[KleeneError],
    device: torch.device | None = None,
    name: str = "lengths",
) -> Tensor:
    """``lengths`` as an int64 tensor (B,) on ``device``; ``None`` means every sequence is ``steps`` long.

    Raises:
        error: not one length per sequence, a non-integer dtype (bool, float, complex), or a length outside ``0..T``.
    """
    if lengths is None:
        return torch.full((batch,), steps, dtype=torch.int64, device=device)
    if not isinstance(lengths, Tensor):
        values = list(lengths) if isinstance(lengths, Sequence) and not isinstance(lengths, (str, bytes)) else None
        if values is None or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values
        ):
            expected = "an integer tensor or a list of ints, one per sequence"
            raise error(f"{name} must be {expected}; got {_describe(lengths)}")
        lengths = torch.tensor(values, dtype=torch.int64).reshape(len(values))
    if lengths.dtype == torch.bool or lengths.dtype.is_floating_point or lengths.dtype.is_complex:
        raise error(f"{name} must hold integers (one length per sequence), got {_describe(lengths)}")
    if tuple(lengths.shape) != (batch,):
        raise error(f"{name} must have shape (B,) = ({batch},), one length per sequence; got {_describe(lengths)}")
    lengths = lengths.to(device=device, dtype=torch.int64)
    if batch and not torch.compiler.is_compiling():
        low, high = int(lengths.min()), int(lengths.max())
        if low < 0 or high > steps:
            raise error(f"{name} must lie in 0..T = 0..{steps}; got min {low}, max {high}")
    return lengths


def check_tokens(tokens: Any, vocab_size: int, *, error: type[KleeneError], name: str = "tokens") -> Tensor:
    """``tokens``, checked to be an integer tensor (B, T) of ids in ``0..vocab_size-1``.

    Raises:
        error: not a tensor, not 2-dimensional, a non-integer dtype, or an id out of range.
    """
    if not isinstance(tokens, Tensor):
        raise error(f"{name} must be a (B, T) integer tensor of token ids, got {_describe(tokens)}")
    if tokens.dim() != 2:
        raise error(f"{name} must have shape (B, T), got {_describe(tokens)}")
    if tokens.dtype == torch.bool or tokens.dtype.is_floating_point or tokens.dtype.is_complex:
        raise error(f"{name} must hold integer token ids, got {_describe(tokens)}")
    if tokens.numel() and not torch.compiler.is_compiling():
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= vocab_size:
            raise error(f"{name} must be ids in 0..{vocab_size - 1} (the vocabulary); got min {low}, max {high}")
    return tokens


def check_features(
    x: Any, width: int | None, *, error: type[KleeneError], name: str = "x", rank: int = 3, shape: str = "(B, T, in)"
) -> Tensor:
    """``x``, checked to be a real floating tensor with ``rank`` dimensions whose last is ``width`` (when given).

    Raises:
        error: not a tensor, another rank or width, or a dtype that is not a real float (complex is refused, not cast).
    """
    if not isinstance(x, Tensor):
        raise error(f"{name} must be a real floating tensor of shape {shape}, got {_describe(x)}")
    if x.dtype not in _REAL_FLOATS:
        raise error(f"{name} must be a real floating tensor (float16/bfloat16/float32/float64), got {_describe(x)}")
    if x.dim() != rank:
        raise error(f"{name} must have shape {shape}, got {_describe(x)}")
    if width is not None and x.shape[-1] != width:
        raise error(f"{name} must have last dimension {width} (the module's input width), got {_describe(x)}")
    return x
