"""The differential fuzz of the automata engine: ``python benchmarks/fuzz_engine.py [--comparisons N] [--seed S]``.

Random automata across every strategy threshold and semiring, run through score, viterbi, pathsum, all-state
distances, remove_epsilon, the epsilon closure and the Forward recursion's torch batch and sympy score, each
result compared with an independent dense oracle (and a brute-force path enumeration where it is small): see
``tests/automata/engine_fuzz.py``, which the suite runs at a few hundred comparisons. Prints the number of
comparisons, of disagreements (each described) and the time taken; exits 1 on a disagreement.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.automata

from tests.automata import engine_fuzz


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comparisons", type=int, default=10_000, help="at least this many (%(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the series (the suite uses 0)")
    parser.add_argument("--show", type=int, default=20, help="stop after this many disagreements (%(default)s)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    outcome = engine_fuzz.run(args.comparisons, seed=args.seed, stop_after=args.show)
    elapsed = time.perf_counter() - start
    for problem in outcome.disagreements:
        print(problem)
    print(f"{outcome.comparisons} comparisons, {len(outcome.disagreements)} disagreements, {elapsed:.1f} s")
    return 1 if outcome.disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
