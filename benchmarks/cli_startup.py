"""Start-up time of the ``kleene`` console script (issue 23): ``kleene --help``, ``kleene train --help`` and
``kleene evaluate`` of a small model, each a fresh process.

The targets on a quiet 2-core machine: ``kleene --help`` <= 0.5 s, ``kleene evaluate`` of a small model <= 2 s.
Each command runs ``--repeat`` times (after one untimed warm-up, which fills the OS file cache); the table shows
the median wall-clock seconds and the median CPU seconds of the child process (user + system: on a machine shared
with other work, CPU time is the steadier number), plus the imports that cost most (``python -X importtime``). The
commands run through the console script's entry point (``kleene.cli.run``), which ends the process without the
interpreter's teardown. The reference rows time ``import torch`` and ``import torch, sympy`` alone, with Python's
ordinary exit and with the console script's quick exit: the floor of evaluation while the layers' templates are
sympy expressions.

    python benchmarks/cli_startup.py             # trains the small model once into a temporary folder
    python benchmarks/cli_startup.py --repeat 9
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
WORDS = ["good", "bad", "film", "plot", "great", "dull", "a", "the", "fine", "boring"]


def command_line(argv: list[str]) -> list[str]:
    """``python -m kleene.cli argv``, or ``python -c CODE`` for ``argv == ["-c", CODE]`` (the reference rows)."""
    return [sys.executable, *argv] if argv[:1] == ["-c"] else [sys.executable, "-m", "kleene.cli", *argv]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one ``command_line(argv)`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command_line(argv), env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heaviest_imports(argv: list[str], env: dict[str, str], count: int = 5) -> list[tuple[str, float]]:
    """The ``count`` top-level imports with the largest cumulative time (seconds) in ``python -X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command_line(argv)[1:]], env=env, capture_output=True, text=True
    )
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.split("|")
            if cumulative.strip().isdigit() and not name.startswith("  "):  # top level: one space of indent
                rows.append((name.strip(), int(cumulative) / 1e6))
    return sorted(rows, key=lambda row: -row[1])[:count]


def small_model(folder: Path, env: dict[str, str]) -> Path:
    """Train a tiny RRNN on 120 generated sentences (3 classes) into ``folder/run``."""
    rng = random.Random(0)
    data = folder / "topics.tsv"
    data.write_text("".join(f"{['a', 'b', 'c'][i % 3]}\t{' '.join(rng.choices(WORDS, k=5))}\n" for i in range(120)))
    run = folder / "run"
    settings = ["--set", "hidden_size=8", "--set", "num_layers=1", "--set", "embedding_dim=8", "--set", "mlp_hidden=8"]
    argv = ["train", "rrnn-b", "--data", str(data), "--out", str(run), "--max-steps", "5", "--pretrained", "none"]
    subprocess.run(
        [sys.executable, "-m", "kleene.cli", *argv, *settings, "--no-progress"],
        env=env,
        check=True,
        capture_output=True,
    )
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per command (median shown)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = small_model(Path(tmp), env)
        commands = {
            "kleene --help": ["--help"],
            "kleene train --help": ["train", "--help"],
            "kleene evaluate (small model)": ["evaluate", str(checkpoint)],
            "(reference) import torch": ["-c", "import torch"],
            "(reference) import torch, sympy": ["-c", "import torch, sympy"],
            "(reference) the same, quick exit": ["-c", "import os, torch, sympy; os._exit(0)"],
        }
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
        print(f"{'command':32} {'wall s':>8} {'CPU s':>8}   heaviest imports (cumulative s)")
        for name, argv in commands.items():
            timed(argv, env)  # warm-up: the OS file cache
            runs = [timed(argv, env) for _ in range(args.repeat)]
            wall = statistics.median(run[0] for run in runs)
            cpu = statistics.median(run[1] for run in runs)
            imports = ", ".join(f"{module} {seconds:.2f}" for module, seconds in heaviest_imports(argv, env, 3))
            print(f"{name:32} {wall:8.2f} {cpu:8.2f}   {imports}")


if __name__ == "__main__":
    main()
