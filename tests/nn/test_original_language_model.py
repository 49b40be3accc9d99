"""A language model around pytorch-qrnn's ``QRNN`` (the user's embedding and output layer) as kleene's ``qrnn``
language model, in memory and through ``kleene convert --from pytorch-qrnn``: the logits of the original's words equal
the original's (the QRNN computed by the independent transcription of test_original_qrnn.py) and the tokens it lacks
have probability 0. float64 to 1e-9; float32 checkpoints to 1e-5."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from kleene.cli import main
from kleene.errors import OriginalCodeError
from kleene.nn import load_checkpoint
from kleene.nn.original.language_model import (
    awd_lstm_lm_model,
    pytorch_qrnn_language_model,
    rational_recurrences_language_model,
    rational_recurrences_words,
)
from tests.nn.test_original_qrnn import Transcription, state_dict
from tests.nn.test_original_rational_recurrences import original_state_dict, transcription

Tensor = torch.Tensor
WORDS = ["<unk>", *"etaoinshrdlu ", "<eos>"]


def user_model(window: int, output_gate: bool, sizes: list[int]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """The user's model state dict (``embed``, ``rnn`` = a QRNN, ``out``) and the QRNN's own (for the oracle)."""
    qrnn = state_dict(sizes, window, output_gate)
    full = {f"rnn.{key}": value for key, value in qrnn.items()}
    full["embed.weight"] = torch.randn(len(WORDS), sizes[0], dtype=torch.float64)
    full["out.weight"] = torch.randn(len(WORDS), sizes[-1], dtype=torch.float64)
    full["out.bias"] = torch.randn(len(WORDS), dtype=torch.float64)
    return full, qrnn


def original_logits(full: dict[str, Tensor], qrnn: dict[str, Tensor], window: int, gate: bool, ids: Tensor) -> Tensor:
    h, _ = Transcription(qrnn, window, gate, 0.0, False)(full["embed.weight"][ids][:, None])
    return h[:, 0] @ full["out.weight"].T + full["out.bias"]


def check_logits(model: Any, vocab: Any, full: dict[str, Tensor], qrnn: dict[str, Tensor], window: int, gate: bool,
                 tolerance: float) -> None:  # fmt: skip
    ids = torch.tensor([1, 2, 0, 5, 13, 14, 3, 3])
    want = original_logits(full, qrnn, window, gate, ids)
    tokens = torch.tensor([vocab.encode([WORDS[i] for i in ids])])
    with torch.no_grad():
        got = model(tokens, torch.tensor([len(ids)]))[0].double()
    rows = torch.tensor([vocab.index(word) for word in WORDS])
    torch.testing.assert_close(got[:, rows], want, rtol=tolerance, atol=tolerance)
    others = [i for i in range(len(vocab)) if i not in rows.tolist()]
    assert torch.softmax(got, -1)[:, others].max() == 0  # <pad>: a token the original does not have


@pytest.mark.parametrize(("window", "gate"), [(1, True), (2, False), (2, True)])
def test_the_language_model_is_kleenes_qrnn(window: int, gate: bool) -> None:
    torch.manual_seed(window + 2 * gate)
    full, qrnn = user_model(window, gate, [4, 3, 3])
    args = {"window": window, "output_gate": gate, "num_layers": 2, "save_prev_x": True, "dropout": 0.2}
    model, kwargs, vocab = pytorch_qrnn_language_model(full, args, words=WORDS, embedding_key="embed",
                                                       output_key="out")  # fmt: skip
    assert kwargs["pooling"] == ("fo" if gate else "f") and kwargs["window"] == window
    assert vocab.tokens[:3] == ["<pad>", "<unk>", "e"]  # their <unk> is kleene's
    check_logits(model, vocab, full, qrnn, window, gate, 1e-9)


def test_refusals_say_what_differs() -> None:
    full, _ = user_model(1, True, [4, 3, 5])
    keys = {"words": WORDS, "embedding_key": "embed", "output_key": "out"}
    with pytest.raises(OriginalCodeError, match="sizes \\[3, 5\\]"):
        pytorch_qrnn_language_model(full, {}, **keys)
    full, _ = user_model(1, True, [4, 3])
    with pytest.raises(OriginalCodeError, match=r"zoneout=0\.25"):
        pytorch_qrnn_language_model(full, {"zoneout": 0.25}, **keys)
    with pytest.raises(OriginalCodeError, match=r"expected 'decoder\.weight'"):
        pytorch_qrnn_language_model(full, {}, **{**keys, "output_key": "decoder"})
    with pytest.raises(OriginalCodeError, match="15 rows' distinct words"):
        pytorch_qrnn_language_model(full, {}, **{**keys, "words": WORDS[:-1]})
    # layers of different windows under one QRNN's keys (a torchqrnn.QRNN has one window): the shapes refuse
    awd = {**state_dict([4, 3], 2, True), **{f"layers.1.{k[9:]}": v for k, v in state_dict([3, 3], 1, True).items()}}
    awd = {f"rnn.{key}": value for key, value in awd.items()} | {k: full[k] for k in full if not k.startswith("rnn.")}
    with pytest.raises(OriginalCodeError, match=r"layers\.1\.linear has weight/bias shapes"):
        pytorch_qrnn_language_model(awd, {"window": 2}, **keys)


def test_convert_then_evaluate(tmp_path: Path, capsys: Any) -> None:
    torch.manual_seed(11)
    full, _ = user_model(2, True, [4, 3])
    torch.save({key: value.float() for key, value in full.items()}, tmp_path / "lm.pt")
    (tmp_path / "args.json").write_text(json.dumps({"window": 2, "save_prev_x": True}), encoding="utf-8")
    (tmp_path / "words.txt").write_text("".join(f"{w}\n" for w in WORDS), encoding="utf-8")
    run = tmp_path / "run"
    command = ["convert", "--from", "pytorch-qrnn", str(tmp_path / "lm.pt"), "--args", str(tmp_path / "args.json"),
               "--vocab", str(tmp_path / "words.txt"), "--data", "tinyshakespeare", "-o", str(run)]  # fmt: skip
    assert main([*command[:-4], "-o", str(run)]) == 1
    assert "--embedding-key and --output-key" in capsys.readouterr().err
    assert main([*command, "--embedding-key", "embed", "--output-key", "out"]) == 0
    checkpoint = load_checkpoint(run)
    single = {key: value.float().double() for key, value in full.items()}
    check_logits(checkpoint.model, checkpoint.vocab, single, {k[4:]: v for k, v in single.items() if k[:4] == "rnn."},
                 2, True, 1e-5)  # fmt: skip
    capsys.readouterr()
    assert main(["evaluate", str(run), "--json", "--split", "valid"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert math.isfinite(result["perplexity"]) and result["perplexity"] > 1
    sentences = tmp_path / "sentences.tsv"  # extraction verifies on labelled sentences (tokens: these characters)
    sentences.write_text("".join(f"{i % 2}\t{' '.join(WORDS[1 + i : 8 + i])}\n" for i in range(6)), encoding="utf-8")
    assert main(["extract", str(run), "--data", str(sentences), "--json", "--sentences", "3"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["max_abs_error"] < 1e-4


# ------------------------------------------------------------------------- rational-recurrences' train_lm.py
TRAIN_LINES = ["the cat sat", "a <unk> ran far", "the dog sat"]  # PTB-style: <unk> is one of its words


def rrnn_lm_state(d: int, layers: int, output_gate: bool, vocabulary: int) -> dict[str, Tensor]:
    """Its Model's ``state_dict()``: embedding_layer, rnn (d → d units), output_layer tied to the embedding."""
    sd = original_state_dict(d, d, layers, output_gate, False, prefix="rnn.")
    sd["embedding_layer.embedding.weight"] = torch.randn(vocabulary, d, dtype=torch.float64)
    sd["output_layer.weight"] = sd["embedding_layer.embedding.weight"]  # tied
    sd["output_layer.bias"] = torch.randn(vocabulary, dtype=torch.float64)
    return sd


