"""RCNN (Lei et al., 2016) n-gram layers as the (n+1)-state chain WFSA of Rational Recurrences Appendix B.

    c^(1)_t = λ_t ⊙ c^(1)_{t-1} + u^(1)_t
    c^(j)_t = λ_t ⊙ c^(j)_{t-1} + c^(j-1)_{t-1} ⊙ u^(j)_t      (j = 2 .. n)
    h_t     = tanh(c^(n)_t + b)

with ``u^(j)_t = W_j v_t`` and the decay ``λ_t = σ(W_λ v_t + b_λ)`` (``adaptive_decay=True``, input-dependent,
still rational) or a learned constant ``λ = σ(b_λ)`` per unit. The WFSA: q0 (self-loop 1) -u1-> q1 -u2-> ... -> qn,
each q_j (j ≥ 1) with a self-loop λ, final qn.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import sympy
import torch
from torch import nn

from kleene.automata.semiring import Semiring
from kleene.compile import OutputMap, Template
from kleene.compile.functions import OUTPUT
from kleene.nn import projection
from kleene.nn.registry import register_model
from kleene.nn.rrnn import (
    LayerError,
    RationalClassifier,
    RationalLanguageModel,
    SlotLayer,
    chain_template,
    compile_layer,
    gate_semiring,
    task_builder,
)

__all__ = ["RCNNClassifier", "RCNNLanguageModel", "RCNNLayer", "rcnn_template"]

Tensor = torch.Tensor


def rcnn_template(order: int, adaptive_decay: bool) -> Template:
    """The chain WFSA of an ``order``-gram RCNN (slot or constant ``lam`` on the self-loops).

    Raises:
        LayerError: order < 1.
    """
    if order < 1:
        raise LayerError(f"RCNN order (n-gram size) must be >= 1, got {order}")
    states = [f"q{j}" for j in range(order + 1)]
    moves: list[tuple[str, str, list[str]]] = [("q0", "q0", [])]
    for j in range(1, order + 1):
        moves += [(f"q{j - 1}", f"q{j}", [f"u{j}"]), (f"q{j}", f"q{j}", ["lam"])]
    return chain_template(
        f"rcnn{order}", states, moves, final=[(states[-1], None)], constants=[] if adaptive_decay else ["lam"]
    )


#: RCNN's output tanh(c + b) on the stored c = y, with the learned per-unit bias b as the map's constant.
RCNN_OUTPUT = OutputMap(sympy.tanh(sympy.Symbol(OUTPUT) + sympy.Symbol("b")), ("b",))


class RCNNLayer(SlotLayer):
    """One ``order``-gram RCNN layer of ``hidden_size`` units per direction.

    ``semiring`` (default real; any ``gate_semiring``): the chain runs in it, the decay λ = σ(·) entering as an
    element (``Semiring.stored_gate``) and the inputs u_j as they are; the output ``tanh(c + b)`` reads stored values,
    inside the kernel (``RCNN_OUTPUT``, the learned bias b its constant).
    """

    cell_family = "rcnn"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        order: int = 2,
        adaptive_decay: bool = True,
        bidirectional: bool = False,
        semiring: str | Semiring | None = None,
        backend: str = "auto",
    ):
        super().__init__()
        template = rcnn_template(order, adaptive_decay)
        self.algebra = gate_semiring("real" if semiring is None else semiring)
        self.storage, self.semiring = self.algebra.storage, self.algebra.name
        dim = hidden_size * (2 if bidirectional else 1)
        self.input_size = input_size
        self.dim, self.order, self.output_size = dim, order, dim
        self.inputs = projection.Linear(input_size, order * dim, bias=False)  # W_1 .. W_n
        self.decay = projection.Linear(input_size, dim) if adaptive_decay else None
        self.bias = nn.Parameter(torch.zeros(dim))
        template = replace(template, output_map=RCNN_OUTPUT)
        self.recurrence = compile_layer(template, self.algebra, dim, bidirectional, backend)

    def output_constants(self) -> Tensor:
        """The output map's constant b (1, D)."""
        return self.bias[None]

    def slots(self, x: Tensor) -> tuple[Tensor, Any]:
        b, t, _ = x.shape
        u = self.inputs(x).view(b, t, self.order, self.dim)
        named = {f"u{j + 1}": u[:, :, j] for j in range(self.order)}
        if self.decay is not None:
            named["lam"] = self.storage.stored_gate(self.decay(x))
        return torch.stack([named[s] for s in self.recurrence.template.slots], 2), None



class RCNNClassifier(RationalClassifier):
    """n-gram RCNN text classifier; ``options`` as in ``RationalClassifier``."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        *,
        order: int = 2,
        adaptive_decay: bool = True,
        semiring: str | None = None,
        **options: Any,
    ):
        layer = partial(RCNNLayer, order=order, adaptive_decay=adaptive_decay, semiring=semiring)
        super().__init__(vocab_size, num_classes, layer, **options)


class RCNNLanguageModel(RationalLanguageModel):
    """n-gram RCNN language model; ``options`` as in ``RationalLanguageModel``."""

    def __init__(
        self,
        vocab_size: int,
        *,
        order: int = 2,
        adaptive_decay: bool = True,
        semiring: str | None = None,
        **options: Any,
    ):
        layer = partial(RCNNLayer, order=order, adaptive_decay=adaptive_decay, semiring=semiring)
        super().__init__(vocab_size, layer, **options)


register_model("rcnn", task_builder(RCNNClassifier, RCNNLanguageModel))
