"""The example classifiers of rational-recurrences and sru as kleene registry models (``rrnn-f``, ``sru``) and
through ``kleene convert``: each sentence's logits equal the original Model's forward on it (embedding of its ids
after their ``dataloader.pad``: ``<pad>`` up to 5 steps, rational-recurrences' ``<s>``/``</s>``; the encoder's
last step; ``out``), with the encoder computed by the independent transcription (rational-recurrences) or by the
``sru`` package itself. float64 to 1e-9 in memory; float32 checkpoints to 1e-5 (a few dozen float32 operations on
values of order 1)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from kleene.cli import main
from kleene.errors import LayerError, OriginalCodeError
from kleene.nn import load_checkpoint
from kleene.nn.original.classifiers import rational_recurrences_classifier, sru_classifier
from kleene.nn.rrnn import frame_tokens
from tests.nn.test_original_rational_recurrences import original_state_dict, transcription

Tensor = torch.Tensor
WORDS = ["the", "good", "bad", "film", "plot", "dull", "<oov>", "<pad>", "<s>", "</s>"]
SENTENCES = [["the", "good", "film"], [], ["bad", "unseen", "plot", "the", "dull", "film", "the"], ["good"]]


def their_ids(sentence: list[str], marks: bool) -> Tensor:
    """Their ``dataloader.pad`` + ``create_one_batch`` for a batch of one sentence."""
    sequence = ["<s>", *sentence, "</s>"] if marks else list(sentence)
    sequence = ["<pad>"] * max(0, 5 - len(sequence)) + sequence
    return torch.tensor([WORDS.index(w) if w in WORDS else WORDS.index("<oov>") for w in sequence])


def rrnn_model_state(d: int, layers: int, output_gate: bool, classes: int = 3) -> dict[str, Tensor]:
    """Their Model's ``state_dict()``: emb_layer (the <pad> row zero, as their EmbeddingLayer sets it), encoder, out."""
    sd = original_state_dict(4, d, layers, output_gate, False, prefix="encoder.")
    embedding = torch.randn(len(WORDS), 4, dtype=torch.float64)
    embedding[WORDS.index("<pad>")] = 0
    sd["emb_layer.embedding.weight"] = embedding
    sd["out.weight"] = torch.randn(classes, d, dtype=torch.float64)
    sd["out.bias"] = torch.randn(classes, dtype=torch.float64)
    return sd


def rrnn_original_logits(sd: dict[str, Tensor], activation: str, sentence: list[str]) -> Tensor:
    x = sd["emb_layer.embedding.weight"][their_ids(sentence, True)][:, None]  # (T, 1, n)
    h, _, _ = transcription(sd, "plus_times", activation, x, prefix="encoder.")
    return h[-1, 0] @ sd["out.weight"].T + sd["out.bias"]


def logits_of(model: nn.Module, vocab: Any, sentence: list[str]) -> Tensor:
    tokens = torch.tensor([vocab.encode(sentence)], dtype=torch.long).reshape(1, len(sentence))
    with torch.no_grad():
        return model(tokens, torch.tensor([len(sentence)]))[0]


@pytest.mark.parametrize(("activation", "output_gate"), [("none", False), ("tanh", True), ("relu", True)])
def test_rational_recurrences_classifier_is_rrnn_f(activation: str, output_gate: bool) -> None:
    torch.manual_seed(len(activation) + output_gate)
    sd = rrnn_model_state(3, 2, output_gate)
    args = {"d": 3, "depth": 2, "activation": activation, "use_output_gate": output_gate, "lr": 0.01}
    model, kwargs, vocab = rational_recurrences_classifier(sd, args, words=WORDS)
    assert kwargs["mlp_hidden"] == 0 and kwargs["frame"]["min_length"] == 5
    for sentence in SENTENCES:
        want = rrnn_original_logits(sd, activation, sentence)
        torch.testing.assert_close(logits_of(model, vocab, sentence), want, rtol=0, atol=1e-9)


def test_rational_recurrences_classifier_refusals_say_what_differs() -> None:
    sd = rrnn_model_state(3, 1, False)
    base = {"d": 3, "depth": 1}
    cases = [
        ({"semiring": "max_plus"}, "only plus_times converts"),
        ({"use_layer_norm": True}, "unbiased std"),
        ({"model": "lstm"}, "only its rrnn encoder"),
        ({"activation": "selu"}, "tanh, relu or none"),
        ({"d": 5}, "hidden_size"),
        ({"learning_rate": 1}, "unknown rational-recurrences classifier arguments"),
    ]
    for extra, message in cases:
        with pytest.raises(OriginalCodeError, match=message):
            rational_recurrences_classifier(sd, {**base, **extra}, words=WORDS)
    with pytest.raises(OriginalCodeError, match="has 9 words but"):
        rational_recurrences_classifier(sd, base, words=WORDS[:-1])
    with pytest.raises(OriginalCodeError, match="no \\['</s>'\\]"):
        rational_recurrences_classifier(sd, base, words=[*WORDS[:-1], "x"])
    with pytest.raises(OriginalCodeError, match="no '<oov>'"):
        rational_recurrences_classifier(sd, base, words=[w if w != "<oov>" else "y" for w in WORDS])


