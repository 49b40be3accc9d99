"""QRNN layers against a plain transcription of qrnn-notes.md (masked convolution + f/fo/ifo pooling), the
pytorch-qrnn convention (ForgetMult swaps f and 1 - f), zoneout, dense stacking and the encoder-decoder."""

from __future__ import annotations

import pytest
import torch

from kleene.nn.qrnn import QRNNClassifier, QRNNEncoderDecoder, QRNNLayer
from kleene.nn.rrnn import LayerError

from .helpers import sst2_loss_ratio


def pre_activations(layer: QRNNLayer, x: torch.Tensor) -> torch.Tensor:
    """W * X with the masked convolution written out: step t reads x_{t-K+1} .. x_t (zeros before the start)."""
    weight, bias = layer.convolution.weight, layer.convolution.bias  # (out, in, K)
    k = layer.window
    out = []
    for t in range(x.shape[0]):
        total = bias.clone()
        for j in range(k):
            source = t - (k - 1) + j
            if source >= 0:
                total = total + weight[:, :, j] @ x[source]
        out.append(total)
    return torch.stack(out)


def notes_equations(layer: QRNNLayer, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """The notes' pooling of one sequence x (T, n); ``keep`` (T, H): zoneout's mask (f = 1 where it is 0)."""
    n = layer.hidden_size
    pre = pre_activations(layer, x)
    gates = dict(zip(layer.gates, pre.split(n, -1)))
    z = torch.tanh(gates["z"])
    f = torch.sigmoid(gates["f"])
    if keep is not None:
        f = torch.where(keep == 1, f, torch.ones_like(f))
    c = torch.zeros(n, dtype=x.dtype)
    out = []
    for t in range(x.shape[0]):
        update = torch.sigmoid(gates["i"][t]) * z[t] if layer.pooling == "ifo" else (1 - f[t]) * z[t]
        c = f[t] * c + update
        out.append(c if layer.pooling == "f" else torch.sigmoid(gates["o"][t]) * c)
    return torch.stack(out)


@pytest.mark.parametrize("pooling", ["f", "fo", "ifo"])
@pytest.mark.parametrize("window", [1, 3])
def test_layer_matches_the_notes(pooling: str, window: int) -> None:
    torch.manual_seed(0)
    layer = QRNNLayer(4, 3, window=window, pooling=pooling, backend="torch").double()
    x = torch.randn(2, 6, 4, dtype=torch.float64)
    lengths = torch.tensor([6, 4])
    with torch.no_grad():
        h, _ = layer(x, lengths)
        for b in range(2):
            n = int(lengths[b])
            torch.testing.assert_close(h[b, :n], notes_equations(layer, x[b, :n]))


def test_pytorch_qrnn_convention_is_the_swap_of_f() -> None:
    """pytorch-qrnn's ForgetMult: h_t = f_t z_t + (1 - f_t) h_{t-1}; with f = σ(-a) it equals our f = σ(a)."""
    torch.manual_seed(1)
    layer = QRNNLayer(3, 2, window=2, pooling="f", backend="torch").double()
    x = torch.randn(5, 3, dtype=torch.float64)
    with torch.no_grad():
        ours, _ = layer(x[None], torch.tensor([5]))
        z_pre, f_pre = pre_activations(layer, x).split(2, -1)
        theirs_f = torch.sigmoid(-f_pre)
        h = torch.zeros(2, dtype=torch.float64)
        theirs = []
        for t in range(5):
            h = theirs_f[t] * torch.tanh(z_pre[t]) + (1 - theirs_f[t]) * h
            theirs.append(h)
    torch.testing.assert_close(ours[0], torch.stack(theirs))


@pytest.mark.parametrize("pooling", ["fo", "ifo"])
def test_zoneout_sets_forget_gates_to_one(pooling: str) -> None:
    """In training the layer draws a keep mask (``forget_scale``; replayed here from the same seed) and pools with
    f = 1 where it is 0: the notes' equations with those gates set to one. In evaluation no gate is dropped."""
    torch.manual_seed(0)
    layer = QRNNLayer(4, 50, zoneout=0.4, pooling=pooling).double()
    x = torch.randn(2, 10, 4, dtype=torch.float64)
    lengths = torch.tensor([10, 10])
    layer.train()
    # the layer's forwards under gradients: each kernel's forward and backward build in one library (the gradcheck
    # below and test_qrnn_fused.py run the same kernels with their backward)
    torch.manual_seed(3)
    h = layer(x, lengths)[0].detach()
    torch.manual_seed(3)
    keep = layer.forget_scale(torch.empty(2, 10, 50, dtype=torch.float64))
    assert keep is not None and 0.5 < float(keep.mean()) < 0.7
    layer.eval()
    assert layer.forget_scale(keep) is None
    h_eval = layer(x, lengths)[0].detach()
    with torch.no_grad():
        for b in range(2):
            torch.testing.assert_close(h[b], notes_equations(layer, x[b], keep[b]))
        torch.testing.assert_close(h_eval[0], notes_equations(layer, x[0]))


def test_dense_stacking_concatenates_inputs() -> None:
    model = QRNNClassifier(20, 2, hidden_size=6, num_layers=3, dense=True)
    assert model.stack.output_size == 50 + 3 * 6
    x = torch.randn(2, 5, 50)
    out, _ = model.stack(x, torch.tensor([5, 5]))
    assert torch.equal(out[..., :50], x)


def test_encoder_decoder_attention_ignores_source_padding_and_uses_the_source() -> None:
    torch.manual_seed(0)
    model = QRNNEncoderDecoder(12, 9, hidden_size=6, num_layers=2).double()
    source = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])
    target = torch.tensor([[1, 2, 3], [4, 5, 0]])
    lengths, target_lengths = torch.tensor([3, 4]), torch.tensor([3, 2])
    with torch.no_grad():
        base = model(source, lengths, target, target_lengths)
        padded = source.clone()
        padded[0, 3] = 11  # content past the source length
        torch.testing.assert_close(model(padded, lengths, target, target_lengths), base)
        changed = source.clone()
        changed[0, 0] = 10
        assert not torch.allclose(model(changed, lengths, target, target_lengths)[0], base[0])


@pytest.mark.slow
def test_encoder_decoder_learns_to_copy() -> None:
    torch.manual_seed(0)
    model = QRNNEncoderDecoder(8, 8, hidden_size=32, num_layers=1, window=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    source = torch.randint(1, 8, (64, 5))
    decoder_in = torch.cat([torch.ones(64, 1, dtype=torch.long), source[:, :-1]], 1)
    lengths = torch.full((64,), 5)
    losses = []
    for _ in range(60):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            model(source, lengths, decoder_in, lengths).flatten(0, 1), source.flatten()
        )
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_gradcheck_and_errors() -> None:
    torch.manual_seed(2)
    layer = QRNNLayer(3, 2, window=2, pooling="ifo").double()
    x = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: layer(v, torch.tensor([4, 2]))[0], (x,))
    with pytest.raises(LayerError, match="window must be >= 1"):
        QRNNLayer(3, 2, window=0)
    with pytest.raises(LayerError, match="unknown QRNN pooling 'fx'"):
        QRNNLayer(3, 2, pooling="fx")


@pytest.mark.slow
def test_classifier_trains_on_real_sst2() -> None:
    assert sst2_loss_ratio(lambda v, c: QRNNClassifier(v, c, hidden_size=32)) < 0.85
