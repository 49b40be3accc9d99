"""The README cannot rot: its opening commands, its install section and its package table (its Python examples run in
tests/test_docs.py)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_opens_with_the_two_commands() -> None:
    first = re.search(r"```(\w*)\n(.*?)```", README, flags=re.DOTALL)
    assert first is not None and first.group(1) == "bash"
    commands = [line.split("#")[0].strip() for line in first.group(2).splitlines()]
    assert commands == ["bash scripts/tour.sh", "bash scripts/test.sh"]
    for script in ("scripts/tour.sh", "scripts/test.sh"):
        assert (Path(__file__).resolve().parents[1] / script).is_file()


def test_install_section_declares_the_tested_torch_range() -> None:
    """The README's install section names pip, the CPU-only index and the torch range of the package metadata, and
    the version the tests pin lies in that range (its Python examples run in tests/test_docs.py)."""
    root = Path(__file__).resolve().parents[1]
    section = README.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "pip install ." in section and "--index-url https://download.pytorch.org/whl/cpu" in section
    requirement = re.search(r'"torch(>=[\d.]+,<[\d.]+)"', (root / "pyproject.toml").read_text())
    assert requirement is not None, "pyproject.toml must bound torch from both sides"
    assert f"torch{requirement.group(1)}" in section
    low, high = re.findall(r"[\d.]+", requirement.group(1))
    pinned = re.search(r"^torch==([\d.]+)$", (root / "constraints.txt").read_text(), flags=re.MULTILINE)
    assert pinned is not None

    def version(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split("."))

    assert version(low) <= version(pinned.group(1)) < version(high)
    for program in ("`dot`", "`g++`", "Chromium"):
        assert program in section


def test_readme_packages_exist() -> None:
    table = re.findall(r"^\| `(kleene(?:\.\w+)*)` \|", README, flags=re.MULTILINE)
    assert "kleene.automata" in table and "kleene.cli" in table
    for module in table:
        importlib.import_module(module)
