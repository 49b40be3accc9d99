"""kleene.compile: automaton templates compiled to fused recurrence kernels (C++ on CPU, Triton/CUDA on GPU).

The prover moved to :mod:`kleene.rational` and extraction to :mod:`kleene.extract`; the prover's names stay
importable from here for one release, with a DeprecationWarning.
"""

from __future__ import annotations

import warnings
from typing import Any

from kleene.automata.weights import sigmoid
from kleene.compile.module import CompiledRecurrence, backends, compile, register_backend
from kleene.compile.runtime import gpu as _gpu  # noqa: F401 - registers the triton and cuda backends
from kleene.compile.template import (
    Factor,
    Options,
    OutputMap,
    Plan,
    Template,
    TemplateArc,
    dense_template,
    lower,
    sopa_bank,
    sopa_pattern,
)
from kleene.errors import CompileError

_MOVED_TO_RATIONAL = (
    "Certificate",
    "HankelEvidence",
    "ONE_NOW",
    "Recurrence",
    "RecurrenceError",
    "Refutation",
    "ZOO",
    "hankel_evidence",
    "prove",
)


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_RATIONAL:
        warnings.warn(
            f"kleene.compile.{name} moved to kleene.rational.{name}", DeprecationWarning, stacklevel=2
        )
        import kleene.rational

        return getattr(kleene.rational, name)
    raise AttributeError(f"module 'kleene.compile' has no attribute {name!r}")


__all__ = [
    "CompileError",
    "CompiledRecurrence",
    "Factor",
    "Options",
    "OutputMap",
    "Plan",
    "Template",
    "TemplateArc",
    "backends",
    "compile",
    "dense_template",
    "lower",
    "register_backend",
    "sigmoid",
    "sopa_bank",
    "sopa_pattern",
]
