"""The rational layers × semirings table of docs/layer-semirings.md, computed (not written by hand).

Each cell builds the layer in the semiring (tiny sizes, float64, the torch backend), trains it three Adam steps on
random word vectors, and tries exact extraction (``kleene.extract.from_kleene_layer``) of the trained layer, whose
automata must reproduce its cell states on random sentences to 1e-9. A cell reads

* ``trains · extracts`` — both hold (SoPa: each pattern's automaton scores a sentence as the bank does);
* ``trains`` — it trains; extraction refuses (the zoo proves the layer's extraction entry in other semirings);
* ``refused: ...`` — the layer refuses the semiring, with its reason.

    python examples/layer_semirings.py            # rewrites docs/layer-semirings.md
    python examples/layer_semirings.py --check    # exit 1 if the file differs from what the code computes now

tests/nn/test_layer_semirings.py runs every cell and compares with the committed file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kleene.errors import ExtractionError, KleeneError
from kleene.extract import from_kleene_layer, from_sopa_patterns, kleene_layer_states
from kleene.nn.isan import ISANLayer
from kleene.nn.qrnn import QRNNLayer
from kleene.nn.rcnn import RCNNLayer
from kleene.nn.rrnn import RRNNLayer
from kleene.nn.sopa import SoftPatterns
from kleene.nn.sru import SRULayer

SEMIRINGS = ("real", "log", "max-plus", "max-times", "min-plus")
INPUT = 3
#: layer name -> factory(semiring)
LAYERS: dict[str, Callable[[str], Any]] = {
    "RRNN(B)": lambda s: RRNNLayer(INPUT, 2, "B", semiring=s, backend="torch"),
    "RRNN(C)": lambda s: RRNNLayer(INPUT, 2, "C", semiring=s, backend="torch"),
    "RRNN(F)": lambda s: RRNNLayer(INPUT, 2, "F", semiring=s, backend="torch"),
    "QRNN f-pooling, window 1": lambda s: QRNNLayer(INPUT, 2, window=1, pooling="f", semiring=s, backend="torch"),
    "QRNN fo-pooling, window 2": lambda s: QRNNLayer(INPUT, 2, window=2, pooling="fo", semiring=s, backend="torch"),
    "QRNN ifo-pooling, window 1": lambda s: QRNNLayer(INPUT, 2, window=1, pooling="ifo", semiring=s, backend="torch"),
    "SRU (2017)": lambda s: SRULayer(INPUT, 2, semiring=s, backend="torch"),
    "RCNN bigram": lambda s: RCNNLayer(INPUT, 2, order=2, semiring=s, backend="torch"),
    "ISAN": lambda s: ISANLayer(INPUT, 2, semiring=s, backend="torch"),
    "SoPa (paper mode)": lambda s: SoftPatterns(INPUT, "2-1_3-1", semiring=s, backend="torch"),
}
WORDS = ["a", "b", "c", "d"]


def _train(layer: Any) -> bool:
    """Three Adam steps on random vectors; whether the loss stayed finite."""
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.05)
    for _ in range(3):
        x = torch.randn(2, 4, INPUT, dtype=torch.float64)
        out = layer(x, torch.tensor([4, 3]))
        loss = (out[0] if isinstance(out, tuple) else out).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if not torch.isfinite(loss):
            return False
    return True


def _extraction_error(layer: Any, vectors: np.ndarray, sentences: list[list[str]]) -> float:
    """How far the trained layer's extracted automata are from the layer on ``sentences`` (raises
    ``ExtractionError`` where extraction refuses): prefix scores against the cell states, or, for a SoPa bank,
    each sentence's score as a document against the bank's."""
    rows = [torch.tensor(vectors[[WORDS.index(w) for w in s]])[None] for s in sentences]
    with torch.no_grad():
        if isinstance(layer, SoftPatterns):
            extraction = from_sopa_patterns(layer, vectors, WORDS)
            scores = np.concatenate([layer(x, torch.tensor([x.shape[1]])).numpy() for x in rows])
            return extraction.verify_documents(sentences, scores)
        extraction = from_kleene_layer(layer, vectors, WORDS)
        states = [kleene_layer_states(layer, x, torch.tensor([x.shape[1]]))[0].numpy() for x in rows]
        return extraction.verify(sentences, states)


def cell(name: str, semiring: str, seed: int = 0) -> str:
    """What ``LAYERS[name]`` does in ``semiring`` (see the module docstring)."""
    torch.manual_seed(seed)
    try:
        layer = LAYERS[name](semiring).double()
    except KleeneError as error:
        return "refused: " + str(error).split(": ", 1)[-1].split(";")[0]
    if not _train(layer):
        return "diverges"
    vectors = np.random.default_rng(seed).standard_normal((len(WORDS), INPUT))
    rng = np.random.default_rng(seed + 1)
    sentences = [[WORDS[i] for i in rng.integers(0, len(WORDS), size=n)] for n in (1, 3, 5)]
    try:
        error = _extraction_error(layer.eval(), vectors, sentences)
    except ExtractionError:
        return "trains"
    return "trains · extracts" if error < 1e-9 else f"trains · extraction off by {error:.1e}"


def table() -> str:
    """docs/layer-semirings.md, as the code computes it now."""
    lines = [
        "# Rational layers × semirings",
        "",
        "Generated by `python examples/layer_semirings.py` (do not edit): each cell builds the layer with `semiring=`,",
        "trains it three steps and extracts its automata exactly where the zoo proves the layer's extraction entry in",
        "that semiring (the automata reproduce the trained layer's cell states to 1e-9). Every cell is a test",
        "(tests/nn/test_layer_semirings.py). SoPa's row compares each pattern's automaton with the bank's document",
        "score. The automata are in the semiring's elements (max-times: probabilities, whose logarithms the layers",
        "store).",
        "",
        "| layer | " + " | ".join(SEMIRINGS) + " |",
        "|---|" + "---|" * len(SEMIRINGS),
    ]
    for name in LAYERS:
        lines.append(f"| {name} | " + " | ".join(cell(name, s) for s in SEMIRINGS) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs/layer-semirings.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    text = table()
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'differs from the code'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
