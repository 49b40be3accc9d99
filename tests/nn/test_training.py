"""Trainer, checkpoints and the model registry; a distributed run on two processes."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch import nn

from kleene.data import ClassificationData, Example, Vocabulary
from kleene.errors import ModelConfigError
from kleene.nn import (
    CheckpointError,
    TrainConfig,
    Trainer,
    TrainingError,
    UnknownModelError,
    build_model,
    load_checkpoint,
    prepare,
    register_model,
    registered_models,
    save_checkpoint,
    train,
)


@pytest.fixture(autouse=True)
def one_thread():
    """The machine's cores are shared: train on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tokens_and_lengths(vocab_size: int, batch: int = 3, length: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(2, vocab_size, (batch, length), generator=generator), torch.tensor([7, 2, 5])


# -- registry and checkpoints ----------------------------------------------------------------------------------------


def test_registry():
    assert {"cnn", "bilstm", "lstm-lm"} <= set(registered_models())
    with pytest.raises(UnknownModelError, match=r"unknown model 'sopa-x' \(registered: .*cnn"):
        build_model("sopa-x")
    with pytest.raises(ModelConfigError, match="'cnn' is already registered"):
        register_model("cnn", nn.Linear)


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("cnn", {"vocab_size": 30, "num_classes": 3, "channels": 8, "window": 3}),
        ("bilstm", {"vocab_size": 30, "num_classes": 2, "hidden_size": 6}),
        ("lstm-lm", {"vocab_size": 30, "embedding_dim": 8, "hidden_size": 8, "tie_weights": True}),
    ],
)
def test_checkpoint_round_trip(tmp_path, monkeypatch, name, kwargs):
    torch.manual_seed(1)
    model = build_model(name, **kwargs).eval()
    vocab = Vocabulary(["<pad>", "<unk>", *[f"w{i}" for i in range(28)]])
    curve = [{"step": 1, "dev_loss": 0.5}, {"step": 2, "dev_loss": float("inf")}]
    save_checkpoint(tmp_path, model, model_name=name, model_kwargs=kwargs, vocab=vocab, metrics={"a": 1.0}, curve=curve)
    # loading must never unpickle anything
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load called"))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("pickle.load called"))
    loaded = load_checkpoint(tmp_path)
    assert loaded.vocab is not None and loaded.vocab.tokens == vocab.tokens
    assert loaded.metrics == {"a": 1.0} and loaded.curve[1]["dev_loss"] == "inf"
    assert loaded.config["model"] == name and loaded.config["kwargs"] == kwargs
    expected_state, got_state = model.state_dict(), loaded.model.state_dict()
    assert expected_state.keys() == got_state.keys()
    assert all(torch.equal(expected_state[key], got_state[key]) for key in expected_state)
    tokens, lengths = tokens_and_lengths(30)
    torch.testing.assert_close(loaded.model(tokens, lengths), model(tokens, lengths), rtol=0, atol=0)
    if kwargs.get("tie_weights"):
        assert loaded.model.output.weight.data_ptr() == loaded.model.embedding.weight.data_ptr()


def test_checkpoint_rejects_everything_else(tmp_path):
    model = build_model("cnn", vocab_size=10, num_classes=2, channels=4)
    pickled = tmp_path / "model.pt"
    torch.save(model.state_dict(), pickled)
    with pytest.raises(CheckpointError, match="never loaded"):
        load_checkpoint(pickled)
    with pytest.raises(CheckpointError, match=r"no config\.json"):
        load_checkpoint(tmp_path)
    good = save_checkpoint(
        tmp_path / "good", model, model_name="cnn", model_kwargs={"vocab_size": 10, "num_classes": 2, "channels": 4}
    )
    # a pickle under the safetensors name
    (good / "model.safetensors").write_bytes(pickled.read_bytes())
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        load_checkpoint(good)
    # weights that do not fit the model the config describes
    other = save_checkpoint(
        tmp_path / "other", model, model_name="cnn", model_kwargs={"vocab_size": 10, "num_classes": 2, "channels": 4}
    )
    text = (other / "config.json").read_text().replace('"channels": 4', '"channels": 5')
    (other / "config.json").write_text(text)
    with pytest.raises(CheckpointError, match="do not fit model 'cnn'"):
        load_checkpoint(other)
    (other / "config.json").write_text('{"format": "something-else", "model": "cnn", "kwargs": {}}')
    with pytest.raises(CheckpointError, match="format 'something-else'"):
        load_checkpoint(other)
    (other / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="malformed JSON"):
        load_checkpoint(other)
    with pytest.raises(CheckpointError, match="not JSON-serializable"):
        save_checkpoint(tmp_path / "bad", model, model_name="cnn", model_kwargs={"vocab_size": torch.tensor(1)})


