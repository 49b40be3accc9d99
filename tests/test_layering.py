"""The architecture's one rule: imports only go down the layers, and kleene.rational loads no torch.

Layers, bottom to top: errors < automata < rational < data < compile < nn < extract < viz < bench, tour < cli.
Every import statement counts, at module level or inside a function (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "kleene"
LAYERS = ["errors", "automata", "rational", "data", "compile", "nn", "extract", "viz", "bench|tour|gpu_check", "cli"]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names.split("|")}


def _layer(module: str) -> str | None:
    """The top-level kleene package of a dotted module name (None for ``kleene`` itself or other packages)."""
    parts = module.split(".")
    if parts[0] != "kleene" or len(parts) < 2:
        return None
    return parts[1]


def _resolve(node: ast.ImportFrom, package: list[str]) -> str:
    if node.level == 0:
        return node.module or ""
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: Path) -> list[tuple[int, str]]:
    relative = path.relative_to(SRC.parent).with_suffix("")
    package = list(relative.parts[:-1])  # a module's package; for __init__ the package itself
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node, package)
            found.append((node.lineno, module))
            # `from kleene import nn` imports the subpackage nn
            if module == "kleene":
                found += [(node.lineno, f"kleene.{alias.name}") for alias in node.names]
    return found


def _upward_imports() -> list[str]:
    violations = []
    for path in sorted(SRC.rglob("*.py")):
        own = _layer(".".join(path.relative_to(SRC.parent).with_suffix("").parts))
        if own is None or own not in RANK:
            continue
        for line, module in _imports(path):
            target = _layer(module)
            if target is not None and target in RANK and RANK[target] > RANK[own]:
                violations.append(f"{path.relative_to(SRC.parent)}:{line} ({own}) imports {module} ({target})")
    return violations


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in SRC.iterdir() if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    packages -= {"__init__.py", "py.typed"}
    unknown = {p.removesuffix(".py") for p in packages} - set(RANK) - {"__init__"}
    assert not unknown, f"give these a layer in LAYERS: {sorted(unknown)}"


def test_imports_only_go_down() -> None:
    violations = _upward_imports()
    assert not violations, "upward imports:\n" + "\n".join(violations)


def test_the_checker_sees_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "kleene"
    (fake / "automata").mkdir(parents=True)
    (fake / "automata" / "bad.py").write_text("def f():\n    from kleene.nn import sopa\n")
    (fake / "automata" / "good.py").write_text("from ..errors import KleeneError\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", fake)
    assert _upward_imports() == ["kleene/automata/bad.py:2 (automata) imports kleene.nn (nn)"]


def test_rational_loads_no_torch() -> None:
    code = "import sys, kleene.rational; sys.exit(1 if 'torch' in sys.modules else 0)"
    loads_torch = subprocess.run([sys.executable, "-c", code], check=False).returncode != 0
    assert not loads_torch, "import kleene.rational loads torch"
