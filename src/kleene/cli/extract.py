"""``kleene extract CHECKPOINT [--out DIR] [--format att|json|dot] [--json]``: exact extraction of a trained model.

A SoPa classifier becomes one WFSA per pattern that scores a whole padded document; any other rational model
(RRNN, SRU, QRNN, RCNN, ISAN) has its first layer taken apart into one WFSA per hidden unit. The automata's
Forward is checked against the model's own numbers (pattern scores, cell states) on sentences of the data set,
and the maximum absolute error is printed.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Hashable
from pathlib import Path
from typing import Any

#: Word-list size for layers whose automata keep the previous word in their states (QRNN window 2).
HISTORY_WORDS = 40


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "extract",
        help="extract per-unit (per-pattern) WFSAs from a trained rational model",
        description="Take a SoPa classifier's patterns, or the first rational layer of a checkpoint, apart into "
        "one WFSA per pattern or hidden unit over the vocabulary, verify the automata against the model on real "
        "sentences, and export them.",
    )
    parser.add_argument("checkpoint", type=Path, help="checkpoint directory")
    parser.add_argument("--out", type=Path, help="directory for the exported automata (default: no export)")
    parser.add_argument("--format", default="att", choices=["att", "json", "dot"])
    parser.add_argument(
        "--data", help="classification data set of the verification sentences (default: the training one)"
    )
    parser.add_argument("--sentences", type=int, default=200, help="verification sentences (dev split)")
    parser.add_argument("--max-words", type=int, default=1000, help="export over the first N vocabulary words")
    parser.add_argument(
        "--history-words",
        type=int,
        default=HISTORY_WORDS,
        help="QRNN window 2: the automata track the previous word, so they are built (and verified) "
        "over the words of the first sentences, at most this many",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def _sentences(args: argparse.Namespace, checkpoint: Any, vocab: Any) -> tuple[str, list[list[str]]]:
    from kleene.data import UNK, load_classification
    from kleene.data.datasets import UnknownDatasetError

    data_name = args.data or checkpoint.config.get("metadata", {}).get("data", "sst2")
    try:
        examples = load_classification(data_name).split("dev")[: args.sentences]
    except UnknownDatasetError as exc:
        raise UnknownDatasetError(
            f"{exc}; kleene extract verifies on sentences of a classification data set: pass --data (e.g. sst2; "
            "words outside the vocabulary read <unk>)"
        ) from None
    return data_name, [[w if w in vocab else UNK for w in e.tokens] or [UNK] for e in examples]


def _within(sentences: list[list[str]], limit: int) -> list[list[str]]:
    """The leading sentences whose words together number at most ``limit`` (those that fit are kept)."""
    kept: list[list[str]] = []
    seen: set[str] = set()
    for sentence in sentences:
        if len(seen | set(sentence)) <= limit:
            kept.append(sentence)
            seen |= set(sentence)
    return kept


def _extract_sopa(model: Any, words: list[Hashable], sentences: list[list[str]], vocab: Any) -> Any:
    import torch

    from kleene.compile.extract import from_sopa, sopa_document

    extraction = from_sopa(model, words)
    with torch.no_grad():
        lengths = torch.tensor([len(s) for s in sentences])
        ids = torch.zeros((len(sentences), int(lengths.max())), dtype=torch.int64)
        for b, sentence in enumerate(sentences):
            ids[b, : len(sentence)] = torch.tensor(vocab.encode(sentence))
        vectors, padded = model.embed(ids, lengths)
        scores = model.patterns(vectors, padded).double().numpy()
    extraction.verify_documents([sopa_document(s, model.boundary) for s in sentences], scores)
    return extraction


def _extract_layer(layer: Any, embedding: Any, words: list[Hashable], sentences: list[list[str]], vocab: Any) -> Any:
    import torch

    from kleene.compile.extract import from_kleene_layer, kleene_layer_states

    extraction = from_kleene_layer(layer, embedding.weight[vocab.encode(words)], words)
    states = []
    with torch.no_grad():
        for sentence in sentences:
            vectors = embedding(torch.tensor([vocab.encode(sentence)]))
            states.append(kleene_layer_states(layer, vectors, torch.tensor([len(sentence)]))[0].double().numpy())
    extraction.verify(sentences, states)
    return extraction


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from kleene.compile.extract import SOPA_END, SOPA_START, ExtractionError, check_layer, history_window
    from kleene.nn import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint)
    model: Any = checkpoint.model
    vocab = checkpoint.vocab
    name = checkpoint.config.get("model", type(model).__name__)
    if vocab is None or not hasattr(model, "embedding"):
        raise ExtractionError(f"{args.checkpoint}: the {name} model has no vocabulary and word embedding to extract")
    is_sopa = hasattr(model, "patterns") and hasattr(model, "boundary")
    if not is_sopa and not hasattr(model, "stack"):
        raise ExtractionError(
            f"{args.checkpoint}: {name} is not a rational model (neither SoPa patterns nor a stack of rational "
            "layers); its recurrence cannot be extracted exactly: use spectral extraction (kleene.compile.spectral)"
        )
    layer: Any = None if is_sopa else model.stack.layers[0]
    if layer is not None:
        check_layer(layer)  # before reading any data
    data_name, sentences = _sentences(args, checkpoint, vocab)
    words: list[Hashable] = list(vocab.tokens)
    export_words = words[: args.max_words]
    status = Console(stderr=True).status  # a spinner on the terminal, silent when stderr is not one
    if layer is None:
        with status(
            f"building {model.patterns.num_patterns} pattern automata and verifying on {len(sentences)} "
            f"{data_name} sentences"
        ):
            extraction = _extract_sopa(model, words, sentences, vocab)
        export_words = [*export_words, SOPA_START, SOPA_END]
    else:
        if history_window(layer) > 1:
            sentences = _within(sentences, args.history_words)
            if not sentences:
                raise ExtractionError(
                    f"no verification sentence has at most --history-words {args.history_words} "
                    "distinct words; raise it"
                )
            used = {w for s in sentences for w in s}
            words = export_words = [w for w in words if w in used]
        with status(f"building one automaton per unit and verifying on {len(sentences)} {data_name} sentences"):
            extraction = _extract_layer(layer, model.embedding, words, sentences, vocab)
    paths = []
    if args.out:
        with status(f"writing {args.format} files over {len(export_words)} words to {args.out}"):
            paths = extraction.export(args.out, args.format, export_words)
    summary = {**extraction.summary(), "data": data_name, "sentences": len(sentences), "files": [str(p) for p in paths]}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{extraction.model}: {summary['automata']} automata over {summary['vocabulary']} words")
        print(
            f"verified on {len(sentences)} {data_name} sentences ({summary['checked_tokens']} tokens): "
            f"max |automaton - model| = {summary['max_abs_error']:.3g}"
        )
        if paths:
            print(f"wrote {len(paths)} files to {args.out}")
    return 0
