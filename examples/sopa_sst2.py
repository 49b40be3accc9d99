"""SoPa on SST-2 against the one-layer CNN and the BiLSTM baselines, on the full training set and on small
training subsets (in the spirit of SoPa Table 1 and Figure 3), 50-d GloVe, on CPU.

    python examples/sopa_sst2.py                        # sizes 100 500 1000 2500 all; models sopa cnn bilstm
    python examples/sopa_sst2.py --sizes 100 all --models sopa --epochs 10

Writes results/sopa_sst2.md (a table with the test accuracy, training seconds and tokens/s of every run, and the
command) and results/sopa_sst2.png (test accuracy against training-set size).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from kleene.nn import TrainConfig, train

SST2_TRAIN, BATCH = 6920, 64


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["100", "500", "1000", "2500", "all"])
    parser.add_argument("--models", nargs="+", default=["sopa", "cnn", "bilstm"])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument(
        "--min-steps", type=int, default=400, help="small subsets train for at least this many steps (default 400)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in args.models:
        for size in args.sizes:
            train_size = None if size == "all" else int(size)
            batches = math.ceil((train_size or SST2_TRAIN) / BATCH)
            # a 100-sentence subset has 2 batches an epoch: train it for as many steps as the others, not 20
            steps = max(args.epochs * batches, args.min_steps)
            config = TrainConfig(
                epochs=math.ceil(steps / batches),
                max_steps=steps,
                eval_every=max(batches, 50),
                batch_size=BATCH,
                seed=args.seed,
                progress=False,
            )
            started = time.monotonic()
            result = train(model, "sst2", config=config, train_size=train_size)
            metrics = result.metrics
            rows.append(
                {
                    "model": model,
                    "size": size,
                    "test": float(metrics["test_accuracy"]),
                    "dev": float(metrics["dev_accuracy"]),
                    "seconds": time.monotonic() - started,
                    "tokens_per_s": float(metrics.get("train_tokens_per_s", 0.0)),
                    "parameters": int(metrics.get("parameters", 0)),
                }
            )
            print(rows[-1], flush=True)
    command = "python examples/sopa_sst2.py " + " ".join(sys.argv[1:] if argv is None else argv)
    lines = [
        "# SoPa vs baselines on SST-2 (50-d GloVe, CPU)",
        "",
        f"Command: `{command.strip()}`; {args.epochs} epochs (at least {args.min_steps} steps, dev checked every "
        f"max(epoch, 50) steps), Adam lr 1e-3, batch 64, seed {args.seed}; wall-clock "
        "includes evaluation.",
        "",
        "| model | train size | dev acc | test acc | parameters | wall-clock s | train tokens/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['size']} | {r['dev']:.4f} | {r['test']:.4f} | {r['parameters']} | "
            f"{r['seconds']:.0f} | {r['tokens_per_s']:.0f} |"
        )
    (args.out / "sopa_sst2.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5, 3.5))
    for model in args.models:
        points = [(r["size"], r["test"]) for r in rows if r["model"] == model]
        labels = [p[0] for p in points]
        axes.plot(range(len(points)), [p[1] for p in points], marker="o", label=model)
        axes.set_xticks(range(len(points)), labels)
    axes.set_xlabel("training examples")
    axes.set_ylabel("test accuracy")
    axes.legend()
    figure.tight_layout()
    figure.savefig(args.out / "sopa_sst2.png", dpi=120)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
