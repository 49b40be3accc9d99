"""A rule whose automaton would be huge is refused at once, naming regex's budget (issue 23: the rule
"(bad*){3000}" hung ``kleene train regex`` for minutes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kleene.errors import RuleError
from kleene.nn.rules import load_rules, parse_rules


@pytest.mark.slow
def test_a_huge_rule_is_a_rule_error_naming_max_arcs(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match=r"label 'NEG', rule 1 \('\(bad\*\)\{3000\}'\): .*max_arcs=100000"):
        parse_rules({"NEG": ["(bad*){3000}"], "POS": ["good"]})
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"NEG": ["(bad*){3000}"]}), encoding="utf-8")
    with pytest.raises(RuleError, match="max_arcs"):
        load_rules(path)
