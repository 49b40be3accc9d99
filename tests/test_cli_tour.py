"""The ``kleene`` command and its ``tour``: output, files, results checked against independent computations."""

from __future__ import annotations

import argparse
import importlib
import io
import itertools
import math
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import fields
from pathlib import Path

import graphviz
import pytest
from rich.console import Console

from kleene import __version__
from kleene.automata import KleeneError
from kleene.cli import SUBCOMMANDS, build_parser, main
from kleene.tour import SECTIONS, TourContext, random_environment, run_tour, section

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot binary is not installed")


def quiet_console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=120, color_system=None), buffer


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> tuple[TourContext, str]:
    console, buffer = quiet_console()
    context = run_tour(tmp_path_factory.mktemp("tour"), console=console, seed=3, quick=True)
    return context, buffer.getvalue()


@needs_dot
@pytest.mark.slow
def test_tour_writes_the_three_drawings(tour: tuple[TourContext, str]) -> None:
    context, output = tour
    assert [p.name for p in context.files][:3] == ["B.svg", "C.svg", "F.svg"]
    for path, caption in zip(context.files, ("Figure 1: B", "Figure 2: C", "Figure 4: F")):
        root = ET.parse(path).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert caption in [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert output.rstrip().endswith(str(context.files[-1]))
    assert f"Files written to {context.out.resolve()}" in output


@needs_dot
@pytest.mark.slow
def test_tour_proves_and_compiles_f(tour: tuple[TourContext, str]) -> None:
    context, _ = tour
    proofs = context.results["proofs"]
    assert proofs == {"rrnn_f_checked": True, "equivalent_to_figure_4": True, "lstm_refused": True}
    compiled = context.results["compiled"]
    assert compiled["max_error"] < 1e-12
    assert abs(compiled["forward"] - compiled["module"]) < 1e-12


@needs_dot
@pytest.mark.slow
def test_tour_prints_its_sections_in_order(tour: tuple[TourContext, str]) -> None:
    _, output = tour
    positions = [output.index(f"{number}. {title}") for number, (title, _) in enumerate(SECTIONS, start=1)]
    assert positions == sorted(positions) and len(positions) >= 5
    assert "B[the movie was] = (μ(movie) + μ(the)·φ(movie))·φ(was) + μ(was)" in output
    assert "equal after expansion ✓" in output


@needs_dot
@pytest.mark.slow
def test_tour_symbolic_score_is_equation_4(tour: tuple[TourContext, str]) -> None:
    context, _ = tour
    assert context.results["symbolic"]["B_matches_equation_4"] is True
    f_score = context.results["symbolic"]["F"]
    assert {str(s) for s in f_score.free_symbols} == {"gamma", "rho1", "rho2", "the", "movie"}


@needs_dot
@pytest.mark.slow
def test_tour_scores_agree_with_the_recurrences(tour: tuple[TourContext, str]) -> None:
    context, output = tour
    for name, (forward, paper) in context.results["numeric"].items():
        assert math.isclose(forward, paper, rel_tol=1e-12), name
        assert f"{forward:.6f}" in output
    prefixes, states = context.results["proposition_7"]
    assert len(prefixes) == len(context.sentence) and all(math.isclose(a, b) for a, b in zip(prefixes, states))


@needs_dot
@pytest.mark.slow
def test_tour_viterbi_path_is_the_best_path_of_c(tour: tuple[TourContext, str]) -> None:
    context, _ = tour
    env, words = context.results["env"], context.sentence
    # C's paths: stay in q0, take μ1 at i, stay in q1 (φ1), take μ2 at j > i, stay in q2 (φ2)
    best = max(
        env["mu1"][words[i]]
        * math.prod(env["phi1"][w] for w in words[i + 1 : j])
        * env["mu2"][words[j]]
        * math.prod(env["phi2"][w] for w in words[j + 1 :])
        for i, j in itertools.combinations(range(len(words)), 2)
    )
    path = context.results["viterbi"]
    assert math.isclose(float(path.weight), best, rel_tol=1e-12)
    assert [step.symbol for step in path.steps] == list(words)


def test_random_environment_is_seeded_and_in_range() -> None:
    assert random_environment(7) == random_environment(7) != random_environment(8)
    env = random_environment(7)
    numbers = [v for value in env.values() for v in (value.values() if isinstance(value, dict) else [value])]
    assert all(0.05 <= v <= 0.95 for v in numbers)


def test_a_missing_dot_is_a_clear_kleene_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_dot(*args: object, **kwargs: object) -> bytes:
        raise graphviz.ExecutableNotFound(("dot",))

    monkeypatch.setattr(graphviz.Digraph, "pipe", no_dot)
    console, _ = quiet_console()
    with pytest.raises(KleeneError, match=r"dot.*scripts/setup\.sh"):
        run_tour(tmp_path, console=console)


def test_sections_can_be_added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kleene.tour.SECTIONS", [])
    seen: list[str] = []

    @section("first")
    def first(context: TourContext) -> None:
        context.results["first"] = 1
        seen.append("first")

    @section("second")
    def second(context: TourContext) -> None:
        seen.append(f"second saw {context.results['first']}")

    console, buffer = quiet_console()
    run_tour(tmp_path / "new", console=console)
    assert seen == ["first", "second saw 1"] and "1. first" in buffer.getvalue() and (tmp_path / "new").is_dir()


def test_cli_tour_is_a_console_script_command() -> None:
    """The tour itself runs in-process in the ``tour`` fixture; here only the console entry point."""
    result = subprocess.run(
        [sys.executable, "-m", "kleene.cli", "tour", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "--quick" in result.stdout and "SoPa" in result.stdout


def test_cli_reports_errors_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert main(["tour", "--out", str(blocker / "tour")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kleene tour: error:") and "a-file" in err and "Traceback" not in err


def test_cli_version_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as version:
        main(["--version"])
    assert version.value.code == 0 and capsys.readouterr().out.strip() == f"kleene {__version__}"
    with pytest.raises(SystemExit) as missing:
        main([])
    assert missing.value.code == 2 and "COMMAND" in capsys.readouterr().err
    with pytest.raises(SystemExit) as unknown:
        main(["no-such-command"])
    assert unknown.value.code == 2


def test_every_subcommand_module_registers_itself() -> None:
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(subparsers.choices) == SUBCOMMANDS
    for name in SUBCOMMANDS:
        assert callable(importlib.import_module(f"kleene.cli.{name}").register)
        assert callable(subparsers.choices[name].get_default("handler")), name


@needs_dot
@pytest.mark.slow
def test_tour_trains_and_extracts(tour: tuple[TourContext, str]) -> None:
    context, _ = tour
    trained = context.results["trained"]
    assert trained["extraction"]["max_abs_error"] < 1e-5  # float32 layer vs float64 automata
    assert trained["metrics"]["dev_accuracy"] > 0.6  # chance is 0.5; measured 0.66 after the quick tour's 100 steps


@needs_dot
@pytest.mark.slow
def test_tour_flattens_a_stack(tour: tuple[TourContext, str]) -> None:
    context, output = tour
    assert context.results["flatten"] == {"holds": True, "gated_refused": True}
    assert "holds (Tzeng equivalence" in output


@needs_dot
@pytest.mark.slow
def test_tour_trains_sopa_and_writes_its_report(tour: tuple[TourContext, str]) -> None:
    context, output = tour
    sopa = context.results["sopa"]
    # max-times pattern scores are products of at most a few dozen float32 factors <= 1: float32 rounding ~1e-6
    assert sopa["extraction"]["max_abs_error"] < 1e-5
    assert (context.out / "sopa-report.html").stat().st_size > 10_000
    assert sopa["metrics"]["dev_accuracy"] > 0.55  # chance is 0.5; the quick tour trains 50 steps
    assert len(sopa["explanation"].contributions) == 3
    report = context.out / "sopa-report.html"
    assert report in context.files and "<svg" in report.read_text()
    assert "explain 'a gorgeous , witty , seductive movie'" in output
    # the printed command line writes the same report: its flags parse into the quick tour's options
    command = re.search(r"kleene (report \S+ -o \S+(?: --[a-z-]+ \S+)*)", " ".join(output.split()))
    assert command is not None
    args = build_parser().parse_args(command.group(1).split())
    options = context.report_options()
    assert options.patterns == 4 and args.fidelity_documents == options.fidelity_documents == 100
    assert all(getattr(args, f.name) == getattr(options, f.name) for f in fields(options) if hasattr(args, f.name))


@needs_dot
@pytest.mark.slow
def test_tour_trains_a_language_model_and_generates(tour: tuple[TourContext, str]) -> None:
    context, output = tour
    result = context.results["language_model"]
    # 67 vocabulary entries: a uniform guess costs log2(67) = 6.07 bits; the quick tour's 60 steps reach about 3.7
    assert result["metrics"]["dev_bits_per_token"] < 5.0
    assert set(result["samples"]) == {"greedy", "sample", "beam"}
    # no stop token: every one of the 120 steps generates a token, and every token decodes to at least one character
    assert all(len(sample) >= 120 for sample in result["samples"].values())
    assert "--strategy beam" in output


@needs_dot
@pytest.mark.slow
def test_tour_shows_the_algebra(tour: tuple[TourContext, str]) -> None:
    context, output = tour
    algebra = context.results["algebra"]
    # max-plus: the highest weight first; the very-loop costs 0.25 a turn
    best = [(" ".join(s), w) for s, w in algebra["best"]]
    assert best[:2] == [("the good movie", -0.5), ("the very good movie", -0.75)]
    assert best[2] in {("a fine film", -1.0), ("a great film", -1.0)}  # a tie
    assert algebra["reduced"] == (4, 3, True)  # automaton F has Hankel rank 3
    assert "to_regex gives it back" in output
    # at scale: the sparse epsilon removal keeps every string's score and the total mass (log weights of size ~1-20,
    # a closure whose sums converge geometrically at rate <= 0.9: float64 agreement to 1e-9 is loose)
    scale = context.results["algebra_scale"]
    assert scale["states"] == 5000 and scale["epsilons_left"] is False
    assert scale["gap"] < 1e-9
    assert abs(scale["pathsums"][0] - scale["pathsums"][1]) < 1e-9
    assert "remove_epsilon (sparse closure)" in " ".join(output.split())  # the console wraps long lines


@needs_dot
@pytest.mark.slow
def test_tour_extracts_a_layer_trained_in_the_log_semiring(tour: tuple[TourContext, str]) -> None:
    context, _ = tour
    extraction = context.results["semiring_layer"]["extraction"]
    assert extraction["semiring"] == "log" and extraction["automata"] == 16
    assert extraction["max_abs_error"] < 1e-5  # float32 layer vs float64 automata, log-values of order 10


@pytest.mark.slow
def test_tour_exports_the_trained_model_and_onnxruntime_agrees(tour: tuple[TourContext, str]) -> None:
    context, output = tour
    deploy = context.results["deploy"]
    assert (context.out / "rrnn-b-sst2.onnx").stat().st_size > 1000 and (context.out / "rrnn-b-sst2.json").is_file()
    # float32 logits of a one-layer RRNN over at most ~60 steps: both runtimes round differently, ~1e-6 of the scale
    assert deploy["exported_error"] < 1e-4 and deploy["onnx_error"] < 1e-4
    assert deploy["agree"] == deploy["documents"] > 50
    assert "onnxruntime: largest difference" in output
