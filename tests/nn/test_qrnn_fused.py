"""QRNNLayer with its gates inside the kernel (``qrnn_gated_template``) against the composition it replaces: the
gates computed by torch ops (``gates_in_torch``: tanh, σ, zoneout's ``1 − mask ⊙ (1 − F)``, the input share) and fed
to the raw-slot template ``rrnn_template("B")`` on the torch reference backend -- outputs, final states and every
parameter's gradient, float64, in each gate semiring, for f/fo/ifo pooling, windows 1 and 2, with and without
zoneout's mask, and pytorch-qrnn's evaluation scale."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kleene.compile.runtime.cpu import compiler
from kleene.errors import LayerError
from kleene.nn.original.qrnn import QRNNReferenceLayer
from kleene.nn.qrnn import QRNNLayer, qrnn_gated_template
from kleene.nn.rrnn import compile_layer, rrnn_template

try:
    compiler()
except Exception as exc:  # noqa: BLE001 - the reason is shown in the skip message
    pytest.skip(f"no C++ compiler: {exc}", allow_module_level=True)

SEMIRINGS = ["real", "log", "max-plus", "max-times"]


def gates_in_torch(layer: QRNNLayer, raw: torch.Tensor, scale: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The gate values as the layer computed them in torch before they moved into the kernel: Z = tanh, F, O, I = σ
    of the raw convolution outputs (B, T, gates, H), then F = 1 − k ⊙ (1 − F) with the complement scale k."""
    values = {
        name: torch.tanh(v) if name == "z" else torch.sigmoid(v) for name, v in zip(layer.gates, raw.unbind(2))
    }
    if scale is not None:
        values["f"] = 1 - scale * (1 - values["f"])
    return values


def unfused(layer: QRNNLayer, x: torch.Tensor, lengths: torch.Tensor, scale: torch.Tensor | None) -> Any:
    """The layer as it ran before (torch gates, raw-slot B on the torch backend), with the complement scale k."""
    g = gates_in_torch(layer, layer.pre_activations(x), scale)
    storage = layer.storage
    if "i" in g:
        u = storage.times(storage.stored_probabilities(g["i"]), g["z"])
    else:
        u = g["z"] if layer.algebra.best else storage.times(storage.stored_probabilities(1 - g["f"]), g["z"])
    old = compile_layer(rrnn_template("B"), layer.algebra, layer.hidden_size, False, "torch").double()
    named = {"u": u, "f": storage.stored_probabilities(g["f"])}
    c, final = old(torch.stack([named[s] for s in old.template.slots], 2), lengths)
    h = storage.times(storage.stored_probabilities(g["o"]), c) if "o" in g else c
    valid = torch.arange(x.shape[1])[None, :, None] < lengths[:, None, None]
    return torch.where(valid, h, torch.zeros_like(h)), final


def _results(run: Any, layer: QRNNLayer, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple[Any, ...]]:
    h, final = run()
    finite = torch.where(torch.isfinite(final), final, torch.zeros_like(final))
    h_finite = torch.where(torch.isfinite(h), h, torch.zeros_like(h))
    weights = torch.randn(h.shape, generator=torch.Generator().manual_seed(1), dtype=h.dtype)
    grads = torch.autograd.grad((h_finite * weights).sum() + finite.sum(), [x, *layer.parameters()])
    return h.detach(), final.detach(), grads


