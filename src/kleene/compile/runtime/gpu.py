"""GPU backends: runners for the generated Triton and CUDA kernels, registered with ``kleene.compile``.

``triton``: ``kleene.compile.codegen.triton`` writes a Python module per plan into the kernel
cache (``kleene.compile.runtime.cpu.cache_dir``) and imports it; the kernels run on CUDA tensors,
or on CPU tensors when ``TRITON_INTERPRET=1`` was set before the module was loaded (Triton's
interpreter -- how the tests run them here, thousands of times slower than a GPU).

``cuda``: ``kleene.compile.codegen.cuda`` writes CUDA C++ (kernels plus a launcher taking raw
pointers), built when torch is a CUDA build and a GPU is present: by nvcc into a shared library called through
ctypes (``build_cuda_library``; seconds), or by ``torch.utils.cpp_extension.load_inline`` without nvcc. No GPU
exists where kleene's tests run: the CUDA backend is compiled (``nvcc -ptx``, the library for sm_80) but never
run in CI.

Both run through one ``kleene.compile.runtime.op.NativeOp`` per kernel (``lane_op``; custom ops
``kleene::gpu_fwd_<key>``, ``kleene::gpu_bwd_<key>`` under ``torch.compile``): the forward saves every state (the
kernels have no checkpoints), the backward runs the generated reverse kernel; per-sequence parameter gradients are
summed here. A bank of plans (``kleene.compile.runtime.bank``) launches its kernels through the same launchers
(``triton_launchers``, ``cuda_launchers_of``) and ``lane_op``.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kleene.compile.codegen.cuda import NVCC_FLAGS, c_api, generate_cuda, generate_cuda_bindings
from kleene.compile.codegen.triton import generate_triton
from kleene.compile.codegen.writer import BACKWARD_ARGS, FORWARD_ARGS
from kleene.compile.runtime.cpu import cache_dir
from kleene.compile.runtime.op import SAVE_STATES, NativeOp, save_mode
from kleene.compile.template import Plan
from kleene.errors import CompileError

Tensor = torch.Tensor

#: Dimensions per Triton program on a GPU (the interpreter uses the next power of two of D, up to this).
TRITON_BLOCK = 128
#: Threads per CUDA block (one thread per (sequence, dimension)).
CUDA_THREADS = 128


def triton_interpreting() -> bool:
    """Whether Triton kernels loaded now run in the interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def _write_atomically(path: os.PathLike[str] | str, text: str) -> None:
    """Write ``text`` to ``path`` unless it exists, through a private temporary file (safe across processes)."""
    target = os.fspath(path)
    if os.path.exists(target):
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, target)


# --------------------------------------------------------------------------------------------
# Launch contract shared by both backends
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kernels:
    """A plan's forward and backward kernel launchers (argument order of ``codegen_triton``'s docstring).

    ``forward(slots, params, lengths, h0, out, final_state, states)`` and ``backward(slots, params,
    lengths, h0, states, out, grad_out, grad_final, grad_slots, grad_params, grad_h0)`` take
    contiguous tensors of one dtype and device (``h0`` may be None; ``states`` may be empty when
    not saved) and fill the output tensors. ``key`` names the kernels (a hash of their source and how they are
    run): kernels of one key are the same.
    """

    plan: Plan
    forward: Callable[..., None]
    backward: Callable[..., None]
    key: str


#: The shapes of a lane kernel's results from its slots: (output, final state, every state, per-sequence parameter
#: gradients).
LaneShapes = Callable[[Tensor], tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]]


