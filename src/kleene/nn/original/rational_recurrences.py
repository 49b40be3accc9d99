"""Models trained with Noahs-ARK/rational-recurrences (``rrnn.RRNN``), run as kleene layers in reference mode.

What the original computes (its ``RRNNCell``, CPU path, unidirectional; read from its ``rrnn.py``): one matrix
``weight`` (n_in, D·k) whose columns hold, per unit, k = 4 or 5 pre-activations in the order
``in1, in2, f1, f2[, out]``; ``bias`` (k·D) holds per-row biases of which only ``f1, f2, out`` are used; the ε-arc
reads ``σ(bias_eps)`` and the final weights read ``σ(bias_final)`` (interleaved ρ1, ρ2 per unit).

* ``--semiring plus_times``: f_j = σ(·), u_j = (1 − f_j) ⊙ W_j x, ε = σ(b_ε), ρ_j = σ(b_ρj);
  ``c1_t = c1 ⊙ f1 + u1``, ``c2_t = c2 ⊙ f2 + (ε + c1_{t−1}) ⊙ u2``, ``c_t = ρ1 c1_t + ρ2 c2_t``.
* ``--semiring max_plus`` and the ``LogSemiring`` (the "semiring path"): the same recurrence with ⊕/⊗ of the
  semiring, f_j = log σ(·), **u_j = W_j x not scaled by (1 − f_j)**, ε = log σ(b_ε), and **ρ_j = log(2σ(b_ρj))**
  (a factor 2 that the plus-times path does not have). The states start at the original's semiring zero, which is
  **−100**, not −∞.
* Output: ``act(σ(o) ⊙ c_t)`` with the output gate (a real product, also on the semiring path), else ``act(c_t)``;
  act is tanh (``use_tanh``), relu (``use_relu``) or the identity.
* ``layer_norm``: after every layer ``γ ⊙ (h − mean) / (std + 1e-6) + β`` with the *unbiased* std.
* ``init_hidden``: a pair (c1, c2) of (num_layers, B, D); the forward returns the final (c1, c2) the same way.

Reference mode here: each layer's recurrence is kleene's RRNN(F) template compiled for the matching kleene
semiring (``real``, ``max-plus``, ``log``); the template's constants (γ, ρ1, ρ2) are parametrized by the original's
own raw biases (``OriginalConstants``), so forward values and gradients follow the original's parametrization; the
gates, activation and layer norm around the recurrence are plain torch. Layout is kleene's: batch first.

Refused (``OriginalCodeError``): ``max_times`` (its path multiplies log-space values: ⊗ is ``torch.mul`` on
``log σ`` numbers, so it is not the max-times semiring), ``use_selu`` (the original asserts on it at run time),
``weight_norm`` (its ``apply_weight_norm`` reads an attribute the cell never sets, so the original cannot run),
bidirectional models (``RRNN`` asserts unidirectional).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from kleene.compile import compile
from kleene.errors import OriginalCodeError
from kleene.nn.original.common import Checkpoint, OriginalArgs, check_size, read_args, read_state_dict
from kleene.nn.original.state import wfsa_state
from kleene.nn.rrnn import ACTIVATIONS, RRNNLayer, SlotLayer, rrnn_template

__all__ = [
    "ORIGINAL_SEMIRINGS",
    "RATIONAL_RECURRENCES_ARGS",
    "OriginalConstants",
    "OriginalLayerNorm",
    "RRNNReference",
    "RRNNReferenceLayer",
    "copy_rrnn_layer",
    "from_rational_recurrences",
]

Tensor = torch.Tensor


@dataclass(frozen=True)
class OriginalSemiring:
    """One value of the original's ``--semiring``: the kleene semiring its recurrence runs in, whether the original
    takes its semiring path (log-space gates, unscaled inputs, 2σ final weights) and its initial state."""

    kleene: str
    log_space: bool
    initial: float


#: The original's semiring names that kleene reproduces.
ORIGINAL_SEMIRINGS = {
    "plus_times": OriginalSemiring("real", False, 0.0),
    "max_plus": OriginalSemiring("max-plus", True, -100.0),
    "log": OriginalSemiring("log", True, -100.0),
}
_REFUSED_SEMIRINGS = {
    "max_times": (
        "its semiring path stores log σ values and multiplies them with torch.mul (times = mul on log-space numbers), "
        "which is not the max-times semiring (in log space its product is a sum): the original computes no "
        "semiring recurrence kleene could reproduce"
    )
}


class OriginalConstants(nn.Module):
    """Parametrization of the compiled RRNN(F)'s constants (γ, ρ1, ρ2) by the original's raw biases (3, D):
    ``σ(raw)`` on the plus-times path; ``log σ(b_ε)`` and ``log(2σ(b_ρ))`` on the semiring path."""

    def __init__(self, log_space: bool):
        super().__init__()
        self.log_space = log_space

    def forward(self, raw: Tensor) -> Tensor:
        if not self.log_space:
            return torch.sigmoid(raw)
        logs = nn.functional.logsigmoid(raw)
        return torch.cat([logs[:1], logs[1:] + torch.log(raw.new_tensor(2.0))], 0)


class OriginalLayerNorm(nn.Module):
    """rational-recurrences' layer norm: ``γ ⊙ (x − mean) / (std + eps) + β`` with the unbiased std (not
    ``torch.nn.LayerNorm``, which divides by sqrt(biased variance + eps))."""

    def __init__(self, features: int, eps: float = 1e-6):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(features))
        self.beta = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        if x.numel() == 0:
            return self.gamma * x + self.beta
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.gamma * (x - mean) / (std + self.eps) + self.beta


class RRNNReferenceLayer(SlotLayer):
    """One ``RRNNCell`` of rational-recurrences (unidirectional) in reference mode; ``hidden_size`` units.

    ``semiring``: a key of ``ORIGINAL_SEMIRINGS``; ``activation``: tanh, relu or none. Parameters: ``forget``
    (W_f1, W_f2 and their biases), ``update`` (W_1, W_2), ``gate`` (W_o, b_o, or None) and the compiled recurrence
    whose constants' raw values are the original's ``bias_eps`` and ``bias_final``.

    Raises:
        OriginalCodeError: an unknown or refused semiring, an unknown activation.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        semiring: str = "plus_times",
        activation: str = "tanh",
        output_gate: bool = True,
        backend: str = "auto",
    ):
        super().__init__()
        self.original = original_semiring(semiring)
        if not isinstance(activation, str) or activation not in ACTIVATIONS:
            raise OriginalCodeError(f"activation {activation!r} is not one of {sorted(ACTIVATIONS)}")
        self.activation = activation
        self.dim = self.output_size = hidden_size
        self.input_size = input_size
        self.forget = nn.Linear(input_size, 2 * hidden_size)
        self.update = nn.Linear(input_size, 2 * hidden_size, bias=False)
        self.gate = nn.Linear(input_size, hidden_size) if output_gate else None
        template = rrnn_template("F")
        assert template.constants == ("gamma", "rho1", "rho2"), "OriginalConstants reads γ, ρ1, ρ2 in this order"
        self.recurrence = compile(template, self.original.kleene, hidden_size, backend)
        parametrize.register_parametrization(self.recurrence, "constants", OriginalConstants(self.original.log_space))

    @property
    def raw_constants(self) -> Tensor:
        """The original's raw biases (3, D) behind γ, ρ1, ρ2: rows ``bias_eps``, ``bias_final[0::2]``, ``[1::2]``."""
        raw: Tensor = self.recurrence.parametrizations["constants"].original  # type: ignore[union-attr,index]
        return raw

    def slots(self, x: Tensor) -> tuple[Tensor, Any]:
        b, t, _ = x.shape
        f_pre = self.forget(x).view(b, t, 2, self.dim)
        w_u = self.update(x).view(b, t, 2, self.dim)
        if self.original.log_space:
            f, u = nn.functional.logsigmoid(f_pre), w_u
        else:
            f = torch.sigmoid(f_pre)
            u = (1 - f) * w_u
        named = {"u1": u[:, :, 0], "u2": u[:, :, 1], "f1": f[:, :, 0], "f2": f[:, :, 1]}
        return torch.stack([named[s] for s in self.recurrence.template.slots], 2), None

    def output(self, c: Tensor, x: Tensor, extra: Any) -> Tensor:
        gated = c if self.gate is None else torch.sigmoid(self.gate(x)) * c
        return ACTIVATIONS[self.activation](gated)

    def initial_state(self, c1: Tensor | None, c2: Tensor | None, like: Tensor) -> Tensor:
        """The WFSA state (B, 4, D) holding c1 in q1 and c2 in q2 (the original's initial −100 or 0 when None)."""
        start = self.original.initial
        return wfsa_state(self.recurrence, like, {"q1": start if c1 is None else c1, "q2": start if c2 is None else c2})

    def final_cells(self, final: Tensor) -> tuple[Tensor, Tensor]:
        """(c1, c2) of a WFSA state (B, 4, D)."""
        states = self.recurrence.template.states
        return final[:, states.index("q1")], final[:, states.index("q2")]


