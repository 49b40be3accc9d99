#!/usr/bin/env bash
# Set up a checkout of kleene; safe to run again (it skips what is already done).
#   - .venv with python3.11 (or python3 >= 3.10), holding `pip install -c constraints.txt -e '.[dev]'`,
#     redone only when pyproject.toml or constraints.txt changed (a hash stamp in .venv) or the venv is broken;
#   - graphviz's `dot` (drawings), g++ (C++ kernels) and Debian's `chromium` (the test that renders `kleene report`
#     pages headlessly), installed with apt-get when missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.kleene-setup-stamp"

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# -- system packages -------------------------------------------------------------------------------------------------
APT_UPDATED=0
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        return 1
    fi
}

apt_install() {  # apt_install WHAT PACKAGE...: install Debian packages, or explain why that is impossible
    local what="$1"
    shift
    command -v apt-get >/dev/null 2>&1 || die "$what is missing and this system has no apt-get: install $* by hand"
    if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
        die "$what is missing; install the Debian package(s) $* as root (no sudo here)"
    fi
    say "installing $what (apt-get install $*)"
    if [ "$APT_UPDATED" -eq 0 ]; then
        as_root apt-get update -qq || die "apt-get update failed; install $* by hand"
        APT_UPDATED=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
        || die "apt-get install $* failed; install it by hand"
}

command -v dot >/dev/null 2>&1 || apt_install "graphviz's dot" graphviz
command -v dot >/dev/null 2>&1 || die "graphviz's dot is still missing after installing graphviz"
command -v g++ >/dev/null 2>&1 || apt_install "the C++ compiler g++" g++
command -v g++ >/dev/null 2>&1 || die "g++ is still missing after installing it"
command -v chromium >/dev/null 2>&1 || apt_install "Chromium (renders the HTML report in its test)" chromium
command -v chromium >/dev/null 2>&1 || die "chromium is still missing after installing it"

# -- Python ----------------------------------------------------------------------------------------------------------
find_python() {
    local candidate
    for candidate in python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

venv_works() {  # the venv runs, and `import kleene` finds this checkout (not an older copy elsewhere)
    [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$ROOT" <<'PY' >/dev/null 2>&1
import pathlib, sys
import kleene
sys.exit(pathlib.Path(kleene.__file__).resolve().parents[1] != pathlib.Path(sys.argv[1]) / "src")
PY
}

if [ ! -x "$VENV/bin/python" ]; then
    PYTHON="$(find_python)" || die "no python3.11 or python3 >= 3.10 found: install Python 3.11 first"
    say "creating .venv with $PYTHON ($("$PYTHON" --version 2>&1))"
    if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
        rm -rf "$VENV"
        apt_install "Python's venv module" python3-venv
        "$PYTHON" -m venv "$VENV" || die "could not create $VENV with $PYTHON"
    fi
fi

WANTED="$(cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt" | sha256sum | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANTED" ] && venv_works; then
    say "python environment up to date (.venv)"
else
    say "installing kleene and its dependencies into .venv (a few minutes the first time)"
    (cd "$ROOT" && "$VENV/bin/python" -m pip install -qq --disable-pip-version-check \
        -c constraints.txt -e '.[dev]') || die "pip install failed (see above)"
    venv_works || die "kleene does not import from $ROOT/src after installing"
    printf '%s\n' "$WANTED" >"$STAMP"
fi
say "ready: $("$VENV/bin/python" --version 2>&1), $(dot -V 2>&1 | head -n1), $(g++ --version | head -n1)"
