"""What bounds SoPa's pattern bank on a GPU: its first call into empty caches, then its forward+backward timed and
profiled (kernel launches per call, the GPU's busy time against the wall time).

    python benchmarks/gpu_sopa_profile.py --out DIR [--backends triton cuda]

On a GPU machine (docs/gpu.md) it runs the GPU backends; without one, the cpp backend on the CPU (the same rows, so
the script itself is checked here). Writes ``gpu_sopa_profile.json`` under ``--out``. The shape and the bank are the
GPU check's (``kleene.gpu_check.SOPA_SHAPE``, ``SOPA_SPEED_PATTERNS``; the first call uses its six-length
``SOPA_BUILD_PATTERNS``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from kleene.gpu_check import (
    SOPA_BUILD_PATTERNS,
    SOPA_SHAPE,
    SOPA_SPEED_PATTERNS,
    _forward_backward,
    _synchronize,
    device_time,
    environment,
)
from kleene.nn.sopa import SoftPatterns


def first_call(backend: str, device: torch.device) -> dict[str, Any]:
    """Construction and the first forward+backward of the six-length bank, kleene's and Triton's caches empty."""
    x = torch.randn(2, 8, 8, device=device)
    lengths = torch.tensor([8, 3], device=device)
    started = time.perf_counter()
    bank = SoftPatterns(8, SOPA_BUILD_PATTERNS, backend=backend).to(device)
    built = time.perf_counter()
    _forward_backward(lambda v: bank(v, lengths), x, bank)()
    _synchronize(device)
    done = time.perf_counter()
    return {"backend": backend, "construction_s": built - started, "first_call_s": done - built,
            "one_call": bank._bank is not None}


def profiled(backend: str, device: torch.device, calls: int = 5) -> dict[str, Any]:
    """The speed bank at the GPU check's shape: median time, and a profile of ``calls`` forward+backward calls."""
    b, t, e = SOPA_SHAPE
    x = torch.randn(b, t, e, device=device)
    lengths = torch.full((b,), t, dtype=torch.int64, device=device)
    bank = SoftPatterns(e, SOPA_SPEED_PATTERNS, backend=backend).to(device)
    step = _forward_backward(lambda v: bank(v, lengths), x, bank)
    median_ms = device_time(step, device, repeats=5)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        began = time.perf_counter()
        for _ in range(calls):
            step()
        _synchronize(device)
        wall_ms = (time.perf_counter() - began) * 1e3 / calls
    events = prof.key_averages()
    ops = collections.Counter({e.key: e.count // calls for e in events if not e.key.startswith("ProfilerStep")})
    device_us = sum(getattr(e, "self_device_time_total", 0.0) for e in events) / calls
    kernels = sum(e.count for e in events if getattr(e, "self_device_time_total", 0.0) > 0) // calls
    return {
        "backend": backend,
        "shape": list(SOPA_SHAPE),
        "median_ms": median_ms,
        "profiled_wall_ms_per_call": wall_ms,
        "device_busy_ms_per_call": device_us / 1e3,
        "device_ops_per_call": kernels,
        "aten_ops_per_call": sum(count for name, count in ops.items() if name.startswith("aten::")),
        "top_ops_per_call": ops.most_common(15),
        "one_call": bank._bank is not None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-sopa")))
    parser.add_argument("--backends", nargs="*", default=None)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    backends = args.backends or (["triton", "cuda"] if device.type == "cuda" else ["cpp"])
    os.environ["KLEENE_CACHE"] = tempfile.mkdtemp(prefix="kleene-sopa-")
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-sopa-")
    result: dict[str, Any] = {"environment": environment(device), "first_call": [], "profile": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for backend in backends:
        row = first_call(backend, device)
        result["first_call"].append(row)
        print(f"first call {backend}: construction {row['construction_s']:.1f} s, first forward+backward "
              f"{row['first_call_s']:.1f} s (one call: {row['one_call']})", flush=True)
    for backend in backends:
        row = profiled(backend, device)
        result["profile"].append(row)
        print(f"profile {backend}: {row['median_ms']:.2f} ms median; profiled {row['profiled_wall_ms_per_call']:.2f} ms"
              f" wall, device busy {row['device_busy_ms_per_call']:.2f} ms, {row['device_ops_per_call']} device ops, "
              f"{row['aten_ops_per_call']} aten ops per call", flush=True)
        for name, count in row["top_ops_per_call"]:
            print(f"    {count:5d}  {name}", flush=True)
        (args.out / "gpu_sopa_profile.json").write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
