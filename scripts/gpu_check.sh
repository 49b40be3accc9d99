#!/usr/bin/env bash
# The GPU check (docs/gpu.md): `bash scripts/gpu_check.sh [--out DIR] [--no-speed] [--train-steps N]`.
# Runs `python -m kleene.gpu_check` from this checkout's src/ with the machine's own torch and Triton: the project's
# .venv when there is one, else $PYTHON, else python3 (a borrowed GPU machine: its python3 holds torch and Triton;
# missing pure-Python packages are installed from carried wheels first, see docs/gpu.md). Without a GPU it runs the
# CPU parts and says what it skipped. Exit code: 0 when every row passed, 1 otherwise.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY="python3"; fi
fi
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
exec "$PY" -m kleene.gpu_check "$@"
