"""The README cannot rot: its opening commands, its Python examples (run here) and its package table."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def test_readme_opens_with_the_two_commands() -> None:
    first = re.search(r"```(\w*)\n(.*?)```", README, flags=re.DOTALL)
    assert first is not None and first.group(1) == "bash"
    commands = [line.split("#")[0].strip() for line in first.group(2).splitlines()]
    assert commands == ["bash scripts/tour.sh", "bash scripts/test.sh"]
    for script in ("scripts/tour.sh", "scripts/test.sh"):
        assert (Path(__file__).resolve().parents[1] / script).is_file()


def test_readme_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = code_blocks("python")
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)  # the examples write files
    namespace: dict[str, object] = {}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"README.md python block {number}", "exec"), namespace)
    assert (tmp_path / "B.svg").read_text().lstrip().startswith("<?xml")


def test_readme_packages_exist() -> None:
    table = re.findall(r"^\| `(kleene(?:\.\w+)*)` \|", README, flags=re.MULTILINE)
    assert "kleene.automata" in table and "kleene.cli" in table
    for module in table:
        importlib.import_module(module)
