"""kleene.nn: trainable layers built from automata, delayed RNNs, and the training utilities.

Importing ``kleene.nn`` loads nothing heavy (not even torch): each exported name's module loads when the name is
first read (``kleene.nn.RRNNClassifier``), and the registry imports only the module of the model it builds, so a
checkpoint of one model does not import every layer.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover  (what _LAZY loads, spelled out for type checkers)
    from kleene.nn.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
    from kleene.nn.delayed import ConversionError, Delayed, DelayedStack, delayed_from_stacked, delayed_loss_mask
    from kleene.nn.generate import Generation, generate
    from kleene.nn.isan import ISANClassifier, ISANLanguageModel, ISANLayer
    from kleene.nn.qrnn import QRNNClassifier, QRNNEncoderDecoder, QRNNLanguageModel, QRNNLayer
    from kleene.nn.rcnn import RCNNClassifier, RCNNLanguageModel, RCNNLayer
    from kleene.nn.registry import ModelConfigError, UnknownModelError, build_model, register_model, registered_models
    from kleene.nn.rrnn import RationalLayer, RationalStack, RRNNClassifier, RRNNLanguageModel, RRNNLayer
    from kleene.nn.rules import (
        AutomatonLayer,
        RegexClassifier,
        RuleError,
        RuleSet,
        RulesPredictor,
        load_rules,
        parse_rules,
    )
    from kleene.nn.sopa import SoftPatterns, SoPaClassifier, SoPaError
    from kleene.nn.sru import SRUClassifier, SRULanguageModel, SRULayer
    from kleene.nn.training import TrainConfig, Trainer, TrainingError, TrainResult, prepare, seed_everything, train

#: Each exported name's module (under ``kleene.nn``), imported when the name is first read.
_LAZY: dict[str, str] = {
    **dict.fromkeys(["Checkpoint", "CheckpointError", "load_checkpoint", "save_checkpoint"], "checkpoint"),
    **dict.fromkeys(
        ["ConversionError", "Delayed", "DelayedStack", "delayed_from_stacked", "delayed_loss_mask"], "delayed"
    ),
    **dict.fromkeys(["Generation", "generate"], "generate"),
    **dict.fromkeys(["ISANClassifier", "ISANLanguageModel", "ISANLayer"], "isan"),
    **dict.fromkeys(["QRNNClassifier", "QRNNEncoderDecoder", "QRNNLanguageModel", "QRNNLayer"], "qrnn"),
    **dict.fromkeys(["RCNNClassifier", "RCNNLanguageModel", "RCNNLayer"], "rcnn"),
    **dict.fromkeys(
        ["ModelConfigError", "UnknownModelError", "build_model", "register_model", "registered_models"], "registry"
    ),
    **dict.fromkeys(["RationalLayer", "RationalStack", "RRNNClassifier", "RRNNLanguageModel", "RRNNLayer"], "rrnn"),
    **dict.fromkeys(
        ["AutomatonLayer", "RegexClassifier", "RuleError", "RuleSet", "RulesPredictor", "load_rules", "parse_rules"],
        "rules",
    ),
    **dict.fromkeys(["SoftPatterns", "SoPaClassifier", "SoPaError"], "sopa"),
    **dict.fromkeys(["SRUClassifier", "SRULanguageModel", "SRULayer"], "sru"),
    **dict.fromkeys(
        ["TrainConfig", "Trainer", "TrainingError", "TrainResult", "prepare", "seed_everything", "train"], "training"
    ),
}


def __getattr__(name: str) -> Any:
    """``kleene.nn.NAME`` for a name of ``_LAZY``: imports its module once (the name is then a module attribute)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


class _Package(types.ModuleType):
    """``kleene.nn`` itself. The import system sets each submodule it loads as an attribute of the package; where an
    exported name is also a submodule's name (``generate``, the function, and ``kleene.nn.generate``, its module),
    the exported object keeps the name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "AutomatonLayer",
    "Checkpoint",
    "CheckpointError",
    "ConversionError",
    "Delayed",
    "DelayedStack",
    "Generation",
    "ISANClassifier",
    "ISANLanguageModel",
    "ISANLayer",
    "ModelConfigError",
    "QRNNClassifier",
    "QRNNEncoderDecoder",
    "QRNNLanguageModel",
    "QRNNLayer",
    "RCNNClassifier",
    "RCNNLanguageModel",
    "RCNNLayer",
    "RRNNClassifier",
    "RRNNLanguageModel",
    "RRNNLayer",
    "RationalLayer",
    "RationalStack",
    "RegexClassifier",
    "RuleError",
    "RuleSet",
    "RulesPredictor",
    "SRUClassifier",
    "SRULanguageModel",
    "SRULayer",
    "SoPaClassifier",
    "SoPaError",
    "SoftPatterns",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingError",
    "UnknownModelError",
    "build_model",
    "delayed_from_stacked",
    "delayed_loss_mask",
    "generate",
    "load_checkpoint",
    "load_rules",
    "parse_rules",
    "prepare",
    "register_model",
    "registered_models",
    "save_checkpoint",
    "seed_everything",
    "train",
]
