"""Two or more kernel builds, alternated: ``python benchmarks/kernel_ab.py VARIANT VARIANT ... [--rounds N]``.

A variant is ``NAME=SRC`` or ``NAME=SRC:FLAG``: ``SRC`` a checkout's ``src`` folder (an old commit's, e.g.
``git archive a9826c4 src | tar -x -C /tmp/old``), ``FLAG`` an optimisation level (``-O2``; further flags may follow,
comma-separated) put in place of the one in the kernel compiler's flags (``kleene.compile.runtime.cpu.CXX_FLAGS``).
Every variant builds the C++ kernels of ``kleene.bench``'s B, C and F templates (real semiring, D = 512) with its own
code, in a child process with ``SRC`` on ``PYTHONPATH`` and a kernel cache of its own (``--cache``/NAME), so two
checkouts' kernels never collide.

Timing, on one thread, in the calling thread's CPU time (``time.thread_time``), at (32, 256, 512):

- ``--mode libraries`` (default): each round is one process that loads every variant's libraries and calls their
  entry points (``kleene_forward_f32``, ``kleene_backward_f32``: the forward saving nothing; the forward saving
  checkpoints, then the backward from them) on the same tensors through the first variant's
  ``runtime.cpu._run_forward``/``_run_backward`` (the variants must share that C interface, as every commit since
  a9826c4 does), checks that they agree bit for bit, and times them one after the other (the order rotating over
  rounds), the minimum of ``--reps`` calls per row. The tensors and the process serve every variant alike; buffers
  the kernels allocate themselves (the backward's per-thread buffer) land where they land, which is why the rounds
  are separate processes.
- ``--mode processes``: each round runs a child process per variant (order rotating) timing the compiled module
  through its wrapper and autograd (forward under ``no_grad``; forward+backward: the gradient of the output's sum),
  as ``kleene bench --cpu-time`` does, for B, C, F and ``kleene.bench``'s SoPa bank.

The table gives each variant's median over the rounds, the median over rounds of its ratio to the first variant in
the same round, in how many rounds it was the faster, and the range over rounds. ``--compile`` also times g++ on
F's generated source with each variant's flags, alternated the same way (the compiler's CPU seconds). ``--code``
first compares the machine code of the libraries' task bodies (``objdump -d``, addresses blanked) with the first
variant's (``--rounds 0`` for that alone). Example (the
measurements of BENCHMARKS.md, "Recurrence kernels")::

    mkdir -p /tmp/old && git archive a9826c4 src | tar -x -C /tmp/old
    python benchmarks/kernel_ab.py old=/tmp/old/src new=src new-O2=src:-O2 --rounds 16 --reps 8 --compile
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

NAMES = ("B", "C", "F")
SHAPE = (32, 256, 512)


def _use_flag(flag: str) -> None:
    """Put ``flag`` (an optimisation level, then any further flags, comma-separated) in place of the optimisation level
    in this process's kernel compiler flags."""
    import kleene.compile.runtime.cpu as cpu

    if flag:
        cpu.CXX_FLAGS = tuple(g for f in cpu.CXX_FLAGS for g in (flag.split(",") if f.startswith("-O") else [f]))


def _module(name: str) -> Any:
    import torch

    from kleene.bench import make_contender

    return make_contender(name, SHAPE, "cpp", torch.Generator().manual_seed(0))


def child_build(flag: str) -> None:
    """Build (or find in the cache) the kernels of B, C, F; print ``name<TAB>library path`` per template."""
    import kleene.compile.runtime.cpu as cpu

    _use_flag(flag)
    for name in NAMES:
        path, _ = cpu.build(cpu.cpp_source(_module(name).modules[0].plan))
        print(f"{name}\t{path}", flush=True)


def child_modules(flag: str, reps: int) -> None:
    """Time the compiled modules (forward; forward+backward); print ``row<TAB>ms`` per row."""
    from functools import partial

    import torch
    from cpu_time import cpu_ms

    from kleene.bench import _grad_of_sum, _no_grad, tune_malloc

    _use_flag(flag)
    tune_malloc()
    torch.set_num_threads(1)
    for name in (*NAMES, "SoPa"):
        contender = _module(name)
        leaves = [x.clone().requires_grad_() for x in contender.slots]
        rows = {
            "forward": _no_grad(partial(contender.kernel, contender.slots)),
            "forward+backward": _grad_of_sum(partial(contender.kernel, leaves), leaves + contender.parameters()),
        }
        for pass_name, fn in rows.items():
            print(f"{name} {pass_name}\t{cpu_ms(fn, reps):.4f}", flush=True)


