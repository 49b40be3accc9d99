"""Smoke tests of the Rational Recurrences experiment scripts (examples/rrnn_table5.py, examples/rrnn_lm.py): their
parameter-budget matching, and their smallest setting (``--quick``) end to end on the real data sets."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType

import pytest

from kleene.nn import build_model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODELS_TABLE5 = {"lstm", "rrnn-b", "rrnn-b-maxplus", "rrnn-c", "rrnn-f"}
MODELS_LM = {"lstm-lm", "rrnn-b", "rrnn-b-maxplus", "rrnn-c", "rrnn-f"}


@pytest.fixture
def scripts(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    """The two scripts as modules (rrnn_lm imports rrnn_table5 from its own directory, as when run)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import rrnn_lm
    import rrnn_table5

    return rrnn_table5, rrnn_lm


@pytest.mark.parametrize("budget", [1, 37, 1000, 12_345, 99_999])
def test_hidden_size_for_budget_is_the_closest_size(scripts: tuple[ModuleType, ModuleType], budget: int) -> None:
    table5, _ = scripts
    for count in (lambda h: 3 * h * h + 10 * h, lambda h: 7 * h + 5, lambda h: h**3):
        hidden, parameters = table5.hidden_size_for_budget(count, budget, largest=20_000)
        brute_force = min(range(1, 20_000), key=lambda h: abs(count(h) - budget))
        assert abs(count(hidden) - budget) == abs(count(brute_force) - budget)
        assert parameters == count(hidden)


def test_hidden_size_for_budget_refuses_an_unreachable_budget(scripts: tuple[ModuleType, ModuleType]) -> None:
    table5, _ = scripts
    with pytest.raises(ValueError, match="more than 64 hidden units"):
        table5.hidden_size_for_budget(lambda h: h, 1000, largest=64)


@pytest.mark.slow
def test_default_budgets_are_matched_within_one_percent(scripts: tuple[ModuleType, ModuleType]) -> None:
    table5, lm = scripts
    shared = {"embedding_dropout": 0.2, "vertical_dropout": 0.2, "recurrent_dropout": 0.2}
    for model in MODELS_TABLE5:
        hidden, parameters = table5.classifier_budget(model, 150_000, shared)
        assert abs(parameters - 150_000) / 150_000 < 0.01, (model, hidden, parameters)
        built = build_model(model, vocab_size=5000, num_classes=2, hidden_size=hidden, **shared)
        assert table5.trainable_parameters(built) == parameters  # frozen embeddings: independent of the vocabulary
    for model in MODELS_LM:
        options = lm.model_options(model, 64, 0.0)

        def count(hidden: int, model: str = model, options: dict[str, object] = options) -> int:
            return int(table5.trainable_parameters(build_model(model, vocab_size=67, hidden_size=hidden, **options)))

        _, parameters = table5.hidden_size_for_budget(count, 250_000)
        assert abs(parameters - 250_000) / 250_000 < 0.01, (model, parameters)


@pytest.mark.slow
def test_table5_quick_run_writes_every_model(scripts: tuple[ModuleType, ModuleType], tmp_path: Path) -> None:
    table5, _ = scripts
    assert table5.main(["--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "rrnn_table5.json").read_text())
    rows = results["rows"]
    assert {row["model"] for row in rows} == MODELS_TABLE5 and len(rows) == len(MODELS_TABLE5)
    for row in rows:
        assert (row["dataset"], row["fold"], row["steps"]) == ("cr", 0, 3)
        assert abs(row["parameters"] - 3000) / 3000 < 0.05
        assert 0.0 <= row["test_accuracy"] <= 1.0 and 0.0 <= row["dev_accuracy"] <= 1.0
        assert row["curve"][-1]["step"] == 3
        best = next(point for point in row["curve"] if point["step"] == row["best_step"])
        assert best["dev_accuracy"] == pytest.approx(row["dev_accuracy"])  # the kept model is the best dev point
    table = (tmp_path / "rrnn_table5.md").read_text()
    for label in ("LSTM", "RRNN(B)", "RRNN(B) max-plus", "RRNN(C)", "RRNN(F)"):
        assert f"| cr | {label} |" in table
    assert (tmp_path / "rrnn_table5.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_lm_quick_run_writes_every_model(scripts: tuple[ModuleType, ModuleType], tmp_path: Path) -> None:
    _, lm = scripts
    assert lm.main(["--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "rrnn_lm.json").read_text())
    rows = results["rows"]
    assert {row["model"] for row in rows} == MODELS_LM and len(rows) == len(MODELS_LM)
    for row in rows:
        assert row["steps"] == 4 and [point["step"] for point in row["curve"]] == [2, 4]
        assert abs(row["parameters"] - 5000) / 5000 < 0.05
        assert row["test_bits"] == pytest.approx(row["test_loss"] / math.log(2))
        assert row["test_perplexity"] == pytest.approx(math.exp(row["test_loss"]))
        best = next(point for point in row["curve"] if point["step"] == row["best_step"])
        assert best["dev_loss"] == pytest.approx(row["dev_loss"]) and best["dev_loss"] == min(
            point["dev_loss"] for point in row["curve"]
        )
        # four steps from a uniform-ish start: no better than a unigram model, no worse than 2x uniform
        assert 2.0 < row["test_bits"] < 2 * math.log2(results["settings"]["vocab_size"])
    table = (tmp_path / "rrnn_lm.md").read_text()
    assert table.count("\n| ") == len(MODELS_LM) + 1  # header and one row per model
    assert (tmp_path / "rrnn_lm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lstm_classifier_equals_torch_stacked_lstm() -> None:
    """The 'lstm' baseline (LSTM layers in a RationalStack) against torch's own 2-layer LSTM on packed sequences:
    same logits from the state at each sentence's last valid token (float64, no dropout)."""
    import torch
    from torch import nn

    from kleene.nn.baselines import LSTMClassifier, LSTMLayer

    assert isinstance(build_model("lstm", vocab_size=3, num_classes=2), LSTMClassifier)
    torch.manual_seed(0)
    model = LSTMClassifier(30, 3, hidden_size=6, num_layers=2, embedding_dim=5).double()
    model.eval()
    reference = nn.LSTM(5, 6, num_layers=2, batch_first=True).double()
    with torch.no_grad():
        for index, layer in enumerate(model.stack.layers):
            assert isinstance(layer, LSTMLayer)
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(reference, f"{name}_l{index}").copy_(getattr(layer.lstm, f"{name}_l0"))
    tokens = torch.randint(1, 30, (4, 9))
    lengths = torch.tensor([9, 4, 1, 6])
    tokens[torch.arange(9)[None, :] >= lengths[:, None]] = 0
    packed = nn.utils.rnn.pack_padded_sequence(model.embedding(tokens), lengths, batch_first=True, enforce_sorted=False)
    _, (h_n, _) = reference(packed)
    expected = model.head(h_n[-1])
    torch.testing.assert_close(model(tokens, lengths), expected, rtol=1e-12, atol=1e-12)
    states, _ = model.stack(model.embedding(tokens), lengths)
    assert bool((states[torch.arange(9)[None, :] >= lengths[:, None]] == 0).all())  # padded positions are zero
