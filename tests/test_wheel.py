"""The built wheel, installed in a fresh environment without the source tree and used from another directory:
the README's first example, a compiled C++ kernel and the ``kleene`` command (issue 23). The new environment reuses
the torch already installed (the running interpreter's site-packages, after its own) instead of downloading it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.test_docs import ROOT, python_blocks

pytestmark = pytest.mark.slow


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_wheel_installs_and_runs_from_another_directory(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    source = tmp_path / "source"  # a copy: building in place would leave build/ and *.egg-info in the tree
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), str(source)]
    _run(build, tmp_path, env)
    (wheel,) = dist.glob("kleene-*.whl")

    names = set(zipfile.ZipFile(wheel).namelist())
    assert "kleene/py.typed" in names
    vendored = {
        path.relative_to(ROOT / "src").as_posix()
        for path in (ROOT / "src" / "kleene" / "data").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert vendored and vendored <= names, sorted(vendored - names)
    assert not any(name.startswith("tests/") for name in names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env)
                .strip())
    shared = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_shared_dependencies.pth").write_text("".join(f"{path}\n" for path in sorted(shared)))
    _run([*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)], tmp_path, env)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    readme = [code for _, code, reason in python_blocks(ROOT / "README.md") if reason is None]
    compiled = next(code for code in readme if "from kleene.compile import" in code)
    program = "\n".join([
        "import kleene, pathlib",
        f"assert pathlib.Path(kleene.__file__).is_relative_to({str(site)!r}), kleene.__file__",
        readme[0],
        readme[1],  # the first example: automaton B, scored numerically and symbolically
        compiled,
        "import shutil",
        "assert layer.backend == ('cpp' if shutil.which('g++') else 'torch'), layer.backend",
        "assert scores.shape[0] == 8 and bool(scores.isfinite().all())",
        "from kleene.data import VENDOR_DIR",
        f"assert pathlib.Path(VENDOR_DIR).is_relative_to({str(site)!r}), VENDOR_DIR",
        "assert (pathlib.Path(VENDOR_DIR) / 'sst2' / 'stsa.binary.train.gz').stat().st_size > 0",
        "print('ok', layer.backend)",
    ])
    out = _run([str(python), "-c", program], elsewhere, env)
    assert "1.1125" in out and out.strip().endswith(("ok cpp", "ok torch"))
    assert "usage: kleene" in _run([str(venv / "bin" / "kleene"), "--help"], elsewhere, env)
