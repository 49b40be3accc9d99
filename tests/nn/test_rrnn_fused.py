"""RRNNLayer with its gates inside the kernel (``rrnn_gated_template``) against the composition it replaces: the
gates computed by torch ops (``gates_in_torch``) and fed to the raw-slot template ``rrnn_template`` on the torch
reference backend -- outputs, final states and every parameter's gradient, float64, in each gate semiring."""

from __future__ import annotations

import pytest
import torch

from kleene.automata.semiring import Semiring
from kleene.compile.runtime.cpu import compiler
from kleene.nn.rrnn import ACTIVATIONS, RRNNLayer, compile_layer, rrnn_template

try:
    compiler()
except Exception as exc:  # noqa: BLE001 - the reason is shown in the skip message
    pytest.skip(f"no C++ compiler: {exc}", allow_module_level=True)

CASES = [(k, s) for k in ("B", "C", "F") for s in ("real", "log", "max-plus", "max-times")] + [("B-maxplus", None)]


def gates_in_torch(
    algebra: Semiring, forget_pre_activation: torch.Tensor, value: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gates as the layers computed them in torch before they moved into the kernel: f = σ(z) stored
    (``Semiring.stored_gate``) and the admitted input ``(1 − f) ⊗ value`` where ⊕ sums (``1 - f`` in real storage,
    log σ(−z) in log storage), ``value`` as it is where ⊕ selects."""
    storage = algebra.storage
    forget = storage.stored_gate(forget_pre_activation)
    if algebra.best:
        return forget, value
    complement = torch.nn.functional.logsigmoid(-forget_pre_activation) if storage.log_weights else 1 - forget
    return forget, storage.times(complement, value)


def _unfused(layer: RRNNLayer, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer as it ran before its gates moved into the kernel (torch gates, raw-slot template, torch backend)."""
    bidirectional = layer.recurrence.plan.options.bidirectional
    old = compile_layer(rrnn_template(layer.kind), layer.algebra, layer.dim, bidirectional, "torch").double()
    if layer.recurrence.template.constants:
        raw = layer.recurrence.parametrizations.constants.original
        old.parametrizations.constants.original = raw  # the same leaf: gradients reach it from both paths
    b, t, _ = x.shape
    f_pre = layer.forget(x).view(b, t, layer.orders, layer.dim)
    f, u = gates_in_torch(layer.algebra, f_pre, layer.update(x).view(b, t, layer.orders, layer.dim))
    named = {}
    for j in range(layer.orders):
        suffix = "" if layer.orders == 1 else str(j + 1)
        named["u" + suffix], named["f" + suffix] = u[:, :, j], f[:, :, j]
    c, final = old(torch.stack([named[s] for s in old.template.slots], 2), lengths)
    if layer.gate is not None:  # act(o ⊗ c), the output as the layer computed it in torch
        c = layer.storage.times(layer.storage.stored_gate(layer.gate(x)), c)
    h = ACTIVATIONS[layer.activation](c)
    valid = torch.arange(t)[None, :, None] < lengths[:, None, None]
    return torch.where(valid, h, torch.zeros_like(h)), final


@pytest.mark.parametrize(("kind", "semiring"), CASES)
def test_fused_layer_equals_torch_gates(kind: str, semiring: str | None) -> None:
    torch.manual_seed(3)
    # B bidirectional with an output gate (test_output_map_equals_torch_output's kernels), F one direction with an
    # output gate (test_rrnn_semirings.py's kernels), C one direction without: a kernel per kind, semiring and options
    bidirectional, output_gate = kind.startswith("B"), kind != "C"
    layer = RRNNLayer(
        5, 3, kind, semiring=semiring, bidirectional=bidirectional, output_gate=output_gate, backend="cpp"
    ).double()
    assert layer.recurrence.backend == "cpp" and layer.recurrence.template.functions
    _check_against_unfused(layer)


@pytest.mark.parametrize(
    ("semiring", "activation", "output_gate"),
    [
        ("real", "tanh", True),
        ("log", "none", True),
        ("max-plus", "tanh", True),
        ("max-times", "tanh", True),
        ("max-times", "none", False),
        ("real", "relu", True),
    ],
)
def test_output_map_equals_torch_output(semiring: str, activation: str, output_gate: bool) -> None:
    """act(o ⊗ c) inside the kernel (the template's output map, the gate's GEMM rows in the slots' projection) equals
    the output computed in torch; relu, outside the kernels' vocabulary, stays in torch."""
    torch.manual_seed(5)
    layer = RRNNLayer(
        5, 3, "B", semiring=semiring, activation=activation, output_gate=output_gate, bidirectional=True,
        backend="cpp",
    ).double()
    assert (layer.recurrence.plan.output_map is None) == (activation == "relu")
    _check_against_unfused(layer)


def _check_against_unfused(layer: RRNNLayer) -> None:
    x = torch.randn(3, 6, 5, dtype=torch.float64)
    lengths = torch.tensor([6, 4, 0])
    results = []
    for run in (layer, lambda x, n: _unfused(layer, x, n)):
        h, final = run(x, lengths)
        gen = torch.Generator().manual_seed(1)
        finite = torch.where(torch.isfinite(final), final, torch.zeros_like(final))
        loss = (h * torch.randn(h.shape, generator=gen, dtype=h.dtype)).sum() + finite.sum()
        grads = torch.autograd.grad(loss, list(layer.parameters()))
        results.append((h.detach(), final.detach(), grads))
    (h, final, grads), (h_ref, final_ref, grads_ref) = results
    torch.testing.assert_close(h, h_ref, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(final, final_ref, rtol=1e-12, atol=1e-13)
    assert len(grads) == len(grads_ref) >= 3
    for got, expected in zip(grads, grads_ref):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("semiring", ["real", "log", "max-plus", "max-times"])
def test_fused_sru_equals_torch_gates(semiring: str) -> None:
    """SRULayer's recurrence with the gates and the highway inside the kernel equals torch gates + the raw-slot RRNN(B)
    template + the highway in torch."""
    from kleene.nn.sru import SRULayer

    torch.manual_seed(4)
    layer = SRULayer(4, 2, bidirectional=True, semiring=semiring, backend="cpp").double()
    assert layer.recurrence.template.functions
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    lengths = torch.tensor([5, 3])

    def unfused(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        old = compile_layer(rrnn_template("B"), layer.algebra, layer.dim, True, "torch").double()
        f_pre, r_pre = layer.gates(x).split(layer.dim, -1)
        f, u = gates_in_torch(layer.algebra, f_pre, layer.transform(x))
        named = {"u": u, "f": f}
        c, final = old(torch.stack([named[s] for s in old.template.slots], 2), lengths)
        r, skip = torch.sigmoid(r_pre), x if layer.highway is None else layer.highway(x)
        h = r * torch.tanh(c) + (1 - r) * skip  # the 2017 highway, transcribed apart from the layer's output map
        valid = torch.arange(x.shape[1])[None, :, None] < lengths[:, None, None]
        return torch.where(valid, h, torch.zeros_like(h)), final

    results = []
    for run in (lambda x: layer(x, lengths), unfused):
        h, final = run(x)
        finite = torch.where(torch.isfinite(final), final, torch.zeros_like(final))
        loss = (h * torch.randn(h.shape, generator=torch.Generator().manual_seed(2), dtype=h.dtype)).sum()
        grads = torch.autograd.grad(loss + finite.sum(), list(layer.parameters()))
        results.append((h.detach(), final.detach(), grads))
    for got, expected in zip(results[0][:2], results[1][:2]):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-13)
    for got, expected in zip(results[0][2], results[1][2]):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