def child_compile(flag: str) -> None:
    """Time g++ on F's generated source with this variant's flags; print ``F build<TAB>CPU seconds`` (the compiler's
    user and system time)."""
    import kleene.compile.runtime.cpu as cpu

    _use_flag(flag)
    source = cpu.cpp_source(_module("F").modules[0].plan)
    cxx = cpu.compiler()
    pool = getattr(cpu, "pool_library", None)  # before the pool library each kernel compiled the pool itself
    options = [str(pool()), "-Wl,-rpath,$ORIGIN"] if pool else []
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp, "kernel.cpp"), Path(tmp, "kernel.so")
        src.write_text(source, encoding="utf-8")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([cxx, *cpu.CXX_FLAGS, str(src), "-o", str(out), *options], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        print(f"F build\t{seconds:.4f}", flush=True)


class _Entries(dict):  # type: ignore[type-arg]
    """A library's entry points by dtype, in both of ``runtime.cpu``'s kernel interfaces: indexed (``forward[dtype]``,
    before the lazy builds) and called (``forward(dtype, backward)``, since)."""

    def __call__(self, dtype: Any, *_: Any) -> Any:
        return self[dtype]


class _LoadedKernel:
    """The kernel ``runtime.cpu._run_forward``/``_run_backward`` take, over one already loaded library."""

    def __init__(self, forward: _Entries, backward: _Entries):
        self.forward, self.backward = forward, backward


def _library_calls(path: str, module: Any, slots: Any) -> dict[str, Any]:
    """The forward (saving nothing) and the forward saving checkpoints then the backward from them, of the library at
    ``path`` on ``slots`` (the gradient of the output's sum)."""
    import ctypes

    import torch

    import kleene.compile.runtime.cpu as cpu
    from kleene.compile.runtime.op import SAVE_CHECKPOINTS, SAVE_NOTHING

    ptr, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib = ctypes.CDLL(path)
    forward, backward = lib.kleene_forward_f32, lib.kleene_backward_f32
    forward.argtypes, forward.restype = [ptr] * 8 + [i64] * 4 + [c_int], None
    backward.argtypes, backward.restype = [ptr] * 9 + [i64] * 3 + [ptr] * 4 + [i64] * 4 + [c_int], None
    kernel = _LoadedKernel(_Entries({torch.float32: forward}), _Entries({torch.float32: backward}))
    plan, params = module.plan, module.params(slots).contiguous()
    lengths = torch.full((slots.shape[0],), slots.shape[1], dtype=torch.long)

    def forward_backward() -> tuple[Any, ...]:
        out, final, saved = cpu._run_forward(plan, kernel, slots, params, lengths, None, SAVE_CHECKPOINTS)
        grads = (torch.ones_like(out), torch.zeros_like(final))
        return out, *cpu._run_backward(plan, kernel, slots, params, lengths, None, saved, False, final, out, *grads)

    return {
        "forward": lambda: cpu._run_forward(plan, kernel, slots, params, lengths, None, SAVE_NOTHING),
        "forward+backward": forward_backward,
    }


def child_libraries(spec: str, first: int, reps: int) -> None:
    """Load every variant's library per template (``spec``: JSON {variant: {name: path}}; the order rotated to start
    at variant ``first``), check they agree bit for bit, and time each one after the other in this process; print
    ``variant<TAB>row<TAB>ms`` per variant and row."""
    import torch
    from cpu_time import cpu_ms

    from kleene.bench import tune_malloc

    libraries: dict[str, dict[str, str]] = json.loads(spec)
    variants = list(libraries)
    order = variants[first % len(variants) :] + variants[: first % len(variants)]
    tune_malloc()
    torch.set_num_threads(1)
    for name in NAMES:
        module = _module(name).modules[0]
        slots = torch.rand(*SHAPE[:2], module.plan.num_slots, SHAPE[2], generator=torch.Generator().manual_seed(1))
        calls = {variant: _library_calls(libraries[variant][name], module, slots) for variant in order}
        for pass_name in ("forward", "forward+backward"):
            results = [calls[v][pass_name]() for v in variants]
            for v, result in zip(variants[1:], results[1:]):
                if not all(torch.equal(a, b) for a, b in zip(results[0], result)):
                    raise SystemExit(f"{name} {pass_name}: {v} disagrees with {variants[0]}")
        for variant in order:
            for pass_name, fn in calls[variant].items():
                print(f"{variant}\t{name} {pass_name}\t{cpu_ms(fn, reps):.4f}", flush=True)


def _run_child(variant: tuple[str, str, str], cache: Path, *args: str) -> list[list[str]]:
    name, src, _ = variant
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()), KLEENE_CACHE=str(cache / name), OMP_NUM_THREADS="1")
    command = [sys.executable, str(Path(__file__).resolve()), "--child", *args]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"variant {name} failed:\n{result.stderr[-3000:]}")
    return [line.split("\t") for line in result.stdout.splitlines()]


def _parse(text: str) -> tuple[str, str, str]:
    name, sep, rest = text.partition("=")
    src, _, flag = rest.partition(":")
    if not sep or not name or not src:
        raise SystemExit(f"variant {text!r}: expected NAME=SRC or NAME=SRC:FLAG")
    if not Path(src, "kleene").is_dir():
        raise SystemExit(f"variant {text!r}: {src!r} holds no kleene package")
    return name, src, flag


