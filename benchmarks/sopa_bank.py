"""SoPa's bank rows of ``kleene bench`` alone: ``python benchmarks/sopa_bank.py [THREADS] [--cpu-time]``.

The (32, 256, 512) bank (patterns of lengths 2-7 sharing 512 lanes, max-times), forward and forward+backward, with
the DRAM floor measured in the same run (``kleene.bench.recurrence_records``). ``--cpu-time`` times with the
process's CPU time (one thread only: on a shared machine wall time at 2 threads measures the neighbours). Compare
two checkouts by running this file under each ``PYTHONPATH`` in turn.
"""

from __future__ import annotations

import sys
import time

import torch

from kleene import bench


def main(argv: list[str]) -> None:
    threads = int(argv[0]) if argv and argv[0].isdigit() else 1
    torch.set_num_threads(threads)
    bench.tune_malloc()
    if "--cpu-time" in argv:
        if threads != 1:
            raise SystemExit("--cpu-time needs one thread")
        bench.CLOCK = time.process_time
    bandwidth = bench.dram_bandwidth(0.4)
    print(f"# {bench.cpu_model()}, {threads} threads, DRAM add bandwidth {bandwidth / 1e6:.1f} GB/s", flush=True)
    print(bench.HEADER, flush=True)
    bench.recurrence_records((32, 256, 512), ["SoPa"], [bench.FORWARD, bench.BOTH], "cpp", 0.6, "", bandwidth)


if __name__ == "__main__":
    main(sys.argv[1:])
