#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the tour: `bash scripts/tour.sh [--out DIR] [--seed N]`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash "$ROOT/scripts/setup.sh"
exec "$ROOT/.venv/bin/kleene" tour "$@"
