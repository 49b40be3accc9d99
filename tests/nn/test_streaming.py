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

CUTS = [0, 0, 1, 3, 4, 9, 13]  # chunks of 0, 1, 2, 1, 5 and 4 steps


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
    with pytest.raises(LayerError, match="a bidirectional layer cannot stream"):
        RCNNLayer(4, 3, bidirectional=True, backend="torch").stream(torch.zeros(1, 2, 4))
    stack = RationalStack(4, 1, lambda size, index: layer)
    with pytest.raises(LayerError, match="one state per layer"):
        stack.stream(x, [])
    _, state = layer.stream(x.requires_grad_())
    assert state.inputs is not None and state.inputs.requires_grad
    assert not state.detach().inputs.requires_grad  # type: ignore[union-attr]


# -- the LM trainer -----------------------------------------------------------------------------------------------
def toy_language_model() -> tuple[Any, Any, Any]:
    from kleene.data import LanguageModelData, Vocabulary
    from kleene.nn.qrnn import QRNNLanguageModel

    torch.manual_seed(0)
    text = list("abcabdabcadbcaccbad" * 12)
    data = LanguageModelData("toy", text, text[:101], text[:61], "char")
    vocab = Vocabulary.build([text])
    model = QRNNLanguageModel(len(vocab), window=3, hidden_size=8, embedding_dim=6, num_layers=2, backend="torch")
    return model.double(), data, vocab


def test_stream_batches_read_contiguous_rows() -> None:
    from kleene.nn.training import stream_batches

    ids = list(range(30))
    batches = stream_batches(ids, 3, 4)
    rows = torch.cat([b.tokens for b in batches], 1)
    assert rows.tolist() == [list(range(9)), list(range(9, 18)), list(range(18, 27))]
    assert torch.cat([b.targets for b in batches], 1).tolist() == [[i + 1 for i in row] for row in rows.tolist()]
    assert [b.lengths.tolist() for b in batches] == [[4, 4, 4], [4, 4, 4], [1, 1, 1]]


@pytest.mark.slow
def test_the_trainer_carries_states_through_the_stream() -> None:
    """With carry_state, the windowed evaluation equals the loss of each contiguous row run whole."""
    from kleene.errors import TrainingError
    from kleene.nn import build_model
    from kleene.nn.training import TrainConfig, Trainer, stream_batches

    model, data, vocab = toy_language_model()
    config = TrainConfig(epochs=2, batch_size=4, window=7, carry_state=True, progress=False, eval_every=5)
    trainer = Trainer(model, data, vocab, config, model_name="qrnn", model_kwargs={})
    whole = stream_batches(vocab.encode(data.valid), 4, 10**6)[0]
    model.eval()
    with torch.no_grad():
        logits = model(whole.tokens, whole.lengths)
        expected = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), whole.targets.reshape(-1))
    assert abs(trainer.evaluate("dev")["loss"] - float(expected)) < 1e-9
    independent = Trainer(model, data, vocab, TrainConfig(batch_size=4, window=7, progress=False), model_name="qrnn",
                          model_kwargs={})  # fmt: skip
    assert abs(independent.evaluate("dev")["loss"] - float(expected)) > 1e-6  # windows from the initial state differ
    result = trainer.fit()
    assert result.metrics["steps"] == 2 * len(stream_batches(vocab.encode(data.train), 4, 7))
    assert result.metrics["dev_loss"] < float(expected)
    lstm = build_model("lstm-lm", vocab_size=len(vocab), embedding_dim=4, hidden_size=4)
    with pytest.raises(TrainingError, match=r"carry_state needs a model with stream.*'lstm-lm' has none"):
        Trainer(lstm, data, vocab, config, model_name="lstm-lm", model_kwargs={})


@pytest.mark.parametrize("name", ["rrnn-b", "rrnn-b-maxplus", "rrnn-c", "rrnn-f", "qrnn", "rcnn", "sru", "isan"])
def test_every_rational_language_model_streams(name: str) -> None:
    """The LMs' ``stream`` (what ``carry_state`` trains with): chunks of a stream give the whole stream's logits."""
    from kleene.nn import build_model

    torch.manual_seed(3)
    model = build_model(name, vocab_size=11, embedding_dim=4, hidden_size=4, backend="torch").double().eval()
    tokens = torch.randint(1, 11, (2, CUTS[-1]))
    expected = model(tokens, torch.full((2,), CUTS[-1]))
    states: Any = None
    chunks = []
    for start, end in pairwise(CUTS):
        logits, states = model.stream(tokens[:, start:end], states)
        chunks.append(logits)
    assert torch.allclose(torch.cat(chunks, 1), expected, rtol=0, atol=1e-12)
