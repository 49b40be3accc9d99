"""Which ``CompiledBank`` kernels run: a model's bank exists from its construction, so its presence says nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kleene.compile.bank import CompiledBank


@contextmanager
def banks_called() -> Iterator[list[CompiledBank]]:
    """Within the block, the list of banks whose one-call kernel ran (one entry per call)."""
    called: list[CompiledBank] = []
    original = CompiledBank.__call__

    def spy(self: CompiledBank, *args: Any, **kwargs: Any) -> Any:
        called.append(self)
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CompiledBank, "__call__", spy)
        yield called
