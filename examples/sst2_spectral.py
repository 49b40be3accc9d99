"""Spectral extraction of a WFSA from a unidirectional LSTM sentiment classifier on SST-2.

    python examples/sst2_spectral.py [--out results] [--sizes 50 100 200 400 100:4 200:4] [--quick]

1. Train (or load from ``OUT/sst2_spectral_lstm/``) a one-layer LSTM over frozen 50-d GloVe whose last hidden state
   gives the two class logits; its scalar after any prefix x is the logit ``z(x) = l_pos - l_neg`` (so
   ``P(positive | x) = σ(z(x))``).
2. For each vocabulary size N: the alphabet is the N most frequent training words plus ``<other>``, which stands for
   every other word and is fed to the LSTM as the count-weighted mean embedding of the training tokens outside the
   list. ``N:K`` adds K polarity classes ``<other:k>`` (the other words split by the LSTM's logit on the word alone,
   each read as its class's mean embedding; ``<other>`` is then left for words outside the LSTM's vocabulary).
   Prefix and suffix bases are the most frequent prefixes and suffixes of the mapped training sentences; the Hankel
   blocks of z are computed from cached LSTM states (``recurrent_hankel_blocks``), and those of ``P = σ(z)``
   elementwise from them.
3. For both scalars, learn WFSAs of several ranks (the rank chosen from the singular values is marked), and measure
   on the dev sentences (mapped) the mean absolute error and the agreement of the decision with the LSTM, read on
   the same mapped sentence and on the real sentence, by length bucket; and the automaton's own accuracy against
   the gold labels (dev and test) next to the LSTM's.

Writes ``OUT/sst2_spectral.md`` (tables), ``.json`` (every number), ``.png`` (agreement against rank) and
``sst2_spectral_singular_values.png``. ``--quick`` (for the tests) trains on 2000 sentences for 120 steps and
uses tiny bases.
"""

from __future__ import annotations

import os

# One BLAS thread, set before numpy loads: on a shared machine OpenBLAS's threads spin against each other (a 400 × 150
# SVD took 0.6 s instead of 0.01 s). No effect when numpy is already loaded (under pytest, with tiny matrices).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from kleene.data import ClassificationData, Vocabulary, load_classification, pad_sequences
from kleene.extract.spectral import (
    Fidelity,
    RecurrentFunction,
    RestrictedVocabulary,
    SpectralResult,
    choose_rank,
    plot_singular_values,
    recurrent_hankel_blocks,
    sample_basis,
    spectral_from_hankel,
)
from kleene.nn import TrainConfig, train
from kleene.nn.checkpoint import CONFIG_NAME, load_checkpoint
from kleene.nn.registry import register_model

MODEL_NAME = "sst2-spectral-lstm"
CHECKPOINT_DIR = "sst2_spectral_lstm"
#: The two scalars extracted, with their decision thresholds.
OUTPUTS = {"logit": 0.0, "probability": 0.5}
LENGTH_BUCKETS = ((1, 10), (11, 20), (21, 30), (31, 1000))


