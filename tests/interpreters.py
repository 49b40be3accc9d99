"""A new Python interpreter for a test: this tree's ``src`` on its path, and none of the caller's environment but
what kernel builds need (without ``PATH`` the compiler finds no linker; without ``HOME``/``KLEENE_CACHE`` the
kernels land in another cache than the run's)."""

from __future__ import annotations

import os
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
#: The variables a kernel build reads (the compiler, its tools and the kernel cache).
BUILD_VARIABLES = ("PATH", "HOME", "KLEENE_CACHE", "CXX", "TMPDIR")


def clean_env() -> dict[str, str]:
    """``PYTHONPATH`` = this tree's ``src``, and the caller's ``BUILD_VARIABLES`` that are set."""
    return {"PYTHONPATH": str(SRC), **{name: os.environ[name] for name in BUILD_VARIABLES if name in os.environ}}
