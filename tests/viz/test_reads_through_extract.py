"""viz draws and explains what ``kleene.extract`` reads from a model: from ``kleene.nn`` it takes only the model
classes it accepts (and a checkpoint), and it calls no pattern group's or rule layer's internals."""

from __future__ import annotations

import ast
from pathlib import Path

VIZ = Path(__file__).resolve().parents[2] / "src" / "kleene" / "viz"
#: What viz may import from kleene.nn: the classes it accepts, the checkpoint it reads, SoPa's stand-in for zero,
#: and the eval-mode context it runs a model in (``kleene.nn.modes.inference``: no layer's internals).
ALLOWED_FROM_NN = {"SoPaClassifier", "RegexClassifier", "Checkpoint", "REFERENCE_ZERO", "inference"}
#: The layers' own calls and parts (kleene.extract reads them).
INTERNALS = {"groups", "transitions", "epsilon_constants", "arc_scores", "end_scores", "best_starts", "best_paths",
             "span_totals", "hard_automata", "read_back", "arc_refs"}


def _findings(source: str) -> tuple[set[str], list[tuple[int, str]]]:
    tree = ast.parse(source)
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kleene.nn")
        for alias in node.names
    }
    touched = [(n.lineno, n.attr) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in INTERNALS]
    return imported, touched


def test_the_scan_sees_an_internal_call() -> None:
    imported, touched = _findings("from kleene.nn.sopa import PatternGroup\nx = model.patterns.groups[0]\n")
    assert imported == {"PatternGroup"} and touched == [(2, "groups")]


def test_viz_reads_models_through_extract() -> None:
    for path in sorted(VIZ.glob("*.py")):
        imported, touched = _findings(path.read_text())
        assert imported <= ALLOWED_FROM_NN, f"{path.name} imports {sorted(imported - ALLOWED_FROM_NN)} from kleene.nn"
        assert not touched, f"{path.name} calls layer internals (ask kleene.extract): {touched}"
