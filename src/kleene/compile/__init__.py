"""kleene.compile: templates compiled to fused recurrences; the rationality prover."""

# compiler
# prover
from ..automata.weights import sigmoid
from . import gpu as _gpu  # noqa: F401 - registers the triton and cuda backends
from .certificate import Certificate, Refutation
from .hankel import HankelEvidence, hankel_evidence
from .module import CompiledRecurrence, backends, compile, register_backend
from .prover import prove
from .recurrence import ONE_NOW, Recurrence, RecurrenceError
from .template import (
    CompileError,
    Factor,
    Options,
    Plan,
    Template,
    TemplateArc,
    dense_template,
    lower,
    sopa_bank,
    sopa_pattern,
)
from .zoo import ZOO

__all__ = [
    "ONE_NOW",
    "ZOO",
    # prover
    "Certificate",
    # compiler
    "CompileError",
    "CompiledRecurrence",
    "Factor",
    "HankelEvidence",
    "Options",
    "Plan",
    "Recurrence",
    "RecurrenceError",
    "Refutation",
    "Template",
    "TemplateArc",
    "backends",
    "compile",
    "dense_template",
    "hankel_evidence",
    "lower",
    "prove",
    "register_backend",
    "sigmoid",
    "sopa_bank",
    "sopa_pattern",
]
