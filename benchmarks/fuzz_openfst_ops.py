"""Thousands of random automata per operation against OpenFst: ``python benchmarks/fuzz_openfst_ops.py
[--count N] [--seed S] [--ops determinize,minimize,...]``.

The checks are the suite's (``tests/automata/openfst_ops.py``, which the suite runs on a few hundred automata
per operation); this command runs more of them and prints, per operation, how many agreed with OpenFst, how many
were skipped (no finite determinization: kleene's state budget was exceeded) and the time taken. Needs pynini.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.automata

from tests.automata import openfst_ops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=2000, help="random automata per operation (%(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the series (the suite uses 0)")
    parser.add_argument("--ops", default=",".join(sorted(openfst_ops.CHECKS)), help="comma-separated operations")
    args = parser.parse_args(argv)
    failed = False
    for operation in args.ops.split(","):
        if operation not in openfst_ops.CHECKS:
            parser.error(f"unknown operation {operation!r}; known: {', '.join(sorted(openfst_ops.CHECKS))}")
        start = time.perf_counter()
        try:
            checked, skipped = openfst_ops.run(operation, args.count, seed=args.seed)
        except AssertionError as exc:
            print(f"{operation:15s} DISAGREES: {exc}")
            failed = True
            continue
        elapsed = time.perf_counter() - start
        print(f"{operation:15s} {checked:6d} agree  {skipped:5d} skipped  {elapsed:7.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
