"""The model registry: ``register_model(name, builder)`` and ``build_model(name, **kwargs)``.

A builder takes JSON-serializable keyword arguments and returns a module following the trainer's protocol:

- attribute ``task``: ``"classification"`` or ``"language_model"``;
- ``forward(tokens, lengths)`` with ``tokens`` (B, T) long ids (0 = padding) and ``lengths`` (B,), returning class
  logits (B, C) or next-token logits (B, T, V);
- optionally an ``embedding`` (``torch.nn.Embedding``) that the trainer may fill with pretrained vectors.

The trainer passes ``vocab_size`` and, for classification, ``num_classes``; checkpoints store the name and every
keyword argument, so ``build_model(name, **kwargs)`` rebuilds the module before its weights are loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from torch import nn

from kleene.data.checks import check_count
from kleene.errors import KleeneError, ModelConfigError, UnknownModelError

__all__ = [
    "ModelBuilder",
    "ModelConfigError",
    "UnknownModelError",
    "build_model",
    "model_builder",
    "register_model",
    "registered_models",
]

ModelBuilder = Callable[..., nn.Module]
_REGISTRY: dict[str, ModelBuilder] = {}


def register_model(name: str, builder: ModelBuilder, *, replace: bool = False) -> None:
    """Make ``build_model(name, ...)`` call ``builder``.

    Raises:
        ValueError: ``name`` is taken (unless ``replace``).
    """
    if name in _REGISTRY and not replace and _REGISTRY[name] is not builder:
        raise ValueError(f"register_model: {name!r} is already registered")
    _REGISTRY[name] = builder


def registered_models() -> list[str]:
    _import_builtin_models()
    return sorted(_REGISTRY)


def model_builder(name: str) -> ModelBuilder:
    """The builder registered as ``name``.

    Raises:
        UnknownModelError: no such model (the message lists the registered ones).
    """
    _import_builtin_models()
    if name not in _REGISTRY:
        raise UnknownModelError(f"unknown model {name!r} (registered: {', '.join(sorted(_REGISTRY))})")
    return _REGISTRY[name]


def build_model(name: str, **kwargs: Any) -> nn.Module:
    """``builder(**kwargs)`` of the model registered as ``name``.

    Raises:
        UnknownModelError: no model registered as ``name``.
        ModelConfigError: ``vocab_size`` or ``num_classes`` that is not an integer >= 1, or keyword arguments the
            builder refuses (an unknown keyword, a wrong type or value: the message names the model, the arguments
            and the builder's own complaint).
    """
    builder = model_builder(name)
    for key in ("vocab_size", "num_classes"):
        if key in kwargs:
            check_count(kwargs[key], f"model {name!r}: {key}", minimum=1, error=ModelConfigError)
    try:
        return builder(**kwargs)
    except KleeneError:
        raise
    except (TypeError, ValueError, RuntimeError, IndexError, OverflowError) as error:
        shown = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
        raise ModelConfigError(f"model {name!r} cannot be built from {shown}: {error}") from error


#: Modules of kleene.nn that register models when imported; a new layer module adds its name here.
MODEL_MODULES: list[str] = ["baselines", "sopa", "rrnn", "qrnn", "sru", "rcnn", "isan", "rules"]


def _import_builtin_models() -> None:
    for module in MODEL_MODULES:
        importlib.import_module(f"{__package__}.{module}")