sru = pytest.importorskip("sru", reason="the sru package is the oracle here: pip install sru==2.6.0")


def sru_model(layers: int, seed: int, **options: Any) -> tuple[Any, dict[str, Tensor]]:
    """The sru example's Model (emb_layer, encoder = sru.SRU(...), out) with weight_c = 0; its state dict."""
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its CUDA kernels do not compile on a CPU-only machine
        encoder = sru.SRU(4, 3, num_layers=layers, **options)
    with torch.no_grad():
        for cell in encoder.rnn_lst:
            cell.bias.normal_()
            cell.weight_c.zero_()
    model = nn.ModuleDict({"emb_layer": nn.ModuleDict({"embedding": nn.Embedding(len(WORDS), 4)}),
                           "encoder": encoder, "out": nn.Linear(3, 2)}).double().eval()  # fmt: skip
    return model, {key: value.detach() for key, value in model.state_dict().items()}


def sru_original_logits(model: Any, sentence: list[str]) -> Tensor:
    x = model["emb_layer"]["embedding"].weight.detach()[their_ids(sentence, False)][:, None]
    with warnings.catch_warnings(), torch.enable_grad():  # its pure-Python CPU recurrence (float64)
        warnings.simplefilter("ignore")
        h, _ = model["encoder"](x)
    return model["out"](h[-1, 0]).detach()


@pytest.mark.parametrize(("layers", "options"), [(1, {"use_tanh": True}), (2, {"use_tanh": True, "highway_bias": -1.0}),
                                                 (2, {"v1": True})])  # fmt: skip
def test_sru_classifier_is_kleenes_sru(layers: int, options: dict[str, Any]) -> None:
    model, sd = sru_model(layers, layers, **options)  # v1: weight_c zero and frozen; the package's use_tanh=False
    converted, kwargs, vocab = sru_classifier(sd, {"num_layers": layers, **options}, words=WORDS)
    assert kwargs["frame"] == {"start": None, "end": None, "fill": 0, "min_length": 5}
    assert kwargs["activation"] == ("tanh" if options.get("use_tanh") else "none")
    for sentence in SENTENCES:
        want = sru_original_logits(model, sentence)
        torch.testing.assert_close(logits_of(converted, vocab, sentence), want, rtol=0, atol=1e-9)


def test_sru_classifier_refusals_say_what_differs() -> None:
    cases = [  # (layers, options, message); a rescaled skip exists only between equal sizes (layer 2)
        (2, {"use_tanh": True, "rescale": True, "highway_bias": 1.0}, "rnn_lst.1: rescale"),
        (1, {"use_tanh": True, "layer_norm": True}, "layer_norm"),
        (1, {"use_tanh": True, "bidirectional": True}, "bidirectional"),
        (1, {"use_tanh": True, "has_skip_term": False}, "has_skip_term=False"),
        (1, {"use_tanh": True, "proj_input_to_hidden_first": True}, "no map before its first layer"),
    ]
    for layers, options, message in cases:
        _, sd = sru_model(layers, 0, **options)
        with pytest.raises(OriginalCodeError, match=message):
            sru_classifier(sd, options, words=WORDS)
    _, sd = sru_model(2, 0, use_tanh=True, rescale=True, highway_bias=0.0)  # rescale=True: still a scale ≠ 1
    with pytest.raises(OriginalCodeError, match="rescale"):
        sru_classifier(sd, {"use_tanh": True, "rescale": True}, words=WORDS)
    _, sd = sru_model(1, 0, use_tanh=True)
    sd["encoder.rnn_lst.0.weight_c"] = sd["encoder.rnn_lst.0.weight_c"] + 0.5
    with pytest.raises(OriginalCodeError, match="SRU v2"):
        sru_classifier(sd, {"use_tanh": True}, words=WORDS)


def test_frame_tokens_against_a_list_oracle() -> None:
    torch.manual_seed(0)
    for start, end, min_length in [(7, 8, 5), (None, None, 5), (None, 8, 0), (7, None, 3)]:
        lengths = torch.tensor([0, 3, 6, 1])
        tokens = torch.randint(2, 6, (4, 6)) * (torch.arange(6)[None] < lengths[:, None])
        got, got_lengths = frame_tokens(tokens, lengths, start=start, end=end, fill=1, min_length=min_length)
        for row, length in enumerate(lengths.tolist()):
            body = ([start] if start is not None else []) + tokens[row, :length].tolist()
            body += [end] if end is not None else []
            expected = [1] * max(0, min_length - len(body)) + body
            assert got_lengths[row] == len(expected)
            assert got[row].tolist() == expected + [0] * (got.shape[1] - len(expected))
    assert frame_tokens(tokens[:0], lengths[:0], start=7, end=8, fill=1, min_length=5)[0].shape == (0, 0)


