"""Sequence reversal with delayed LSTMs (Turek et al., 2020, §4.1 and Figure 4).

The target for input ``x_1 .. x_T`` is ``x_T .. x_1``. A causal network can only guess the first half of the outputs;
with ``d`` steps of look-ahead the expected accuracy is bounded by

    TPR(d) = (1 + 1/V) / 2 + floor((d + 1) / 2) / T * (1 - 1/V)

(the paper's analytic bound). We train an LSTM (delay 0), d-LSTMs (``kleene.nn.Delayed``) and a Bi-LSTM with the
paper's sizes (100 units; 70 per direction for the Bi-LSTM), Adam, gradient clipping at 1.0, batches of 100 and early
stopping after 10 epochs without a validation improvement of at least 1e-3, on 10,000 / 2,000 / 2,000 random sequences
of length 20 over V = 4. To fit a CPU budget the defaults depart from the paper in two places: at most 150 epochs
instead of 1,000, and a learning rate of 5e-3 instead of 1e-3 (with 1e-3, 60 epochs leave every model far below the
bound; pass ``--lr 1e-3 --epochs 1000`` for the paper's setting).

Writes ``results/delayed_reversal.{md,json,png}``. One command::

    python examples/delayed_reversal.py          # about 25 minutes on one shared CPU thread
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from torch import nn

from kleene.nn import Delayed, seed_everything

LENGTH, VOCAB = 20, 4


def bound(delay: int, length: int = LENGTH, vocab: int = VOCAB) -> float:
    """The paper's expected true-positive rate of a network with ``delay`` acausal steps."""
    return 0.5 * (1 + 1 / vocab) + math.floor((delay + 1) / 2) / length * (1 - 1 / vocab)


def make_split(count: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(one-hot inputs (count, T, V), reversed symbols (count, T))."""
    symbols = torch.randint(0, VOCAB, (count, LENGTH), generator=generator)
    return nn.functional.one_hot(symbols, VOCAB).float(), symbols.flip(1)


class Reverser(nn.Module):
    """A recurrent layer (delayed or bidirectional) followed by a linear layer to V logits per step."""

    def __init__(self, kind: str, delay: int = 0):
        super().__init__()
        if kind == "bilstm":
            self.recurrent: nn.Module = nn.LSTM(VOCAB, 70, batch_first=True, bidirectional=True)
            width = 140
        else:
            self.recurrent = Delayed(nn.LSTM(VOCAB, 100, batch_first=True), delay)
            width = 100
        self.output = nn.Linear(width, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        states, _ = self.recurrent(x)
        return self.output(states)


def reachable(delay: int | None) -> torch.Tensor:
    """(T,) bool: output t (0-based) needs input T-1-t, which a network with ``delay`` steps of look-ahead has read
    when it emits output t at step t + delay (None: bidirectional, everything is reachable)."""
    steps = torch.arange(LENGTH)
    return torch.ones(LENGTH, dtype=torch.bool) if delay is None else (LENGTH - 1 - steps <= steps + delay)


@torch.no_grad()
def correct(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(N, T) bool: which outputs are right."""
    model.eval()
    predictions = torch.cat([model(chunk).argmax(-1) for chunk in inputs.split(500)])
    model.train()
    return predictions == targets


def accuracy(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    return float(correct(model, inputs, targets).float().mean())


def train_one(
    kind: str, delay: int, data: dict[str, tuple[torch.Tensor, torch.Tensor]], args: argparse.Namespace
) -> dict:
    seed_everything(args.seed)
    model = Reverser(kind, delay)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999))
    inputs, targets = data["train"]
    best, best_state, stale, epochs = -1.0, None, 0, 0
    started = time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.randperm(len(inputs))
        for batch in order.split(100):
            logits = model(inputs[batch])
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets[batch].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        epochs = epoch + 1
        valid = accuracy(model, *data["valid"])
        if valid > best + 1e-3:
            best, stale = valid, 0
            best_state = {key: value.clone() for key, value in model.state_dict().items()}
        else:
            stale += 1
            if stale >= 10:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    parameters = sum(parameter.numel() for parameter in model.parameters())
    test_correct = correct(model, *data["test"]).float()
    seen = reachable(None if kind == "bilstm" else delay)
    return {
        "model": kind if kind == "bilstm" else ("lstm" if delay == 0 else f"d-lstm (d={delay})"),
        "delay": None if kind == "bilstm" else delay,
        "parameters": parameters,
        "epochs": epochs,
        "valid_accuracy": best,
        "test_accuracy": float(test_correct.mean()),
        "test_accuracy_reachable": float(test_correct[:, seen].mean()),
        "test_accuracy_unreachable": float(test_correct[:, ~seen].mean()) if bool((~seen).any()) else None,
        "bound": 1.0 if kind == "bilstm" else bound(delay),
        "seconds": time.perf_counter() - started,
    }