def _compare(got: Any, expected: Any, finite_reference_only: bool = False) -> None:
    """Equal outputs, final states and gradients; ``finite_reference_only``: gradients compared where the torch
    composition's are finite (there the fused kernel's must be finite everywhere)."""
    (h, final, grads), (h_ref, final_ref, grads_ref) = got, expected
    torch.testing.assert_close(h, h_ref, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(final, final_ref, rtol=1e-12, atol=1e-13)
    assert len(grads) == len(grads_ref) >= 3
    for a, b in zip(grads, grads_ref):
        if finite_reference_only:
            assert bool(torch.isfinite(a).all())
            a, b = a[torch.isfinite(b)], b[torch.isfinite(b)]
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("pooling", ["f", "fo", "ifo"])
@pytest.mark.parametrize("window", [1, 2])
def test_fused_layer_equals_torch_gates(semiring: str, pooling: str, window: int) -> None:
    torch.manual_seed(window * 7 + len(pooling))
    layer = QRNNLayer(4, 3, window=window, pooling=pooling, semiring=semiring, backend="cpp").double().eval()
    assert layer.recurrence.backend == "cpp" and layer.recurrence.template.functions
    x = torch.randn(3, 6, 4, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([6, 4, 0])
    fused = _results(lambda: layer(x, lengths), layer, x)
    _compare(fused, _results(lambda: unfused(layer, x, lengths, None), layer, x))


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("pooling", ["fo", "ifo"])  # fo: f's gates and mask, and an output gate; the kernels of the
def test_zoneout_mask_in_the_kernel_equals_torch_gates(semiring: str, pooling: str) -> None:  # two tests below too
    """Training with zoneout: the kernel reads the layer's Bernoulli mask (drawn by ``forget_scale``, replayed here
    from the same seed) and sets f to 1 where it drops the gate, exactly as ``1 − mask ⊙ (1 − F)`` in torch.

    In the log semiring the torch composition's gradients are NaN (log(1 − F) = log 0 where the mask drops F, and its
    derivative meets a zero); the kernel's are finite and agree wherever torch's are (gradcheck below checks them
    against finite differences)."""
    torch.manual_seed(5)
    layer = QRNNLayer(4, 5, window=2, pooling=pooling, zoneout=0.4, semiring=semiring, backend="cpp").double()
    layer.train()
    x = torch.randn(2, 7, 4, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([7, 5])
    torch.manual_seed(11)
    fused = _results(lambda: layer(x, lengths), layer, x)
    torch.manual_seed(11)
    scale = layer.forget_scale(torch.empty(2, 7, 5, dtype=torch.float64))
    assert scale is not None and 0 < float(scale.mean()) < 1  # some gates dropped, some kept
    _compare(fused, _results(lambda: unfused(layer, x, lengths, scale), layer, x), semiring == "log")


def test_reference_layer_evaluation_scale() -> None:
    """pytorch-qrnn's evaluation zoneout F ← F (1 − p) runs as the complement scale k = 1 − p in the kernel."""
    torch.manual_seed(6)
    layer = QRNNReferenceLayer(3, 4, window=2, pooling="fo", zoneout=0.3, backend="cpp").double().eval()
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([5, 2])
    fused = _results(lambda: layer(x, lengths), layer, x)
    scale = torch.full((2, 5, 4), 0.7, dtype=torch.float64)
    _compare(fused, _results(lambda: unfused(layer, x, lengths, scale), layer, x))


@pytest.mark.parametrize("semiring", ["real", "log"])
def test_gradcheck_through_the_gates_in_the_kernel(semiring: str) -> None:
    """float64 gradcheck of the fused layer with a fixed zoneout mask (every gate kept at the first step, so no
    state is the semiring's zero)."""
    torch.manual_seed(2)
    layer = QRNNLayer(3, 2, window=2, pooling="fo", zoneout=0.5, semiring=semiring, backend="cpp").double().train()
    x = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64).expand(2, 4, 2)
    layer.forget_scale = lambda like: mask  # type: ignore[method-assign]
    assert torch.autograd.gradcheck(lambda v: layer(v, torch.tensor([4, 3]))[0], (x,))


def test_template_refusals() -> None:
    with pytest.raises(LayerError, match="unknown QRNN pooling 'x'"):
        qrnn_gated_template("x", "real")
    with pytest.raises(LayerError, match="min-plus"):
        qrnn_gated_template("fo", "min-plus")
