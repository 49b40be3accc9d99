"""The zoo: written in the recurrence language, named as the CLI promises, and faithful to the papers."""

from __future__ import annotations

import inspect
import itertools
import runpy
import shutil
from pathlib import Path

import numpy as np
import pytest

from kleene.automata import EPSILON, WFSA, get_semiring
from kleene.rational import Certificate, Recurrence, prove, zoo
from kleene.rational.certificate import random_environment
from tests.test_docs import ROOT, as_a_reader, python_blocks

PROVER_DOC = ROOT / "docs" / "prover.md"

CLI_NAMES = [
    "sru",
    "t-rnn",
    "scrn",
    "rrnn-b",
    "rrnn-b-maxplus",
    "rrnn-c",
    "rrnn-f",
    "rcnn",
    "isan",
    "elman-linear",
    "qrnn",
    "t-lstm",
    "t-gru",
    "sopa",
    "cnn",
    "lstm",
    "gru",
    "elman",
    "sru-v2",
    "rcnn-gated",
]


def test_every_issue_name_is_in_the_zoo_and_builds_a_recurrence() -> None:
    assert set(CLI_NAMES) <= set(zoo.ZOO)
    for name, builder in zoo.ZOO.items():
        assert isinstance(builder(), Recurrence), name


def test_zoo_module_builds_no_automata() -> None:
    """The zoo states recurrences only; automata come from the general construction."""
    source = inspect.getsource(zoo)
    assert "kleene.automata" not in source and "add_arc(" not in source and "add_state(" not in source


def test_example_6_recurrence_matches_equation_6() -> None:
    """Eq. 6: c_t = sum_j u_j prod_{k>j} f_k, with u = (1-f) g."""
    rec = zoo.example6()
    rng = np.random.default_rng(0)
    env = random_environment(rec, ["a", "b"], rng)
    f, g = env["f"], env["g"]
    for xs in itertools.product("ab", repeat=4):
        u = [(1 - f[x]) * g[x] for x in xs]
        eq6 = sum(u[j] * np.prod([f[xs[k]] for k in range(j + 1, 4)]) for j in range(4))
        assert rec.run(list(xs), env)[-1]["c"] == pytest.approx(eq6)


def _pattern_automaton(length: int, semiring: str) -> WFSA:
    """A SoPa pattern drawn by hand from SoPa §3.1 (test oracle only): a chain with self-loops and epsilons."""
    w = WFSA(semiring)
    states = [w.add_state(f"s{j}") for j in range(length + 1)]
    w.set_initial(states[0])
    w.set_final(states[-1])
    for j in range(1, length + 1):
        w.add_arc(states[j - 1], states[j], "a", f"m{j}(alpha)")
        w.add_arc(states[j - 1], states[j], "b", f"m{j}(alpha)")
        w.add_arc(states[j], states[j], "a", f"s{j}(alpha)")
        w.add_arc(states[j], states[j], "b", f"s{j}(alpha)")
        w.add_arc(states[j - 1], states[j], EPSILON, f"e{j}")
    return w


@pytest.mark.parametrize("semiring", ["max-times", "max-plus", "real"])
def test_sopa_document_score_is_the_sum_over_all_spans(semiring: str) -> None:
    """doc_t = ⊕ over spans x_{i+1..j}, 0 ≤ i ≤ j ≤ t, of the pattern's exact-match score (SoPa §3.2 search)."""
    length = 2
    rec = zoo.sopa(length, semiring)
    cert = prove(rec)
    assert isinstance(cert, Certificate)
    s = get_semiring(semiring)
    rng = np.random.default_rng(1)
    env, (wenv,) = cert.environments(rng, ["a", "b"])
    pattern = _pattern_automaton(length, semiring)
    penv = dict(env)
    for xs in itertools.product("ab", repeat=4):
        spans = [pattern.score(list(xs[i:j]), env=penv) for i in range(5) for j in range(i, 5)]
        total = s.sum(np.array(spans, dtype=float))
        assert rec.run(list(xs), env)[-1]["doc"] == pytest.approx(float(total))
        assert cert.automata[0].wfsa.score(list(xs), env=wenv) == pytest.approx(float(total))


def test_rrnn_f_recurrence_matches_the_forward_equations_of_5_1() -> None:
    """§5.1's z-equations, run directly: F[x; t] = rho1 z1 + rho2 z2 with z3 = gamma."""
    rec = zoo.rrnn_f()
    env = random_environment(rec, ["a", "b"], np.random.default_rng(2))
    u1 = {x: (1 - env["f1"][x]) * env["w1"][x] for x in "ab"}
    u2 = {x: (1 - env["f2"][x]) * env["w2"][x] for x in "ab"}
    for xs in itertools.product("ab", repeat=3):
        z1 = z2 = 0.0
        for x in xs:
            z1, z2 = z1 * env["f1"][x] + u1[x], z2 * env["f2"][x] + (z1 + env["r"]) * u2[x]
        assert rec.run(list(xs), env)[-1]["c"] == pytest.approx(env["p1"] * z1 + env["p2"] * z2)


@pytest.mark.slow
def test_docs_prover_code_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python blocks of docs/prover.md run in sequence, as a reader runs them (``as_a_reader``: so the document
    cannot rot), and the certificate they build is checked (``tests/test_docs.py`` leaves this page to this test)."""
    blocks = [code for _, code, reason in python_blocks(PROVER_DOC) if reason is None]
    assert len(blocks) == len(python_blocks(PROVER_DOC)) == 4
    as_a_reader(tmp_path, monkeypatch)
    namespace: dict[str, object] = {"__name__": "__doc_snippet__"}
    for block in blocks:
        if shutil.which("dot") is None:
            block = block.replace('cert.draw("out/")', "None")
        exec(compile(block, "docs/prover.md", "exec"), namespace)
    assert namespace["cert"].checked  # type: ignore[attr-defined]


def test_example_script_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("dot") is None:
        pytest.skip("graphviz 'dot' binary not installed (the example draws)")
    script = Path(__file__).parents[2] / "examples" / "prove_zoo.py"
    runpy.run_path(str(script), run_name="not-main")["main"](tmp_path)
    out = capsys.readouterr().out
    assert "re-checked from stored data: True" in out
    assert out.count("proved, checked=True") == len(zoo.ZOO) - len(zoo.REFUSED)
    assert (tmp_path / "my-bigram-y.svg").is_file()


def test_zoo_names_follow_the_semiring_not_its_spelling() -> None:
    """The paper's forms keep the paper's names whatever alias names their semiring; the others carry the
    semiring's own name (``Recurrence.in_paper_semiring``, not a comparison of names)."""
    assert zoo.isan(2, semiring="probability").name == "isan-2"  # an alias of real
    assert zoo.rcnn(2, semiring="tropical").name == "rcnn-2-min-plus"
    log = zoo.isan(2, semiring="log")
    assert (log.name, log.in_paper_semiring, log.doc.endswith(" in log")) == ("isan-2-log", False, True)
