"""How many steps the GPU lane kernels should read ahead (``kleene.compile.codegen.writer.prefetch_depth``), and what
the log-depth chunked scan gives on long sequences: one run, every variant side by side on one GPU.

    python benchmarks/gpu_prefetch.py [--out DIR] [--depths 1 2 4 8 16] [--backends triton cuda]

For each read-ahead depth (``writer.MAX_PREFETCH``; depth 1 is the plain one-step-at-a-time loop) and GPU backend:
``kleene.gpu_check``'s template rows (B, C, F at (64, 1024, 1024), forward and forward+backward against the
device-copy floor of their bytes) and layer rows (the RRNN(F) layer at (32, 256, 512) against its projection GEMM
and cuDNN ``nn.LSTM``, SoPa against a BiLSTM), each row marked with its depth. Then automaton F
at (1, 16384, 512) and (4, 16384, 512): the sequential kernel against the chunked scan (at the default depth;
``kleene.gpu_check.speed_long``).
Prints one line per row and writes ``gpu_prefetch.json``. Without a GPU, ``--tiny --backends cpp`` runs the same
code on tiny shapes (a check that it runs, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from kleene import gpu_check
from kleene.compile.codegen import writer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-prefetch"))
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--backends", nargs="+", default=["triton", "cuda"])
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (a CPU run of the code, not a measurement)")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpu_check.LAYER_SHAPES = ((32, 256, 512),)
    if args.tiny:
        gpu_check.TEMPLATE_SHAPE, gpu_check.LAYER_SHAPES = (2, 16, 32), ((2, 8, 16),)
        gpu_check.LONG_SHAPES, gpu_check.SOPA_SHAPE = ((1, 300, 8),), (2, 6, 8)
    bandwidth = gpu_check.copy_bandwidth(device, 2**16 if args.tiny else 2**28)
    report = gpu_check.CheckReport(str(device), {})
    default = writer.MAX_PREFETCH
    for depth in args.depths:
        writer.MAX_PREFETCH = depth
        print(f"read-ahead depth {depth}", flush=True)
        first = len(report.speed)
        gpu_check.speed_templates(report, device, args.backends, bandwidth)
        gpu_check.speed_layers(report, device, args.backends)
        for row in report.speed[first:]:
            row["depth"] = depth
    writer.MAX_PREFETCH = default
    gpu_check.speed_long(report, device, args.backends)  # (at the default depth)
    args.out.mkdir(parents=True, exist_ok=True)
    info = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__}
    payload = {"environment": info, "rows": report.speed, "failures": report.failures}
    (args.out / "gpu_prefetch.json").write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
