"""Kernel runtime: build generated C++ once, cache it on disk, and expose it as torch custom ops.

Generated sources are plain C++ with an ``extern "C"`` interface (no torch headers), compiled
with the system compiler (``$CXX``, default ``g++``) into a shared library and called through
ctypes. That keeps a first build around a second instead of the ~20 s a ``torch/extension.h``
build costs here, and the cached kernels do not depend on torch's C++ ABI, so a torch upgrade
cannot break them. The cache lives in ``$KLEENE_CACHE`` (default ``~/.cache/kleene``), keyed by
a hash of the source, the compiler, its flags, and the CPU; each library is compiled in a
private temporary file and renamed into place atomically, so concurrent builds are safe. Every kernel links
one small library built once per cache, the thread pool it runs its tasks on (``pool_library``).

Nothing is compiled until it runs: a source's entry points (forward, backward; float32, float64) are built when
first called, into a library of those a call needs (``NativeKernel``); a forward in one dtype compiles in a fifth to
a third of the time of all four. A model about to run several kernels builds them concurrently first (``build_many``).

Each plan's kernels are one ``kleene.compile.runtime.op.NativeOp`` (``kleene::fwd_<key>``, ``kleene::bwd_<key>``):
custom ops with fake implementations and autograd under ``torch.compile``, a plain autograd function in eager mode.

For its backward the forward saves checkpoints (the backward recomputes the states between them) or,
where the plan's kernels store states (``op.stores_states``) and they fit ``Options.state_budget``, every
state (``backward_strategy``, the policy of ``op.save_mode``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from kleene.compile.codegen.cpp import LANES, POOL_SOURCE, generate_cpp
from kleene.compile.codegen.entries import (
    ENTRY_KINDS,
    STORED_KINDS,
    direction,
    entry_defines,
    entry_name,
    mode_kinds,
)
from kleene.compile.runtime.op import (
    SAVE_CHECKPOINTS,
    SAVE_NOTHING,
    SAVE_STATES,
    NativeOp,
    checkpoint_steps,
    save_mode,
    stores_states,
)
from kleene.compile.template import Plan
from kleene.errors import CompileError

Tensor = torch.Tensor

#: -O3, not -O2: measured on an AMD EPYC (1 thread, CPU time, B/C/F at (32, 256, 512), the builds' libraries
#: alternated in one process per round, 2026-11-27, ``benchmarks/kernel_ab.py``), -O2 builds a kernel in 11-19% less
#: compiler time (with or without -fvect-cost-model=dynamic) but its forward is 1-3% slower (forward+backward 0-6%
#: faster); BENCHMARKS.md, "Recurrence kernels".
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


@functools.cache
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith(("model name", "flags")):
                    return line.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def _compiler_version(cxx: str) -> str:
    result = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return result.stdout.splitlines()[0] if result.stdout else cxx


def source_key(source: str, cxx: str) -> str:
    """The cache key of a source: hash of source, the thread pool's source it links (``POOL_SOURCE``), compiler,
    flags and CPU."""
    material = [source, POOL_SOURCE, _compiler_version(cxx), " ".join(CXX_FLAGS), _cpu_model(), platform.machine()]
    return hashlib.sha256("\n".join(material).encode()).hexdigest()[:24]


def _compile(cxx: str, source: str, library: Path, options: Sequence[str]) -> None:
    """Compile ``source`` with ``CXX_FLAGS`` and ``options`` into ``library`` (and keep the source beside it): in a
    private temporary directory, renamed into place, so that concurrent builds of one source are safe.

    Raises:
        CompileError: the compiler failed (its output is in the message).
    """
    directory = library.parent
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as tmp:
        src = Path(tmp) / "kernel.cpp"
        src.write_text(source, encoding="utf-8")
        out = Path(tmp) / "kernel.so"
        result = subprocess.run(
            [cxx, *CXX_FLAGS, str(src), "-o", str(out), *options], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise CompileError(f"{cxx} failed on a generated kernel:\n{result.stderr[-4000:]}")
        os.replace(src, library.with_suffix(".cpp"))
        os.replace(out, library)


def pool_library() -> Path:
    """The thread pool's library (``POOL_SOURCE``) in the cache, built if not there yet: every kernel links it
    (found beside the kernel, in the same directory).

    Raises:
        CompileError: no compiler, or it failed.
    """
    cxx = compiler()
    library = cache_dir() / f"kleene_pool_{source_key(POOL_SOURCE, cxx)}.so"
    if not library.exists():
        _compile(cxx, POOL_SOURCE, library, [f"-Wl,-soname,{library.name}"])
    return library


def library_path(source: str, entries: tuple[str, ...] | None = None) -> Path:
    """Where ``build(source, entries)`` puts its library: ``kleene_<key>.so``, or ``kleene_<key>_<entries>.so``
    for a library of some entry points (``codegen.entries.entry_name``s, e.g. ``forward_f64``).

    Raises:
        CompileError: no compiler.
    """
    tag = "" if entries is None else "_" + "_".join(entries)
    return cache_dir() / f"kleene_{source_key(source, compiler())}{tag}.so"


def build(source: str, entries: tuple[str, ...] | None = None) -> tuple[Path, bool]:
    """Compile ``source`` into the cache (if not there yet), linked to the thread pool's library
    (``pool_library``); returns (library path, whether it was built). ``entries``: the entry points to keep
    (``codegen.entries.entry_name``s, compiled with ``entry_defines``), None: all of them.

    Raises:
        CompileError: no compiler, or it failed (its output is in the message).
    """
    library = library_path(source, entries)
    if library.exists():
        return library, False
    pool = pool_library()
    defines = [] if entries is None else entry_defines(entries)
    _compile(compiler(), source, library, [*defines, str(pool), "-Wl,-rpath,$ORIGIN"])
    return library, True


#: A library to build: (source, the entry points it keeps, or None for every one).
Request = tuple[str, "tuple[str, ...] | None"]


def build_many(requests: Sequence[Request]) -> list[Path]:
    """``build`` every one of ``requests`` ((source, entries) pairs), those not cached yet concurrently (one compiler
    process per core), and return their library paths in order: several kernels a model needs build in about
    1/cores of the time.

    Raises:
        CompileError: no compiler, or it failed on one of them.
    """
    unique = list(dict.fromkeys(requests))
    pool_library()  # once, before the concurrent builds that link it
    workers = min(len(unique), os.cpu_count() or 1)
    if workers <= 1:
        return [build(*request)[0] for request in requests]
    with ThreadPoolExecutor(workers) as pool:
        paths = dict(zip(unique, pool.map(lambda request: build(*request)[0], unique)))
    return [paths[request] for request in requests]


#: The dtype suffix of each dtype a CPU kernel runs in (``codegen.entries.ENTRY_DTYPES``).
DTYPE_SUFFIXES = {torch.float32: "f32", torch.float64: "f64"}


def entry_suffix(dtype: torch.dtype) -> str:
    """The entry-point suffix of ``dtype`` (``DTYPE_SUFFIXES``).

    Raises:
        CompileError: a dtype the CPU kernels are not written for.
    """
    if dtype not in DTYPE_SUFFIXES:
        raise CompileError(f"the CPU kernels run in float32 or float64; got values of dtype {dtype}")
    return DTYPE_SUFFIXES[dtype]


class NativeKernel:
    """A generated C++ ``source`` exporting ``{prefix}_{direction}_{suffix}`` (``codegen.entries``) whose entry
    points are built and loaded on first use: ``forward(dtype, backward, stored)`` and ``backward(dtype, stored)``
    return the ctypes function, from a library of the entry points that call needs (the source compiled with
    ``entry_defines``): a forward in float64 compiles one instantiation of four (of eight for ``kinds`` =
    ``STORED_KINDS``: each direction's stored-states variant is a kind of its own), and a forward followed by a
    backward (``backward=True``) compiles the two in one library. ``requests(dtype, kinds)`` are the builds those
    entry points need, for ``build_many``.

    Caution: constructing one builds nothing; a compiler failure is a ``CompileError`` at the first call of the
    entry point, naming the kernel (``prefix``) and the entry point.
    """

    def __init__(
        self,
        source: str,
        prefix: str,
        forward_args: list[Any],
        backward_args: list[Any],
        kinds: tuple[str, ...] = ENTRY_KINDS,
    ):
        self.source, self.prefix, self.kinds = source, prefix, kinds
        self._argtypes = {"forward": forward_args, "backward": backward_args}
        self._entries: dict[str, Any] = {}  # by entry name (``entry_name``)
        self._libraries: list[Any] = []  # the loaded libraries (kept alive with their functions)

    def requests(self, dtype: torch.dtype, kinds: Sequence[str] = ENTRY_KINDS) -> list[Request]:
        """The build of the ``kinds`` entry points for ``dtype``, in one library (for ``build_many``)."""
        suffix = entry_suffix(dtype)
        return [(self.source, tuple(entry_name(kind, suffix) for kind in self.kinds if kind in kinds))]

    def entries(self, dtype: torch.dtype, kinds: Sequence[str]) -> list[Any]:
        """The ``kinds`` entry points for ``dtype``; those not loaded yet are built (or found in the cache) in one
        library and loaded, or loaded from a library of every kind in the cache (``requests``).

        Raises:
            CompileError: a dtype other than float32 and float64, a kind this kernel has not, no compiler, or the
                compiler failed.
        """
        suffix = entry_suffix(dtype)
        unknown = [kind for kind in kinds if kind not in self.kinds]
        if unknown:
            raise CompileError(f"kernel {self.prefix}: no entry point of the kinds {unknown}; it has {self.kinds}")
        missing = tuple(entry_name(kind, suffix) for kind in self.kinds if kind in kinds)
        missing = tuple(name for name in missing if name not in self._entries)
        if missing:
            every = tuple(entry_name(kind, suffix) for kind in self.kinds)
            names = every if library_path(self.source, every).exists() else missing
            try:
                path, _ = build(self.source, names)
            except CompileError as exc:
                wanted = ", ".join(f"{self.prefix}_{name}" for name in missing)
                raise CompileError(f"building kernel {wanted}: {exc}") from exc
            library = ctypes.CDLL(str(path))
            self._libraries.append(library)
            for kind in self.kinds:
                name = entry_name(kind, suffix)
                if name in names and name not in self._entries:
                    function = getattr(library, f"{self.prefix}_{entry_name(direction(kind), suffix)}")
                    function.argtypes, function.restype = self._argtypes[direction(kind)], None
                    self._entries[name] = function
        return [self._entries[entry_name(kind, suffix)] for kind in kinds]

    def forward(self, dtype: torch.dtype, backward: bool = False, stored_states: bool = False) -> Any:
        """The forward entry point for ``dtype`` (``entries``), the stored-states variant if ``stored_states``;
        ``backward``: a backward will follow (its entry point, of the same variant, is built with the forward's, in
        one library, if neither is loaded yet)."""
        kinds = mode_kinds(stored_states)
        both = backward and entry_name(kinds[1], entry_suffix(dtype)) not in self._entries
        return self.entries(dtype, kinds if both else kinds[:1])[0]

    def backward(self, dtype: torch.dtype, stored_states: bool = False) -> Any:
        """The backward entry point for ``dtype`` (``entries``), the stored-states variant if ``stored_states``."""
        return self.entries(dtype, mode_kinds(stored_states)[1:])[0]


_LOADED: dict[str, NativeKernel] = {}


def load_native(
    source: str, prefix: str, forward_args: list[Any], backward_args: list[Any], kinds: tuple[str, ...] = ENTRY_KINDS
) -> tuple[str, NativeKernel]:
    """Generated C++ ``source`` exporting ``{prefix}_forward_f32|f64`` and ``{prefix}_backward_f32|f64`` with the
    ctypes argument types given, as a ``NativeKernel`` of ``kinds`` (one per process and source; its entry points
    build on first call); returns (key, kernel).

    Raises:
        CompileError: no C++ compiler (found now, so that ``backend="auto"`` falls back at construction).
    """
    compiler()
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    if key not in _LOADED:
        _LOADED[key] = NativeKernel(source, prefix, forward_args, backward_args, kinds)
    return key, _LOADED[key]


def cpp_source(plan: Plan) -> str:
    """The C++ source of ``plan``'s kernels, with the stored-states mode where the policy asks for it
    (``op.stores_states``)."""
    return generate_cpp(plan, store_states=stores_states(plan))


def load_kernel(plan: Plan) -> tuple[str, NativeKernel]:
    """Build (or fetch from the cache) and load ``plan``'s kernel; returns (key, kernel)."""
    ptr, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    forward = [ptr] * 8 + [i64] * 4 + [c_int]
    backward = [ptr] * 9 + [i64] * 3 + [ptr] * 4 + [i64] * 4 + [c_int]
    kinds = STORED_KINDS if stores_states(plan) else ENTRY_KINDS
    return load_native(cpp_source(plan), "kleene", forward, backward, kinds)


def _ptr(t: Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _output_shape(plan: Plan, b: int, t: int, d: int) -> tuple[int, ...]:
    return (b, t, d) if plan.options.output == "steps" else (b, d)


def checkpoint_chunk(plan: Plan, itemsize: int) -> int:
    """Steps between checkpoints of ``plan``'s kernels: ``checkpoint_steps`` of a chunk's slots and states
    (``LANES`` wide)."""
    return checkpoint_steps((plan.num_states + plan.num_slots) * LANES, itemsize)


def state_bytes(plan: Plan, batch: int, steps: int, dim: int, itemsize: int) -> int:
    """Bytes of every forward state (B, T, Q, D): what storing the states for the backward costs."""
    return batch * steps * plan.num_states * dim * itemsize


def backward_strategy(plan: Plan, batch: int, steps: int, dim: int, itemsize: int) -> int:
    """``SAVE_STATES`` when the plan's kernels store states (``op.stores_states``) and every state fits
    ``plan.options.state_budget`` bytes, else ``SAVE_CHECKPOINTS`` (``op.save_mode``)."""
    size = state_bytes(plan, batch, steps, dim, itemsize)
    return save_mode(stores_states(plan), True, size, plan.options.state_budget)


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
    kernel.forward(slots.dtype, save != SAVE_NOTHING, save == SAVE_STATES)(
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
    kernel.backward(slots.dtype, stored)(
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


def cpp_op(plan: Plan) -> NativeOp:
    """``plan``'s kernels as one op: ``op(slots, params, lengths, h0) -> (output, final state)``; its custom ops
    ``op.custom_forward(slots, params, lengths, h0, save) -> (output, final state, saved)`` (``saved``: what
    ``save`` asks for, see ``_saved_shape``) and ``op.custom_backward``."""
    key, kernel = load_kernel(plan)
    q = plan.num_states

    def forward(inputs: tuple[Any, ...], save: int) -> tuple[Tensor, Tensor, Tensor]:
        slots, params, lengths, h0 = inputs
        return _run_forward(plan, kernel, slots, params, lengths, h0, save)

    def backward(inputs: tuple[Any, ...], save: int, outputs: tuple[Tensor, ...], grads: tuple[Tensor, ...]) -> Any:
        (slots, params, lengths, h0), (out, final, saved), (grad_out, grad_final) = inputs, outputs, grads
        stored = save == SAVE_STATES
        return _run_backward(plan, kernel, slots, params, lengths, h0, saved, stored, final, out, grad_out, grad_final)

    def shapes(inputs: tuple[Any, ...], save: int) -> list[tuple[Any, ...]]:
        b, t, _, d = inputs[0].shape
        return [_output_shape(plan, b, t, d), (b, q, d), _saved_shape(plan, inputs[0], save)]

    def saving(inputs: tuple[Any, ...]) -> int:
        b, t, _, d = inputs[0].shape
        return backward_strategy(plan, b, t, d, inputs[0].element_size())

    inputs, differentiable = ("slots", "params", "lengths", "h0?"), ("slots", "params", "h0")
    return NativeOp("", key, inputs, differentiable, 3, 2, forward, backward, shapes, saving)


def cpp_runner(plan: Plan) -> Any:
    """A runner (see ``kleene.compile.module``) calling ``plan``'s generated C++ kernel (``cpp_op``: through its
    custom ops under ``torch.compile``, directly otherwise)."""
    op = cpp_op(plan)

    def run(plan_: Plan, slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None) -> tuple[Tensor, Tensor]:
        out, final = op(slots, params, lengths, h0)
        return out, final

    return run
