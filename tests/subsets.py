"""Which cases of a parametrized test the fast subset (``-m "not slow"``) runs.

Every distinct C++ kernel a test run meets is compiled once (0.1-1.5 CPU-s) and cached; a first run on a machine,
or on another CPU model (the cache key names the CPU), compiles every one. So, of a test parametrized over
semirings, templates or dtypes, the fast subset runs the cases whose kernels other fast tests build anyway, and the
whole suite runs every case.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest


def slow_except(values: Iterable[Any], *kept: Any) -> list[Any]:
    """``values`` for ``pytest.mark.parametrize`` with every value not in ``kept`` marked ``slow``; a value is the
    one argument, or the tuple of arguments of a parametrize over several names.

    Caution:
        Every value of ``kept`` must be among ``values`` (checked), and a single argument must not be a tuple.
    """
    values = list(values)
    missing = [k for k in kept if k not in values]
    assert not missing, f"slow_except: {missing} are not among the cases {values}"
    slow = pytest.mark.slow
    return [
        value if value in kept else pytest.param(*(value if isinstance(value, tuple) else (value,)), marks=slow)
        for value in values
    ]
