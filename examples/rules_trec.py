"""From rules to networks (issue 15, after FA-RNN): hand-written rules alone, a network initialised from the rules
(``RegexClassifier.from_rules``; "rules": labels are exact masks, "rules-leak": arcs may learn words outside their
labels, ``leak``) and the same network randomly initialised (``init="random"``), trained on 1%, 10% and 100% of the
training data with a few seeds, on TREC (examples/rules/trec.json) and SST-2
(examples/rules/sst2.json). 50-d GloVe, CPU.

    python examples/rules_trec.py                                  # the full run (about 15 minutes on 2 cores)
    python examples/rules_trec.py --datasets trec --fractions 0.01 --seeds 0 --min-steps 5 --epochs 1   # a check

For every data set it prints a table (test accuracy, mean ± standard deviation over the seeds, and the dev
accuracy) and writes results/rules_DATA.md and results/rules_DATA.json. "zero-shot" is the rule-initialised
network before any training, which must equal the rules alone on sentences whose words are all in its vocabulary.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from kleene.data import ClassificationData, load
from kleene.nn import RulesPredictor, TrainConfig, Trainer, load_rules, prepare

RULES = Path(__file__).resolve().parent / "rules"
#: The networks compared, as RegexClassifier keyword arguments (rules-leak also gets --leak).
ARMS: dict[str, dict[str, Any]] = {
    "rules": {"init": "rules"},
    "rules-leak": {"init": "rules"},
    "random": {"init": "random"},
}
BATCH = 64


def rules_alone(rules_path: Path, data: ClassificationData) -> dict[str, float]:
    """The rules' own accuracy on dev and test (raw tokens: no vocabulary)."""
    predictor = RulesPredictor(load_rules(rules_path))
    names = list(data.labels) or [str(c) for c in range(data.num_classes)]
    result = {}
    for split in ("dev", "test"):
        examples = data.split(split)
        hits = sum(names.index(predictor.predict(e.tokens)) == e.label for e in examples)
        result[split] = hits / len(examples)
    return result


def run(
    dataset: str, rules_path: Path, arm: str, fraction: float, seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    full = load(dataset)
    assert isinstance(full, ClassificationData)
    train_size = None if fraction >= 1 else max(1, round(fraction * len(full.train)))
    batches = math.ceil((train_size or len(full.train)) / BATCH)
    steps = max(args.epochs * batches, args.min_steps)
    config = TrainConfig(
        epochs=math.ceil(steps / batches),
        max_steps=steps,
        eval_every=max(batches, min(50, steps)),
        batch_size=BATCH,
        lr=args.lr,
        seed=seed,
        progress=False,
    )
    kwargs: dict[str, Any] = {"rules": load_rules(rules_path).to_json(), "seed": seed, **ARMS[arm]}
    if arm == "rules-leak":
        kwargs["leak"] = args.leak
    model, data, vocab, kwargs = prepare(
        "regex", dataset, model_kwargs=kwargs, train_size=train_size, pretrained="glove", seed=seed
    )
    trainer = Trainer(model, data, vocab, config, model_name="regex", model_kwargs=kwargs)
    before = {split: trainer.evaluate(split)["accuracy"] for split in ("dev", "test")}
    started = time.monotonic()
    metrics = trainer.fit().metrics
    return {
        "dataset": dataset,
        "arm": arm,
        "fraction": fraction,
        "train_size": len(data.train),
        "seed": seed,
        "steps": steps,
        "zero_shot_dev": before["dev"],
        "zero_shot_test": before["test"],
        "dev": float(metrics["dev_accuracy"]),
        "test": float(metrics["test_accuracy"]),
        "seconds": time.monotonic() - started,
    }


def summary(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def table(dataset: str, alone: dict[str, float], runs: list[dict[str, Any]], command: str) -> str:
    arms = [arm for arm in ARMS if any(r["arm"] == arm for r in runs)]
    lines = [
        f"# Rules → network on {dataset}",
        "",
        f"Command: `{command}`",
        "",
        f"Rules alone ({len(load_rules(RULES / f'{dataset}.json').flat())} rules): dev {alone['dev']:.3f}, "
        f"test {alone['test']:.3f}. Test accuracy, mean ± standard deviation over the seeds; zero-shot is the "
        "network before training.",
        "",
        "| training data | examples | steps | seeds | "
        + " | ".join(f"{arm} zero-shot | {arm}" for arm in arms)
        + " |",
        "|---|---:|---:|---:|" + "---:|---:|" * len(arms),
    ]
    for fraction in sorted({r["fraction"] for r in runs}):
        some = [r for r in runs if r["fraction"] == fraction]
        cells = []
        for arm in arms:
            chosen = [r for r in some if r["arm"] == arm]
            cells.append(summary([r["zero_shot_test"] for r in chosen]) if chosen else "")
            cells.append(summary([r["test"] for r in chosen]) if chosen else "")
        seeds = len({r["seed"] for r in some})
        head = f"| {fraction:.0%} | {some[0]['train_size']} | {some[0]['steps']} | {seeds} | "
        lines.append(head + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["trec", "sst2"])
    parser.add_argument("--fractions", nargs="+", type=float, default=[0.01, 0.1, 1.0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--leak", type=float, default=1e-3, help="rules-leak: the initial weight of unlabelled words")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1e-2, help="Adam's learning rate (all arms)")
    parser.add_argument("--min-steps", type=int, default=100, help="small subsets train at least this many steps")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python examples/rules_trec.py " + " ".join(argv if argv is not None else sys.argv[1:])
    for dataset in args.datasets:
        rules_path = RULES / f"{dataset}.json"
        data = load(dataset)
        assert isinstance(data, ClassificationData)
        alone = rules_alone(rules_path, data)
        runs = []
        for fraction in args.fractions:
            for arm in args.arms:
                for seed in args.seeds:
                    runs.append(run(dataset, rules_path, arm, fraction, seed, args))
                    r = runs[-1]
                    print(
                        f"{dataset} {fraction:.0%} {arm} seed {seed}: zero-shot test {r['zero_shot_test']:.3f}, "
                        f"trained test {r['test']:.3f} ({r['seconds']:.0f} s)",
                        flush=True,
                    )
        text = table(dataset, alone, runs, command.strip())
        print(text)
        (args.out / f"rules_{dataset}.md").write_text(text, encoding="utf-8")
        payload = {"command": command.strip(), "rules_alone": alone, "runs": runs}
        (args.out / f"rules_{dataset}.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
