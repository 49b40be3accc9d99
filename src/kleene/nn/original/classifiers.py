"""Whole text classifiers of the original codes' example scripts, as kleene registry models (``kleene convert``).

Both scripts (rational-recurrences' ``classification/train_classifier.py``, the ``sru`` repository's
``classification/train_classifier.py``) build ``Model``: ``emb_layer`` (their ``EmbeddingLayer``: keys
``emb_layer.embedding.weight``), ``encoder`` (an ``rrnn.RRNN`` / ``sru.SRU``: ``encoder.rnn_lst.i.*``) and ``out``
(one ``nn.Linear``), and compute ``out(h[-1])``: the encoder's output at the last step of the batch. Their
``dataloader.pad`` puts every sentence (rational-recurrences: ``<s>`` words ``</s>``) after ``<pad>`` tokens up to
the batch's longest sentence and **at least 5 steps**, so ``h[-1]`` is each sentence's last step after ``<pad>``
steps that the encoder reads. kleene reproduces their forward on each sentence alone (a batch of one): a
``RationalClassifier`` with ``frame`` (the same left fill to 5 steps, ``<s>``/``</s>``) and ``mlp_hidden=0`` (one
linear head). Their batched evaluation also reads the other sentences' padding, so it is not a per-sentence function.

Their word ids are ``emb_layer.word2id`` (the embedding file's words, the data's words, ``<oov>``, ``<pad>``[, ``<s>``,
``</s>``]); it is not in the state dict, so the caller passes the words in id order. kleene's vocabulary is theirs
reordered: ``<pad>`` first (kleene's padding id 0), ``<oov>`` second (kleene's ``<unk>``), the others in their order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from kleene.data.vocab import PAD, UNK, Vocabulary
from kleene.errors import OriginalCodeError
from kleene.nn.original.common import Checkpoint, OriginalArgs, read_args, read_state_dict
from kleene.nn.original.rational_recurrences import RRNNReferenceLayer, copy_rrnn_layer, from_rational_recurrences
from kleene.nn.original.sru import SRUReferenceLayer, from_sru
from kleene.nn.registry import build_model
from kleene.nn.rrnn import RationalClassifier
from kleene.nn.sru import SRULayer

__all__ = [
    "RATIONAL_RECURRENCES_CLASSIFIER_ARGS",
    "RATIONAL_RECURRENCES_CLASSIFIER_IGNORED",
    "rational_recurrences_classifier",
    "sru_classifier",
]

Tensor = torch.Tensor

#: The arguments of rational-recurrences' ``classification/train_classifier.py`` that shape its model, with its
#: argparse defaults.
RATIONAL_RECURRENCES_CLASSIFIER_ARGS: dict[str, Any] = {
    "model": "rrnn",
    "semiring": "plus_times",
    "use_layer_norm": False,
    "use_output_gate": False,
    "activation": "none",
    "d": 256,
    "depth": 2,
    "fix_embedding": True,
}
#: Its other arguments (data, training, devices): accepted, they change no value at evaluation.
RATIONAL_RECURRENCES_CLASSIFIER_IGNORED = frozenset({
    "seed", "trainer", "path", "embedding", "batch_size", "max_epoch", "dropout", "embed_dropout", "rnn_dropout",
    "lr", "lr_decay", "gpu", "eval_ite", "patience", "lr_patience", "weight_decay", "clip_grad",
})  # fmt: skip

#: Their ``dataloader.pad``: every batch is at least this many steps long, filled on the left with ``<pad>``.
MIN_STEPS = 5
OOV, ORIGINAL_PAD, SOS, EOS = "<oov>", "<pad>", "<s>", "</s>"


def _embedding_vocabulary(state_dict: dict[str, Tensor], words: Sequence[str], code: str) -> tuple[Vocabulary, Tensor]:
    """kleene's vocabulary and embedding rows (V, E) for their ``word2id`` order ``words`` and their ``emb_layer``
    matrix in ``state_dict``."""
    matrix = state_dict.get("emb_layer.embedding.weight")
    if matrix is None or matrix.dim() != 2:
        raise OriginalCodeError(f"{code}: the state dict has no emb_layer.embedding.weight (their Model's keys)")
    words = list(words)
    if len(words) != matrix.shape[0]:
        raise OriginalCodeError(
            f"{code}: the word list has {len(words)} words but emb_layer.embedding.weight has {matrix.shape[0]} rows "
            "(pass emb_layer.word2id's words in id order)"
        )
    if len(set(words)) != len(words):
        raise OriginalCodeError(f"{code}: the word list repeats words; emb_layer.word2id has each word once")
    for special in (ORIGINAL_PAD, OOV):
        if special not in words:
            raise OriginalCodeError(f"{code}: the word list has no {special!r}, which their EmbeddingLayer adds")
    if UNK in words:
        raise OriginalCodeError(f"{code}: the word list holds {UNK!r}, kleene's name of their {OOV!r}; rename it")
    order = [words.index(ORIGINAL_PAD), words.index(OOV)]
    order += [i for i, word in enumerate(words) if word not in (ORIGINAL_PAD, OOV)]
    vocab = Vocabulary([PAD, UNK, *(words[i] for i in order[2:])])
    return vocab, matrix[torch.tensor(order)]


def _linear_head(state_dict: dict[str, Tensor], features: int, code: str) -> tuple[Tensor, Tensor]:
    weight, bias = state_dict.get("out.weight"), state_dict.get("out.bias")
    if weight is None or bias is None or weight.dim() != 2 or weight.shape[1] != features:
        shape = None if weight is None else tuple(weight.shape)
        raise OriginalCodeError(f"{code}: expected out.weight (classes, {features}) and out.bias; got {shape}")
    return weight, bias


def _frame(vocab: Vocabulary, sentence_marks: bool) -> dict[str, Any]:
    if not sentence_marks:
        return {"start": None, "end": None, "fill": 0, "min_length": MIN_STEPS}
    missing = [mark for mark in (SOS, EOS) if mark not in vocab]
    if missing:
        raise OriginalCodeError(f"the word list has no {missing}, which their EmbeddingLayer adds")
    return {"start": vocab.index(SOS), "end": vocab.index(EOS), "fill": 0, "min_length": MIN_STEPS}


def rational_recurrences_classifier(
    checkpoint: Checkpoint, args: OriginalArgs | None, *, words: Sequence[str], backend: str = "auto"
) -> tuple[nn.Module, dict[str, Any], Vocabulary]:
    """The ``rrnn-f`` classifier (``RRNNClassifier``, kind F, real semiring, ``mlp_hidden=0``, ``frame``) computing
    rational-recurrences' ``train_classifier.py`` Model (its ``state_dict()``) on each sentence, its keyword
    arguments and its vocabulary (``words``: their ``emb_layer.word2id`` in id order).

    ``args``: the script's command-line arguments (``RATIONAL_RECURRENCES_CLASSIFIER_ARGS`` with its defaults).

    Raises:
        OriginalCodeError: ``--model lstm``; ``--semiring`` other than ``plus_times`` (max_plus: its final weights
            log 2σ(b), its initial −100 and its real-product output gate are not kleene's max-plus RRNN(F));
            ``--use_layer_norm`` (its layer norm divides by the unbiased std + 1e-6, kleene's is torch's
            ``LayerNorm``); whatever ``from_rational_recurrences`` refuses; a word list that does not fit.
    """
    code = "rational-recurrences classifier"
    state_dict = read_state_dict(checkpoint, code)
    options = read_args(args, code, RATIONAL_RECURRENCES_CLASSIFIER_ARGS, RATIONAL_RECURRENCES_CLASSIFIER_IGNORED)
    if options["model"] != "rrnn":
        raise OriginalCodeError(f"--model {options['model']!r}: only its rrnn encoder is a rational recurrence")
    if options["activation"] not in ("tanh", "relu", "none"):
        raise OriginalCodeError(f"--activation {options['activation']!r}: kleene's RRNN has tanh, relu or none")
    if options["semiring"] != "plus_times":
        raise OriginalCodeError(
            f"--semiring {options['semiring']!r}: its semiring path (final weights log 2σ(b), states from −100, a "
            "real-product output gate) is not kleene's rrnn-f in that semiring; only plus_times converts"
        )
    if options["use_layer_norm"]:
        raise OriginalCodeError(
            "--use_layer_norm: its layer norm divides by the unbiased std + 1e-6, kleene's classifiers use "
            "torch.nn.LayerNorm (sqrt of the biased variance + eps)"
        )
    encoder_args = {
        "semiring": "plus_times",
        "hidden_size": options["d"],
        "num_layers": options["depth"],
        "use_tanh": int(options["activation"] == "tanh"),
        "use_relu": int(options["activation"] == "relu"),
        "use_output_gate": bool(options["use_output_gate"]),
        "layer_norm": False,
    }
    encoder = from_rational_recurrences({k: v for k, v in state_dict.items() if k.startswith("encoder.")},
                                        encoder_args, backend=backend)  # fmt: skip
    vocab, rows = _embedding_vocabulary(state_dict, words, code)
    layers = [layer for layer in encoder.layers if isinstance(layer, RRNNReferenceLayer)]
    weight, bias = _linear_head(state_dict, layers[-1].dim, code)
    kwargs: dict[str, Any] = {
        "vocab_size": len(vocab), "num_classes": int(weight.shape[0]), "output_gate": layers[0].gate is not None,
        "semiring": "real", "activation": options["activation"], "hidden_size": layers[0].dim,
        "num_layers": len(layers), "embedding_dim": int(rows.shape[1]), "mlp_hidden": 0,
        "freeze_embeddings": bool(options["fix_embedding"]), "frame": _frame(vocab, sentence_marks=True),
        "backend": backend,
    }  # fmt: skip
    model = _classifier("rrnn-f", kwargs, rows, weight, bias)
    with torch.no_grad():
        for target, source in zip(model.stack.layers, layers):
            copy_rrnn_layer(target, source)
    return model.eval(), kwargs, vocab


def _classifier(name: str, kwargs: dict[str, Any], rows: Tensor, weight: Tensor, bias: Tensor) -> RationalClassifier:
    """The registry's ``name`` classifier built from ``kwargs`` in the dtype of ``rows``, holding their Model's
    embedding ``rows`` (in kleene's vocabulary order) and its ``out`` layer (``weight``, ``bias``); the caller copies
    the encoder's layers."""
    model = build_model(name, **kwargs).to(rows.dtype)
    assert isinstance(model, RationalClassifier)
    head = model.head[-1]
    assert isinstance(head, nn.Linear)
    with torch.no_grad():
        model.embedding.weight.copy_(rows)
        head.weight.copy_(weight)
        head.bias.copy_(bias)
    return model


def sru_classifier(
    checkpoint: Checkpoint, args: OriginalArgs | None, *, words: Sequence[str], backend: str = "auto"
) -> tuple[nn.Module, dict[str, Any], Vocabulary]:
    """The ``sru`` classifier (``SRUClassifier``, ``mlp_hidden=0``, ``frame``) computing the sru repository's
    ``classification/train_classifier.py`` Model (its ``state_dict()``) on each sentence, its keyword arguments and
    its vocabulary (``words``: their ``emb_layer.word2id`` in id order).

    ``args``: the arguments its ``sru.SRU(...)`` encoder was built with (``kleene.nn.original.sru.SRU_ARGS``, the
    package's defaults; e.g. ``{"num_layers": 2, "dropout": 0.5, "v1": true}``: ``v1`` keeps ``weight_c`` at zero).

    Raises:
        OriginalCodeError: what ``from_sru`` refuses (SRU v2: ``weight_c ≠ 0``); and what kleene's ``sru`` layer
            (h = r ⊙ act(c) + (1 − r) ⊙ x', act tanh or none) does not compute: no skip term, ``rescale`` with a
            scale ≠ 1, layer norm, ``proj_input_to_hidden_first``, bidirectional (their ``h[-1]`` of the backward
            half has read one word; kleene's classifier reads the backward half at the first step).
    """
    code = "sru classifier"
    state_dict = read_state_dict(checkpoint, code)
    encoder = from_sru({k: v for k, v in state_dict.items() if k.startswith("encoder.")}, args, backend=backend)
    if encoder.input_to_hidden is not None:
        raise OriginalCodeError("proj_input_to_hidden_first: kleene's sru classifier has no map before its first layer")
    layers = [layer for layer in encoder.layers if isinstance(layer, SRUReferenceLayer)]
    for index, layer in enumerate(layers):
        differs = {
            "has_skip_term=False (kleene's sru always has the highway)": layer.skip == "none",
            f"rescale (scale_x = {float(layer.scale):.4g} ≠ 1 on the skip)": float(layer.scale) != 1.0,
            "layer_norm (kleene's sru layer has none)": layer.layer_norm_mode != "none",
            "bidirectional (their h[-1] is the backward half after one word)": layer.bidirectional,
        }
        for what, found in differs.items():
            if found:
                raise OriginalCodeError(f"encoder.rnn_lst.{index}: {what}; kleene's sru classifier computes otherwise")
    vocab, rows = _embedding_vocabulary(state_dict, words, code)
    weight, bias = _linear_head(state_dict, layers[-1].dim, code)
    kwargs: dict[str, Any] = {
        "vocab_size": len(vocab), "num_classes": int(weight.shape[0]), "hidden_size": layers[0].dim,
        "num_layers": len(layers), "embedding_dim": int(rows.shape[1]), "mlp_hidden": 0,
        "activation": layers[0].activation, "frame": _frame(vocab, sentence_marks=False), "backend": backend,
    }  # fmt: skip
    model = _classifier("sru", kwargs, rows, weight, bias)
    with torch.no_grad():
        for target, source in zip(model.stack.layers, layers):
            assert isinstance(target, SRULayer)
            for name in ("transform", "gates", "highway"):
                part = getattr(source, name)
                if (part is None) != (getattr(target, name) is None):
                    raise OriginalCodeError(f"the sru layer's {name} does not fit kleene's sru layer")
                if part is not None:
                    getattr(target, name).load_state_dict(part.state_dict())
    return model.eval(), kwargs, vocab
