"""The generated CUDA source: compiled to sm_80 PTX by nvcc, and its kernels run on the CPU against the reference.

No GPU exists here, so the cuda backend is compiled, not run, in CI. Two checks stand in for running it:
``nvcc -ptx -arch=sm_80`` compiles every kernel algebra and a few templates (one nvcc call, shared by the
tests), and the same kernel source -- with the CUDA qualifiers defined away and a loop over blocks and
threads standing in for the launch -- is built with the host C++ compiler and run through the GPU
backends' autograd function against the torch reference.
"""

from __future__ import annotations

import ctypes
import random
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import torch

from kleene.automata.examples import paper_automaton_f
from kleene.compile import Options, Plan, Template, dense_template, lower, sopa_pattern
from kleene.compile.codegen.cuda import NVCC_FLAGS, THREADS, generate_cuda, generate_cuda_bindings
from kleene.compile.reference import check_inputs, run_reference, static_params
from kleene.compile.runtime.cpu import build, compiler
from kleene.compile.runtime.gpu import Kernels, gpu_op, gpu_runner
from kleene.compile.runtime.op import SAVE_NOTHING, SAVE_STATES

from .oracle import function_wfsa, random_slots, random_template, with_output_map

VARIANTS: dict[str, tuple[Template, str, Options]] = {
    "F-real-steps-bidir": (Template.from_wfsa(paper_automaton_f("real")), "real", Options(bidirectional=True)),
    "random-log-last-cap1": (random_template(random.Random(7), "log"), "log", Options(output="last", epsilon_cap=1)),
    "F-maxplus-restart-sum": (Template.from_wfsa(paper_automaton_f("max-plus")), "max-plus",
                              Options(restart=True, output="sum")),
    "sopa4-maxtimes-restart-sum-bidir": (sopa_pattern(4), "max-times",
                                         Options(restart=True, output="sum", bidirectional=True)),
    "dense3-minplus-last-bidir": (dense_template(3), "min-plus", Options(output="last", bidirectional=True)),
    "functions-log-steps-bidir": (Template.from_wfsa(function_wfsa("log")), "log", Options(bidirectional=True)),
    "functions-maxtimes-sum": (Template.from_wfsa(function_wfsa("max-times")), "max-times", Options(output="sum")),
    # an output map without constants (the emulation passes the static parameters only)
    "highway-maxplus-steps-bidir": (with_output_map(Template.from_wfsa(paper_automaton_f("max-plus")), "highway"),
                                    "max-plus", Options(bidirectional=True)),
}
KERNELS = ("kleene_forward_f32", "kleene_forward_f64", "kleene_backward_f32", "kleene_backward_f64")


def _plan(variant: str) -> Plan:
    template, semiring, options = VARIANTS[variant]
    return lower(template, semiring, options)


# --------------------------------------------------------------------------------------------
# nvcc
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every variant compiled by one ``nvcc -ptx -arch=sm_80`` call (warnings are errors)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH (the CUDA toolkit is needed to compile the generated source)")
    directory = tmp_path_factory.mktemp("cuda")
    sources = []
    for variant in VARIANTS:
        path = directory / f"{variant}.cu"
        path.write_text(generate_cuda(_plan(variant)), encoding="utf-8")
        sources.append(str(path))
    command = [nvcc, "-ptx", "-arch=sm_80", *NVCC_FLAGS, "-Werror", "all-warnings", "-odir", str(directory), *sources]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return {variant: (directory / f"{variant}.ptx").read_text(encoding="utf-8") for variant in VARIANTS}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.slow
def test_nvcc_compiles_every_kernel_for_sm80(ptx: dict[str, str], variant: str) -> None:
    text = ptx[variant]
    assert ".target sm_80" in text
    for name in KERNELS:
        assert f".visible .entry {name}(" in text, f"{name} missing from the PTX of {variant}"


def test_source_needs_no_torch_headers_and_declares_its_launchers() -> None:
    source = generate_cuda(_plan("F-real-steps-bidir"))
    assert "torch" not in source and "ATen" not in source
    declarations, functions = generate_cuda_bindings()
    assert functions == ["kleene_forward_launch", "kleene_backward_launch"]
    for declaration in declarations.strip().splitlines():
        assert declaration.rstrip(";") + " {" in source  # the load_inline declaration matches the definition


