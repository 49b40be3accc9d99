"""``kleene prove``: exit codes, JSON keys, drawing, user files, the regenerated Table 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kleene.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["prove", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("name", ["sru", "rrnn-b-maxplus", "rrnn-f", "isan"])
def test_proved_entries_exit_0_with_the_json_keys(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, out, _ = run(capsys, name, "--json")
    doc = json.loads(out)
    assert code == 0
    assert doc["rational"] is True and doc["checked"] is True
    assert {"automata", "states", "semiring"} <= set(doc) and isinstance(doc["states"], list)
    assert doc["numeric"]["ok"] is True


@pytest.mark.parametrize("name", ["lstm", "gru", "elman", "sru-v2", "rcnn-gated"])
def test_refused_entries_exit_1_with_a_reason(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, out, _ = run(capsys, name, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["rational"] is False and "appears inside" in doc["reason"]


def test_flags_reach_the_builders(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "qrnn", "--window", "3", "--alphabet", "a,b", "--json")
    assert code == 0 and json.loads(out)["states"] == [13]
    code, out, _ = run(capsys, "rcnn", "--order", "4", "--json")
    assert code == 0 and json.loads(out)["states"] == [5]
    code, out, _ = run(capsys, "sopa", "--semiring", "max-plus", "--length", "2", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["semiring"] == "max-plus" and doc["states"] == [4]
    code, out, _ = run(capsys, "isan", "--dim", "3", "--json")
    assert code == 0 and json.loads(out)["states"] == [4]


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "no-such-model")
    assert code == 2 and "neither a zoo name" in err
    code, _, err = run(capsys, "sru", "--window", "3")
    assert code == 2 and "--window does not apply to sru" in err


def test_user_file_and_certificate_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "mine.py"
    source.write_text(
        "import sympy\n"
        "from kleene.rational import Recurrence\n"
        "recurrence = Recurrence('mine', 'max-plus')\n"
        "c = recurrence.state('c')\n"
        "f, u = recurrence.inputs('f u')\n"
        "recurrence.update(c, sympy.Max(c + f, u, c + u))\n"
        "recurrence.output('c', c)\n"
    )
    code, out, _ = run(capsys, str(source), "--certificate", str(tmp_path / "cert.json"))
    assert code == 0 and "mine: rational over the max-plus semiring" in out
    from kleene.rational import Certificate

    assert Certificate.from_json((tmp_path / "cert.json").read_text()).check()
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    code, _, err = run(capsys, str(bad))
    assert code == 2 and "must define `recurrence`" in err


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' binary not installed")
def test_draw_writes_svg(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "rrnn-c", "--draw", str(tmp_path))
    assert code == 0 and (tmp_path / "rrnn-c-c.svg").is_file() and "wrote" in err


def test_all_markdown_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "--all", "--markdown", "--no-cross-check", "--out", str(tmp_path / "t.md"))
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].startswith("| Model | Recurrence")
    from kleene.rational.zoo import REFUSED, ZOO

    assert len(lines) == 2 + len(ZOO)
    assert sum("| refused |" in line for line in lines) == len(REFUSED)
    assert sum("proved, checked" in line for line in lines) == len(ZOO) - len(REFUSED)
    assert (tmp_path / "t.md").read_text().strip() == out.strip()
