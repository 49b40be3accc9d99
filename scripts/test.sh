#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run ruff, mypy and the test suite; exit non-zero if any of them fails.
# Arguments go to pytest: `bash scripts/test.sh tests/test_draw.py -x`; `bash scripts/test.sh -m "not slow"` runs the
# fast subset (every package; 112 CPU-s, 1:52 wall on 2 cores once the C++ kernels are cached, 2026-11-28).
# Every run ends with pytest's list of the 15 slowest tests.
# KLEENE_SKIP_SETUP=1 skips the setup step; KLEENE_SKIP_LINT=1 skips ruff and mypy.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
PY="$ROOT/.venv/bin/python"

if [ "${KLEENE_SKIP_SETUP:-0}" != 1 ]; then
    bash "$ROOT/scripts/setup.sh" || { echo "[test] setup failed" >&2; exit 1; }
fi
[ -x "$PY" ] || { echo "[test] no .venv: run bash scripts/setup.sh" >&2; exit 1; }

failed=()
if [ "${KLEENE_SKIP_LINT:-0}" != 1 ]; then
    echo "[test] ruff check src tests"
    "$PY" -m ruff check src tests || failed+=("ruff")
    echo "[test] mypy (configured in pyproject.toml)"
    "$PY" -m mypy || failed+=("mypy")
fi

echo "[test] pytest $*"
"$PY" -m pytest -q -p no:cacheprovider --durations=15 "$@"
status=$?
if [ "$status" -eq 5 ]; then
    echo "[test] pytest collected no tests: that is a failure, not a pass" >&2
    failed+=("pytest (no tests)")
elif [ "$status" -ne 0 ]; then
    failed+=("pytest (exit $status)")
fi

if [ "${#failed[@]}" -gt 0 ]; then
    echo "[test] FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "[test] all checks passed"
