"""The chunked scan against the sequential kernel (issue 14): ``python benchmarks/chunked_scan.py [--quick]``.

For automata B, C and F (real semiring, the cpp backend) at each (B, T, D) and thread count, times the same module
with ``scan="sequential"`` and ``scan="chunked"`` side by side in one process (forward, and forward+backward of the
outputs' sum), checks that they agree, and prints ``sequential_ms / chunked_ms`` (> 1: chunked is faster) next to
the cost model's prediction (``kleene.compile.chunked.chunked_speedup``) and ``choose_scan``'s decision.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import torch

from kleene.bench import cpu_model, paper_templates, time_ms, tune_malloc
from kleene.compile import compile
from kleene.compile.chunked import ChunkedRunner, choose_scan, chunked_speedup, default_chunks

SHAPES = [(1, 4096, 512), (1, 16384, 16), (4, 4096, 64)]
Tensor = torch.Tensor


def _pass(module: torch.nn.Module, x: Tensor, backward: bool) -> Callable[[], None]:
    def run() -> None:
        if backward:
            leaves = [x, *module.parameters()]
            out, _ = module(x)
            torch.autograd.grad(out.sum(), leaves)
        else:
            with torch.no_grad():
                module(x)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="only automaton B")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts (default: 1 2)")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per timing (default: %(default)s)")
    parser.add_argument("--chunks", type=int, default=None, help="chunks per sequence (default: default_chunks)")
    args = parser.parse_args(argv)
    tune_malloc()
    print(f"# {cpu_model()}; {os.cpu_count()} CPUs; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(
        f"# {'automaton':9} {'(B, T, D)':>16} thr {'pass':>16} {'chunks':>6} {'seq ms':>9} {'chunked ms':>10} "
        f"{'seq/chunked':>11} {'model':>6} auto"
    )
    gen = torch.Generator().manual_seed(0)
    templates = paper_templates()
    names = ["B"] if args.quick else ["B", "C", "F"]
    for threads in args.threads:
        torch.set_num_threads(threads)
        for shape in SHAPES:
            b, t, d = shape
            for name in names:
                template = templates[name]
                sequential = compile(template, "real", d, "cpp", scan="sequential")
                chunked = compile(template, "real", d, "cpp", scan="chunked")
                with torch.no_grad():
                    sequential.constants.copy_(torch.rand(sequential.constants.shape, generator=gen) * 0.5)
                chunked.load_state_dict(sequential.state_dict())
                chunks = args.chunks or max(2, default_chunks(sequential.plan, b, t, d, threads))
                chunked._chunked = ChunkedRunner(chunked.plan, chunked._chunked.factory, -(-t // chunks))  # type: ignore[union-attr]
                x = torch.rand(b, t, len(template.slots), d, generator=gen)
                with torch.no_grad():
                    torch.testing.assert_close(chunked(x)[0], sequential(x)[0], rtol=1e-4, atol=1e-5)
                plan = sequential.plan
                model = chunked_speedup(plan, b, t, d, threads, chunks)
                for backward in (False, True):
                    leaf = x.clone().requires_grad_(backward)
                    seq_ms = time_ms(_pass(sequential, leaf, backward), args.budget)
                    chunk_ms = time_ms(_pass(chunked, leaf, backward), args.budget)
                    pass_name = "forward+backward" if backward else "forward"
                    auto = choose_scan(plan, b, t, d, threads)
                    print(
                        f"  {name:9} {shape!s:>16} {threads:3} {pass_name:>16} {chunks:6} {seq_ms:9.2f} "
                        f"{chunk_ms:10.2f} {seq_ms / chunk_ms:11.2f} {model:6.2f} {auto}",
                        flush=True,
                    )
    print(f"# load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
