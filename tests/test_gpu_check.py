"""scripts/gpu_check.sh on this machine (no GPU): its CPU parts run and pass, and it says what it skipped."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from kleene.gpu_check import TOLERANCE, kernel_kinds
from kleene.nn import registered_models

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_check_runs_its_cpu_parts_and_says_what_it_skipped(tmp_path: Path) -> None:
    if torch.cuda.is_available():  # pragma: no cover - the GPU run is the check itself, minutes long
        return
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHON"] = os.environ.get("PYTHON", __import__("sys").executable)
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["device"] == "cpu" and report["environment"]["torch"] == torch.__version__
    assert not report["failures"]
    skipped = " | ".join(report["skipped"])
    for part in ("cuda backend", "speed table", "--device cuda"):
        assert part in skipped and "skipped: " in result.stdout
    rows = {(r["kind"], r["backend"], r["dtype"]) for r in report["correctness"] if r["passed"]}
    for kind in kernel_kinds(dim=2):
        for backend in ("torch", "cpp"):
            for dtype in TOLERANCE:
                assert (kind.name, backend, str(dtype).removeprefix("torch.")) in rows
    if importlib.util.find_spec("triton") is not None:
        assert ("template F", "triton", "float64") in rows  # the interpreter's tiny case
    for row in report["correctness"]:
        assert row["empty_batch"] and row["value_error"] <= TOLERANCE[getattr(torch, row["dtype"])]
    trained = [r["model"] for r in report["training"] if r["passed"]]
    # every model the child process registers (this process may hold more: tests register their own)
    assert trained == report["environment"]["models"] and set(trained) <= set(registered_models())
    assert {"sopa", "rrnn-f", "isan", "qrnn", "sru", "rcnn", "regex", "lstm-lm"} <= set(trained)


def test_the_bank_row_fails_when_the_bank_does_not_run_in_one_call() -> None:
    """The correctness row of SoPa's bank runs it through its one-call kernel (cpp here; triton or cuda on a GPU)
    and fails, with the reason, when the bank falls back to a kernel per pattern length."""
    from kleene import gpu_check

    (kind,) = [k for k in kernel_kinds(dim=2) if k.name.startswith("bank")]
    cpu = torch.device("cpu")
    report = gpu_check.CheckReport("cpu", {})
    gpu_check.check_kind(report, kind, "cpp", cpu, torch.float32, batch=3)
    assert report.correctness[-1]["passed"] and not report.failures

    def per_length(backend: str) -> torch.nn.Module:
        module = kind.make(backend)
        module.one_call = False  # type: ignore[assignment]
        return module

    fallback = gpu_check.Kind(kind.name, per_length, kind.inputs, kind.run)
    gpu_check.check_kind(report, fallback, "cpp", cpu, torch.float32, batch=3)
    row = report.correctness[-1]
    assert not row["passed"] and "one kernel per pattern length" in row["error"] and report.failures


def test_the_speed_table_code_runs_on_tiny_shapes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The speed functions (GPU only in the check) on the CPU with the cpp backend and tiny shapes: every row
    is written with its ratios, so the one GPU run cannot stop on a misspelt call."""
    from kleene import gpu_check

    monkeypatch.setattr(gpu_check, "TEMPLATE_SHAPE", (2, 8, 16))
    monkeypatch.setattr(gpu_check, "LONG_SHAPES", ((1, 300, 4),))
    monkeypatch.setattr(gpu_check, "LAYER_SHAPES", ((2, 6, 8),))
    monkeypatch.setattr(gpu_check, "SOPA_SHAPE", (2, 6, 8))
    monkeypatch.setattr(gpu_check, "SOPA_SPEED_PATTERNS", {2: 3, 3: 2})
    calls = []

    def once(fn, device, repeats=10):  # type: ignore[no-untyped-def]
        calls.append(fn())  # each timed call runs (once: the timings themselves are the GPU run's)
        return 1.0

    monkeypatch.setattr(gpu_check, "device_time", once)
    cpu = torch.device("cpu")
    report = gpu_check.CheckReport("cpu", {})
    bandwidth = gpu_check.copy_bandwidth(cpu, elements=2**16)
    gpu_check.speed_templates(report, cpu, ["cpp"], bandwidth)
    gpu_check.speed_long(report, cpu, ["cpp"])
    gpu_check.speed_layers(report, cpu, ["cpp"])
    tables = [row["table"] for row in report.speed]
    assert tables.count("template (64,1024,1024)") == 3 and tables.count("long sequences") == 1
    assert tables.count("RRNN(F) layer") == 1 and tables.count("SoPa vs BiLSTM") == 1
    for row in report.speed:
        assert all(value > 0 for key, value in row.items() if key.endswith(("_ms", "_ratio", "_speedup")))
    monkeypatch.setattr(gpu_check, "SOPA_BUILD_PATTERNS", "2-2_3-1")
    gpu_check.bank_build_times(report, cpu, ["torch"])  # (the torch backend: no build on this machine's time)
    (build,) = [row for row in report.builds if row.get("template", "").startswith("SoPa bank")]
    assert build["first_build_s"] > 0 and not build["one_call"] and build["way"].startswith("torch")
    (sopa,) = [row for row in report.speed if row["table"] == "SoPa vs BiLSTM"]
    assert sopa["one_call"] and sopa["one_call_speedup"] == 1.0  # (the bank in one call, timed against per length)
    assert not report.failures and len(calls) == 1 + 3 * 2 + 4 + 3 + 3
    assert gpu_check.auto_verdict(report) is None  # (no triton and cuda rows to compare here)
    for backend, ms in (("triton", 2.0), ("cuda", 1.0)):
        report.speed += [{"table": "template (64,1024,1024)", "template": k, "backend": backend,
                          "forward_backward_ms": ms} for k in "BCF"]
    verdict = gpu_check.auto_verdict(report)
    assert verdict is not None and not verdict["rule_holds"]
    assert verdict["triton_over_cuda_forward_backward"] == pytest.approx(2.0)
