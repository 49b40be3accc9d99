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
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kleene.errors import KleeneError, ModelConfigError, UnknownModelError, shown

if TYPE_CHECKING:  # pragma: no cover  (torch loads with the model modules: listing model names does not need it)
    from torch import nn

__all__ = [
    "ModelBuilder",
    "ModelConfigError",
    "Setting",
    "UnknownModelError",
    "build_model",
    "check_settings",
    "model_builder",
    "model_settings",
    "model_tasks",
    "register_model",
    "registered_models",
]

ModelBuilder = Callable[..., "nn.Module"]
_REGISTRY: dict[str, ModelBuilder] = {}


def register_model(name: str, builder: ModelBuilder, *, replace: bool = False) -> None:
    """Make ``build_model(name, ...)`` call ``builder``.

    Raises:
        ModelConfigError: ``name`` is taken (unless ``replace``); a built-in model's name counts as taken.
    """
    module = BUILTIN_MODELS.get(name)
    if module is not None and f"{__package__}.{module}" not in sys.modules:
        _import_builtin_models(name)  # the built-in registers first, so that only ``replace`` replaces it
    if name in _REGISTRY and not replace and _REGISTRY[name] is not builder:
        raise ModelConfigError(f"register_model: {name!r} is already registered")
    _REGISTRY[name] = builder


def registered_models() -> list[str]:
    """The names ``build_model`` takes: the built-in models and those ``register_model`` added.

    Caution:
        A built-in model's module is not imported here (``BUILTIN_MODELS`` names it); ``build_model`` imports it.
    """
    return sorted({*BUILTIN_MODELS, *_REGISTRY})


def model_builder(name: str) -> ModelBuilder:
    """The builder registered as ``name``.

    Raises:
        UnknownModelError: no such model (the message lists the registered ones).
    """
    if name not in _REGISTRY:
        _import_builtin_models(name)
    if name not in _REGISTRY:
        _import_builtin_models()  # the message lists every model
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
    from kleene.data.checks import check_count  # torch: loaded with the model's module in any case

    builder = model_builder(name)
    for key in ("vocab_size", "num_classes"):
        if key in kwargs:
            check_count(kwargs[key], f"model {name!r}: {key}", minimum=1, error=ModelConfigError)
    try:
        return builder(**kwargs)
    except KleeneError:
        raise
    except (TypeError, ValueError, RuntimeError, IndexError, OverflowError) as error:
        given = ", ".join(f"{key}={shown(value)}" for key, value in kwargs.items())
        settings = model_settings(name)
        valid = f" (its settings: {', '.join(s.name for s in settings)})" if settings else ""
        raise ModelConfigError(f"model {name!r} cannot be built from {given}: {error}{valid}") from error


# -- the settings of a model, read from its builder's signature ---------------------------------------------------
#: Keyword arguments the trainer fills in itself (``prepare``); a builder with ``wants_vocabulary`` also gets these.
TRAINER_ARGUMENTS = ("vocab_size", "num_classes")
VOCABULARY_ARGUMENTS = ("vocab", "labels")


@dataclass(frozen=True)
class Setting:
    """One keyword argument of a model (``kleene train MODEL --set NAME=VALUE``): its annotation as written, and its
    default per task (``"classification"`` / ``"language_model"``; one key ``""`` when the task is not known);
    ``required`` when it has none."""

    name: str
    annotation: str
    defaults: dict[str, Any]
    required: bool = False

    def describe(self) -> str:
        """``hidden_size: int = 128 (classification), 256 (language_model)`` or ``rules: RuleSet (required)``."""
        if self.required:
            return f"{self.name}: {self.annotation} (required)"
        values = {repr(value) for value in self.defaults.values()}
        if len(values) == 1:
            return f"{self.name}: {self.annotation} = {values.pop()}"
        per_task = ", ".join(f"{value!r} ({task})" for task, value in self.defaults.items())
        return f"{self.name}: {self.annotation} = {per_task}"


def _targets(builder: Callable[..., Any]) -> tuple[list[type], dict[str, Any]]:
    """The classes a builder's ``**kwargs`` go to (the module classes it names: its closure's and globals'), and
    the keyword arguments it fixes itself (a closure variable ``fixed``)."""
    from torch import nn

    try:
        found = inspect.getclosurevars(builder)
    except TypeError:  # a class or a builtin: no closure
        return [], {}
    values = [*found.nonlocals.values(), *found.globals.values()]
    classes = [value for value in values if isinstance(value, type) and issubclass(value, nn.Module)]
    fixed = found.nonlocals.get("fixed")
    return classes, dict(fixed) if isinstance(fixed, dict) else {}


def _class_parameters(cls: type) -> list[inspect.Parameter]:
    """The keyword arguments of ``cls(...)``, following ``**options`` up the classes' ``__init__`` methods; a parent's
    positional parameters without a default are the subclass's to pass, not the user's."""
    from torch import nn

    parameters: list[inspect.Parameter] = []
    seen: set[str] = set()
    for index, owner in enumerate(klass for klass in cls.__mro__ if "__init__" in vars(klass)):
        signature = inspect.signature(vars(owner)["__init__"])
        forwards = False
        for parameter in list(signature.parameters.values())[1:]:
            if parameter.kind is parameter.VAR_KEYWORD:
                forwards = True
            elif parameter.kind is not parameter.VAR_POSITIONAL and parameter.name not in seen:
                seen.add(parameter.name)
                parent_positional = index > 0 and parameter.default is parameter.empty
                if not parent_positional:
                    parameters.append(parameter)
        if not forwards or owner is nn.Module:
            break
    return parameters


