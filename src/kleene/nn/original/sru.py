"""Cells of the ``sru`` package (2.6.0, asappresearch/sru) run as kleene SRU layers in reference mode.

What the package computes (``SRUCell.forward`` and its CPU ``elementwise_recurrence``), read from its code:

* pre layer norm (``layer_norm`` without ``normalize_after``) on the input used for U (the skip term ``x`` stays
  the raw input); ``U = x W`` or ``(x W_proj) W`` (``n_proj``), per unit k = 3 or 4 columns ``x̃, f, r[, x']``
  (4 when ``has_skip_term`` and input size ≠ output size); bias = (forget biases, reset biases).
* ``f_t = σ(U_f + v_f ⊙ c_{t−1} + b_f)``, ``r_t = σ(U_r + v_r ⊙ c_{t−1} + b_r)`` with ``v = weight_c``;
  ``c_t = f_t c_{t−1} + (1 − f_t) x̃_t``; ``g = c`` or ``tanh(c)`` (``use_tanh``).
* ``h_t = r_t g_t + (1 − r_t) x'_t`` with ``x' = scale_x · x`` (k = 3, ``scale_x`` = 1 unless ``rescale``) or
  ``x' = U[..., 3]`` (k = 4, no scale), or ``h_t = r_t g_t`` without skip term; post layer norm on h
  (``normalize_after``). Bidirectional cells run the second half of the units backwards.

``weight_c ≠ 0`` (SRU v2) puts ``v ⊙ c_{t−1}`` inside a sigmoid: the state enters non-linearly, the recurrence is not
rational, and loading is refused. With ``weight_c = 0`` the cell is the 2017 SRU (the WFSA B): ``SRUReferenceLayer``
is kleene's ``SRULayer`` with the package's options (activation, skip term and its scale, projection folded into W,
pre/post layer norm). Evaluation only: the package's training-time dropouts (``dropout`` on r ⊙ g, ``rnn_dropout``)
draw their own masks. Refused: ``custom_m`` (an arbitrary module computes U).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from kleene.errors import OriginalCodeError
from kleene.nn import projection
from kleene.nn.original.state import wfsa_state
from kleene.nn.rrnn import full_lengths
from kleene.nn.sru import SRULayer

__all__ = ["SRU_OPTIONS", "SRUReferenceLayer", "from_sru", "from_sru_module"]

Tensor = torch.Tensor

#: The SRUCell constructor options the loader reads (with the package's defaults).
SRU_OPTIONS: dict[str, Any] = {
    "input_size": None,
    "hidden_size": None,
    "bidirectional": False,
    "n_proj": 0,
    "use_tanh": False,
    "has_skip_term": True,
    "layer_norm": False,
    "rescale": True,
    "normalize_after": False,
    "v1": False,
    "custom_m": None,
    "dropout": 0.0,
    "rnn_dropout": 0.0,
    "highway_bias": 0.0,
    "amp_recurrence_fp16": False,
    "weight_c_init": None,
}


class SRUReferenceLayer(SRULayer):
    """kleene's ``SRULayer`` with the ``sru`` package's options; ``forward(x, lengths, h0)`` as every layer (its
    output, with the package's options and layer norm, in torch: ``fused_output`` False).

    ``skip``: "identity" (``scale · x``), "projection" (the highway matrix, no scale) or "none";
    ``layer_norm``: "none", "before" (on the input of the matrices) or "after" (on h).

    Raises:
        OriginalCodeError: an unknown skip or layer-norm mode, or an identity skip between different sizes.
    """

    fused_output = False

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        bidirectional: bool = False,
        activation: str = "none",
        skip: str = "identity",
        scale: float = 1.0,
        layer_norm: str = "none",
        backend: str = "auto",
    ):
        super().__init__(input_size, hidden_size, bidirectional=bidirectional, backend=backend)
        if activation not in ("none", "tanh"):
            raise OriginalCodeError(f"activation must be none or tanh, got {activation!r}")
        if skip not in ("identity", "projection", "none"):
            raise OriginalCodeError(f"skip must be identity, projection or none, got {skip!r}")
        if skip == "identity" and input_size != self.dim:
            raise OriginalCodeError(f"an identity skip needs input size {input_size} = output size {self.dim}")
        if layer_norm not in ("none", "before", "after"):
            raise OriginalCodeError(f"layer_norm must be none, before or after, got {layer_norm!r}")
        self.activation, self.skip, self.layer_norm_mode = activation, skip, layer_norm
        self.highway = projection.Linear(input_size, self.dim, bias=False) if skip == "projection" else None
        self.scale: Tensor
        self.register_buffer("scale", torch.tensor(float(scale)))
        sizes = {"none": None, "before": input_size, "after": self.dim}
        size = sizes[layer_norm]
        self.norm = nn.LayerNorm(size) if size is not None else None

    def slots(self, x: Tensor) -> tuple[Tensor, Any]:
        normalized = self.norm(x) if self.norm is not None and self.layer_norm_mode == "before" else x
        slots, r = super().slots(normalized)
        return slots, (r, normalized)

    def output(self, c: Tensor, x: Tensor, extra: Any) -> Tensor:
        r, normalized = extra
        g = torch.tanh(c) if self.activation == "tanh" else c
        if self.skip == "none":
            h = r * g
        else:
            skip = x * self.scale if self.highway is None else self.highway(normalized)
            h = r * g + (1 - r) * skip
        return self.norm(h) if self.norm is not None and self.layer_norm_mode == "after" else h

    def run(self, x: Tensor, c0: Tensor | None = None, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The package's ``(h, c)`` for x (B, T, n) from ``c0`` (B, D) (zeros when None): c is the last cell."""
        lengths = full_lengths(x) if lengths is None else lengths
        h0 = None if c0 is None else wfsa_state(self.recurrence, x, {"q1": c0})
        h, final = self(x, lengths, h0)
        return h, final[:, self.recurrence.template.states.index("q1")]


def _refuse_weight_c(weight_c: Tensor, dim: int) -> None:
    nonzero = torch.nonzero(weight_c.detach() != 0).flatten()
    if len(nonzero):
        index = int(nonzero[0])
        gate, unit = ("forget", "reset")[index // dim], index % dim
        raise OriginalCodeError(
            f"this SRU cell is SRU v2: weight_c[{index}] = {float(weight_c[index]):.4g} ≠ 0 puts v ⊙ c_(t-1) inside "
            f"the {gate} gate of unit {unit} (σ(W x + v ⊙ c_(t-1) + b)), so the state enters through a sigmoid and "
            f"the recurrence is not rational ({len(nonzero)} nonzero entries); only weight_c = 0 loads"
        )


def from_sru(
    state_dict: Mapping[str, Tensor], config: Mapping[str, Any], *, backend: str = "auto"
) -> SRUReferenceLayer:
    """An ``SRUReferenceLayer`` holding an ``sru.SRUCell``'s state dict; ``config``: the cell's constructor options
    (``SRU_OPTIONS``; ``input_size`` and ``hidden_size`` are required). The layer is in the state dict's dtype.

    Raises:
        OriginalCodeError: nonzero ``weight_c`` (SRU v2, naming the term), ``custom_m``, an unknown option, or a
            state dict whose keys or shapes do not fit the options.
    """
    unknown = set(config) - set(SRU_OPTIONS)
    if unknown:
        raise OriginalCodeError(f"unknown SRUCell options {sorted(unknown)}; known: {sorted(SRU_OPTIONS)}")
    options = {**SRU_OPTIONS, **config}
    if options["input_size"] is None or options["hidden_size"] is None:
        raise OriginalCodeError("config must give the SRUCell's input_size and hidden_size")
    if options["custom_m"] is not None:
        raise OriginalCodeError("custom_m is refused: an arbitrary module computes U (and may add to weight_c)")
    n_in, d = int(options["input_size"]), int(options["hidden_size"])
    dim = d * (2 if options["bidirectional"] else 1)
    n_proj = int(options["n_proj"])
    projection = n_proj if 0 < n_proj < n_in and n_proj < dim else 0  # as the package decides
    skip = "none" if not options["has_skip_term"] else ("identity" if n_in == dim else "projection")
    k = 4 if skip == "projection" else 3

    def get(key: str, shape: tuple[int, ...]) -> Tensor:
        if key not in state_dict:
            raise OriginalCodeError(f"the SRUCell state dict has no {key!r} (keys: {sorted(state_dict)})")
        if tuple(state_dict[key].shape) != shape:
            raise OriginalCodeError(f"{key!r} has shape {tuple(state_dict[key].shape)}; expected {shape}")
        return state_dict[key]

    _refuse_weight_c(get("weight_c", (2 * dim,)), dim)
    weight = get("weight", (projection or n_in, dim * k))
    if projection:
        weight = get("weight_proj", (n_in, projection)) @ weight
    scale = float(get("scale_x", (1,))[0]) if options["rescale"] and skip == "identity" else 1.0
    layer_norm = "none" if not options["layer_norm"] else ("after" if options["normalize_after"] else "before")
    layer = SRUReferenceLayer(
        n_in,
        d,
        bidirectional=bool(options["bidirectional"]),
        activation="tanh" if options["use_tanh"] else "none",
        skip=skip,
        scale=scale,
        layer_norm=layer_norm,
        backend=backend,
    ).to(weight.dtype)
    per_unit = weight.reshape(n_in, dim, k)  # columns (direction, unit, k) -> (unit of dim, k)
    with torch.no_grad():
        layer.transform.weight.copy_(per_unit[:, :, 0].T)
        layer.gates.weight.copy_(torch.cat([per_unit[:, :, 1].T, per_unit[:, :, 2].T]))
        layer.gates.bias.copy_(get("bias", (2 * dim,)))
        if layer.highway is not None:
            layer.highway.weight.copy_(per_unit[:, :, 3].T)
        if layer.norm is not None:
            size = layer.norm.normalized_shape
            layer.norm.weight.copy_(get("layer_norm.weight", size))
            layer.norm.bias.copy_(get("layer_norm.bias", size))
    return layer


def from_sru_module(cell: nn.Module, *, backend: str = "auto") -> SRUReferenceLayer:
    """``from_sru`` for a live ``sru.SRUCell`` (its options read from the module).

    Raises:
        OriginalCodeError: as ``from_sru``; also a cell whose layer norm is not ``torch.nn.LayerNorm``.
    """
    config = {name: getattr(cell, name) for name in ("input_size", "hidden_size", "bidirectional", "has_skip_term",
                                                     "rescale", "normalize_after", "custom_m")}  # fmt: skip
    config["n_proj"] = getattr(cell, "projection_size", 0)
    config["use_tanh"] = getattr(cell, "activation_type", 0) == 1
    norm = getattr(cell, "layer_norm", None)
    if norm is not None and not isinstance(norm, nn.LayerNorm):
        raise OriginalCodeError(f"the cell's layer norm is a {type(norm).__name__}, not torch.nn.LayerNorm")
    config["layer_norm"] = norm is not None
    return from_sru(cell.state_dict(), config, backend=backend)
