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


# ----------------------------------------------------------------------------------------------------------------------
# Inside a package: no import cycle, no private name of another module


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """The line numbers inside ``if TYPE_CHECKING:`` blocks (imports for type checkers only: they never run)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _module_of(path: Path, root: Path) -> str:
    """The dotted name of ``path`` in the package tree ``root`` (e.g. ``.../src/kleene/automata``)."""
    parts = list(path.relative_to(root.parents[1]).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, root: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, imported names) of every import that runs (module level or in a function); ``from p import m``
    of a submodule m counts as an import of ``p.m``."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    package = _module_of(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or "" if node.level == 0 else ".".join(
                package[: len(package) - (node.level - 1)] + ([node.module] if node.module else []))
            found.append((node.lineno, base, [alias.name for alias in node.names]))
    return found


def _graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same tree it imports (a package's ``__init__`` is not a dependency of its
    submodules: Python runs it first, but it only gathers names)."""
    modules = {_module_of(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for _, target, names in _imported_modules(path, root):
            candidates = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules] or [target]
            graph[module].update(c for c in candidates if c in modules and c != module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _private_imports(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, module, names in _imported_modules(path, root):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and module.startswith(_module_of(root / "__init__.py", root)):
                found.append(f"{path.relative_to(root.parent)}:{line} imports {', '.join(private)} from {module}")
    return found


def test_automata_has_no_import_cycle() -> None:
    graph = _graph(SRC / "automata")
    assert "kleene.automata.sparse" in graph["kleene.automata.algorithms"]  # the graph sees the package's imports
    graph.pop("kleene.automata", None)  # the package's __init__ gathers the public names; nothing imports it back
    for targets in graph.values():
        targets.discard("kleene.automata")
    assert _cycles(graph) == []


def test_automata_imports_no_private_name_of_another_module() -> None:
    assert _private_imports(SRC / "automata") == []


def test_the_graph_checks_see_a_cycle_and_a_private_import(tmp_path: Path) -> None:
    root = tmp_path / "kleene"
    (root / "automata").mkdir(parents=True)
    (root / "automata" / "__init__.py").write_text("")
    (root / "automata" / "a.py").write_text("from .b import f\n")
    (root / "automata" / "b.py").write_text("def f():\n    from kleene.automata import a\n")
    (root / "automata" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\nfrom .b import _g\n")
    graph = _graph(root / "automata")
    assert _cycles(graph) == [["kleene.automata.a", "kleene.automata.b"]]
    assert "kleene.automata.a" not in graph["kleene.automata.c"]  # type-checking imports never run
    assert _private_imports(root / "automata") == ["automata/c.py:4 imports _g from kleene.automata.b"]
