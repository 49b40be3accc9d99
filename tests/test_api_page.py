"""The public API page: docs/api.md is what scripts/api_page.py writes from the packages' ``__all__`` lists, and
every public function and class it lists has its own docstring (functions: one that states their errors or
preconditions, in a ``Raises:`` or ``Caution:`` section)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _api_page() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_page", ROOT / "scripts" / "api_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("api_page", module)
    spec.loader.exec_module(module)
    return module


API = _api_page()
STATES_ERRORS = re.compile(r"^\s*(Raises|Caution):", re.MULTILINE)


def _public() -> list[tuple[str, object]]:
    return [
        (f"{package}.{name}", getattr(module, name))
        for package in API.PACKAGES
        for module in [importlib.import_module(package)]
        for name in API.public_names(module)
    ]


def test_the_api_page_is_up_to_date() -> None:
    assert (ROOT / "docs" / "api.md").read_text(encoding="utf-8") == API.render(), (
        "docs/api.md is out of date: run python scripts/api_page.py"
    )


def test_every_public_class_and_function_has_its_own_docstring() -> None:
    missing = [name for name, value in _public() if API.kind(value) != "value" and not API.own_docstring(value)]
    assert not missing, f"public names without a docstring of their own: {missing}"


def test_every_public_function_states_its_errors_or_preconditions() -> None:
    silent = [
        name
        for name, value in _public()
        if API.kind(value) == "function" and not STATES_ERRORS.search(API.own_docstring(value))
    ]
    assert not silent, f"public functions whose docstring has no Raises: or Caution: section: {silent}"


def test_exports_exist_and_are_listed_once() -> None:
    for package in API.PACKAGES:
        module = importlib.import_module(package)
        names = API.public_names(module)
        assert len(names) == len(set(names)), package
        assert all(hasattr(module, name) for name in names), package


@pytest.mark.parametrize(
    ("package", "name", "home"),
    [
        ("kleene.automata", "KernelOp", "kleene.automata.semiring"),
        ("kleene.automata", "KernelAlgebra", "kleene.automata.semiring"),
        ("kleene.extract", "check_layer", "kleene.extract.layers"),
        ("kleene.extract", "arc_type_usable", "kleene.extract.core"),
    ],
)
def test_kernel_internals_are_not_exported_but_stay_importable(package: str, name: str, home: str) -> None:
    assert name not in importlib.import_module(package).__all__
    assert hasattr(importlib.import_module(home), name)


def test_removed_shims_are_gone() -> None:
    import kleene.compile
    import kleene.extract

    with pytest.raises(AttributeError):
        kleene.compile.prove  # noqa: B018 - the prover lives in kleene.rational
    assert not hasattr(kleene.extract, "openfst_arc_type")
    assert importlib.util.find_spec("kleene.automata.errors") is None


def test_the_page_never_holds_a_runnable_python_block() -> None:
    assert "```python" not in API.render()
