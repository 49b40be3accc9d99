"""SoPa's pattern bank on a GPU, without a GPU: the bank's lane kernels (``codegen.bank.generate_bank_triton``,
``generate_bank_cuda``; one launch per direction) against the torch backend and the C++ bank.

* Triton: the kernels run in Triton's interpreter on CPU tensors (float64, ragged lengths with 0, an empty batch, h0),
  through ``SoftPatterns`` as a user calls it, against the torch backend; float64 gradcheck of the op; the real
  compiler lowers them to sm_80 PTX (slow).
* CUDA: the source compiles to sm_80 PTX with nvcc (warnings are errors), and, with the CUDA qualifiers defined away
  (``test_cuda_source``'s emulation: a loop over blocks and threads), is built for the host and run through the bank's
  GPU op against the C++ bank, values and gradients, float64 and float32.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kleene.compile.bank import CompiledBank, bank_runs_on
from kleene.compile.codegen.bank import BankLayout, bank_blocks, generate_bank_cuda, generate_bank_triton
from kleene.compile.codegen.cuda import NVCC_FLAGS
from kleene.compile.runtime.bank import bank_gpu_op, bank_lane_op, bank_op, bank_runner
from kleene.compile.runtime.cpu import compiler
from kleene.compile.runtime.op import SAVE_STATES, NativeOp
from kleene.errors import CompileError
from kleene.nn.sopa import SoftPatterns
from tests.nn.bank_spy import banks_called

from .test_cuda_source import emulated_launchers

#: (spec, semiring, mode, shared self-loops, epsilons): max-times with epsilons (END reachable by one at length 2),
#: log without, reference max-plus (its -100 floor arrives as h0). tests/nn/test_sopa_bank.py's banks, so that the
#: C++ kernels built here are its (cached in the kernel cache).
CASES = [
    ({2: 3, 3: 17, 5: 5}, "max-times", "paper", None, True),
    ({3: 5, 6: 3}, "log", "paper", None, False),
    ({2: 3, 4: 18}, "max-plus", "reference", "per-state", True),
]
IDS = [f"{c[1]}-{c[2]}" for c in CASES]


def _model(case: tuple, backend: str) -> SoftPatterns:
    spec, semiring, mode, shared, epsilons = case
    torch.manual_seed(3)
    kwargs: dict = {"semiring": semiring, "mode": mode, "shared_self_loops": shared, "epsilons": epsilons}
    return SoftPatterns(4, spec, backend=backend, **kwargs).double()


def _scores_and_grads(bank: SoftPatterns, inputs: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor]:
    leaf = inputs.clone().requires_grad_()
    scores = bank(leaf, lengths)
    weights = torch.linspace(-1, 1, scores.numel(), dtype=scores.dtype).view_as(scores)
    loss = (torch.where(scores.isfinite(), scores, 0.0) * weights).sum()
    wrt = [leaf, *bank.parameters()]
    if not loss.requires_grad:  # an empty batch on a per-group path: nothing reaches the leaves
        return [scores.detach(), *[torch.zeros_like(x) for x in wrt]]
    return [scores.detach(), *torch.autograd.grad(loss, wrt, allow_unused=True, materialize_grads=True)]


def _close(got: list[torch.Tensor], expected: list[torch.Tensor], rtol: float, atol: float) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert torch.equal(a.isfinite(), b.isfinite())
        torch.testing.assert_close(torch.where(a.isfinite(), a, 0.0), torch.where(b.isfinite(), b, 0.0), rtol=rtol,
                                   atol=atol)


# --------------------------------------------------------------------------------------------
# Triton, in its interpreter
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def interpreter() -> Iterator[None]:
    pytest.importorskip("triton", reason="the optional triton package (pip install 'kleene[gpu]') is not installed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        yield


@pytest.mark.usefixtures("interpreter")
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_triton_bank_is_one_call_and_matches_the_torch_backend(case: tuple) -> None:
    bank, reference = _model(case, "triton"), _model(case, "torch")
    reference.load_state_dict(bank.state_dict())
    gen = torch.Generator().manual_seed(4)
    inputs, lengths = torch.randn(4, 7, 4, generator=gen, dtype=torch.float64), torch.tensor([7, 0, 3, 1])
    with banks_called() as called:
        got = _scores_and_grads(bank, inputs, lengths)
    assert [b.backend for b in called] == ["triton"]  # the whole bank in one kernel call
    _close(got, _scores_and_grads(reference, inputs, lengths), rtol=1e-10, atol=1e-12)
    empty = _scores_and_grads(bank, inputs[:0], lengths[:0])
    assert empty[0].shape == (0, bank.num_patterns)


@pytest.mark.usefixtures("interpreter")
def test_triton_bank_gradcheck_and_a_block_narrower_than_its_lanes() -> None:
    """float64 gradcheck of the bank's Triton op (slots, parameter table, h0); BLOCK = 8 lanes, so each block of 16
    lanes runs as two programs (the grid's block boundaries)."""
    model = SoftPatterns(2, {2: 1, 3: 10}, semiring="real", backend="torch").double()
    recurrences = [g.recurrence for g in model.groups]
    layout = BankLayout.of([r.plan for r in recurrences], [r.dim for r in recurrences], align=16)
    assert layout.widths == (16, 16) and bank_blocks(layout, 8) == 4
    op = bank_gpu_op(layout, "triton", block=8)
    gen = torch.Generator().manual_seed(6)
    qt, kt, r = layout.state_offsets[-1], layout.param_offsets[-1], layout.slot_offsets[-1]
    slots = torch.rand(1, 3, r, generator=gen, dtype=torch.float64).requires_grad_()
    params = torch.rand(kt, generator=gen, dtype=torch.float64).requires_grad_()
    h0 = torch.rand(1, qt, generator=gen, dtype=torch.float64).requires_grad_()
    lengths = torch.tensor([3])
    assert torch.autograd.gradcheck(lambda x, p, z: op(x, p, lengths, z), (slots, params, h0), fast_mode=True)


def test_triton_bank_refuses_cpu_tensors_outside_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not bank_runs_on("triton", torch.device("cpu")) and bank_runs_on("triton", torch.device("cuda"))
    assert bank_runs_on("cpp", torch.device("cpu")) and not bank_runs_on("cuda", torch.device("cpu"))
    assert not bank_runs_on("torch", torch.device("cpu"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert bank_runs_on("triton", torch.device("cpu"))


def test_a_bank_of_mixed_or_unknown_backends_is_refused() -> None:
    cpp, torch_backend = _model(CASES[0], "cpp"), _model(CASES[0], "torch")
    mixed = [cpp.groups[0].recurrence, torch_backend.groups[1].recurrence]
    with pytest.raises(CompileError, match="one backend"):
        CompiledBank(mixed)
    with pytest.raises(CompileError, match="one backend"):
        CompiledBank([g.recurrence for g in torch_backend.groups])
    layout = BankLayout.of([g.recurrence.plan for g in cpp.groups], [g.count for g in cpp.groups])
    with pytest.raises(CompileError, match="not 'torch'"):
        bank_runner(layout, "torch")
    with pytest.raises(CompileError, match="'triton' or 'cuda'"):
        bank_gpu_op(layout, "cpp")
    with pytest.raises(CompileError, match="power of two; got 12"):
        bank_gpu_op(layout, "triton", block=12)
    bank = CompiledBank([g.recurrence for g in cpp.groups])
    recurrences = [g.recurrence for g in cpp.groups]
    with pytest.raises(CompileError, match="cannot run on tensors on meta"):
        bank(recurrences, torch.empty(1, 2, bank.row, device="meta"), torch.tensor([2]))


@pytest.mark.slow
def test_triton_bank_compiles_to_sm80_ptx(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Triton's real compiler (not the interpreter) lowers the bank's kernels -- a branch per block, each block a
    jit function -- to sm_80 PTX without a GPU."""
    pytest.importorskip("triton", reason="the optional triton package (pip install 'kleene[gpu]') is not installed")
    from kleene.compile.runtime.gpu import triton_source_ptx

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("KLEENE_CACHE", str(tmp_path))
    model = _model(CASES[0], "torch")
    layout = BankLayout.of([g.recurrence.plan for g in model.groups], [g.count for g in model.groups])
    ptx = triton_source_ptx(generate_bank_triton(layout), torch.float32, 80, 16)
    assert sorted(ptx) == ["kleene_backward", "kleene_forward"]
    for name, text in ptx.items():
        assert f".visible .entry {name}(" in text and ".target sm_80" in text


# --------------------------------------------------------------------------------------------
# CUDA: nvcc, and the source run on the CPU
# --------------------------------------------------------------------------------------------
def _layout(case: tuple) -> tuple[SoftPatterns, BankLayout]:
    model = _model(case, "cpp")
    return model, model.one_call_layout().layout


def test_cuda_bank_compiles_to_sm80_ptx(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH (the CUDA toolkit is needed to compile the generated source)")
    model = _model(CASES[2], "torch")
    layout = BankLayout.of([g.recurrence.plan for g in model.groups], [g.count for g in model.groups])
    source = tmp_path / "bank.cu"
    source.write_text(generate_bank_cuda(layout), encoding="utf-8")
    command = [nvcc, "-ptx", "-arch=sm_80", *NVCC_FLAGS, "-Werror", "all-warnings", "-o", str(tmp_path / "bank.ptx"),
               str(source)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    text = (tmp_path / "bank.ptx").read_text(encoding="utf-8")
    for name in ("kleene_forward_f32", "kleene_forward_f64", "kleene_backward_f32", "kleene_backward_f64"):
        assert f".visible .entry {name}(" in text


def _emulated_bank(layout: BankLayout) -> NativeOp:
    """The bank's CUDA kernels built with the host compiler, launched by a loop over blocks and threads, as the
    bank's GPU op (``bank_lane_op``, as ``bank_gpu_op`` makes it from the real launchers)."""
    lanes = layout.lane_offsets[-1]
    launchers = emulated_launchers(generate_bank_cuda(layout), lambda x: (x.shape[0], x.shape[1], lanes))
    return bank_lane_op(layout, *launchers)


@pytest.fixture(scope="module")
def host_compiler() -> Iterator[None]:
    try:
        compiler()
    except CompileError as exc:
        pytest.skip(f"no C++ compiler to run the CUDA kernels on the CPU: {exc}")
    yield


@pytest.mark.usefixtures("host_compiler")
@pytest.mark.parametrize("case", [CASES[0], CASES[2]], ids=[IDS[0], IDS[2]])
def test_cuda_bank_run_on_the_cpu_matches_the_cpp_bank(case: tuple) -> None:
    """The CUDA bank kernels (every state stored) against the C++ bank (checkpoints, recomputed): outputs, final
    states and the gradients of slots, parameter table and h0 (given, or the start parameters), float64 and
    float32, ragged lengths with 0."""
    model, layout = _layout(case)
    emulated, cpp = _emulated_bank(layout), bank_op(layout)
    recurrences = [g.recurrence for g in model.groups]
    bank = model.one_call_layout()
    gen = torch.Generator().manual_seed(9)
    inputs, lengths = torch.randn(3, 6, 4, generator=gen, dtype=torch.float64), torch.tensor([6, 0, 4])
    slots = bank.pad_lanes([g.slots(*g.transitions(inputs)) for g in model.groups]).detach()
    params = bank.params(recurrences, slots).detach()
    h0 = torch.randn(3, layout.state_offsets[-1], generator=gen, dtype=torch.float64)
    for dtype, tol, initial in ((torch.float64, 1e-12, h0), (torch.float64, 1e-12, None), (torch.float32, 1e-5, h0)):
        results = []
        for op in (emulated, cpp):
            leaves = [x.to(dtype).requires_grad_() for x in (slots, params, *([] if initial is None else [initial]))]
            out, final = op(leaves[0], leaves[1], lengths, leaves[2] if initial is not None else None)
            weights = torch.Generator().manual_seed(1)
            loss = (out * torch.randn(out.shape, generator=weights, dtype=dtype)).sum() + final.sum()
            results.append([out.detach(), final.detach(), *torch.autograd.grad(loss, leaves)])
        _close(results[0], results[1], rtol=tol, atol=tol)
        assert bool(results[0][2].abs().sum() > 0) and bool(results[0][3].abs().sum() > 0)


@pytest.mark.usefixtures("host_compiler")
def test_cuda_bank_op_under_opcheck_and_torch_compile() -> None:
    """The bank's GPU op (here around the CUDA kernels run on the CPU): its custom ops pass opcheck (fake shapes,
    autograd, with and without h0), and a compiled function tracing them in one graph gives the eager gradients."""
    _, layout = _layout(CASES[0])
    op = _emulated_bank(layout)
    gen = torch.Generator().manual_seed(2)
    slots = torch.randn(2, 4, layout.slot_offsets[-1], generator=gen, dtype=torch.float64).requires_grad_()
    params = torch.randn(layout.param_offsets[-1], generator=gen, dtype=torch.float64).requires_grad_()
    h0 = torch.randn(2, layout.state_offsets[-1], generator=gen, dtype=torch.float64).requires_grad_()
    full = torch.tensor([4, 4])  # (the states past a sequence's length are not written: opcheck compares them)
    for z in (h0, None):
        torch.library.opcheck(op.custom_forward, (slots, params, full, z, SAVE_STATES))
    lengths = torch.tensor([4, 1])

    def loss(x: torch.Tensor, p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        out, final = op(x, p, lengths, z)
        return (out * out).sum() + final.sum()

    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    inputs = (slots, params, h0)
    eager = torch.autograd.grad(loss(*inputs), inputs)
    for got, expected in zip(torch.autograd.grad(compiled(*inputs), inputs), eager, strict=True):
        assert torch.equal(got, expected)
