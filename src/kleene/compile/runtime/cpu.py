"""Kernel runtime: build generated C++ once, cache it on disk, and expose it as torch custom ops.

Generated sources are plain C++ with an ``extern "C"`` interface (no torch headers), compiled
with the system compiler (``$CXX``, default ``g++``) into a shared library and called through
ctypes. That keeps a first build around a second instead of the ~20 s a ``torch/extension.h``
build costs here, and the cached kernels do not depend on torch's C++ ABI, so a torch upgrade
cannot break them. The cache lives in ``$KLEENE_CACHE`` (default ``~/.cache/kleene``), keyed by
a hash of the source, the compiler, its flags, and the CPU; each library is compiled in a
private temporary file and renamed into place atomically, so concurrent builds are safe.

Each plan becomes two ``torch.library`` custom ops (``kleene::fwd_<key>``, ``kleene::bwd_<key>``)
with fake (meta) implementations and autograd registered, so ``torch.library.opcheck`` passes
and compiled modules work under ``torch.compile``. In eager mode the runner calls the same kernel
functions through a plain ``torch.autograd.Function`` (the dispatcher costs tens of microseconds a call).

For its backward the forward saves checkpoints (the backward recomputes the states between them) or,
where the plan's kernels store states (``stores_states``) and they fit ``Options.state_budget``, every
state (``backward_strategy``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kleene.compile.codegen.cpp import checkpoint_chunk, generate_cpp, stores_states
from kleene.compile.template import Plan
from kleene.errors import CompileError

Tensor = torch.Tensor

CXX_FLAGS: tuple[str, ...] = (
    "-O3",
    "-march=native",
    "-fopenmp-simd",
    "-pthread",
    "-fPIC",
    "-shared",
    "-std=c++17",
    "-fno-math-errno",
)


def cache_dir() -> Path:
    """Where built kernels live: ``$KLEENE_CACHE`` or ``~/.cache/kleene``."""
    root = os.environ.get("KLEENE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "kleene")
    return Path(root) / "kernels"


def compiler() -> str:
    """The C++ compiler to use.

    Raises:
        CompileError: no compiler is found.
    """
    name = os.environ.get("CXX", "g++")
    path = shutil.which(name)
    if path is None:
        raise CompileError(f"no C++ compiler: {name!r} is not on PATH (set $CXX or install g++)")
    return path


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith(("model name", "flags")):
                    return line.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _compiler_version(cxx: str) -> str:
    result = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return result.stdout.splitlines()[0] if result.stdout else cxx


def source_key(source: str, cxx: str) -> str:
    """The cache key of a source: hash of source, compiler, flags and CPU."""
    material = "\n".join([source, _compiler_version(cxx), " ".join(CXX_FLAGS), _cpu_model(), platform.machine()])
    return hashlib.sha256(material.encode()).hexdigest()[:24]


def build(source: str) -> tuple[Path, bool]:
    """Compile ``source`` into the cache (if not there yet); returns (library path, whether it was built).

    Raises:
        CompileError: the compiler failed (its output is in the message).
    """
    cxx = compiler()
    key = source_key(source, cxx)
    directory = cache_dir()
    library = directory / f"kleene_{key}.so"
    if library.exists():
        return library, False
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as tmp:
        src = Path(tmp) / "kernel.cpp"
        src.write_text(source, encoding="utf-8")
        out = Path(tmp) / "kernel.so"
        result = subprocess.run(
            [cxx, *CXX_FLAGS, str(src), "-o", str(out)], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise CompileError(f"{cxx} failed on a generated kernel:\n{result.stderr[-4000:]}")
        os.replace(src, directory / f"kleene_{key}.cpp")
        os.replace(out, library)
    return library, True


def build_many(sources: Sequence[str]) -> list[Path]:
    """``build`` every one of ``sources``, those not cached yet concurrently (one compiler process per core), and
    return their library paths in order: several kernels a model needs build in about 1/cores of the time.

    Raises:
        CompileError: the compiler failed on one of them.
    """
    unique = list(dict.fromkeys(sources))
    workers = min(len(unique), os.cpu_count() or 1)
    if workers <= 1:
        return [build(source)[0] for source in sources]
    with ThreadPoolExecutor(workers) as pool:
        paths = dict(zip(unique, pool.map(lambda source: build(source)[0], unique)))
    return [paths[source] for source in sources]


@dataclass
class NativeKernel:
    """A loaded shared library and its forward/backward entry points per dtype (ctypes functions)."""

    library: Any
    forward: dict[torch.dtype, Any]
    backward: dict[torch.dtype, Any]


_LOADED: dict[str, NativeKernel] = {}
_OPS: dict[str, tuple[Any, Any]] = {}


def load_native(
    source: str, prefix: str, forward_args: list[Any], backward_args: list[Any]
) -> tuple[str, NativeKernel]:
    """Build (or fetch from the cache) and load generated C++ ``source`` exporting ``{prefix}_forward_f32|f64`` and
    ``{prefix}_backward_f32|f64`` with the ctypes argument types given; returns (key, kernel), loaded once per
    process and source."""
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    if key not in _LOADED:
        path, _ = build(source)
        lib = ctypes.CDLL(str(path))
        forward: dict[torch.dtype, Any] = {}
        backward: dict[torch.dtype, Any] = {}
        for dtype, suffix in ((torch.float32, "f32"), (torch.float64, "f64")):
            for table, kind, argtypes in ((forward, "forward", forward_args), (backward, "backward", backward_args)):
                entry = getattr(lib, f"{prefix}_{kind}_{suffix}")
                entry.argtypes, entry.restype = argtypes, None
                table[dtype] = entry
        _LOADED[key] = NativeKernel(lib, forward, backward)
    return key, _LOADED[key]


def load_kernel(plan: Plan) -> tuple[str, NativeKernel]:
    """Build (or fetch from the cache) and load ``plan``'s kernel; returns (key, kernel)."""
    ptr, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    forward = [ptr] * 8 + [i64] * 4 + [c_int]
    backward = [ptr] * 9 + [i64] * 3 + [ptr] * 4 + [i64] * 4 + [c_int]
    return load_native(generate_cpp(plan), "kleene", forward, backward)


