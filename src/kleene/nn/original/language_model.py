"""Language models of the original codes as kleene registry language models (``kleene convert``):
rational-recurrences' ``language_model/train_lm.py`` Model as ``rrnn-f`` (``rational_recurrences_language_model``),
a language model around pytorch-qrnn's ``QRNN`` as ``qrnn`` (``pytorch_qrnn_language_model``), and
salesforce/awd-lstm-lm's QRNN ``RNNModel`` as ``qrnn`` with one window and size per layer (``awd_lstm_lm_model``).

rational-recurrences' Model: ``embedding_layer.embedding.weight`` (V, d), ``rnn`` (an ``rrnn.RRNN`` of d units,
``rnn.rnn_lst.i.*``), ``output_layer`` (its weight tied to the embedding) reading the RRNN's output; its word ids are
``<s>`` then the training file's words (each line's words and ``</s>``) in first-seen order, and it starts every
evaluation from the state its ``init_hidden`` leaves: the RRNN run on one ``<s>``. kleene's ``rrnn-f`` language
model does the same with ``start`` (the ``<s>`` id).

pytorch-qrnn is a layer library: the model around it is the user's. What is taken from the user's ``state_dict()``:
``{embedding_key}.weight`` (V, E), the one ``QRNN`` (keys ``…layers.i.linear.*``, found as ``from_pytorch_qrnn``
finds them) and ``{output_key}.weight`` (V, H) and ``{output_key}.bias`` (V,); logits ``out(h_t)`` of the last
layer's h at every step, from zero cells and zero previous inputs (the original after ``reset()``).

awd-lstm-lm's ``RNNModel(rnn_type="QRNN")``: ``encoder`` (V, emsize), ``rnns.l`` = ``QRNNLayer``s (window 2 for
the first, 1 above; ``nhid`` units, ``emsize`` for the last; output gates; their ``linear`` wrapped by ``WeightDrop``:
keys ``rnns.l.linear.module.weight_raw`` and ``.bias``), ``decoder`` (tied to ``encoder`` by default); evaluation from
``reset()`` and zero hidden states; the dropouts (embedding, locked, weight) act in training only.

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
from kleene.nn.original.common import Checkpoint, OriginalArgs, read_args, read_state_dict
from kleene.nn.original.qrnn import QRNNReferenceLayer, from_pytorch_qrnn
from kleene.nn.original.rational_recurrences import RRNNReferenceLayer, copy_rrnn_layer, from_rational_recurrences
from kleene.nn.qrnn import QRNNLayer
from kleene.nn.registry import build_model
from kleene.nn.rrnn import RationalLanguageModel

__all__ = [
    "AWD_LSTM_LM_ARGS",
    "AWD_LSTM_LM_IGNORED",
    "NEVER",
    "RATIONAL_RECURRENCES_LM_ARGS",
    "RATIONAL_RECURRENCES_LM_IGNORED",
    "awd_lstm_lm_model",
    "pytorch_qrnn_language_model",
    "rational_recurrences_language_model",
    "rational_recurrences_words",
]

Tensor = torch.Tensor

#: The output bias of the tokens the original's vocabulary lacks (exp(NEVER − logit) is 0 in float32 and float64).
NEVER = -1e6


def _get(state_dict: dict[str, Tensor], key: str, dims: int) -> Tensor:
    value = state_dict.get(key)
    if value is None or value.dim() != dims:
        found = None if value is None else tuple(value.shape)
        raise OriginalCodeError(f"pytorch-qrnn language model: expected {key!r} with {dims} dimensions; got {found}")
    return value


def _vocabulary(words: Sequence[str], rows: int, code: str) -> tuple[Vocabulary, Tensor]:
    """kleene's vocabulary (``<pad>``, ``<unk>``, their words; their ``<unk>`` is kleene's) and the kleene id of
    each of their ``rows`` ids."""
    words = list(words)
    if len(words) != rows or len(set(words)) != rows or PAD in words:
        raise OriginalCodeError(
            f"{code}: the word list must hold the {rows} rows' distinct words in id order (no {PAD!r}); it has "
            f"{len(words)} words, {len(set(words))} distinct"
        )
    vocab = Vocabulary([PAD, UNK, *(word for word in words if word != UNK)])
    return vocab, torch.tensor([vocab.index(word) for word in words], dtype=torch.long)


def _copy_rows(model: RationalLanguageModel, source: Tensor, matrix: Tensor, weight: Tensor, bias: Tensor) -> None:
    """Their embedding and output rows at kleene's ids ``source``; the tokens they lack: zero vectors, bias NEVER."""
    model.embedding.weight.zero_()
    model.embedding.weight[source] = matrix
    model.decoder.weight.zero_()
    model.decoder.weight[source] = weight
    model.decoder.bias.fill_(NEVER)
    model.decoder.bias[source] = bias


