"""Streaming: a sequence fed to QRNN and RCNN layers (and stacks of them) in consecutive chunks, carrying each
layer's ``StreamState``, gives the outputs of the whole sequence (float64, 1e-12)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
import torch

from kleene.nn.qrnn import QRNNLayer
from kleene.nn.rcnn import RCNNLayer
from kleene.nn.rrnn import LayerError, RationalLayer, RationalStack, StreamState

CUTS = [0, 1, 3, 4, 9, 13]  # chunks of 1, 2, 1, 5 and 4 steps (and an empty one first)


def chunked(layer: RationalLayer | RationalStack, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """The outputs of ``x`` fed chunk by chunk (``lengths``: where each sequence ends, inside the last chunk)."""
    state: Any = None
    outputs = []
    for start, end in pairwise(CUTS):
        chunk = x[:, start:end]
        chunk_lengths = None
        if lengths is not None:
            chunk_lengths = (lengths - start).clamp(0, end - start)
        h, state = layer.stream(chunk, state, chunk_lengths)
        outputs.append(h)
    return torch.cat(outputs, 1)


def whole(layer: RationalLayer, x: torch.Tensor) -> torch.Tensor:
    return layer(x, torch.full((x.shape[0],), x.shape[1]))[0]


@pytest.mark.parametrize("window", [1, 2, 3])
@pytest.mark.parametrize("pooling", ["f", "fo", "ifo"])
def test_qrnn_chunks_equal_the_whole_sequence(window: int, pooling: str) -> None:
    torch.manual_seed(window)
    layer = QRNNLayer(4, 5, window=window, pooling=pooling, backend="torch").double().eval()
    x = torch.randn(3, CUTS[-1], 4, dtype=torch.float64)
    expected = whole(layer, x)
    assert torch.allclose(chunked(layer, x), expected, rtol=0, atol=1e-12)
    # without the saved inputs, a window > 1 sees zeros at each chunk's start: the outputs differ
    if window > 1:
        state, outputs = None, []
        for start, end in pairwise(CUTS):
            h, state = layer.stream(x[:, start:end], state)
            state = StreamState(state.recurrence)  # drop the inputs: the layer pads with zeros
            outputs.append(h)
        assert not torch.allclose(torch.cat(outputs, 1), expected, atol=1e-6)


@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("adaptive_decay", [True, False])
def test_rcnn_chunks_equal_the_whole_sequence(order: int, adaptive_decay: bool) -> None:
    """RCNN keeps its n-gram in the WFSA state (c^(j-1)_{t-1}): the state alone carries the sequence on."""
    torch.manual_seed(order)
    layer = RCNNLayer(4, 5, order=order, adaptive_decay=adaptive_decay, backend="torch").double().eval()
    x = torch.randn(3, CUTS[-1], 4, dtype=torch.float64)
    assert torch.allclose(chunked(layer, x), whole(layer, x), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dense", [False, True])
def test_stacks_stream_with_uneven_lengths(dense: bool) -> None:
    """A QRNN(window 3) + RCNN stack; the sequences end at different chunks, their states stay at their ends."""
    torch.manual_seed(7)
    layers = [QRNNLayer(4, 5, window=3, backend="torch"), RCNNLayer(9 if dense else 5, 5, order=2, backend="torch")]
    stack = RationalStack(4, 2, lambda size, index: layers[index], dense=dense).double().eval()
    x = torch.randn(3, CUTS[-1], 4, dtype=torch.float64)
    lengths = torch.tensor([13, 7, 2])
    expected, finals = stack(x, lengths)
    valid = torch.arange(CUTS[-1])[None, :, None] < lengths[:, None, None]
    got = chunked(stack, x, lengths)
    assert torch.allclose(torch.where(valid, got, 0.0), torch.where(valid, expected, 0.0), rtol=0, atol=1e-12)
    # and one more chunk continues exactly from each sequence's own end
    _, states = stack.stream(x[:, :5], None, lengths.clamp(max=5))
    _, states = stack.stream(x[:, 5:], states, (lengths - 5).clamp(min=0))
    for state, final in zip(states, finals):
        assert torch.allclose(state.recurrence, final, rtol=0, atol=1e-12)


def test_stream_states_are_checked() -> None:
    layer = QRNNLayer(4, 5, window=2, backend="torch").double()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    with pytest.raises(LayerError, match="StreamState"):
        layer.stream(x, torch.zeros(2, 2, 5))
    with pytest.raises(LayerError, match=r"prev_x must have shape \(B, window-1, input\) = \(2, 1, 4\)"):
        layer(x, torch.tensor([3, 3]), prev_x=torch.zeros(2, 2, 4))
    stack = RationalStack(4, 1, lambda size, index: layer)
    with pytest.raises(LayerError, match="one state per layer"):
        stack.stream(x, [])
    _, state = layer.stream(x.requires_grad_())
    assert state.inputs is not None and state.inputs.requires_grad
    assert not state.detach().inputs.requires_grad  # type: ignore[union-attr]
