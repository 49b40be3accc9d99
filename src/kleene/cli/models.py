"""``kleene models [MODEL]``: the registered models, their tasks and their ``--set`` settings (types and defaults).

Everything shown is read from the registry (``kleene.nn.registry.model_settings``, ``model_tasks``): the builders'
own signatures, never a list kept by hand.
"""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list the registered models, or one model's --set settings with their types and defaults",
        description="Without MODEL: every registered model and the tasks it trains for. With MODEL: its settings, the "
        "keys of `kleene train MODEL --set KEY=VALUE`, with their types and defaults (per task where they differ).",
    )
    parser.add_argument("model", nargs="?", help="a registered model name")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def describe_settings(model: str) -> str:
    """The lines that ``kleene models MODEL`` and ``kleene train MODEL --help`` show for ``model``'s settings.

    Raises:
        UnknownModelError: no model registered as ``model``.
    """
    from kleene.nn.registry import model_settings, model_tasks

    lines = [f"model {model} ({', '.join(model_tasks(model))}): --set KEY=VALUE (a JSON value, else a string)"]
    lines += [f"  {setting.describe()}" for setting in model_settings(model)] or ["  (no settings)"]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from kleene.nn.registry import model_settings, model_tasks, registered_models

    if args.model is None:
        tasks = {name: model_tasks(name) for name in registered_models()}
        if args.json:
            print(json.dumps(tasks))
        else:
            for name, served in tasks.items():
                print(f"{name:16} {', '.join(served)}")
            print("kleene models MODEL: its --set settings")
        return 0
    if args.json:
        settings = [
            {"name": s.name, "type": s.annotation, "defaults": s.defaults, "required": s.required}
            for s in model_settings(args.model)
        ]
        print(json.dumps({"model": args.model, "tasks": model_tasks(args.model), "settings": settings}, default=repr))
    else:
        print(describe_settings(args.model))
    return 0
