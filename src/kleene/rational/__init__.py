"""kleene.rational: recurrences proved rational (or refuted with evidence), with checkable certificates.

The recurrence language (``Recurrence``), the prover (``prove``), certificates and refutations, Hankel-rank
evidence, the zoo of the papers' recurrences and the stacked/delayed flattening (Theorem 1). Imports no torch.
"""

from kleene.automata.weights import sigmoid
from kleene.rational.certificate import Certificate, Refutation
from kleene.rational.hankel import HankelEvidence, hankel_evidence
from kleene.rational.prover import prove
from kleene.rational.recurrence import ONE_NOW, Recurrence, RecurrenceError
from kleene.rational.zoo import ZOO

__all__ = [
    "ONE_NOW",
    "ZOO",
    "Certificate",
    "HankelEvidence",
    "Recurrence",
    "RecurrenceError",
    "Refutation",
    "hankel_evidence",
    "prove",
    "sigmoid",
]
