"""Every registry model, small (tiny vocabulary, hidden sizes and embeddings), with inputs of unseen shapes."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from kleene.nn.registry import build_model, registered_models

WORDS = ["<pad>", "<unk>", "who", "what", "is", "the", "capital", "of", "how", "many", "big", "a"]
RULES = {"default": "0", "rules": {"1": ["who"], "0": ["how many"]}}
RATIONAL = {"embedding_dim": 6, "hidden_size": 4, "num_layers": 1, "mlp_hidden": 5}

#: The builder keyword arguments (besides vocab_size) of each registry model, small.
KWARGS: dict[str, dict[str, Any]] = {
    "bilstm": {"num_classes": 3, "embedding_dim": 6, "hidden_size": 4, "mlp_hidden": 5},
    "cnn": {"num_classes": 3, "embedding_dim": 6, "channels": 4, "window": 2, "mlp_hidden": 5},
    "isan": {"num_classes": 3, **RATIONAL},
    "lstm": {"num_classes": 3, **RATIONAL},
    "lstm-lm": {"embedding_dim": 6, "hidden_size": 4},
    "qrnn": {"num_classes": 3, **RATIONAL},
    "rcnn": {"num_classes": 3, **RATIONAL},
    "regex": {"num_classes": 2, "rules": RULES, "vocab": WORDS, "embedding_dim": 6},
    # bidirectional with an output gate (the last layer's output map and both directions of the kernels)
    "rrnn-b": {"num_classes": 3, **RATIONAL, "bidirectional": True, "output_gate": True},
    "rrnn-b-maxplus": {"num_classes": 3, **RATIONAL},
    "rrnn-c": {"num_classes": 3, **RATIONAL, "semiring": "log"},
    "rrnn-f": {k: v for k, v in RATIONAL.items() if k != "mlp_hidden"} | {"num_layers": 2},  # an LM: (B, T, V)
    "sopa": {"num_classes": 3, "embedding_dim": 6, "patterns": "2-2_4-3", "mlp_hidden": 5},
    "sru": {"num_classes": 3, **RATIONAL},
}


def model_names() -> list[str]:
    """The registry's models; a new one without an entry in KWARGS fails here, so it cannot go untested."""
    names = registered_models()
    missing = sorted(set(names) - set(KWARGS))
    assert not missing, f"add small keyword arguments for {missing} to tests/deploy/zoo.py"
    return names


def small_model(name: str) -> nn.Module:
    torch.manual_seed(0)
    kwargs = dict(KWARGS[name])
    if name == "regex":
        from kleene.nn.rules import parse_rules

        kwargs["rules"] = parse_rules(kwargs["rules"]).to_json()
    return build_model(name, vocab_size=len(WORDS), **kwargs).eval()


def batch(size: int, steps: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random (size, steps) tokens with ragged lengths in 1..steps (one row of full length), zero-padded."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, len(WORDS), (size, steps), generator=generator)
    lengths = torch.randint(1, steps + 1, (size,), generator=generator)
    lengths[0] = steps
    tokens[torch.arange(steps)[None, :] >= lengths[:, None]] = 0
    return tokens, lengths


#: Shapes no export saw (its example is (2, 8)): larger and smaller batches and lengths, ragged.
UNSEEN = [(5, 11, 1), (1, 3, 2), (3, 1, 3)]
#: Empty batches and empty texts, (size, steps): no text, texts of no token (T = 0), and a ragged batch whose last
#: text is empty.
EMPTY = [(0, 5), (4, 0), (0, 0), (4, 6)]


def empty_batch(size: int, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of ``EMPTY``: ``batch(size, steps, 0)`` with its last text emptied when it has texts and steps, else
    (size, steps) zeros with lengths 0."""
    if not (size and steps):
        return torch.zeros((size, steps), dtype=torch.long), torch.zeros(size, dtype=torch.long)
    tokens, lengths = batch(size, steps, 0)
    tokens[-1], lengths[-1] = 0, 0
    return tokens, lengths


def assert_close(got: torch.Tensor, want: torch.Tensor, rtol: float) -> None:
    """``got`` equals ``want`` to ``rtol`` relative to the output's scale (max |want|): the GEMMs of the two
    programs may sum in another order (kleene's oneDNN path in eager mode, torch's own under tracing)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    if not want.numel():
        return
    scale = want.abs().max().clamp_min(1e-30)
    error = (got - want).abs().max()
    assert error <= rtol * scale, f"max error {error.item():.3g} > {rtol} x {scale.item():.3g}"
