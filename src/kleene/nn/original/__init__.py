"""Models trained with the original codes, loaded into kleene in a reference mode that reproduces their forward
pass (float64, to 1e-9): Noahs-ARK/soft_patterns (``from_soft_patterns``), rational-recurrences
(``from_rational_recurrences``), pytorch-qrnn (``from_pytorch_qrnn``) and the ``sru`` package 2.6 (``from_sru``: its
``SRU`` wrapper or one ``SRUCell``).

Every loader is ``from_<code>(checkpoint, args=None, *, ..., backend="auto")``: ``checkpoint`` is the original's state
dict or its file (safetensors, or a torch file read weights-only: nothing is unpickled), ``args`` the original's own
constructor or command-line arguments as a dict or ``argparse.Namespace`` with its key names and defaults; every
refusal is an ``OriginalCodeError``. The returned modules take ``(x, initial state, lengths)`` in the original's
order with kleene's lengths last. docs/original-code.md has the details.
"""

from kleene.errors import OriginalCodeError
from kleene.nn.original.qrnn import PytorchQRNN, QRNNReferenceLayer, from_pytorch_qrnn
from kleene.nn.original.rational_recurrences import RRNNReference, RRNNReferenceLayer, from_rational_recurrences
from kleene.nn.original.soft_patterns import SOFT_PATTERNS_ARGS, from_soft_patterns
from kleene.nn.original.sru import SRUReference, SRUReferenceLayer, from_sru, from_sru_module

__all__ = [
    "SOFT_PATTERNS_ARGS",
    "OriginalCodeError",
    "PytorchQRNN",
    "QRNNReferenceLayer",
    "RRNNReference",
    "RRNNReferenceLayer",
    "SRUReference",
    "SRUReferenceLayer",
    "from_pytorch_qrnn",
    "from_rational_recurrences",
    "from_soft_patterns",
    "from_sru",
    "from_sru_module",
]
