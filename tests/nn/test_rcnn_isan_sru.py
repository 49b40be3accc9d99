"""SRU-2017, RCNN and ISAN layers against plain transcriptions of their equations (Rational Recurrences §4)."""

from __future__ import annotations

import pytest
import torch

from kleene.nn.isan import ISANClassifier, ISANLayer
from kleene.nn.rcnn import RCNNClassifier, RCNNLayer
from kleene.nn.rrnn import LayerError
from kleene.nn.sru import SRUClassifier, SRULayer

from .helpers import sst2_loss_ratio


def sru_equations(layer: SRULayer, x: torch.Tensor) -> torch.Tensor:
    n = layer.dim
    c = torch.zeros(n, dtype=x.dtype)
    out = []
    for v in x:
        f_pre, r_pre = (layer.gates.weight @ v + layer.gates.bias).split(n)
        f, r = torch.sigmoid(f_pre), torch.sigmoid(r_pre)
        c = f * c + (1 - f) * (layer.transform.weight @ v)
        skip = v if layer.highway is None else layer.highway.weight @ v
        out.append(r * torch.tanh(c) + (1 - r) * skip)
    return torch.stack(out)


@pytest.mark.parametrize("backend", ["torch", "cpp"])
@pytest.mark.parametrize("input_size", [3, 4])
def test_sru_matches_equations(input_size: int, backend: str) -> None:
    """The highway inside the kernel (cpp: ``sru_template``'s output map) or in torch's reference, h 0 at padding and
    for an empty sequence."""
    torch.manual_seed(0)
    layer = SRULayer(input_size, 3, backend=backend).double()
    assert layer.recurrence.backend == backend
    x = torch.randn(3, 5, input_size, dtype=torch.float64)
    h = layer(x, torch.tensor([5, 3, 0]))[0].detach()  # under gradients: the kernel's backward builds with it, once
    torch.testing.assert_close(h[0], sru_equations(layer, x[0]), rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(h[1, :3], sru_equations(layer, x[1, :3]), rtol=1e-12, atol=1e-13)
    assert bool((h[1, 3:] == 0).all()) and bool((h[2] == 0).all())
    empty, final = layer(x[:0], torch.zeros(0, dtype=torch.long))
    assert empty.shape == (0, 5, 3) and final.shape[0] == 0


def test_sru_backward_matches_equations() -> None:
    """Gradients of every parameter and the input through the fused kernel equal those of the equations (float64),
    bidirectional with a highway projection: the upper half reads each sequence backwards."""
    torch.manual_seed(1)
    layer = SRULayer(3, 2, bidirectional=True, backend="cpp").double()
    x = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([4, 2])
    h, _ = layer(x, lengths)
    weights = torch.randn(h.shape, dtype=torch.float64)
    got = torch.autograd.grad((h * weights).sum(), [x, *layer.parameters()])
    loss = torch.zeros((), dtype=torch.float64)
    for b in range(2):
        n = int(lengths[b])
        forward = sru_equations(layer, x[b, :n])[:, :2]
        backward = sru_equations(layer, x[b, :n].flip(0)).flip(0)[:, 2:]
        loss = loss + (torch.cat([forward, backward], 1) * weights[b, :n]).sum()
    expected = torch.autograd.grad(loss, [x, *layer.parameters()])
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12)


def rcnn_equations(layer: RCNNLayer, x: torch.Tensor) -> torch.Tensor:
    n, order = layer.dim, layer.order
    cs = [torch.zeros(n, dtype=x.dtype) for _ in range(order)]
    out = []
    for v in x:
        u = (layer.inputs.weight @ v).split(n)
        if layer.decay is not None:
            lam = torch.sigmoid(layer.decay.weight @ v + layer.decay.bias)
        else:
            lam = torch.sigmoid(layer.recurrence.parametrizations.constants.original[0])
        new = [lam * cs[0] + u[0]]
        for j in range(1, order):
            new.append(lam * cs[j] + cs[j - 1] * u[j])
        cs = new
        out.append(torch.tanh(cs[-1] + layer.bias))
    return torch.stack(out)