# --------------------------------------------------------------------------------------------
# The same kernels run on the CPU
# --------------------------------------------------------------------------------------------
_EMULATION = r"""
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
struct KleeneDim3 {{ unsigned x, y, z; }};
static KleeneDim3 blockIdx, threadIdx, blockDim;
{source}
template <typename Kernel, typename... Args> static void emulate(int64_t tasks, Kernel kernel, Args... args) {{
  blockDim.x = {threads};
  for (blockIdx.x = 0; int64_t(blockIdx.x) * {threads} < tasks; ++blockIdx.x)
    for (threadIdx.x = 0; threadIdx.x < {threads}; ++threadIdx.x) kernel(args...);
}}
"""
_WRAPPER = r"""
extern "C" void emulate_{kind}_{suffix}({params}) {{
  emulate(B * D, kleene_{kind}_{suffix}, {args}, B, Tn, D);
}}
"""
_ARGS = {
    "forward": ("slots", "params", "lengths", "h0", "out", "final_state", "states"),
    "backward": ("slots", "params", "lengths", "h0", "states", "out", "grad_out", "grad_final", "grad_slots",
                 "grad_params", "grad_h0"),
}


_OUTPUTS = {"forward": {"out", "final_state", "states"}, "backward": {"grad_slots", "grad_params", "grad_h0"}}


def _c_type(kind: str, arg: str, ctype: str) -> str:
    if arg == "lengths":
        return "const int64_t*"
    return f"{ctype}*" if arg in _OUTPUTS[kind] else f"const {ctype}*"


def emulated_launchers(
    source: str, lanes: Callable[[torch.Tensor], tuple[int, int, int]]
) -> tuple[Callable[..., None], Callable[..., None], str]:
    """(forward, backward, key): the kernels of a generated CUDA ``source`` built with the host compiler and launched
    by a loop over blocks and threads, with ``(B, Tn, D) = lanes(slots)`` (``Kernels``' launchers)."""
    parts = [_EMULATION.format(source=source, threads=THREADS)]
    for kind, args in _ARGS.items():
        for suffix, ctype in (("f32", "float"), ("f64", "double")):
            params = ", ".join(f"{_c_type(kind, a, ctype)} {a}" for a in args) + ", int64_t B, int64_t Tn, int64_t D"
            parts.append(_WRAPPER.format(kind=kind, suffix=suffix, params=params, args=", ".join(args)))
    path = build("".join(parts))[0]
    library = ctypes.CDLL(str(path))

    def launcher(kind: str) -> Any:
        def launch(*tensors: torch.Tensor | None) -> None:
            slots = tensors[0]
            assert slots is not None
            suffix = "f64" if slots.dtype == torch.float64 else "f32"
            function = getattr(library, f"emulate_{kind}_{suffix}")
            function.argtypes = [ctypes.c_void_p] * len(tensors) + [ctypes.c_int64] * 3
            pointers = [None if x is None or x.numel() == 0 else x.data_ptr() for x in tensors]
            function(*pointers, *lanes(slots))

        return launch

    return launcher("forward"), launcher("backward"), f"emulated_{path.stem}"


def _emulated_kernels(plan: Plan) -> Kernels:
    """The plan's generated CUDA kernels, built with the host compiler and launched by a loop."""

    def lanes(slots: torch.Tensor) -> tuple[int, int, int]:
        b, t, _, d = slots.shape
        return b, t, d

    return Kernels(plan, *emulated_launchers(generate_cuda(plan), lanes))


@pytest.fixture(scope="module")
def host_compiler() -> None:
    try:
        compiler()
    except Exception as exc:  # noqa: BLE001 - the reason is shown in the skip message
        pytest.skip(f"no C++ compiler to run the CUDA kernels on the CPU: {exc}")


def _masked(y: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(y), y, torch.zeros_like(y))


@pytest.mark.usefixtures("host_compiler")
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.slow
def test_cuda_kernels_run_on_the_cpu_agree_with_reference(variant: str, dtype: torch.dtype) -> None:
    plan = _plan(variant)
    semiring = plan.semiring.name
    gen = torch.Generator().manual_seed(len(variant))
    d = 6
    constants = torch.rand((len(plan.template.constants), d), generator=gen, dtype=torch.float64) * 0.25 + 0.05
    if semiring != "real":
        constants = constants.log()
    storage = "log" if semiring in ("max-plus", "max-times") else semiring
    slots = random_slots(storage, (3, 5, plan.num_slots, d), gen)
    h0 = random_slots(storage, (3, plan.num_states, d), gen)
    if semiring == "min-plus":
        slots, h0, constants = -slots, -h0, -constants
    lengths = check_inputs(plan, slots, torch.tensor([5, 2, 0]), h0)
    runner = gpu_runner(_emulated_kernels(plan), lambda x: x.device.type == "cpu", "the CPU emulation")
    results = []
    for run in (runner, run_reference):
        inputs = [x.detach().to(dtype).requires_grad_() for x in (slots, h0, constants)]
        params = static_params(plan, inputs[2], inputs[0].new_empty((1, d)))
        out, final = run(plan, inputs[0], params, lengths, inputs[1])
        weights = torch.Generator().manual_seed(1)
        loss = (_masked(out) * torch.randn(out.shape, generator=weights, dtype=dtype)).sum()
        loss = loss + (_masked(final) * torch.randn(final.shape, generator=weights, dtype=dtype)).sum()
        results.append((out.detach(), final.detach(), torch.autograd.grad(loss, inputs, allow_unused=True)))
    (out_k, fin_k, g_k), (out_r, fin_r, g_r) = results
    tol = {"rtol": 1e-9, "atol": 1e-10} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-5}
    for got, expected in ((out_k, out_r), (fin_k, fin_r)):
        assert torch.equal(torch.isfinite(got), torch.isfinite(expected))
        torch.testing.assert_close(_masked(got), _masked(expected), **tol)
    assert bool(g_k[0].abs().sum() > 0)
    for got, expected in zip(g_k, g_r):
        if expected is None:  # an input the reference never reads (no constants): none may reach it here either
            assert got is None or not bool(got.any())
        else:
            torch.testing.assert_close(got, expected, **tol)