class PrefixLSTMClassifier(nn.Module):
    """Embedding -> one unidirectional LSTM layer -> a linear layer on the last hidden state (two class logits).

    Unidirectional and read from the last state only, so its output after any prefix is defined: the string
    function that spectral learning approximates.
    """

    task = "classification"

    def __init__(
        self,
        vocab_size: int,
        num_classes: int = 2,
        embedding_dim: int = 50,
        hidden_size: int = 64,
        freeze_embeddings: bool = True,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
        self.embedding.weight.requires_grad_(not freeze_embeddings)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, num_classes)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embedding(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        _, (last, _) = self.lstm(packed)
        logits: torch.Tensor = self.out(last[0])
        return logits


register_model(MODEL_NAME, PrefixLSTMClassifier, replace=True)


def sentence_logits(model: PrefixLSTMClassifier, vocab: Vocabulary, sentences: Sequence[Sequence[str]]) -> np.ndarray:
    """The model's scalar z = l_pos - l_neg on real sentences (every word through its own embedding)."""
    out = []
    with torch.no_grad():
        for start in range(0, len(sentences), 256):
            tokens, lengths = pad_sequences([vocab.encode(s) for s in sentences[start : start + 256]], vocab.pad_id)
            logits = model(tokens, lengths).double()
            out.append((logits[:, 1] - logits[:, 0]).numpy())
    return np.concatenate(out)


def lstm_string_function(
    model: PrefixLSTMClassifier,
    vocab: Vocabulary,
    restricted: RestrictedVocabulary,
    train_sentences: Sequence[Sequence[str]],
) -> RecurrentFunction:
    """z over the restricted alphabet: state = [h; c] of the LSTM, one torch LSTM step per ``step`` call.

    A class symbol reads the mean embedding of the training tokens in its class, ``<other>`` that of all the training
    tokens outside the listed words (means weighted by count; a class without training tokens: its words' mean).
    """
    weights = model.embedding.weight.detach()
    known = set(restricted.words)
    members: dict[str, list[int]] = {symbol: [] for symbol in restricted.alphabet[len(known) :]}
    for sentence in train_sentences:
        for word in sentence:
            if word not in known:
                members[restricted.other].append(vocab.index(word))
                if word in restricted.classes:
                    members[restricted.classes[word]].append(vocab.index(word))
    for symbol in set(restricted.classes.values()):
        if not members[symbol]:
            members[symbol] = [vocab.index(w) for w, s in restricted.classes.items() if s == symbol]
    means = [weights[torch.tensor(ids)].mean(0) if ids else weights[vocab.unk_id] for ids in members.values()]
    table = torch.cat([weights[torch.tensor([vocab.index(w) for w in restricted.words])], torch.stack(means)])
    hidden = model.lstm.hidden_size

    def step(states: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        h, c = torch.from_numpy(states).split(hidden, dim=1)
        with torch.no_grad():
            _, (h, c) = model.lstm(
                table[torch.from_numpy(symbols)][:, None], (h[None].contiguous(), c[None].contiguous())
            )
        return torch.cat([h[0], c[0]], 1).numpy()

    def readout(states: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits = model.out(torch.from_numpy(states[:, :hidden])).double()
        return (logits[:, 1] - logits[:, 0]).numpy()

    return RecurrentFunction(restricted.alphabet, np.zeros(2 * hidden, dtype=np.float32), step, readout)


def polarity_classes(
    model: PrefixLSTMClassifier,
    vocab: Vocabulary,
    words: Sequence[str],
    train_sentences: Sequence[Sequence[str]],
    count: int,
) -> dict[str, str]:
    """Every vocabulary word outside ``words`` in one of ``count`` classes ``<other:0>`` (most negative) .. by the
    LSTM's logit after reading that word alone; the cuts split the training tokens outside ``words`` evenly."""
    listed = set(words)
    candidates = [w for w in vocab.tokens[2:] if w not in listed]
    polarity = dict(zip(candidates, sentence_logits(model, vocab, [[w] for w in candidates])))
    token_polarities = [polarity[w] for sentence in train_sentences for w in sentence if w in polarity]
    cuts = np.quantile(token_polarities, np.arange(1, count) / count)
    return {w: f"<other:{int(np.searchsorted(cuts, z))}>" for w, z in polarity.items()}


def sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


@dataclass
class Settings:
    sizes: list[tuple[int, int]]  # (N words, K polarity classes for the other words; 1 = one <other> symbol)
    prefixes: int
    suffixes: int
    ranks: list[int]
    relative: float
    hidden: int
    epochs: int
    train_size: int | None
    max_steps: int | None
    dev_size: int | None
    seed: int


def parse_size(text: str) -> tuple[int, int]:
    """``"N"`` or ``"N:K"`` (N words, K polarity classes for the others)."""
    words, _, classes = text.partition(":")
    if not words.isdigit() or not (classes or "1").isdigit() or int(words) < 1 or int(classes or "1") < 1:
        raise argparse.ArgumentTypeError(f"expected N or N:K with positive integers, got {text!r}")
    return int(words), int(classes or "1")


def settings_from(args: argparse.Namespace) -> Settings:
    if args.quick:
        return Settings([(10, 1), (20, 3)], 30, 15, [1, 2, 4, 8], args.relative, 16, 2, 2000, 120, 60, args.seed)
    ranks = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96]
    return Settings(
        args.sizes,
        args.prefixes,
        args.suffixes,
        [r for r in ranks if r <= args.suffixes],
        args.relative,
        args.hidden,
        args.epochs,
        None,
        None,
        None,
        args.seed,
    )


def train_or_load(out: Path, settings: Settings) -> tuple[PrefixLSTMClassifier, Vocabulary, dict[str, Any], bool]:
    """The classifier cached in ``out/CHECKPOINT_DIR`` when its settings match, else a freshly trained one."""
    directory = out / CHECKPOINT_DIR
    wanted = {
        "hidden_size": settings.hidden,
        "train_size": settings.train_size,
        "epochs": settings.epochs,
        "seed": settings.seed,
    }
    if (directory / CONFIG_NAME).is_file():
        checkpoint = load_checkpoint(directory)
        if checkpoint.config.get("metadata", {}).get("example") == wanted and checkpoint.vocab is not None:
            assert isinstance(checkpoint.model, PrefixLSTMClassifier)
            return checkpoint.model, checkpoint.vocab, checkpoint.metrics, True
    config = TrainConfig(
        epochs=settings.epochs, max_steps=settings.max_steps, batch_size=32, lr=3e-3, seed=settings.seed, progress=False
    )
    train(
        MODEL_NAME,
        "sst2",
        config=config,
        out_dir=directory,
        train_size=settings.train_size,
        model_kwargs={"hidden_size": settings.hidden, "freeze_embeddings": True},
    )
    # record the example's settings so that a later run reuses the checkpoint only when they match
    config_path = directory / CONFIG_NAME
    stored = json.loads(config_path.read_text(encoding="utf-8"))
    stored["metadata"]["example"] = wanted
    config_path.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
    checkpoint = load_checkpoint(directory)
    assert isinstance(checkpoint.model, PrefixLSTMClassifier) and checkpoint.vocab is not None
    return checkpoint.model, checkpoint.vocab, checkpoint.metrics, False


def length_bucket(length: int) -> str:
    for low, high in LENGTH_BUCKETS:
        if low <= length <= high:
            return f"{low}-{high}" if high < 1000 else f">{low - 1}"
    return "0"


def accuracy(scores: np.ndarray, threshold: float, labels: np.ndarray) -> float:
    return float(np.mean((scores > threshold) == (labels == 1)))


def evaluate_size(
    size: int,
    classes: int,
    model: PrefixLSTMClassifier,
    vocab: Vocabulary,
    data: ClassificationData,
    settings: Settings,
    dev: dict[str, Any],
    test: dict[str, Any],
) -> dict[str, Any]:
    """Hankel blocks, automata of every rank and their fidelity for one restricted vocabulary (N words, K classes)."""
    train_sentences = [e.tokens for e in data.train]
    restricted = RestrictedVocabulary.most_frequent(train_sentences, size)
    if classes > 1:
        word_classes = polarity_classes(model, vocab, restricted.words, train_sentences, classes)
        restricted = RestrictedVocabulary(restricted.words, classes=word_classes)
    mapped_train = [restricted.map(s) for s in train_sentences]
    f = lstm_string_function(model, vocab, restricted, train_sentences)
    prefixes = sample_basis(mapped_train, settings.prefixes)
    suffixes = sample_basis(mapped_train, settings.suffixes, suffixes=True)
    started = time.perf_counter()
    logit_hankel, logit_blocks = recurrent_hankel_blocks(f, prefixes, suffixes)
    hankel_seconds = time.perf_counter() - started
    blocks = {
        "logit": (logit_hankel, logit_blocks),
        "probability": (sigmoid(logit_hankel), {a: sigmoid(b) for a, b in logit_blocks.items()}),
    }
    dev_mapped = [restricted.map(s) for s in dev["sentences"]]
    test_mapped = [restricted.map(s) for s in test["sentences"]]
    lstm_dev_mapped, lstm_test_mapped = f(dev_mapped), f(test_mapped)
    row: dict[str, Any] = {
        "size": size,
        "classes": classes,
        "alphabet": len(restricted.alphabet),
        "prefixes": len(prefixes),
        "suffixes": len(suffixes),
        "hankel_entries": len(prefixes) * len(suffixes) * (len(restricted.alphabet) + 1),
        "hankel_seconds": hankel_seconds,
        "coverage_train": float(np.mean([w in restricted.words for s in mapped_train for w in s])),
        "coverage_dev": float(np.mean([w in restricted.words for s in dev_mapped for w in s])),
        "lstm_mapped_dev_accuracy": accuracy(lstm_dev_mapped, 0.0, dev["labels"]),
        "lstm_mapped_test_accuracy": accuracy(lstm_test_mapped, 0.0, test["labels"]),
        "outputs": {},
    }
    for output, threshold in OUTPUTS.items():
        hankel, per_symbol = blocks[output]
        transform = sigmoid if output == "probability" else np.asarray
        truth_mapped, truth_real = transform(lstm_dev_mapped), transform(dev["lstm"])
        singular = np.linalg.svd(hankel, compute_uv=False)
        chosen = choose_rank(singular, settings.relative, max_rank=max(settings.ranks))
        sweep = []
        results: dict[int, SpectralResult] = {}
        for rank in sorted({*settings.ranks, chosen}):
            if rank > len(singular):
                continue
            results[rank] = spectral_from_hankel(
                hankel, per_symbol, prefixes, suffixes, rank, name=f"sst2_{size}_{classes}"
            )
            learned = results[rank].scores(dev_mapped)
            sweep.append(
                {
                    "rank": rank,
                    "vs_lstm_mapped": Fidelity.of(truth_mapped, learned, threshold).as_dict(),
                    "vs_lstm_real": Fidelity.of(truth_real, learned, threshold).as_dict(),
                    "dev_accuracy": accuracy(learned, threshold, dev["labels"]),
                }
            )
        best = results[chosen]
        dev_learned, test_learned = best.scores(dev_mapped), best.scores(test_mapped)
        buckets = []
        for low, high in LENGTH_BUCKETS:
            picked = np.array([low <= len(s) <= high for s in dev_mapped])
            if picked.any():
                buckets.append(
                    {
                        "lengths": length_bucket(low),
                        "sentences": int(picked.sum()),
                        "vs_lstm_mapped": Fidelity.of(truth_mapped[picked], dev_learned[picked], threshold).as_dict(),
                        "vs_lstm_real": Fidelity.of(truth_real[picked], dev_learned[picked], threshold).as_dict(),
                    }
                )
        row["outputs"][output] = {
            "singular_values": singular.tolist(),
            "chosen_rank": chosen,
            "sweep": sweep,
            "by_length": buckets,
            "dev_accuracy": accuracy(dev_learned, threshold, dev["labels"]),
            "lstm_margin": float(np.mean(np.abs(truth_mapped - threshold))),
            "test_accuracy": accuracy(test_learned, threshold, test["labels"]),
            "test_agreement_real": Fidelity.of(transform(test["lstm"]), test_learned, threshold).agreement,
        }
    return row


def label(row: dict[str, Any]) -> str:
    return f"N={row['size']}" if row["classes"] == 1 else f"N={row['size']}+{row['classes']} classes"


def write_plots(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(13, 4), sharey=True)
    for ax, output in zip(axes, OUTPUTS):
        for row in rows:
            sweep = row["outputs"][output]["sweep"]
            ranks = [point["rank"] for point in sweep]
            (line,) = ax.plot(
                ranks,
                [p["vs_lstm_mapped"]["agreement"] for p in sweep],
                "o-",
                markersize=3,
                label=f"{label(row)} vs LSTM (mapped)",
            )
            ax.plot(
                ranks,
                [p["vs_lstm_real"]["agreement"] for p in sweep],
                "s--",
                markersize=3,
                color=line.get_color(),
                alpha=0.6,
                label=f"{label(row)} vs LSTM (real)",
            )
            chosen = row["outputs"][output]["chosen_rank"]
            ax.axvline(chosen, color=line.get_color(), linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("rank (states)")
        ax.set_title(f"scalar: {output}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("decision agreement on SST-2 dev")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figure.tight_layout()
    figure.savefig(out / "sst2_spectral.png", dpi=120)
    plt.close(figure)
    largest = max(rows, key=lambda row: (row["classes"] == 1, row["size"]))
    plot_singular_values(
        np.array(largest["outputs"]["logit"]["singular_values"]),
        largest["outputs"]["logit"]["chosen_rank"],
        out / "sst2_spectral_singular_values.png",
        f"SST-2 LSTM logit, {label(largest)}: Hankel singular values",
    )


def markdown(report: dict[str, Any]) -> str:
    s, lstm = report["settings"], report["lstm"]
    lines = [
        "# Spectral extraction of an SST-2 LSTM classifier",
        "",
        f"Command: `{report['command']}` ({report['seconds']:.0f} s wall-clock on a shared machine, "
        f"{report['cpu_seconds']:.0f} s of CPU, {report['threads']} thread(s)).",
        "",
        f"LSTM: hidden {s['hidden']}, frozen 50-d GloVe, {lstm['parameters']} trained parameters, "
        f"{'loaded from the cache' if lstm['cached'] else 'trained'}; accuracy dev {lstm['dev_accuracy']:.4f}, "
        f"test {lstm['test_accuracy']:.4f} (real sentences). Scalar: z = l_pos − l_neg after each prefix, and "
        "P(positive) = σ(z). Bases: the most frequent prefixes / suffixes of the mapped training sentences "
        f"(|P| = {s['prefixes']}, |S| = {s['suffixes']}); rank chosen = singular values above {s['relative']} of "
        "the largest. LSTM mean margin: mean |scalar − threshold| of the LSTM on the mapped dev sentences (the "
        "scale of the MAE). Agreement *mapped*: with the LSTM reading the same mapped sentence (the function that "
        "was extracted); *real*: with the LSTM reading the real sentence (the classifier itself).",
        "",
        "## Chosen rank, dev set (872 sentences unless --quick)",
        "",
        "| words | dev tokens listed | scalar | rank | LSTM mean margin | MAE (mapped) | agreement mapped | "
        "agreement real | WFSA dev acc | LSTM-on-mapped dev acc | WFSA test acc | LSTM-on-mapped test acc | Hankel s |",
        "|" + "---:|" * 13,
    ]
    for row in report["sizes"]:
        for output, o in row["outputs"].items():
            point = next(p for p in o["sweep"] if p["rank"] == o["chosen_rank"])
            lines.append(
                f"| {label(row)} | {row['coverage_dev']:.3f} | {output} | {o['chosen_rank']} | "
                f"{o['lstm_margin']:.3f} | {point['vs_lstm_mapped']['mean_abs_error']:.4f} | "
                f"{point['vs_lstm_mapped']['agreement']:.4f} | "
                f"{point['vs_lstm_real']['agreement']:.4f} | {o['dev_accuracy']:.4f} | "
                f"{row['lstm_mapped_dev_accuracy']:.4f} | {o['test_accuracy']:.4f} | "
                f"{row['lstm_mapped_test_accuracy']:.4f} | {row['hankel_seconds']:.0f} |"
            )
    ranks = sorted({p["rank"] for row in report["sizes"] for o in row["outputs"].values() for p in o["sweep"]})
    lines += [
        "",
        "## Agreement with the LSTM (mapped / real) against rank, dev set",
        "",
        "| words | scalar | " + " | ".join(f"r={r}" for r in ranks) + " |",
        "|" + "---:|" * (len(ranks) + 2),
    ]
    for row in report["sizes"]:
        for output, o in row["outputs"].items():
            by_rank = {p["rank"]: p for p in o["sweep"]}
            cells = [
                f"{by_rank[r]['vs_lstm_mapped']['agreement']:.3f} / {by_rank[r]['vs_lstm_real']['agreement']:.3f}"
                if r in by_rank
                else ""
                for r in ranks
            ]
            lines.append(f"| {label(row)} | {output} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## By sentence length, chosen rank, dev set",
        "",
        "| words | scalar | lengths | sentences | MAE (mapped) | agreement mapped | agreement real |",
        "|" + "---:|" * 7,
    ]
    for row in report["sizes"]:
        for output, o in row["outputs"].items():
            for b in o["by_length"]:
                lines.append(
                    f"| {label(row)} | {output} | {b['lengths']} | {b['sentences']} | "
                    f"{b['vs_lstm_mapped']['mean_abs_error']:.4f} | {b['vs_lstm_mapped']['agreement']:.4f} | "
                    f"{b['vs_lstm_real']['agreement']:.4f} |"
                )
    lines += [
        "",
        "![agreement against rank](sst2_spectral.png)",
        "",
        "![singular values](sst2_spectral_singular_values.png)",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=parse_size,
        default=[(50, 1), (100, 1), (200, 1), (400, 1), (100, 4), (200, 4)],
        help="restricted vocabularies: N (the N most frequent words + <other>) or N:K (+ K polarity classes)",
    )
    parser.add_argument("--prefixes", type=int, default=400, help="prefix basis size |P| (with ε)")
    parser.add_argument("--suffixes", type=int, default=150, help="suffix basis size |S| (with ε)")
    parser.add_argument("--relative", type=float, default=0.02, help="rank: singular values above this × the largest")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a tiny run for the tests (< 30 s)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    settings = settings_from(args)
    started, cpu_started = time.perf_counter(), time.process_time()
    args.out.mkdir(parents=True, exist_ok=True)
    model, vocab, metrics, cached = train_or_load(args.out, settings)
    data = load_classification("sst2")
    splits: dict[str, dict[str, Any]] = {}
    for name, examples in (("dev", data.dev[: settings.dev_size]), ("test", data.test[: settings.dev_size])):
        sentences = [e.tokens for e in examples]
        splits[name] = {
            "sentences": sentences,
            "labels": np.array([e.label for e in examples]),
            "lstm": sentence_logits(model, vocab, sentences),
        }
    rows = []
    for size, classes in settings.sizes:
        rows.append(evaluate_size(size, classes, model, vocab, data, settings, splits["dev"], splits["test"]))
        o = rows[-1]["outputs"]
        print(
            f"{label(rows[-1])}: Hankel {rows[-1]['hankel_seconds']:.0f} s; "
            + "; ".join(f"{k} rank {v['chosen_rank']} dev acc {v['dev_accuracy']:.3f}" for k, v in o.items()),
            flush=True,
        )
    command = "python examples/sst2_spectral.py " + " ".join(sys.argv[1:] if argv is None else argv)
    report = {
        "command": command.strip(),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,
        "threads": args.threads,
        "settings": vars(settings),
        "lstm": {
            "cached": cached,
            "parameters": int(metrics.get("parameters", 0)),
            "dev_accuracy": accuracy(splits["dev"]["lstm"], 0.0, splits["dev"]["labels"]),
            "test_accuracy": accuracy(splits["test"]["lstm"], 0.0, splits["test"]["labels"]),
            "train_seconds": metrics.get("train_seconds"),
        },
        "sizes": rows,
    }
    (args.out / "sst2_spectral.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    write_plots(rows, args.out)
    (args.out / "sst2_spectral.md").write_text(markdown(report), encoding="utf-8")
    print(f"wrote {args.out / 'sst2_spectral.md'} in {report['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