def _qrnn_model(
    kwargs: dict[str, Any],
    vocab: Vocabulary,
    source: Tensor,
    matrix: Tensor,
    weight: Tensor,
    bias: Tensor,
    layers: Sequence[QRNNReferenceLayer],
) -> tuple[RationalLanguageModel, dict[str, Any], Vocabulary]:
    """kleene's qrnn language model built from ``kwargs``, with the original's embedding rows, output layer and
    QRNN layers (``layers``: the reference layers whose convolutions are copied in order)."""
    model = build_model("qrnn", **kwargs).to(matrix.dtype)
    assert isinstance(model, RationalLanguageModel)
    with torch.no_grad():
        _copy_rows(model, source, matrix, weight, bias)
        for target, layer in zip(model.stack.layers, layers):
            assert isinstance(target, QRNNLayer)
            target.convolution.load_state_dict(layer.convolution.state_dict())
    return model.eval(), kwargs, vocab


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
    vocab, source = _vocabulary(words, rows, code)
    kwargs: dict[str, Any] = {
        "vocab_size": len(vocab), "window": layers[0].window, "pooling": layers[0].pooling, "zoneout": 0.0,
        "hidden_size": sizes[0], "num_layers": len(layers), "embedding_dim": int(matrix.shape[1]), "backend": backend,
    }  # fmt: skip
    return _qrnn_model(kwargs, vocab, source, matrix, weight, bias, layers)


#: The arguments of rational-recurrences' ``language_model/train_lm.py`` that shape its model, with its defaults.
RATIONAL_RECURRENCES_LM_ARGS: dict[str, Any] = {
    "model": "rrnn",
    "semiring": "plus_times",
    "use_layer_norm": False,
    "use_output_gate": False,
    "activation": "none",
    "d": 512,
    "depth": 3,
    "num_mlp_layer": 1,
    "train": None,
}
#: Its other arguments: accepted, they change no value at evaluation.
RATIONAL_RECURRENCES_LM_IGNORED = frozenset({
    "seed", "dev", "test", "batch_size", "unroll_size", "max_epoch", "input_dropout", "output_dropout", "dropout",
    "rnn_dropout", "lr", "lr_decay", "lr_decay_epoch", "weight_decay", "clip_grad", "gpu", "eval_ite", "patience",
})  # fmt: skip
SOS, EOS = "<s>", "</s>"


def rational_recurrences_words(lines: Sequence[str]) -> list[str]:
    """Its ``EmbeddingLayer``'s word ids from the training file's lines: ``<s>``, then each line's words and
    ``</s>`` in first-seen order (``read_corpus``)."""
    words = {SOS: None}
    for line in lines:
        words.update(dict.fromkeys([*line.split(), EOS]))
    return list(words)


