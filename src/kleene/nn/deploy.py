"""Deploying a trained model outside eager PyTorch: ``torch.export``, ONNX (with a JSON sidecar), TorchScript's refusal.

Every registry model (``kleene.nn.registry``) takes ``forward(tokens, lengths)`` with ``tokens`` (B, T) int64 ids
(0 = padding) and ``lengths`` (B,) int64. ``export_program`` runs ``torch.export.export`` with the batch and time
dimensions dynamic; ``export_onnx`` writes the model as ONNX (``torch.onnx.export`` with the dynamo exporter: under
it the compiled recurrences run their plan's step as torch's ``scan`` operator, which becomes an ONNX ``Scan``, so
onnxruntime runs any batch size and length) and, given a vocabulary, a JSON sidecar holding what a user needs to
turn text into the model's inputs and its outputs into labels with onnxruntime and numpy alone (docs/deploy.md).
Both trace the model behind ``ReadsEmptyTexts``, so that exported graphs take empty batches and empty texts as eager
PyTorch does.
``torch.compile`` needs nothing: ``torch.compile(model, fullgraph=True)`` traces the kernels' custom ops.
TorchScript is refused with one ``DeployError`` (``kleene.compile.module.TORCHSCRIPT_REFUSAL``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kleene.data.vocab import Vocabulary
from kleene.errors import DeployError, KleeneError
from kleene.nn.modes import inference

__all__ = [
    "SIDECAR_FORMAT",
    "DeployError",
    "ReadsEmptyTexts",
    "checkpoint_labels",
    "dynamic_shapes",
    "example_inputs",
    "export_checkpoint",
    "export_onnx",
    "export_program",
    "sidecar",
]

#: The format tag of the JSON sidecar written next to an ONNX file.
SIDECAR_FORMAT = "kleene-onnx/1"
#: How kleene's data loaders turn a text into tokens (``kleene.data``: lowercased, split at whitespace).
PREPROCESSING = {"lowercase": True, "split": "whitespace", "padding_id": 0, "unknown_id": 1}


def _vocabulary_size(model: nn.Module) -> int:
    embedding = model.embedding
    assert isinstance(embedding, nn.Embedding)
    return int(embedding.num_embeddings)


def _check_model(model: object) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise DeployError(f"model must be a torch.nn.Module (a kleene registry model); got {type(model).__name__}")
    embedding = getattr(model, "embedding", None)
    if not isinstance(embedding, nn.Embedding):
        raise DeployError(
            f"model {type(model).__name__} has no `embedding` (torch.nn.Embedding): not a registry model taking "
            "(tokens, lengths)"
        )
    return model


def example_inputs(model: nn.Module, batch: int = 2, length: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens (batch, length) of ids in 1..V-1 (seeded) and lengths ``length, length - 1, ...`` (at least 1), on the
    model's device: the example a trace specializes nothing on (batch and length are dynamic, see
    ``dynamic_shapes``)."""
    words = _vocabulary_size(_check_model(model))
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, max(words, 2), (batch, length), generator=generator).clamp(max=max(words - 1, 0))
    lengths = torch.clamp(length - torch.arange(batch), min=1)
    tokens[torch.arange(length)[None, :] >= lengths[:, None]] = 0
    device = next(model.parameters()).device
    return tokens.to(device), lengths.to(device)


def dynamic_shapes() -> tuple[dict[int, Any], dict[int, Any]]:
    """``torch.export`` dynamic shapes of (tokens, lengths): batch and time dimensions free, 0 included (for a model
    behind ``ReadsEmptyTexts``)."""
    batch = torch.export.Dim("batch", min=0, max=1 << 20)
    time = torch.export.Dim("time", min=0, max=1 << 20)
    return {0: batch, 1: time}, {0: batch}


