"""Padding and batching with lengths, deterministic per (seed, epoch), shardable across distributed ranks.

Sharding: every rank shuffles with the same seed, keeps a multiple of ``world_size`` batches and takes every
``world_size``-th one, so all ranks run the same number of steps (DistributedDataParallel needs that).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kleene.data.checks import check_count
from kleene.data.datasets import Example
from kleene.data.vocab import Vocabulary
from kleene.errors import DataError

__all__ = ["Batch", "classification_batches", "language_model_batches", "pad_sequences"]


@dataclass(frozen=True)
class Batch:
    """``tokens`` (B, T) long, padded with 0; ``lengths`` (B,); ``targets``: (B,) labels or (B, T) next tokens."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    targets: torch.Tensor

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())

    def to(self, device: torch.device | str) -> Batch:
        """This batch with its tensors on ``device``."""
        return Batch(self.tokens.to(device), self.lengths.to(device), self.targets.to(device))


def pad_sequences(sequences: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, max length) padded ids and the (B,) lengths. An empty sequence becomes one padding token of length 1, so
    that every sequence has a first and a last position.

    Caution:
        Ids must be integers; an empty batch gives a (0, 0) tensor and empty lengths.
    """
    lengths = torch.tensor([max(len(sequence), 1) for sequence in sequences], dtype=torch.long)
    tokens = torch.full((len(sequences), int(lengths.max()) if len(sequences) else 0), pad_id, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        tokens[row, : len(sequence)] = torch.as_tensor(list(sequence), dtype=torch.long)
    return tokens, lengths


def _chunks(
    count: int, batch_size: int, *, shuffle: bool, seed: int, epoch: int, rank: int, world_size: int
) -> list[list[int]]:
    """The indices 0..count-1 (shuffled by ``(seed, epoch)`` when ``shuffle``) cut into runs of ``batch_size``, then
    this rank's share: a multiple of ``world_size`` runs, every ``world_size``-th from ``rank`` (see the module
    docstring).

    Raises:
        DataError: a rank outside 0..world_size-1.
    """
    if not 0 <= rank < world_size:
        raise DataError(f"rank {rank} outside 0..{world_size - 1}")
    order = list(range(count))
    if shuffle:
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
    chunks = [order[i : i + batch_size] for i in range(0, count, batch_size)]
    usable = len(chunks) - len(chunks) % world_size
    return chunks[rank:usable:world_size]


def classification_batches(
    examples: Sequence[Example],
    vocab: Vocabulary,
    batch_size: int,
    *,
    shuffle: bool = False,
    seed: int = 0,
    epoch: int = 0,
    rank: int = 0,
    world_size: int = 1,
) -> list[Batch]:
    """Batches of ``batch_size`` examples (the last may be smaller), shuffled per epoch when ``shuffle``.

    Raises:
        DataError: ``batch_size`` that is not an integer >= 1, or a rank outside 0..world_size-1.
    """
    check_count(batch_size, "batch_size", minimum=1, error=DataError)
    chunks = _chunks(
        len(examples), batch_size, shuffle=shuffle, seed=seed, epoch=epoch, rank=rank, world_size=world_size
    )
    batches = []
    for chunk in chunks:
        tokens, lengths = pad_sequences([vocab.encode(examples[i].tokens) for i in chunk], vocab.pad_id)
        batches.append(Batch(tokens, lengths, torch.tensor([examples[i].label for i in chunk], dtype=torch.long)))
    return batches


def language_model_batches(
    ids: Sequence[int],
    batch_size: int,
    window: int,
    *,
    shuffle: bool = False,
    seed: int = 0,
    epoch: int = 0,
    rank: int = 0,
    world_size: int = 1,
) -> list[Batch]:
    """The stream cut into non-overlapping windows of ``window`` inputs, each predicting the next ``window`` tokens;
    windows are grouped ``batch_size`` at a time (in stream order, or shuffled per epoch when ``shuffle``).

    Raises:
        DataError: ``batch_size`` or ``window`` that is not an integer >= 1, a stream shorter than one window + 1,
            or a rank outside 0..world_size-1.
    """
    check_count(batch_size, "batch_size", minimum=1, error=DataError)
    check_count(window, "window", minimum=1, error=DataError)
    stream = torch.as_tensor(list(ids), dtype=torch.long)
    count = (len(stream) - 1) // window
    if count == 0:
        raise DataError(f"a stream of {len(stream)} tokens is shorter than one window of {window} + 1")
    inputs = stream[: count * window].view(count, window)
    targets = stream[1 : count * window + 1].view(count, window)
    chunks = _chunks(count, batch_size, shuffle=shuffle, seed=seed, epoch=epoch, rank=rank, world_size=world_size)
    return [
        Batch(inputs[chunk], torch.full((len(chunk),), window, dtype=torch.long), targets[chunk]) for chunk in chunks
    ]
