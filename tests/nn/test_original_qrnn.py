"""Models of salesforce/pytorch-qrnn loaded into kleene (``from_pytorch_qrnn``) against an independent transcription
of its QRNN forward (CPU ForgetMult, evaluation mode), written here from reading its code: float64, to 1e-9."""

from __future__ import annotations

from itertools import pairwise

import pytest
import torch

from kleene.errors import OriginalCodeError
from kleene.nn.original import from_pytorch_qrnn

Tensor = torch.Tensor


class Transcription:
    """pytorch-qrnn's QRNN in evaluation mode on x (T, B, n): window-2 sources are [x_t, x_{t-1}] (x_{-1} zero, or
    the previous call's last input when ``save_prev_x``), F scaled by 1 - zoneout, c_t = F z + (1 - F) c_{t-1}."""

    def __init__(self, sd: dict[str, Tensor], window: int, output_gate: bool, zoneout: float, save_prev_x: bool):
        self.sd, self.window, self.output_gate, self.zoneout = sd, window, output_gate, zoneout
        self.save_prev_x = save_prev_x
        self.previous: dict[int, Tensor] = {}

    def __call__(self, x: Tensor, hidden: Tensor | None = None) -> tuple[Tensor, Tensor]:
        lasts = []
        i = 0
        while f"layers.{i}.linear.weight" in self.sd:
            if self.window == 2:
                before = self.previous.get(i, torch.zeros_like(x[:1]))
                source = torch.cat([x, torch.cat([before, x[:-1]])], 2)
                if self.save_prev_x:
                    self.previous[i] = x[-1:]
            else:
                source = x
            y = source @ self.sd[f"layers.{i}.linear.weight"].T + self.sd[f"layers.{i}.linear.bias"]
            parts = y.chunk(3 if self.output_gate else 2, dim=2)
            z, forget = torch.tanh(parts[0]), torch.sigmoid(parts[1]) * (1 - self.zoneout)
            c = None if hidden is None else hidden[i]
            cells = []
            for t in range(x.shape[0]):
                c = forget[t] * z[t] + (0 if c is None else (1 - forget[t]) * c)
                cells.append(c)
            cs = torch.stack(cells)
            x = torch.sigmoid(parts[2]) * cs if self.output_gate else cs
            lasts.append(cs[-1])
            i += 1
        return x, torch.stack(lasts)


def state_dict(sizes: list[int], window: int, output_gate: bool) -> dict[str, Tensor]:
    gates = 3 if output_gate else 2
    sd = {}
    for i, (n, h) in enumerate(pairwise(sizes)):
        sd[f"layers.{i}.linear.weight"] = torch.randn(gates * h, window * n, dtype=torch.float64) * 0.5
        sd[f"layers.{i}.linear.bias"] = torch.randn(gates * h, dtype=torch.float64)
    return sd


@pytest.mark.parametrize("window", [1, 2])
@pytest.mark.parametrize("output_gate", [True, False])
@pytest.mark.parametrize("zoneout", [0.0, 0.3])
def test_stacks_match_the_original(window: int, output_gate: bool, zoneout: float) -> None:
    torch.manual_seed(window * 10 + int(output_gate) + int(10 * zoneout))
    sd = state_dict([5, 4, 4, 4], window, output_gate)
    config = {"window": window, "output_gate": output_gate, "zoneout": zoneout}
    model = from_pytorch_qrnn(sd, config, backend="torch").eval()
    x = torch.randn(6, 3, 5, dtype=torch.float64)
    hidden = torch.randn(3, 3, 4, dtype=torch.float64)
    for start in (None, hidden):
        expected, last = Transcription(sd, window, output_gate, zoneout, False)(x, start)
        got, got_last = model(x.transpose(0, 1), start)
        assert torch.allclose(got.transpose(0, 1), expected, rtol=0, atol=1e-9)
        assert torch.allclose(got_last, last, rtol=0, atol=1e-9)


def test_compiled_backend() -> None:
    torch.manual_seed(9)
    sd = state_dict([3, 4, 4], 2, True)
    model = from_pytorch_qrnn(sd, {"window": 2, "zoneout": 0.2}, backend="auto").eval()
    x = torch.randn(5, 2, 3, dtype=torch.float64)
    hidden = torch.randn(2, 2, 4, dtype=torch.float64)
    expected, last = Transcription(sd, 2, True, 0.2, False)(x, hidden)
    got, got_last = model(x.transpose(0, 1), hidden)
    assert torch.allclose(got.transpose(0, 1), expected, rtol=0, atol=1e-9)
    assert torch.allclose(got_last, last, rtol=0, atol=1e-9)


def test_save_prev_x_is_streaming() -> None:
    """Two consecutive calls of the original with save_prev_x (and its hidden passed on) = two stream chunks."""
    torch.manual_seed(5)
    sd = state_dict([3, 4, 4], 2, True)
    model = from_pytorch_qrnn(sd, {"window": 2, "save_prev_x": True}).eval()
    original = Transcription(sd, 2, True, 0.0, True)
    x = torch.randn(9, 2, 3, dtype=torch.float64)
    first, hidden = original(x[:4])
    second, _ = original(x[4:], hidden)
    got1, states = model.stream(x[:4].transpose(0, 1))
    got2, _ = model.stream(x[4:].transpose(0, 1), states)
    assert torch.allclose(torch.cat([got1, got2], 1).transpose(0, 1), torch.cat([first, second]), rtol=0, atol=1e-9)


