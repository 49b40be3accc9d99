"""The benchmark's machine description and table (no timing: the benchmark itself is a command)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kleene import bench


def test_cache_sizes_from_sysfs() -> None:
    assert bench._size_bytes("32768K\n") == 32 << 20
    assert bench._size_bytes("2M") == 2 << 20
    assert bench._size_bytes("512") == 512
    llc = bench.last_level_cache_bytes()
    if not Path("/sys/devices/system/cpu/cpu0/cache/index0/level").exists():
        pytest.skip("no sysfs cache description here")
    assert llc is not None and llc >= 1 << 20  # a last-level cache of at least 1 MiB on any machine that has sysfs
    assert bench.cpu_model()


def test_rows_show_the_dram_floor_and_the_backward() -> None:
    record = {
        "automaton": "B",
        "shape": [32, 256, 512],
        "pass": bench.BOTH,
        "kernel_ms": 6.0,
        "naive_ms": 12.0,
        "floor_ms": 2.0,
        "dram_floor_ms": 4.0,
        "backward": "checkpoints",
    }
    row = bench.format_row(record)
    assert row.split()[4:8] == ["2.00", "3.00", "4.00", "1.50"] and row.endswith("  checkpoints")
    assert len(bench.HEADER.split()) == len(row.split()) + 2  # "kernel ms" and "dram ms" are two words each
    layer = {**record, "dram_floor_ms": None, "backward": None, "floor_ms": None}
    assert bench.format_row(layer).split()[5:8] == ["-", "-", "-"]


@pytest.mark.slow
def test_every_layer_row_runs_against_its_own_projection(capsys: pytest.CaptureFixture[str]) -> None:
    """Each registry layer's row at a tiny shape (torch backend: no compiler needed): the layer and the projection
    closure run on the layer's own weights, forward and forward+backward, and the row shows layer/GEMM."""
    records = bench.layer_records((2, 3, 8), [bench.FORWARD, bench.BOTH], "torch", 0.0, rnns="")
    cases = {case.label: case for case in bench.layer_cases()}
    labels = list(cases)
    assert [r["automaton"] for r in records] == [f"layer {label}" for label in labels for _ in range(2)]
    assert {"QRNN f K1", "QRNN ifo K2", "ISAN", "ISAN d256", "SRU", "RRNN(F)", "RCNN"} <= set(labels)
    assert (cases["ISAN"].hidden, cases["ISAN d256"].hidden) == (32, 256)
    for record in records:
        assert record["kernel_ms"] > 0 and record["gemm_ms"] > 0
        case = cases[record["automaton"].removeprefix("layer ")]
        hidden = 8 if case.hidden is None else case.hidden
        assert record["shape"] == [2, 3, hidden] and record["input_size"] == 8
    row = capsys.readouterr().out.splitlines()[0]
    assert row.startswith("layer RRNN(B)") and f"{records[0]['kernel_ms'] / records[0]['gemm_ms']:.2f}" in row


def test_model_build_seconds_counts_the_kernels_share() -> None:
    from kleene.compile.runtime.cpu import compiler

    try:
        compiler()
    except Exception as exc:  # noqa: BLE001 - the reason is shown in the skip message
        pytest.skip(f"no C++ compiler: {exc}")
    total, kernels = bench.model_build_seconds("rrnn-b")
    assert 0 < kernels < total
    total, kernels = bench.model_build_seconds("isan")  # the dense path's kernel
    assert 0 < kernels < total
    total, kernels = bench.model_build_seconds("cnn")  # no kernel
    assert total > 0 and kernels == 0


def test_unknown_section() -> None:
    from kleene.errors import ArgumentError

    with pytest.raises(ArgumentError, match="bench section 'x'"):
        bench.run(section="x")
    with pytest.raises(ArgumentError, match=r"bench layers \['ISAN 512'\] are not layer rows"):
        bench.run(section="layers", layers=["ISAN", "ISAN 512"])


def test_cpu_time_needs_one_thread() -> None:
    from kleene.errors import ArgumentError

    with pytest.raises(ArgumentError, match="needs threads=1, not 2"):
        bench.run(cpu_time=True, threads=2)
