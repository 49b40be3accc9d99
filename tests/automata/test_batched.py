"""The batched torch Forward: agreement with the scalar Forward, padding, gradients."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kleene.automata import DivergenceError
from kleene.automata.batched import DenseWFSA, batched_forward
from kleene.errors import ArgumentError

from .strategies import strings, wfsas

FLOAT_SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times"]


@pytest.mark.parametrize("semiring", [*FLOAT_SEMIRINGS, "boolean"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_batched_scores_equal_scalar_forward(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring))
    batch = data.draw(st.lists(strings, min_size=1, max_size=4))
    cap = data.draw(st.sampled_from([None, 0, 1, 2]))
    try:
        expected = [a.score(x, epsilon_cap=cap) for x in batch]
    except DivergenceError:
        assume(False)
    got = DenseWFSA.from_wfsa(a).score_strings(batch, epsilon_cap=cap)
    for g, e in zip(got.tolist(), expected):
        if semiring == "boolean":
            assert bool(g) == bool(e)
        elif math.isinf(e):
            assert g == e
        else:
            assert math.isclose(g, e, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("semiring", FLOAT_SEMIRINGS)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_padding_never_changes_a_result(semiring: str, data: st.DataObject) -> None:
    a = data.draw(wfsas(semiring))
    x = data.draw(strings)
    dense = DenseWFSA.from_wfsa(a)
    ids, lengths = dense.encode([x])
    extra = data.draw(st.integers(1, 3))
    junk = torch.randint(1, len(dense.symbols) + 1, (1, extra))
    padded = torch.cat([ids, junk], dim=1)
    try:
        plain = dense.score_batch(ids, lengths, epsilon_cap=1)
    except DivergenceError:
        assume(False)
    assert torch.equal(plain, dense.score_batch(padded, lengths, epsilon_cap=1))
    per_step = dense.score_batch(padded, lengths, epsilon_cap=1, per_step=True)
    if len(x):
        assert torch.equal(per_step[:, len(x) - 1], plain)


@pytest.mark.parametrize("semiring", FLOAT_SEMIRINGS)
@pytest.mark.parametrize("cap", [None, 1])
@pytest.mark.slow
def test_gradcheck_every_weight(semiring: str, cap: int | None) -> None:
    torch.manual_seed(0)
    q, batch, steps = 3, 2, 4
    gen = torch.Generator().manual_seed(1)
    if semiring == "real":
        trans = torch.rand(batch, steps, q, q, generator=gen, dtype=torch.float64) - 0.3
        eps = torch.rand(q, q, generator=gen, dtype=torch.float64) * 0.2
        init, final = torch.rand(q, dtype=torch.float64), torch.rand(q, dtype=torch.float64)
    elif semiring == "max-times":
        trans = torch.rand(batch, steps, q, q, generator=gen, dtype=torch.float64) + 0.1
        eps = torch.rand(q, q, generator=gen, dtype=torch.float64) * 0.5
        init, final = torch.rand(q, dtype=torch.float64) + 0.1, torch.rand(q, dtype=torch.float64) + 0.1
    else:  # log / tropical: values with no ties
        trans = torch.randn(batch, steps, q, q, generator=gen, dtype=torch.float64)
        sign = -1.0 if semiring in ("log", "max-plus") else 1.0
        eps = sign * (torch.rand(q, q, generator=gen, dtype=torch.float64) + 1.5)
        init, final = torch.randn(q, dtype=torch.float64), torch.randn(q, dtype=torch.float64)
    lengths = torch.tensor([steps, steps - 1])
    tensors = [t.clone().requires_grad_(True) for t in (trans, init, final, eps)]

    def fn(tr: torch.Tensor, i: torch.Tensor, f: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        return batched_forward(tr, lengths, i, f, semiring, epsilon=e, epsilon_cap=cap)

    assert torch.autograd.gradcheck(fn, tensors)
    out = fn(*tensors).sum()
    out.backward()
    for t in tensors:
        assert t.grad is not None


def test_dense_wfsa_weights_receive_gradients() -> None:
    from kleene.automata import ANY, WFSA

    a = WFSA("log", alphabet="ab")
    a.add_states("q0", "q1")
    a.set_initial("q0")
    a.set_final("q1")
    a.add_arc("q0", "q0", ANY, 0.0)
    a.add_arc("q0", "q1", "a", math.log(0.5))
    a.add_arc("q1", "q1", ANY, math.log(0.9))
    dense = DenseWFSA.from_wfsa(a)
    dense.emissions.requires_grad_(True)
    dense.score_strings(["ab", "aab", ""]).logsumexp(0).backward()
    assert dense.emissions.grad is not None
    assert torch.all(torch.isfinite(dense.emissions.grad))


def test_shape_errors_are_named() -> None:
    with pytest.raises(ArgumentError, match=r"transitions must be \[B, T, Q, Q\]"):
        batched_forward(torch.zeros(2, 3, 4), torch.tensor([1, 1]), torch.zeros(4), torch.zeros(4), "real")
    with pytest.raises(ArgumentError, match="lengths must lie in"):
        batched_forward(torch.zeros(1, 3, 2, 2), torch.tensor([5]), torch.zeros(2), torch.zeros(2), "real")
    two = (torch.zeros(1, 3, 2, 2), torch.tensor([3]))
    with pytest.raises(ArgumentError, match=r"initial must be \[Q\] or \[B, Q\] with B=1, Q=2; got shape \(3, 2\)"):
        batched_forward(*two, torch.zeros(3, 2), torch.zeros(2), "real")
    with pytest.raises(ArgumentError, match=r"epsilon must be \[Q, Q\] with Q=2; got shape \(3, 3\)"):
        batched_forward(*two, torch.zeros(2), torch.zeros(2), "real", epsilon=torch.zeros(3, 3))
    with pytest.raises(ArgumentError, match=r"batched_forward: epsilon_cap must be None .* got -1"):
        batched_forward(*two, torch.zeros(2), torch.zeros(2), "real", epsilon=torch.zeros(2, 2), epsilon_cap=-1)
