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
