"""Shared by the rational-layer tests: a short training run on a real SST-2 subset."""

from __future__ import annotations

import torch
from torch import nn


def sst2_loss_ratio(build: type[nn.Module] | object, epochs: int = 8, lr: float = 5e-3, size: int = 160) -> float:
    """Train ``build(vocab_size, num_classes)`` on ``size`` SST-2 sentences (GloVe, Adam); final / initial loss."""
    from kleene.data import Vocabulary, classification_batches, glove_matrix, load

    torch.manual_seed(0)
    train = load("sst2").train[:size]
    vocab = Vocabulary.build([[tok for ex in train for tok in ex.tokens]])
    model = build(len(vocab), 2)  # type: ignore[operator]
    with torch.no_grad():
        model.embedding.weight.copy_(glove_matrix(vocab)[0])
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    batches = classification_batches(train, vocab, 32)

    def total_loss() -> float:
        # under gradients (not used): the first call builds each kernel's forward and backward in one library, not
        # the forward now and the backward at the first training step
        model.eval()
        loss = sum(float(nn.functional.cross_entropy(model(b.tokens, b.lengths), b.targets).detach()) for b in batches)
        model.train()
        return loss

    before = total_loss()
    for _ in range(epochs):
        for batch in batches:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(batch.tokens, batch.lengths), batch.targets).backward()
            optimizer.step()
    return total_loss() / before
