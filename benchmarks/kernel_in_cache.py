"""Whether the B, C, F kernels are bound by memory or by their own instructions (issue 14's floor targets).

Each kernel runs on (32, 64, S, 512) slots, which stay in the last-level cache between calls (x4 for the same number
of steps), and on (32, 256, S, 512) slots, which come from DRAM, alternated 15 times in one process with malloc
tuned as ``kleene bench`` does; minima. If the in-cache time is not below the DRAM-sized one, the kernel's time is
its arithmetic's, and the DRAM floor is out of its reach without fewer instructions per element.

    PYTHONPATH=src python benchmarks/kernel_in_cache.py [--threads N]   (1 thread: process CPU time)
"""

from __future__ import annotations

import argparse
import time

import torch

from kleene.automata.examples import paper_automaton_b, paper_automaton_c, paper_automaton_f
from kleene.bench import tune_malloc
from kleene.compile import Template, compile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    tune_malloc()
    torch.set_num_threads(args.threads)
    clock = time.process_time if args.threads == 1 else time.perf_counter
    automata = (("B", paper_automaton_b), ("C", paper_automaton_c), ("F", paper_automaton_f))
    for name, automaton in automata:
        module = compile(Template.from_wfsa(automaton("real")), "real", 512, "cpp", output="steps")
        s = module.plan.num_slots
        inputs = {"in cache": torch.rand(32, 64, s, 512), "DRAM": torch.rand(32, 256, s, 512)}
        leaves = {k: (x.clone().requires_grad_(), torch.ones(x.shape[0], x.shape[1], 512)) for k, x in inputs.items()}
        best: dict[tuple[str, str], float] = {}
        for _ in range(15):
            for where, x in inputs.items():
                with torch.no_grad():
                    start = clock()
                    module(x)
                    forward = clock() - start
                leaf, grad = leaves[where]
                start = clock()
                y, _ = module(leaf)
                torch.autograd.grad(y, leaf, grad)
                both = clock() - start
                for key, value in (((where, "forward"), forward), ((where, "forward+backward"), both)):
                    best[key] = min(best.get(key, float("inf")), value)
        for kind in ("forward", "forward+backward"):
            cached, dram = best[("in cache", kind)] * 4e3, best[("DRAM", kind)] * 1e3
            ratio = cached / dram
            print(f"{name} {kind:17s} in cache x4 {cached:7.2f} ms   from DRAM {dram:7.2f} ms   ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
