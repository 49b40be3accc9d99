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

from functools import partial
from typing import Any

import torch
from torch import nn

from kleene.automata.semiring import Semiring
from kleene.compile import Template
from kleene.nn.registry import register_model
from kleene.nn.rrnn import (
    RationalClassifier,
    RationalLanguageModel,
    RationalLayer,
    chain_template,
    compile_layer,
    layer_semiring,
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
    """An ISAN layer of ``hidden_size`` units; ``h_t = c_t`` (the network is affine, as in the paper).

    ``semiring`` (default real; any ``layer_semiring``): ``c_i = ⊕_j W_ij ⊗ c_j ⊕ b_i`` with ``W_x``, ``b_x`` stored
    values (the affine maps' outputs as they are; max-times: logarithms); ``h`` holds stored values. The matrix starts
    near a contraction: the element of probability 1/2 on the diagonal, of 1/(100 d) elsewhere, plus small noise.
    """

    _slot_index: Tensor

    def __init__(
        self, input_size: int, hidden_size: int, *, semiring: str | Semiring | None = None, backend: str = "auto"
    ):
        super().__init__()
        self.algebra = layer_semiring("real" if semiring is None else semiring)
        self.storage, self.semiring = self.algebra.storage, self.algebra.name
        self.input_size = input_size
        self.size = self.output_size = hidden_size
        self.matrix = nn.Linear(input_size, hidden_size * hidden_size)  # W_x = reshape(A v_x + a)
        self.offset = nn.Linear(input_size, hidden_size)  # b_x
        d = hidden_size
        algebra = self.algebra
        diagonal, elsewhere = (float(algebra.to_storage(algebra.from_probability(p))) for p in (0.5, 0.01 / d))
        with torch.no_grad():
            self.matrix.weight.mul_(0.1)
            self.matrix.bias.copy_(torch.where(torch.eye(d, dtype=torch.bool), diagonal, elsewhere).reshape(-1))
        self.recurrence = compile_layer(isan_template(hidden_size), self.algebra, 1, False, backend)
        names = self.recurrence.template.slots
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
        if state is None:  # the source q0 holds one, the units zero
            state = x.new_full((b, self.size + 1, 1), float(self.storage.zero))
            state[:, 0] = float(self.storage.one)
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
        self,
        vocab_size: int,
        num_classes: int,
        *,
        hidden_size: int = 32,
        num_layers: int = 1,
        semiring: str | None = None,
        **options: Any,
    ):
        layer = partial(ISANLayer, semiring=semiring)
        super().__init__(vocab_size, num_classes, layer, hidden_size=hidden_size, num_layers=num_layers, **options)


class ISANLanguageModel(RationalLanguageModel):
    """ISAN language model (one layer of 64 units, 64-d embeddings by default); ``options`` as in the base."""

    def __init__(
        self,
        vocab_size: int,
        *,
        hidden_size: int = 64,
        num_layers: int = 1,
        embedding_dim: int = 64,
        semiring: str | None = None,
        **options: Any,
    ):
        super().__init__(
            vocab_size,
            partial(ISANLayer, semiring=semiring),
            hidden_size=hidden_size,
            num_layers=num_layers,
            embedding_dim=embedding_dim,
            **options,
        )


register_model("isan", task_builder(ISANClassifier, ISANLanguageModel))
