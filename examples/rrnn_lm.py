"""Rational Recurrences Table 3 on CPU: RRNN(B), RRNN(B) max-plus, RRNN(C), RRNN(F) and an LSTM as character-level
language models of tiny-shakespeare (or word-level PTB) with equal parameter budgets.

Every model is embedding -> 2 unidirectional recurrent layers -> linear softmax layer; the RRNNs have the output
gates the paper uses for language modelling (Appendix D), the LSTM is ``lstm-lm`` with two layers. Each model's
hidden size is the one whose total parameter count (embeddings and softmax included, as in Table 3) is closest to
``--budget``. All models share one setting (Adam, learning rate, no dropout by default, batches of ``--batch``
windows of ``--window`` tokens, each window starting from a zero state) and train for the same number of steps; the
development loss is measured every ``--eval-every`` steps (the learning curve), the learning rate is halved after
``--halve-after`` measurements without a gain, and the best development point is tested.

    python examples/rrnn_lm.py                          # tiny-shakespeare, about 20 minutes on one thread
    python examples/rrnn_lm.py --data ptb --budget 2000000 --steps 1000
    python examples/rrnn_lm.py --quick                  # a few steps of every model (the smoke test)

Writes ``results/rrnn_lm.{md,json,png}`` (``--out`` to change the directory): bits per character for characters,
perplexity for words.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from rrnn_table5 import LABELS, hidden_size_for_budget, load_average, trainable_parameters

from kleene.data import Vocabulary, load_language_model
from kleene.nn import TrainConfig, build_model, train

MODELS = ("lstm-lm", "rrnn-b", "rrnn-b-maxplus", "rrnn-c", "rrnn-f")
#: Rational Recurrences Table 3, two layers and 10M parameters (LSTM: 24M): PTB test perplexity.
PAPER_TABLE3 = {"lstm-lm": 71.4, "rrnn-b": 69.2, "rrnn-b-maxplus": 71.7, "rrnn-c": 69.5, "rrnn-f": 66.3}


def model_options(model: str, embedding_dim: int, dropout: float) -> dict[str, Any]:
    """Keyword arguments (besides ``vocab_size`` and ``hidden_size``) giving ``model`` 2 layers and the dropout."""
    if model == "lstm-lm":  # dropout on the embeddings and on the last layer's states
        return {"embedding_dim": embedding_dim, "num_layers": 2, "dropout": dropout}
    return {"embedding_dim": embedding_dim, "num_layers": 2, "embedding_dropout": dropout, "vertical_dropout": dropout}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="tinyshakespeare", choices=["tinyshakespeare", "ptb"])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--budget", type=int, default=250_000, help="parameters per model, embeddings included")
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--window", type=int, default=64, help="tokens per training window (truncated BPTT)")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--halve-after", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a 5,000-parameter budget and 4 steps each")
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    if args.quick:
        args.budget, args.embedding_dim, args.steps, args.eval_every = 5_000, 8, 4, 2
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    data = load_language_model(args.data)
    vocab_size = len(Vocabulary.build([data.train]))  # the vocabulary train() builds
    char_level = data.level == "char"
    sizes = {}
    for model in args.models:
        options = model_options(model, args.embedding_dim, args.dropout)
        sizes[model] = hidden_size_for_budget(
            lambda hidden: trainable_parameters(
                build_model(model, vocab_size=vocab_size, hidden_size=hidden, **options)  # noqa: B023
            ),
            args.budget,
        )
        print(f"{LABELS[model]:>18}: hidden {sizes[model][0]:4d}, {sizes[model][1]:,} parameters", flush=True)
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    for model in args.models:
        config = TrainConfig(
            epochs=args.steps,  # at least one step an epoch: max_steps ends the run
            max_steps=args.steps,
            batch_size=args.batch,
            window=args.window,
            lr=args.lr,
            eval_every=args.eval_every,
            patience=args.steps + 1,
            halve_after=args.halve_after,
            seed=args.seed,
            progress=not args.no_progress,
        )
        load_before, run_started = load_average(), time.monotonic()
        options = model_options(model, args.embedding_dim, args.dropout)
        result = train(model, args.data, config=config, model_kwargs={"hidden_size": sizes[model][0], **options})
        metrics = result.metrics
        rows.append(
            {
                "model": model,
                "hidden_size": sizes[model][0],
                "parameters": int(metrics["parameters"]),
                "steps": int(metrics["steps"]),
                "best_step": int(metrics["best_step"]),
                "dev_loss": float(metrics["dev_loss"]),
                "test_loss": float(metrics["test_loss"]),
                "dev_bits": float(metrics["dev_bits_per_token"]),
                "test_bits": float(metrics["test_bits_per_token"]),
                "dev_perplexity": float(metrics["dev_perplexity"]),
                "test_perplexity": float(metrics["test_perplexity"]),
                "train_seconds": float(metrics["train_seconds"]),
                "wall_seconds": time.monotonic() - run_started,
                "train_tokens_per_s": float(metrics["train_tokens_per_s"]),
                "load_average": (load_before + load_average()) / 2,
                "curve": [
                    {
                        "step": point["step"],
                        "lr": point["lr"],
                        "train_loss": point["train_loss"],
                        "dev_loss": point["dev_loss"],
                        "dev_bits": point["dev_bits_per_token"],
                        "dev_perplexity": point["dev_perplexity"],
                    }
                    for point in result.curve
                ],
            }
        )
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "curve"}), flush=True)
    total_seconds = time.monotonic() - started
    command = ("python examples/rrnn_lm.py " + " ".join(sys.argv[1:] if argv is None else argv)).strip()
    settings = {**vars(args), "out": str(args.out), "vocab_size": vocab_size}
    (args.out / "rrnn_lm.json").write_text(
        json.dumps({"command": command, "settings": settings, "total_seconds": total_seconds, "rows": rows}, indent=1)
        + "\n",
        encoding="utf-8",
    )
    (args.out / "rrnn_lm.md").write_text(report(args, command, rows, total_seconds, char_level), encoding="utf-8")
    plot(args, rows, args.out / "rrnn_lm.png", char_level)
    return 0


def report(args: argparse.Namespace, command: str, rows: list[dict[str, Any]], seconds: float, chars: bool) -> str:
    """The markdown table: per model its size, step budget, dev/test metric, and speed."""
    loads = [row["load_average"] for row in rows]
    metric = "bits/char" if chars else "perplexity"
    tokens = args.steps * args.batch * args.window
    lines = [
        f"# Rational Recurrences Table 3 on CPU: {args.data} language models, equal parameter budgets",
        "",
        f"Command: `{command}`",
        "",
        f"2 unidirectional layers (RRNNs with output gates), {args.embedding_dim}-d trained embeddings, untied "
        f"softmax; budget {args.budget:,} parameters (everything trainable); Adam lr {args.lr}, dropout "
        f"{args.dropout}; {args.steps} steps of {args.batch} windows x {args.window} tokens ({tokens:,} tokens) each, "
        f"every window from a zero state; dev measured every {args.eval_every} steps, lr halved after "
        f"{args.halve_after} measurements without a gain, best dev point tested; seed {args.seed}; "
        f"{torch.get_num_threads()} thread(s). Total {seconds / 60:.1f} min; 1-minute load average during the runs "
        f"{min(loads):.1f}-{max(loads):.1f}. Seconds: wall-clock of one run (data, training, evaluation).",
        "",
        f"| model | hidden | parameters | steps | best step | dev {metric} | test {metric} | test perplexity | "
        "paper PTB test ppl | seconds | tokens/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        dev, test = (row["dev_bits"], row["test_bits"]) if chars else (row["dev_perplexity"], row["test_perplexity"])
        lines.append(
            f"| {LABELS[row['model']]} | {row['hidden_size']} | {row['parameters']:,} | {row['steps']} | "
            f"{row['best_step']} | {dev:.3f} | {test:.3f} | {row['test_perplexity']:.2f} | "
            f"{PAPER_TABLE3[row['model']]} | {row['wall_seconds']:.0f} | {row['train_tokens_per_s']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def plot(args: argparse.Namespace, rows: list[dict[str, Any]], path: Path, chars: bool) -> None:
    """Learning curves: the development metric against the training step, one line per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = "dev_bits" if chars else "dev_perplexity"
    figure, axes = plt.subplots(figsize=(6, 4))
    for row in rows:
        points = row["curve"]
        axes.plot([p["step"] for p in points], [p[key] for p in points], marker=".", label=LABELS[row["model"]])
    finals = [p[key] for row in rows for p in row["curve"]]
    if finals:
        axes.set_ylim(min(finals) * 0.97, min(max(finals), 2 * min(finals)) * 1.02)
    axes.set_xlabel("training step")
    axes.set_ylabel("dev bits per character" if chars else "dev perplexity")
    axes.set_title(f"{args.data}, {args.budget:,} parameters each")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    raise SystemExit(main())
