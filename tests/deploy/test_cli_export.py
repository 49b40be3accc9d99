"""``kleene export CHECKPOINT --format onnx|torch-export -o FILE``: files, sidecar, errors on one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from kleene.cli import main
from kleene.data.vocab import Vocabulary
from kleene.nn.checkpoint import save_checkpoint
from tests.deploy.zoo import KWARGS, WORDS, assert_close, batch, small_model

ort = pytest.importorskip("onnxruntime")


def checkpoint(directory: Path, name: str = "qrnn", labels: list[str] | None = None) -> torch.nn.Module:
    model = small_model(name)
    kwargs = {"vocab_size": len(WORDS), **KWARGS[name]}
    save_checkpoint(
        directory, model, model_name=name, model_kwargs=kwargs, vocab=Vocabulary(WORDS),
        metadata={"labels": labels} if labels else None,
    )  # fmt: skip
    return model


@pytest.mark.slow
def test_export_onnx_writes_the_model_and_its_sidecar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = checkpoint(tmp_path / "ckpt", labels=["neg", "neutral", "pos"])
    out = tmp_path / "model.onnx"
    assert main(["export", str(tmp_path / "ckpt"), "--format", "onnx", "-o", str(out), "--json"]) == 0
    report, err = json.loads((captured := capsys.readouterr()).out), captured.err
    assert report["written"] == [str(out), str(tmp_path / "model.json")]
    assert "warning" not in err and "torchvision" not in err  # the exporter's own notices are not the user's
    info = json.loads((tmp_path / "model.json").read_text())
    assert info["format"] == "kleene-onnx/1" and info["model"] == "qrnn" and info["task"] == "classification"
    assert info["vocabulary"] == WORDS and info["labels"] == ["neg", "neutral", "pos"]
    assert info["preprocessing"] == {"lowercase": True, "split": "whitespace", "padding_id": 0, "unknown_id": 1}
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    tokens, lengths = batch(4, 9, 5)
    (logits,) = session.run(["logits"], {"tokens": tokens.numpy(), "lengths": lengths.numpy()})
    with torch.no_grad():
        assert_close(torch.from_numpy(np.asarray(logits)), model(tokens, lengths), 1e-5)


@pytest.mark.slow
def test_export_torch_program_and_labels_option(tmp_path: Path) -> None:
    model = checkpoint(tmp_path / "ckpt", "cnn")
    out = tmp_path / "model.pt2"
    assert main(["export", str(tmp_path / "ckpt"), "--format", "torch-export", "-o", str(out)]) == 0
    program = torch.export.load(str(out)).module()
    tokens, lengths = batch(3, 6, 2)
    with torch.no_grad():
        assert_close(program(tokens, lengths), model(tokens, lengths), 1e-6)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["{tmp}/missing", "-o", "{tmp}/m.onnx"], "missing"),
        (["{ckpt}", "-o", "{tmp}/m.txt"], "must end in .onnx"),
        (["{ckpt}", "--format", "torch-export", "-o", "{tmp}/m.onnx"], "must end in .pt2"),
        (["{ckpt}", "-o", "{tmp}/m.onnx", "--labels", "a,b"], "labels must name the model's 3 classes"),
    ],
)
def test_export_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    checkpoint(tmp_path / "ckpt", "cnn")
    filled = [a.format(tmp=tmp_path, ckpt=tmp_path / "ckpt") for a in arguments]
    assert main(["export", *filled]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("kleene export: error:") and message in err


def test_checkpoint_labels_come_from_the_model_the_metadata_or_the_data_set() -> None:
    from kleene.data import load
    from kleene.nn.deploy import checkpoint_labels

    assert checkpoint_labels({"kwargs": {"labels": ["HUM", "NUM"]}, "metadata": {"data": "trec"}}) == ["HUM", "NUM"]
    assert checkpoint_labels({"metadata": {"labels": [0, 1]}}) == ["0", "1"]
    trec = load("trec")
    assert checkpoint_labels({"metadata": {"data": "trec"}}) == list(trec.labels) and len(trec.labels) == 6
    assert checkpoint_labels({"metadata": {"data": "no-such-data-set"}}) == []
    assert checkpoint_labels({}) == []


@pytest.mark.slow
def test_export_never_replaces_files_without_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint(tmp_path / "ckpt", "cnn")
    out = tmp_path / "model.onnx"
    (tmp_path / "model.json").write_text("mine")
    assert main(["export", str(tmp_path / "ckpt"), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model.json" in err and "--overwrite" in err
    assert (tmp_path / "model.json").read_text() == "mine" and not out.exists()
    assert main(["export", str(tmp_path / "ckpt"), "-o", str(out), "--overwrite"]) == 0
    assert out.is_file() and (tmp_path / "model.json").read_text() != "mine"
