"""The projection GEMM (kleene.nn.projection.linear) against torch's F.linear, values and gradients."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional

from kleene.nn.projection import linear, packed_gemm_available

needs_onednn = pytest.mark.skipif(not packed_gemm_available(), reason="this torch has no oneDNN reordered linear")
EPS32 = torch.finfo(torch.float32).eps


def gemm_bound(a: torch.Tensor, b: torch.Tensor, extra: torch.Tensor | float = 0.0) -> torch.Tensor:
    """The float32 error bound of a sum of K products, elementwise: K·eps·(|a| @ |b|) (+ |extra|), twice over
    (both results carry it)."""
    k = a.shape[-1]
    return 2 * k * EPS32 * ((a.abs().double() @ b.abs().double()) + torch.as_tensor(extra).abs().double())


def graph_nodes(out: torch.Tensor) -> set[str]:
    """The names of the autograd nodes behind ``out``."""
    names, todo = set(), [out.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and type(node).__name__ not in names:
            names.add(type(node).__name__)
            todo.extend(parent for parent, _ in node.next_functions)
    return names


@needs_onednn
@pytest.mark.parametrize("shape", [(3, 5, 7), (1, 1, 1), (64, 33)])
def test_values_and_gradients_match_f_linear(shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=gen, requires_grad=True)
    weight = torch.randn(11, shape[-1], generator=gen, requires_grad=True)
    bias = torch.randn(11, generator=gen, requires_grad=True)
    ours = linear(x, weight, bias)
    assert "_PackedLinearBackward" in graph_nodes(ours)
    theirs = functional.linear(x, weight, bias)
    x2 = x.detach().reshape(-1, shape[-1])
    assert ((ours - theirs).abs().reshape(-1, 11).double() <= gemm_bound(x2, weight.detach().t(), bias.detach())).all()
    grad = torch.randn(ours.shape, generator=gen)
    ours_grads = torch.autograd.grad(ours, (x, weight, bias), grad)
    theirs_grads = torch.autograd.grad(theirs, (x, weight, bias), grad)
    g2 = grad.reshape(-1, 11)
    bounds = (
        gemm_bound(g2, weight.detach()).reshape(x.shape),
        gemm_bound(g2.t(), x2),
        gemm_bound(g2.t(), torch.ones(len(g2), 1))[:, 0],
    )
    for a, b, bound in zip(ours_grads, theirs_grads, bounds):
        assert a.shape == b.shape
        assert ((a - b).abs().double() <= bound).all()


@needs_onednn
def test_without_bias_and_from_a_strided_view() -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, 4, 9, generator=gen).transpose(0, 1)  # not contiguous
    weight = torch.randn(18, 9, generator=gen)[::2]  # a strided view
    ours, theirs = linear(x, weight), functional.linear(x, weight)
    assert ours.shape == theirs.shape == (4, 6, 9)
    assert ((ours - theirs).abs().reshape(-1, 9).double() <= gemm_bound(x.reshape(-1, 9), weight.t())).all()


def test_other_cases_are_f_linear_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = torch.Generator().manual_seed(2)
    x, weight, bias = torch.randn(4, 5, generator=gen), torch.randn(3, 5, generator=gen), torch.randn(3, generator=gen)
    # float64, an empty batch, and the environment switch all take F.linear itself: identical bits
    doubles = (x.double(), weight.double(), bias.double())
    assert torch.equal(linear(*doubles), functional.linear(*doubles))
    empty = linear(torch.zeros(0, 7, 5), weight, bias)
    assert empty.shape == (0, 7, 3)
    monkeypatch.setenv("KLEENE_PLAIN_GEMM", "1")
    assert not packed_gemm_available()
    assert torch.equal(linear(x, weight, bias), functional.linear(x, weight, bias))


def test_float64_gradcheck() -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(5, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(5, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(linear, (x, weight, bias))