class ReadsEmptyTexts(nn.Module):
    """What the exports trace: ``model`` run on its tokens with one padding column (id 0) appended, beyond every
    text's length, so that a batch whose texts are all empty (length 0, even T = 0) runs one masked step and gives
    eager PyTorch's result. ONNX's ``Scan`` takes no sequence of 0 steps, and a graph traced on texts of length >= 1
    serves no length 0 otherwise. A language model's logits are cut back to the input's T positions; registry
    models read no padding (ragged batches), so the column changes no output.

    Raises:
        DeployError: ``model`` is not a registry model (no ``embedding``)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = _check_model(model)
        self.training = self.model.training  # the wrapped model's mode (the exports run it in eval mode)
        self.task = getattr(model, "task", "classification")

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        out = self.model(nn.functional.pad(tokens, (0, 1)), lengths)
        return out[:, : tokens.shape[1]] if self.task == "language_model" else out


def export_program(model: nn.Module) -> torch.export.ExportedProgram:
    """``torch.export.export`` of a registry model in eval mode, batch and time dynamic (``dynamic_shapes``).

    Raises:
        DeployError: not a registry model, or torch.export fails (its message follows).
    """
    model = _check_model(model)
    with inference(model):
        try:
            return torch.export.export(ReadsEmptyTexts(model), example_inputs(model), dynamic_shapes=dynamic_shapes())
        except Exception as error:  # torch.export raises many kinds; the message names the model
            raise DeployError(f"torch.export of {type(model).__name__} failed: {error}") from error


def _num_outputs(model: nn.Module) -> int:
    """The size of the model's last output dimension (its number of classes), from one eval-mode call."""
    with inference(model):
        return int(model(*example_inputs(model, 1, 2)).shape[-1])


