"""Running a module for its numbers only: eval mode and no gradients, the module's own mode given back after."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def inference(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) and no gradients inside the block; ``model``'s training mode is restored on leaving it,
    also when the block raises.

    Caution: the mode restored is the top module's (``model.train(was_training)`` sets every submodule to it)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)
