"""No code in src/ switches on a semiring's name: what differs between semirings is asked of the semiring
(``probability_storage``, ``log_weights``, ``best``, ...). A comparison of any expression with a string literal
that names a registered semiring (or one of its aliases), in ``==``, ``!=``, ``in`` or a ``match`` case, is such a
switch."""

from __future__ import annotations

import ast
from pathlib import Path

from kleene.automata.semiring import SEMIRINGS

SRC = Path(__file__).resolve().parents[1] / "src" / "kleene"
#: The authors' original code, kept as they wrote it (converted checkpoints are read through it).
EXEMPT = ("nn/original/",)
NAMES = frozenset(n for s in SEMIRINGS for n in (s.name, *s.aliases))


def _literals(node: ast.AST) -> list[str]:
    """The string literals of a comparison operand: a constant, or the elements of a tuple/list/set display."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def name_switches(source: str) -> list[tuple[int, str]]:
    """(line, literal) of every comparison or match case against a semiring's name in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        operands: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, sides, sides[1:]):
                if isinstance(op, (ast.Eq, ast.NotEq)):
                    operands += [left, right]
                elif isinstance(op, (ast.In, ast.NotIn)):  # x in ("log", ...); not a key test "bool" in node
                    operands.append(right)
        elif isinstance(node, ast.MatchValue):
            operands = [node.value]
        found += [(node.lineno, s) for o in operands for s in _literals(o) if s in NAMES]
    return found


def test_the_scan_finds_a_switch():
    sample = (
        'if semiring == "real":\n    pass\nok = name in ("log", "tropical")\nmatch s.name:\n    case "max-plus": pass\n'
    )
    assert name_switches(sample) == [(1, "real"), (3, "log"), (3, "tropical"), (5, "max-plus")]
    assert name_switches('x = get_semiring("real")\nif kind == "B":\n    pass\nif "bool" in node:\n    pass\n') == []


def test_no_code_switches_on_a_semiring_name():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith(EXEMPT):
            continue
        found += [f"{relative}:{line}: {literal!r}" for line, literal in name_switches(path.read_text())]
    assert not found, "semiring-name switches (ask the semiring instead):\n" + "\n".join(found)
