"""The word-embedding table every classifier starts from."""

from __future__ import annotations

from torch import nn


def word_embedding(vocab_size: int, dim: int, freeze: bool) -> nn.Embedding:
    """A ``vocab_size x dim`` table whose row 0 is the padding token; ``freeze`` keeps it out of training.

    The trainer fills it with GloVe vectors (``kleene.nn.training.prepare``) where the vocabulary has them.
    """
    embedding = nn.Embedding(vocab_size, dim, padding_idx=0)
    embedding.weight.requires_grad_(not freeze)
    return embedding
