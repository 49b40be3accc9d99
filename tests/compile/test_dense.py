"""The dense path (``c_t = W_t ⊗ c_{t-1} ⊕ o_t`` in one kernel): the C++ kernels against a brute-force float64
transcription of the recurrence and against ISAN's torch per-step loop, float64 gradcheck, opcheck of the custom
ops, the Triton kernels in the interpreter, and the CUDA source compiled to PTX by nvcc."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from kleene.automata.semiring import get_semiring
from kleene.compile.codegen.cuda import NVCC_FLAGS
from kleene.compile.codegen.dense import generate_dense_cpp, generate_dense_cuda
from kleene.compile.runtime.cpu import compiler
from kleene.compile.runtime.dense import dense_op, dense_recurrence, dense_triton_ptx
from kleene.compile.runtime.op import SAVE_NOTHING
from kleene.errors import CompileError
from kleene.nn.isan import ISANLayer

try:
    compiler()
except Exception as exc:  # noqa: BLE001 - the reason is shown in the skip message
    pytest.skip(f"no C++ compiler: {exc}", allow_module_level=True)

pytestmark = pytest.mark.cpp

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times"]

# The storage algebras written out independently of kleene's semirings (max-times stores logarithms: max-plus).
_LOGADDEXP: Callable[[float, float], float] = lambda a, b: (  # noqa: E731
    a + b if max(a, b) == -math.inf else max(a, b) + math.log1p(math.exp(-abs(a - b)))
)
ORACLE: dict[str, tuple[Callable[[float, float], float], Callable[[float, float], float]]] = {
    "real": (lambda a, b: a + b, lambda a, b: a * b),
    "log": (_LOGADDEXP, lambda a, b: a + b),
    "max-plus": (max, lambda a, b: a + b),
    "min-plus": (min, lambda a, b: a + b),
    "max-times": (max, lambda a, b: a + b),
}


def brute_force(semiring: str, w: torch.Tensor, off: torch.Tensor, lengths: torch.Tensor, c0: torch.Tensor):  # type: ignore[no-untyped-def]
    """``c_t[i] = o_t[i] ⊕ ⊕_j W_t[i, j] ⊗ c_{t-1}[j]`` in Python floats, one scalar at a time."""
    plus, times = ORACLE[semiring]
    b, t, d = off.shape
    h = torch.zeros(b, t, d, dtype=torch.float64)
    final = torch.zeros(b, d, dtype=torch.float64)
    for s in range(b):
        c = [float(v) for v in c0[s]]
        for step in range(int(lengths[s])):
            new = []
            for i in range(d):
                acc = float(off[s, step, i])
                for j in range(d):
                    acc = plus(acc, times(float(w[s, step, i, j]), c[j]))
                new.append(acc)
            c = new
            h[s, step] = torch.tensor(c, dtype=torch.float64)
        final[s] = torch.tensor(c, dtype=torch.float64)
    return h, final


def _inputs(semiring: str, b: int, t: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(b, t, d, d, generator=gen, dtype=torch.float64)
    w = w * (0.4 / math.sqrt(d)) if semiring == "real" else w  # a contraction in the real semiring
    off = torch.randn(b, t, d, generator=gen, dtype=torch.float64)
    c0 = torch.randn(b, d, generator=gen, dtype=torch.float64)
    return w, off, c0


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_kernel_matches_the_brute_force_recurrence(semiring: str) -> None:
    storage = get_semiring(semiring).storage
    # d = 37: two full vectors of 16 partial sums and a tail; lengths 0, T and between
    w, off, c0 = _inputs(semiring, 4, 6, 37, seed=1)
    lengths = torch.tensor([6, 0, 3, 1])
    h, final = dense_recurrence(w, off, lengths, c0, storage)
    want_h, want_final = brute_force(semiring, w, off, lengths, c0)
    # a sum of 38 terms of size O(1): rounding ~1e-15 relative to the largest term
    torch.testing.assert_close(h, want_h, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(final, want_final, rtol=1e-12, atol=1e-12)
    assert torch.equal(h[1], torch.zeros(6, 37, dtype=torch.float64)) and torch.equal(final[1], c0[1])
    h32, final32 = dense_recurrence(w.float(), off.float(), lengths, c0.float(), storage)
    # float32: 38 rounded terms of size O(1) per entry, through 6 steps of a (roughly) non-expanding map
    torch.testing.assert_close(h32.double(), want_h, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(final32.double(), want_final, rtol=1e-4, atol=1e-5)


def _layers(semiring: str, d: int, seed: int) -> tuple[ISANLayer, ISANLayer]:
    torch.manual_seed(seed)
    kernel = ISANLayer(5, d, semiring=semiring, backend="cpp").double()
    reference = ISANLayer(5, d, semiring=semiring, backend="torch").double()
    reference.load_state_dict(kernel.state_dict())
    assert kernel.backend == "cpp" and reference.backend == "torch"
    return kernel, reference


@pytest.mark.parametrize("with_h0", [True, False])
@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.slow
def test_isan_layer_kernel_matches_the_torch_loop(semiring: str, with_h0: bool) -> None:
    """Outputs, final states and every gradient (input, weights, h0) of the layer on both backends; without h0 the
    units start at the semiring's zero (-inf in the log-domain semirings: its products and their gradients too)."""
    kernel, reference = _layers(semiring, 6, seed=2)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 5, 5, generator=gen, dtype=torch.float64)
    lengths = torch.tensor([5, 0, 2, 4])
    h0 = torch.randn(4, 7, 1, generator=gen, dtype=torch.float64)
    results = []
    for layer in (kernel, reference):
        xs, hs = x.clone().requires_grad_(), h0.clone().requires_grad_()
        h, state = layer(xs, lengths, hs if with_h0 else None)
        g = torch.Generator().manual_seed(4)
        loss = (h * torch.randn(h.shape, generator=g, dtype=h.dtype)).sum()
        loss = loss + (state * torch.randn(state.shape, generator=g, dtype=h.dtype)).sum()
        params = list(layer.parameters())
        grads = torch.autograd.grad(loss, [xs, *params, *([hs] if with_h0 else [])])
        results.append((h, state, grads))
    (h, state, grads), (h_ref, state_ref, grads_ref) = results
    torch.testing.assert_close(h, h_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(state, state_ref, rtol=1e-12, atol=1e-12)
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=1e-11)
    empty, empty_state = kernel(x[:0], lengths[:0])
    assert empty.shape == (0, 5, 6) and empty_state.shape == (0, 7, 1)


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_gradcheck(semiring: str) -> None:
    storage = get_semiring(semiring).storage
    w, off, c0 = _inputs(semiring, 2, 3, 3, seed=5)
    lengths = torch.tensor([3, 2])

    def run(w: torch.Tensor, off: torch.Tensor, c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return dense_recurrence(w, off, lengths, c0, storage)

    args = [v.requires_grad_() for v in (w, off, c0)]
    assert torch.autograd.gradcheck(run, args, eps=1e-6, atol=1e-7, rtol=1e-6)


def test_select_sends_a_tie_to_the_first_term() -> None:
    """max-plus with every term tied at the result (the offset first, then columns in order): all of the
    gradient goes to the offset, as the template kernels' ``op_grads`` give a tied ⊕."""
    storage = get_semiring("max-plus").storage
    w = torch.zeros(1, 1, 3, 3, dtype=torch.float64, requires_grad=True)
    off = torch.zeros(1, 1, 3, dtype=torch.float64, requires_grad=True)
    c0 = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
    h, _ = dense_recurrence(w, off, torch.tensor([1]), c0, storage)
    h.sum().backward()
    assert off.grad is not None and w.grad is not None and c0.grad is not None
    assert torch.equal(off.grad, torch.ones(1, 1, 3, dtype=torch.float64))
    assert torch.equal(w.grad, torch.zeros_like(w)) and torch.equal(c0.grad, torch.zeros_like(c0))


@pytest.mark.parametrize("semiring", ["log", "max-plus"])
@pytest.mark.slow
def test_opcheck(semiring: str) -> None:
    storage = get_semiring(semiring).storage
    forward = dense_op(storage, "cpp").custom_forward
    w, off, c0 = _inputs(semiring, 2, 4, 3, seed=6)
    lengths = torch.tensor([4, 1])
    args = (w.requires_grad_(), off.requires_grad_(), lengths, c0.requires_grad_(), SAVE_NOTHING)
    torch.library.opcheck(forward, args)
    torch.library.opcheck(forward, (w.detach(), off.detach(), lengths, c0.detach(), SAVE_NOTHING))


def test_errors_name_the_argument() -> None:
    storage = get_semiring("real").storage
    w, off, c0 = _inputs("real", 2, 3, 4, seed=7)
    with pytest.raises(CompileError, match=r"matrices must have shape \(2, 3, 4, 4\)"):
        dense_recurrence(w[:, :, :3], off, torch.tensor([3, 3]), c0, storage)
    with pytest.raises(CompileError, match="backend must be one of"):
        dense_recurrence(w, off, torch.tensor([3, 3]), c0, storage, backend="opencl")
    with pytest.raises(CompileError, match="share a dtype"):
        dense_recurrence(w.float(), off, torch.tensor([3, 3]), c0, storage)
    # half precision is no error: it runs in float32 and returns its own dtype (tests/compile/test_half.py)
    h, _ = ISANLayer(3, 2, backend="cpp").half()(torch.zeros(1, 2, 3, dtype=torch.half), torch.tensor([2]))
    assert h.dtype == torch.half


def test_source_does_not_depend_on_the_hidden_size() -> None:
    """One library per storage algebra, whatever d: no d² unrolled terms (the build time stays flat)."""
    storage = get_semiring("real").storage
    source = generate_dense_cpp(storage)
    assert len(source) < 40_000 and "DENSE_SELECT = false" in source
    assert "DENSE_SELECT = true" in generate_dense_cpp(get_semiring("max-plus").storage)


# --------------------------------------------------------------------------------------------
# Triton (interpreter) and CUDA (nvcc -ptx)
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def interpreter() -> Iterator[None]:
    pytest.importorskip("triton", reason="the optional triton package (pip install 'kleene[gpu]') is not installed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        yield


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.slow
def test_triton_interpreter_matches_the_cpp_kernel(interpreter: None, semiring: str) -> None:
    storage = get_semiring(semiring).storage
    w, off, c0 = _inputs(semiring, 3, 4, 5, seed=8)  # d = 5: a padded block of 8
    lengths = torch.tensor([4, 0, 2])
    results = []
    for backend in ("triton", "cpp"):
        args = [v.clone().requires_grad_() for v in (w, off, c0)]
        h, final = dense_recurrence(args[0], args[1], lengths, args[2], storage, backend)
        g = torch.Generator().manual_seed(9)
        loss = (h * torch.randn(h.shape, generator=g, dtype=h.dtype)).sum()
        loss = loss + (final * torch.randn(final.shape, generator=g, dtype=h.dtype)).sum()
        results.append((h, final, torch.autograd.grad(loss, args)))
    (h, final, grads), (h_ref, final_ref, grads_ref) = results
    torch.testing.assert_close(h, h_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(final, final_ref, rtol=1e-12, atol=1e-12)
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=1e-11)


@pytest.mark.slow
def test_nvcc_compiles_the_dense_kernels_for_sm80(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH (the CUDA toolkit is needed to compile the generated source)")
    sources = []
    for semiring in ["real", "log", "max-plus", "min-plus"]:
        path = tmp_path / f"dense-{semiring}.cu"
        path.write_text(generate_dense_cuda(get_semiring(semiring).storage)[0], encoding="utf-8")
        sources.append(str(path))
    command = [nvcc, "-ptx", "-arch=sm_80", *NVCC_FLAGS, "-Werror", "all-warnings", "-odir", str(tmp_path), *sources]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    for source in sources:
        ptx = Path(source).with_suffix(".ptx").read_text(encoding="utf-8")
        for kernel in ("kleene_dense_forward_f32", "kleene_dense_forward_f64", "kleene_dense_backward_f64"):
            assert f".entry {kernel}(" in ptx


@pytest.mark.parametrize(("semiring", "dtype"), [("log", torch.float32), ("max-plus", torch.float64)])
def test_triton_ahead_of_time_ptx_for_sm80(
    semiring: str, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Triton's real compiler (not the interpreter) lowers both dense kernels to sm_80 PTX without a GPU."""
    pytest.importorskip("triton", reason="the optional triton package (pip install 'kleene[gpu]') is not installed")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("KLEENE_CACHE", str(tmp_path))
    ptx = dense_triton_ptx(get_semiring(semiring).storage, dtype)
    assert sorted(ptx) == ["kleene_dense_backward", "kleene_dense_forward"]
    width = "f32" if dtype == torch.float32 else "f64"
    for name, text in ptx.items():
        assert f".visible .entry {name}(" in text and ".target sm_80" in text
    # the forward's ⊕ (max, also inside logaddexp) as a GPU instruction of the dtype's width
    assert re.search(rf"max(\.NaN)?\.{width}", ptx["kleene_dense_forward"])


# The CUDA kernels on the CPU: the qualifiers defined away, each block's threads real threads meeting at a real
# barrier in __syncthreads (so the shared-memory phases are exercised with several threads), blocks one by one.
_EMULATION = r"""
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
#define __shared__
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
struct KleeneDim3 { unsigned x, y, z; };
static KleeneDim3 blockIdx, blockDim;
static thread_local KleeneDim3 threadIdx;
alignas(64) unsigned char dense_shared[1 << 16];
struct KleeneBarrier {
  std::mutex mutex;
  std::condition_variable all;
  unsigned count, waiting = 0, generation = 0;
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    const unsigned seen = generation;
    if (++waiting == count) { waiting = 0; ++generation; all.notify_all(); return; }
    all.wait(lock, [&] { return generation != seen; });
  }
};
static KleeneBarrier* kleene_barrier;
static void __syncthreads() { kleene_barrier->wait(); }
"""
_LAUNCH = r"""
template <typename Kernel, typename... Args> static void emulate(int64_t blocks, Kernel kernel, Args... args) {
  blockDim.x = THREADS;
  for (blockIdx.x = 0; int64_t(blockIdx.x) < blocks; ++blockIdx.x) {
    KleeneBarrier barrier;
    barrier.count = THREADS;
    kleene_barrier = &barrier;
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < THREADS; ++i) threads.emplace_back([=] { threadIdx.x = i; kernel(args...); });
    for (auto& thread : threads) thread.join();
  }
}
extern "C" void emulate_forward(const double* W, const double* off, const int64_t* lengths, const double* c0,
                                double* h, double* cT, int64_t B, int64_t Tn, int64_t D) {
  emulate(B, kleene_dense_forward_f64, W, off, lengths, c0, h, cT, B, Tn, D);
}
extern "C" void emulate_backward(const double* W, const double* off, const int64_t* lengths, const double* c0,
                                 const double* h, const double* gh, const double* gcT, double* gW, double* goff,
                                 double* gc0, int64_t B, int64_t Tn, int64_t D) {
  emulate(B, kleene_dense_backward_f64, W, off, lengths, c0, h, gh, gcT, gW, goff, gc0, B, Tn, D);
}
"""


@pytest.mark.parametrize("semiring", ["real", "log", "max-plus", "min-plus"])
@pytest.mark.slow
def test_cuda_kernels_run_on_the_cpu_agree_with_the_cpp_kernel(semiring: str, tmp_path: Path) -> None:
    """3 threads a block over d = 5 (rows and columns strided), forward and backward, against the CPU kernel."""
    import ctypes

    from kleene.compile.runtime.cpu import build

    storage = get_semiring(semiring).storage
    source = generate_dense_cuda(storage)[0]
    library = ctypes.CDLL(str(build(_EMULATION + source + "#define THREADS 3u\n" + _LAUNCH)[0]))
    w, off, c0 = _inputs(semiring, 3, 4, 5, seed=10)
    lengths = torch.tensor([4, 0, 2])
    gen = torch.Generator().manual_seed(12)
    grad_h = torch.randn(3, 4, 5, generator=gen, dtype=torch.float64)
    grad_final = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    h, final = torch.zeros(3, 4, 5, dtype=torch.float64), torch.zeros(3, 5, dtype=torch.float64)
    gw, goff, gc0 = torch.zeros_like(w), torch.zeros_like(off), torch.zeros_like(c0)
    pointers = [x.data_ptr() for x in (w, off, lengths, c0, h, final)]
    library.emulate_forward.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int64] * 3
    library.emulate_forward(*pointers, 3, 4, 5)
    pointers = [x.data_ptr() for x in (w, off, lengths, c0, h, grad_h, grad_final, gw, goff, gc0)]
    library.emulate_backward.argtypes = [ctypes.c_void_p] * 10 + [ctypes.c_int64] * 3
    library.emulate_backward(*pointers, 3, 4, 5)
    args = [v.clone().requires_grad_() for v in (w, off, c0)]
    h_ref, final_ref = dense_recurrence(args[0], args[1], lengths, args[2], storage)
    grads = torch.autograd.grad((h_ref * grad_h).sum() + (final_ref * grad_final).sum(), args)
    torch.testing.assert_close(h, h_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(final, final_ref, rtol=1e-12, atol=1e-12)
    for got, want in zip((gw, goff, gc0), grads):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-11)
