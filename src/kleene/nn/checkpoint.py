"""Checkpoints: a directory with ``model.safetensors`` (the weights) and ``config.json`` (everything else).

``config.json`` holds the format tag, the registered model name and its constructor keyword arguments, the vocabulary,
the metrics, the training curve and free-form metadata (data set, training settings, versions). Nothing is ever
unpickled: weights are read with safetensors only, and anything that is not such a directory is rejected.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model
from torch import nn

from kleene.data.datasets import ClassificationData, LanguageModelData, load
from kleene.data.vocab import Vocabulary
from kleene.errors import CheckpointError, shown
from kleene.nn.registry import build_model

__all__ = [
    "CONFIG_NAME",
    "FORMAT",
    "WEIGHTS_NAME",
    "Checkpoint",
    "CheckpointError",
    "check_checkpoint_target",
    "load_checkpoint",
    "save_checkpoint",
]

FORMAT = "kleene-checkpoint/1"
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"


@dataclass
class Checkpoint:
    """A loaded checkpoint: the rebuilt model (in eval mode), its vocabulary and the whole config."""

    model: nn.Module
    vocab: Vocabulary | None
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def metrics(self) -> dict[str, Any]:
        return dict(self.config.get("metrics", {}))

    @property
    def curve(self) -> list[dict[str, Any]]:
        return list(self.config.get("curve", []))

    def data_columns(self, text_column: str | None = None, label_column: str | None = None) -> dict[str, Any]:
        """The columns to read in a user's file for this model (keyword arguments of ``kleene.data.load``): those
        given, else those recorded at training (``None``: detected from the file)."""
        metadata = self.config.get("metadata") or {}
        return {
            "text_column": text_column or metadata.get("text_column"),
            "label_column": label_column or metadata.get("label_column"),
        }

    def read_data(
        self,
        name: str | None = None,
        fold: int | None = None,
        *,
        text_column: str | None = None,
        label_column: str | None = None,
    ) -> ClassificationData | LanguageModelData:
        """The data set ``name`` (default: the one recorded at training) read as this model was trained: for its task
        (plain text for a language model), fold ``fold`` (default: the training one), the columns of
        ``data_columns(text_column, label_column)``, and the classes numbered as the model numbers them.

        Raises:
            CheckpointError: no ``name`` given and none recorded.
            DataError (and its kinds, from ``kleene.data.load``): a data set that cannot be read so, e.g. one with
                labels the model never saw (named).
        """
        metadata = self.config.get("metadata") or {}
        name = name or metadata.get("data")
        if not isinstance(name, str) or not name:
            raise CheckpointError(f"the checkpoint records no data set (got {shown(name)}); pass one (--data)")
        task = getattr(self.model, "task", None)
        labels = metadata.get("labels") if task == "classification" else None
        return load(
            name,
            fold if fold is not None else int(metadata.get("fold") or 0),
            task=task if isinstance(task, str) else None,
            labels=labels if isinstance(labels, list) and labels else None,
            **self.data_columns(text_column, label_column),
        )


def _json_safe(value: Any) -> Any:
    """Non-finite floats as strings ("inf", "nan"), so that config.json stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def check_checkpoint_target(directory: str | Path, *, overwrite: bool = False) -> Path:
    """``directory`` as a path a checkpoint can be written to, checked before any work: not a file, not holding a
    checkpoint already (unless ``overwrite``), and inside a folder that exists or can be created and is writable.

    Raises:
        CheckpointError: an existing checkpoint without ``overwrite``, a file in the way, or a place that cannot be
            written (the message names the path and what to do).
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(f"{directory}: a file is in the way of the checkpoint directory")
    if not overwrite and ((directory / CONFIG_NAME).exists() or (directory / WEIGHTS_NAME).exists()):
        raise CheckpointError(
            f"{directory} holds a checkpoint already; pass --overwrite (overwrite=True) to replace it "
            "or choose another --out"
        )
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise CheckpointError(f"{directory}: {existing} is a file, not a folder; the checkpoint cannot be written")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CheckpointError(f"{directory}: the folder {existing} is not writable")
    return directory


def save_checkpoint(
    directory: str | Path,
    model: nn.Module,
    *,
    model_name: str,
    model_kwargs: dict[str, Any],
    vocab: Vocabulary | None = None,
    metrics: dict[str, Any] | None = None,
    curve: list[dict[str, Any]] | None = None,
    metadata: dict[str, Any] | None = None,
    overwrite: bool = True,
) -> Path:
    """Write ``directory/model.safetensors`` and ``directory/config.json``; returns the directory.

    Note:
        ``model_kwargs`` must be JSON-serializable and rebuild ``model`` through ``build_model(model_name, ...)``.
    Raises:
        CheckpointError: keyword arguments that JSON cannot hold, or (``overwrite=False``) a checkpoint already in
            ``directory`` (see ``check_checkpoint_target``).
    """
    directory = check_checkpoint_target(directory, overwrite=overwrite)
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "format": FORMAT,
        "model": model_name,
        "kwargs": model_kwargs,
        "vocab": vocab.to_json() if vocab is not None else None,
        "metrics": metrics or {},
        "curve": curve or [],
        "metadata": metadata or {},
    }
    try:
        text = json.dumps(_json_safe(config), indent=1, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"checkpoint config of {model_name!r} is not JSON-serializable: {error}") from error
    save_model(model, str(directory / WEIGHTS_NAME), metadata={"format": FORMAT, "model": model_name})
    (directory / CONFIG_NAME).write_text(text + "\n", encoding="utf-8")
    return directory


def _config_path(path: Path) -> Path:
    if path.is_dir():
        return path / CONFIG_NAME
    if path.name == CONFIG_NAME:
        return path
    raise CheckpointError(
        f"{path}: not a kleene checkpoint (expected a directory holding {CONFIG_NAME} and {WEIGHTS_NAME}); "
        "pickled files such as .pt/.pth/.pkl are never loaded"
    )


def read_config(path: str | Path) -> dict[str, Any]:
    """The checked ``config.json`` of the checkpoint at ``path`` (its directory or the config file).

    Raises:
        CheckpointError: missing files, malformed JSON, a config without the kleene format tag and model name, or
            fields of the wrong type (metrics, metadata, curve; a vocabulary whose length is not ``vocab_size``).
    """
    config_path = _config_path(Path(path))
    if not config_path.is_file():
        raise CheckpointError(f"{config_path.parent}: no {CONFIG_NAME}; not a kleene checkpoint")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{config_path}: malformed JSON: {error}") from error
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        found = config.get("format") if isinstance(config, dict) else type(config).__name__
        raise CheckpointError(f"{config_path}: format {found!r}, expected {FORMAT!r}")
    if not isinstance(config.get("model"), str) or not isinstance(config.get("kwargs"), dict):
        raise CheckpointError(f"{config_path}: needs a string 'model' and an object 'kwargs'")
    for key, kind, name in (("metrics", dict, "an object"), ("metadata", dict, "an object"), ("curve", list, "a list")):
        if config.get(key) is not None and not isinstance(config[key], kind):
            raise CheckpointError(f"{config_path}: {key!r} must be {name}, got {type(config[key]).__name__}")
    if not all(isinstance(point, dict) for point in config.get("curve") or []):
        raise CheckpointError(f"{config_path}: 'curve' must be a list of objects")
    metadata = config.get("metadata") or {}
    if metadata.get("training") is not None and not isinstance(metadata["training"], dict):
        raise CheckpointError(f"{config_path}: metadata 'training' must be an object")
    vocab, size = config.get("vocab"), config["kwargs"].get("vocab_size")
    if vocab is not None and (not isinstance(vocab, list) or (size is not None and len(vocab) != size)):
        shown = f"{len(vocab)} tokens" if isinstance(vocab, list) else type(vocab).__name__
        raise CheckpointError(f"{config_path}: 'vocab' must be a list of vocab_size = {size!r} tokens, got {shown}")
    return config


def load_checkpoint(path: str | Path, *, map_location: str | torch.device = "cpu") -> Checkpoint:
    """The model of the checkpoint at ``path``, rebuilt from the registry and loaded from safetensors.

    Raises:
        CheckpointError: not a checkpoint directory, malformed config, weights that are not safetensors or do not
            match the rebuilt model.
        UnknownModelError: the model name is not registered (import the module that registers it first).
        ModelConfigError: keyword arguments the model cannot be built from (an unknown keyword, a wrong type).
    """
    config = read_config(path)
    directory = _config_path(Path(path)).parent
    weights = directory / WEIGHTS_NAME
    if not weights.is_file():
        raise CheckpointError(f"{directory}: no {WEIGHTS_NAME}")
    model = build_model(config["model"], **config["kwargs"])
    try:
        load_model(model, str(weights), strict=True, device=str(map_location))
    except SafetensorError as error:
        raise CheckpointError(f"{weights}: not a safetensors file: {error}") from error
    except RuntimeError as error:  # missing / unexpected / mis-shaped tensors
        raise CheckpointError(f"{weights}: weights do not fit model {config['model']!r}: {error}") from error
    model.eval()
    vocab = Vocabulary.from_json(config["vocab"]) if config.get("vocab") is not None else None
    return Checkpoint(model, vocab, config)