def test_classifier_frame_and_head_options_are_checked() -> None:
    from kleene.nn.registry import build_model

    with pytest.raises(LayerError, match="frame must be None or a dict"):
        build_model("rrnn-f", vocab_size=5, num_classes=2, frame={"start": 1})
    with pytest.raises(LayerError, match="not a token id below vocab_size 5"):
        build_model("rrnn-f", vocab_size=5, num_classes=2, frame={"start": 9, "end": None, "fill": 0, "min_length": 0})
    with pytest.raises(LayerError, match="mlp_hidden"):
        build_model("sru", vocab_size=5, num_classes=2, mlp_hidden=-1)
    with pytest.raises(LayerError, match="SRU activation must be 'tanh' or 'none', got 'relu'"):
        build_model("sru", vocab_size=5, num_classes=2, activation="relu")


# ---------------------------------------------------------------------------------------------- kleene convert
TRAIN = [(1, "good film"), (0, "bad plot"), (1, "the good plot"), (0, "dull film")]
TEST = [(1, "good film the"), (0, "bad dull plot"), (1, "the good"), (0, "dull unseen film plot bad")]


def write_run(folder: Path, state: dict[str, Tensor], args: dict[str, Any]) -> list[str]:
    """What the original's user has: ``torch.save(model.state_dict(), ...)`` (float32), the arguments as JSON,
    the words of ``emb_layer.word2id`` one a line; and the data as kleene reads it."""
    torch.save({key: value.float() for key, value in state.items()}, folder / "model.pt")
    (folder / "args.json").write_text(json.dumps(args), encoding="utf-8")
    (folder / "words.txt").write_text("".join(f"{w}\n" for w in WORDS), encoding="utf-8")
    data = folder / "data"
    data.mkdir()
    for split, rows in (("train", TRAIN), ("dev", TEST), ("test", TEST)):
        (data / f"{split}.tsv").write_text("".join(f"{y}\t{x}\n" for y, x in rows), encoding="utf-8")
    return [str(folder / "model.pt"), "--args", str(folder / "args.json"), "--vocab", str(folder / "words.txt"),
            "--data", str(data), "-o", str(folder / "run")]  # fmt: skip


def check_round_trip(folder: Path, code: str, command: list[str], want: list[Tensor], capsys: Any) -> None:
    assert main(["convert", "--from", code, *command]) == 0
    checkpoint = load_checkpoint(folder / "run")
    for (_, text), expected in zip(TEST, want):
        got = logits_of(checkpoint.model, checkpoint.vocab, text.split())
        torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)
    accuracy = sum(int(w.argmax()) == y for w, (y, _) in zip(want, TEST)) / len(TEST)
    capsys.readouterr()
    assert main(["evaluate", str(folder / "run"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["accuracy"] == pytest.approx(accuracy)
    assert main(["extract", str(folder / "run"), "--json", "--sentences", "3"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["max_abs_error"] < 1e-4
    assert main(["report", str(folder / "run"), "-o", str(folder / "r.html"), "--no-progress"]) == 0
    assert load_checkpoint(folder / "run").config["model"] in (folder / "r.html").read_text(encoding="utf-8")


def test_convert_rational_recurrences_then_evaluate_and_extract(tmp_path: Path, capsys: Any) -> None:
    torch.manual_seed(3)
    state = rrnn_model_state(3, 2, True, classes=2)
    args = {"d": 3, "depth": 2, "activation": "tanh", "use_output_gate": True, "path": "sst", "seed": 1}
    command = write_run(tmp_path, state, args)
    single = {key: value.float().double() for key, value in state.items()}  # what the float32 file holds
    want = [rrnn_original_logits(single, "tanh", text.split()) for _, text in TEST]
    check_round_trip(tmp_path, "rational-recurrences", command, want, capsys)


def test_convert_sru_then_evaluate_and_extract(tmp_path: Path, capsys: Any) -> None:
    model, state = sru_model(2, 5, v1=True)  # the package's SRU v1 mode: weight_c zero and frozen, no tanh
    command = write_run(tmp_path, state, {"num_layers": 2, "v1": True, "dropout": 0.5})
    model.float().double()  # the weights the float32 file holds
    want = [sru_original_logits(model, text.split()) for _, text in TEST]
    check_round_trip(tmp_path, "sru", command, want, capsys)


def test_convert_needs_the_word_list(tmp_path: Path, capsys: Any) -> None:
    command = write_run(tmp_path, rrnn_model_state(3, 1, False), {"d": 3, "depth": 1})
    without = [part for i, part in enumerate(command) if "--vocab" not in command[max(i - 1, 0) : i + 1]]
    assert main(["convert", "--from", "rational-recurrences", *without]) == 1
    assert "pass --vocab FILE" in capsys.readouterr().err


@pytest.mark.slow
def test_convert_refusals_are_one_line(tmp_path: Path, capsys: Any) -> None:
    _, state = sru_model(1, 2, use_tanh=True)
    state["encoder.rnn_lst.0.weight_c"] = torch.full_like(state["encoder.rnn_lst.0.weight_c"], 0.3)  # SRU v2
    command = write_run(tmp_path, state, {"use_tanh": True})
    assert main(["convert", "--from", "sru", *command]) == 1
    error = capsys.readouterr().err.strip()
    assert "SRU v2" in error and "\n" not in error and not (tmp_path / "run").exists()
