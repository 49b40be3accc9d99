"""The dense path's runtime: ``dense_recurrence`` runs ``c_t = W_t ⊗ c_{t-1} ⊕ o_t`` in a generated kernel.

``kleene.compile.codegen.dense`` writes the kernels (C++ for the CPU, CUDA, Triton); this module builds and caches
them as the template kernels are (``kleene.compile.runtime.cpu.build``: one shared library per storage algebra,
a first build about a second, a cached load milliseconds; Triton modules in the same cache) and differentiates
them. On the CPU the kernels are two ``torch.library`` custom ops (``kleene::dense_fwd_<key>``,
``kleene::dense_bwd_<key>``) with fake implementations and autograd, so ``torch.library.opcheck`` passes and
``torch.compile`` traces them; eager calls skip the dispatcher (as ``cpu.cpp_runner`` does).

The backward reads the states from ``h`` (the forward's output holds every ``c_t``): nothing else is saved and
nothing recomputed but one step's products, so there is no store-or-recompute choice to make
(``op.save_mode`` of kernels that neither store nor checkpoint; ``Options.state_budget`` does not apply).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from kleene.automata.semiring import Semiring
from kleene.compile.codegen.dense import (
    generate_dense_cpp,
    generate_dense_cuda,
    generate_dense_triton,
    selects,
)
from kleene.compile.module import HALF_DTYPES, kernel_dtype
from kleene.compile.runtime.cpu import NativeKernel, load_native
from kleene.compile.runtime.gpu import cuda_launchers, import_triton_source, triton_block, triton_interpreting
from kleene.compile.runtime.op import NativeOp, onnx_exporting, save_mode
from kleene.errors import CompileError

Tensor = torch.Tensor

#: The backends of the dense path: "cpp" (CPU tensors), "triton" (CUDA tensors, or CPU ones under
#: ``TRITON_INTERPRET=1``), "cuda" (CUDA tensors).
DENSE_BACKENDS = ("cpp", "triton", "cuda")


def load_dense_cpu(semiring: Semiring) -> tuple[str, NativeKernel]:
    """Build (or fetch from the cache) and load the CPU kernels of ``semiring``'s storage algebra: (key, kernels).

    Raises:
        CompileError: no kernel realisation, no compiler, or the compiler failed.
    """
    ptr, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    forward = [ptr] * 6 + [i64] * 3 + [c_int]
    backward = [ptr] * 10 + [i64] * 3 + [c_int]
    return load_native(generate_dense_cpp(semiring), "kleene_dense", forward, backward)


def _check_cpu(*tensors: Tensor) -> None:
    for x in tensors:
        if x.device.type != "cpu":
            raise CompileError(f"the cpp backend of the dense path runs on CPU tensors; got one on {x.device}")


def _cpu_forward(kernel: NativeKernel, w: Tensor, off: Tensor, lengths: Tensor, c0: Tensor) -> tuple[Tensor, Tensor]:
    _check_cpu(w, off, lengths, c0)
    w, off, lengths, c0 = w.contiguous(), off.contiguous(), lengths.contiguous(), c0.contiguous()
    b, t, d = off.shape
    h, final = off.new_empty((b, t, d)), off.new_empty((b, d))
    kernel.forward(w.dtype)(
        w.data_ptr(), off.data_ptr(), lengths.data_ptr(), c0.data_ptr(), h.data_ptr(), final.data_ptr(),
        b, t, d, torch.get_num_threads(),
    )  # fmt: skip
    return h, final


def _cpu_backward(
    kernel: NativeKernel,
    w: Tensor,
    off: Tensor,
    lengths: Tensor,
    c0: Tensor,
    h: Tensor,
    grad_h: Tensor,
    grad_final: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    _check_cpu(w, off, lengths, c0, h, grad_h, grad_final)
    args = [x.contiguous() for x in (w, off, lengths, c0, h, grad_h, grad_final)]
    w, off, lengths, c0, h, grad_h, grad_final = args
    grad_w, grad_off, grad_c0 = torch.empty_like(w), torch.empty_like(off), torch.empty_like(c0)
    b, t, d = off.shape
    kernel.backward(w.dtype)(
        w.data_ptr(), off.data_ptr(), lengths.data_ptr(), c0.data_ptr(), h.data_ptr(), grad_h.data_ptr(),
        grad_final.data_ptr(), grad_w.data_ptr(), grad_off.data_ptr(), grad_c0.data_ptr(),
        b, t, d, torch.get_num_threads(),
    )  # fmt: skip
    return grad_w, grad_off, grad_c0


# --------------------------------------------------------------------------------------------
# GPU: Triton and CUDA (one autograd function; launchers fill preallocated tensors)
# --------------------------------------------------------------------------------------------


def load_dense_triton(semiring: Semiring) -> ModuleType:
    """Import the dense path's Triton module of ``semiring``'s storage algebra (``import_triton_source``: written
    once into the cache, interpreted when ``TRITON_INTERPRET=1`` at its first load in that mode).

    Raises:
        CompileError: triton is not installed, or the semiring has no kernel realisation.
    """
    return import_triton_source(generate_dense_triton(semiring), "kleene_dense")


def _cuda_extension(semiring: Semiring) -> Any:
    if torch.version.cuda is None or not torch.cuda.is_available():
        raise CompileError("the cuda backend needs a CUDA build of torch and a GPU (it is compiled, not run, in CI)")
    source, declarations, functions = generate_dense_cuda(semiring)
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    return cuda_launchers(source, declarations, functions, f"kleene_dense_cuda_{key}")


def _gpu_launch(backend: str, semiring: Semiring, kind: str, tensors: list[Tensor], b: int, t: int, d: int) -> None:
    if backend == "triton":
        module = load_dense_triton(semiring)
        if b == 0:
            return
        if kind == "forward":
            module.kleene_dense_forward[(b,)](*tensors, t, d, BLOCK=triton_block(d, None))
        else:
            module.kleene_dense_backward[(b,)](*tensors, t, d, SELECT=selects(semiring), BLOCK=triton_block(d, None))
        return
    ext = _cuda_extension(semiring)
    stream = int(torch.cuda.current_stream(tensors[0].device).cuda_stream)
    launch = ext.kleene_dense_forward_launch if kind == "forward" else ext.kleene_dense_backward_launch
    launch(tensors[0].dtype == torch.float64, *(int(x.data_ptr()) for x in tensors), b, t, d, stream)


def _gpu_forward(backend: str, semiring: Semiring, w: Tensor, off: Tensor, lengths: Tensor, c0: Tensor) -> Any:
    w, off, lengths, c0 = w.contiguous(), off.contiguous(), lengths.to(off.device).contiguous(), c0.contiguous()
    b, t, d = off.shape
    h, final = off.new_zeros((b, t, d)), c0.clone()
    _gpu_launch(backend, semiring, "forward", [w, off, lengths, c0, h, final], b, t, d)
    return h, final


def _gpu_backward(
    backend: str, semiring: Semiring, w: Tensor, off: Tensor, lengths: Tensor, c0: Tensor, h: Tensor,
    grad_h: Tensor, grad_final: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    w, off, lengths, c0 = w.contiguous(), off.contiguous(), lengths.to(off.device).contiguous(), c0.contiguous()
    b, t, d = off.shape
    grad_h, grad_final = grad_h.contiguous(), grad_final.contiguous()
    grad_w, grad_off, grad_c0 = torch.zeros_like(w), torch.zeros_like(off), grad_final.clone()
    tensors = [w, off, lengths, c0, h, grad_h, grad_final, grad_w, grad_off, grad_c0]
    _gpu_launch(backend, semiring, "backward", tensors, b, t, d)
    return grad_w, grad_off, grad_c0


def dense_op(semiring: Semiring, backend: str) -> NativeOp:
    """The kernels of ``semiring``'s storage algebra on ``backend`` ("cpp", "triton" or "cuda", built already) as
    one op: ``op(W, off, lengths, c0) -> (h, final c)``; its custom ops ``op.custom_forward(W, off, lengths, c0,
    save)`` and ``op.custom_backward`` (the backward reads the states from ``h``: ``save`` is ``SAVE_NOTHING``)."""
    if backend == "cpp":
        key, kernel = load_dense_cpu(semiring)

        def forward(inputs: tuple[Any, ...], save: int) -> tuple[Tensor, Tensor]:
            return _cpu_forward(kernel, *inputs)

        def backward(inputs: tuple[Any, ...], save: int, outputs: tuple[Tensor, ...], grads: tuple[Any, ...]) -> Any:
            (w, off, lengths, c0), (grad_h, grad_final) = inputs, grads
            return _cpu_backward(kernel, w, off, lengths, c0, outputs[0], grad_h, grad_final)

        prefix = "dense_"
    else:
        source = generate_dense_triton(semiring) if backend == "triton" else generate_dense_cuda(semiring)[0]
        key = hashlib.sha256(source.encode()).hexdigest()[:16] + ("_interpreted" if triton_interpreting() else "")

        def forward(inputs: tuple[Any, ...], save: int) -> tuple[Tensor, Tensor]:
            return _gpu_forward(backend, semiring, *inputs)

        def backward(inputs: tuple[Any, ...], save: int, outputs: tuple[Tensor, ...], grads: tuple[Any, ...]) -> Any:
            (w, off, lengths, c0), (grad_h, grad_final) = inputs, grads
            return _gpu_backward(backend, semiring, w, off, lengths, c0, outputs[0], grad_h, grad_final)

        prefix = f"dense_{backend}_"

    def shapes(inputs: tuple[Any, ...], save: int) -> list[tuple[Any, ...]]:
        return [tuple(inputs[1].shape), tuple(inputs[3].shape)]

    def saving(inputs: tuple[Any, ...]) -> int:
        return save_mode(can_store=False, can_checkpoint=False)

    differentiable = ("w", "off", "c0")
    return NativeOp(prefix, key, ("w", "off", "lengths", "c0"), differentiable, 2, 2, forward, backward, shapes, saving)


def dense_runner(semiring: Semiring, backend: str = "cpp") -> Callable[..., tuple[Tensor, Tensor]]:
    """``run(matrices, offsets, lengths, c0) -> (h, final c)``: ``dense_recurrence`` with its kernels built now (so
    that ``torch.compile`` traces only the call: the CPU kernels through their custom ops).

    Raises:
        CompileError: an unknown backend, a semiring without kernels, or a backend that cannot run here (no
            compiler, no triton, no GPU); when run: see ``dense_recurrence``.
    """
    if backend not in DENSE_BACKENDS:
        raise CompileError(f"dense_recurrence: backend must be one of {', '.join(DENSE_BACKENDS)}; got {backend!r}")
    prepare_dense(semiring, backend)
    op = dense_op(semiring, backend)

    def run(matrices: Tensor, offsets: Tensor, lengths: Tensor, c0: Tensor) -> tuple[Tensor, Tensor]:
        inputs = (matrices, offsets, c0)
        if not any(x.dtype in HALF_DTYPES for x in inputs):
            return run_kernel(matrices, offsets, lengths, c0)
        dtype = functools.reduce(torch.promote_types, (x.dtype for x in inputs))  # half precision: in float32
        compute = kernel_dtype(dtype)
        h, final = run_kernel(matrices.to(compute), offsets.to(compute), lengths, c0.to(compute))
        return h.to(dtype), final.to(dtype)

    def run_kernel(matrices: Tensor, offsets: Tensor, lengths: Tensor, c0: Tensor) -> tuple[Tensor, Tensor]:
        if offsets.dim() != 3:
            raise CompileError(f"dense_recurrence: offsets must be (B, T, d); got shape {tuple(offsets.shape)}")
        b, t, d = offsets.shape
        for name, x, shape in (("matrices", matrices, (b, t, d, d)), ("lengths", lengths, (b,)), ("c0", c0, (b, d))):
            if tuple(x.shape) != shape:
                raise CompileError(f"dense_recurrence: {name} must have shape {shape}; got {tuple(x.shape)}")
        if (
            offsets.dtype not in (torch.float32, torch.float64)
            or matrices.dtype != offsets.dtype
            or (c0.dtype != offsets.dtype)
        ):
            raise CompileError(
                f"dense_recurrence: matrices, offsets and c0 must share a dtype, float32 or float64; got "
                f"{matrices.dtype}, {offsets.dtype}, {c0.dtype}"
            )
        lengths = lengths.to(torch.int64)
        if torch.jit.is_tracing():
            from kleene.compile.module import refuse_torchscript

            refuse_torchscript("torch.jit.trace of a model with a dense recurrence")
        if onnx_exporting():  # no kernel exports to ONNX: the step as an ONNX Scan
            return dense_scan(matrices, offsets, lengths, c0, semiring)
        if backend != "cpp":
            interpreted = backend == "triton" and triton_interpreting() and offsets.device.type == "cpu"
            if not (offsets.is_cuda or interpreted):
                where = "CUDA tensors" + (" (or CPU tensors under TRITON_INTERPRET=1)" if backend == "triton" else "")
                raise CompileError(f"the {backend} backend runs on {where}; got {offsets.device}")
        h, final = op(matrices, offsets, lengths, c0)
        return h, final

    return run


def dense_step(
    storage: Semiring, matrix: Tensor, offset: Tensor, c: Tensor, running: Tensor
) -> tuple[Tensor, Tensor]:
    """One step of ``c_t = W_t ⊗ c_{t-1} ⊕ o_t`` in the storage algebra: ``matrix`` (B, d, d), ``offset`` and ``c``
    (B, d), ``running`` (B,) bool (the sequences still reading); returns (the new ``c``, the step's output: ``c`` where
    running, else 0). The torch loop and ``dense_scan`` share it."""
    new = storage.plus(storage.matmul(matrix, c[:, :, None])[:, :, 0], offset)
    c = torch.where(running[:, None], new, c)
    return c, torch.where(running[:, None], c, torch.zeros_like(c))


def dense_scan(
    matrices: Tensor, offsets: Tensor, lengths: Tensor, c0: Tensor, semiring: Semiring
) -> tuple[Tensor, Tensor]:
    """``dense_recurrence`` with its steps as torch's ``scan`` operator (one ``Semiring.matmul`` of the storage
    algebra per step): what ``torch.onnx.export`` writes as an ONNX ``Scan`` with dynamic batch and length.

    Caution: T >= 1; ``lengths`` int64 in 0..T."""
    from torch._higher_order_ops.scan import scan

    def body(c: Tensor, inputs: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        matrix, offset, step = inputs
        return dense_step(semiring.storage, matrix, offset, c, lengths > step)

    steps = torch.arange(offsets.shape[1], device=offsets.device)
    final, h = scan(body, c0.contiguous().clone(), (matrices.transpose(0, 1), offsets.transpose(0, 1), steps))
    return h.transpose(0, 1), final


def dense_recurrence(
    matrices: Tensor, offsets: Tensor, lengths: Tensor, c0: Tensor, semiring: Semiring, backend: str = "cpp"
) -> tuple[Tensor, Tensor]:
    """``(h, final c)`` of ``c_t = W_t ⊗ c_{t-1} ⊕ o_t`` in ``semiring``'s storage algebra (values as stored):
    ``matrices`` (B, T, d, d) row-major ``W[i, j]``, ``offsets`` (B, T, d), ``lengths`` (B,) integers in 0..T,
    ``c0`` (B, d); ``h`` (B, T, d) is ``c_t`` at the consumed steps and 0 past a sequence's length.
    Differentiable in ``matrices``, ``offsets`` and ``c0``. (Under ``torch.compile`` use ``dense_runner``.)

    Caution:
        ``lengths`` are trusted to lie in 0..T (the layers check them). float16/bfloat16 inputs run in float32
        and return in their (promoted) dtype.

    Raises:
        CompileError: an unknown backend, mismatched shapes, dtypes or devices, a semiring without kernels, or a
            backend that cannot run here (no compiler, no triton, no GPU).
    """
    return dense_runner(semiring, backend)(matrices, offsets, lengths, c0)


def prepare_dense(semiring: Semiring, backend: str) -> None:
    """Build (or load from the cache) the kernels ``backend`` runs for ``semiring``'s storage algebra.

    Raises:
        CompileError: an unknown backend, or one that cannot run here (no compiler, no triton, no GPU).
    """
    if backend == "cpp":
        load_dense_cpu(semiring)
    elif backend == "triton":
        if not (torch.cuda.is_available() or triton_interpreting()):
            raise CompileError("the triton backend needs a CUDA device (or TRITON_INTERPRET=1 for the CPU interpreter)")
        load_dense_triton(semiring)
    elif backend == "cuda":
        _cuda_extension(semiring)
    else:
        raise CompileError(f"the dense path has no {backend!r} backend; it has {', '.join(DENSE_BACKENDS)}")


def choose_dense_backend(semiring: Semiring, backend: str) -> str:
    """``backend`` for the dense path, its kernels built: "torch" (the caller's per-step reference) as is, a kernel
    backend checked, "auto" the first of ``kleene.compile.module.AUTO_ORDER`` that builds (one warning when it
    falls back), as ``kleene.compile.compile`` chooses.

    Raises:
        CompileError: a backend the dense path does not have, or one that cannot run here.
    """
    from kleene.compile.module import AUTO_ORDER

    if backend != "auto":
        if backend != "torch":
            prepare_dense(semiring, backend)
        return backend
    failures = []
    for name in AUTO_ORDER:
        if name == "torch":
            break
        if name not in DENSE_BACKENDS:
            continue
        try:
            prepare_dense(semiring, name)
        except Exception as exc:  # noqa: BLE001 - any failure to build means: try the next backend
            failures.append(f"{name}: {exc}")
            continue
        return name
    if failures:
        message = f"kleene dense path: using the torch backend ({'; '.join(failures)})"
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    return "torch"


def dense_triton_ptx(
    semiring: Semiring, dtype: torch.dtype = torch.float32, capability: int = 80, block: int = 64
) -> dict[str, str]:
    """Compile the dense path's Triton kernels ahead of time for ``sm_<capability>`` at ``BLOCK = block`` (d up to
    ``block``): {kernel name: PTX text}. Needs no GPU (Triton's compiler and ptxas run on the host).

    Raises:
        CompileError: triton is missing, the dtype is not float32/float64, or the kernels are currently loaded in
            interpreter mode (unset ``TRITON_INTERPRET``).
    """
    types = {torch.float32: "*fp32", torch.float64: "*fp64"}
    if dtype not in types:
        raise CompileError(f"triton kernels are compiled for float32 or float64, not {dtype}")
    if triton_interpreting():
        raise CompileError("ahead-of-time compilation needs TRITON_INTERPRET unset (it is set)")
    module = load_dense_triton(semiring)
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    pointer = types[dtype]
    constexprs = {
        "kleene_dense_forward": {"BLOCK": block},
        "kleene_dense_backward": {"BLOCK": block, "SELECT": selects(semiring)},
    }
    out = {}
    for name, flags in constexprs.items():
        fn = getattr(module, name)
        scalars = {"lengths": "*i64", "Tn": "i32", "D": "i32"}
        signature = {arg: "constexpr" if arg in flags else scalars.get(arg, pointer) for arg in fn.arg_names}
        compiled = triton.compile(
            ASTSource(fn, signature, flags),
            target=GPUTarget("cuda", capability, 32),
            options={"enable_fp_fusion": True},
        )
        out[name] = compiled.asm["ptx"]
    return out