def task_bodies(library: str) -> dict[str, list[str]]:
    """The machine code of ``library``'s task bodies (the lambdas the pool runs), per demangled name, from
    ``objdump -d``: instructions only, with addresses and jump or call targets blanked, so that two builds compare
    equal when only their placement differs."""
    listing = subprocess.run(
        ["objdump", "-d", "-C", "--no-show-raw-insn", library], capture_output=True, text=True, check=True
    ).stdout
    bodies: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in listing.splitlines():
        header = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if header:
            name = header.group(1)
            current = bodies.setdefault(name, []) if "{lambda(long)#1}::operator()" in name else None
        elif current is not None and "\t" in line:
            # objdump's comments name the data symbol nearby, which placement changes
            instruction = re.sub(r"\s+# [0-9a-f]+ <.*>$", "", line.split("\t", 1)[1])
            instruction = re.sub(r"[0-9a-f]+ <.*>$", "TARGET", instruction)
            current.append(re.sub(r"0x[0-9a-f]+\(%rip\)", "RIP", instruction))
    return bodies


def _compare_code(libraries: dict[str, dict[str, str]], names: list[str]) -> None:
    """Print, per template and task body, whether each variant's instructions equal the first variant's."""
    print(f"# task bodies (objdump -d, placement blanked): the same instructions as {names[0]}'s?")
    for template in NAMES:
        base = task_bodies(libraries[names[0]][template])
        others = {n: task_bodies(libraries[n][template]) for n in names[1:]}
        for function, code in base.items():
            short = function.split("(")[0]
            verdicts = ["same" if others[n].get(function) == code else "differs" for n in names[1:]]
            print(f"{template} {short:32} {len(code):5} instructions  " + "  ".join(
                f"{n}: {v}" for n, v in zip(names[1:], verdicts)))


def _table(samples: dict[str, dict[str, list[float]]], names: list[str], unit: str) -> None:
    """Per row and variant: the median over rounds, the median of the per-round ratios to the first variant (a
    round's variants ran side by side) with how many rounds the variant was faster, and the range over rounds."""
    print(f"{'row':20}" + "".join(f"{n:>44}" for n in names))
    for row in samples[names[0]]:
        base = samples[names[0]][row]
        cells = []
        for n in names:
            values = samples[n][row]
            ratios = [v / b for v, b in zip(values, base)]
            faster = sum(r < 1 for r in ratios)
            cells.append(
                f"{statistics.median(values):8.3f} {unit} {statistics.median(ratios):6.3f}x {faster:2}/{len(ratios)}"
                f" ({min(values):.3f}-{max(values):.3f})"
            )
        print(f"{row:20}" + "".join(f"{c:>44}" for c in cells))


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, *rest = sys.argv[2:]
        if kind == "build":
            child_build(rest[0])
        elif kind == "modules":
            child_modules(rest[0], int(rest[1]))
        elif kind == "compile":
            child_compile(rest[0])
        else:
            child_libraries(rest[0], int(rest[1]), int(rest[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", help="NAME=SRC or NAME=SRC:FLAG (the first is the baseline)")
    parser.add_argument("--mode", choices=("libraries", "processes"), default="libraries")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--reps", type=int, default=10, help="calls per row, round and variant (the minimum counts)")
    parser.add_argument("--cache", type=Path, default=None, help="parent of the variants' caches (default: a temp dir)")
    parser.add_argument("--compile", action="store_true", help="also time g++ on F's source per variant")
    parser.add_argument("--code", action="store_true", help="compare the task bodies' machine code (objdump)")
    parser.add_argument("--json", type=Path, default=None, help="also write every sample here")
    ns = parser.parse_args()
    variants = [_parse(v) for v in ns.variants]
    names = [v[0] for v in variants]
    if len(set(names)) != len(names):
        raise SystemExit(f"variant names must differ: {names}")
    cache = ns.cache or Path(tempfile.mkdtemp(prefix="kleene-ab-"))
    libraries = {v[0]: dict(_run_child(v, cache, "build", v[2])) for v in variants}  # untimed builds
    spec = json.dumps(libraries)
    if ns.code:
        _compare_code(libraries, names)
    samples: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    builds: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    for r in range(ns.rounds):
        if ns.mode == "libraries":
            for variant, row, value in _run_child(variants[0], cache, "libraries", spec, str(r), str(ns.reps)):
                samples[variant].setdefault(row, []).append(float(value))
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        for variant in order:
            if ns.mode == "processes":
                for row, value in _run_child(variant, cache, "modules", variant[2], str(ns.reps)):
                    samples[variant[0]].setdefault(row, []).append(float(value))
            if ns.compile:
                for row, value in _run_child(variant, cache, "compile", variant[2]):
                    builds[variant[0]].setdefault(row, []).append(float(value))
    if not ns.rounds:
        return 0
    where = "libraries alternated in a process per round" if ns.mode == "libraries" else "a process per variant"
    print(f"# 1 thread, CPU time, ms: the minimum of {ns.reps} calls; median over {ns.rounds} rounds ({where}); "
          f"x: the median per-round ratio to {names[0]}, k/n: rounds faster than it; (min-max over rounds)")
    _table(samples, names, "ms")
    if ns.compile:
        print(f"# g++ on F's kernel source, CPU seconds, median over {ns.rounds} rounds")
        _table(builds, names, "s")
    if ns.json:
        ns.json.write_text(json.dumps({"samples": samples, "builds": builds}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
