"""``kleene bench [--quick] [--json PATH] [--section layers|sru|builds]``: generated kernels against plain PyTorch."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark generated recurrence kernels against plain PyTorch, LSTM/GRU and the bandwidth floor",
        description="Time the generated kernels of automata B, C, F and a SoPa bank, every registry layer (RRNN "
        "B/C/F, SRU, QRNN, RCNN, ISAN: against its own projection GEMM) and SRU's recurrence against plain PyTorch "
        "loops, nn.LSTM/nn.GRU, the sru package and a memory-bandwidth floor; print a table (see BENCHMARKS.md).",
    )
    parser.add_argument("--quick", action="store_true", help="only (32, 256, 512) and B at (1, 4096, 512): < 1 min")
    parser.add_argument("--json", type=Path, default=None, help="also write the records as JSON to PATH")
    parser.add_argument("--backend", default="cpp", help="backend to time (default: %(default)s)")
    parser.add_argument(
        "--section",
        choices=["layers", "sru", "builds"],
        default=None,
        help="only the layer rows (each registry layer against its projection GEMM and nn.LSTM/nn.GRU), only the SRU "
        "and RRNN(F) layer rows and the SRU recurrence against the sru package, or only the registry's kernel build "
        "times (first build in a fresh cache, cached load); default: the recurrence and layer tables",
    )
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time with the process's CPU time, not wall time (with --threads 1: on a machine loaded past its cores)",
    )
    parser.add_argument("--threads", type=int, default=None, help="threads for torch and the kernels (default: all)")
    parser.add_argument(
        "--layer",
        action="append",
        default=None,
        metavar="LABEL",
        help="only this layer row (repeatable; e.g. ISAN, 'ISAN d256', SRU); default: every layer row",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kleene.cli._shared import check_output_file

    check_output_file(args.json, "--json", create_folder=True)  # before minutes of timing

    from kleene.bench import run as run_bench

    options = {"backend": args.backend, "threads": args.threads, "section": args.section, "cpu_time": args.cpu_time}
    options["layers"] = args.layer
    run_bench(quick=args.quick, json_path=args.json, **options)
    return 0
