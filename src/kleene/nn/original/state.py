"""Initial WFSA states holding an original model's cell values."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from kleene.compile import CompiledRecurrence
from kleene.errors import OriginalCodeError

Tensor = torch.Tensor


def wfsa_state(recurrence: CompiledRecurrence, like: Tensor, cells: Mapping[str, Tensor | float]) -> Tensor:
    """The start state (B, Q, D) of ``recurrence`` (B from ``like`` (B, T, ...), in its dtype) with the named states
    set to ``cells`` (a (B, D) tensor or one number each, in storage form); the other states keep their start values.

    Raises:
        OriginalCodeError: a state name the template does not have, or a cell of the wrong shape.
    """
    template = recurrence.template
    batch, dim = like.shape[0], recurrence.dim
    empty = like.new_zeros((batch, 0, len(template.slots), dim))
    columns = list(recurrence(empty)[1].unbind(1))  # an empty run ends in the start state
    for name, value in cells.items():
        if name not in template.states:
            raise OriginalCodeError(f"{template.name} has no state {name!r}; states: {template.states}")
        if not isinstance(value, Tensor):
            value = like.new_full((batch, dim), float(value))
        if tuple(value.shape) != (batch, dim):
            shape = tuple(value.shape)
            raise OriginalCodeError(f"the initial {name} must have shape (B, D) = {(batch, dim)}; got {shape}")
        columns[template.states.index(name)] = value.to(like.dtype)
    return torch.stack(columns, 1)