# -- training ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cnn_loss_falls_on_sst2(tmp_path):
    config = TrainConfig(epochs=1, max_steps=60, batch_size=64, eval_every=30, progress=False, seed=0)
    model, data, vocab, kwargs = prepare("cnn", "sst2", model_kwargs={"channels": 50}, seed=0)
    trainer = Trainer(model, data, vocab, config, model_name="cnn", model_kwargs=kwargs)
    before = trainer.evaluate("dev")
    result = trainer.fit(tmp_path)
    assert [point["step"] for point in result.curve] == [30, 60]
    assert result.curve[1]["train_loss"] < result.curve[0]["train_loss"]
    assert result.metrics["dev_loss"] < before["loss"] - 0.03
    assert result.metrics["dev_accuracy"] > 0.6 and result.metrics["test_accuracy"] > 0.6
    assert result.metrics["train_seconds"] < 60
    assert load_checkpoint(tmp_path).metrics["test_accuracy"] == result.metrics["test_accuracy"]
    # the dev metrics recorded (those measured when the kept model was kept) are the kept model's, exactly
    kept = next(point for point in result.curve if point["step"] == result.metrics["best_step"])
    again = trainer.evaluate("dev")
    assert again == {"loss": result.metrics["dev_loss"], "accuracy": result.metrics["dev_accuracy"]}
    assert (kept["dev_loss"], kept["dev_accuracy"]) == (again["loss"], again["accuracy"])


@pytest.mark.slow
def test_language_model_loss_falls_on_tinyshakespeare():
    config = TrainConfig(epochs=1, max_steps=40, batch_size=32, window=32, eval_every=40, progress=False)
    model, data, vocab, kwargs = prepare(
        "lstm-lm", "tinyshakespeare", model_kwargs={"embedding_dim": 16, "hidden_size": 64}
    )
    trainer = Trainer(model, data, vocab, config, model_name="lstm-lm", model_kwargs=kwargs)
    before = trainer.evaluate("valid")
    assert before["perplexity"] == pytest.approx(torch.tensor(before["loss"]).exp().item())
    result = trainer.fit()
    assert result.metrics["dev_loss"] < before["loss"] - 0.5
    assert result.metrics["dev_bits_per_token"] == pytest.approx(result.metrics["dev_loss"] / 0.6931471805599453)


class ConstantClassifier(nn.Module):
    """Logits from a bias alone: with all labels 0 its dev accuracy is 1 from the start and can never improve."""

    task = "classification"

    def __init__(self, vocab_size: int, num_classes: int):
        super().__init__()
        self.bias = nn.Parameter(torch.tensor([1.0, 0.0]))

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.bias.expand(len(tokens), 2)


def test_learning_rate_halving_and_early_stopping():
    register_model("test-constant", ConstantClassifier, replace=True)
    examples = [Example(("a", "b"), 0)] * 4
    data = ClassificationData("toy", examples, examples, examples, 2)
    vocab = Vocabulary.build([["a", "b"]])
    config = TrainConfig(epochs=100, batch_size=8, lr=1e-3, patience=5, halve_after=2, progress=False)
    trainer = Trainer(ConstantClassifier(4, 2), data, vocab, config, model_name="test-constant", model_kwargs={})
    result = trainer.fit()
    assert [point["lr"] for point in result.curve] == [1e-3, 1e-3, 1e-3, 5e-4, 5e-4, 2.5e-4]
    assert result.metrics["steps"] == 6 and result.metrics["best_step"] == 1


@pytest.mark.slow
def test_seeds_make_runs_repeatable():
    def run(seed: int) -> dict:
        config = TrainConfig(epochs=1, max_steps=5, batch_size=32, progress=False, seed=seed)
        return train(
            "cnn", "sst2", config=config, model_kwargs={"channels": 8}, pretrained=None, train_size=300
        ).metrics

    first, again, other = run(1), run(1), run(2)
    assert first["dev_loss"] == again["dev_loss"]
    assert first["dev_loss"] != other["dev_loss"]


def test_task_mismatch_raises():
    with pytest.raises(
        TrainingError, match="'lstm-lm' is a language_model model but data set 'sst2' needs classification"
    ):
        train("lstm-lm", "sst2", config=TrainConfig(max_steps=1, progress=False), pretrained=None)


def test_lstm_language_model_refuses_tied_weights_of_two_sizes():
    with pytest.raises(ModelConfigError, match="tie_weights needs hidden_size == embedding_dim, got 8, 6"):
        build_model("lstm-lm", vocab_size=30, embedding_dim=6, hidden_size=8, tie_weights=True)
