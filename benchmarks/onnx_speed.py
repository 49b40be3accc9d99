"""onnxruntime against eager PyTorch on the CPU, per registry model, side by side in one run.

Each kleene registry model is built at a deployment size (embedding 50, hidden 128, one layer; SoPa's default bank
of 200 patterns, ISAN with 32 units, ...), exported with ``kleene.nn.deploy.export_onnx`` and run on the same
batches of random token ids (ragged lengths) by eager PyTorch (``torch.no_grad``, kleene's generated kernels) and
by onnxruntime (``CPUExecutionProvider``, its default graph optimizations). Both use the same number of threads
(``--threads``; torch.set_num_threads and onnxruntime's intra-op threads, which are told not to spin between
runs, as torch's do not). Times are the median of ``--repeats``
calls after two warm-up calls, alternated between the two runtimes so that a noisy neighbour hits both alike; the
ratio is onnxruntime's time over eager's (> 1: onnxruntime is slower). The outputs are checked to agree (1e-5
relative to the output's scale) before timing.

    python benchmarks/onnx_speed.py --quick                  # batch 8, length 24: a few minutes
    python benchmarks/onnx_speed.py --batch 32 --length 64   # the table in BENCHMARKS.md
    python benchmarks/onnx_speed.py --only sopa,rrnn-b
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch

from kleene.nn.deploy import export_onnx
from kleene.nn.registry import build_model, registered_models

VOCAB = 2000
RATIONAL = {"embedding_dim": 50, "hidden_size": 128, "num_layers": 1}
#: Builder keyword arguments per model (besides vocab_size); language models take no num_classes.
MODELS: dict[str, dict[str, Any]] = {
    "sopa": {"num_classes": 2, "embedding_dim": 50},
    "rrnn-b": {"num_classes": 2, **RATIONAL},
    "rrnn-b-maxplus": {"num_classes": 2, **RATIONAL},
    "rrnn-c": {"num_classes": 2, **RATIONAL},
    "rrnn-f": {"num_classes": 2, **RATIONAL},
    "qrnn": {"num_classes": 2, **RATIONAL},
    "sru": {"num_classes": 2, **RATIONAL},
    "rcnn": {"num_classes": 2, **RATIONAL},
    "isan": {"num_classes": 2, "embedding_dim": 50, "hidden_size": 32},
    "cnn": {"num_classes": 2},
    "lstm": {"num_classes": 2, **RATIONAL},
    "bilstm": {"num_classes": 2},
    "lstm-lm": {},
}


def batch(size: int, steps: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, VOCAB, (size, steps), generator=generator)
    lengths = torch.randint(max(1, steps // 2), steps + 1, (size,), generator=generator)
    lengths[0] = steps
    tokens[torch.arange(steps)[None, :] >= lengths[:, None]] = 0
    return tokens, lengths


def measure(name: str, args: argparse.Namespace, directory: Path) -> tuple[float, float] | str:
    """(eager seconds, onnxruntime seconds) per call, or why the model was not measured."""
    torch.manual_seed(0)
    model = build_model(name, vocab_size=VOCAB, **MODELS[name]).eval()
    try:
        path = export_onnx(model, directory / f"{name}.onnx")
    except Exception as error:  # noqa: BLE001 - report and go on with the other models
        return f"export failed: {str(error).splitlines()[0][:100]}"
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    # onnxruntime's threads spin after each run by default, which steals the cores from the eager call that follows
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    tokens, lengths = batch(args.batch, args.length, 1)
    feed = {"tokens": tokens.numpy(), "lengths": lengths.numpy()}
    with torch.no_grad():
        want = model(tokens, lengths).numpy()
    (got,) = session.run(["logits"], feed)
    error = float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))
    if error > 1e-5:
        return f"outputs differ: {error:.2g} relative"

    def eager() -> None:
        with torch.no_grad():
            model(tokens, lengths)

    def onnx() -> None:
        session.run(["logits"], feed)

    for _ in range(2):
        eager()
        onnx()
    times: dict[str, list[float]] = {"eager": [], "onnx": []}
    for _ in range(args.repeats):
        for key, call in (("eager", eager), ("onnx", onnx)):
            start = time.perf_counter()
            call()
            times[key].append(time.perf_counter() - start)
    return statistics.median(times["eager"]), statistics.median(times["onnx"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="batch 8, length 24, 7 repeats")
    parser.add_argument("--only", help="comma-separated model names")
    args = parser.parse_args()
    if args.quick:
        args.batch, args.length, args.repeats = 8, 24, 7
    torch.set_num_threads(args.threads)
    names = args.only.split(",") if args.only else [n for n in MODELS if n in registered_models()]
    print(
        f"# onnxruntime {ort.__version__} vs eager torch {torch.__version__}, {platform.processor() or platform.machine()}"
        f", {args.threads} threads, batch {args.batch}, length {args.length} (ragged), median of {args.repeats}"
    )
    print("| model | eager ms | onnxruntime ms | onnxruntime / eager |")
    print("| --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            result = measure(name, args, Path(tmp))
            if isinstance(result, str):
                print(f"| {name} | | | {result} |", flush=True)
                continue
            eager, onnx = result
            print(f"| {name} | {eager * 1e3:.2f} | {onnx * 1e3:.2f} | {onnx / eager:.2f} |", flush=True)


if __name__ == "__main__":
    main()