def rrnn_lm_logits(sd: dict[str, Tensor], activation: str, ids: list[int]) -> Tensor:
    """Its eval_model on one sequence: init_hidden(1) (the RRNN on <s> = id 0 from its initial state), then the
    sequence from that hidden state; logits of output_layer."""
    embedding = sd["embedding_layer.embedding.weight"]
    _, c1, c2 = transcription(sd, "plus_times", activation, embedding[torch.tensor([[0]])], prefix="rnn.")
    h, _, _ = transcription(sd, "plus_times", activation, embedding[torch.tensor(ids)][:, None], (c1, c2), "rnn.")
    return h[:, 0] @ sd["output_layer.weight"].T + sd["output_layer.bias"]


def test_rational_recurrences_words_are_its_embedding_layers_ids() -> None:
    assert rational_recurrences_words(TRAIN_LINES)[:6] == ["<s>", "the", "cat", "sat", "</s>", "a"]


@pytest.mark.parametrize(("activation", "output_gate"), [("none", False), ("tanh", True)])
def test_rational_recurrences_language_model_is_rrnn_f(activation: str, output_gate: bool) -> None:
    torch.manual_seed(len(activation))
    words = rational_recurrences_words(TRAIN_LINES)
    sd = rrnn_lm_state(3, 2, output_gate, len(words))
    args = {"d": 3, "depth": 2, "activation": activation, "use_output_gate": output_gate, "unroll_size": 35}
    model, kwargs, vocab = rational_recurrences_language_model(sd, args, words=words)
    assert kwargs["start"] == vocab.index("<s>")
    text = ["the", "dog", "ran", "</s>", "a", "cat"]
    want = rrnn_lm_logits(sd, activation, [words.index(w) for w in text])
    tokens = torch.tensor([vocab.encode(text)])
    with torch.no_grad():
        got = model(tokens, torch.tensor([len(text)]))[0]
        streamed, states = model.stream(tokens[:, :2])
        rest, _ = model.stream(tokens[:, 2:], states)
    rows = torch.tensor([vocab.index(w) for w in words])
    torch.testing.assert_close(got[:, rows], want, rtol=0, atol=1e-9)
    torch.testing.assert_close(torch.cat([streamed, rest], 1)[0], got, rtol=0, atol=1e-9)
    assert torch.softmax(got, -1)[:, 0].max() == 0  # <pad>: a token it does not have
    with torch.no_grad():  # an empty batch of empty sequences
        assert model(torch.zeros((0, 0), dtype=torch.long), torch.zeros(0, dtype=torch.long)).shape == (
            0,
            0,
            len(vocab),
        )