@pytest.mark.parametrize("backend", ["torch", "cpp"])
@pytest.mark.parametrize(("order", "adaptive"), [(1, True), (2, True), (3, False)])
def test_rcnn_matches_equations(order: int, adaptive: bool, backend: str) -> None:
    """tanh(c + b) in the torch reference or inside the kernel (the output map, b its constant), with the gradients
    of every parameter (b included) and the input, and h 0 at padding."""
    torch.manual_seed(1)
    layer = RCNNLayer(4, 3, order=order, adaptive_decay=adaptive, backend=backend).double()
    assert layer.recurrence.backend == backend
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(2, 6, 4, dtype=torch.float64, requires_grad=True)
    h, _ = layer(x, torch.tensor([6, 0]))
    expected = rcnn_equations(layer, x[0])
    torch.testing.assert_close(h[0], expected, rtol=1e-12, atol=1e-13)
    assert bool((h[1] == 0).all())
    weights = torch.randn(expected.shape, dtype=torch.float64)
    wrt = [x, *layer.parameters()]
    got = torch.autograd.grad((h[0] * weights).sum(), wrt, allow_unused=True)
    reference = torch.autograd.grad((expected * weights).sum(), wrt, allow_unused=True)
    for g, e, leaf in zip(got, reference, wrt):
        zero = torch.zeros_like(leaf)
        torch.testing.assert_close(zero if g is None else g, zero if e is None else e, rtol=1e-10, atol=1e-12)


def isan_equations(layer: ISANLayer, x: torch.Tensor) -> torch.Tensor:
    d = layer.size
    c = torch.zeros(d, dtype=x.dtype)
    out = []
    for v in x:
        w = (layer.matrix.weight @ v + layer.matrix.bias).view(d, d)
        b = layer.offset.weight @ v + layer.offset.bias
        c = w @ c + b
        out.append(c)
    return torch.stack(out)


@pytest.mark.parametrize("backend", ["torch", "cpp"])
def test_isan_matches_equations(backend: str) -> None:
    torch.manual_seed(2)
    layer = ISANLayer(4, 3, backend=backend).double()
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    h, final = (y.detach() for y in layer(x, torch.tensor([5, 2])))  # under gradients: see test_sru_matches_equations
    torch.testing.assert_close(h[0], isan_equations(layer, x[0]))
    torch.testing.assert_close(h[1, :2], isan_equations(layer, x[1, :2]))
    assert torch.all(h[1, 2:] == 0)
    torch.testing.assert_close(final[1, 1:, 0], h[1, 1])


@pytest.mark.parametrize("make", [lambda: SRULayer(3, 2), lambda: RCNNLayer(3, 2, order=2), lambda: ISANLayer(3, 2)])
def test_gradcheck(make) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(3)
    layer = make().double()
    x = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: layer(v, torch.tensor([4, 2]))[0], (x,))


def test_rcnn_order_error() -> None:
    with pytest.raises(LayerError, match=r"order .* must be >= 1, got 0"):
        RCNNLayer(3, 2, order=0)


@pytest.mark.parametrize(
    ("build", "epochs", "size"),
    [
        (lambda v, c: SRUClassifier(v, c, hidden_size=32), 8, 160),
        (lambda v, c: RCNNClassifier(v, c, hidden_size=32), 8, 160),
        (lambda v, c: ISANClassifier(v, c, hidden_size=8), 6, 128),  # runs step by step: a smaller budget
    ],
    ids=["sru", "rcnn", "isan"],
)
@pytest.mark.slow
def test_classifiers_train_on_real_sst2(build, epochs: int, size: int) -> None:  # type: ignore[no-untyped-def]
    assert sst2_loss_ratio(build, epochs=epochs, size=size) < 0.85