def rational_recurrences_language_model(
    checkpoint: Checkpoint, args: OriginalArgs | None, *, words: Sequence[str], backend: str = "auto"
) -> tuple[nn.Module, dict[str, Any], Vocabulary]:
    """The ``rrnn-f`` language model (``RRNNLanguageModel``, kind F, real semiring, ``start`` = ``<s>``) computing
    rational-recurrences' ``train_lm.py`` Model (its ``state_dict()``) from its ``init_hidden`` state, its keyword
    arguments and its vocabulary (``words``: its word ids in order, ``rational_recurrences_words``).

    ``args``: the script's command-line arguments (``RATIONAL_RECURRENCES_LM_ARGS``, its defaults).

    Raises:
        OriginalCodeError: ``--model lstm``, ``--semiring max_plus``, ``--use_layer_norm`` (as for its classifier),
            ``--num_mlp_layer 2`` (the original's constructor reads an attribute it never sets), what
            ``from_rational_recurrences`` refuses, missing keys, a word list that does not fit.
    """
    code = "rational-recurrences language model"
    state_dict = read_state_dict(checkpoint, code)
    options = read_args(args, code, RATIONAL_RECURRENCES_LM_ARGS, RATIONAL_RECURRENCES_LM_IGNORED)
    refusals = {
        "model": (options["model"] != "rrnn", "only its rrnn encoder is a rational recurrence"),
        "semiring": (options["semiring"] != "plus_times", "its semiring path is not kleene's rrnn-f in max-plus"),
        "use_layer_norm": (bool(options["use_layer_norm"]), "its layer norm divides by the unbiased std + 1e-6"),
        "num_mlp_layer": (options["num_mlp_layer"] != 1, "its 2-layer head reads self.bidir, never set: it never ran"),
        "activation": (options["activation"] not in ("tanh", "relu", "none"), "kleene's RRNN has tanh, relu, none"),
    }
    for key, (refused, why) in refusals.items():
        if refused:
            raise OriginalCodeError(f"--{key} {options[key]!r} does not convert: {why}")
    encoder_args = {
        "semiring": "plus_times", "hidden_size": options["d"], "num_layers": options["depth"],
        "use_tanh": int(options["activation"] == "tanh"), "use_relu": int(options["activation"] == "relu"),
        "use_output_gate": bool(options["use_output_gate"]), "layer_norm": False,
    }  # fmt: skip
    encoder = from_rational_recurrences({k: v for k, v in state_dict.items() if k.startswith("rnn.")}, encoder_args,
                                        backend=backend)  # fmt: skip
    layers = [layer for layer in encoder.layers if isinstance(layer, RRNNReferenceLayer)]
    matrix = _get(state_dict, "embedding_layer.embedding.weight", 2)
    weight, bias = _get(state_dict, "output_layer.weight", 2), _get(state_dict, "output_layer.bias", 1)
    rows, d = matrix.shape
    if tuple(weight.shape) != (rows, layers[-1].dim) or tuple(bias.shape) != (rows,) or d != layers[0].input_size:
        raise OriginalCodeError(
            f"embedding {tuple(matrix.shape)}, output_layer.weight {tuple(weight.shape)} and bias "
            f"{tuple(bias.shape)} do not fit an RRNN of {layers[0].input_size} inputs and {layers[-1].dim} units"
        )
    vocab, source = _vocabulary(words, rows, code)
    if SOS not in vocab:
        raise OriginalCodeError(f"{code}: the word list has no {SOS!r}, its first word id")
    kwargs: dict[str, Any] = {
        "vocab_size": len(vocab), "output_gate": layers[0].gate is not None, "semiring": "real",
        "activation": options["activation"], "hidden_size": layers[0].dim, "num_layers": len(layers),
        "embedding_dim": int(d), "start": vocab.index(SOS), "backend": backend,
    }  # fmt: skip
    model = build_model("rrnn-f", **kwargs).to(matrix.dtype)
    assert isinstance(model, RationalLanguageModel)
    with torch.no_grad():
        _copy_rows(model, source, matrix, weight, bias)
        for target, layer in zip(model.stack.layers, layers):
            copy_rrnn_layer(target, layer)
    return model.eval(), kwargs, vocab


