"""How many steps the GPU lane kernels should read ahead (``kleene.compile.codegen.writer.prefetch_depth``), and what
the log-depth chunked scan gives on long sequences: one run, every variant side by side on one GPU.

    python benchmarks/gpu_prefetch.py [--out DIR] [--depths 1 2 4 8 16] [--backends triton cuda]

For each read-ahead depth (``writer.MAX_PREFETCH``; depth 1 is the plain one-step-at-a-time loop) and GPU backend:
template kernels B and F at (64, 1024, 1024), forward and forward+backward, against the device-copy floor of their
bytes (as ``kleene.gpu_check``), and the RRNN(F) layer at (32, 256, 512) against its projection GEMM. Then automaton F
at (1, 16384, 512) and (4, 16384, 512): the sequential kernel against the chunked scan (at the default depth;
``kleene.gpu_check.speed_long``).
Prints one line per row and writes ``gpu_prefetch.json``. Without a GPU, ``--tiny --backends cpp`` runs the same
code on tiny shapes (a check that it runs, not a measurement).
"""

# ruff: noqa: B023 -- every timing lambda below is called at once, inside the loop iteration that made it

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from kleene import gpu_check
from kleene.compile import compile
from kleene.compile.codegen import writer
from kleene.gpu_check import copy_bandwidth, device_time
from kleene.nn.rrnn import RRNNLayer, rrnn_template


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-prefetch"))
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--backends", nargs="+", default=["triton", "cuda"])
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (a CPU run of the code, not a measurement)")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    b, t, d = (2, 16, 32) if args.tiny else (64, 1024, 1024)
    lb, lt, ld = (2, 8, 16) if args.tiny else (32, 256, 512)
    longs = ((1, 300, 8),) if args.tiny else ((1, 16384, 512), (4, 16384, 512))
    bandwidth = copy_bandwidth(device, 2**16 if args.tiny else 2**28)
    rows: list[dict[str, object]] = []
    default = writer.MAX_PREFETCH
    for depth in args.depths:
        writer.MAX_PREFETCH = depth
        for backend in args.backends:
            for kind in "BF":
                started = time.perf_counter()
                module = compile(rrnn_template(kind), "real", d, backend, scan="sequential").to(device)
                slots = torch.rand(b, t, module.plan.num_slots, d, device=device) * 0.6
                x = slots.detach().requires_grad_()
                with torch.no_grad():
                    fwd = device_time(lambda: module(slots), device)
                both = device_time(lambda: torch.autograd.grad(module(x)[0].sum(), [x]), device)
                slot_bytes, out_bytes = slots.numel() * 4, b * t * d * 4
                row = {
                    "depth": depth,
                    "backend": backend,
                    "template": kind,
                    "forward_ms": fwd,
                    "forward_floor_ratio": fwd / ((slot_bytes + out_bytes) / bandwidth),
                    "forward_backward_ms": both,
                    "forward_backward_floor_ratio": both / ((3 * slot_bytes + 2 * out_bytes) / bandwidth),
                    "seconds": time.perf_counter() - started,
                }
                rows.append(row)
                print(
                    f"depth {depth:2d} {backend:6s} {kind}: fwd {fwd:7.3f} ms ({row['forward_floor_ratio']:.2f}x floor)"
                    f"  fwd+bwd {both:7.3f} ms ({row['forward_backward_floor_ratio']:.2f}x floor)",
                    flush=True,
                )
            layer = RRNNLayer(ld, ld, "F", backend=backend).to(device)
            xs = torch.randn(lb, lt, ld, device=device, requires_grad=True)
            lengths = torch.full((lb,), lt, dtype=torch.int64, device=device)
            wrt = [xs, *layer.parameters()]
            layer_ms = device_time(lambda: torch.autograd.grad(layer(xs, lengths)[0].sum(), wrt), device)
            gemm_ms = device_time(lambda: torch.autograd.grad(layer.slots(xs)[0].sum(), wrt, allow_unused=True), device)
            rows.append({"depth": depth, "backend": backend, "layer_ms": layer_ms, "gemm_ms": gemm_ms})
            print(f"depth {depth:2d} {backend:6s} RRNN(F) layer {layer_ms:.3f} ms = {layer_ms / gemm_ms:.2f}x its GEMM")
    writer.MAX_PREFETCH = default
    gpu_check.LONG_SHAPES = longs
    report = gpu_check.CheckReport(str(device), {})
    gpu_check.speed_long(report, device, args.backends)  # (prints its rows)
    rows += report.speed
    args.out.mkdir(parents=True, exist_ok=True)
    info = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__}
    (args.out / "gpu_prefetch.json").write_text(json.dumps({"environment": info, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
