"""Issue 23, start-up: what a command imports. ``kleene evaluate`` of one model imports that model's module only and
none of graphviz, networkx, scipy; importing ``kleene.nn`` or showing ``kleene train --help`` imports no torch; the
registry's table of built-in models names the module that registers each. Each check runs in a fresh interpreter
(``sys.modules`` of this test process holds whatever other tests imported). The times are a benchmark
(``benchmarks/cli_startup.py``), not a test."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kleene.cli import main
from kleene.nn.registry import BUILTIN_MODELS
from tests.interpreters import clean_env

#: Imported only by what draws (graphviz), converts to graphs (networkx) or runs the sparse algorithms (scipy).
NOT_FOR_EVALUATION = ("graphviz", "networkx", "scipy")


def fresh(code: str) -> Any:
    """The JSON value that ``code`` prints last, run in a new interpreter with this tree's ``src`` on the path."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env())
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-step rrnn-b checkpoint trained on a CSV whose first column is an id."""
    folder = tmp_path_factory.mktemp("startup")
    rng = random.Random(1)
    words = ["good", "bad", "film", "plot", "dull", "fine"]
    lines = [f"{i},{' '.join(rng.choices(words, k=4))},{['x', 'y'][i % 2]}" for i in range(40)]
    (folder / "data.csv").write_text("id,text,label\n" + "\n".join(lines) + "\n")
    out = folder / "run"
    tiny = ["--set", "hidden_size=2", "--set", "num_layers=1", "--set", "embedding_dim=3", "--set", "mlp_hidden=2"]
    argv = ["train", "rrnn-b", "--data", str(folder / "data.csv"), "--out", str(out), "--max-steps", "2"]
    assert main([*argv, *tiny, "--pretrained", "none", "--no-progress"]) == 0
    return out


@pytest.mark.slow
def test_evaluate_imports_its_model_module_only_and_nothing_that_draws(small_run: Path) -> None:
    modules = [*NOT_FOR_EVALUATION, *(f"kleene.nn.{module}" for module in set(BUILTIN_MODELS.values()))]
    loaded = fresh(
        "import json, sys; from kleene.cli import main; "
        f"assert main(['evaluate', {str(small_run)!r}, '--json']) == 0; "
        f"print(json.dumps([m for m in {modules!r} if m in sys.modules]))"
    )
    assert loaded == ["kleene.nn.rrnn"]


def test_kleene_nn_model_names_and_train_help_import_no_torch() -> None:
    loaded = fresh(
        "import contextlib, io, json, sys; import kleene.nn; from kleene.cli import main\n"
        "names = kleene.nn.registered_models()\n"
        "with contextlib.redirect_stdout(io.StringIO()) as shown, contextlib.suppress(SystemExit):\n"
        "    main(['train', '--help'])\n"
        "print(json.dumps({'names': names, 'help': shown.getvalue(), 'torch': 'torch' in sys.modules}))"
    )
    assert loaded["names"] == sorted(BUILTIN_MODELS) and not loaded["torch"]
    assert ", ".join(sorted(BUILTIN_MODELS)) in " ".join(loaded["help"].split())


@pytest.fixture(scope="module")
def every_model_module() -> Any:
    """In a fresh interpreter: ``kleene.nn.generate`` imported first, then every module of ``BUILTIN_MODELS`` with a
    ``register_model`` that records the module calling it; then each name of ``kleene.nn.__all__`` read."""
    return fresh(
        "import importlib, json, sys; from kleene.nn.generate import next_token_log_probs\n"
        "import kleene.nn, kleene.nn.registry as registry\n"
        "found = {}\n"
        "def record(name, builder, *, replace=False):\n"
        "    found[name] = sys._getframe(1).f_globals['__name__']\n"
        "registry.register_model = record\n"
        f"for module in {sorted(set(BUILTIN_MODELS.values()))!r}:\n"
        "    importlib.import_module('kleene.nn.' + module)\n"
        "wrong = [n for n in kleene.nn.__all__ if getattr(kleene.nn, n) is not "
        "getattr(importlib.import_module('kleene.nn.' + kleene.nn._LAZY[n]), n)]\n"
        "print(json.dumps({'registered': found, 'wrong': wrong, 'generate': kleene.nn.generate.__module__, "
        "'missing': sorted(set(kleene.nn._LAZY) - set(kleene.nn.__all__))}))"
    )


@pytest.mark.slow
def test_the_builtin_model_table_names_the_module_that_registers_each_model(every_model_module: Any) -> None:
    """The table must be exactly what the modules register."""
    expected = {name: f"kleene.nn.{module}" for name, module in BUILTIN_MODELS.items()}
    assert every_model_module["registered"] == expected


def test_kleene_nn_exports_its_names_as_their_modules_define_them(every_model_module: Any) -> None:
    """Every name of ``kleene.nn.__all__`` loads on first use as the object of its module; ``generate`` stays the
    function even when its module ``kleene.nn.generate`` was imported first (the import system sets a submodule as
    an attribute of its package)."""
    assert every_model_module["wrong"] == [] and every_model_module["missing"] == []
    assert every_model_module["generate"] == "kleene.nn.generate"  # the function's __module__, not a module
    import kleene.nn

    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        kleene.nn.NoSuchName  # noqa: B018


def test_an_unknown_model_lists_every_registered_model() -> None:
    from kleene.errors import UnknownModelError
    from kleene.nn.registry import build_model

    with pytest.raises(UnknownModelError, match=r"unknown model 'rrnn-z'.*rrnn-b, rrnn-b-maxplus, rrnn-c, rrnn-f"):
        build_model("rrnn-z", vocab_size=3)


@pytest.mark.slow
def test_a_builtin_name_is_taken_before_its_module_is_imported() -> None:
    """Registering a built-in model's name needs ``replace=True`` even while its module is not imported, and a
    replacement stays when another model's module (which imports the replaced one's) loads later."""
    found = fresh(
        "import json; from kleene.nn.registry import build_model, register_model\n"
        "def mine(**kwargs): return 'mine'\n"
        "try:\n"
        "    register_model('rrnn-b', mine)\n"
        "    refused = False\n"
        "except ValueError:\n"
        "    refused = True\n"
        "register_model('rrnn-b', mine, replace=True)\n"
        "build_model('cnn', vocab_size=5, num_classes=2)  # kleene.nn.baselines imports kleene.nn.rrnn\n"
        "print(json.dumps({'refused': refused, 'built': build_model('rrnn-b', vocab_size=5)}))"
    )
    assert found == {"refused": True, "built": "mine"}


def console(argv: list[str], prelude: str = "") -> subprocess.CompletedProcess[str]:
    """``kleene argv`` through the console script's entry point ``kleene.cli.run``, in a new interpreter, after
    running ``prelude``."""
    code = f"import sys; {prelude}\nsys.argv = ['kleene', *{argv!r}]\nfrom kleene.cli import run\nrun()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env())


def test_the_console_script_keeps_output_exit_codes_and_exit_handlers(small_run: Path) -> None:
    """``run`` skips the interpreter's teardown (0.4 s with torch loaded), not what a command prints, its exit code,
    or the exit handlers."""
    done = console(["evaluate", str(small_run), "--json"], "import atexit; atexit.register(print, 'handler ran')")
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines[-1] == "handler ran", done.stderr
    assert {"loss", "accuracy"} <= set(json.loads(lines[0]))
    assert console(["evaluate", str(small_run / "nothing-here")]).returncode == 1
    usage = console(["no-such-command"])
    assert usage.returncode == 2 and "invalid choice" in usage.stderr
    shown = console(["--version"])
    assert shown.returncode == 0 and shown.stdout.startswith("kleene ")
