"""kleene.compile: automaton templates compiled to fused recurrence kernels (C++ on CPU, Triton/CUDA on GPU).

The prover lives in :mod:`kleene.rational` and extraction in :mod:`kleene.extract`.
"""

from __future__ import annotations

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
