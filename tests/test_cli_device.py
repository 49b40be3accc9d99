"""``--device`` on every command that builds or runs a model: parsing, the default, one-line errors, a CPU run."""

from __future__ import annotations

import json

import pytest
import torch

from kleene.cli import main
from kleene.cli.device import parse_device
from kleene.errors import DeviceError

COMMANDS = {
    "train": ["train", "cnn", "--data", "sst2", "--max-steps", "1"],
    "evaluate": ["evaluate", "no-such-checkpoint"],
    "extract": ["extract", "no-such-checkpoint"],
    "generate": ["generate", "no-such-checkpoint", "--prompt", "a"],
}


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Test GPU")


def test_the_default_is_the_cpu_without_a_gpu(no_gpu: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_device(None) == torch.device("cpu") and parse_device("cpu") == torch.device("cpu")
    assert capsys.readouterr().err == ""


def test_the_default_is_cuda_with_a_note_when_a_gpu_is_present(
    two_gpus: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert parse_device(None) == torch.device("cuda")
    note = capsys.readouterr().err
    assert note.count("\n") == 1 and "using cuda (Test GPU)" in note and "--device cpu" in note
    assert parse_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DeviceError, match=r"--device cuda:2: this machine has 2 GPU\(s\), cuda:0..cuda:1"):
        parse_device("cuda:2")


@pytest.mark.parametrize("text", ["gpu", "cuda:", "CUDA", "cuda:-1", "mps", ""])
def test_other_spellings_are_refused(text: str) -> None:
    with pytest.raises(DeviceError, match=r"--device must be cpu, cuda or cuda:N; got"):
        parse_device(text)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cuda_without_a_gpu_is_a_one_line_error(
    command: str, no_gpu: None, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*COMMANDS[command], "--device", "cuda"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"kleene {command}: error: --device cuda: no CUDA GPU is available here")


@pytest.mark.slow
def test_train_and_evaluate_on_the_named_device(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "cnn"
    args = ["train", "cnn", "--data", "sst2", "--out", str(out), "--max-steps", "2", "--set", "channels=4"]
    args += ["--train-size", "64", "--batch-size", "32"]
    assert main([*args, "--device", "cpu", "--json", "--no-progress", "--pretrained", "none"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(out), "--split", "test", "--device", "cpu", "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["accuracy"] == pytest.approx(trained["test_accuracy"], abs=1e-12)
