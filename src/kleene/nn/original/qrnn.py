"""Models trained with salesforce/pytorch-qrnn (``torchqrnn.QRNN`` / ``QRNNLayer``), run as kleene QRNN layers.

What the original computes (read from its ``qrnn.py`` and CPU ``ForgetMult``), per layer:

* ``source = x_t`` (window 1) or ``cat([x_t, x_{t−1}])`` (window 2: the *current* input's columns first,
  ``x_{−1}`` = 0, or the last input of the previous call with ``save_prev_x``); ``Y = linear(source)`` split into
  ``Z, F[, O]`` (``output_gate``, default True); ``z = tanh(Z)``, ``F = σ(F)``.
* zoneout p: in training ``F ← F ⊙ mask`` (mask ~ Bernoulli(1 − p), not rescaled); in evaluation ``F ← F (1 − p)``.
* ``c_t = F_t z_t + (1 − F_t) c_{t−1}`` from the given ``hidden`` (or 0); ``h_t = σ(O_t) c_t`` or ``c_t``;
  a stack feeds h to the next layer (dropout between layers in training) and returns every layer's last c.

kleene's ``QRNNLayer`` runs the same pooling as the WFSA B with the paper's forget gate ``f = 1 − F = σ(−a)``: the
loader negates F's weights and bias, and writes the linear map as the causal convolution (oldest input first).
``QRNNReferenceLayer`` adds the original's evaluation-time zoneout (``f ← 1 − (1 − p)(1 − f)``, i.e. ``F (1 − p)``,
the expectation of the training mask that both codes share). ``save_prev_x`` is kleene's ``stream``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from kleene.errors import OriginalCodeError
from kleene.nn.original.common import Checkpoint, OriginalArgs, check_size, read_args, read_state_dict
from kleene.nn.original.state import wfsa_state
from kleene.nn.qrnn import QRNNLayer
from kleene.nn.rrnn import RationalStack, StreamState, full_lengths

__all__ = ["PYTORCH_QRNN_ARGS", "PytorchQRNN", "QRNNReferenceLayer", "from_pytorch_qrnn"]

Tensor = torch.Tensor

#: The arguments of pytorch-qrnn's ``QRNN(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
#: dropout=0, bidirectional=False, layers=None, **kwargs)`` and of the ``QRNNLayer`` options it passes on, with
#: their defaults (sizes None: read from the weights, checked when given).
PYTORCH_QRNN_ARGS: dict[str, Any] = {
    "input_size": None,
    "hidden_size": None,
    "num_layers": None,
    "bias": True,
    "batch_first": False,
    "dropout": 0.0,
    "bidirectional": False,
    "layers": None,
    "save_prev_x": False,
    "zoneout": 0.0,
    "window": 1,
    "output_gate": True,
    "use_cuda": True,
}


class QRNNReferenceLayer(QRNNLayer):
    """A kleene ``QRNNLayer`` whose evaluation applies zoneout as pytorch-qrnn does: ``F ← F (1 − p)``."""

    def forget_scale(self, like: Tensor) -> Tensor | None:
        """Zoneout's mask in training; the original's evaluation scale ``1 − p`` of F = 1 − f in evaluation."""
        if not self.training and self.zoneout > 0:
            return torch.full_like(like, 1 - self.zoneout)
        return super().forget_scale(like)


class PytorchQRNN(nn.Module):
    """pytorch-qrnn's ``QRNN`` as a stack of ``QRNNReferenceLayer`` (batch first).

    ``forward(x (B, T, n), hidden=None, lengths=None)`` returns the last layer's h (B, T, H) and every layer's last
    c (L, B, H) (at each sequence's length); ``hidden`` (L, B, H) is the initial c. ``stream(x, states, hidden)``
    is the original's ``save_prev_x``: chunks of one sequence, each continuing from the states the previous one
    returned (the first from ``hidden``, or zeros).
    """

    def __init__(self, layers: Sequence[QRNNReferenceLayer], dropout: float = 0.0):
        super().__init__()
        if not layers:
            raise OriginalCodeError("a pytorch-qrnn model needs at least one layer")
        self.stack = RationalStack(layers[0].convolution.in_channels, len(layers), lambda _, index: layers[index],
                                   vertical_dropout=dropout)  # fmt: skip
        self.hidden_size = layers[-1].hidden_size

    def initial_states(self, hidden: Tensor, like: Tensor) -> list[Tensor]:
        """Each layer's WFSA state holding its initial c from ``hidden`` (L, B, H).

        Raises:
            OriginalCodeError: ``hidden`` of the wrong shape.
        """
        layers = [layer for layer in self.stack.layers if isinstance(layer, QRNNLayer)]
        expected = (len(layers), like.shape[0], self.hidden_size)
        if tuple(hidden.shape) != expected:
            raise OriginalCodeError(f"hidden must have shape (layers, B, H) = {expected}; got {tuple(hidden.shape)}")
        return [wfsa_state(layer.recurrence, like, {"q1": c}) for layer, c in zip(layers, hidden)]

    def forward(self, x: Tensor, hidden: Tensor | None = None, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        lengths = full_lengths(x) if lengths is None else lengths
        states = None if hidden is None else self.initial_states(hidden, x)
        h, finals = self.stack(x, lengths, states)
        return h, torch.stack([self.last_cells(final) for final in finals])

    def stream(
        self, x: Tensor, states: Sequence[StreamState] | None = None, hidden: Tensor | None = None
    ) -> tuple[Tensor, list[StreamState]]:
        """``x`` continuing the sequence whose previous chunk left ``states`` (None: a new sequence, whose cells start
        at ``hidden`` (L, B, H), or zero, and whose previous inputs are zero, as the original's first call).

        Raises:
            OriginalCodeError: both ``states`` and ``hidden``, or ``hidden`` of the wrong shape.
        """
        if hidden is not None:
            if states is not None:
                raise OriginalCodeError("pass states (a continued sequence) or hidden (a new one), not both")
            states = [StreamState(state) for state in self.initial_states(hidden, x)]
        return self.stack.stream(x, states)

    def last_cells(self, final: Tensor) -> Tensor:
        """c (B, H) of a layer's WFSA state (B, 2, H)."""
        layer = self.stack.layers[0]
        assert isinstance(layer, QRNNLayer)
        return final[:, layer.recurrence.template.states.index("q1")]


def _layer_prefixes(state_dict: Mapping[str, Tensor]) -> list[str]:
    ending = "layers.0.linear.weight"
    stacks = sorted(key[: -len(ending)] for key in state_dict if key.endswith(ending))
    if len(stacks) == 1:
        prefixes: list[str] = []
        while f"{stacks[0]}layers.{len(prefixes)}.linear.weight" in state_dict:
            prefixes.append(f"{stacks[0]}layers.{len(prefixes)}.")
        return prefixes
    singles = sorted(key[: -len("linear.weight")] for key in state_dict if key.endswith("linear.weight"))
    if not stacks and len(singles) == 1:
        return singles
    raise OriginalCodeError(
        "expected the keys of one torchqrnn.QRNN (…layers.0.linear.weight) or one QRNNLayer (…linear.weight); "
        f"found stacks {stacks} and layers {singles}"
    )


def from_pytorch_qrnn(
    checkpoint: Checkpoint, args: OriginalArgs | None = None, *, backend: str = "auto"
) -> PytorchQRNN:
    """A ``PytorchQRNN`` holding the weights of pytorch-qrnn's ``QRNN`` (keys ``…layers.i.linear.*``) or of one
    ``QRNNLayer`` (``…linear.*``), in the checkpoint's dtype.

    ``checkpoint``: the state dict or its file (``kleene.nn.original.common.Checkpoint``); ``args``: the original's
    constructor arguments as given to it (``PYTORCH_QRNN_ARGS``, its defaults: window 1, output gate, no zoneout);
    ``input_size``, ``hidden_size`` and ``num_layers`` are read from the weights and checked when given.

    Raises:
        OriginalCodeError: an unknown argument or value (window 3 does not exist in the original; bidirectional,
            batch-first and bias-free models are refused by the original itself), sizes that differ from the
            weights', or weights whose shapes do not split into the gates of that window.
    """
    code = "pytorch-qrnn"
    state_dict = read_state_dict(checkpoint, code)
    options = read_args(args, code, PYTORCH_QRNN_ARGS)
    window, output_gate = options["window"], bool(options["output_gate"])
    zoneout, dropout = float(options["zoneout"]), float(options["dropout"])
    for key, allowed in (("bidirectional", False), ("batch_first", False), ("bias", True), ("layers", None)):
        if options[key] != allowed:
            raise OriginalCodeError(f"{key}={options[key]!r}: pytorch-qrnn's QRNN asserts {key}={allowed!r}")
    if window not in (1, 2):
        raise OriginalCodeError(f"window={window!r}: pytorch-qrnn supports windows 1 and 2 only")
    if not 0 <= zoneout < 1:
        raise OriginalCodeError(f"zoneout={zoneout!r}: kleene reproduces zoneout in [0, 1)")
    gates = 3 if output_gate else 2
    layers: list[QRNNReferenceLayer] = []
    for prefix in _layer_prefixes(state_dict):
        weight, bias = state_dict[prefix + "linear.weight"], state_dict.get(prefix + "linear.bias")
        rows, columns = weight.shape
        if rows % gates or columns % window or bias is None or tuple(bias.shape) != (rows,):
            shapes = (tuple(weight.shape), None if bias is None else tuple(bias.shape))
            raise OriginalCodeError(
                f"{prefix}linear has weight/bias shapes {shapes}: not ({gates}·H, {window}·n) and ({gates}·H,) "
                f"for window={window}, output_gate={output_gate}"
            )
        hidden, inputs = rows // gates, columns // window
        if layers and inputs != layers[-1].hidden_size:
            below = layers[-1].hidden_size
            raise OriginalCodeError(f"{prefix}linear reads {inputs} inputs; the layer below has {below}")
        layer = QRNNReferenceLayer(
            inputs, hidden, window=window, pooling="fo" if output_gate else "f", zoneout=zoneout, backend=backend
        ).to(weight.dtype)
        sign = torch.ones(rows, dtype=weight.dtype)
        sign[hidden : 2 * hidden] = -1  # F -> f = 1 - F = σ(-a)
        with torch.no_grad():
            newest_first = (weight * sign[:, None]).reshape(rows, window, inputs)
            layer.convolution.weight.copy_(newest_first.flip(1).permute(0, 2, 1))  # (out, in, K), oldest first
            assert layer.convolution.bias is not None
            layer.convolution.bias.copy_(bias * sign)
        layers.append(layer)
    if layers:
        check_size(options, "input_size", layers[0].input_size, code)
        check_size(options, "hidden_size", layers[-1].hidden_size, code)
        check_size(options, "num_layers", len(layers), code)
    return PytorchQRNN(layers, dropout)
