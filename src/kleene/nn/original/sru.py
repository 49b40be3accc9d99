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
from kleene.nn.original.common import Checkpoint, OriginalArgs, check_size, read_args, read_state_dict
from kleene.nn.original.state import wfsa_state
from kleene.nn.rrnn import full_lengths
from kleene.nn.sru import SRULayer

__all__ = ["SRU_ARGS", "SRU_CELL_ARGS", "SRUReference", "SRUReferenceLayer", "from_sru", "from_sru_module"]

Tensor = torch.Tensor

#: The arguments of the package's ``SRUCell`` with its defaults (sizes None: read from the weights, checked when
#: given). Note the cell's ``rescale=True``.
SRU_CELL_ARGS: dict[str, Any] = {
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

#: The arguments of the package's ``SRU`` wrapper (a stack of cells, keys ``rnn_lst.i.*``) with its defaults (sizes
#: and ``num_layers`` None: read from the weights, checked when given). Note the wrapper's ``rescale=False``.
SRU_ARGS: dict[str, Any] = {
    "input_size": None,
    "hidden_size": None,
    "num_layers": None,
    "dropout": 0.0,
    "rnn_dropout": 0.0,
    "bidirectional": False,
    "projection_size": 0,
    "use_tanh": False,
    "layer_norm": False,
    "highway_bias": 0.0,
    "has_skip_term": True,
    "rescale": False,
    "v1": False,
    "nn_rnn_compatible_return": False,
    "custom_m": None,
    "proj_input_to_hidden_first": False,
    "amp_recurrence_fp16": False,
    "normalize_after": False,
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
        self.hidden_size, self.bidirectional = hidden_size, bidirectional
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


class SRUReference(nn.Module):
    """The package's ``SRU`` (a stack of ``SRUReferenceLayer``, after its optional ``input_to_hidden`` map) or one
    ``SRUCell`` (``cell=True``), batch first.

    ``forward(x (B, T, n), c0=None, lengths=None)`` (the package's order, kleene's lengths last) returns h
    (B, T, output) and the last cells: (L, B, output) for the wrapper (``nn_rnn_compatible_return``: (L·directions,
    B, hidden)), (B, output) for a cell; ``c0`` has the same shape (None: zeros).
    """

    def __init__(
        self,
        layers: list[SRUReferenceLayer],
        input_to_hidden: nn.Linear | None = None,
        *,
        cell: bool = False,
        nn_rnn_compatible_return: bool = False,
    ):
        super().__init__()
        if not layers or (cell and len(layers) != 1):
            raise OriginalCodeError(f"an SRU needs at least one layer (a cell exactly one); got {len(layers)}")
        self.layers = nn.ModuleList(layers)
        self.input_to_hidden = input_to_hidden
        self.cell, self.nn_rnn_compatible_return = cell, nn_rnn_compatible_return

    def forward(self, x: Tensor, c0: Tensor | None = None, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        layers = [layer for layer in self.layers if isinstance(layer, SRUReferenceLayer)]
        batch, dim = x.shape[0], layers[-1].dim
        expected = (batch, dim) if self.cell else (len(layers), batch, dim)
        if c0 is not None and tuple(c0.shape) != expected:
            raise OriginalCodeError(f"c0 must have shape {expected}; got {tuple(c0.shape)}")
        starts = [c0] if self.cell else [None] * len(layers) if c0 is None else list(c0.unbind(0))
        h = x if self.input_to_hidden is None else self.input_to_hidden(x)
        cells = []
        for layer, start in zip(layers, starts):
            h, c = layer.run(h, start, lengths)
            cells.append(c)
        if self.cell:
            return h, cells[0]
        last = torch.stack(cells)
        if self.nn_rnn_compatible_return and layers[-1].bidirectional:
            half = dim // 2
            last = last.unflatten(2, (2, half)).transpose(1, 2).reshape(-1, batch, half)
        return h, last


def _refuse_weight_c(weight_c: Tensor, dim: int, key: str) -> None:
    nonzero = torch.nonzero(weight_c.detach() != 0).flatten()
    if len(nonzero):
        index = int(nonzero[0])
        gate, unit = ("forget", "reset")[index // dim], index % dim
        raise OriginalCodeError(
            f"this SRU cell is SRU v2: {key}[{index}] = {float(weight_c[index]):.4g} ≠ 0 puts v ⊙ c_(t-1) inside "
            f"the {gate} gate of unit {unit} (σ(W x + v ⊙ c_(t-1) + b)), so the state enters through a sigmoid and "
            f"the recurrence is not rational ({len(nonzero)} nonzero entries); only weight_c = 0 loads"
        )


def _prefixes(state_dict: Mapping[str, Tensor]) -> tuple[str, bool]:
    """The prefix of the one SRU (``…rnn_lst.0.weight_c``: True) or SRUCell (``…weight_c``: False) in the keys."""
    stacks = sorted(key[: -len("rnn_lst.0.weight_c")] for key in state_dict if key.endswith("rnn_lst.0.weight_c"))
    cells = sorted(key[: -len("weight_c")] for key in state_dict if key.endswith("weight_c"))
    if len(stacks) == 1:
        return stacks[0], True
    if not stacks and len(cells) == 1:
        return cells[0], False
    raise OriginalCodeError(
        "expected the keys of one sru.SRU (…rnn_lst.0.weight_c) or one sru.SRUCell (…weight_c); found SRUs "
        f"{stacks} and cells {cells}"
    )


def _load_cell(
    state_dict: Mapping[str, Tensor], prefix: str, options: Mapping[str, Any], n_proj: int, backend: str
) -> SRUReferenceLayer:
    """The cell whose keys start with ``prefix``; its sizes from the weights, its options from ``options``."""

    def get(key: str, shape: tuple[int, ...] | None = None) -> Tensor:
        if prefix + key not in state_dict:
            raise OriginalCodeError(f"the state dict has no {prefix + key!r} (keys: {sorted(state_dict)[:12]})")
        value = state_dict[prefix + key]
        if shape is not None and tuple(value.shape) != shape:
            raise OriginalCodeError(f"{prefix + key!r} has shape {tuple(value.shape)}; expected {shape}")
        return value

    bidirectional = bool(options["bidirectional"])
    weight_c = get("weight_c")
    if weight_c.dim() != 1 or weight_c.shape[0] % (4 if bidirectional else 2):
        raise OriginalCodeError(f"{prefix}weight_c has shape {tuple(weight_c.shape)}: not (2·output size,)")
    dim = weight_c.shape[0] // 2
    d = dim // (2 if bidirectional else 1)
    _refuse_weight_c(weight_c, dim, prefix + "weight_c")
    has_projection = prefix + "weight_proj" in state_dict
    weight = get("weight")
    n_in = get("weight_proj").shape[0] if has_projection else weight.shape[0]
    expected_projection = n_proj if 0 < n_proj < n_in and n_proj < dim else 0  # as the package decides
    if expected_projection != (get("weight_proj").shape[1] if has_projection else 0):
        raise OriginalCodeError(
            f"the projection size {n_proj} gives the cell a projection of {expected_projection}, but the state dict "
            f"has {'no ' if not has_projection else ''}{prefix}weight_proj"
        )
    skip = "none" if not options["has_skip_term"] else ("identity" if n_in == dim else "projection")
    k = 4 if skip == "projection" else 3
    weight = get("weight", (expected_projection or n_in, dim * k))
    if has_projection:
        weight = get("weight_proj", (n_in, expected_projection)) @ weight
    scale = float(get("scale_x", (1,))[0]) if options["rescale"] and skip == "identity" else 1.0
    layer_norm = "none" if not options["layer_norm"] else ("after" if options["normalize_after"] else "before")
    layer = SRUReferenceLayer(
        n_in,
        d,
        bidirectional=bidirectional,
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
            size = tuple(layer.norm.normalized_shape)
            layer.norm.weight.copy_(get("layer_norm.weight", size))
            layer.norm.bias.copy_(get("layer_norm.bias", size))
    return layer


def from_sru(checkpoint: Checkpoint, args: OriginalArgs | None = None, *, backend: str = "auto") -> SRUReference:
    """An ``SRUReference`` holding the weights of the ``sru`` package's ``SRU`` (keys ``…rnn_lst.i.*``; its
    arguments ``SRU_ARGS``, ``rescale=False`` by default) or of one ``SRUCell`` (keys ``…weight``, ``…weight_c``;
    its arguments ``SRU_CELL_ARGS``, ``rescale=True`` by default), in the checkpoint's dtype.

    ``checkpoint``: the state dict or its file (``kleene.nn.original.common.Checkpoint``); ``args``: the original's
    constructor arguments as given to it; the sizes (and the wrapper's ``num_layers``) are read from the weights and
    checked when given.

    Raises:
        OriginalCodeError: nonzero ``weight_c`` (SRU v2, naming the key and the term), ``custom_m``, an unknown
            argument, sizes that differ from the weights', or keys and shapes that do not fit the arguments.
    """
    state_dict = read_state_dict(checkpoint, "sru")
    prefix, wrapper = _prefixes(state_dict)
    code = "sru.SRU" if wrapper else "sru.SRUCell"
    options = read_args(args, code, SRU_ARGS if wrapper else SRU_CELL_ARGS)
    if options["custom_m"] is not None:
        raise OriginalCodeError("custom_m is refused: an arbitrary module computes U (and may add to weight_c)")
    if not wrapper:
        layer = _load_cell(state_dict, prefix, options, int(options["n_proj"]), backend)
        check_size(options, "input_size", layer.input_size, code)
        check_size(options, "hidden_size", layer.hidden_size, code)
        return SRUReference([layer], cell=True)
    layers: list[SRUReferenceLayer] = []
    while f"{prefix}rnn_lst.{len(layers)}.weight_c" in state_dict:
        cell_prefix = f"{prefix}rnn_lst.{len(layers)}."
        layers.append(_load_cell(state_dict, cell_prefix, options, int(options["projection_size"]), backend))
        if len(layers) > 1 and layers[-1].input_size != layers[-2].dim:
            found, below = layers[-1].input_size, layers[-2].dim
            raise OriginalCodeError(f"{cell_prefix}weight reads {found} inputs; the layer below has {below}")
    input_to_hidden = None
    if options["proj_input_to_hidden_first"] and f"{prefix}input_to_hidden.weight" in state_dict:
        weight = state_dict[f"{prefix}input_to_hidden.weight"]
        input_to_hidden = nn.Linear(weight.shape[1], weight.shape[0], bias=False).to(weight.dtype)
        if weight.shape[0] != layers[0].input_size:
            raise OriginalCodeError(f"{prefix}input_to_hidden.weight has shape {tuple(weight.shape)}: it must give "
                                    f"the first cell's {layers[0].input_size} inputs")  # fmt: skip
        with torch.no_grad():
            input_to_hidden.weight.copy_(weight)
    elif f"{prefix}input_to_hidden.weight" in state_dict:
        raise OriginalCodeError(
            f"the state dict has {prefix}input_to_hidden.weight: pass proj_input_to_hidden_first=True"
        )
    check_size(options, "input_size", layers[0].input_size if input_to_hidden is None else input_to_hidden.in_features,
               code)  # fmt: skip
    check_size(options, "hidden_size", layers[0].hidden_size, code)
    check_size(options, "num_layers", len(layers), code)
    return SRUReference(layers, input_to_hidden, nn_rnn_compatible_return=bool(options["nn_rnn_compatible_return"]))


def from_sru_module(module: nn.Module, *, backend: str = "auto") -> SRUReference:
    """``from_sru`` for a live ``sru.SRU`` or ``sru.SRUCell`` (its arguments read from the module).

    Raises:
        OriginalCodeError: as ``from_sru``; also a module that is neither, or a layer norm that is not
            ``torch.nn.LayerNorm``.
    """
    cells = list(getattr(module, "rnn_lst", [module]))
    if not cells or not all(hasattr(cell, "weight_c") for cell in cells):
        raise OriginalCodeError(f"expected an sru.SRU or sru.SRUCell, got {type(module).__name__}")
    first = cells[0]
    norm = getattr(first, "layer_norm", None)
    if norm is not None and not isinstance(norm, nn.LayerNorm):
        raise OriginalCodeError(f"the cell's layer norm is a {type(norm).__name__}, not torch.nn.LayerNorm")
    config = {name: getattr(first, name) for name in ("bidirectional", "has_skip_term", "rescale", "normalize_after",
                                                      "custom_m")}  # fmt: skip
    config["use_tanh"] = getattr(first, "activation_type", 0) == 1
    config["layer_norm"] = norm is not None
    if hasattr(module, "rnn_lst"):
        config["projection_size"] = getattr(first, "projection_size", 0)
        config["proj_input_to_hidden_first"] = getattr(module, "input_to_hidden", None) is not None
        config["nn_rnn_compatible_return"] = bool(getattr(module, "nn_rnn_compatible_return", False))
    else:
        config["n_proj"] = getattr(first, "projection_size", 0)
    return from_sru(module.state_dict(), config, backend=backend)
