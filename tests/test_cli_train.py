"""``kleene train`` and ``kleene evaluate`` end to end, in process and under torchrun."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from kleene.cli import main
from kleene.nn import load_checkpoint


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_train_then_evaluate(tmp_path, capsys):
    out = tmp_path / "cnn-sst2"
    code = main(
        ["train", "cnn", "--data", "sst2", "--out", str(out), "--max-steps", "8", "--set", "channels=16", "--json"]
    )
    assert code == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["steps"] == 8 and trained["checkpoint"] == str(out)
    checkpoint = load_checkpoint(out)
    assert checkpoint.config["kwargs"]["channels"] == 16 and checkpoint.config["metadata"]["data"] == "sst2"
    assert checkpoint.config["metadata"]["training"]["max_steps"] == 8
    assert main(["evaluate", str(out), "--data", "sst2", "--split", "test", "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["accuracy"] == pytest.approx(trained["test_accuracy"], abs=1e-12)
    assert evaluated["loss"] == pytest.approx(trained["test_loss"], rel=1e-6)
    assert main(["evaluate", str(out), "--split", "dev"]) == 0  # the data set recorded in the checkpoint
    assert "accuracy" in capsys.readouterr().out


def test_cli_errors(tmp_path, capsys):
    assert main(["train", "no-such-model", "--data", "sst2", "--out", str(tmp_path / "x")]) == 1
    assert "unknown model 'no-such-model'" in capsys.readouterr().err
    assert main(["train", "cnn", "--data", "imdb", "--out", str(tmp_path / "x")]) == 1
    assert "unknown dataset 'imdb'" in capsys.readouterr().err
    assert main(["train", "cnn", "--data", "sst2", "--set", "channels"]) == 1
    assert "expected KEY=VALUE" in capsys.readouterr().err
    pickled = tmp_path / "model.pt"
    torch.save({"weight": torch.zeros(1)}, pickled)
    assert main(["evaluate", str(pickled), "--data", "sst2"]) == 1
    assert "never loaded" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_torchrun_two_processes(tmp_path):
    out = tmp_path / "ddp"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
        "-m", "kleene.cli", "train", "cnn", "--data", "sst2", "--out", str(out), "--max-steps", "3",
        "--set", "channels=8", "--pretrained", "none", "--no-progress", "--threads", "1", "--json",
    ]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads(done.stdout.strip().splitlines()[-1])
    assert metrics["world_size"] == 2 and metrics["steps"] == 3
    assert load_checkpoint(out).metrics["world_size"] == 2
