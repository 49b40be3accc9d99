"""ISAN, the input-switched affine network (Foerster et al., 2017), as the WFSA of Rational Recurrences §4.3 / C.

    c_t = W_{x_t} c_{t-1} + b_{x_t}

is not elementwise, but rational: one WFSA with a source state q0 (self-loop 1) and states q1..qd, arcs
q0 -b_j(α)-> qj and qi -W_ji(α)-> qj, started in q0, has ``z_t[q_j] = [c_t]_j`` (Appendix C uses one such WFSA per
output dimension with final state q_j; here the d dimensions share one run and are read from the WFSA's state
vector). ``W_x`` and ``b_x`` are affine functions of the symbol's vector (its embedding row), so they depend on
the current symbol only; with a learned embedding this is the per-symbol lookup of the original ISAN. The
recurrence runs through the compiled template one step at a time, carrying the state vector.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from kleene.compile import Template
from kleene.nn.registry import register_model
from kleene.nn.rrnn import (
    RationalClassifier,
    RationalLanguageModel,
    RationalLayer,
    chain_template,
    compile_layer,
    task_builder,
)

__all__ = ["ISANClassifier", "ISANLanguageModel", "ISANLayer", "isan_template"]

Tensor = torch.Tensor


def isan_template(size: int) -> Template:
    """The ISAN WFSA with ``size`` hidden states plus the source q0 (slots ``b{j}`` and ``w{j}_{i}``)."""
    states = ["q0"] + [f"q{j}" for j in range(1, size + 1)]
    moves: list[tuple[str, str, list[str]]] = [("q0", "q0", [])]
    moves += [("q0", f"q{j}", [f"b{j}"]) for j in range(1, size + 1)]
    moves += [(f"q{i}", f"q{j}", [f"w{j}_{i}"]) for j in range(1, size + 1) for i in range(1, size + 1)]
    return chain_template(f"isan{size}", states, moves, final=[(q, None) for q in states[1:]])


class ISANLayer(RationalLayer):
    """An ISAN layer of ``hidden_size`` units; ``h_t = c_t`` (the network is affine, as in the paper)."""

    _slot_index: Tensor

    def __init__(self, input_size: int, hidden_size: int, *, backend: str = "auto"):
        super().__init__()
        self.input_size = input_size
        self.size = self.output_size = hidden_size
        self.matrix = nn.Linear(input_size, hidden_size * hidden_size)  # W_x = reshape(A v_x + a)
        self.offset = nn.Linear(input_size, hidden_size)  # b_x
        with torch.no_grad():  # start near a contraction: W_x ≈ 0.5 I
            self.matrix.weight.mul_(0.1)
            self.matrix.bias.copy_(0.5 * torch.eye(hidden_size).reshape(-1))
        self.recurrence = compile_layer(isan_template(hidden_size), "real", 1, False, backend)
        names = self.recurrence.template.slots
        d = hidden_size
        # order of the template's slots in cat([b (d), W row-major (d*d) as W[j, i] at j*d + i])
        positions = [
            int(n[1:]) - 1 if n.startswith("b") else d + (int(n[1:].split("_")[0]) - 1) * d + int(n.split("_")[1]) - 1
            for n in names
        ]
        self.register_buffer("_slot_index", torch.tensor(positions), persistent=False)

    def forward(self, x: Tensor, lengths: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        lengths = self.check(x, lengths)
        b, t, _ = x.shape
        weights = torch.cat([self.offset(x), self.matrix(x)], -1).index_select(-1, self._slot_index)
        state = h0
        if state is None:
            state = x.new_zeros((b, self.size + 1, 1))
            state[:, 0] = 1.0
        outputs = []
        for step in range(t):
            step_length = (lengths > step).to(torch.int64)
            _, state = self.recurrence(weights[:, step : step + 1, :, None], step_length, state)
            outputs.append(torch.where(step_length[:, None] > 0, state[:, 1:, 0], torch.zeros_like(state[:, 1:, 0])))
        h = torch.stack(outputs, 1) if outputs else x.new_zeros((b, 0, self.size))
        return h, state


class ISANClassifier(RationalClassifier):
    """ISAN text classifier (one layer of 32 units by default); ``options`` as in ``RationalClassifier``."""

    def __init__(
        self, vocab_size: int, num_classes: int, *, hidden_size: int = 32, num_layers: int = 1, **options: Any
    ):
        super().__init__(vocab_size, num_classes, ISANLayer, hidden_size=hidden_size, num_layers=num_layers, **options)


class ISANLanguageModel(RationalLanguageModel):
    """ISAN language model (one layer of 64 units, 64-d embeddings by default); ``options`` as in the base."""

    def __init__(
        self, vocab_size: int, *, hidden_size: int = 64, num_layers: int = 1, embedding_dim: int = 64, **options: Any
    ):
        super().__init__(
            vocab_size,
            ISANLayer,
            hidden_size=hidden_size,
            num_layers=num_layers,
            embedding_dim=embedding_dim,
            **options,
        )


register_model("isan", task_builder(ISANClassifier, ISANLanguageModel))