def _ptr(t: Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _output_shape(plan: Plan, b: int, t: int, d: int) -> tuple[int, ...]:
    return (b, t, d) if plan.options.output == "steps" else (b, d)


#: What the forward saves for the backward: nothing (no gradient needed), checkpoints (the state every
#: ``checkpoint_chunk`` steps; the backward recomputes the rest), or every state.
SAVE_NOTHING, SAVE_CHECKPOINTS, SAVE_STATES = 0, 1, 2


def state_bytes(plan: Plan, batch: int, steps: int, dim: int, itemsize: int) -> int:
    """Bytes of every forward state (B, T, Q, D): what storing the states for the backward costs."""
    return batch * steps * plan.num_states * dim * itemsize


def backward_strategy(plan: Plan, batch: int, steps: int, dim: int, itemsize: int) -> int:
    """``SAVE_STATES`` when the plan's kernels store states (``kleene.compile.codegen.cpp.stores_states``) and
    every state fits ``plan.options.state_budget`` bytes, else ``SAVE_CHECKPOINTS``."""
    fits = state_bytes(plan, batch, steps, dim, itemsize) <= plan.options.state_budget
    return SAVE_STATES if fits and stores_states(plan) else SAVE_CHECKPOINTS


def _saved_shape(plan: Plan, slots: Tensor, save: int) -> tuple[int, ...]:
    """The shape of what the forward saves: (B, T, Q, D) states, (B, chunks, Q, D) checkpoints, or (0,)."""
    b, t, _, d = slots.shape
    if save == SAVE_STATES:
        return (b, t, plan.num_states, d)
    if save == SAVE_CHECKPOINTS:
        chunk = checkpoint_chunk(plan, slots.element_size())
        return (b, (t + chunk - 1) // chunk, plan.num_states, d)
    return (0,)


def _check_cpu(*tensors: Tensor | None) -> None:
    for x in tensors:
        if x is not None and x.device.type != "cpu":
            raise CompileError(f"the cpp backend runs on CPU tensors; got one on {x.device}")


def _rows_or_broadcast(grad: Tensor) -> Tensor:
    """``grad`` itself when its last axis is contiguous or broadcast (stride 0), else a contiguous copy."""
    return grad if grad.stride(-1) in (0, 1) or grad.shape[-1] <= 1 else grad.contiguous()


def _run_forward(
    plan: Plan, kernel: NativeKernel, slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, save: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Call the forward kernel: (output, final state, what ``save`` asks for (see ``_saved_shape``)).

    Raises:
        CompileError: ``SAVE_STATES`` for a plan whose kernels do not store states (``stores_states``).
    """
    _check_cpu(slots, params, lengths, h0)
    if save == SAVE_STATES and not stores_states(plan):
        raise CompileError(f"the kernels of {plan.template.name} recompute their states; they cannot store them")
    slots, params, lengths = slots.contiguous(), params.contiguous(), lengths.contiguous()
    h0 = None if h0 is None else h0.contiguous()
    b, t, _, d = slots.shape
    out = slots.new_empty(_output_shape(plan, b, t, d))
    final = slots.new_empty((b, plan.num_states, d))
    saved = slots.new_empty(_saved_shape(plan, slots, save))
    kernel.forward[slots.dtype](
        _ptr(slots),
        _ptr(params),
        _ptr(lengths),
        _ptr(h0),
        _ptr(out),
        _ptr(final),
        _ptr(saved) if save == SAVE_CHECKPOINTS else None,
        _ptr(saved) if save == SAVE_STATES else None,
        b,
        t,
        d,
        checkpoint_chunk(plan, slots.element_size()),
        torch.get_num_threads(),
    )
    return out, final, saved


def _run_backward(
    plan: Plan,
    kernel: NativeKernel,
    slots: Tensor,
    params: Tensor,
    lengths: Tensor,
    h0: Tensor | None,
    saved: Tensor,
    stored: bool,
    final: Tensor,
    out: Tensor,
    grad_out: Tensor,
    grad_final: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """Call the backward kernel on what the forward saved (every state if ``stored``, else checkpoints):
    (grad slots, grad params summed over the batch, grad h0).

    Raises:
        CompileError: states or checkpoints that the forward did not save (it ran without gradients).
    """
    _check_cpu(slots, params, lengths, h0, saved, final, out, grad_out, grad_final)
    b, t, _, d = slots.shape
    save = SAVE_STATES if stored else SAVE_CHECKPOINTS
    if tuple(saved.shape) != _saved_shape(plan, slots, save):
        raise CompileError(
            "backward through a kleene kernel whose forward ran without saving its states or checkpoints "
            "(call it with gradients enabled)"
        )
    args = [x.contiguous() for x in (slots, params, lengths, saved, final, out, grad_final)]
    slots, params, lengths, saved, final, out, grad_final = args
    grad_out = _rows_or_broadcast(grad_out)
    h0 = None if h0 is None else h0.contiguous()
    grad_slots = torch.empty_like(slots)
    grad_params = slots.new_empty((b, plan.num_params, d))
    grad_h0 = slots.new_empty((b, plan.num_states, d))
    strides = grad_out.stride()
    kernel.backward[slots.dtype](
        _ptr(slots),
        _ptr(params),
        _ptr(lengths),
        _ptr(h0),
        None if stored else _ptr(saved),
        _ptr(saved) if stored else None,
        _ptr(final),
        _ptr(out),
        _ptr(grad_out),
        strides[0],
        strides[1] if grad_out.dim() == 3 else 0,
        strides[-1] if grad_out.shape[-1] > 1 else 1,
        _ptr(grad_final),
        _ptr(grad_slots),
        _ptr(grad_params),
        _ptr(grad_h0),
        b,
        t,
        d,
        checkpoint_chunk(plan, slots.element_size()),
        torch.get_num_threads(),
    )
    return grad_slots, grad_params.sum(0), grad_h0


def custom_ops(plan: Plan) -> tuple[Any, Any]:
    """The (forward, backward) custom ops of ``plan``, registering them on first use.

    The forward returns (output, final state, saved) where ``save`` says what ``saved`` holds: nothing
    (``SAVE_NOTHING``, an empty tensor), checkpoints or every state (see ``kleene.compile.codegen.cpp``).
    """
    key, kernel = load_kernel(plan)
    if key in _OPS:
        return _OPS[key]
    q, k = plan.num_states, plan.num_params
    fwd_name, bwd_name = f"kleene::fwd_{key}", f"kleene::bwd_{key}"

    @torch.library.custom_op(fwd_name, mutates_args=())
    def forward(
        slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, save: int
    ) -> tuple[Tensor, Tensor, Tensor]:
        return _run_forward(plan, kernel, slots, params, lengths, h0, save)

    @forward.register_fake
    def _(slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, save: int) -> Any:
        b, t, _, d = slots.shape
        return (
            slots.new_empty(_output_shape(plan, b, t, d)),
            slots.new_empty((b, q, d)),
            slots.new_empty(_saved_shape(plan, slots, save)),
        )

    @torch.library.custom_op(bwd_name, mutates_args=())
    def backward(
        slots: Tensor,
        params: Tensor,
        lengths: Tensor,
        h0: Tensor | None,
        saved: Tensor,
        stored: bool,
        final: Tensor,
        out: Tensor,
        grad_out: Tensor,
        grad_final: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        return _run_backward(plan, kernel, slots, params, lengths, h0, saved, stored, final, out, grad_out, grad_final)

    @backward.register_fake
    def _(
        slots: Tensor,
        params: Tensor,
        lengths: Tensor,
        h0: Tensor | None,
        saved: Tensor,
        stored: bool,
        final: Tensor,
        out: Tensor,
        grad_out: Tensor,
        grad_final: Tensor,
    ) -> Any:
        b, _, _, d = slots.shape
        return torch.empty_like(slots), slots.new_empty((k, d)), slots.new_empty((b, q, d))

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, ...]) -> None:
        slots, params, lengths, h0, save = inputs
        out, final, saved = output
        ctx.has_h0, ctx.stored = h0 is not None, save == SAVE_STATES
        saved_h0 = h0 if h0 is not None else slots.new_empty(0)
        ctx.save_for_backward(slots, params, lengths, saved_h0, saved, final, out)

    def grad_fn(ctx: Any, grad_out: Tensor | None, grad_final: Tensor | None, _: Any) -> tuple[Any, ...]:
        slots, params, lengths, h0, saved, final, out = ctx.saved_tensors
        grad_out = torch.zeros_like(out) if grad_out is None else grad_out
        grad_final = torch.zeros_like(final) if grad_final is None else grad_final
        g_slots, g_params, g_h0 = backward(
            slots, params, lengths, h0 if ctx.has_h0 else None, saved, ctx.stored, final, out, grad_out, grad_final
        )
        return g_slots, g_params, None, g_h0 if ctx.has_h0 else None, None

    forward.register_autograd(grad_fn, setup_context=setup_context)
    _OPS[key] = (forward, backward)
    return _OPS[key]


class _Eager(torch.autograd.Function):
    """The kernels under eager autograd: the same calls as the custom ops without the dispatcher's per-call
    cost (tens of microseconds); ``torch.compile`` traces the custom ops instead."""

    @staticmethod
    def forward(
        ctx: Any, plan: Plan, kernel: NativeKernel, slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        b, t, _, d = slots.shape
        save = backward_strategy(plan, b, t, d, slots.element_size())
        out, final, saved = _run_forward(plan, kernel, slots, params, lengths, h0, save)
        ctx.plan, ctx.kernel, ctx.has_h0, ctx.stored = plan, kernel, h0 is not None, save == SAVE_STATES
        saved_h0 = h0 if h0 is not None else slots.new_empty(0)
        ctx.save_for_backward(slots, params, lengths, saved_h0, saved, final, out)
        return out, final

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_out: Tensor, grad_final: Tensor) -> tuple[Any, ...]:
        slots, params, lengths, h0, saved, final, out = ctx.saved_tensors
        g_slots, g_params, g_h0 = _run_backward(
            ctx.plan,
            ctx.kernel,
            slots,
            params,
            lengths,
            h0 if ctx.has_h0 else None,
            saved,
            ctx.stored,
            final,
            out,
            grad_out,
            grad_final,
        )
        return None, None, g_slots, g_params, None, g_h0 if ctx.has_h0 else None


def cpp_runner(plan: Plan) -> Any:
    """A runner (see ``kleene.compile.module``) calling ``plan``'s generated C++ kernel (through its custom ops
    under ``torch.compile``, directly otherwise)."""
    forward, _ = custom_ops(plan)
    _, kernel = load_kernel(plan)

    def run(plan_: Plan, slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
        need = torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (slots, params, h0))
        if torch.compiler.is_compiling():
            b, t, _, d = slots.shape
            save = backward_strategy(plan, b, t, d, slots.element_size()) if need else SAVE_NOTHING
            out, final, _ = forward(slots, params, lengths, h0, save)
            return out, final
        if need:
            out, final = _Eager.apply(plan, kernel, slots, params, lengths, h0)
            return out, final
        out, final, _ = _run_forward(plan, kernel, slots, params, lengths, h0, SAVE_NOTHING)
        return out, final

    return run