def model_settings(name: str) -> list[Setting]:
    """The settings (``--set`` keys) of the model registered as ``name``, read from its builder's signature and, when
    the builder forwards ``**kwargs``, from the module classes it builds (their ``__init__``, up to ``nn.Module``).
    The arguments the trainer passes (``vocab_size``, ``num_classes``, and ``vocab``, ``labels`` for a builder with
    ``wants_vocabulary``) and those the builder fixes are left out.

    Raises:
        UnknownModelError: no model registered as ``name``.
    """
    builder = model_builder(name)
    supplied = set(TRAINER_ARGUMENTS) | (
        set(VOCABULARY_ARGUMENTS) if getattr(builder, "wants_vocabulary", False) else set()
    )
    sources: list[tuple[str, list[inspect.Parameter]]]
    if isinstance(builder, type):
        sources = [(getattr(builder, "task", ""), _class_parameters(builder))]
        fixed: dict[str, Any] = {}
    else:
        own = [p for p in inspect.signature(builder).parameters.values() if p.kind is not p.VAR_POSITIONAL]
        classes, fixed = _targets(builder)
        sources = [("", [p for p in own if p.kind is not p.VAR_KEYWORD])]
        if any(p.kind is p.VAR_KEYWORD for p in own):
            sources += [(getattr(cls, "task", cls.__name__), _class_parameters(cls)) for cls in classes]
    settings: dict[str, Setting] = {}
    for task, parameters in sources:
        for parameter in parameters:
            if parameter.name in supplied or parameter.name in fixed:
                continue
            annotation = parameter.annotation if parameter.annotation is not parameter.empty else "Any"
            annotation = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
            known = settings.get(parameter.name)
            if parameter.default is parameter.empty:
                if known is None:
                    settings[parameter.name] = Setting(parameter.name, annotation, {}, required=True)
                continue
            defaults = {**(known.defaults if known else {}), task: parameter.default}
            settings[parameter.name] = Setting(parameter.name, annotation, defaults)
    return list(settings.values())


def model_tasks(name: str) -> list[str]:
    """The tasks (``"classification"``, ``"language_model"``) the model registered as ``name`` can be built for: its
    class's ``task``, or those of the module classes its builder builds (or a ``task`` attribute of the builder).

    Raises:
        UnknownModelError: no model registered as ``name``.
    """
    builder = model_builder(name)
    if isinstance(getattr(builder, "task", None), str):
        return [builder.task]  # type: ignore[attr-defined]
    classes = [builder] if isinstance(builder, type) else _targets(builder)[0]
    return sorted({task for cls in classes if isinstance(task := getattr(cls, "task", None), str)})


_PLAIN_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def check_settings(name: str, kwargs: dict[str, Any]) -> None:
    """Check a user's settings of model ``name`` against ``model_settings(name)``: every key must be a setting, and a
    value of a setting annotated ``int``, ``float``, ``bool`` or ``str`` (or one of them ``| None``) of that type.

    Raises:
        UnknownModelError: no model registered as ``name``.
        ModelConfigError: an unknown key (the message lists the valid ones) or a value of the wrong type (it names
            the key, the value and the type expected).
    """
    settings = {setting.name: setting for setting in model_settings(name)}
    for key, value in kwargs.items():
        setting = settings.get(key)
        if setting is None:
            valid = ", ".join(settings) or "none"
            raise ModelConfigError(
                f"model {name!r} has no setting {key!r} (--set {key}={shown(value)}); its settings: "
                f"{valid} (kleene models {name})"
            )
        parts = [part.strip() for part in setting.annotation.split("|")]
        optional = "None" in parts
        kinds = [part for part in parts if part != "None"]
        if len(kinds) != 1 or kinds[0] not in _PLAIN_TYPES or (value is None and optional):
            continue
        expected = _PLAIN_TYPES[kinds[0]]
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            raise ModelConfigError(
                f"model {name!r}: setting {key} must be {setting.annotation}, got {shown(value)} "
                f"({type(value).__name__}); its settings: {', '.join(settings)}"
            )


#: Each built-in model's module (under ``kleene.nn``), which registers it when imported: building one model imports
#: only its module. A new built-in model adds its line here (tests check the table against what the modules
#: register).
BUILTIN_MODELS: dict[str, str] = {
    "bilstm": "baselines",
    "cnn": "baselines",
    "lstm": "baselines",
    "lstm-lm": "baselines",
    "isan": "isan",
    "qrnn": "qrnn",
    "rcnn": "rcnn",
    "regex": "rules",
    "rrnn-b": "rrnn",
    "rrnn-b-maxplus": "rrnn",
    "rrnn-c": "rrnn",
    "rrnn-f": "rrnn",
    "sopa": "sopa",
    "sru": "sru",
}


def _import_builtin_models(name: str | None = None) -> None:
    """Import the module of built-in model ``name`` (all of them when ``name`` is None or not built in)."""
    module = BUILTIN_MODELS.get(name) if name is not None else None
    for module_name in [module] if module is not None else sorted(set(BUILTIN_MODELS.values())):
        importlib.import_module(f"{__package__}.{module_name}")
