"""Models trained with the original codes, loaded into kleene layers in a reference mode that reproduces their
forward pass (float64, to 1e-9): rational-recurrences (``from_rational_recurrences``), pytorch-qrnn
(``from_pytorch_qrnn``) and the ``sru`` package 2.6 (``from_sru``). Each module's docstring states the original's
semantics as read from its code and what is refused (``OriginalCodeError``); docs/original-code.md has the details.
"""

from kleene.errors import OriginalCodeError
from kleene.nn.original.qrnn import PytorchQRNN, QRNNReferenceLayer, from_pytorch_qrnn
from kleene.nn.original.rational_recurrences import RRNNReference, RRNNReferenceLayer, from_rational_recurrences
from kleene.nn.original.sru import SRUReferenceLayer, from_sru, from_sru_module

__all__ = [
    "OriginalCodeError",
    "PytorchQRNN",
    "QRNNReferenceLayer",
    "RRNNReference",
    "RRNNReferenceLayer",
    "SRUReferenceLayer",
    "from_pytorch_qrnn",
    "from_rational_recurrences",
    "from_sru",
    "from_sru_module",
]
