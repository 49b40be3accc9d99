"""Kernel rows timed in CPU time on one thread: ``python benchmarks/cpu_time.py`` (one line per row).

On a machine shared with other jobs, wall time mostly measures the neighbours (a 2-thread parallel region waits
for its second thread to be scheduled). With one thread the kernels run on the calling thread, whose CPU time
(``time.thread_time``) excludes the time it is descheduled; the minimum over repetitions is then a steady
estimate of a call's own cost (memory contention still shows). Compare two checkouts by running this file under
each ``PYTHONPATH`` in turn, alternating, and taking the minimum per row. Rows: the contenders of ``kleene.bench``
at (32, 256, 512) and (1, 4096, 512), and tiny (1, 16, 16) calls, which measure the module's per-call overhead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

ROWS: list[tuple[tuple[int, int, int], list[str], list[str]]] = [
    ((32, 256, 512), ["B", "C", "F", "SoPa"], ["forward", "forward+backward"]),
    ((1, 4096, 512), ["B", "C", "F"], ["forward+backward"]),
    ((1, 16, 16), ["B", "F"], ["forward", "forward+backward"]),
]


def cpu_ms(fn: Callable[[], Any], reps: int) -> float:
    """Minimum CPU time of the calling thread in ms over ``reps`` calls of ``fn`` (after one warm-up); also the clock
    of ``kernel_ab.py``'s children (this module imports kleene only in ``main``, so any checkout's child can use it)."""
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best * 1000


def main() -> int:
    from kleene.bench import _grad_of_sum, _no_grad, make_contender, tune_malloc

    tune_malloc()
    torch.set_num_threads(1)
    for shape, names, passes in ROWS:
        for name in names:
            contender = make_contender(name, shape, "cpp", torch.Generator().manual_seed(0))
            for pass_name in passes:
                if pass_name == "forward":
                    fn = _no_grad(partial(contender.kernel, contender.slots))
                else:
                    leaves = [x.clone().requires_grad_() for x in contender.slots]
                    fn = _grad_of_sum(partial(contender.kernel, leaves), leaves + contender.parameters())
                reps = 200 if shape[1] <= 16 else (8 if name == "SoPa" else 15)
                print(f"{name:5} {'x'.join(map(str, shape)):11} {pass_name:17} {cpu_ms(fn, reps):9.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
