"""Rational Recurrences Table 5 on CPU: RRNN(B), RRNN(B) max-plus, RRNN(C), RRNN(F) and an LSTM classifying subj and
CR with equal parameter budgets.

Every model is the paper's §6.3 classifier: frozen 50-d GloVe (unit length, shared by all models and excluded from
the budget), a unidirectional 2-layer recurrent stack with the three dropouts of Appendix E, the last hidden state,
a 2-layer tanh MLP. Each model's hidden size is the one whose trainable parameter count (recurrent layers + MLP) is
closest to ``--budget``. All models share one setting (Adam, learning rate, dropouts, batch 64) and train for the
same number of steps (a fixed step budget; no early stopping); the development set is checked after every epoch,
the learning rate is halved after ``--halve-after`` checks without a gain (Appendix E halves after 10 of at most 500
epochs), and the best development epoch is tested.

    python examples/rrnn_table5.py                    # subj and CR, folds 0 1, about 25 minutes on one thread
    python examples/rrnn_table5.py --folds 0 1 2 3 4 --steps 500
    python examples/rrnn_table5.py --quick            # a few steps of every model on CR (the smoke test)

Writes ``results/rrnn_table5.{md,json,png}`` (``--out`` to change the directory).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kleene.nn import TrainConfig, build_model, train

#: variant -> (registered model, its options): the paper's RRNN variants in the semirings it trains them in
#: (B, C, F real; B max-plus, §5.2), each through the layers' one ``semiring=`` argument.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "lstm": ("lstm", {}),
    "rrnn-b": ("rrnn-b", {"semiring": "real"}),
    "rrnn-b-maxplus": ("rrnn-b", {"semiring": "max-plus"}),
    "rrnn-c": ("rrnn-c", {"semiring": "real"}),
    "rrnn-f": ("rrnn-f", {"semiring": "real"}),
}
MODELS = tuple(VARIANTS)
LABELS = {
    "lstm": "LSTM",
    "lstm-lm": "LSTM",
    "rrnn-b": "RRNN(B)",
    "rrnn-b-maxplus": "RRNN(B) max-plus",
    "rrnn-c": "RRNN(C)",
    "rrnn-f": "RRNN(F)",
}
#: Rational Recurrences Table 5: test accuracy (mean, standard deviation over 5 seeds), 300-d GloVe 840B.
PAPER_TABLE5 = {
    "subj": {"lstm": (93.3, 0.6), "rrnn-b": (93.9, 0.4), "rrnn-c": (93.8, 0.6), "rrnn-b-maxplus": (92.6, 0.5),
             "rrnn-f": (94.8, 0.5)},
    "cr": {"lstm": (82.4, 1.5), "rrnn-b": (84.1, 1.0), "rrnn-c": (84.5, 0.9), "rrnn-b-maxplus": (84.3, 0.5),
           "rrnn-f": (85.1, 0.5)},
}  # fmt: skip
BATCH = 64


def trainable_parameters(model: nn.Module) -> int:
    return sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)


def hidden_size_for_budget(count: Callable[[int], int], budget: int, largest: int = 4096) -> tuple[int, int]:
    """(hidden size, parameter count) with the count closest to ``budget``; ``count(hidden)`` must be increasing.

    Raises:
        ValueError: even ``largest`` units stay under the budget.
    """
    high = 1
    while count(high) < budget:  # doubling first: never builds a model much larger than the budget
        if high >= largest:
            raise ValueError(f"a budget of {budget} parameters needs more than {largest} hidden units")
        high = min(2 * high, largest)
    low = 1  # invariant: count(high) >= budget; search the smallest such size
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if count(middle) < budget else (low, middle)
    candidates = [size for size in (high - 1, high) if size >= 1]
    best = min(candidates, key=lambda size: abs(count(size) - budget))
    return best, count(best)


def classifier_budget(model: str, budget: int, shared: dict[str, Any]) -> tuple[int, int]:
    """The hidden size of a classifier ``model`` (frozen embeddings) whose trainable parameters match ``budget``."""

    name, options = VARIANTS[model]

    def count(hidden: int) -> int:
        return trainable_parameters(
            build_model(name, vocab_size=2, num_classes=2, hidden_size=hidden, **options, **shared)
        )

    return hidden_size_for_budget(count, budget)


def load_average() -> float:
    return os.getloadavg()[0]


def summarize(values: Sequence[float]) -> tuple[float, float]:
    """(mean, sample standard deviation; 0 for one value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["subj", "cr"], choices=["subj", "cr", "mr", "sst2"])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--folds", nargs="+", type=int, default=[0, 1], help="cross-validation folds (default 0 1)")
    parser.add_argument("--budget", type=int, default=150_000, help="trainable parameters per model")
    parser.add_argument("--steps", type=int, default=800, help="training steps of every run (default 800)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--dropout", type=float, default=0.2, help="embedding, vertical and recurrent dropout")
    parser.add_argument("--halve-after", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--quick", action="store_true", help="CR fold 0, a 3,000-parameter budget, 3 steps each")
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    if args.quick:
        args.datasets, args.folds, args.budget, args.steps = ["cr"], [0], 3_000, 3
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    shared = {"embedding_dropout": args.dropout, "vertical_dropout": args.dropout, "recurrent_dropout": args.dropout}
    sizes = {model: classifier_budget(model, args.budget, shared) for model in args.models}
    for model, (hidden, parameters) in sizes.items():
        print(f"{LABELS[model]:>18}: hidden {hidden:4d}, {parameters:,} trainable parameters", flush=True)
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    for dataset in args.datasets:
        for fold in args.folds:
            for model in args.models:
                config = TrainConfig(
                    epochs=args.steps,  # at least one step an epoch: max_steps ends the run
                    max_steps=args.steps,
                    batch_size=BATCH,
                    lr=args.lr,
                    patience=args.steps + 1,
                    halve_after=args.halve_after,
                    seed=args.seed,
                    progress=not args.no_progress,
                )
                load_before, run_started = load_average(), time.monotonic()
                name, options = VARIANTS[model]
                kwargs = {"hidden_size": sizes[model][0], **options, **shared}
                result = train(name, dataset, config=config, fold=fold, model_kwargs=kwargs)
                metrics = result.metrics
                rows.append(
                    {
                        "dataset": dataset,
                        "fold": fold,
                        "model": model,
                        "semiring": VARIANTS[model][1].get("semiring", "–"),
                        "hidden_size": sizes[model][0],
                        "parameters": int(metrics["parameters"]),
                        "steps": int(metrics["steps"]),
                        "best_step": int(metrics["best_step"]),
                        "dev_accuracy": float(metrics["dev_accuracy"]),
                        "test_accuracy": float(metrics["test_accuracy"]),
                        "train_seconds": float(metrics["train_seconds"]),
                        "wall_seconds": time.monotonic() - run_started,
                        "train_tokens_per_s": float(metrics["train_tokens_per_s"]),
                        "load_average": (load_before + load_average()) / 2,
                        "curve": [
                            {"step": point["step"], "dev_accuracy": point["dev_accuracy"], "lr": point["lr"]}
                            for point in result.curve
                        ],
                    }
                )
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "curve"}), flush=True)
    total_seconds = time.monotonic() - started
    command = "python examples/rrnn_table5.py " + " ".join(sys.argv[1:] if argv is None else argv)
    (args.out / "rrnn_table5.json").write_text(
        json.dumps(
            {"command": command.strip(), "settings": {**vars(args), "out": str(args.out)}, "shared": shared,
             "total_seconds": total_seconds, "rows": rows},
            indent=1,
        ) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    (args.out / "rrnn_table5.md").write_text(report(args, command.strip(), rows, total_seconds), encoding="utf-8")
    plot(args, rows, args.out / "rrnn_table5.png")
    return 0


def report(args: argparse.Namespace, command: str, rows: list[dict[str, Any]], total_seconds: float) -> str:
    """The markdown table: per data set and model, mean (± std over folds) test and dev accuracy and the budgets."""
    folds = ", ".join(map(str, args.folds))
    loads = [row["load_average"] for row in rows]
    lines = [
        "# Rational Recurrences Table 5 on CPU: subj and CR, equal parameter budgets",
        "",
        f"Command: `{command}`",
        "",
        f"Frozen 50-d GloVe (unit length); 2 unidirectional layers; last hidden state -> 2-layer tanh MLP (100); "
        f"budget {args.budget:,} trainable parameters (recurrent layers + MLP; embeddings excluded); "
        f"Adam lr {args.lr}, batch {BATCH}, embedding/vertical/recurrent dropout {args.dropout}; "
        f"{args.steps} steps each (no early stopping), dev checked every epoch, lr halved after "
        f"{args.halve_after} checks without a gain, best dev epoch tested; seed {args.seed}; "
        f"folds {folds} of the 10-fold split (kleene.data); {torch.get_num_threads()} thread(s). "
        f"Total {total_seconds / 60:.1f} min; 1-minute load average during the runs "
        f"{min(loads):.1f}-{max(loads):.1f}.",
        "",
        "Accuracy is the mean over folds (± sample standard deviation when there are several); seconds are the "
        "mean wall-clock of one run (data loading, training, evaluation).",
        "",
        "| data | model | semiring | hidden | parameters | steps | dev acc | test acc | paper test acc | seconds | "
        "tokens/s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for dataset in args.datasets:
        for model in args.models:
            runs = [row for row in rows if row["dataset"] == dataset and row["model"] == model]
            test_mean, test_std = summarize([100 * run["test_accuracy"] for run in runs])
            dev_mean, dev_std = summarize([100 * run["dev_accuracy"] for run in runs])
            spread = len(runs) > 1
            paper = PAPER_TABLE5.get(dataset, {}).get(model)
            lines.append(
                f"| {dataset} | {LABELS[model]} | {VARIANTS[model][1].get('semiring', '–')} | "
                f"{runs[0]['hidden_size']} | {runs[0]['parameters']:,} | "
                f"{runs[0]['steps']} | {dev_mean:.1f}"
                + (f" ± {dev_std:.1f}" if spread else "")
                + f" | {test_mean:.1f}"
                + (f" ± {test_std:.1f}" if spread else "")
                + " | "
                + (f"{paper[0]} ± {paper[1]}" if paper else "–")
                + " | "
                f"{statistics.fmean(run['wall_seconds'] for run in runs):.0f} | "
                f"{statistics.fmean(run['train_tokens_per_s'] for run in runs):,.0f} |"
            )
    lines += [
        "",
        "Per fold (test accuracy, %):",
        "",
        "| data | model | " + " | ".join(f"fold {f}" for f in args.folds) + " |",
    ]
    lines.append("|---|---|" + "---:|" * len(args.folds))
    for dataset in args.datasets:
        for model in args.models:
            by_fold = {row["fold"]: row for row in rows if row["dataset"] == dataset and row["model"] == model}
            cells = " | ".join(f"{100 * by_fold[f]['test_accuracy']:.1f}" for f in args.folds)
            lines.append(f"| {dataset} | {LABELS[model]} | {cells} |")
    return "\n".join(lines) + "\n"


def plot(args: argparse.Namespace, rows: list[dict[str, Any]], path: Path) -> None:
    """Grouped bars: mean test accuracy per data set and model (error bars: std over folds; dots: the paper)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / len(args.models)
    lowest = 100.0
    for index, model in enumerate(args.models):
        means, errors, papers = [], [], []
        for dataset in args.datasets:
            mean, std = summarize(
                [100 * r["test_accuracy"] for r in rows if r["dataset"] == dataset and r["model"] == model]
            )
            means.append(mean)
            errors.append(std)
            papers.append(PAPER_TABLE5.get(dataset, {}).get(model, (math.nan, 0.0))[0])
        positions = [d + (index - (len(args.models) - 1) / 2) * width for d in range(len(args.datasets))]
        axes.bar(positions, means, width, yerr=errors, capsize=2, label=LABELS[model])
        axes.plot(positions, papers, "k.", markersize=5, label="paper" if index == 0 else None)
        lowest = min(lowest, *means)
    axes.set_xticks(range(len(args.datasets)), args.datasets)
    axes.set_ylim(max(0.0, math.floor(lowest / 5) * 5 - 5), 100)
    axes.set_ylabel("test accuracy (%)")
    axes.set_title(f"equal budgets of {args.budget:,} parameters, 50-d GloVe, folds {args.folds}")
    axes.legend(fontsize=7, ncol=3, loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    raise SystemExit(main())
