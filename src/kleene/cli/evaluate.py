"""``kleene evaluate CHECKPOINT [--data NAME] [--split dev]``: a saved model's loss and accuracy on a data split.

The development split is the default: the test split is for the final number only and is read when asked.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kleene.cli._shared import add_column_options
from kleene.cli.device import add_device_option, device_from


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="evaluate a checkpoint on a data split",
        description="Load a checkpoint written by `kleene train` (safetensors + config.json; nothing is unpickled) and "
        "print its loss and accuracy (and perplexity for language models) on a split of a data set.",
    )
    parser.add_argument("checkpoint", type=Path, help="checkpoint directory")
    parser.add_argument("--data", help="data set or path (default: the one it was trained on)")
    add_column_options(parser)
    parser.add_argument(
        "--split", default="dev", choices=["train", "dev", "valid", "test"], help="split to evaluate (default: dev)"
    )
    parser.add_argument("--fold", type=int, help="cross-validation fold (default: the training fold)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_device_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kleene.cli.report import warn_if_chance
    from kleene.nn.checkpoint import CheckpointError, load_checkpoint
    from kleene.nn.training import TrainConfig, Trainer

    checkpoint = load_checkpoint(args.checkpoint, map_location=device_from(args))
    metadata = checkpoint.config.get("metadata") or {}
    data_name = args.data or metadata.get("data")
    if not isinstance(data_name, str) or not data_name:
        raise CheckpointError(f"{args.checkpoint}: no data set name recorded (got {data_name!r}); pass --data")
    if checkpoint.vocab is None:
        raise CheckpointError(f"{args.checkpoint}: the checkpoint holds no vocabulary")
    training = metadata.get("training") or {}
    window = training.get("window", 64)
    carry_state = bool(training.get("carry_state", False))
    config = TrainConfig(batch_size=args.batch_size, window=window, carry_state=carry_state, progress=False)
    data = checkpoint.read_data(data_name, args.fold, text_column=args.text_column, label_column=args.label_column)
    trainer = Trainer(
        checkpoint.model,
        data,
        checkpoint.vocab,
        config,
        model_name=checkpoint.config["model"],
        model_kwargs=checkpoint.config["kwargs"],
    )
    metrics = trainer.evaluate(args.split)
    if args.json:
        print(json.dumps({"checkpoint": str(args.checkpoint), "data": data_name, "split": args.split, **metrics}))
    else:
        print(f"{args.checkpoint} on {data_name} ({args.split}):")
        for key, value in metrics.items():
            print(f"  {key}: {value:.4f}")
    warn_if_chance(metrics["accuracy"], data, args.split)
    return 0