def test_a_single_layer_state_dict() -> None:
    torch.manual_seed(6)
    sd = {"linear.weight": torch.randn(6, 4, dtype=torch.float64), "linear.bias": torch.randn(6, dtype=torch.float64)}
    model = from_pytorch_qrnn(sd, {"window": 2, "output_gate": False}, backend="torch").eval()
    x = torch.randn(5, 1, 2, dtype=torch.float64)
    stacked = {f"layers.0.{key}": value for key, value in sd.items()}
    expected, _ = Transcription(stacked, 2, False, 0.0, False)(x)
    assert torch.allclose(model(x.transpose(0, 1))[0].transpose(0, 1), expected, rtol=0, atol=1e-9)


def test_training_zoneout_keeps_cells_where_the_mask_drops_f() -> None:
    """In training both codes set F to 0 (kleene: f to 1) where the mask drops it: with p close to 1 the cell stays
    at its initial value almost everywhere."""
    torch.manual_seed(8)
    sd = state_dict([3, 4], 1, False)
    model = from_pytorch_qrnn(sd, {"zoneout": 0.999, "output_gate": False}, backend="torch").train()
    hidden = torch.randn(1, 2, 4, dtype=torch.float64)
    out, last = model(torch.randn(2, 6, 3, dtype=torch.float64), hidden)
    assert torch.allclose(last, hidden) and torch.allclose(out, hidden[0][:, None].expand(-1, 6, -1))


def test_refusals() -> None:
    sd = state_dict([3, 4], 2, True)
    with pytest.raises(OriginalCodeError, match="windows 1 and 2 only"):
        from_pytorch_qrnn(sd, {"window": 3})
    with pytest.raises(OriginalCodeError, match=r"bidirectional=True: pytorch-qrnn's QRNN asserts bidirectional=False"):
        from_pytorch_qrnn(sd, {"window": 2, "bidirectional": True})
    with pytest.raises(OriginalCodeError, match=r"unknown pytorch-qrnn arguments \['kind'\]"):
        from_pytorch_qrnn(sd, {"window": 2, "kind": "ifo"})
    with pytest.raises(OriginalCodeError, match=r"not \(3·H, 2·n\)"):
        from_pytorch_qrnn(state_dict([3, 4], 2, False), {"window": 2, "output_gate": True})
    with pytest.raises(OriginalCodeError, match="found stacks"):
        from_pytorch_qrnn({}, {})
    model = from_pytorch_qrnn(sd, {"window": 2})
    with pytest.raises(OriginalCodeError, match=r"hidden must have shape \(layers, B, H\) = \(1, 2, 4\)"):
        model(torch.zeros(2, 3, 3, dtype=torch.float64), torch.zeros(2, 4, dtype=torch.float64))


@pytest.mark.parametrize(("batch", "steps"), [(0, 4), (2, 0), (0, 0)])
def test_empty_batches_and_sequences(batch: int, steps: int) -> None:
    model = from_pytorch_qrnn(state_dict([3, 4], 2, True), {"window": 2}, backend="torch").eval()
    hidden = torch.randn(1, batch, 4, dtype=torch.float64)
    h, last = model(torch.zeros(batch, steps, 3, dtype=torch.float64), hidden)
    assert h.shape == (batch, steps, 4) and torch.equal(last, hidden)  # no step: the cells stay


def test_the_originals_constructor_arguments_load_verbatim() -> None:
    """``QRNN(input_size, hidden_size, num_layers, dropout=..., window=..., ...)`` as given to the original: sizes
    are checked against the weights, not refused."""
    torch.manual_seed(11)
    sd = state_dict([3, 4, 4], 2, True)
    args = {"input_size": 3, "hidden_size": 4, "num_layers": 2, "dropout": 0.3, "bias": True, "batch_first": False,
            "bidirectional": False, "window": 2, "zoneout": 0.1, "save_prev_x": False, "use_cuda": False}  # fmt: skip
    model = from_pytorch_qrnn(sd, args, backend="torch").eval()
    x = torch.randn(5, 2, 3, dtype=torch.float64)
    expected, last = Transcription(sd, 2, True, 0.1, False)(x)
    got, got_last = model(x.transpose(0, 1))
    assert torch.allclose(got.transpose(0, 1), expected, rtol=0, atol=1e-9)
    assert torch.allclose(got_last, last, rtol=0, atol=1e-9)
    with pytest.raises(OriginalCodeError, match="hidden_size=5, but the checkpoint's weights have hidden_size=4"):
        from_pytorch_qrnn(sd, {**args, "hidden_size": 5})
    with pytest.raises(OriginalCodeError, match="num_layers=3, but the checkpoint's weights have num_layers=2"):
        from_pytorch_qrnn(sd, {**args, "num_layers": 3})


def test_a_stream_can_start_from_a_given_state() -> None:
    """The original's first call with ``hidden`` and ``save_prev_x``, then a second call: two stream chunks, the first
    starting from ``hidden``."""
    torch.manual_seed(12)
    sd = state_dict([3, 4, 4], 2, True)
    model = from_pytorch_qrnn(sd, {"window": 2, "save_prev_x": True}, backend="torch").eval()
    original = Transcription(sd, 2, True, 0.0, True)
    x = torch.randn(7, 2, 3, dtype=torch.float64)
    hidden = torch.randn(2, 2, 4, dtype=torch.float64)
    first, after = original(x[:3], hidden)
    second, _ = original(x[3:], after)
    got1, states = model.stream(x[:3].transpose(0, 1), hidden=hidden)
    got2, _ = model.stream(x[3:].transpose(0, 1), states)
    assert torch.allclose(torch.cat([got1, got2], 1).transpose(0, 1), torch.cat([first, second]), rtol=0, atol=1e-9)
    with pytest.raises(OriginalCodeError, match="not both"):
        model.stream(x[3:].transpose(0, 1), states, hidden=hidden)
