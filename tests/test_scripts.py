"""The shell scripts: syntax, CI wiring, and test.sh's verdicts (a failing or empty test run is a failure)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [ROOT / "scripts" / name for name in ("setup.sh", "test.sh", "tour.sh", "gpu_check.sh")]
SCRIPTS.append(ROOT / ".ci" / "run")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_are_valid_bash(script: Path) -> None:
    assert script.read_text().startswith("#!/usr/bin/env bash\n")
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_ci_runs_the_whole_check_from_the_repository_root() -> None:
    ci = ROOT / ".ci" / "run"
    assert os.access(ci, os.X_OK)
    lines = [line.strip() for line in ci.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0] == "set -euo pipefail" and lines[-1].startswith("bash scripts/test.sh")


def run_test_sh(tmp_path: Path, *pytest_args: str) -> subprocess.CompletedProcess[str]:
    """scripts/test.sh without setup and linters, on the given pytest arguments."""
    env = dict(os.environ, KLEENE_SKIP_SETUP="1", KLEENE_SKIP_LINT="1")
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "test.sh"), *pytest_args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


def test_test_sh_passes_a_passing_suite(tmp_path: Path) -> None:
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    result = run_test_sh(tmp_path, str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout and "all checks passed" in result.stdout


def test_test_sh_fails_a_failing_suite(tmp_path: Path) -> None:
    (tmp_path / "test_bad.py").write_text("def test_bad():\n    assert 1 + 1 == 3\n")
    result = run_test_sh(tmp_path, str(tmp_path))
    assert result.returncode != 0 and "1 failed" in result.stdout and "FAILED: pytest" in result.stderr


def test_test_sh_fails_when_no_test_runs(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run_test_sh(tmp_path, str(tmp_path / "empty"))
    assert result.returncode != 0 and "collected no tests" in result.stderr


def test_test_sh_prints_the_slowest_tests(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    result = run_test_sh(tmp_path, str(tmp_path), "--durations-min=0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "slowest 15 durations" in result.stdout
