"""SRU as analysed in Rational Recurrences (Lei et al., 2017, without the ``v ⊙ c_{t-1}`` term of SRU v2).

    x̃_t = W x_t,   f_t = σ(W_f x_t + b_f),   r_t = σ(W_r x_t + b_r)
    c_t = f_t ⊙ c_{t-1} + (1 - f_t) ⊙ x̃_t          (the WFSA B, compiled: u = (1 - f) ⊙ x̃, φ = f)
    h_t = r_t ⊙ tanh(c_t) + (1 - r_t) ⊙ x'_t        (highway; x' = x when sizes match, else W_h x)

The released ``sru`` package (v2) feeds ``v ⊙ c_{t-1}`` into f and r, which makes the recurrence non-rational;
this layer is the rational 2017 cell.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import sympy
import torch

from kleene.automata.semiring import Semiring
from kleene.automata.weights import sigmoid
from kleene.compile import OutputMap, Template
from kleene.compile.functions import OUTPUT
from kleene.nn import projection
from kleene.nn.registry import register_model
from kleene.nn.rrnn import (
    KERNEL_ACTIVATIONS,
    LayerError,
    RationalClassifier,
    RationalLanguageModel,
    SlotLayer,
    compile_layer,
    gate_semiring,
    rrnn_gated_template,
    task_builder,
)

__all__ = ["SRUClassifier", "SRULanguageModel", "SRULayer", "sru_template"]

Tensor = torch.Tensor


def sru_template(semiring: str | Semiring, activation: str = "tanh") -> Template:
    """RRNN(B) with the gates inside (``rrnn_gated_template("B")``: slots ``zf``, ``wu``) plus SRU's highway as the
    output map: slots ``zr`` (the reset gate's pre-activation) and ``skip`` (x', read by the map only) and
    ``h = σ(zr) act(y) + (1 − σ(zr)) skip`` on the stored c = y (max-times: its log value); ``act`` tanh or none
    (``KERNEL_ACTIVATIONS``).

    Raises:
        LayerError: another activation.
    """
    if activation not in ("tanh", "none"):
        raise LayerError(f"SRU activation must be 'tanh' or 'none', got {activation!r}")
    base = rrnn_gated_template("B", semiring)
    y, zr, skip = sympy.symbols(f"{OUTPUT} zr skip")
    highway = sigmoid(zr) * KERNEL_ACTIVATIONS[activation](y) + (1 - sigmoid(zr)) * skip
    return replace(base, slots=(*base.slots, "zr", "skip"), output_map=OutputMap(highway), name="sru")


class SRULayer(SlotLayer):
    """One SRU-2017 layer of ``hidden_size`` units per direction (the upper half reads backwards).

    ``semiring`` (default real; any ``gate_semiring``): c_t runs in it as RRNN(B) does (``rrnn_gated_template``: the
    gates inside the kernel); the highway mixes the stored values with real arithmetic, inside the kernel too
    (``sru_template``'s output map): the layer is one GEMM and one kernel. ``activation``: ``tanh`` (the paper's
    ``r ⊙ tanh(c)``) or ``none`` (``r ⊙ c``, the ``sru`` package's default).
    """

    cell_family = "sru"

    #: Whether the highway runs inside the kernel (``sru_template``); a subclass with another output map sets False,
    #: gets ``(slots (B, T, 2, D), r)`` from ``slots`` and defines ``output``.
    fused_output = True

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        bidirectional: bool = False,
        semiring: str | Semiring | None = None,
        activation: str = "tanh",
        backend: str = "auto",
    ):
        super().__init__()
        self.activation = activation
        self.algebra = gate_semiring("real" if semiring is None else semiring)
        self.storage, self.semiring = self.algebra.storage, self.algebra.name
        dim = hidden_size * (2 if bidirectional else 1)
        self.input_size = input_size
        self.dim = self.output_size = dim
        self.transform = projection.Linear(input_size, dim, bias=False)  # W
        self.gates = projection.Linear(input_size, 2 * dim)  # W_f, W_r with biases
        self.highway = None if input_size == dim else projection.Linear(input_size, dim, bias=False)
        # the gates and the highway run inside the kernel: its slots are W_f x + b_f, W x, W_r x + b_r and x'
        template = (
            sru_template(self.algebra, activation) if self.fused_output else rrnn_gated_template("B", self.algebra)
        )
        self.recurrence = compile_layer(template, self.algebra, dim, bidirectional, backend)

    def slots(self, x: Tensor) -> tuple[Tensor, Any]:
        """The raw slots (B, T, 4, D) of ``sru_template`` (one GEMM of [W_f; W; W_r; W_h], or x as the skip), or,
        without ``fused_output``, those (B, T, 2, D) of ``rrnn_gated_template("B")`` and the gate r."""
        b, t, _ = x.shape
        d = self.dim
        zeros = self.gates.bias.new_zeros(d)
        if not self.fused_output:
            weight = torch.cat([self.gates.weight[:d], self.transform.weight], 0)
            bias = torch.cat([self.gates.bias[:d], zeros], 0)
            raw = projection.linear(x, weight, bias).view(b, t, 2, d)
            r = torch.sigmoid(projection.linear(x, self.gates.weight[d:], self.gates.bias[d:]))
            return raw, r
        weights = [self.gates.weight[:d], self.transform.weight, self.gates.weight[d:]]
        biases = [self.gates.bias[:d], zeros, self.gates.bias[d:]]
        if self.highway is not None:
            weights.append(self.highway.weight)
            biases.append(zeros)
        raw = projection.linear(x, torch.cat(weights, 0), torch.cat(biases, 0)).view(b, t, len(weights), d)
        if self.highway is None:
            raw = torch.cat([raw, x.to(raw.dtype)[:, :, None]], 2)
        return raw, None


class SRUClassifier(RationalClassifier):
    """SRU-2017 text classifier; ``options`` as in ``RationalClassifier``."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        *,
        semiring: str | None = None,
        activation: str = "tanh",
        **options: Any,
    ):
        layer = partial(SRULayer, semiring=semiring, activation=activation)
        super().__init__(vocab_size, num_classes, layer, **options)


class SRULanguageModel(RationalLanguageModel):
    """SRU-2017 language model; ``options`` as in ``RationalLanguageModel``."""

    def __init__(self, vocab_size: int, *, semiring: str | None = None, activation: str = "tanh", **options: Any):
        super().__init__(vocab_size, partial(SRULayer, semiring=semiring, activation=activation), **options)


register_model("sru", task_builder(SRUClassifier, SRULanguageModel))
