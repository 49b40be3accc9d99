"""Every cell of docs/layer-semirings.md, recomputed (examples/layer_semirings.py) and compared with the file."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("layer_semirings", ROOT / "examples" / "layer_semirings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()


def _documented() -> dict[tuple[str, str], str]:
    rows = [line for line in (ROOT / "docs" / "layer-semirings.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| ") and not line.startswith("| layer")]  # fmt: skip
    cells = {}
    for row in rows:
        name, *values = [part.strip() for part in row.strip("|").split("|")]
        cells.update({(name, s): v for s, v in zip(GENERATOR.SEMIRINGS, values)})
    return cells


DOCUMENTED = _documented()


@pytest.mark.parametrize("semiring", GENERATOR.SEMIRINGS)
@pytest.mark.parametrize("name", list(GENERATOR.LAYERS))
def test_cell(name: str, semiring: str) -> None:
    assert GENERATOR.cell(name, semiring) == DOCUMENTED[(name, semiring)]


@pytest.mark.slow
def test_table_is_the_generated_one() -> None:
    assert len(DOCUMENTED) == len(GENERATOR.LAYERS) * len(GENERATOR.SEMIRINGS)
    assert GENERATOR.table() == (ROOT / "docs" / "layer-semirings.md").read_text(encoding="utf-8")
