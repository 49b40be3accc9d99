"""Spectral extraction of WFSAs from LSTMs trained on Tomita grammars over {a, b}.

    python examples/tomita_spectral.py [--out results/tomita]

For Tomita grammars 1, 2, 4 and 7 (a for 1, b for 0 in Tomita's binary strings), train a small
LSTM classifier, learn a WFSA from the Hankel matrix of its acceptance probability (prefix and
suffix bases: all strings up to length 4), and measure on held-out strings of length up to 20
how often the automaton's decisions agree with the LSTM's and with the true grammar. Writes a
table (``tomita.md``) and one singular-value plot per grammar to ``--out``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from kleene.extract.spectral import SpectralResult, enumerate_strings, fidelity, plot_singular_values, spectral_learn

ALPHABET = ("a", "b")

#: Tomita's grammars over {a, b} (a = 1, b = 0), as full-match regular expressions or predicates.
TOMITA = {
    1: lambda s: re.fullmatch("a*", s) is not None,  # 1*
    2: lambda s: re.fullmatch("(ab)*", s) is not None,  # (10)*
    4: lambda s: "bbb" not in s,  # no 000
    7: lambda s: re.fullmatch("b*a*b*a*", s) is not None,  # 0*1*0*1*
}


def random_strings(rng: np.random.Generator, count: int, max_length: int) -> list[str]:
    return ["".join(rng.choice(ALPHABET, size=rng.integers(0, max_length + 1))) for _ in range(count)]


def positives(grammar: int, rng: np.random.Generator, count: int, max_length: int) -> list[str]:
    """Strings of the language (rare ones drawn by construction so training sees both classes)."""
    if grammar == 1:
        return ["a" * int(n) for n in rng.integers(0, max_length + 1, count)]
    if grammar == 2:
        return ["ab" * int(n) for n in rng.integers(0, max_length // 2 + 1, count)]
    if grammar == 7:
        out = []
        for _ in range(count):
            cuts = np.sort(rng.integers(0, max_length + 1, 4))
            sizes = np.diff(np.concatenate([[0], cuts]))
            out.append("".join(c * int(k) for c, k in zip("baba", sizes)))
        return out
    return [s for s in random_strings(rng, 4 * count, max_length) if TOMITA[grammar](s)][:count]


def near_misses(grammar: int, rng: np.random.Generator, strings: list[str]) -> list[str]:
    """Positives with one symbol flipped: negatives close to the boundary."""
    out = []
    for s in strings:
        if s:
            i = int(rng.integers(0, len(s)))
            out.append(s[:i] + ("b" if s[i] == "a" else "a") + s[i + 1 :])
    return out


class TomitaLSTM(nn.Module):
    def __init__(self, hidden: int = 12):
        super().__init__()
        self.embedding = nn.Embedding(3, 4)  # 0 = padding, 1 = a, 2 = b
        self.lstm = nn.LSTM(4, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The logit of acceptance of each (padded) string; the empty string reads the initial state."""
        states, _ = self.lstm(self.embedding(ids))
        states = torch.cat([states.new_zeros(states.shape[0], 1, states.shape[2]), states], 1)
        last = states[torch.arange(len(lengths)), lengths]
        logits: torch.Tensor = self.out(last)[:, 0]
        return logits


def encode(strings: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
    longest = max((len(s) for s in strings), default=0)
    ids = torch.zeros(len(strings), max(longest, 1), dtype=torch.long)
    for b, s in enumerate(strings):
        for t, c in enumerate(s):
            ids[b, t] = 1 if c == "a" else 2
    return ids, torch.tensor([len(s) for s in strings])


def train_lstm(grammar: int, seed: int = 0, steps: int = 600, hidden: int = 12, max_length: int = 20) -> TomitaLSTM:
    """A small LSTM classifier for one grammar (Adam, balanced batches of random strings, fixed seed)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = TomitaLSTM(hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    loss_fn = nn.BCEWithLogitsLoss()
    for _ in range(steps):
        good = positives(grammar, rng, 32, max_length)
        batch = random_strings(rng, 32, max_length) + good + near_misses(grammar, rng, good)
        labels = torch.tensor([float(TOMITA[grammar](s)) for s in batch])
        ids, lengths = encode(batch)
        optimizer.zero_grad()
        loss = loss_fn(model(ids, lengths), labels)
        loss.backward()
        optimizer.step()
    return model.eval()


def acceptance(model: TomitaLSTM) -> callable:  # type: ignore[valid-type]
    """The string function handed to spectral learning: the LSTM's acceptance probability."""

    def f(strings: Sequence[Sequence[str]]) -> np.ndarray:
        with torch.no_grad():
            ids, lengths = encode(strings)
            return torch.sigmoid(model(ids, lengths).double()).numpy()

    return f


def held_out(grammar: int, seed: int, count: int = 1000, max_length: int = 20) -> list[tuple[str, ...]]:
    """Random strings of length 0..20 plus language members and near misses (a third each)."""
    rng = np.random.default_rng(10_000 + seed)
    good = positives(grammar, rng, count // 3, max_length)
    strings = random_strings(rng, count - 2 * len(good), max_length) + good + near_misses(grammar, rng, good)
    return [tuple(s) for s in strings]


def extract(grammar: int, model: TomitaLSTM, basis_length: int = 4) -> SpectralResult:
    basis = enumerate_strings(ALPHABET, basis_length)
    return spectral_learn(acceptance(model), ALPHABET, basis, basis, name=f"tomita{grammar}")


def evaluate(grammar: int, seed: int = 0, steps: int = 600) -> dict[str, float]:
    model = train_lstm(grammar, seed, steps)
    result = extract(grammar, model)
    strings = held_out(grammar, seed)
    f = acceptance(model)
    report = fidelity(result, f, strings, threshold=0.5)
    truth = np.array([TOMITA[grammar]("".join(s)) for s in strings])
    lstm_accuracy = float(np.mean((f(strings) > 0.5) == truth))
    wfsa_accuracy = float(np.mean((result.scores(strings) > 0.5) == truth))
    return {"grammar": grammar, "rank": result.rank, "agreement": report.agreement or 0.0,
            "mean_abs_error": report.mean_abs_error, "lstm_accuracy": lstm_accuracy, "wfsa_accuracy": wfsa_accuracy,
            "singular_values": result.singular_values}  # type: ignore[dict-item]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="results/tomita")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    lines = ["| grammar | rank | agreement with LSTM | MAE | LSTM accuracy | WFSA accuracy |", "|" + "---|" * 6]
    for grammar in TOMITA:
        row = evaluate(grammar, args.seed)
        plot_singular_values(row["singular_values"], int(row["rank"]), out / f"tomita{grammar}_singular_values.png",
                             f"Tomita {grammar}: Hankel singular values")
        lines.append(f"| {grammar} | {row['rank']} | {row['agreement']:.3f} | {row['mean_abs_error']:.4f} | "
                     f"{row['lstm_accuracy']:.3f} | {row['wfsa_accuracy']:.3f} |")
        print(lines[-1], flush=True)
    (out / "tomita.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'tomita.md'}")


if __name__ == "__main__":
    main()
