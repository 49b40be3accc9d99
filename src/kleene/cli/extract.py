"""``kleene extract CHECKPOINT [--out DIR] [--format att|json|dot] [--json]``: exact extraction of a trained layer.

The first rational layer of the checkpoint's model becomes one WFSA per hidden unit over the model's vocabulary;
the automata's Forward is checked against the layer's own cell states on sentences of the data set, and the
maximum absolute error is printed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "extract",
        help="extract per-unit WFSAs from a trained rational layer",
        description="Take the first rational layer of a checkpoint apart into one WFSA per hidden unit over the "
        "vocabulary, verify the automata against the layer on real sentences, and export them.",
    )
    parser.add_argument("checkpoint", type=Path, help="checkpoint directory")
    parser.add_argument("--out", type=Path, help="directory for the exported automata (default: no export)")
    parser.add_argument("--format", default="att", choices=["att", "json", "dot"])
    parser.add_argument("--data", help="data set of the verification sentences (default: the training one)")
    parser.add_argument("--sentences", type=int, default=200, help="verification sentences (dev split)")
    parser.add_argument("--max-words", type=int, default=1000, help="export over the first N vocabulary words")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from kleene.compile.extract import ExtractionError, from_kleene_layer, kleene_layer_states
    from kleene.data import UNK, load_classification
    from kleene.nn import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint)
    model, vocab = checkpoint.model, checkpoint.vocab
    stack = getattr(model, "stack", None)
    if vocab is None or stack is None or not hasattr(model, "embedding"):
        raise ExtractionError(f"{args.checkpoint}: expected a rational classifier with a vocabulary and a layer stack")
    layer: Any = stack.layers[0]  # type: ignore[index]
    embedding: Any = model.embedding
    words = list(vocab.tokens)
    extraction = from_kleene_layer(layer, embedding.weight, words)
    data_name = args.data or checkpoint.config.get("metadata", {}).get("data", "sst2")
    examples = load_classification(data_name).split("dev")[: args.sentences]
    sentences = [[w if w in vocab else UNK for w in e.tokens] or [UNK] for e in examples]
    states = []
    with torch.no_grad():
        for sentence in sentences:
            ids = torch.tensor([vocab.encode(sentence)])
            vectors = embedding(ids)
            states.append(kleene_layer_states(layer, vectors, torch.tensor([len(sentence)]))[0].double().numpy())
    error = extraction.verify(sentences, states)
    paths = extraction.export(args.out, args.format, words[: args.max_words]) if args.out else []
    summary = {**extraction.summary(), "data": data_name, "sentences": len(sentences),
               "files": [str(p) for p in paths]}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{extraction.model}: {summary['automata']} automata over {summary['vocabulary']} words")
        print(f"verified on {len(sentences)} {data_name} sentences ({summary['checked_tokens']} tokens): "
              f"max |automaton - layer| = {error:.3g}")
        if paths:
            print(f"wrote {len(paths)} files to {args.out}")
    return 0