def lane_op(
    prefix: str,
    key: str,
    forward_kernel: Callable[..., None],
    backward_kernel: Callable[..., None],
    shapes: LaneShapes,
    padding: float,
) -> NativeOp:
    """Lane kernels of ``codegen.writer``'s contract (a plan's, a bank's) as one op: ``op(slots, params, lengths,
    h0) -> (output, final state)``; its custom ops ``op.custom_forward(slots, params, lengths, h0, save) ->
    (output, final state, states)`` and ``op.custom_backward``. The kernels store every state (they have no
    checkpoints); the states past a sequence's length are left unwritten (nothing reads them), the output's
    unwritten positions hold ``padding``; per-sequence parameter gradients are summed here."""

    def states_shape(slots: Tensor, save: int) -> tuple[Any, ...]:
        return shapes(slots)[2] if save == SAVE_STATES else (0,)

    def forward(inputs: tuple[Any, ...], save: int) -> tuple[Tensor, Tensor, Tensor]:
        slots, params, lengths, h0 = inputs
        slots, params, lengths = slots.contiguous(), params.contiguous(), lengths.contiguous()
        h0 = None if h0 is None else h0.contiguous()
        out_shape, final_shape, _, _ = shapes(slots)
        out = slots.new_full(out_shape, padding)
        final = slots.new_empty(final_shape)
        states = slots.new_empty(states_shape(slots, save))
        forward_kernel(slots, params, lengths, h0, out, final, states)
        return out, final, states

    def backward(inputs: tuple[Any, ...], save: int, outputs: tuple[Tensor, ...], grads: tuple[Tensor, ...]) -> Any:
        slots, params, lengths, h0 = (None if x is None else x.contiguous() for x in inputs)
        assert slots is not None and params is not None and lengths is not None
        out, final, states = outputs
        grad_out, grad_final = (g.contiguous() for g in grads)
        grad_slots = torch.zeros_like(slots)
        grad_params = slots.new_zeros(shapes(slots)[3])
        grad_h0 = torch.zeros_like(final)
        backward_kernel(
            slots, params, lengths, h0, states, out, grad_out, grad_final, grad_slots, grad_params, grad_h0
        )
        return grad_slots, grad_params.sum(0), grad_h0

    def output_shapes(inputs: tuple[Any, ...], save: int) -> list[tuple[Any, ...]]:
        out_shape, final_shape, _, _ = shapes(inputs[0])
        return [out_shape, final_shape, states_shape(inputs[0], save)]

    def saving(inputs: tuple[Any, ...]) -> int:
        return save_mode(can_store=True, can_checkpoint=False)

    inputs, differentiable = ("slots", "params", "lengths", "h0?"), ("slots", "params", "h0")
    return NativeOp(prefix, key, inputs, differentiable, 3, 2, forward, backward, output_shapes, saving)


def gpu_op(kernels: Kernels) -> NativeOp:
    """``kernels`` as one op (``lane_op``, custom ops ``kleene::gpu_fwd_<key>``, ``kleene::gpu_bwd_<key>``)."""
    plan = kernels.plan
    q = plan.num_states

    def shapes(slots: Tensor) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]:
        b, t, _, d = slots.shape
        out = (b, t, d) if plan.options.output == "steps" else (b, d)
        return out, (b, q, d), (b, t, q, d), (b, plan.num_params, d)

    # (the output's padding: the storage zero, or 0 under an output map)
    return lane_op("gpu_", kernels.key, kernels.forward, kernels.backward, shapes, plan.padding)


