"""kleene.compile: templates compiled to fused recurrences; the rationality prover."""

# compiler
from .module import CompiledRecurrence, backends, compile, register_backend
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

# prover
from .certificate import Certificate, Refutation
from .hankel import HankelEvidence, hankel_evidence
from .prover import prove
from .recurrence import ONE_NOW, Recurrence, RecurrenceError, sigmoid
from .zoo import ZOO

__all__ = [
    # prover
    "Certificate",
    "HankelEvidence",
    "ONE_NOW",
    "Recurrence",
    "RecurrenceError",
    "Refutation",
    "ZOO",
    "hankel_evidence",
    "prove",
    "sigmoid",
    # compiler
    "CompileError",
    "CompiledRecurrence",
    "Factor",
    "Options",
    "Plan",
    "Template",
    "TemplateArc",
    "backends",
    "compile",
    "dense_template",
    "lower",
    "register_backend",
    "sopa_bank",
    "sopa_pattern",
]
