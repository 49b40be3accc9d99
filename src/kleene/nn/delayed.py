"""Delayed recurrent networks (Turek et al., 2020, ``delayed-rnn.md``).

A d-RNN reads ``d`` null inputs after the sequence and reports the output for input ``t`` at step ``t + d``.

- ``Delayed(layer, delay)`` turns any recurrent layer (a ``torch.nn.RNN``/``LSTM``/``GRU`` or a kleene layer) into its
  delayed version: it appends the null inputs, runs the layer and returns the outputs aligned with the inputs.
- ``delayed_from_stacked(stacked)`` converts a stacked ``torch.nn.RNN`` or ``torch.nn.LSTM`` with ``k`` layers into a
  single-layer network with block-bidiagonal weights and delay ``k - 1`` (Theorem 1, Appendix C for LSTMs) that
  computes exactly the stacked network's outputs.

On the initial state (Lemma 1). Theorem 1 needs block ``i`` of the single-layer state to equal the stacked layer's
initial state ``h0^(i)`` at step ``i - 1``. Lemma 1 computes such an initial state by running each block backwards
through a right inverse of the activation and the pseudoinverse of ``W_h^(i)``. The lemma's proof overlooks that
every intermediate state it produces must itself lie in the activation's range (it is the output of a step): for
``k >= 3`` layers (and for LSTMs already at ``k = 2``, where ``h0 = o * tanh(c0)`` needs a gate ``o`` in (0, 1)) a
generic stacked initial state, even the all-zero default with non-zero biases, has no such preimage.
``delayed_from_stacked`` therefore offers three warm-ups: ``"lemma1"`` (the paper's initial state; raises
``ConversionError`` when it does not exist), ``"clamp"`` (start from the stacked states and hold each block at its
stacked initial state until its first step, exact for every state), and ``"auto"`` (Lemma 1 when it exists, else
clamp).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from kleene.data.checks import check_lengths
from kleene.errors import ConversionError, LayerError

Tensor = torch.Tensor
Warmup = Literal["auto", "lemma1", "clamp"]

__all__ = [
    "ConversionError",
    "Delayed",
    "DelayedStack",
    "delayed_from_stacked",
    "delayed_loss_mask",
]


# ---------------------------------------------------------------------------------------------------------------------
# the generic wrapper


def delayed_loss_mask(lengths: Tensor | Sequence[int], max_length: int, delay: int) -> Tensor:
    """Mask over the ``max_length + delay`` raw outputs of a d-RNN: True where output ``t`` is the delayed output for a
    real input, i.e. ``delay <= t < delay + lengths[b]``. Shape ``(batch, max_length + delay)``, bool.

    Use it when the raw (unsliced) outputs are kept; ``Delayed`` already returns outputs aligned with the inputs.

    Caution:
        ``lengths`` must be at most ``max_length`` and ``delay >= 0``; neither is checked.
    """
    lengths_tensor = torch.as_tensor(lengths, dtype=torch.long)
    steps = torch.arange(max_length + delay, device=lengths_tensor.device)
    return (steps.unsqueeze(0) >= delay) & (steps.unsqueeze(0) < delay + lengths_tensor.unsqueeze(1))


class Delayed(nn.Module):
    """Any recurrent layer with its output delayed by ``delay`` steps.

    ``forward(x, lengths=None, *args)`` appends ``delay`` null inputs after each sequence (after position
    ``lengths[b]`` when lengths are given), runs ``layer`` on ``T + delay`` steps and returns its outputs for steps
    ``delay .. delay + T - 1``, so that output ``t`` belongs to input ``t`` (and, in training, the loss is computed on
    exactly those outputs). A layer returning a tuple ``(output, state, ...)`` gives ``(delayed output, state, ...)``.

    Note:
        ``x`` is (B, T, ...) or (T, B, ...) with any trailing feature dimensions (e.g. a compiled layer's slots
        (B, T, A, D)); ``null`` is the null input, broadcast over them (a vector of the last dimension's size; default
        zeros). ``batch_first`` defaults to the layer's own attribute, else True. When the layer's ``forward`` takes
        ``lengths``, it receives ``lengths + delay``.
    Raises:
        LayerError: a negative delay, or a null vector whose size differs from the input features.
    """

    null: Tensor | None

    def __init__(self, layer: nn.Module, delay: int, *, batch_first: bool | None = None, null: Tensor | None = None):
        super().__init__()
        if delay < 0:
            raise LayerError(f"Delayed: the delay must be >= 0, got {delay}")
        self.layer = layer
        self.delay = int(delay)
        self.batch_first = bool(getattr(layer, "batch_first", True)) if batch_first is None else batch_first
        self.register_buffer("null", None if null is None else torch.as_tensor(null).detach().clone())
        self._takes_lengths = "lengths" in inspect.signature(layer.forward).parameters

    def pad(self, x: Tensor, lengths: Tensor | Sequence[int] | None = None) -> Tensor:
        """``x`` with ``delay`` null inputs after each sequence: shape ``T + delay`` along time.

        Raises:
            ConversionError: ``x`` is not a tensor of rank >= 2, ``lengths`` is not one integer in 0..T per sequence,
                or a null input of the wrong shape.
        """
        return self._pad(x, self._checked_lengths(x, lengths))

    def _checked_lengths(self, x: Tensor, lengths: Tensor | Sequence[int] | None) -> Tensor | None:
        """``lengths`` as int64 (None stays None) after checking ``x`` and them (see ``pad``)."""
        if not isinstance(x, Tensor) or x.dim() < 2:
            raise ConversionError(f"Delayed: x must be a tensor (batch and time, then features), got {x!r:.80}")
        if lengths is None:
            return None
        time_dim = 1 if self.batch_first else 0
        return check_lengths(
            lengths, x.shape[1 - time_dim], x.shape[time_dim], error=ConversionError, name="Delayed: lengths"
        )

    def _pad(self, x: Tensor, lengths: Tensor | None) -> Tensor:
        time_dim = 1 if self.batch_first else 0
        if self.null is not None and self.null.shape != x.shape[-1:]:
            raise ConversionError(
                f"Delayed: null input of shape {tuple(self.null.shape)} for {x.shape[-1]} features"
            )
        tail_shape = list(x.shape)
        tail_shape[time_dim] = self.delay
        padded = torch.cat([x, x.new_zeros(tail_shape)], dim=time_dim)
        if lengths is None and self.null is None:
            return padded
        total = x.shape[time_dim] + self.delay
        batch = x.shape[1 - time_dim]
        ends = torch.full((batch,), x.shape[time_dim]) if lengths is None else lengths.cpu()
        steps = torch.arange(total)
        in_tail = (steps.unsqueeze(0) >= ends.unsqueeze(1)) & (steps.unsqueeze(0) < ends.unsqueeze(1) + self.delay)
        if not self.batch_first:
            in_tail = in_tail.T
        null = padded.new_zeros(x.shape[-1]) if self.null is None else self.null.to(padded)
        in_tail = in_tail.reshape(*in_tail.shape, *([1] * (x.dim() - 2)))  # over the feature dimensions
        return torch.where(in_tail.to(padded.device), null, padded)

    def loss_mask(self, lengths: Tensor | Sequence[int], max_length: int) -> Tensor:
        """``delayed_loss_mask`` for this delay (over the raw ``max_length + delay`` outputs)."""
        return delayed_loss_mask(lengths, max_length, self.delay)

    def forward(self, x: Tensor, lengths: Tensor | None = None, *args: object) -> Tensor | tuple[object, ...]:
        """The layer's outputs ``delay`` steps late, aligned with ``x`` (see the class docstring).

        Raises:
            ConversionError: as ``pad``.
        """
        checked = self._checked_lengths(x, lengths)
        padded = self._pad(x, checked)
        if checked is not None and self._takes_lengths:
            result = self.layer(padded, *args, lengths=checked + self.delay)
        else:
            result = self.layer(padded, *args)
        output = result[0] if isinstance(result, tuple) else result
        time_dim = 1 if self.batch_first else 0
        aligned = output.narrow(time_dim, self.delay, x.shape[time_dim])
        return (aligned, *result[1:]) if isinstance(result, tuple) else aligned

    def extra_repr(self) -> str:
        return f"delay={self.delay}, batch_first={self.batch_first}"


# ---------------------------------------------------------------------------------------------------------------------
# stacked -> delayed (Theorem 1, Appendix C, Lemma 1)

#: activations whose right inverse Lemma 1 uses: atanh for tanh, the identity for relu
_INVERTIBLE_ACTIVATIONS = ("tanh", "relu")


def _gate_count(stacked: nn.RNNBase) -> int:
    return 4 if isinstance(stacked, nn.LSTM) else 1


def _check_convertible(stacked: nn.Module) -> None:
    if not isinstance(stacked, (nn.RNN, nn.LSTM)):
        kind = type(stacked).__name__
        raise ConversionError(f"delayed_from_stacked: expected torch.nn.RNN or torch.nn.LSTM, got {kind}")
    if stacked.bidirectional:
        raise ConversionError("delayed_from_stacked: a bidirectional network has no delayed single-layer equivalent")
    if isinstance(stacked, nn.LSTM) and stacked.proj_size:
        raise ConversionError(f"delayed_from_stacked: LSTM with proj_size={stacked.proj_size} is not supported")
    if isinstance(stacked, nn.RNN) and stacked.nonlinearity not in _INVERTIBLE_ACTIVATIONS:
        raise ConversionError(f"delayed_from_stacked: unknown nonlinearity {stacked.nonlinearity!r}")


class DelayedStack(nn.Module):
    """A stacked RNN/LSTM as one single-layer recurrence with block-bidiagonal weights and delay ``k - 1``.

    Built by ``delayed_from_stacked``. ``inner`` is a single-layer ``torch.nn.RNN``/``torch.nn.LSTM`` with hidden size
    ``k * n`` whose parameters are ordinary (trainable, unconstrained) parameters. ``forward(x, hx=None)`` takes the
    stacked module's input and initial state layout and returns what ``stacked(x, hx)[0]`` returns.

    Note:
        Inter-layer dropout of the stacked module is not represented: the equivalence holds in eval mode (or with
        ``dropout=0``). With the clamped warm-up the gradients are exact too: each block of the inner weights gets
        the gradient of the stacked weight it copies. The Lemma 1 initial state is computed without gradient (a
        constant initial state, as for any d-RNN).
    """

    def __init__(self, inner: nn.RNNBase, num_layers: int, hidden_size: int, warmup: Warmup):
        super().__init__()
        if warmup not in ("auto", "lemma1", "clamp"):
            raise LayerError(f"delayed_from_stacked: warmup must be 'auto', 'lemma1' or 'clamp', got {warmup!r}")
        self.inner = inner
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.delay = num_layers - 1
        self.warmup = warmup
        self.batch_first = inner.batch_first
        self.is_lstm = isinstance(inner, nn.LSTM)

    # -- layout helpers ---------------------------------------------------------------------------------------------
    def _gate_block(self, matrix: Tensor, gate: int, layer: int) -> Tensor:
        """Rows of ``gate`` (torch's order i, f, g, o for LSTMs) and ``layer``'s block in an inner weight or bias."""
        width = self.num_layers * self.hidden_size
        start = gate * width + layer * self.hidden_size
        return matrix[start : start + self.hidden_size]

    def _blocks(self, state: Tensor) -> Tensor:
        """(k, B, n) stacked layout -> (1, B, k n) single-layer layout."""
        return state.permute(1, 0, 2).reshape(1, state.shape[1], -1)

    def _default_state(self, x: Tensor) -> Tensor:
        batch = x.shape[0 if self.batch_first else 1]
        return x.new_zeros(self.num_layers, batch, self.hidden_size)

    # -- Lemma 1 -------------------------------------------------------------------------------------------------------
    def _layer_weights(self, layer: int, gate: int) -> tuple[Tensor, Tensor, Tensor]:
        """(W_x^(layer), W_h^(layer), b^(layer)) of one gate, read back from the inner block structure."""
        n = self.hidden_size
        w_hh = self._gate_block(self.inner.get_parameter("weight_hh_l0"), gate, layer)
        w_h = w_hh[:, layer * n : (layer + 1) * n]
        w_x = w_hh[:, (layer - 1) * n : layer * n]
        bias = torch.zeros(n, dtype=w_hh.dtype, device=w_hh.device)
        if self.inner.bias:
            bias_ih = self._gate_block(self.inner.get_parameter("bias_ih_l0"), gate, layer)
            bias = bias_ih + self._gate_block(self.inner.get_parameter("bias_hh_l0"), gate, layer)
        return w_x, w_h, bias

    def _solve_recurrent(self, layer: int, gate: int, preactivation: Tensor, below: Tensor) -> Tensor:
        """The previous own state ``h`` with ``W_x below + W_h h + b = preactivation`` (B.12, pseudoinverse)."""
        w_x, w_h, bias = self._layer_weights(layer, gate)
        rhs = preactivation - below @ w_x.T - bias
        return rhs @ torch.linalg.pinv(w_h).T

    def _rnn_step_back(self, layer: int, step: int, target: Tensor, below: Tensor) -> Tensor:
        nonlinearity = self.inner.nonlinearity
        if nonlinearity == "tanh":
            if bool((target.abs() >= 1).any()):
                raise ConversionError(
                    f"Lemma 1: layer {layer + 1} must be {target.abs().max().item():.4g} in absolute value at step "
                    f"{step}, outside the range (-1, 1) of tanh"
                )
            preactivation = torch.atanh(target)
        else:
            if bool((target < 0).any()):
                raise ConversionError(
                    f"Lemma 1: layer {layer + 1} must be {target.min().item():.4g} at step {step}, outside the range "
                    "[0, inf) of relu"
                )
            preactivation = target
        return self._solve_recurrent(layer, 0, preactivation, below)

    def _lstm_step_back(
        self, layer: int, step: int, target: tuple[Tensor, Tensor], below: Tensor
    ) -> tuple[Tensor, Tensor]:
        hidden, cell = target
        # where h = tanh(c) = 0 every output gate works: take o = 1/2
        undetermined = (hidden == 0) & (torch.tanh(cell) == 0)
        output_gate = torch.where(undetermined, torch.full_like(hidden, 0.5), hidden / torch.tanh(cell))
        if not bool(((output_gate > 0) & (output_gate < 1)).all()):
            raise ConversionError(
                f"Lemma 1: layer {layer + 1} at step {step} needs h = o * tanh(c) with an output gate o in (0, 1); "
                f"h / tanh(c) ranges over [{output_gate.min().item():.4g}, {output_gate.max().item():.4g}]"
            )
        previous_hidden = self._solve_recurrent(layer, 3, torch.logit(output_gate), below)

        def gate_preactivation(gate: int) -> Tensor:
            w_x, w_h, bias = self._layer_weights(layer, gate)
            return below @ w_x.T + previous_hidden @ w_h.T + bias

        input_gate = torch.sigmoid(gate_preactivation(0))
        forget_gate = torch.sigmoid(gate_preactivation(1))
        candidate = torch.tanh(gate_preactivation(2))
        previous_cell = (cell - input_gate * candidate) / forget_gate
        return previous_hidden, previous_cell

    def lemma1_initial_state(
        self, hx: Tensor | tuple[Tensor, Tensor] | None, like: Tensor
    ) -> Tensor | tuple[Tensor, Tensor]:
        """The initial state of Lemma 1 (single-layer layout ``(1, B, k n)``) for the stacked initial state ``hx``.

        ``like`` is a batched input (for the batch size, dtype and device when ``hx`` is None).

        Raises:
            ConversionError: the state is unreachable (a value outside the activation's range at some step, or the
                pseudoinverse solution misses the target because ``W_h`` is singular or ill-conditioned).
        """
        with torch.no_grad():
            hidden0, cell0 = self._split_state(hx, like)
            trajectories: list[list[tuple[Tensor, Tensor | None]]] = []
            for layer in range(self.num_layers):
                # the states of block `layer` at steps 0..layer; step `layer` is the stacked initial state
                states: list[tuple[Tensor, Tensor | None]] = [(hidden0[layer], None if cell0 is None else cell0[layer])]
                for step in range(layer, 0, -1):
                    below = trajectories[layer - 1][step - 1][0]
                    hidden, cell = states[0]
                    if cell is None:
                        states.insert(0, (self._rnn_step_back(layer, step, hidden, below), None))
                    else:
                        states.insert(0, self._lstm_step_back(layer, step, (hidden, cell), below))
                trajectories.append(states)
            initial_hidden = torch.stack([states[0][0] for states in trajectories])
            result: Tensor | tuple[Tensor, Tensor] = self._blocks(initial_hidden)
            if cell0 is not None:
                initial_cell = torch.stack([states[0][1] for states in trajectories])  # type: ignore[misc]
                result = (self._blocks(initial_hidden), self._blocks(initial_cell))
            self._verify_lemma1(result, hidden0, cell0, like)
        return result

    def _verify_lemma1(
        self, initial: Tensor | tuple[Tensor, Tensor], hidden0: Tensor, cell0: Tensor | None, like: Tensor
    ) -> None:
        """Run the warm-up forward from ``initial`` and check that block i holds the stacked state at step i."""
        tolerance = torch.finfo(hidden0.dtype).eps ** 0.5 * (1.0 + hidden0.abs().max().item())
        state = initial
        n = self.hidden_size
        null_step = like.new_zeros(self._step_shape(like))
        for step in range(1, self.num_layers):
            _, state = self.inner(null_step, state)
            hidden = state[0] if isinstance(state, tuple) else state
            error = (hidden[0, :, step * n : (step + 1) * n] - hidden0[step]).abs().max().item()
            if cell0 is not None and isinstance(state, tuple):
                error = max(error, (state[1][0, :, step * n : (step + 1) * n] - cell0[step]).abs().max().item())
            if not error <= tolerance:
                raise ConversionError(
                    f"Lemma 1: the pseudoinverse solution misses layer {step + 1}'s initial state by {error:.3g} "
                    f"(tolerance {tolerance:.3g}); W_h of layer {step + 1} is singular or ill-conditioned"
                )

    # -- forward -------------------------------------------------------------------------------------------------------
    def _step_shape(self, x: Tensor) -> tuple[int, int, int]:
        batch = x.shape[0 if self.batch_first else 1]
        return (batch, 1, x.shape[-1]) if self.batch_first else (1, batch, x.shape[-1])

    def _split_state(self, hx: Tensor | tuple[Tensor, Tensor] | None, x: Tensor) -> tuple[Tensor, Tensor | None]:
        if hx is None:
            return self._default_state(x), (self._default_state(x) if self.is_lstm else None)
        if self.is_lstm:
            if not isinstance(hx, tuple) or len(hx) != 2:
                raise LayerError("DelayedStack: an LSTM's initial state is a pair (h0, c0)")
            return hx[0], hx[1]
        if isinstance(hx, tuple):
            raise LayerError("DelayedStack: an RNN's initial state is one tensor h0")
        return hx, None

    def _clamped_warmup(
        self, padded: Tensor, hx: Tensor | tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor | tuple[Tensor, Tensor], Tensor]:
        """Steps 1..d one at a time, holding block i at its stacked initial state until step i - 1.

        Returns the state after step d and the remaining input.
        """
        hidden0, cell0 = self._split_state(hx, padded)
        n = self.hidden_size
        hidden, cell = self._blocks(hidden0), None if cell0 is None else self._blocks(cell0)
        time_dim = 1 if self.batch_first else 0
        for step in range(1, self.delay + 1):
            state = hidden if cell is None else (hidden, cell)
            _, new_state = self.inner(padded.narrow(time_dim, step - 1, 1), state)
            hidden, cell = (new_state[0], new_state[1]) if isinstance(new_state, tuple) else (new_state, None)
            held = hidden0[step:].permute(1, 0, 2).reshape(1, hidden.shape[1], -1)
            hidden = torch.cat([hidden[..., : step * n], held], dim=-1)
            if cell is not None and cell0 is not None:
                held_cell = cell0[step:].permute(1, 0, 2).reshape(1, cell.shape[1], -1)
                cell = torch.cat([cell[..., : step * n], held_cell], dim=-1)
        state_out = hidden if cell is None else (hidden, cell)
        return state_out, padded.narrow(time_dim, self.delay, padded.shape[time_dim] - self.delay)

    def forward(self, x: Tensor, hx: Tensor | tuple[Tensor, Tensor] | None = None) -> Tensor:
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(0 if self.batch_first else 1)
            if hx is not None:
                hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1)) if isinstance(hx, tuple) else hx.unsqueeze(1)
        time_dim = 1 if self.batch_first else 0
        length = x.shape[time_dim]
        tail = list(x.shape)
        tail[time_dim] = self.delay
        padded = torch.cat([x, x.new_zeros(tail)], dim=time_dim)
        initial: Tensor | tuple[Tensor, Tensor] | None = None
        if self.warmup != "clamp" and self.delay > 0:
            try:
                initial = self.lemma1_initial_state(hx, x)
            except ConversionError:
                if self.warmup == "lemma1":
                    raise
        if initial is not None or self.delay == 0:
            start = initial if initial is not None else self._blocks_state(hx, x)
            output, _ = self.inner(padded, start)
            output = output.narrow(time_dim, self.delay, length)
        else:
            state, rest = self._clamped_warmup(padded, hx)
            output, _ = self.inner(rest, state)
        result = output[..., self.delay * self.hidden_size :]
        return result.squeeze(0 if self.batch_first else 1) if unbatched else result

    def _blocks_state(self, hx: Tensor | tuple[Tensor, Tensor] | None, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        hidden0, cell0 = self._split_state(hx, x)
        return self._blocks(hidden0) if cell0 is None else (self._blocks(hidden0), self._blocks(cell0))

    def extra_repr(self) -> str:
        sizes = f"num_layers={self.num_layers}, hidden_size={self.hidden_size}"
        return f"{sizes}, delay={self.delay}, warmup={self.warmup!r}"


def delayed_from_stacked(stacked: nn.RNN | nn.LSTM, warmup: Warmup = "auto") -> DelayedStack:
    """The single-layer delayed network equivalent to ``stacked`` (Theorem 1; Appendix C for LSTMs).

    The inner single-layer module has hidden size ``k n``; for every gate its input weights are ``[W_x^(1); 0; ...]``
    and its recurrent weights are block-bidiagonal, with ``W_h^(i)`` on the diagonal and ``W_x^(i)`` below it (eq. 6-7,
    C.22-C.23); biases are stacked per layer. ``m.delay == k - 1`` and ``m(x, hx)`` equals ``stacked(x, hx)[0]``.

    Note:
        ``warmup`` chooses how block ``i`` reaches the stacked initial state ``h0^(i)`` at step ``i - 1``: "lemma1"
        (the initial state of Lemma 1; raises when none exists), "clamp" (hold the block at ``h0^(i)`` until then),
        "auto" (Lemma 1 if it exists for the given state, else clamp). See the module docstring.
    Raises:
        ConversionError: not a unidirectional torch RNN/LSTM, or an LSTM with a projection.
    """
    _check_convertible(stacked)
    k, n, q = stacked.num_layers, stacked.hidden_size, stacked.input_size
    gates = _gate_count(stacked)
    reference = stacked.get_parameter("weight_ih_l0")
    kwargs: dict[str, object] = {"bias": stacked.bias, "batch_first": stacked.batch_first}
    if isinstance(stacked, nn.RNN):
        kwargs["nonlinearity"] = stacked.nonlinearity
    inner_type = nn.RNN if isinstance(stacked, nn.RNN) else nn.LSTM
    inner: nn.RNNBase = inner_type(q, k * n, 1, dtype=reference.dtype, device=reference.device, **kwargs)
    weight_ih = reference.new_zeros(gates * k * n, q)
    weight_hh = reference.new_zeros(gates * k * n, k * n)
    bias_ih = reference.new_zeros(gates * k * n)
    bias_hh = reference.new_zeros(gates * k * n)
    with torch.no_grad():
        for layer in range(k):
            layer_ih = stacked.get_parameter(f"weight_ih_l{layer}")
            layer_hh = stacked.get_parameter(f"weight_hh_l{layer}")
            for gate in range(gates):
                rows = slice(gate * k * n + layer * n, gate * k * n + (layer + 1) * n)
                gate_rows = slice(gate * n, (gate + 1) * n)
                weight_hh[rows, layer * n : (layer + 1) * n] = layer_hh[gate_rows]
                if layer == 0:
                    weight_ih[rows] = layer_ih[gate_rows]
                else:
                    weight_hh[rows, (layer - 1) * n : layer * n] = layer_ih[gate_rows]
                if stacked.bias:
                    bias_ih[rows] = stacked.get_parameter(f"bias_ih_l{layer}")[gate_rows]
                    bias_hh[rows] = stacked.get_parameter(f"bias_hh_l{layer}")[gate_rows]
        inner.get_parameter("weight_ih_l0").copy_(weight_ih)
        inner.get_parameter("weight_hh_l0").copy_(weight_hh)
        if stacked.bias:
            inner.get_parameter("bias_ih_l0").copy_(bias_ih)
            inner.get_parameter("bias_hh_l0").copy_(bias_hh)
    return DelayedStack(inner, k, n, warmup)