class RRNNReference(nn.Module):
    """rational-recurrences' ``RRNN`` (a stack of ``RRNNReferenceLayer``, each followed by ``OriginalLayerNorm``
    when ``layer_norm``). ``forward(x (B, T, n), init_hidden=None, lengths=None)`` (the original's order, kleene's
    lengths last) returns the last layer's output
    (B, T, D) and the final ``(c1, c2)``, each (num_layers, B, D), like the original's ``(len, batch, n)`` layout
    with batch first; ``init_hidden`` is such a pair (None: the original's initial state)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int,
        *,
        layer_norm: bool = False,
        **layer_options: Any,
    ):
        super().__init__()
        if num_layers < 1:
            raise OriginalCodeError(f"num_layers must be >= 1, got {num_layers}")
        self.layers = nn.ModuleList(
            RRNNReferenceLayer(input_size if i == 0 else hidden_size, hidden_size, **layer_options)
            for i in range(num_layers)
        )
        self.norms = nn.ModuleList(OriginalLayerNorm(hidden_size) for _ in range(num_layers)) if layer_norm else None
        self.hidden_size = hidden_size

    def forward(
        self, x: Tensor, init_hidden: tuple[Tensor, Tensor] | None = None, lengths: Tensor | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        if lengths is None:
            lengths = torch.full((x.shape[0],), x.shape[1], dtype=torch.long, device=x.device)
        expected = (len(self.layers), x.shape[0], self.hidden_size)
        if init_hidden is not None and any(tuple(c.shape) != expected for c in init_hidden):
            shapes = [tuple(c.shape) for c in init_hidden]
            raise OriginalCodeError(f"init_hidden must be a pair of (num_layers, B, D) = {expected}; got {shapes}")
        c1s, c2s = [], []
        for index, layer in enumerate(self.layers):
            assert isinstance(layer, RRNNReferenceLayer)
            c1, c2 = (None, None) if init_hidden is None else (init_hidden[0][index], init_hidden[1][index])
            x, final = layer(x, lengths, layer.initial_state(c1, c2, x))
            if self.norms is not None:
                x = self.norms[index](x)
            c1_final, c2_final = layer.final_cells(final)
            c1s.append(c1_final)
            c2s.append(c2_final)
        return x, (torch.stack(c1s), torch.stack(c2s))


def original_semiring(name: str) -> OriginalSemiring:
    """The kleene reading of the original's ``--semiring`` value.

    Raises:
        OriginalCodeError: ``max_times`` (with why) or an unknown name.
    """
    if name in _REFUSED_SEMIRINGS:
        raise OriginalCodeError(f"semiring {name!r} is refused: {_REFUSED_SEMIRINGS[name]}")
    if name not in ORIGINAL_SEMIRINGS:
        known = sorted(ORIGINAL_SEMIRINGS)
        raise OriginalCodeError(f"unknown rational-recurrences semiring {name!r}; expected one of {known}")
    return ORIGINAL_SEMIRINGS[name]


#: The arguments of rational-recurrences' ``RRNN(semiring, input_size, hidden_size, num_layers=2, dropout=0.2,
#: rnn_dropout=0.2, bidirectional=False, use_tanh=1, use_relu=0, use_selu=0, weight_norm=False, layer_norm=False,
#: use_output_gate=True)`` with its defaults; ``semiring`` (no default there) is the name its scripts' ``--semiring``
#: takes. Sizes None: read from the weights (checked when given); ``layer_norm`` and ``use_output_gate`` are read
#: from the keys (checked when given); the dropouts act in training only.
RATIONAL_RECURRENCES_ARGS: dict[str, Any] = {
    "semiring": None,
    "input_size": None,
    "hidden_size": None,
    "num_layers": None,
    "dropout": 0.2,
    "rnn_dropout": 0.2,
    "bidirectional": False,
    "use_tanh": 1,
    "use_relu": 0,
    "use_selu": 0,
    "weight_norm": False,
    "layer_norm": None,
    "use_output_gate": None,
}


def _activation(config: Mapping[str, Any]) -> str:
    if config.get("use_selu", 0) and not config.get("use_tanh", 1) and not config.get("use_relu", 0):
        raise OriginalCodeError("use_selu=1 is refused: the original's activation asserts on selu, so it never runs")
    if config.get("use_tanh", 1):
        return "tanh"
    return "relu" if config.get("use_relu", 0) else "none"


def _find_prefix(state_dict: Mapping[str, Tensor]) -> str:
    heads = sorted(key[: -len("rnn_lst.0.weight")] for key in state_dict if key.endswith("rnn_lst.0.weight"))
    if len(heads) != 1:
        raise OriginalCodeError(
            f"expected the keys of one rrnn.RRNN (…rnn_lst.0.weight); found {len(heads)} such prefixes {heads}"
        )
    return heads[0]


def from_rational_recurrences(
    checkpoint: Checkpoint, args: OriginalArgs | None = None, *, backend: str = "auto"
) -> RRNNReference:
    """An ``RRNNReference`` holding the weights of rational-recurrences' ``rrnn.RRNN`` (or of a model containing one,
    e.g. its classifier's ``encoder``: the prefix is found from the keys).

    ``checkpoint``: the state dict or its file (``kleene.nn.original.common.Checkpoint``); ``args``: the RRNN's
    constructor arguments as given to it (``RATIONAL_RECURRENCES_ARGS``): ``semiring`` (``plus_times``, ``max_plus``
    or ``log``; required, as in the original), ``use_tanh`` (default 1), ``use_relu``, ``use_selu``,
    ``weight_norm``, ``bidirectional``, the sizes, the dropouts; ``layer_norm`` and ``use_output_gate`` are checked
    against the state dict (which alone decides them). The module's dtype is the state dict's.

    Raises:
        OriginalCodeError: a refused option (max_times, selu, weight norm, bidirectional: the message says why), an
            unknown argument, sizes that differ from the weights', or a state dict whose keys or shapes are not an
            RRNN's.
    """
    code = "rational-recurrences"
    state_dict = read_state_dict(checkpoint, code)
    given = read_args(args, code, RATIONAL_RECURRENCES_ARGS)
    config = {key: value for key, value in given.items() if value is not None}
    if "semiring" not in config:
        raise OriginalCodeError("config must name the semiring the model was trained with (plus_times, max_plus, log)")
    original_semiring(config["semiring"])
    activation = _activation(config)
    if config.get("bidirectional", False):
        raise OriginalCodeError("bidirectional=True is refused: rrnn.RRNN asserts unidirectional models")
    prefix = _find_prefix(state_dict)
    if config.get("weight_norm", False) or any(key.startswith(prefix + "rnn_lst.") and key.endswith("gain_in")
                                               for key in state_dict):  # fmt: skip
        raise OriginalCodeError(
            "weight_norm=True is refused: the original's apply_weight_norm reads self.gain, which RRNNCell never "
            "sets (it stores gain_in), so such a model cannot run in the original either"
        )
    num_layers = 0
    while f"{prefix}rnn_lst.{num_layers}.weight" in state_dict:
        num_layers += 1
    first = state_dict[f"{prefix}rnn_lst.0.weight"]
    bias = state_dict[f"{prefix}rnn_lst.0.bias_eps"]
    hidden = int(bias.shape[0])
    k = int(first.shape[1]) // hidden if hidden else 0
    if k not in (4, 5) or first.shape[1] != k * hidden:
        shape = tuple(first.shape)
        raise OriginalCodeError(f"rnn_lst.0.weight has shape {shape}: not (n_in, D·4 or D·5) for D={hidden}")
    output_gate = k == 5
    layer_norm = f"{prefix}ln_lst.0.gamma" in state_dict
    check_size(config, "input_size", int(first.shape[0]), code)
    check_size(config, "hidden_size", hidden, code)
    check_size(config, "num_layers", num_layers, code)
    for key, found in (("use_output_gate", output_gate), ("layer_norm", layer_norm)):
        if key in config and bool(config[key]) != found:
            raise OriginalCodeError(f"config says {key}={config[key]!r} but the state dict has {key}={found}")
    model = RRNNReference(
        int(first.shape[0]),
        hidden,
        num_layers,
        layer_norm=layer_norm,
        semiring=config["semiring"],
        activation=activation,
        output_gate=output_gate,
        backend=backend,
    ).to(first.dtype)
    with torch.no_grad():
        for index, layer in enumerate(model.layers):
            assert isinstance(layer, RRNNReferenceLayer)
            _load_cell(layer, state_dict, f"{prefix}rnn_lst.{index}.", k)
            if model.norms is not None:
                for name in ("gamma", "beta"):
                    value = _get(state_dict, f"{prefix}ln_lst.{index}.{name}", (hidden,))
                    getattr(model.norms[index], name).copy_(value)
    return model


def _get(state_dict: Mapping[str, Tensor], key: str, shape: tuple[int, ...]) -> Tensor:
    if key not in state_dict:
        raise OriginalCodeError(f"the state dict has no {key!r}")
    value = state_dict[key]
    if tuple(value.shape) != shape:
        raise OriginalCodeError(f"{key!r} has shape {tuple(value.shape)}; expected {shape}")
    return value


def _load_cell(layer: RRNNReferenceLayer, state_dict: Mapping[str, Tensor], prefix: str, k: int) -> None:
    d = layer.dim
    n_in = layer.forget.in_features
    weight = _get(state_dict, prefix + "weight", (n_in, d * k)).reshape(n_in, d, k)  # per unit: in1 in2 f1 f2 [o]
    bias = _get(state_dict, prefix + "bias", (k * d,)).reshape(k, d)  # rows in1 in2 (unused) f1 f2 [o]
    layer.update.weight.copy_(weight[:, :, 0:2].permute(2, 1, 0).reshape(2 * d, n_in))
    layer.forget.weight.copy_(weight[:, :, 2:4].permute(2, 1, 0).reshape(2 * d, n_in))
    layer.forget.bias.copy_(bias[2:4].reshape(2 * d))
    if layer.gate is not None:
        layer.gate.weight.copy_(weight[:, :, 4].T)
        layer.gate.bias.copy_(bias[4])
    eps = _get(state_dict, prefix + "bias_eps", (d,))
    final = _get(state_dict, prefix + "bias_final", (2 * d,)).reshape(d, 2)  # per unit: ρ1, ρ2
    layer.raw_constants.copy_(torch.stack([eps, final[:, 0], final[:, 1]]))  # the template's (gamma, rho1, rho2)


def copy_rrnn_layer(target: nn.Module, source: RRNNReferenceLayer) -> None:
    """Copy a plus-times reference layer's weights into kleene's ``RRNNLayer`` of kind F, real semiring and the same
    sizes and output gate (``kleene convert``: the two compute the same function)."""
    assert isinstance(target, RRNNLayer) and target.kind == "F" and (target.gate is None) == (source.gate is None)
    assert not source.original.log_space, "the semiring path has other constants than kleene's RRNN(F)"
    with torch.no_grad():
        target.forget.load_state_dict(source.forget.state_dict())
        target.update.load_state_dict(source.update.state_dict())
        if source.gate is not None and target.gate is not None:
            target.gate.load_state_dict(source.gate.state_dict())
        names = target.recurrence.template.constants
        assert names == source.recurrence.template.constants, f"constants {names} in another order"
        target.recurrence.parametrizations["constants"].original.copy_(source.raw_constants)  # type: ignore[union-attr,index]