def test_rational_recurrences_language_model_refusals() -> None:
    words = rational_recurrences_words(TRAIN_LINES)
    sd = rrnn_lm_state(3, 1, False, len(words))
    cases = [({"semiring": "max_plus"}, "--semiring 'max_plus'"), ({"num_mlp_layer": 2}, "self.bidir"),
             ({"use_layer_norm": True}, "unbiased std"), ({"model": "lstm"}, "--model 'lstm'")]  # fmt: skip
    for extra, message in cases:
        with pytest.raises(OriginalCodeError, match=message):
            rational_recurrences_language_model(sd, {"d": 3, "depth": 1, **extra}, words=words)
    with pytest.raises(OriginalCodeError, match="distinct words in id order"):
        rational_recurrences_language_model(sd, {"d": 3, "depth": 1}, words=words[1:])


def test_convert_rational_recurrences_language_model(tmp_path: Path, capsys: Any) -> None:
    """Its word ids are rebuilt from its --train file (ARGS.json), as its EmbeddingLayer builds them."""
    torch.manual_seed(5)
    (tmp_path / "train.txt").write_text("".join(f"{line}\n" for line in TRAIN_LINES), encoding="utf-8")
    words = rational_recurrences_words(TRAIN_LINES)
    sd = rrnn_lm_state(3, 2, True, len(words))
    torch.save({key: value.float() for key, value in sd.items()}, tmp_path / "lm.pt")
    args = {"d": 3, "depth": 2, "activation": "tanh", "use_output_gate": True, "train": str(tmp_path / "train.txt")}
    (tmp_path / "args.json").write_text(json.dumps(args), encoding="utf-8")
    run = tmp_path / "run"
    command = ["convert", "--from", "rational-recurrences", str(tmp_path / "lm.pt"), "--args",
               str(tmp_path / "args.json"), "--data", "tinyshakespeare", "-o", str(run)]  # fmt: skip
    assert main(command) == 0
    checkpoint = load_checkpoint(run)
    single = {key: value.float().double() for key, value in sd.items()}
    text = ["the", "cat", "ran", "</s>"]
    want = rrnn_lm_logits(single, "tanh", [words.index(w) for w in text])
    with torch.no_grad():
        got = checkpoint.model(torch.tensor([checkpoint.vocab.encode(text)]), torch.tensor([len(text)]))[0]
    rows = torch.tensor([checkpoint.vocab.index(w) for w in words])
    torch.testing.assert_close(got[:, rows].double(), want, rtol=1e-5, atol=1e-5)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--json", "--split", "valid"]) == 0  # every character is its <unk> here
    perplexity = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["perplexity"]
    assert math.isfinite(perplexity) and perplexity > 1
    sentences = tmp_path / "sentences.tsv"
    sentences.write_text("".join(f"{i % 2}\t{line}\n" for i, line in enumerate(TRAIN_LINES * 2)), encoding="utf-8")
    assert main(["extract", str(run), "--data", str(sentences), "--json", "--sentences", "3"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["max_abs_error"] < 1e-4


# ------------------------------------------------------------------------- salesforce/awd-lstm-lm (QRNN)
def awd_state(emsize: int, nhid: int, nlayers: int, vocabulary: int) -> dict[str, Tensor]:
    """Its RNNModel(rnn_type="QRNN", tie_weights=True).state_dict(): encoder, rnns.l (WeightDrop keeps the weight as
    linear.module.weight_raw), decoder tied to encoder."""
    sd: dict[str, Tensor] = {"encoder.weight": torch.randn(vocabulary, emsize, dtype=torch.float64)}
    for index in range(nlayers):
        n, h = (emsize if index == 0 else nhid), (nhid if index < nlayers - 1 else emsize)
        window = 2 if index == 0 else 1
        sd[f"rnns.{index}.linear.module.weight_raw"] = torch.randn(3 * h, window * n, dtype=torch.float64) * 0.5
        sd[f"rnns.{index}.linear.module.bias"] = torch.randn(3 * h, dtype=torch.float64)
    sd["decoder.weight"] = sd["encoder.weight"]
    sd["decoder.bias"] = torch.randn(vocabulary, dtype=torch.float64)
    return sd


def awd_logits(sd: dict[str, Tensor], ids: list[int]) -> Tensor:
    """Its forward after reset() with zero hidden states: each QRNNLayer transcribed (window 2, then 1)."""
    x = sd["encoder.weight"][torch.tensor(ids)][:, None]
    index = 0
    while f"rnns.{index}.linear.module.bias" in sd:
        layer = {"layers.0.linear.weight": sd[f"rnns.{index}.linear.module.weight_raw"],
                 "layers.0.linear.bias": sd[f"rnns.{index}.linear.module.bias"]}  # fmt: skip
        x, _ = Transcription(layer, 2 if index == 0 else 1, True, 0.0, True)(x)
        index += 1
    return x[:, 0] @ sd["decoder.weight"].T + sd["decoder.bias"]


def test_awd_lstm_lm_is_kleenes_qrnn_with_a_window_and_size_per_layer() -> None:
    torch.manual_seed(8)
    sd = awd_state(3, 5, 3, len(WORDS))
    args = {"model": "QRNN", "emsize": 3, "nhid": 5, "nlayers": 3, "wdrop": 0.1, "bptt": 70, "data": "data/penn"}
    model, kwargs, vocab = awd_lstm_lm_model(sd, args, words=WORDS)
    assert kwargs["layers"] == [{"window": 2, "hidden_size": 5}, {"window": 1, "hidden_size": 5},
                                {"window": 1, "hidden_size": 3}]  # fmt: skip
    ids = [1, 2, 0, 5, 13, 14, 3, 3]
    tokens = torch.tensor([vocab.encode([WORDS[i] for i in ids])])
    with torch.no_grad():
        got = model(tokens, torch.tensor([len(ids)]))[0]
        first, states = model.stream(tokens[:, :3])  # its evaluation carries hidden and prev_x across batches
        rest, _ = model.stream(tokens[:, 3:], states)
    rows = torch.tensor([vocab.index(word) for word in WORDS])
    torch.testing.assert_close(got[:, rows], awd_logits(sd, ids), rtol=0, atol=1e-9)
    torch.testing.assert_close(torch.cat([first, rest], 1)[0], got, rtol=0, atol=1e-9)
    with pytest.raises(OriginalCodeError, match="--model 'LSTM'"):
        awd_lstm_lm_model(sd, {**args, "model": "LSTM"}, words=WORDS)
    with pytest.raises(OriginalCodeError, match="--nlayers 2"):
        awd_lstm_lm_model(sd, {**args, "nlayers": 2}, words=WORDS)
    with pytest.raises(OriginalCodeError, match="hidden_size"):
        awd_lstm_lm_model(sd, {**args, "nhid": 4}, words=WORDS)


def test_convert_awd_lstm_lm_then_evaluate(tmp_path: Path, capsys: Any) -> None:
    torch.manual_seed(9)
    sd = awd_state(3, 4, 2, len(WORDS))
    torch.save({key: value.float() for key, value in sd.items()}, tmp_path / "awd.pt")
    args = {"model": "QRNN", "emsize": 3, "nhid": 4, "nlayers": 2, "tied": True, "save": "PTB.pt"}
    (tmp_path / "args.json").write_text(json.dumps(args), encoding="utf-8")
    (tmp_path / "words.txt").write_text("".join(f"{w}\n" for w in WORDS), encoding="utf-8")
    run = tmp_path / "run"
    assert main(["convert", "--from", "pytorch-qrnn", str(tmp_path / "awd.pt"), "--args", str(tmp_path / "args.json"),
                 "--vocab", str(tmp_path / "words.txt"), "--data", "tinyshakespeare", "-o", str(run)]) == 0  # fmt: skip
    checkpoint = load_checkpoint(run)
    assert checkpoint.config["metadata"]["training"] == {"carry_state": True, "window": 64}  # evaluated as a stream
    ids = [4, 1, 1, 7, 2]
    with torch.no_grad():
        got = checkpoint.model(torch.tensor([checkpoint.vocab.encode([WORDS[i] for i in ids])]), torch.tensor([5]))[0]
    rows = torch.tensor([checkpoint.vocab.index(word) for word in WORDS])
    single = {key: value.float().double() for key, value in sd.items()}
    torch.testing.assert_close(got[:, rows].double(), awd_logits(single, ids), rtol=1e-5, atol=1e-5)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--json", "--split", "valid"]) == 0
    perplexity = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["perplexity"]
    assert math.isfinite(perplexity) and perplexity > 1
