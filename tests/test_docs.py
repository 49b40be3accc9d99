"""Docs that run: every ```python block of README.md and docs/*.md is executed, in order, one test per file, in a
fresh namespace and a temporary directory. A block that must not run is preceded by the line
``<!-- not run: REASON -->``, and every such marker must give a reason and stand right before a python block."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
MARKER = re.compile(r"<!--\s*not run\b(.*?)-->", re.DOTALL)
REASON = re.compile(r"^:\s*(\S.*?)\s*$", re.DOTALL)
#: Pages whose blocks a test of their own runs (in ``as_a_reader``'s conditions, every block, in order), with checks
#: of what the blocks computed: running them here too would do the same work twice.
RUN_ELSEWHERE = {
    ROOT / "docs" / "deploy.md": ROOT / "tests" / "deploy" / "test_docs_deploy.py",
    ROOT / "docs" / "prover.md": ROOT / "tests" / "rational" / "test_zoo.py",
}


def python_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """(1-based line of the fence, code, the not-run reason or None) of every ```python block."""
    text = path.read_text(encoding="utf-8")
    out = []
    for fence in FENCE.finditer(text):
        if fence.group(1).strip() != "python":
            continue
        before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = MARKER.fullmatch(before)
        reason = None
        if marker is not None:
            found = REASON.fullmatch(marker.group(1))
            reason = found.group(1) if found else ""
        out.append((text.count("\n", 0, fence.start()) + 1, fence.group(2), reason))
    return out


def documents_with_python() -> list[Path]:
    return [path for path in DOCUMENTS if python_blocks(path)]


def as_a_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The conditions a page's blocks run in: a temporary working directory (the examples write files) holding
    ``examples``, matplotlib without a display, and only kleene's own semirings registered (a page is read by a
    user in a fresh session: semirings that other tests registered are not there)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if (ROOT / "examples").is_dir():  # snippets may read the repository's examples by their relative path
        os.symlink(ROOT / "examples", tmp_path / "examples")
    from kleene.automata import semiring as semirings

    builtin = {key: value for key, value in semirings._BY_NAME.items() if type(value).__module__.startswith("kleene.")}
    monkeypatch.setattr(semirings, "_BY_NAME", builtin)


@pytest.mark.parametrize(
    "path", [p for p in documents_with_python() if p not in RUN_ELSEWHERE], ids=lambda p: str(p.relative_to(ROOT))
)
@pytest.mark.slow
def test_python_blocks_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    as_a_reader(tmp_path, monkeypatch)
    namespace: dict[str, object] = {"__name__": "__doc_snippet__"}
    ran = 0
    for line, code, reason in python_blocks(path):
        if reason is not None:
            continue
        name = f"{path.relative_to(ROOT)}, python block at line {line}"
        exec(compile(code, name, "exec"), namespace)
        ran += 1
    assert ran or all(reason for _, _, reason in python_blocks(path))


@pytest.mark.parametrize("page", RUN_ELSEWHERE, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_run_elsewhere_are_run_there(page: Path) -> None:
    """A page left out of ``test_python_blocks_run`` has python blocks, and its own test reads it as a reader does."""
    assert python_blocks(page)
    source = RUN_ELSEWHERE[page].read_text(encoding="utf-8")
    assert page.relative_to(ROOT).as_posix() in source and "as_a_reader(" in source


def test_readme_examples_write_the_drawing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for line, code, _ in python_blocks(ROOT / "README.md")[:3]:
        exec(compile(code, f"README.md, python block at line {line}", "exec"), namespace)
    assert (tmp_path / "B.svg").read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_not_run_markers_give_a_reason_and_precede_a_python_block(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    marked = {line for line, _, reason in python_blocks(path) if reason is not None}
    for marker in MARKER.finditer(text):
        line = text.count("\n", 0, marker.start()) + 1
        assert REASON.fullmatch(marker.group(1)), f"{path.name}:{line}: write <!-- not run: REASON -->"
        assert line + 1 in marked, f"{path.name}:{line}: a not-run marker must be the line before a ```python block"
    for line, _, reason in python_blocks(path):
        assert reason is None or reason, f"{path.name}:{line}: the not-run marker gives no reason"


def test_the_block_finder_reads_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n```python\nx = 1\n```\n\n<!-- not run: needs a GPU -->\n```python\ny = 2\n```\n"
        "<!-- not run -->\n```python\nz = 3\n```\n```py\nw = 4\n```\n",
        encoding="utf-8",
    )
    assert python_blocks(page) == [(3, "x = 1\n", None), (8, "y = 2\n", "needs a GPU"), (12, "z = 3\n", "")]
