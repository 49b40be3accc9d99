"""``kleene train MODEL --data NAME``: train a registered model, save a safetensors checkpoint and print its metrics.

Examples::

    kleene train cnn --data sst2 --out runs/cnn-sst2
    kleene train bilstm --data subj --fold 3 --epochs 20 --set hidden_size=150
    kleene train lstm-lm --data tinyshakespeare --max-steps 500 --set hidden_size=128
    kleene train sopa --data my_reviews.tsv             # your own LABEL<TAB>TEXT lines (docs/data.md)
    kleene train sopa --data topics.csv --text-column body --label-column topic   # columns chosen by name
    kleene train lstm-lm --data story.txt               # a language model on your own plain text (characters)
    kleene train rrnn-b --help                          # the model's --set settings, types and defaults
    kleene train regex --data trec --rules examples/rules/trec.json   # a network initialised from rules (docs/rules.md)
    torchrun --nproc_per_node 2 -m kleene.cli train cnn --data sst2 --max-steps 100   # DistributedDataParallel, gloo
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kleene.cli.device import add_device_option, device_from

#: Stands for the registered model names in the help text; filled in only when help is shown (the registry loads torch).
MODELS = "<registered models>"


def _model_names() -> str:
    from kleene.nn.registry import registered_models

    return ", ".join(registered_models())


class _HelpWithSettings(argparse.Action):
    """``-h/--help``: the help, followed by the settings of the model named before it (``kleene train MODEL -h``)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help="show this help and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, *_: object) -> None:
        parser.print_help()
        model = getattr(namespace, "model", None)
        if isinstance(model, str):
            from kleene.cli.models import describe_settings
            from kleene.errors import KleeneError

            try:
                print("\n" + describe_settings(model))
            except KleeneError as error:
                print(f"\n{error}")
        else:
            print("\nthe settings of a model: kleene train MODEL --help, or kleene models MODEL")
        parser.exit()


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from kleene.cli._shared import filled_help

    parser = subparsers.add_parser(
        "train",
        add_help=False,
        formatter_class=filled_help(raw=True, **{MODELS: _model_names}),
        epilog=f"registered models: {MODELS}",
        help="train a registered model on a data set and save a checkpoint",
        description="Train a registered model (kleene.nn.registered_models(), e.g. cnn, bilstm, lstm-lm) with Adam, "
        "gradient clipping, early stopping and learning-rate halving on the development set; the best model is "
        "evaluated on the test set and saved as model.safetensors + config.json. Under torchrun every process trains "
        "on its shard with DistributedDataParallel (gloo).",
    )
    parser.add_argument("-h", "--help", action=_HelpWithSettings)
    parser.add_argument("model", help=f"registered model name: {MODELS}")
    parser.add_argument(
        "--data",
        required=True,
        help="sst2, subj, cr, mr, trec (classification); ptb, tinyshakespeare (LM); or the path of a file (CSV, TSV, "
        "JSONL, LABEL<TAB>TEXT lines; plain text for a language model) or of a folder of train/dev/test files "
        "(docs/data.md)",
    )
    parser.add_argument("--text-column", help="own data: the text column (a header name, or a number from 1)")
    parser.add_argument("--label-column", help="own data: the label column (a header name, or a number from 1)")
    parser.add_argument(
        "--task",
        choices=["classification", "language_model"],
        help="for a model that serves both (rrnn-b, qrnn, ...) and a data path: language_model reads it as plain "
        "text (default: classification)",
    )
    parser.add_argument("--out", type=Path, help="checkpoint directory (default: runs/MODEL-DATA)")
    parser.add_argument("--overwrite", action="store_true", help="replace a checkpoint already in --out")
    parser.add_argument(
        "--epochs",
        type=int,
        help="passes over the training set (default 10; without --epochs, --max-steps alone sets the length). With "
        "both, the first reached stops training, and a warning says when --epochs stops it before --max-steps",
    )
    parser.add_argument("--max-steps", type=int, help="stop after this many optimizer steps (see --epochs)")
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--clip", type=float, default=5.0, help="gradient-norm clipping (0: off)")
    parser.add_argument("--patience", type=int, default=30, help="evaluations without improvement before stopping")
    parser.add_argument("--halve-after", type=int, default=10, help="evaluations without improvement before lr /= 2")
    parser.add_argument("--eval-every", type=int, help="evaluate every N steps (default: every epoch)")
    parser.add_argument("--window", type=int, default=64, help="language models: tokens per training window")
    parser.add_argument(
        "--carry-state",
        action="store_true",
        help="language models: read the stream in order, each window continuing from the last one's state (TBPTT)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fold", type=int, default=0, help="cross-validation fold for subj, cr, mr (0-9)")
    parser.add_argument("--train-size", type=int, help="train on a seeded random subset of this many examples")
    parser.add_argument("--pretrained", default="glove", choices=["glove", "none"], help="classifier embeddings")
    parser.add_argument(
        "--rules", type=Path, help="regex model: a rules file, JSON {label: [regex, ...]} (docs/rules.md)"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="model keyword argument (JSON value)"
    )
    parser.add_argument("--threads", type=int, help="torch threads per process (default: torch's choice)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    add_device_option(parser)
    parser.set_defaults(handler=run)


def parse_settings(settings: list[str]) -> dict[str, Any]:
    """``["hidden_size=150", "dropout=0.2", "semiring=max-plus"]`` -> keyword arguments (JSON values, else strings).

    Raises:
        KleeneError: a setting without ``=``.
    """
    from kleene.errors import KleeneError

    kwargs: dict[str, Any] = {}
    for setting in settings:
        key, separator, value = setting.partition("=")
        if not separator or not key:
            raise KleeneError(f"--set {setting!r}: expected KEY=VALUE")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return kwargs


def run(args: argparse.Namespace) -> int:
    from kleene.cli._shared import set_threads
    from kleene.nn.checkpoint import check_checkpoint_target
    from kleene.nn.registry import check_settings

    model_kwargs = parse_settings(args.set)
    check_settings(args.model, model_kwargs)  # before any data is read: a wrong key answers at once
    out = args.out or Path("runs") / f"{args.model}-{Path(args.data).stem or 'data'}"
    check_checkpoint_target(out, overwrite=args.overwrite)

    from kleene.nn import TrainConfig, train

    set_threads(args.threads)
    config = TrainConfig(
        epochs=args.epochs if args.epochs is not None else (None if args.max_steps is not None else 10),
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        clip=args.clip,
        patience=args.patience,
        halve_after=args.halve_after,
        eval_every=args.eval_every,
        seed=args.seed,
        window=args.window,
        carry_state=args.carry_state,
        progress=not args.no_progress,
    )
    if args.rules is not None:
        from kleene.nn.rules import load_rules

        model_kwargs["rules"] = load_rules(args.rules).to_json()
    result = train(
        args.model,
        args.data,
        config=config,
        out_dir=out,
        model_kwargs=model_kwargs,
        fold=args.fold,
        train_size=args.train_size,
        pretrained=None if args.pretrained == "none" else args.pretrained,
        device=device_from(args),
        text_column=args.text_column,
        label_column=args.label_column,
        task=args.task,
        overwrite=args.overwrite,
    )
    if result.checkpoint is None:  # a rank other than 0 under torchrun
        return 0
    if args.json:
        print(json.dumps({"checkpoint": str(result.checkpoint), **result.metrics}))
    else:
        print(f"checkpoint: {result.checkpoint}")
        for key, value in result.metrics.items():
            print(f"  {key}: {value:.4f}" if isinstance(value, float) else f"  {key}: {value}")
    return 0
