"""A language model around pytorch-qrnn's ``QRNN`` (an embedding, the QRNN, an output layer) as kleene's ``qrnn``
language model (``kleene convert --from pytorch-qrnn``).

pytorch-qrnn is a layer library: the model around it is the user's. What is taken from the user's ``state_dict()``:
``{embedding_key}.weight`` (V, E), the one ``QRNN`` (keys ``…layers.i.linear.*``, found as ``from_pytorch_qrnn``
finds them) and ``{output_key}.weight`` (V, H) and ``{output_key}.bias`` (V,); logits ``out(h_t)`` of the last
layer's h at every step, from zero cells and zero previous inputs (the original after ``reset()``). salesforce/
awd-lstm-lm's QRNN ``RNNModel`` does not map: its first layer has window 2 and the others 1, and its last layer has
``emsize`` units where the others have ``nhid``; kleene's ``qrnn`` language model has one window and one size.

kleene's vocabulary is ``<pad>``, ``<unk>`` and then the user's words in id order (a word ``<unk>`` of theirs is
kleene's ``<unk>``); the tokens the original does not have get a zero embedding and the output bias ``NEVER``, so
their probability is 0 in float32 and float64 and the other tokens' log-probabilities are the original's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from kleene.data.vocab import PAD, UNK, Vocabulary
from kleene.errors import OriginalCodeError
from kleene.nn.original.common import Checkpoint, OriginalArgs, read_state_dict
from kleene.nn.original.qrnn import QRNNReferenceLayer, from_pytorch_qrnn
from kleene.nn.qrnn import QRNNLayer
from kleene.nn.registry import build_model
from kleene.nn.rrnn import RationalLanguageModel

__all__ = ["NEVER", "pytorch_qrnn_language_model"]

Tensor = torch.Tensor

#: The output bias of the tokens the original's vocabulary lacks (exp(NEVER − logit) is 0 in float32 and float64).
NEVER = -1e6


def _get(state_dict: dict[str, Tensor], key: str, dims: int) -> Tensor:
    value = state_dict.get(key)
    if value is None or value.dim() != dims:
        found = None if value is None else tuple(value.shape)
        raise OriginalCodeError(f"pytorch-qrnn language model: expected {key!r} with {dims} dimensions; got {found}")
    return value


def pytorch_qrnn_language_model(
    checkpoint: Checkpoint,
    args: OriginalArgs | None,
    *,
    words: Sequence[str],
    embedding_key: str,
    output_key: str,
    backend: str = "auto",
) -> tuple[nn.Module, dict[str, Any], Vocabulary]:
    """The ``qrnn`` language model (``QRNNLanguageModel``: pooling ``fo`` or ``f``, the QRNN's window, one size)
    computing the user's embedding → pytorch-qrnn ``QRNN`` → linear output (see the module), its keyword arguments
    and its vocabulary (``words``: the user's words in id order, one per embedding row).

    ``args``: the ``QRNN(...)`` constructor arguments (``PYTORCH_QRNN_ARGS``).

    Raises:
        OriginalCodeError: what ``from_pytorch_qrnn`` refuses; ``zoneout > 0`` (the original evaluates with
            F (1 − p), kleene's qrnn without zoneout); layers of different sizes; missing or mis-shaped embedding or
            output keys; a word list that does not fit.
    """
    code = "pytorch-qrnn language model"
    state_dict = read_state_dict(checkpoint, code)
    taken = (embedding_key + ".", output_key + ".")
    encoder = from_pytorch_qrnn({k: v for k, v in state_dict.items() if not k.startswith(taken)}, args, backend=backend)
    layers = [layer for layer in encoder.stack.layers if isinstance(layer, QRNNReferenceLayer)]
    if layers[0].zoneout:
        raise OriginalCodeError(
            f"zoneout={layers[0].zoneout}: the original evaluates with F (1 − p), kleene's qrnn without zoneout"
        )
    sizes = [layer.hidden_size for layer in layers]
    if len(set(sizes)) != 1:
        raise OriginalCodeError(f"the QRNN's layers have sizes {sizes}; kleene's qrnn language model has one size")
    matrix = _get(state_dict, embedding_key + ".weight", 2)
    weight, bias = _get(state_dict, output_key + ".weight", 2), _get(state_dict, output_key + ".bias", 1)
    rows = matrix.shape[0]
    if (
        tuple(weight.shape) != (rows, sizes[0])
        or tuple(bias.shape) != (rows,)
        or matrix.shape[1] != layers[0].input_size
    ):
        raise OriginalCodeError(
            f"{embedding_key}.weight {tuple(matrix.shape)}, {output_key}.weight {tuple(weight.shape)} and "
            f"{output_key}.bias {tuple(bias.shape)} do not fit a vocabulary of {rows} words around a QRNN of "
            f"{layers[0].input_size} inputs and {sizes[0]} units"
        )
    words = list(words)
    if len(words) != rows or len(set(words)) != rows or PAD in words:
        raise OriginalCodeError(
            f"{code}: the word list must hold the {rows} rows' distinct words in id order (no {PAD!r}); it has "
            f"{len(words)} words, {len(set(words))} distinct"
        )
    theirs = [word for word in words if word != UNK]
    vocab = Vocabulary([PAD, UNK, *theirs])
    source = torch.tensor([vocab.index(word) for word in words])  # kleene's id of each of their rows
    kwargs: dict[str, Any] = {
        "vocab_size": len(vocab), "window": layers[0].window, "pooling": layers[0].pooling, "zoneout": 0.0,
        "hidden_size": sizes[0], "num_layers": len(layers), "embedding_dim": int(matrix.shape[1]), "backend": backend,
    }  # fmt: skip
    model = build_model("qrnn", **kwargs).to(matrix.dtype)
    assert isinstance(model, RationalLanguageModel)
    with torch.no_grad():
        model.embedding.weight.zero_()
        model.embedding.weight[source] = matrix
        model.decoder.weight.zero_()
        model.decoder.weight[source] = weight
        model.decoder.bias.fill_(NEVER)
        model.decoder.bias[source] = bias
        for target, layer in zip(model.stack.layers, layers):
            assert isinstance(target, QRNNLayer)
            target.convolution.load_state_dict(layer.convolution.state_dict())
    return model.eval(), kwargs, vocab
