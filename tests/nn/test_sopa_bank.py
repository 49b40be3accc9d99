"""SoPa's bank in one kernel call (``kleene.compile.CompiledBank``) against one call per pattern group and against the
torch reference backend: scores and gradients, float64 gradcheck, and the bank's custom ops under opcheck."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kleene.compile.bank import CompiledBank
from kleene.compile.codegen.bank import ALIGNS, BankLayout, bank_width, choose_align
from kleene.compile.runtime.bank import bank_op
from kleene.compile.runtime.cpu import compiler
from kleene.compile.runtime.op import SAVE_CHECKPOINTS
from kleene.errors import CompileError
from kleene.nn.sopa import SoftPatterns, SoPaError
from tests.nn.bank_spy import banks_called

try:
    compiler()
except CompileError:  # pragma: no cover - machines without a C++ compiler
    pytest.skip("no C++ compiler", allow_module_level=True)

# (spec, semiring, mode, shared self-loops, epsilons)
CASES = [
    ({3: 1}, "max-times", "paper", None, True),  # a single group of one pattern
    ({2: 3, 3: 17, 4: 5}, "max-times", "paper", None, True),  # odd counts, END reachable by epsilons (length 2)
    ({3: 5, 4: 3}, "log", "paper", None, False),
    ({2: 3, 4: 18}, "max-plus", "reference", "per-state", True),  # -100 floor and h0
]  # each case builds its groups' kernels and a bank's: the cases stay few (the per-lane code is cpp.py's, tested
# there),
# and their lengths short (a kernel's source grows with them) and shared with test_sopa.py's groups where they can be
# (a group's kernel source depends on its length, the semiring and the options, not on its count)


def _banks(case: tuple, seed: int) -> tuple[SoftPatterns, SoftPatterns, SoftPatterns]:
    """The same bank three times (same weights): one call, a call per group (cpp), the torch backend."""
    spec, semiring, mode, shared, epsilons = case
    torch.manual_seed(seed)
    kwargs: dict = {"semiring": semiring, "mode": mode, "shared_self_loops": shared, "epsilons": epsilons}
    one = SoftPatterns(4, spec, backend="cpp", **kwargs).double()
    per_group = SoftPatterns(4, spec, backend="cpp", **kwargs).double()
    reference = SoftPatterns(4, spec, backend="torch", **kwargs).double()
    per_group.load_state_dict(one.state_dict())
    reference.load_state_dict(one.state_dict())
    per_group.one_call = False
    return one, per_group, reference


def _scores_and_grads(
    bank: SoftPatterns, inputs: torch.Tensor, lengths: torch.Tensor, index: torch.Tensor | None
) -> list[torch.Tensor]:
    leaf = inputs.clone().requires_grad_()
    scores = bank(leaf, lengths, None, index)
    weights = torch.linspace(-1, 1, scores.numel(), dtype=scores.dtype).view_as(scores)
    finite = torch.where(scores.isfinite(), scores, 0.0)
    wrt = [leaf, *bank.parameters()]
    loss = (finite * weights).sum()
    if not loss.requires_grad:  # an empty batch on the per-group path: nothing reaches the leaves
        return [scores, *[torch.zeros_like(x) for x in wrt]]
    grads = torch.autograd.grad(loss, wrt, allow_unused=True, materialize_grads=True)
    return [scores.detach(), *grads]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}-{c[2]}-{len(c[0])}groups" for c in CASES])
@pytest.mark.parametrize("indexed", [False, True])
def test_one_call_matches_each_group_and_the_torch_backend(case: tuple, indexed: bool) -> None:
    one, per_group, reference = _banks(case, 3)
    gen = torch.Generator().manual_seed(4)
    lengths = torch.tensor([7, 0, 3, 1])
    if indexed:
        # every position its own vector: a vector repeated would tie in the max semirings, where the kernels and
        # the torch backend may send the gradient to different (equally valid) positions
        inputs = torch.randn(29, 4, generator=gen, dtype=torch.float64)
        index = torch.randperm(29, generator=gen)[:28].view(4, 7)
    else:
        inputs, index = torch.randn(4, 7, 4, generator=gen, dtype=torch.float64), None
    with banks_called() as called:
        got = _scores_and_grads(one, inputs, lengths, index)
        per_lane = _scores_and_grads(per_group, inputs, lengths, index)
    assert called and all(bank is one._bank for bank in called)  # the one-call kernel ran (and only there)
    for a, b in zip(got, per_lane):
        assert torch.equal(a, b)  # the same per-lane code: bit for bit
    for a, b in zip(got, _scores_and_grads(reference, inputs, lengths, index)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("steps", [0, 5])
def test_empty_batch_and_no_steps(steps: int) -> None:
    one, per_group, _ = _banks(CASES[1], 5)
    for batch in (0, 3):
        inputs = torch.randn(batch, steps, 4, dtype=torch.float64)
        lengths = torch.full((batch,), steps)
        got = _scores_and_grads(one, inputs, lengths, None)
        expected = _scores_and_grads(per_group, inputs, lengths, None)
        assert got[0].shape == (batch, 25)
        for a, b in zip(got, expected):
            assert torch.equal(a, b)


def test_gradcheck_tiny() -> None:
    """The bank kernel's own gradients (slots, parameter table, h0) against finite differences."""
    torch.manual_seed(6)
    bank = SoftPatterns(2, {2: 1, 3: 2}, semiring="real", backend="cpp").double()
    compiled = bank.one_call_layout()
    recurrences = [g.recurrence for g in bank.groups]
    slots = torch.rand(2, 3, compiled.row, dtype=torch.float64).requires_grad_()
    params = compiled.params(recurrences, slots).detach().requires_grad_()
    h0 = torch.rand(2, compiled.layout.state_offsets[-1], dtype=torch.float64).requires_grad_()
    lengths = torch.tensor([3, 2])
    columns = compiled.columns

    def run(x: torch.Tensor, p: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, final = compiled._run(x, p, lengths, z)
        return out[:, columns], final

    assert torch.autograd.gradcheck(run, (slots, params, h0))


@pytest.mark.slow
def test_opcheck() -> None:
    torch.manual_seed(7)
    bank = SoftPatterns(2, {2: 1, 4: 3}, semiring="log", backend="cpp").double()
    compiled = bank.one_call_layout()
    groups = [g.recurrence for g in bank.groups]
    forward = bank_op(compiled.layout).custom_forward
    slots = torch.randn(2, 4, compiled.row, dtype=torch.float64).requires_grad_()
    params = compiled.params(groups, slots).detach().requires_grad_()
    h0 = torch.randn(2, compiled.layout.state_offsets[-1], dtype=torch.float64).requires_grad_()
    lengths = torch.tensor([4, 2])
    for args in ((slots, params, lengths, h0, SAVE_CHECKPOINTS), (slots, params, lengths, None, SAVE_CHECKPOINTS)):
        torch.library.opcheck(forward, args)


def test_layout_pads_every_block_to_whole_vectors() -> None:
    assert [bank_width(c) for c in (1, 16, 17, 85, 86)] == [16, 16, 32, 96, 96]
    assert [bank_width(c, 8) for c in (1, 16, 17, 85, 86)] == [8, 16, 24, 88, 88]
    assert choose_align([16, 32]) == 16 and choose_align([85, 86]) == 8  # 8 pads fewer lanes: 176 against 192
    bank = SoftPatterns(3, {2: 3, 5: 20}, backend="cpp")
    layout = bank.one_call_layout().layout
    assert layout.align == 8 and layout.widths == (8, 24)
    assert layout.slot_offsets == (0, 3 * 8, 3 * 8 + 9 * 24)
    assert layout.lane_offsets == (0, 8, 32)
    wide = BankLayout.of(layout.plans, layout.counts, 16)
    assert wide.widths == (16, 32) and wide.state_offsets == (0, 2 * 16, 2 * 16 + 5 * 32)


@pytest.mark.parametrize("align", ALIGNS)
def test_either_alignment_gives_the_same_scores(align: int) -> None:
    torch.manual_seed(8)
    bank = SoftPatterns(3, {2: 3, 4: 9}, semiring="max-times", backend="cpp").double()
    recurrences = [g.recurrence for g in bank.groups]
    compiled = CompiledBank(recurrences, align)
    slots = [torch.randn(2, 5, len(g.template.slots), g.count, dtype=torch.float64) for g in bank.groups]
    lengths = torch.tensor([5, 2])
    out, _ = compiled(recurrences, compiled.pack_slots(slots), lengths)
    expected = torch.cat([r(x, lengths)[0] for r, x in zip(recurrences, slots)], 1)
    assert torch.equal(out[:, compiled.columns], expected)


def test_errors() -> None:
    bank = SoftPatterns(3, {2: 3}, backend="torch")
    with pytest.raises(SoPaError, match="one_call"):
        bank.bank_scores(torch.zeros(1, 2, 24), torch.tensor([2]))
    with pytest.raises(CompileError, match="cpp"):
        CompiledBank([bank.groups[0].recurrence])  # type: ignore[list-item]
    steps = SoftPatterns(3, {2: 3}, backend="cpp")
    plan = steps.groups[0].recurrence.plan  # type: ignore[union-attr]
    with pytest.raises(CompileError, match="count"):
        BankLayout.of([plan], [1, 2])
    cpp = steps.one_call_layout()
    with pytest.raises(CompileError, match="R=24"):
        cpp([g.recurrence for g in steps.groups], torch.zeros(1, 2, 23), torch.tensor([2]))  # type: ignore[misc]
    with pytest.raises(CompileError, match="alignment"):
        BankLayout.of([plan], [3], 4)


def _libraries(cache: Path) -> list[str]:
    """The kernel libraries in ``cache`` (the thread pool's left out), as (source key, entry point) names."""
    found = (cache / "kernels").glob("kleene_*.so")
    return sorted(p.stem.removeprefix("kleene_") for p in found if "_pool_" not in p.name)


def test_builds_only_the_entry_points_that_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Constructing ``SoftPatterns`` on cpp builds nothing; a first float64 forward without gradients builds one
    library (the bank's forward in float64: no group's kernel, no float32), its first backward one more (the bank's
    backward)."""
    from kleene.compile.runtime import cpu

    monkeypatch.setenv("KLEENE_CACHE", str(tmp_path))
    monkeypatch.setattr(cpu, "_LOADED", {})  # kernels loaded by other tests would not be built again
    bank = SoftPatterns(4, {2: 2, 3: 1}, backend="cpp").double()
    assert _libraries(tmp_path) == []
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    with torch.no_grad():
        bank(x, torch.tensor([5, 2]))
    (forward,) = _libraries(tmp_path)
    assert forward.endswith("_forward_f64")
    bank(x, torch.tensor([5, 2])).sum().backward()
    key = forward.removesuffix("_forward_f64")
    assert _libraries(tmp_path) == [f"{key}_backward_f64", forward]