def write_results(rows: list[dict], args: argparse.Namespace, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "delayed_reversal.json").write_text(
        json.dumps({"settings": {**vars(args), "out": str(args.out)}, "rows": rows}, indent=1) + "\n"
    )
    lines = [
        "# Sequence reversal (delayed-rnn.md §4.1): LSTM vs d-LSTM vs Bi-LSTM",
        "",
        f"T = {LENGTH}, V = {VOCAB}; {args.train} / {args.valid} / {args.test} sequences; batches of 100;",
        f"Adam, learning rate {args.lr:g} (paper: 1e-3);",
        f"clip 1.0; at most {args.epochs} epochs (paper: 1,000), early stopping after 10 epochs without a 1e-3 gain;",
        f"seed {args.seed}; {torch.get_num_threads()} CPU thread(s).",
        "",
        "Reachable outputs are those whose source element the network has read when it emits them (all of them for",
        "the Bi-LSTM); the bound assumes those are always right and the others right with probability 1/V = 0.25.",
        "",
        "| model | delay | parameters | epochs | valid acc. | test acc. | analytic bound | test acc. reachable "
        "| test acc. unreachable | seconds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        delay = "–" if row["delay"] is None else str(row["delay"])
        unreachable = row.get("test_accuracy_unreachable")
        lines.append(
            f"| {row['model']} | {delay} | {row['parameters']:,} | {row['epochs']} | {row['valid_accuracy']:.4f} | "
            f"{row['test_accuracy']:.4f} | {row['bound']:.4f} | {row['test_accuracy_reachable']:.4f} | "
            f"{'–' if unreachable is None else f'{unreachable:.4f}'} | {row['seconds']:.0f} |"
        )
    (out / "delayed_reversal.md").write_text("\n".join(lines) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    delayed = [row for row in rows if row["delay"] is not None]
    figure, axes = plt.subplots(figsize=(6, 4))
    grid = list(range(LENGTH))
    axes.plot(grid, [bound(d) for d in grid], "k--", label="analytic bound")
    axes.plot(
        [row["delay"] for row in delayed], [row["test_accuracy"] for row in delayed], "o-", label="d-LSTM (LSTM at d=0)"
    )
    for row in rows:
        if row["delay"] is None:
            axes.axhline(row["test_accuracy"], color="tab:red", label=f"Bi-LSTM ({row['test_accuracy']:.3f})")
    axes.set_xlabel("delay d")
    axes.set_ylabel("test accuracy (per element)")
    axes.set_title(f"Sequence reversal, T={LENGTH}, V={VOCAB}, ≤{args.epochs} epochs")
    axes.legend()
    figure.tight_layout()
    figure.savefig(out / "delayed_reversal.png", dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=150, help="epoch budget per model (paper: 1000)")
    parser.add_argument("--delays", type=int, nargs="+", default=[0, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19])
    parser.add_argument("--lr", type=float, default=5e-3, help="Adam learning rate (paper: 1e-3)")
    parser.add_argument("--train", type=int, default=10_000)
    parser.add_argument("--valid", type=int, default=2_000)
    parser.add_argument("--test", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(args.seed)
    data = {split: make_split(getattr(args, split), generator) for split in ("train", "valid", "test")}
    rows = []
    for kind, delay in [("bilstm", 0), *[("lstm", d) for d in args.delays]]:
        rows.append(train_one(kind, delay, data, args))
        print(json.dumps(rows[-1]), flush=True)
        write_results(rows, args, args.out)


if __name__ == "__main__":
    main()