@pytest.mark.slow
@pytest.mark.usefixtures("host_compiler")
def test_gpu_kernels_as_custom_ops_under_opcheck_and_torch_compile() -> None:
    """The GPU backends' op (``gpu_op``, here around the CUDA kernels run on the CPU): its custom ops pass opcheck
    (fake shapes, autograd, with and without h0), and a compiled function tracing them in one graph gives the eager
    values and gradients bit for bit."""
    plan = _plan("F-maxplus-restart-sum")
    kernels = _emulated_kernels(plan)
    gen = torch.Generator().manual_seed(5)
    slots = random_slots("log", (3, 5, plan.num_slots, 4), gen).requires_grad_()
    h0 = random_slots("log", (3, plan.num_states, 4), gen).requires_grad_()
    constants = torch.rand((len(plan.template.constants), 4), generator=gen, dtype=torch.float64).log()
    params = static_params(plan, constants, slots.new_empty((1, 4))).detach().requires_grad_()
    lengths = torch.tensor([5, 2, 0])
    forward = gpu_op(kernels).custom_forward
    full = torch.tensor([5, 5, 5])  # (the states past a sequence's length are not written: opcheck compares them)
    for args in ((slots, params, full, h0, SAVE_STATES), (slots, params, full, None, SAVE_STATES)):
        torch.library.opcheck(forward, args)
    torch.library.opcheck(forward, (slots.detach(), params.detach(), lengths, None, SAVE_NOTHING))
    runner = gpu_runner(kernels, lambda x: x.device.type == "cpu", "the CPU emulation")

    def loss(x: torch.Tensor, p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        out, final = runner(plan, x, p, lengths, z)
        return (out * out).sum() + final.sum()

    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    inputs = (slots, params, h0)
    for got, expected in zip(
        torch.autograd.grad(compiled(*inputs), inputs), torch.autograd.grad(loss(*inputs), inputs), strict=True
    ):
        assert torch.equal(got, expected)


# ---------------------------------------------------------------------------------------------------------------
# The cuda backend's build: nvcc straight to a shared library (no torch extension), loaded with ctypes
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_nvcc_builds_a_launcher_library_that_loads_without_a_gpu() -> None:
    """The library the cuda backend builds (``build_cuda_library``, here for sm_80) loads with ctypes; a launch of
    no work returns, and a launch that needs the GPU this machine lacks is a CompileError naming the CUDA error."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH (the CUDA toolkit is needed to build the cuda backend's kernels)")
    from kleene.compile.codegen.cuda import c_api
    from kleene.compile.runtime.gpu import CudaLibrary, build_cuda_library
    from kleene.errors import CompileError as Error

    declarations, functions = generate_cuda_bindings()
    api, arities = c_api(declarations)
    assert set(arities) == set(functions) and arities == {"kleene_forward_launch": 11, "kleene_backward_launch": 15}
    assert api.count('extern "C" int ') == 2
    source = generate_cuda(_plan("F-real-steps-bidir"))
    path, arities, _ = build_cuda_library(source, declarations, "sm_80")
    assert build_cuda_library(source, declarations, "sm_80") == (path, arities, False)  # cached
    library = CudaLibrary(path, arities)
    sizes = (0, 5, 4, 0)  # B = 0: nothing to launch
    library.kleene_forward_launch(False, *[0] * 7, *sizes)
    library.kleene_backward_launch(True, *[0] * 11, *sizes)
    if torch.cuda.is_available():  # pragma: no cover - the GPU check runs the launchers for real
        return
    with pytest.raises(Error, match=r"kleene_forward_launch: kleene_forward: \S"):
        library.kleene_forward_launch(False, *[0] * 7, 1, 5, 4, 0)
    with pytest.raises(AttributeError):
        library.kleene_nothing  # noqa: B018