def sidecar(
    model: nn.Module, vocab: Vocabulary | Sequence[str], labels: Sequence[str] = (), name: str = ""
) -> dict[str, Any]:
    """The JSON sidecar of an exported model: inputs, outputs, preprocessing, vocabulary and labels.

    Raises:
        DeployError: a vocabulary whose size is not the model's, or labels that are not one string per class.
    """
    vocab = vocab if isinstance(vocab, Vocabulary) else Vocabulary(list(vocab))
    words = _vocabulary_size(_check_model(model))
    if len(vocab) != words:
        raise DeployError(f"vocab has {len(vocab)} tokens; the model's embedding has {words} rows")
    task = getattr(model, "task", "classification")
    info: dict[str, Any] = {
        "format": SIDECAR_FORMAT,
        "model": name or type(model).__name__,
        "task": task,
        "inputs": {
            "tokens": "int64 (batch, time): vocabulary ids, 0 after a text's end",
            "lengths": "int64 (batch,): each text's number of tokens",
        },
        "preprocessing": dict(PREPROCESSING),
        "vocabulary": vocab.to_json(),
    }
    if task == "classification":
        classes = _num_outputs(model)
        names = [str(label) for label in labels] if labels else [str(i) for i in range(classes)]
        if len(names) != classes:
            raise DeployError(f"labels must name the model's {classes} classes; got {len(names)}: {names[:5]}")
        info["outputs"] = {"logits": "float32 (batch, classes): the class scores; argmax is the label"}
        info["labels"] = names
    else:
        info["outputs"] = {"logits": "float32 (batch, time, vocabulary): next-token scores"}
    return info


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Only errors from the logger ``logger_name`` while the block runs (the exporter logs what it skips)."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def export_onnx(
    model: nn.Module,
    path: str | os.PathLike[str],
    *,
    vocab: Vocabulary | Sequence[str] | None = None,
    labels: Sequence[str] = (),
    name: str = "",
    opset: int | None = None,
) -> Path:
    """Write ``model`` as ONNX to ``path`` (inputs ``tokens``, ``lengths``; output ``logits``; batch and time
    dynamic) and, given ``vocab``, its sidecar (``sidecar``) to ``path`` with the suffix ``.json``; returns ``path``.

    The model runs in eval mode (dropout off) for the export; its outputs in onnxruntime equal eager PyTorch's to
    float32 rounding on any batch size and length (tests/deploy). Needs the ``onnx`` extra (onnx, onnxscript).

    Raises:
        DeployError: not a registry model, a path without the ``.onnx`` suffix or in no existing directory, the
            onnx packages missing, a bad vocabulary or labels, or an export that fails (its message follows).
    """
    target = Path(path)
    if target.suffix != ".onnx":
        raise DeployError(f"path must end in .onnx; got {str(path)!r}")
    if not target.parent.is_dir():
        raise DeployError(f"path {str(path)!r}: the directory {str(target.parent)!r} does not exist")
    model = _check_model(model)
    info = sidecar(model, vocab, labels, name) if vocab is not None else None
    try:
        import onnxscript  # noqa: F401 - the dynamo exporter needs it; say so before tracing
    except ImportError as error:
        raise DeployError(f"ONNX export needs the onnx extra (pip install 'kleene[onnx]'): {error}") from None
    with inference(model):
        try:
            with warnings.catch_warnings(), _quiet("torch.onnx"):
                # tokens and lengths share the batch dimension on purpose; the exporter remarks on it
                warnings.filterwarnings("ignore", message=r".*shares the same shape constraints with another axis")
                program = torch.onnx.export(
                    ReadsEmptyTexts(model),
                    example_inputs(model),
                    dynamo=True,
                    dynamic_shapes=dynamic_shapes(),
                    input_names=["tokens", "lengths"],
                    output_names=["logits"],
                    opset_version=opset,
                    verbose=False,
                )
        except Exception as error:  # the exporter raises many kinds; the message names the model
            raise DeployError(f"ONNX export of {type(model).__name__} failed: {str(error)[:2000]}") from error
    if program is None:  # pragma: no cover - dynamo=True always returns a program
        raise DeployError(f"ONNX export of {type(model).__name__} returned no program")
    program.save(str(target))
    if info is not None:
        target.with_suffix(".json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    return target


def checkpoint_labels(config: dict[str, Any]) -> list[str]:
    """The class names of a checkpoint: its model's ``labels`` argument, ``metadata.labels``, or the names the
    data set it was trained on gives its classes (``metadata.data``, read with ``kleene.data.load`` when it loads);
    else [] (the sidecar then names the classes by number)."""
    metadata = config.get("metadata") or {}
    for source in (config.get("kwargs") or {}, metadata):
        labels = source.get("labels")
        if isinstance(labels, list) and labels and all(isinstance(label, (str, int)) for label in labels):
            return [str(label) for label in labels]
    name = metadata.get("data")
    if isinstance(name, str) and name:
        from kleene.data import load

        try:
            data = load(name)
        except (KleeneError, OSError):  # a data set that is gone or moved: the classes keep their numbers
            return []
        return [str(label) for label in getattr(data, "labels", ())]
    return []


def export_checkpoint(
    checkpoint: str | os.PathLike[str], path: str | os.PathLike[str], *, labels: Sequence[str] = ()
) -> tuple[Path, Path]:
    """Export a checkpoint directory (``kleene train``'s) as ONNX at ``path`` and its sidecar next to it (``.json``);
    returns both paths. ``labels`` name the classes (default: ``checkpoint_labels``, else their numbers).

    Raises:
        CheckpointError: not a checkpoint directory. DeployError: a checkpoint without a vocabulary, or see
            ``export_onnx``.
    """
    from kleene.nn.checkpoint import load_checkpoint

    loaded = load_checkpoint(Path(checkpoint))
    if loaded.vocab is None:
        raise DeployError(f"{os.fspath(checkpoint)}: the checkpoint holds no vocabulary, so no sidecar can map text")
    names = list(labels) or checkpoint_labels(loaded.config)
    target = export_onnx(loaded.model, path, vocab=loaded.vocab, labels=names, name=str(loaded.config["model"]))
    return target, target.with_suffix(".json")