def gpu_runner(kernels: Kernels, accepts: Callable[[Tensor], bool], where: str) -> Callable[..., tuple[Tensor, Tensor]]:
    """A runner (see ``kleene.compile.module``) launching ``kernels`` (``gpu_op``) on tensors ``accepts`` admits.

    Raises (when run):
        CompileError: the tensors are on a device the kernels cannot run on (``where`` says which).
    """
    op = gpu_op(kernels)

    def run(plan: Plan, slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
        if not accepts(slots):
            raise CompileError(f"{where}; got tensors on {slots.device}")
        out, final = op(slots, params, lengths.to(slots.device), h0)
        return out, final

    return run


# --------------------------------------------------------------------------------------------
# Triton
# --------------------------------------------------------------------------------------------
_TRITON_MODULES: dict[tuple[str, bool], ModuleType] = {}


def import_triton_source(source: str, prefix: str) -> ModuleType:
    """Import a generated Triton module's ``source`` (written once into the kernel cache as ``{prefix}_{hash}.py``).

    Note:
        The kernels are interpreted when ``TRITON_INTERPRET=1`` at the first load in this
        process of this source in that mode (Triton decides at decoration time).

    Raises:
        CompileError: triton is not installed.
    """
    if importlib.util.find_spec("triton") is None:
        raise CompileError("the triton backend needs the triton package (pip install 'kleene[gpu]')")
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    interpret = triton_interpreting()
    if (key, interpret) not in _TRITON_MODULES:
        path = cache_dir() / "triton" / f"{prefix}_{key}.py"
        _write_atomically(path, source)
        name = f"{prefix}_{key}_{'interpreted' if interpret else 'compiled'}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _TRITON_MODULES[(key, interpret)] = module
    return _TRITON_MODULES[(key, interpret)]


def triton_block(d: int, most: int | None = TRITON_BLOCK) -> int:
    """Dimensions per program: the next power of two of ``d``, at most ``most`` (``None``: no bound)."""
    block = 1
    while block < (d if most is None else min(d, most)):
        block *= 2
    return block


#: Where a Triton launch runs: (steps Tn, lanes D, HALF, BLOCK, grid, further launch options) of its slots.
TritonGeometry = Callable[[Tensor], tuple[int, int, int, int, tuple[int, int], dict[str, Any]]]


def triton_launchers(source: str, geometry: TritonGeometry) -> tuple[Callable[..., None], Callable[..., None], str]:
    """(forward, backward, key) launching the kernels of a Triton ``source`` of ``codegen.triton``'s contract (a
    plan's, or a bank's: ``codegen.bank.generate_bank_triton``) where ``geometry`` says, with the arguments of
    ``Kernels``' launchers."""
    module = import_triton_source(source, "kleene_triton")
    mode = "interpreted" if triton_interpreting() else "compiled"
    key = f"triton_{hashlib.sha256(source.encode()).hexdigest()[:16]}_{mode}"

    def forward(
        slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, out: Tensor, final: Tensor, states: Tensor
    ) -> None:
        t, d, half, block, grid, options = geometry(slots)
        if grid[0] * grid[1] == 0:
            return
        module.kleene_forward[grid](
            slots,
            params,
            lengths,
            h0 if h0 is not None else slots,
            out,
            final,
            states if states.numel() else out,
            t,
            d,
            half,
            HAS_H0=h0 is not None,
            SAVE_STATES=states.numel() > 0,
            BLOCK=block,
            **options,
        )

    def backward(
        slots: Tensor,
        params: Tensor,
        lengths: Tensor,
        h0: Tensor | None,
        states: Tensor,
        out: Tensor,
        grad_out: Tensor,
        grad_final: Tensor,
        grad_slots: Tensor,
        grad_params: Tensor,
        grad_h0: Tensor,
    ) -> None:
        t, d, half, block, grid, options = geometry(slots)
        if grid[0] * grid[1] == 0:
            return
        if states.numel() == 0 and t > 0:
            raise CompileError("backward through a triton kernel whose forward saved no states")
        module.kleene_backward[grid](
            slots,
            params,
            lengths,
            h0 if h0 is not None else slots,
            states if states.numel() else out,
            out,
            grad_out,
            grad_final,
            grad_slots,
            grad_params,
            grad_h0,
            t,
            d,
            half,
            HAS_H0=h0 is not None,
            BLOCK=block,
            **options,
        )

    return forward, backward, key


def triton_kernels(plan: Plan) -> Kernels:
    """Launchers of ``plan``'s Triton kernels."""

    def geometry(slots: Tensor) -> tuple[int, int, int, int, tuple[int, int], dict[str, Any]]:
        b, t, _, d = slots.shape
        half = d // 2 if plan.options.bidirectional else d
        block = triton_block(d)
        blocks = -(-half // block) + -(-(d - half) // block)
        return t, d, half, block, (b, blocks), {}

    return Kernels(plan, *triton_launchers(generate_triton(plan), geometry))


_TRITON_TYPES = {torch.float32: "fp32", torch.float64: "fp64"}


def triton_ptx(
    plan: Plan, dtype: torch.dtype = torch.float32, capability: int = 80, block: int = TRITON_BLOCK
) -> dict[str, str]:
    """Compile ``plan``'s Triton kernels ahead of time for ``sm_<capability>``: {kernel name: PTX text}.

    Needs no GPU (Triton's compiler and ptxas run on the host). ``HAS_H0`` is compiled as false
    and ``SAVE_STATES`` as true, the variant training runs.

    Raises:
        CompileError: triton is missing, the dtype is not float32/float64, or the kernels are
            currently loaded in interpreter mode (unset ``TRITON_INTERPRET``).
    """
    return triton_source_ptx(generate_triton(plan), dtype, capability, block)


def triton_source_ptx(
    source: str, dtype: torch.dtype = torch.float32, capability: int = 80, block: int = TRITON_BLOCK
) -> dict[str, str]:
    """``triton_ptx`` of the kernels of a generated Triton ``source`` of ``codegen.triton``'s contract (a plan's, a
    bank's).

    Raises:
        CompileError: as ``triton_ptx``.
    """
    if dtype not in _TRITON_TYPES:
        raise CompileError(f"triton kernels are compiled for float32 or float64, not {dtype}")
    if triton_interpreting():
        raise CompileError("ahead-of-time compilation needs TRITON_INTERPRET unset (it is set)")
    module = import_triton_source(source, "kleene_triton")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    value = "*" + _TRITON_TYPES[dtype]
    sizes = {"Tn": "i32", "D": "i32", "HALF": "i32"}
    forward = dict.fromkeys(FORWARD_ARGS, value)
    backward = dict.fromkeys(BACKWARD_ARGS, value)
    signatures = {
        "kleene_forward": ({**forward, "lengths": "*i64", **sizes}, {"HAS_H0": False, "SAVE_STATES": True}),
        "kleene_backward": ({**backward, "lengths": "*i64", **sizes}, {"HAS_H0": False}),
    }
    target = GPUTarget("cuda", capability, 32)
    out = {}
    for name, (types, flags) in signatures.items():
        fn = getattr(module, name)
        constexprs = {**flags, "BLOCK": block}
        signature = {arg: ("constexpr" if arg in constexprs else types[arg]) for arg in fn.arg_names}
        compiled = triton.compile(
            ASTSource(fn, signature, constexprs), target=target, options={"enable_fp_fusion": True}
        )
        out[name] = compiled.asm["ptx"]
    return out


def triton_runner(plan: Plan) -> Callable[..., tuple[Tensor, Tensor]]:
    """The ``triton`` backend: CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``.

    Raises:
        CompileError: triton is not installed, or neither a GPU nor the interpreter is available.
    """
    interpret = triton_interpreting()
    if not interpret and not torch.cuda.is_available():
        raise CompileError("the triton backend needs a CUDA device (or TRITON_INTERPRET=1 for the CPU interpreter)")
    kernels = triton_kernels(plan)

    def accepts(x: Tensor) -> bool:
        return x.is_cuda or (interpret and x.device.type == "cpu")

    where = "the triton backend runs on CUDA tensors" + (" or CPU tensors (interpreter)" if interpret else "")
    return gpu_runner(kernels, accepts, where)


# --------------------------------------------------------------------------------------------
# CUDA
# --------------------------------------------------------------------------------------------
_CUDA_EXTENSIONS: dict[str, Any] = {}
#: nvcc flags of a launcher library (beside ``NVCC_FLAGS``): a shared object with the CUDA runtime linked in.
NVCC_LIBRARY_FLAGS = ("-O3", "--shared", "-Xcompiler", "-fPIC", "--cudart", "static")
#: Bytes of a launcher's error message.
_ERROR_CAPACITY = 512


def find_nvcc() -> str | None:
    """nvcc: ``$KLEENE_NVCC``, else on PATH, else under ``$CUDA_HOME``; None when there is none."""
    named = os.environ.get("KLEENE_NVCC")
    if named:
        return shutil.which(named)
    found = shutil.which("nvcc")
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if found is None and home and os.path.exists(os.path.join(home, "bin", "nvcc")):
        found = os.path.join(home, "bin", "nvcc")
    return found


def device_arch(device: torch.device | None = None) -> str:
    """The current (or ``device``'s) GPU as an nvcc architecture, ``sm_XY``."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


class CudaLibrary:
    """Launchers of a library ``build_cuda_library`` made: ``library.NAME(f64, *int64s)`` calls ``NAME_c``.

    Raises (when a launcher is called):
        CompileError: the launch failed (the CUDA error's text).
    """

    def __init__(self, path: Path, arities: dict[str, int]):
        self.path = path
        self._lib = ctypes.CDLL(str(path))
        self._entries: dict[str, Any] = {}
        for name, count in arities.items():
            entry = getattr(self._lib, f"{name}_c")
            entry.argtypes = [ctypes.c_bool, *[ctypes.c_int64] * count, ctypes.c_char_p, ctypes.c_int64]
            entry.restype = ctypes.c_int
            self._entries[name] = entry

    def __getattr__(self, name: str) -> Callable[..., None]:
        entries = self.__dict__.get("_entries", {})
        if name not in entries:
            raise AttributeError(name)
        entry = entries[name]

        def launch(f64: bool, *values: int) -> None:
            error = ctypes.create_string_buffer(_ERROR_CAPACITY)
            if entry(bool(f64), *[int(v) for v in values], error, _ERROR_CAPACITY) != 0:
                raise CompileError(f"{name}: {error.value.decode(errors='replace')}")

        return launch


def build_cuda_library(source: str, declarations: str, arch: str) -> tuple[Path, dict[str, int], bool]:
    """Compile generated CUDA ``source`` and ctypes entry points of its launchers (``codegen.cuda.c_api`` of
    ``declarations``) with nvcc into a shared library for ``arch`` (``sm_XY``), cached under the kernel cache;
    returns (path, launcher arities, whether it was built now). No torch headers: seconds, where a torch
    extension build of the same source takes tens of seconds. Needs no GPU to build.

    Raises:
        CompileError: no nvcc, or nvcc failed (its output is in the message).
    """
    nvcc = find_nvcc()
    if nvcc is None:
        raise CompileError("no nvcc: the CUDA toolkit is needed to build the cuda backend's kernels")
    api, arities = c_api(declarations)
    text = source + "\n" + api
    flags = [*NVCC_LIBRARY_FLAGS, *NVCC_FLAGS, f"-arch={arch}"]
    key = hashlib.sha256("\n".join([text, nvcc, " ".join(flags)]).encode()).hexdigest()[:20]
    directory = cache_dir() / "cuda"
    library = directory / f"kleene_cuda_{key}_{arch}.so"
    if library.exists():
        return library, arities, False
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as tmp:
        src, out = Path(tmp) / "kernels.cu", Path(tmp) / "kernels.so"
        src.write_text(text, encoding="utf-8")
        result = subprocess.run([nvcc, *flags, str(src), "-o", str(out)], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise CompileError(f"nvcc failed on generated CUDA kernels:\n{result.stderr[-4000:]}")
        os.replace(out, library)
    return library, arities, True


_CUDA_LIBRARIES: dict[Path, CudaLibrary] = {}


def cuda_launchers(source: str, declarations: str, functions: list[str], name: str) -> Any:
    """The launchers ``functions`` of generated CUDA ``source``: an nvcc-built library (``build_cuda_library``,
    for the current GPU) when nvcc is found, else a torch extension (``load_inline``, named ``name``, cached by
    torch). ``$KLEENE_CUDA_BUILD=torch`` forces the extension.

    Raises:
        CompileError: the build failed.
    """
    if os.environ.get("KLEENE_CUDA_BUILD", "nvcc") != "torch" and find_nvcc() is not None:
        path, arities, _ = build_cuda_library(source, declarations, device_arch())
        if path not in _CUDA_LIBRARIES:
            _CUDA_LIBRARIES[path] = CudaLibrary(path, arities)
        return _CUDA_LIBRARIES[path]
    if name not in _CUDA_EXTENSIONS:
        from torch.utils.cpp_extension import load_inline

        _CUDA_EXTENSIONS[name] = load_inline(
            name=name,
            cpp_sources=[declarations],
            cuda_sources=[source],
            functions=functions,
            extra_cuda_cflags=["-O3", *NVCC_FLAGS],
        )
    return _CUDA_EXTENSIONS[name]


def require_cuda() -> None:
    """Raises CompileError: torch is not a CUDA build or no GPU is present."""
    if torch.version.cuda is None or not torch.cuda.is_available():
        raise CompileError("the cuda backend needs a CUDA build of torch and a GPU (it is compiled, not run, in CI)")


def cuda_launchers_of(
    source: str, lanes: Callable[[Tensor], tuple[int, int, int]]
) -> tuple[Callable[..., None], Callable[..., None], str]:
    """(forward, backward, key) launching the kernels of a CUDA ``source`` of ``codegen.cuda``'s contract (a plan's,
    or a bank's: ``codegen.bank.generate_bank_cuda``) with ``(B, Tn, D) = lanes(slots)``, with the arguments of
    ``Kernels``' launchers (built by ``cuda_launchers``).

    Caution: the launchers are built at the first launch (``cuda_launchers``; a build failure is a ``CompileError``
    there), not here: a kernel never launched (a SoPa group whose bank runs in one launch) is never built.
    """
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    declarations, functions = generate_cuda_bindings()

    @functools.cache
    def ext() -> Any:
        return cuda_launchers(source, declarations, functions, f"kleene_cuda_{key}")

    def ptr(x: Tensor | None) -> int:
        return 0 if x is None or x.numel() == 0 else int(x.data_ptr())

    def launch_args(slots: Tensor) -> tuple[bool, int, int, int, int]:
        b, t, d = lanes(slots)
        return slots.dtype == torch.float64, b, t, d, int(torch.cuda.current_stream(slots.device).cuda_stream)

    def forward(
        slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, out: Tensor, final: Tensor, states: Tensor
    ) -> None:
        f64, b, t, d, stream = launch_args(slots)
        ext().kleene_forward_launch(
            f64, ptr(slots), ptr(params), ptr(lengths), ptr(h0), ptr(out), ptr(final), ptr(states), b, t, d, stream
        )

    def backward(
        slots: Tensor,
        params: Tensor,
        lengths: Tensor,
        h0: Tensor | None,
        states: Tensor,
        out: Tensor,
        grad_out: Tensor,
        grad_final: Tensor,
        grad_slots: Tensor,
        grad_params: Tensor,
        grad_h0: Tensor,
    ) -> None:
        f64, b, t, d, stream = launch_args(slots)
        ext().kleene_backward_launch(
            f64,
            ptr(slots),
            ptr(params),
            ptr(lengths),
            ptr(h0),
            ptr(states),
            ptr(out),
            ptr(grad_out),
            ptr(grad_final),
            ptr(grad_slots),
            ptr(grad_params),
            ptr(grad_h0),
            b,
            t,
            d,
            stream,
        )

    return forward, backward, f"cuda_{key}"


def cuda_kernels(plan: Plan) -> Kernels:
    """Launchers of ``plan``'s CUDA kernels (``cuda_launchers_of``: built at their first launch).

    Raises:
        CompileError: torch is not a CUDA build or no GPU is present.
    """
    require_cuda()

    def lanes(slots: Tensor) -> tuple[int, int, int]:
        b, t, _, d = slots.shape
        return b, t, d

    return Kernels(plan, *cuda_launchers_of(generate_cuda(plan), lanes))


def cuda_runner(plan: Plan) -> Callable[..., tuple[Tensor, Tensor]]:
    """The ``cuda`` backend (CUDA tensors only)."""
    return gpu_runner(cuda_kernels(plan), lambda x: x.is_cuda, "the cuda backend runs on CUDA tensors")


def register_gpu_backends() -> None:
    """Register "triton" (when triton is installed) and "cuda" (when torch is a CUDA build) with
    ``kleene.compile``; ``auto`` tries them first only when a GPU is present. Runs when this
    module is imported (``kleene.compile`` imports it).

    Building is deferred to the factories (called by ``compile``), which raise ``CompileError``
    when a prerequisite is missing.
    """
    from kleene.compile.module import register_backend

    gpu = torch.cuda.is_available()
    if importlib.util.find_spec("triton") is not None:
        register_backend("triton", triton_runner, auto_priority=0 if gpu else None)
    if torch.version.cuda is not None:
        register_backend("cuda", cuda_runner, auto_priority=1 if gpu else None)


register_gpu_backends()
