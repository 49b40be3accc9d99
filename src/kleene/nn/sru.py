"""SRU as analysed in Rational Recurrences (Lei et al., 2017, without the ``v ⊙ c_{t-1}`` term of SRU v2).

    x̃_t = W x_t,   f_t = σ(W_f x_t + b_f),   r_t = σ(W_r x_t + b_r)
    c_t = f_t ⊙ c_{t-1} + (1 - f_t) ⊙ x̃_t          (the WFSA B, compiled: u = (1 - f) ⊙ x̃, φ = f)
    h_t = r_t ⊙ tanh(c_t) + (1 - r_t) ⊙ x'_t        (highway; x' = x when sizes match, else W_h x)

The released ``sru`` package (v2) feeds ``v ⊙ c_{t-1}`` into f and r, which makes the recurrence non-rational;
this layer is the rational 2017 cell.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from kleene.automata.semiring import Semiring
from kleene.nn import projection
from kleene.nn.registry import register_model
from kleene.nn.rrnn import (
    RationalClassifier,
    RationalLanguageModel,
    SlotLayer,
    compile_layer,
    gate_semiring,
    rrnn_gated_template,
    task_builder,
)

__all__ = ["SRUClassifier", "SRULanguageModel", "SRULayer"]

Tensor = torch.Tensor


class SRULayer(SlotLayer):
    """One SRU-2017 layer of ``hidden_size`` units per direction (the upper half reads backwards).

    ``semiring`` (default real; any ``gate_semiring``): c_t runs in it as RRNN(B) does (``rrnn_gated_template``: the
    gates inside the kernel); the highway mixes the stored values with real
    arithmetic.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        bidirectional: bool = False,
        semiring: str | Semiring | None = None,
        backend: str = "auto",
    ):
        super().__init__()
        self.algebra = gate_semiring("real" if semiring is None else semiring)
        self.storage, self.semiring = self.algebra.storage, self.algebra.name
        dim = hidden_size * (2 if bidirectional else 1)
        self.input_size = input_size
        self.dim = self.output_size = dim
        self.transform = projection.Linear(input_size, dim, bias=False)  # W
        self.gates = projection.Linear(input_size, 2 * dim)  # W_f, W_r with biases
        self.highway = None if input_size == dim else projection.Linear(input_size, dim, bias=False)
        # the forget gate and the interpolation run inside the kernel: its slots are W_f x + b_f and W x
        template = rrnn_gated_template("B", self.algebra)
        self.recurrence = compile_layer(template, self.algebra, dim, bidirectional, backend)

    def slots(self, x: Tensor) -> tuple[Tensor, Any]:
        """The raw slots (B, T, 2, D) of ``rrnn_gated_template("B")`` (one GEMM of [W_f; W]) and the gate r."""
        b, t, _ = x.shape
        d = self.dim
        weight = torch.cat([self.gates.weight[:d], self.transform.weight], 0)
        bias = torch.cat([self.gates.bias[:d], self.gates.bias.new_zeros(d)], 0)
        raw = projection.linear(x, weight, bias).view(b, t, 2, d)
        r = torch.sigmoid(projection.linear(x, self.gates.weight[d:], self.gates.bias[d:]))
        return raw, r

    def output(self, c: Tensor, x: Tensor, extra: Any) -> Tensor:
        r = extra
        skip = x if self.highway is None else self.highway(x)
        return r * torch.tanh(c) + (1 - r) * skip


class SRUClassifier(RationalClassifier):
    """SRU-2017 text classifier; ``options`` as in ``RationalClassifier``."""

    def __init__(self, vocab_size: int, num_classes: int, *, semiring: str | None = None, **options: Any):
        super().__init__(vocab_size, num_classes, partial(SRULayer, semiring=semiring), **options)


class SRULanguageModel(RationalLanguageModel):
    """SRU-2017 language model; ``options`` as in ``RationalLanguageModel``."""

    def __init__(self, vocab_size: int, *, semiring: str | None = None, **options: Any):
        super().__init__(vocab_size, partial(SRULayer, semiring=semiring), **options)


register_model("sru", task_builder(SRUClassifier, SRULanguageModel))
