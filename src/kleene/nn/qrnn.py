"""Quasi-recurrent networks (qrnn-notes.md) whose pooling runs as the compiled WFSA B of Rational Recurrences.

Convolution part: masked (causal) convolutions of window ``K >= 1`` over the input give ``Z = tanh(W * X)``,
``F = σ(W_f * X)``, ``O = σ(W_o * X)`` and (ifo) ``I = σ(W_i * X)``. Pooling part, as the WFSA B (q0 -u-> q1,
q1 -f-> q1) over the real semiring, one copy per channel:

* f-pooling:   ``h_t = f_t ⊙ h_{t-1} + (1 - f_t) ⊙ z_t``
* fo-pooling:  ``c_t = f_t ⊙ c_{t-1} + (1 - f_t) ⊙ z_t``, ``h_t = o_t ⊙ c_t``
* ifo-pooling: ``c_t = f_t ⊙ c_{t-1} + i_t ⊙ z_t``, ``h_t = o_t ⊙ c_t``

The gates run inside the compiled kernel (``qrnn_gated_template``: tanh, σ and zoneout's mask are weight functions of
the convolution's raw outputs), so a layer is one GEMM (``QRNNLayer.convolve``) and one fused recurrence; only the
output gate o ⊗ c is applied after it.

Convention: f here is the paper's forget gate (the weight on the *previous* state). pytorch-qrnn's
``ForgetMult`` computes ``h_t = f_t ⊙ x_t + (1 - f_t) ⊙ h_{t-1}``: it swaps f and 1 - f, so a weight taken from
pytorch-qrnn must have its forget gate negated (σ(-a) = 1 - σ(a)) to run here with the same result.

Zoneout (the notes' variant 1): during training each channel keeps its previous state at a time step with
probability ``zoneout`` by setting f to 1 there, i.e. ``F = 1 - mask ⊙ (1 - F)`` with a Bernoulli mask. The
notes write ``1 - dropout(1 - F)``; the mask is applied *without* dropout's 1/(1-p) rescaling, which would push F
below 0. Densely connected stacking is ``RationalStack(dense=True)``. The encoder-decoder adds a linear projection
of the matching encoder layer's last state to every gate pre-activation of each decoder layer, and its last layer
attends over the encoder's last-layer states with the decoder's un-gated c_t:
``α_st = softmax_s(c_t · h̃_s)``, ``k_t = Σ_s α_st h̃_s``, ``h_t = o_t ⊙ (W_k k_t + W_c c_t)`` (the notes print
tanh for F and O there; they are the same sigmoid gates as elsewhere).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import sympy
import torch
from torch import nn

from kleene.automata.semiring import Semiring
from kleene.automata.weights import sigmoid
from kleene.compile import CompiledRecurrence, Factor, Template, TemplateArc
from kleene.nn import projection
from kleene.nn.embedding import check_token_batch
from kleene.nn.registry import register_model
from kleene.nn.rrnn import (
    LayerError,
    RationalClassifier,
    RationalLanguageModel,
    RationalLayer,
    StreamState,
    compile_layer,
    full_lengths,
    gate_semiring,
    last_states,
    rrnn_output_map,
    task_builder,
)

__all__ = [
    "POOLINGS",
    "QRNNClassifier",
    "QRNNEncoderDecoder",
    "QRNNLanguageModel",
    "QRNNLayer",
    "qrnn_gated_template",
]

Tensor = torch.Tensor
POOLINGS = {"f": ("z", "f"), "fo": ("z", "f", "o"), "ifo": ("z", "f", "o", "i")}
#: The raw slot of a forget gate's complement scale (zoneout's keep mask, or pytorch-qrnn's evaluation scale 1 − p).
SCALE_SLOT = "keep"


def qrnn_gated_template(pooling: str, semiring: str | Semiring, scaled: bool = False) -> Template:
    """QRNN pooling (the WFSA B: q0 -u-> q1, q1 -f-> q1) whose weights are the gates themselves
    (``kleene.compile.functions``): the kernel reads the convolution's raw outputs ``az``, ``af``, ``ao``, ``ai``
    (the gates of ``POOLINGS[pooling]`` in that order, the layout of the convolution's channels; ``ao`` is read by
    the output gate only) and, when ``scaled``, a last raw slot ``keep`` = k, and computes as elements of
    ``semiring`` (``Semiring.sym_probability``: ``log`` of a probability where its elements are log-weights):

    * z = ``from_storage(tanh(az))`` (Z enters as the stored value tanh(az));
    * f = ``1 − k (1 − σ(af))`` (k = 1 when not ``scaled``: f = σ(af));
    * u = ``σ(ai) ⊗ z`` (ifo), ``z`` where ⊕ selects, else ``k (1 − σ(af)) ⊗ z``.

    Each weight is one weight function (a mask k = 0 must not enter max-times as a bare stored factor).

    Raises:
        LayerError: an unknown pooling or a semiring gates cannot enter.
    """
    if not isinstance(pooling, str) or pooling not in POOLINGS:
        raise LayerError(f"unknown QRNN pooling {pooling!r}; use one of {sorted(POOLINGS)}")
    algebra = gate_semiring(semiring)
    gates = POOLINGS[pooling]
    names = [f"a{g}" for g in gates] + ([SCALE_SLOT] if scaled else [])
    raw = {g: sympy.Symbol(f"a{g}") for g in gates}

    element = algebra.sym_probability

    z = algebra.sym_from_storage(sympy.tanh(raw["z"]))
    closed = 1 - sigmoid(raw["f"])  # 1 − f: the share of the new input
    if scaled:
        closed = sympy.Symbol(SCALE_SLOT) * closed
    forget = element(1 - closed)
    if "i" in raw:
        update = algebra.sym_times(element(sigmoid(raw["i"])), z)
    elif algebra.best:
        update = z
    else:
        update = algebra.sym_times(element(closed), z)
    return Template(
        states=("q0", "q1"),
        slots=tuple(names),
        constants=(),
        moves=(
            TemplateArc(0, 0, Factor()),
            TemplateArc(0, 1, Factor(functions=(0,))),
            TemplateArc(1, 1, Factor(functions=(1,))),
        ),
        initial=((0, Factor()),),
        final=((1, Factor()),),
        semiring=algebra.name,
        name=f"qrnn-{pooling}{'-scaled' if scaled else ''}",
        functions=(update, forget),
    )


class QRNNLayer(RationalLayer):
    """One QRNN layer: window-``window`` masked convolutions, then f/fo/ifo pooling through the compiled B.

    ``semiring`` (default real; any ``gate_semiring``): the pooling runs in it, the gates F, O, I entering as
    elements (``Semiring.stored_probabilities``: log-weights where the storage holds them) and Z as it is; f/fo pooling
    interpolates with 1 − F where ⊕ sums and keeps Z where ⊕ selects; the output is O ⊗ c (stored values).

    Raises:
        LayerError: window < 1, an unknown pooling, zoneout outside [0, 1), a semiring gates cannot enter, or a
            decoder layer (``context_size``) outside a field semiring.
    """

    cell_family = "qrnn"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        window: int = 2,
        pooling: str = "fo",
        zoneout: float = 0.0,
        context_size: int | None = None,
        semiring: str | Semiring | None = None,
        backend: str = "auto",
    ):
        super().__init__()
        self.algebra = gate_semiring("real" if semiring is None else semiring)
        self.storage, self.semiring = self.algebra.storage, self.algebra.name
        if context_size and not self.algebra.is_field:
            raise LayerError(
                f"a decoder QRNN layer (context_size) attends with real arithmetic; it runs in a field semiring, "
                f"not {self.semiring!r}"
            )
        if window < 1:
            raise LayerError(f"QRNN window must be >= 1, got {window}")
        if not isinstance(pooling, str) or pooling not in POOLINGS:
            raise LayerError(f"unknown QRNN pooling {pooling!r}; use one of {sorted(POOLINGS)}")
        if not 0 <= zoneout < 1:
            raise LayerError(f"zoneout must lie in [0, 1), got {zoneout}")
        self.window, self.pooling, self.zoneout = window, pooling, zoneout
        self.gates = POOLINGS[pooling]
        self.input_size = input_size
        self.hidden_size = self.output_size = hidden_size
        self.convolution = nn.Conv1d(input_size, len(self.gates) * hidden_size, window)
        # encoder-decoder: V^l h̃_T^l added to every gate's pre-activation
        channels = len(self.gates) * hidden_size
        self.context = projection.Linear(context_size, channels, bias=False) if context_size else None
        # the gates run inside the kernel: its slots are the convolution's raw outputs (qrnn_gated_template); a
        # second kernel reads the forget gates' complement scale (zoneout's mask, the original's evaluation scale)
        # with an output gate, h = O ⊗ c runs inside the kernel too (the output map of ``rrnn_output_map``)
        mapped = rrnn_output_map(self.storage, "none", "ao") if "o" in self.gates else None

        def template(scaled: bool) -> Template:
            return replace(qrnn_gated_template(pooling, self.algebra, scaled=scaled), output_map=mapped)

        self.recurrence = compile_layer(template(False), self.algebra, hidden_size, False, backend)
        self.scaled_recurrence = None
        if zoneout:
            self.scaled_recurrence = compile_layer(template(True), self.algebra, hidden_size, False, backend)

    def pre_activations(self, x: Tensor, context: Tensor | None = None, prev_x: Tensor | None = None) -> Tensor:
        """The convolution's raw outputs (B, T, gates, hidden), gates in ``POOLINGS[pooling]`` order (step t sees
        inputs t-K+1 .. t), plus the projected ``context`` (encoder-decoder).

        ``prev_x`` (B, K-1, input): the K-1 inputs before ``x`` (a streamed sequence's earlier chunk, oldest
        first); zeros when None.

        Raises:
            LayerError: ``prev_x`` of the wrong shape, or a context for a layer built without ``context_size``.
        """
        pre = self.convolve(self.previous_inputs(x, prev_x))
        if context is not None:
            if self.context is None:
                raise LayerError("this QRNN layer was built without context_size; it cannot take a context")
            pre = pre + self.context(context)[:, None, :]
        return pre.unflatten(2, (len(self.gates), self.hidden_size))

    def convolve(self, joined: Tensor) -> Tensor:
        """The masked convolution (``self.convolution``'s weights) of ``joined`` (B, K-1+T, input): (B, T, channels),
        as one GEMM over the window's inputs side by side (oldest first). Its output is the kernel's slot layout;
        ``nn.Conv1d`` on the transposed input and a transposed output was 10-30% slower here (oneDNN, 1 thread)
        and leaves a transposed result the kernel must copy."""
        k, steps = self.window, joined.shape[1] - self.window + 1
        weight = self.convolution.weight  # (channels, input, K)
        if k == 1:
            return projection.linear(joined, weight[:, :, 0], self.convolution.bias)
        window = torch.cat([joined[:, j : j + steps] for j in range(k)], 2)  # (B, T, K·input), x_{t-K+1} .. x_t
        return projection.linear(window, weight.transpose(1, 2).reshape(weight.shape[0], -1), self.convolution.bias)

    def forget_scale(self, like: Tensor) -> Tensor | None:
        """The factor k of each forget gate's complement, ``f = 1 − k (1 − σ(af))`` (``like``'s shape): zoneout's
        Bernoulli(1 − zoneout) keep mask in training, None (k = 1) otherwise."""
        if self.training and self.zoneout > 0:
            return torch.bernoulli(torch.full_like(like, 1 - self.zoneout))
        return None

    def previous_inputs(self, x: Tensor, prev_x: Tensor | None) -> Tensor:
        """``x`` (B, T, input) preceded by its K-1 previous inputs (zeros when ``prev_x`` is None): (B, K-1+T, input).

        Raises:
            LayerError: ``prev_x`` is not (B, K-1, input).
        """
        expected = (x.shape[0], self.window - 1, x.shape[2])
        if prev_x is not None and tuple(prev_x.shape) != expected:
            raise LayerError(f"prev_x must have shape (B, window-1, input) = {expected}; got {tuple(prev_x.shape)}")
        if self.window == 1:
            return x
        return torch.cat([x.new_zeros(expected) if prev_x is None else prev_x.to(x.dtype), x], 1)

    def run(
        self,
        x: Tensor,
        lengths: Tensor,
        context: Tensor | None = None,
        h0: Tensor | None = None,
        prev_x: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
        """(c (B, T, hidden) un-gated pooled states, final WFSA state, the output gate σ(ao) (None without one),
        valid-step mask).

        Raises:
            LayerError: ``x`` or ``lengths`` that do not fit the layer (see ``RationalLayer.check``), or ``prev_x``
                of the wrong shape.
        """
        lengths, recurrence, slots = self._slots(x, lengths, context, prev_x)
        c, final = recurrence(slots, lengths, h0, mapped=False)
        gate = torch.sigmoid(slots[:, :, self.gates.index("o")]) if "o" in self.gates else None
        valid = torch.arange(x.shape[1], device=x.device)[None, :, None] < lengths[:, None, None]
        return c, final, gate, valid

    def cell_states(self, x: Tensor, lengths: Tensor) -> Tensor:
        return self.run(x, lengths)[0]

    def _slots(
        self, x: Tensor, lengths: Tensor, context: Tensor | None, prev_x: Tensor | None
    ) -> tuple[Tensor, CompiledRecurrence, Tensor]:
        """(checked lengths, the recurrence to run -- the scaled one under a zoneout mask -- and its slots)."""
        lengths = self.check(x, lengths)
        raw = self.pre_activations(x, context, prev_x)
        scale = self.forget_scale(raw[:, :, 0])
        if scale is None:
            return lengths, self.recurrence, raw
        assert self.scaled_recurrence is not None, "forget_scale gives a scale only where zoneout > 0"
        return lengths, self.scaled_recurrence, torch.cat([raw, scale[:, :, None]], 2)

    def forward(
        self,
        x: Tensor,
        lengths: Tensor,
        h0: Tensor | None = None,
        context: Tensor | None = None,
        prev_x: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        if self.recurrence.plan.output_map is not None:  # O ⊗ c inside the kernel, 0 at padding
            lengths, recurrence, slots = self._slots(x, lengths, context, prev_x)
            return recurrence(slots, lengths, h0)
        c, final, _, valid = self.run(x, lengths, context, h0, prev_x)
        return torch.where(valid, c, torch.zeros_like(c)), final

    def stream(
        self, x: Tensor, state: Any = None, lengths: Tensor | None = None
    ) -> tuple[Tensor, StreamState]:
        """``x`` as the continuation of a sequence: ``state`` is the ``StreamState`` of the chunk before (None: a
        new sequence). The state keeps the WFSA state and the last K-1 inputs (pytorch-qrnn's ``save_prev_x``),
        so consecutive chunks give the outputs of the whole sequence. ``lengths`` as in ``forward`` (default: T).

        Raises:
            LayerError: a state that is not a ``StreamState`` of this layer's shapes.
        """
        if state is not None and not isinstance(state, StreamState):
            raise LayerError(f"a QRNN layer's stream state is a StreamState, got {type(state).__name__}")
        lengths = full_lengths(x) if lengths is None else lengths
        h0, prev_x = (None, None) if state is None else (state.recurrence, state.inputs)
        h, final = self(x, lengths, h0, prev_x=prev_x)
        joined = self.previous_inputs(x, prev_x)  # the last K-1 valid inputs sit at lengths .. lengths+K-2
        index = lengths.to(x.device)[:, None] + torch.arange(self.window - 1, device=x.device)[None, :]
        inputs = torch.gather(joined, 1, index[:, :, None].expand(-1, -1, x.shape[2]))
        return h, StreamState(final, inputs)


class QRNNClassifier(RationalClassifier):
    """QRNN text classifier (densely connected by default, as the notes recommend for classification).

    ``options`` as in ``RationalClassifier``.
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        *,
        window: int = 2,
        pooling: str = "fo",
        zoneout: float = 0.0,
        dense: bool = True,
        semiring: str | None = None,
        **options: Any,
    ):
        layer = partial(QRNNLayer, window=window, pooling=pooling, zoneout=zoneout, semiring=semiring)
        super().__init__(vocab_size, num_classes, layer, dense=dense, **options)


