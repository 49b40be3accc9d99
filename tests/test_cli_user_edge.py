"""Issue 23: the CLI on a user's own files, protecting the user's work. Each failure the issue lists is a test here:
own CSV files with a header, language models on plain text, unseen labels, missing and binary files; checkpoints
never overwritten without --overwrite, output paths checked before the work, a missing `dot` in one line, --set
keys from the registry, --epochs against --max-steps, generate's help, start-up imports, readable drawings."""

from __future__ import annotations

import inspect
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from kleene.cli import main
from kleene.nn.registry import registered_models
from tests.interpreters import clean_env

WORDS = ["good", "bad", "film", "plot", "great", "dull", "a", "the", "fine", "boring"]
TINY = ["--set", "hidden_size=3", "--set", "num_layers=1", "--set", "embedding_dim=4", "--set", "mlp_hidden=3"]
QUIET = ["--pretrained", "none", "--no-progress", "--batch-size", "16"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``kleene argv``, argparse's exits included."""
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(code: int, err: str) -> str:
    """The single error line of a kleene error (exit 1 or prove's 2, never the internal error's 70)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code in (1, 2) and len(lines) == 1 and "error" in lines[0] and "internal" not in lines[0], err
    return lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """topics.csv (header id,text,label; 3 topics), other.tsv (labels food, cars the model never saw), story.txt."""
    folder = tmp_path_factory.mktemp("own")
    rng = random.Random(0)
    with (folder / "topics.csv").open("w") as out:
        out.write("id,text,label\n")
        for i in range(120):
            out.write(f"{i},{' '.join(rng.choice(WORDS) for _ in range(5))},{['sport', 'art', 'tech'][i % 3]}\n")
    with (folder / "other.tsv").open("w") as out:
        for i in range(30):
            out.write(f"{['sport', 'food', 'cars'][i % 3]}\t{' '.join(rng.choice(WORDS) for _ in range(4))}\n")
    (folder / "story.txt").write_text("once upon a time there was a cat who sat on a mat.\n" * 30)
    return folder


@pytest.fixture(scope="module")
def checkpoint(files: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("runs") / "topics"
    argv = ["train", "rrnn-b", "--data", str(files / "topics.csv"), "--out", str(out), "--max-steps", "2"]
    assert main([*argv, *QUIET, *TINY]) == 0
    return out


# -- own data -----------------------------------------------------------------------------------------------------
def test_csv_with_id_text_label_header_trains_three_classes(checkpoint: Path) -> None:
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["kwargs"]["num_classes"] == 3  # not 121 (the header and the ids read as labels)
    assert config["metadata"]["labels"] == ["art", "sport", "tech"]
    assert set(config["vocab"][2:]) == set(WORDS)  # the text column, not the ids


def test_evaluate_on_labels_the_model_never_saw_names_them(checkpoint: Path, files: Path, capsys: Any) -> None:
    code, _, err = run(["evaluate", str(checkpoint), "--data", str(files / "other.tsv")], capsys)
    line = one_line_error(code, err)
    assert "'cars', 'food'" in line and "never saw" in line


@pytest.mark.parametrize("model", ["lstm-lm", "rrnn-f"])
def test_language_models_train_on_plain_text(model: str, files: Path, tmp_path: Path, capsys: Any) -> None:
    from kleene.nn.registry import model_tasks

    task = ["--task", "language_model"] if len(model_tasks(model)) > 1 else []
    argv = ["train", model, "--data", str(files / "story.txt"), "--out", str(tmp_path / "lm"), *task, "--json"]
    sizes = ["--set", "hidden_size=4", "--set", "embedding_dim=4", "--window", "16", "--batch-size", "4"]
    code, out, err = run([*argv, "--max-steps", "2", "--no-progress", *sizes], capsys)
    assert code == 0, err
    assert json.loads(out)["steps"] == 2
    code, out, _ = run(["generate", str(tmp_path / "lm"), "--prompt", "once", "--max-tokens", "5", "--json"], capsys)
    assert code == 0 and json.loads(out)["prompt"] == "once"
    code, out, _ = run(["evaluate", str(tmp_path / "lm"), "--json"], capsys)  # the text read again, as characters
    assert code == 0 and json.loads(out)["perplexity"] > 1


def test_a_missing_data_file_is_file_not_found(capsys: Any) -> None:
    code, _, err = run(["train", "sopa", "--data", "nosuch.tsv"], capsys)
    assert "file not found" in one_line_error(code, err)


def test_a_binary_data_file_gives_one_short_line(tmp_path: Path, capsys: Any) -> None:
    rng = random.Random(1)
    text_free = bytes(rng.choice([b for b in range(1, 256) if b not in b"\t\n\r "]) for _ in range(2500))
    blobs = {"nul.tsv": bytes(range(256)) * 10, "no-nul.tsv": (text_free + b"\tsome words\n") * 3}
    for name, blob in blobs.items():
        (tmp_path / name).write_bytes(blob)
        code, _, err = run(["train", "sopa", "--data", str(tmp_path / name), "--pretrained", "none"], capsys)
        assert len(one_line_error(code, err)) < 250, name


def test_many_classes_warn_in_one_line(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "ids.tsv"  # no header: the ids are read as labels
    path.write_text("".join(f"{i}\tgood film {i % 3}\n" for i in range(40)))
    argv = ["train", "cnn", "--data", str(path), "--out", str(tmp_path / "run"), "--max-steps", "1", *QUIET]
    code, _, err = run([*argv, "--set", "channels=2"], capsys)
    warnings = [line for line in err.splitlines() if "warning:" in line]
    assert code == 0 and len(warnings) == 1 and "40 classes for 40 examples" in warnings[0]


# -- the CLI protects the user's work -----------------------------------------------------------------------------
def test_an_existing_checkpoint_is_not_overwritten(checkpoint: Path, files: Path, capsys: Any) -> None:
    before = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    argv = ["train", "rrnn-b", "--data", str(files / "topics.csv"), "--out", str(checkpoint), "--max-steps", "1"]
    code, _, err = run([*argv, *QUIET, *TINY, "--seed", "5"], capsys)
    assert "--overwrite" in one_line_error(code, err)
    assert {p.name: p.read_bytes() for p in checkpoint.iterdir()} == before
    copy = checkpoint.parent / "copy"
    copy.mkdir()
    for name, data in before.items():
        (copy / name).write_bytes(data)
    argv[argv.index(str(checkpoint))] = str(copy)
    assert run([*argv, *QUIET, *TINY, "--seed", "5", "--overwrite"], capsys)[0] == 0
    assert (copy / "model.safetensors").read_bytes() != before["model.safetensors"]


def test_output_paths_are_checked_before_the_work(
    checkpoint: Path, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kleene.extract.checkpoint  # imported before the patches below, which it must not capture
    import kleene.viz.report  # noqa: F401

    def no_work(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the work started before the output path was checked")

    monkeypatch.setattr("kleene.nn.checkpoint.load_checkpoint", no_work)
    monkeypatch.setattr("kleene.nn.load_checkpoint", no_work)
    monkeypatch.setattr("kleene.extract.checkpoint.extract_checkpoint", no_work)
    monkeypatch.setattr("kleene.nn.training.train", no_work)
    monkeypatch.setattr("kleene.nn.train", no_work)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    commands = [
        ["report", str(checkpoint), "-o", "/nonexistent/dir/r.html"],
        ["extract", str(checkpoint), "--out", str(a_file / "automata")],
        ["train", "cnn", "--data", "sst2", "--out", str(a_file / "run")],
        ["prove", "rrnn-b", "--certificate", str(tmp_path / "missing" / "c.json")],
    ]
    for command in commands:
        code, _, err = run(command, capsys)
        line = one_line_error(code, err)
        assert str(a_file) in line or "does not exist" in line, line


def test_prove_draw_without_dot_says_how_to_install_it(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on it
    code, _, err = run(["prove", "rrnn-b", "--draw", str(tmp_path / "out"), "--no-cross-check"], capsys)
    line = one_line_error(code, err)
    assert "install graphviz" in line and "--draw" in line


def test_graphviz_missing_dot_anywhere_is_one_line(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import graphviz

    def draws(args: Any) -> int:
        raise graphviz.ExecutableNotFound(("dot", "-Tsvg"))

    monkeypatch.setattr("kleene.cli.models.run", draws)
    code, _, err = run(["models"], capsys)
    assert "install graphviz" in one_line_error(code, err)


def test_set_with_an_unknown_key_names_the_key_the_value_and_the_valid_keys(files: Path, capsys: Any) -> None:
    code, _, err = run(["train", "rrnn-b", "--data", str(files / "topics.csv"), "--set", "hidden=abc"], capsys)
    line = one_line_error(code, err)
    assert "'hidden'" in line and "abc" in line and "hidden_size" in line and "num_layers" in line
    code, _, err = run(["train", "rrnn-b", "--data", str(files / "topics.csv"), "--set", "hidden_size=abc"], capsys)
    line = one_line_error(code, err)
    assert "hidden_size" in line and "'abc'" in line and "int" in line


def test_train_model_help_and_models_show_the_settings_with_types_and_defaults(capsys: Any) -> None:
    code, out, _ = run(["train", "cnn", "--help"], capsys)
    assert code == 0 and "channels: int = 100" in out and "dropout: float = 0.1" in out
    code, out, _ = run(["models", "rrnn-b"], capsys)
    assert code == 0 and "hidden_size: int = 128 (classification), 256 (language_model)" in out


def test_settings_come_from_the_builders_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    from kleene.nn.baselines import CNNClassifier
    from kleene.nn.registry import model_settings

    oracle = {
        name: p.default
        for name, p in inspect.signature(CNNClassifier).parameters.items()
        if name not in ("vocab_size", "num_classes")
    }
    assert {s.name: s.defaults["classification"] for s in model_settings("cnn")} == oracle

    def build(vocab_size: int, num_classes: int, width: int = 7, *, gate: str = "x") -> torch.nn.Module:
        return torch.nn.Linear(width, num_classes)

    import kleene.nn.registry

    model_settings("cnn")  # the built-in models are registered before the test model is added (and then removed)
    monkeypatch.setitem(kleene.nn.registry._REGISTRY, "test-settings-model", build)
    assert [s.describe() for s in model_settings("test-settings-model")] == ["width: int = 7", "gate: str = 'x'"]


def test_max_steps_alone_is_not_capped_by_the_default_epochs(files: Path, tmp_path: Path, capsys: Any) -> None:
    # 120 examples: 96 training ones, 6 batches of 16 per epoch; 10 epochs would stop at 60 steps
    argv = ["train", "rrnn-b", "--data", str(files / "topics.csv"), "--json", *QUIET, *TINY, "--patience", "1000"]
    code, out, err = run([*argv, "--out", str(tmp_path / "a"), "--max-steps", "70"], capsys)
    assert code == 0 and json.loads(out)["steps"] == 70, err
    code, out, err = run([*argv, "--out", str(tmp_path / "b"), "--max-steps", "70", "--epochs", "2"], capsys)
    assert code == 0 and json.loads(out)["steps"] == 12
    warning = [line for line in err.splitlines() if "warning:" in line]
    assert len(warning) == 1 and "12 steps" in warning[0] and "epochs" in warning[0]


def test_generate_help_names_registered_language_models_only(capsys: Any) -> None:
    from kleene.nn.registry import model_tasks

    code, out, _ = run(["generate", "--help"], capsys)
    text = " ".join(out.split()).replace("- ", "-")
    assert code == 0 and "rrnn-f-lm" not in text
    listed = text.split("Models that train as language models: ")[1].split(".")[0].split(", ")
    assert listed == [name for name in registered_models() if "language_model" in model_tasks(name)]


def test_building_the_parser_imports_neither_torch_nor_the_automata() -> None:
    code = (
        "import sys; from kleene.cli import build_parser; build_parser(); "
        "print([m for m in ('torch', 'numpy', 'sympy', 'kleene.automata', 'kleene.nn') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env())
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


@pytest.mark.slow
def test_evaluate_builds_no_optimizer(checkpoint: Path) -> None:
    code = (
        "import sys; from kleene.cli import main; "
        f"assert main(['evaluate', {str(checkpoint)!r}]) == 0; print('torch._dynamo' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env())
    assert done.returncode == 0 and done.stdout.strip().endswith("False"), done.stderr


def test_extracted_drawings_show_the_best_words_and_never_padding(
    checkpoint: Path, tmp_path: Path, capsys: Any
) -> None:
    code, _, err = run(
        ["extract", str(checkpoint), "--format", "dot", "--out", str(tmp_path), "--sentences", "5"], capsys
    )
    assert code == 0, err
    source = (tmp_path / "unit000.dot").read_text()
    assert "<pad>" not in source and "&lt;pad&gt;" not in source and "<unk>" not in source
    assert "the best 5 of 10 words per arc" in source


def test_readable_automaton_keeps_the_best_words_of_each_arc() -> None:
    from kleene.automata.wfsa import WFSA
    from kleene.viz.draw import readable_automaton

    rng = random.Random(3)
    words = ["<pad>", "<unk>", *(f"w{i}" for i in range(80))]
    for semiring in ("max-times", "min-plus"):
        wfsa = WFSA(semiring, words, name="u")
        wfsa.add_states("q0", "q1")
        wfsa.set_initial(0)
        wfsa.set_final(1)
        weights = {(src, dst, word): rng.random() for src, dst in ((0, 0), (0, 1), (1, 1)) for word in words}
        for (src, dst, word), weight in weights.items():
            wfsa.add_arc(src, dst, word, weight)
        drawn = readable_automaton(wfsa, 4)
        for src, dst in ((0, 0), (0, 1), (1, 1)):
            ranked = sorted(
                (w for (s, d, word), w in weights.items() if (s, d) == (src, dst) and not word.startswith("<")),
                reverse=semiring == "max-times",
            )
            kept = sorted(
                (float(a.weight) for a in drawn.arcs if (a.src, a.dst) == (src, dst)), reverse=semiring == "max-times"
            )
            assert kept == ranked[:4]
        assert not {str(a.label) for a in drawn.arcs} & {"<pad>", "<unk>"}


def test_every_model_accepts_its_own_listed_settings_and_help_shows_them(capsys: Any) -> None:
    from kleene.nn.registry import check_settings, model_builder, model_settings

    for name in registered_models():
        if not model_builder(name).__module__.startswith("kleene."):
            continue  # a model another test registered
        settings = model_settings(name)
        assert settings, name
        for setting in settings:
            for default in setting.defaults.values():
                check_settings(name, {setting.name: default})  # a listed key with its own default is valid
        code, out, _ = run(["train", name, "--help"], capsys)
        assert code == 0 and all(setting.describe() in out for setting in settings), name
