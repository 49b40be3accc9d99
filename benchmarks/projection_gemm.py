"""A rational layer's projection GEMM against torch's paths and nn.LSTM: ``python benchmarks/projection_gemm.py``.

At (batch, length, input, 4·hidden) = (32, 256, 512, 2048), the size of the RRNN(F) layer's projection and of
nn.LSTM's input GEMM, forward and forward+backward, side by side in one run, alternating, ``--repeats`` rounds:

- ``F.linear``: torch's default path;
- ``kleene linear``: ``kleene.nn.projection.linear`` (oneDNN with the weight reordered, when torch has it);
- ``nn.LSTM``: the whole LSTM layer of hidden 512 (twice the GEMM FLOPs: input and recurrent weights).

It prints the attained GFLOP/s and ``lstm/gemm``: how much faster than nn.LSTM a layer could be whose whole cost
were its projection (a recurrence costing nothing). One thread is timed in the calling thread's CPU time
(``time.thread_time``: steadier on a shared machine), two threads in wall time.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional

from kleene.bench import cpu_model
from kleene.nn.projection import linear, packed_gemm_available


def best_ms(fn: Callable[[], Any], reps: int, clock: Callable[[], float]) -> float:
    """Minimum over ``reps`` calls (after one warm-up) in ms on ``clock``."""
    fn()
    best = float("inf")
    for _ in range(reps):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="alternating rounds (default 2)")
    parser.add_argument("--reps", type=int, default=5, help="calls per measurement, minimum taken (default 5)")
    args = parser.parse_args()
    batch, steps, size, hidden = 32, 256, 512, 512
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, steps, size, generator=gen, requires_grad=True)
    weight = torch.randn(4 * hidden, size, generator=gen, requires_grad=True)
    bias = torch.randn(4 * hidden, generator=gen, requires_grad=True)
    lstm = torch.nn.LSTM(size, hidden, batch_first=True)
    flops = 2 * batch * steps * size * 4 * hidden
    print(f"# {cpu_model()}; torch {torch.__version__}; oneDNN reordered linear: {packed_gemm_available()}; "
          f"GEMM ({batch}·{steps}, {size}) x ({size}, {4 * hidden}) = {flops / 1e9:.1f} GFLOP; load {os.getloadavg()}")

    def forward(fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                fn()

        return run

    def both(fn: Callable[[], torch.Tensor]) -> Callable[[], None]:
        def run() -> None:
            fn().sum().backward()

        return run

    contenders: dict[str, Callable[[], torch.Tensor]] = {
        "F.linear": lambda: functional.linear(x, weight, bias),
        "kleene linear": lambda: linear(x, weight, bias),
        "nn.LSTM": lambda: lstm(x)[0],
    }
    print(f"{'threads':>7} {'round':>5} {'pass':17} {'contender':14} {'ms':>8} {'GFLOP/s':>8} {'lstm/this':>9}")
    for threads, clock in ((1, time.thread_time), (2, time.perf_counter)):
        torch.set_num_threads(threads)
        for round_ in range(args.repeats):
            for pass_name, wrap, passes in (("forward", forward, 1), ("forward+backward", both, 3)):
                times = {name: best_ms(wrap(fn), args.reps, clock) for name, fn in contenders.items()}
                for name, ms in times.items():
                    gflops = "" if name == "nn.LSTM" else f"{passes * flops / ms / 1e6:8.1f}"
                    ratio = "" if name == "nn.LSTM" else f"{times['nn.LSTM'] / ms:9.2f}"
                    print(f"{threads:7} {round_ + 1:5} {pass_name:17} {name:14} {ms:8.1f} {gflops:>8} {ratio:>9}",
                          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