class QRNNLanguageModel(RationalLanguageModel):
    """QRNN language model (not densely connected: the decoder reads the last layer only).

    ``options`` as in ``RationalLanguageModel``.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        window: int = 2,
        pooling: str = "fo",
        zoneout: float = 0.0,
        semiring: str | None = None,
        **options: Any,
    ):
        layer = partial(QRNNLayer, window=window, pooling=pooling, zoneout=zoneout, semiring=semiring)
        super().__init__(vocab_size, layer, **options)


class QRNNEncoderDecoder(nn.Module):
    """The notes' QRNN encoder-decoder: ``forward(source, source_lengths, target, target_lengths)`` returns
    next-token logits (B, T_target, target_vocab). Decoder layer l adds ``V^l h̃_T^l`` (encoder layer l's last
    state) to its gate pre-activations; the last decoder layer's output is ``o_t ⊙ (W_k k_t + W_c c_t)`` with
    ``k_t`` the attention over the encoder's last-layer states."""

    def __init__(
        self,
        source_vocab: int,
        target_vocab: int,
        *,
        hidden_size: int = 128,
        num_layers: int = 2,
        window: int = 2,
        embedding_dim: int = 64,
        zoneout: float = 0.0,
        backend: str = "auto",
    ):
        super().__init__()
        self.source_embedding = nn.Embedding(source_vocab, embedding_dim, padding_idx=0)
        self.target_embedding = nn.Embedding(target_vocab, embedding_dim, padding_idx=0)
        sizes = [embedding_dim] + [hidden_size] * (num_layers - 1)
        self.encoder = nn.ModuleList(
            QRNNLayer(s, hidden_size, window=window, pooling="fo", zoneout=zoneout, backend=backend) for s in sizes
        )
        self.decoder = nn.ModuleList(
            QRNNLayer(
                s, hidden_size, window=window, pooling="fo", zoneout=zoneout, context_size=hidden_size, backend=backend
            )
            for s in sizes
        )
        self.attend_key = nn.Linear(hidden_size, hidden_size, bias=False)  # W_k
        self.attend_state = nn.Linear(hidden_size, hidden_size)  # W_c
        self.output = nn.Linear(hidden_size, target_vocab)

    def encode(self, source: Tensor, lengths: Tensor) -> list[Tensor]:
        """Each encoder layer's outputs h̃^l (B, S, hidden)."""
        x = self.source_embedding(source)
        outputs = []
        for layer in self.encoder:
            x, _ = layer(x, lengths)
            outputs.append(x)
        return outputs

    def forward(self, source: Tensor, source_lengths: Tensor, target: Tensor, target_lengths: Tensor) -> Tensor:
        """Next-token logits (B, T_target, target_vocab).

        Raises:
            LayerError: source or target ids outside their vocabularies, lengths that are not one integer in 0..T per
                sequence, or source and target batches of different sizes.
        """
        name = type(self).__name__
        source, source_lengths = check_token_batch(self.source_embedding, source, source_lengths, f"{name} source")
        target, target_lengths = check_token_batch(self.target_embedding, target, target_lengths, f"{name} target")
        if source.shape[0] != target.shape[0]:
            raise LayerError(f"{name}: {source.shape[0]} source sequences but {target.shape[0]} target sequences")
        encoded = self.encode(source, source_lengths)
        y = self.target_embedding(target)
        for index, layer in enumerate(self.decoder):
            context = last_states(encoded[index], source_lengths, False)
            if index + 1 < len(self.decoder):
                y, _ = layer(y, target_lengths, context=context)
                continue
            assert isinstance(layer, QRNNLayer)
            c, _, gate, valid = layer.run(y, target_lengths, context)
            memory = encoded[-1]  # (B, S, H)
            scores = torch.einsum("bth,bsh->bts", c, memory)
            source_valid = (
                torch.arange(memory.shape[1], device=memory.device)[None, None, :] < source_lengths[:, None, None]
            )
            alpha = torch.softmax(scores.masked_fill(~source_valid, float("-inf")), -1)
            k = torch.einsum("bts,bsh->bth", alpha, memory)
            assert gate is not None  # the encoder-decoder's layers pool with fo
            y = gate * (self.attend_key(k) + self.attend_state(c))
            y = torch.where(valid, y, torch.zeros_like(y))
        return self.output(y)


def _qrnn_builder(vocab_size: int, num_classes: int | None = None, **kwargs: Any) -> nn.Module:
    return task_builder(QRNNClassifier, QRNNLanguageModel)(vocab_size, num_classes, **kwargs)


register_model("qrnn", _qrnn_builder)
