"""Test-suite settings.

Hypothesis runs derandomized by default, so that the suite's examples are the same on every machine and in CI
(a run is reproducible); `pytest --hypothesis-profile=explore` draws fresh random examples (and keeps a database)
for hunting new counterexamples.

OpenMP's threads wait passively (``OMP_WAIT_POLICY=PASSIVE`` unless set): on a machine whose cores other jobs share,
torch's spinning workers otherwise hold a core while the thread with the next op's work waits for one, and a test
that trains for a second takes a minute (docs/history/benchmarks.md, "SoPa training against the BiLSTM baseline").
"""

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before anything imports torch

settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("deterministic")


# -- an opt-in record of the C++ kernels each test asks for --------------------------------------------------------
# `KLEENE_BUILD_LOG=builds.jsonl pytest ...` appends one JSON line per kernel request made in this process: the test,
# the kernel's cache key and whether it was compiled (False: it came from the cache). With a warm cache it lists
# every kernel a cold run would build, and which tests share each one (subprocesses, e.g. the CLI's, are not seen).
if os.environ.get("KLEENE_BUILD_LOG"):

    @pytest.fixture(autouse=True)
    def _record_kernel_builds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        from kleene.compile.runtime import cpu

        original = cpu.build
        log = Path(os.environ["KLEENE_BUILD_LOG"])

        def recorded(source: str, entry: tuple[str, str] | None = None) -> tuple[Path, bool]:
            start = time.perf_counter()
            path, built = original(source, entry)
            entry = {"test": request.node.nodeid, "key": path.stem, "built": built,
                     "seconds": round(time.perf_counter() - start, 3), "chars": len(source)}
            with log.open("a", encoding="utf-8") as out:
                out.write(json.dumps(entry) + "\n")
            return path, built

        monkeypatch.setattr(cpu, "build", recorded)
        yield
