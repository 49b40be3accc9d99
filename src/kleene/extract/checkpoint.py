"""Exact extraction of a trained kleene checkpoint, verified on sentences of a data set (``kleene extract``).

A SoPa classifier becomes one WFSA per pattern that scores a whole padded document; any other rational model
(RRNN, SRU, QRNN, RCNN, ISAN) has its first layer taken apart into one WFSA per hidden unit. The automata's
Forward is checked against the model's own numbers (pattern scores, cell states) on dev sentences.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kleene.data import UNK, load_classification
from kleene.errors import ExtractionError, UnknownDatasetError
from kleene.extract.core import Extraction
from kleene.extract.layers import check_layer, from_kleene_layer, history_window, kleene_layer_states
from kleene.extract.sopa import SOPA_END, SOPA_START, from_sopa, sopa_document
from kleene.nn import load_checkpoint
from kleene.nn.rrnn import RationalStack
from kleene.nn.sopa import SoPaClassifier

#: Word-list size for layers whose automata keep the previous word in their states (QRNN window 2).
HISTORY_WORDS = 40

Progress = Callable[[str], AbstractContextManager[Any]]


@dataclass
class CheckpointExtraction:
    """The automata of a checkpoint, what they were verified on, and the words to export them over."""

    extraction: Extraction
    data: str
    sentences: list[list[str]]
    export_words: list[Hashable]


def _sentences(data_name: str, count: int, vocab: Any, columns: dict[str, Any]) -> list[list[str]]:
    try:
        examples = load_classification(data_name, **columns).split("dev")[:count]
    except UnknownDatasetError as exc:
        raise UnknownDatasetError(
            f"{exc}; extraction verifies on sentences of a classification data set: pass data= (--data), e.g. "
            "sst2; words outside the vocabulary read <unk>"
        ) from None
    return [[w if w in vocab else UNK for w in e.tokens] or [UNK] for e in examples]


def _within(sentences: list[list[str]], limit: int) -> list[list[str]]:
    """The leading sentences whose words together number at most ``limit`` (those that fit are kept)."""
    kept: list[list[str]] = []
    seen: set[str] = set()
    for sentence in sentences:
        if len(seen | set(sentence)) <= limit:
            kept.append(sentence)
            seen |= set(sentence)
    return kept


def _extract_sopa(
    model: Any, words: list[Hashable], sentences: list[list[str]], vocab: Any, device: torch.device
) -> Extraction:
    extraction = from_sopa(model, words)
    runner = model if device.type == "cpu" else copy.deepcopy(model).to(device)
    with torch.no_grad():
        lengths = torch.tensor([len(s) for s in sentences])
        ids = torch.zeros((len(sentences), int(lengths.max())), dtype=torch.int64)
        for b, sentence in enumerate(sentences):
            ids[b, : len(sentence)] = torch.tensor(vocab.encode(sentence))
        vectors, padded = runner.embed(ids.to(device), lengths.to(device))
        scores = runner.patterns(vectors, padded).double().cpu().numpy()
    extraction.verify_documents([sopa_document(s, model.boundary) for s in sentences], scores)
    return extraction


def _extract_layer(
    layer: Any, embedding: Any, words: list[Hashable], sentences: list[list[str]], vocab: Any, device: torch.device
) -> Extraction:
    extraction = from_kleene_layer(layer, embedding.weight[vocab.encode(words)], words)
    if device.type != "cpu":
        layer, embedding = copy.deepcopy(layer).to(device), copy.deepcopy(embedding).to(device)
    states = []
    with torch.no_grad():
        for sentence in sentences:
            vectors = embedding(torch.tensor([vocab.encode(sentence)], device=device))
            lengths = torch.tensor([len(sentence)], device=device)
            states.append(kleene_layer_states(layer, vectors, lengths)[0].double().cpu().numpy())
    extraction.verify(sentences, states)
    return extraction


def extract_checkpoint(
    path: str | Path,
    *,
    data: str | None = None,
    sentences: int = 200,
    max_words: int = 1000,
    history_words: int = HISTORY_WORDS,
    progress: Progress | None = None,
    device: str | torch.device = "cpu",
    text_column: str | None = None,
    label_column: str | None = None,
) -> CheckpointExtraction:
    """Extract the automata of the checkpoint at ``path`` and verify them on ``sentences`` dev sentences of ``data``
    (default: the data set the model was trained on; a user's file is read in the columns recorded at training
    unless ``text_column`` / ``label_column`` are given, ``Checkpoint.data_columns``).

    ``progress(message)`` is a context manager shown around each long step (e.g. a rich spinner). The automata are
    built on the CPU; the model's own numbers they are verified against are computed on ``device``.

    Raises:
        ExtractionError: the model is not rational (use spectral extraction), has no vocabulary, or no sentence
            fits ``history_words``; CheckpointError / UnknownDatasetError for a bad path or data set.
    """
    limits = (("sentences", sentences, 1), ("max_words", max_words, 0), ("history_words", history_words, 1))
    for name, value, low in limits:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ExtractionError(f"{name} must be an integer >= {low}, got {value!r}")
    step: Progress = progress or (lambda message: nullcontext())
    checkpoint = load_checkpoint(path)
    model: Any = checkpoint.model
    vocab = checkpoint.vocab
    name = checkpoint.config.get("model", type(model).__name__)
    if vocab is None or not hasattr(model, "embedding"):
        raise ExtractionError(f"{path}: the {name} model has no vocabulary and word embedding to extract")
    is_sopa = isinstance(model, SoPaClassifier)
    if not is_sopa and not isinstance(getattr(model, "stack", None), RationalStack):
        raise ExtractionError(
            f"{path}: {name} is not a rational model (neither SoPa patterns nor a stack of rational "
            "layers); its recurrence cannot be extracted exactly: use spectral extraction (kleene.extract.spectral)"
        )
    layer: Any = None if is_sopa else model.stack.layers[0]
    if layer is not None:
        check_layer(layer)  # before reading any data
    metadata = checkpoint.config.get("metadata", {})
    data_name = data or (metadata.get("data", "sst2") if isinstance(metadata, dict) else "sst2")
    chosen = _sentences(data_name, sentences, vocab, checkpoint.data_columns(text_column, label_column))
    words: list[Hashable] = list(vocab.tokens)
    export_words = words[:max_words]
    if layer is None:
        with step(f"building {model.patterns.num_patterns} pattern automata and verifying on {len(chosen)} sentences"):
            extraction = _extract_sopa(model, words, chosen, vocab, torch.device(device))
        export_words = [*export_words, SOPA_START, SOPA_END]
    else:
        if history_window(layer) > 1:
            chosen = _within(chosen, history_words)
            if not chosen:
                raise ExtractionError(
                    f"no verification sentence has at most {history_words} distinct words (history_words); raise it"
                )
            used = {w for s in chosen for w in s}
            words = export_words = [w for w in words if w in used]
        with step(f"building one automaton per unit and verifying on {len(chosen)} {data_name} sentences"):
            extraction = _extract_layer(layer, model.embedding, words, chosen, vocab, torch.device(device))
    return CheckpointExtraction(extraction, data_name, chosen, export_words)