#: The arguments of awd-lstm-lm's ``main.py`` that shape its model, with its defaults (``--model`` must be QRNN).
AWD_LSTM_LM_ARGS: dict[str, Any] = {"model": "LSTM", "emsize": 400, "nhid": 1150, "nlayers": 3, "tied": True}
#: Its other arguments: accepted, they change no value at evaluation.
AWD_LSTM_LM_IGNORED = frozenset({
    "data", "lr", "clip", "epochs", "batch_size", "bptt", "dropout", "dropouth", "dropouti", "dropoute", "wdrop",
    "seed", "nonmono", "cuda", "log_interval", "save", "alpha", "beta", "wdecay", "resume", "optimizer", "when",
})  # fmt: skip


def awd_lstm_lm_model(
    checkpoint: Checkpoint, args: OriginalArgs | None, *, words: Sequence[str], backend: str = "auto"
) -> tuple[nn.Module, dict[str, Any], Vocabulary]:
    """The ``qrnn`` language model (``QRNNLanguageModel`` with ``layers``: window 2 then 1, ``nhid`` units then
    ``emsize`` for the last) computing awd-lstm-lm's QRNN ``RNNModel`` (its ``state_dict()``, see the module) from
    ``reset()``, its keyword arguments and its vocabulary (``words``: its ``corpus.dictionary.idx2word``).

    ``args``: its ``main.py`` command line (``AWD_LSTM_LM_ARGS``, its defaults; ``--model QRNN``).

    Raises:
        OriginalCodeError: ``--model LSTM`` (not a rational recurrence), sizes that differ from ``args``, missing or
            mis-shaped keys, a word list that does not fit.
    """
    code = "awd-lstm-lm"
    state_dict = read_state_dict(checkpoint, code)
    options = read_args(args, code, AWD_LSTM_LM_ARGS, AWD_LSTM_LM_IGNORED)
    if options["model"] != "QRNN":
        raise OriginalCodeError(f"--model {options['model']!r}: only awd-lstm-lm's QRNN model is a rational recurrence")
    count = 0
    while f"rnns.{count}.linear.module.bias" in state_dict:
        count += 1
    if count != options["nlayers"]:
        raise OriginalCodeError(f"--nlayers {options['nlayers']}, but the state dict has {count} rnns.l.linear layers")
    layers: list[QRNNReferenceLayer] = []
    for index in range(count):
        prefix = f"rnns.{index}.linear.module."
        weight = state_dict.get(prefix + "weight_raw", state_dict.get(prefix + "weight"))
        if weight is None:
            raise OriginalCodeError(f"the state dict has no {prefix}weight_raw (WeightDrop's copy of the weight)")
        window = 2 if index == 0 else 1
        single = {"linear.weight": weight, "linear.bias": state_dict[prefix + "bias"]}
        expected = (
            options["emsize"] if index == 0 else options["nhid"],
            options["nhid"] if index < count - 1 else options["emsize"],
        )
        loaded = from_pytorch_qrnn(single, {"window": window, "input_size": expected[0], "hidden_size": expected[1]},
                                   backend=backend)  # fmt: skip
        layers.extend(layer for layer in loaded.stack.layers if isinstance(layer, QRNNReferenceLayer))
    matrix = _get(state_dict, "encoder.weight", 2)
    weight, bias = _get(state_dict, "decoder.weight", 2), _get(state_dict, "decoder.bias", 1)
    rows = matrix.shape[0]
    if tuple(weight.shape) != (rows, layers[-1].hidden_size) or tuple(bias.shape) != (rows,):
        raise OriginalCodeError(
            f"decoder.weight {tuple(weight.shape)} and decoder.bias {tuple(bias.shape)} do not fit {rows} words "
            f"and the last layer's {layers[-1].hidden_size} units"
        )
    vocab, source = _vocabulary(words, rows, code)
    kwargs: dict[str, Any] = {
        "vocab_size": len(vocab), "pooling": "fo", "zoneout": 0.0, "hidden_size": options["nhid"],
        "num_layers": count, "embedding_dim": int(matrix.shape[1]), "backend": backend,
        "layers": [{"window": layer.window, "hidden_size": layer.hidden_size} for layer in layers],
    }  # fmt: skip
    return _qrnn_model(kwargs, vocab, source, matrix, weight, bias, layers)
