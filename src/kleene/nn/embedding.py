"""The word-embedding table every classifier starts from, and the check of the token batches it reads."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from kleene.data.checks import check_count, check_lengths, check_tokens
from kleene.errors import LayerError

Tensor = torch.Tensor


def word_embedding(vocab_size: int, dim: int, freeze: bool) -> nn.Embedding:
    """A ``vocab_size x dim`` table whose row 0 is the padding token; ``freeze`` keeps it out of training.

    The trainer fills it with GloVe vectors (``kleene.nn.training.prepare``) where the vocabulary has them.

    Raises:
        LayerError: ``vocab_size`` or ``dim`` that is not an integer >= 1.
    """
    check_count(vocab_size, "vocab_size", minimum=1, error=LayerError)
    check_count(dim, "embedding_dim", minimum=1, error=LayerError)
    embedding = nn.Embedding(vocab_size, dim, padding_idx=0)
    embedding.weight.requires_grad_(not freeze)
    return embedding


def check_token_batch(embedding: nn.Embedding, tokens: Any, lengths: Any, owner: str) -> tuple[Tensor, Tensor]:
    """``(tokens, lengths)`` checked for a model reading ``embedding``: tokens a (B, T) integer tensor of ids in
    ``0..num_embeddings-1``, lengths one integer in ``0..T`` per sequence (an int64 tensor on the tokens' device).

    Empty batches (B = 0) and empty sequences (T = 0 or length 0) pass.

    Raises:
        LayerError: anything else; the message names ``owner``, the argument and the offending value.
    """
    tokens = check_tokens(tokens, embedding.num_embeddings, error=LayerError, name=f"{owner}: tokens")
    lengths = check_lengths(
        lengths, tokens.shape[0], tokens.shape[1], error=LayerError, device=tokens.device, name=f"{owner}: lengths"
    )
    return tokens, lengths
