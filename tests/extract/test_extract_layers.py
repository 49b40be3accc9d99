"""Exact extraction of kleene's QRNN, RCNN, ISAN and SoPa layers, against the layers' own numbers on SST-2.

Oracles: the layers themselves (their compiled recurrences, run by the torch backend), real OpenFst (pynini)
reading the AT&T exports, and the JSON round trip. The ``sst2`` fixture (30 dev sentences with GloVe vectors)
comes from test_extract.py's ``sst2_sample``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
import torch

from kleene.automata import from_json
from kleene.cli import main
from kleene.data import PAD, UNK, Vocabulary
from kleene.extract import (
    REFERENCE_ZERO,
    ExtractionError,
    from_kleene_layer,
    from_sopa,
    kleene_layer_states,
    qrnn_layer_output_gate,
    sopa_document,
)
from kleene.nn import build_model, save_checkpoint
from kleene.nn import sopa as nn_sopa
from kleene.nn.isan import ISANLayer
from kleene.nn.qrnn import QRNNLayer
from kleene.nn.rcnn import RCNNLayer
from kleene.nn.rrnn import RRNNLayer
from kleene.nn.sopa import SoPaClassifier
from kleene.rational import Certificate, prove, zoo

from .test_extract import TOLERANCE, sst2_sample, vectors


@pytest.fixture(scope="module")
def sst2() -> tuple[list[list[str]], list[str], np.ndarray]:
    return sst2_sample()


def layer_states(
    layer: Any, words: list[str], features: np.ndarray, sentences: list[list[str]], dtype: torch.dtype
) -> list[np.ndarray]:
    """The layer's cell states of each sentence (one padded batch)."""
    lengths = torch.tensor([len(s) for s in sentences])
    batch = torch.zeros((len(sentences), int(lengths.max()), features.shape[1]), dtype=dtype)
    for b, s in enumerate(sentences):
        batch[b, : len(s)] = vectors(words, features, s, dtype)
    with torch.no_grad():
        states = kleene_layer_states(layer, batch, lengths).double().numpy()
    return [states[b, : len(s)] for b, s in enumerate(sentences)]


def small_vocabulary(sst2: Any, count: int, max_tokens: int = 25) -> tuple[list[list[str]], list[str], np.ndarray]:
    """The first ``count`` sentences (cut to ``max_tokens``), their words and vectors (automata that track the
    previous word grow with the word list, cubically in the dense Forward)."""
    sentences, words, features = sst2
    few = [s[:max_tokens] for s in sentences[:count]]
    vocabulary = sorted({w for s in few for w in s})
    return few, vocabulary, vectors(words, features, vocabulary, torch.float64).numpy()


# -- QRNN ---------------------------------------------------------------------------------------

QRNN_CASES = [("f", 1), ("fo", 1), ("ifo", 1), ("fo", 2), ("ifo", 2)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("pooling", "window"), QRNN_CASES)
def test_qrnn_layer(sst2: Any, pooling: str, window: int, dtype: torch.dtype) -> None:
    sentences, words, features = sst2 if window == 1 else small_vocabulary(sst2, 2, 12)
    torch.manual_seed(10)
    layer = QRNNLayer(50, 4, window=window, pooling=pooling, backend="torch").to(dtype).eval()
    extraction = from_kleene_layer(layer, features, words)
    assert extraction.verify(sentences, layer_states(layer, words, features, sentences, dtype)) < TOLERANCE[dtype]
    if window == 2:  # Appendix A: the states remember the previous word
        assert extraction.wfsa(0).num_states == 2 * len(words) + 1
    if "o" in layer.gates:  # h = o ⊙ c: the output gate multiplies the automata's values outside them
        scores = extraction.forward(sentences[:3])
        for b, s in enumerate(sentences[:3]):
            x = vectors(words, features, s, dtype)
            with torch.no_grad():
                hidden = layer(x[None], torch.tensor([len(s)]))[0][0].double().numpy()
            gate = qrnn_layer_output_gate(layer, x.double().numpy())
            assert np.max(np.abs(gate * scores[b, : len(s)] - hidden)) < TOLERANCE[dtype]


def test_qrnn_ifo_recurrence_is_certified() -> None:
    """The zoo's ifo-pooling recurrence gets a certificate that re-checks and agrees with its run."""
    certificate = prove(zoo.qrnn(2, ("a", "b"), pooling="ifo"), alphabet=("a", "b"))
    assert isinstance(certificate, Certificate) and certificate.check() and certificate.cross_check()


def test_qrnn_refusals(sst2: Any) -> None:
    _, words, features = sst2
    with pytest.raises(ExtractionError, match="windows 1 and 2"):
        from_kleene_layer(QRNNLayer(50, 2, window=3, backend="torch"), features, words)
    with pytest.raises(ExtractionError, match="encoder context"):
        from_kleene_layer(QRNNLayer(50, 2, window=1, context_size=3, backend="torch"), features, words)
    with pytest.raises(ExtractionError, match="no output gate"):
        qrnn_layer_output_gate(QRNNLayer(50, 2, window=1, pooling="f", backend="torch"), features[:3])


# -- RCNN and ISAN ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("order", "adaptive"), [(2, True), (3, False)])
def test_rcnn_layer(sst2: Any, order: int, adaptive: bool, dtype: torch.dtype) -> None:
    sentences, words, features = sst2
    torch.manual_seed(11)
    layer = RCNNLayer(50, 4, order=order, adaptive_decay=adaptive, backend="torch").to(dtype).eval()
    extraction = from_kleene_layer(layer, features, words)
    assert extraction.verify(sentences, layer_states(layer, words, features, sentences, dtype)) < TOLERANCE[dtype]
    assert extraction.wfsa(0).num_states == order + 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_isan_layer(sst2: Any, dtype: torch.dtype) -> None:
    sentences, words, features = sst2
    torch.manual_seed(12)
    layer = ISANLayer(50, 4, backend="torch").to(dtype).eval()
    extraction = from_kleene_layer(layer, features, words)
    assert extraction.verify(sentences, layer_states(layer, words, features, sentences, dtype)) < TOLERANCE[dtype]
    assert len(extraction.units) == 4 and extraction.wfsa(2).final == {3: 1.0}  # unit i reads state q_i


def test_isan_symbolic_automaton_scores_an_unseen_word(sst2: Any) -> None:
    """The symbolic automaton scores a word outside the vocabulary from its vector alone."""
    _, words, features = sst2
    torch.manual_seed(12)
    layer = ISANLayer(50, 2, backend="torch").double().eval()  # sympy compiles each 50-term weight once: few units
    extraction = from_kleene_layer(layer, features, words)
    unseen = np.random.default_rng(3).normal(0, 0.3, 50)
    with torch.no_grad():
        states = layer(torch.as_tensor(np.stack([unseen, unseen]))[None], torch.tensor([2]))[0][0, -1].numpy()
    score = extraction.symbolic(1).score(["<new>", "<new>"], env=extraction.environment({"<new>": unseen}))
    assert math.isclose(score, states[1], abs_tol=1e-10)


def test_isan_past_ten_units(sst2: Any) -> None:
    """Weight names stay unique past 9 units (W1_12 is not W11_2): 12 units verify exactly."""
    sentences, words, features = sst2
    torch.manual_seed(13)
    layer = ISANLayer(50, 12, backend="torch").double().eval()
    extraction = from_kleene_layer(layer, features, words)
    states = layer_states(layer, words, features, sentences[:3], torch.float64)
    assert extraction.verify(sentences[:3], states) < TOLERANCE[torch.float64]


def test_bidirectional_layers_are_refused(sst2: Any) -> None:
    _, words, features = sst2
    with pytest.raises(ExtractionError, match="bidirectional"):
        from_kleene_layer(RRNNLayer(50, 2, "B", bidirectional=True, backend="torch"), features, words)
    with pytest.raises(ExtractionError, match="bidirectional"):
        from_kleene_layer(RCNNLayer(50, 2, bidirectional=True, backend="torch"), features, words)


def test_layers_are_read_by_the_family_they_declare(sst2: Any) -> None:
    """The extractor asks a layer's ``cell_family``, not its class name: a renamed subclass is still read, and a
    rational layer without a family (the LSTM) is refused with the family it declares."""
    sentences, words, features = sst2

    class Renamed(RCNNLayer):
        pass

    torch.manual_seed(5)
    layer = Renamed(50, 2, backend="torch").double().eval()
    extraction = from_kleene_layer(layer, features, words)
    states = layer_states(layer, words, features, sentences[:2], torch.float64)
    assert extraction.verify(sentences[:2], states) < TOLERANCE[torch.float64]

    from kleene.nn.baselines import LSTMLayer

    lstm = LSTMLayer(50, 2)
    with pytest.raises(ExtractionError, match=r"no exact extraction for LSTMLayer \(its cell_family is None"):
        from_kleene_layer(lstm, features, words)
    with pytest.raises(ExtractionError, match="cell_family is None"):
        kleene_layer_states(lstm, torch.zeros(1, 2, 50), torch.tensor([2]))


# -- SoPa ---------------------------------------------------------------------------------------


def sopa_model(words: list[str], features: np.ndarray, dtype: torch.dtype, **options: Any) -> SoPaClassifier:
    torch.manual_seed(13)
    if options.get("mode") == "reference":
        options = {"self_loop_scale": 0.8, "epsilon_scale": 0.9, **options}
    model = SoPaClassifier(len(words), 2, embedding_dim=50, patterns="2-1_3-1_5-1", backend="torch", **options)
    with torch.no_grad():
        model.embedding.weight.copy_(torch.as_tensor(features))
    return model.to(dtype).eval()


def sopa_scores(model: SoPaClassifier, words: list[str], sentences: list[list[str]]) -> np.ndarray:
    """The pattern bank's document scores (storage form: log-scores for max-times) of the padded sentences."""
    index = {w: i for i, w in enumerate(words)}
    lengths = torch.tensor([len(s) for s in sentences])
    ids = torch.zeros((len(sentences), int(lengths.max())), dtype=torch.int64)
    for b, s in enumerate(sentences):
        ids[b, : len(s)] = torch.tensor([index[w] for w in s])
    with torch.no_grad():
        padded, padded_lengths = model.embed(ids, lengths)
        return model.patterns(padded, padded_lengths).double().numpy()


def sopa_tolerance(dtype: torch.dtype, scores: np.ndarray, semiring: str) -> float:
    """Absolute, except in float32 for max-plus and real patterns: their scores (sums of raw dot products,
    expected counts) grow to tens or hundreds on SST-2 sentences, where float32's 7 digits cannot hold 1e-5
    absolutely, so there the bound is relative to the largest score. Max-times log-scores get the absolute bound."""
    if dtype == torch.float32 and semiring != "max-times":
        return TOLERANCE[dtype] * max(1.0, float(np.max(np.abs(scores))))
    return TOLERANCE[dtype]


SOPA_CASES = [
    {"mode": "paper", "semiring": "max-times"},
    {"mode": "paper", "semiring": "max-plus", "encoder": "identity"},
    {"mode": "paper", "semiring": "real"},
    {"mode": "paper", "semiring": "real", "epsilon_cap": None},  # exact closure: the empty span counts
    {"mode": "paper", "semiring": "log", "epsilon_cap": None},
    {"mode": "paper", "semiring": "max-times", "epsilon_cap": 2, "self_loops": False},
    {"mode": "paper", "semiring": "max-plus", "epsilons": False, "self_loops": False},  # a CNN (SoPa §4)
    {"mode": "reference", "semiring": "max-times"},
    {"mode": "reference", "semiring": "max-plus"},
    {"mode": "reference", "semiring": "real"},
    # shared self-loops (the authors' --shared_sl): the loops read the main path's rows, times learned scales
    {"mode": "reference", "semiring": "max-times", "shared_self_loops": "per-state", "self_loop_scale": None},
    {"mode": "reference", "semiring": "max-plus", "shared_self_loops": "global", "self_loop_scale": None},
    {"mode": "reference", "semiring": "real", "shared_self_loops": "per-state", "self_loop_scale": None},
    {"mode": "paper", "semiring": "log", "shared_self_loops": "global", "epsilon_cap": None},
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("options", SOPA_CASES, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.slow
def test_sopa_document_scores(sst2: Any, options: dict[str, Any], dtype: torch.dtype) -> None:
    sentences, words, features = small_vocabulary(sst2, 12)
    model = sopa_model(words, features, dtype, **options)
    extraction = from_sopa(model, words)
    scores = sopa_scores(model, words, sentences)
    documents = [sopa_document(s, model.boundary) for s in sentences]
    assert extraction.verify_documents(documents, scores) < sopa_tolerance(dtype, scores, options["semiring"])
    assert extraction.summary()["automata"] == 3
    assert extraction.checked_tokens == sum(len(s) + 2 * model.boundary for s in sentences)


def test_sopa_reference_zero_floors_the_score(sst2: Any) -> None:
    """A pattern whose every span scores below the authors' −100 reads −100, from the automaton too."""
    assert REFERENCE_ZERO == nn_sopa.REFERENCE_ZERO
    sentences, words, features = sst2
    model = sopa_model(words, features, torch.float64, mode="reference", semiring="max-times")
    group = model.patterns.groups[0]
    with torch.no_grad():
        for bias in (group.main_bias, group.loop_bias):  # bias scale 0.1: log σ(≈ −300) on every move
            bias[0].fill_(-3000.0)
    scores = sopa_scores(model, words, sentences[:5])
    assert np.all(scores[:, 0] == REFERENCE_ZERO)
    documents = [sopa_document(s, model.boundary) for s in sentences[:5]]
    assert from_sopa(model, words).verify_documents(documents, scores) < 1e-10


@pytest.mark.slow
def test_sopa_symbolic_and_constant_automata_agree(sst2: Any) -> None:
    sentences, words, features = sst2
    model = sopa_model(words, features, torch.float64, mode="paper", semiring="max-times")
    extraction = from_sopa(model, words)
    short = sentences[0][:3]  # scoring with sympy weights is slow: a short document
    document = sopa_document(short, model.boundary)
    expected = sopa_scores(model, words, [short])[0]
    for unit in range(3):
        constant = extraction.wfsa(unit, sorted(set(document)))
        assert math.isclose(constant.score(document), expected[unit], abs_tol=1e-10)
    symbolic = extraction.symbolic(1)  # the length-3 pattern, with its epsilons
    assert math.isclose(symbolic.score(document, env=extraction.environment()), expected[1], abs_tol=1e-10)


def test_sopa_padding_token_clash() -> None:
    model = SoPaClassifier(3, 2, embedding_dim=4, patterns="2-1", backend="torch")
    with pytest.raises(ExtractionError, match="padding token"):
        from_sopa(model, ["<pad>", "<unk>", "<SoPa:END>"])


# -- exports ------------------------------------------------------------------------------------


def openfst_score(fst: Any, text: str, arc_type: str, table: dict[str, int], sentence: list[str]) -> float:
    """The string's score in OpenFst: −(shortest distance) of the automaton composed with the string."""
    compiler = fst.Compiler(arc_type=arc_type, acceptor=True)
    compiler.write(text)
    machine = compiler.compile().arcsort(sort_type="olabel")
    string = fst.Compiler(arc_type=arc_type, acceptor=True)
    string.write("".join(f"{i}\t{i + 1}\t{table[w]}\n" for i, w in enumerate(sentence)) + f"{len(sentence)}\n")
    composed = fst.compose(machine, string.compile())
    return -float(fst.shortestdistance(composed, reverse=True)[composed.start()])


@pytest.mark.parametrize(("semiring", "arc_type"), [("max-times", "standard"), ("real", "log")])
@pytest.mark.slow
def test_sopa_exports_in_openfst(sst2: Any, tmp_path: Any, semiring: str, arc_type: str) -> None:
    """Max-times patterns are tropical automata (cost = −log-score); real ones log automata (cost = −log count)."""
    pytest.importorskip("pynini", reason="pynini (real OpenFst) is the oracle of AT&T exports")
    fst = pytest.importorskip("pywrapfst", reason="pywrapfst ships with pynini")
    sentences, words, features = small_vocabulary(sst2, 3)
    model = sopa_model(words, features, torch.float64, mode="paper", semiring=semiring)
    extraction = from_sopa(model, words)
    documents = [sopa_document(s, model.boundary) for s in sentences]
    scores = sopa_scores(model, words, sentences)
    paths = extraction.export(tmp_path / "att", "att")
    table = {w: i + 1 for i, w in enumerate(extraction.words)}  # words.syms: epsilon 0, then the words
    assert paths[0].read_text().splitlines()[1].split() == [extraction.words[0], "1"]
    for unit, path in enumerate(paths[1:]):
        for b, document in enumerate(documents):
            got = openfst_score(fst, path.read_text(), arc_type, table, document)
            expected = scores[b, unit] if semiring == "max-times" else math.log(scores[b, unit])
            assert math.isclose(got, expected, rel_tol=1e-5, abs_tol=1e-5)  # OpenFst stores float32
    for path in extraction.export(tmp_path / "json", "json"):
        automaton = from_json(path.read_text())
        unit = int(path.stem[4:])
        assert math.isclose(automaton.score(documents[1]), scores[1, unit], rel_tol=1e-12, abs_tol=1e-12)
    dots = extraction.export(tmp_path / "dot", "dot")
    assert len(dots) == 3 and "done" in dots[0].read_text()


def test_rcnn_export_in_openfst(sst2: Any, tmp_path: Any) -> None:
    """With nonnegative weights and vectors an RCNN's automata are real with nonnegative weights: OpenFst log arcs."""
    pytest.importorskip("pynini", reason="pynini (real OpenFst) is the oracle of AT&T exports")
    fst = pytest.importorskip("pywrapfst", reason="pywrapfst ships with pynini")
    sentences, words, features = small_vocabulary(sst2, 3)
    features = np.abs(features)
    torch.manual_seed(14)
    layer = RCNNLayer(50, 2, order=2, backend="torch").double().eval()
    with torch.no_grad():
        layer.inputs.weight.abs_().mul_(0.1)
    extraction = from_kleene_layer(layer, features, words)
    states = layer_states(layer, words, features, sentences, torch.float64)
    paths = extraction.export(tmp_path, "att")
    table = {w: i + 1 for i, w in enumerate(words)}
    for unit, path in enumerate(paths[1:]):
        for b, s in enumerate(sentences):
            got = openfst_score(fst, path.read_text(), "log", table, s)
            assert math.isclose(got, math.log(states[b][-1, unit]), rel_tol=1e-5, abs_tol=1e-5)


@pytest.mark.parametrize("kind", ["qrnn", "rcnn", "isan"])
def test_layer_json_round_trip_and_dot(sst2: Any, tmp_path: Any, kind: str) -> None:
    sentences, words, features = small_vocabulary(sst2, 2)
    torch.manual_seed(15)
    layer = (
        {
            "qrnn": lambda: QRNNLayer(50, 2, window=2, pooling="ifo", backend="torch"),
            "rcnn": lambda: RCNNLayer(50, 2, order=2, backend="torch"),
            "isan": lambda: ISANLayer(50, 2, backend="torch"),
        }[kind]()
        .double()
        .eval()
    )
    extraction = from_kleene_layer(layer, features, words)
    states = layer_states(layer, words, features, sentences, torch.float64)
    for path in extraction.export(tmp_path, "json"):
        automaton = from_json(path.read_text())
        unit = int(path.stem[4:])
        for b, s in enumerate(sentences):
            assert math.isclose(automaton.score(s), states[b][-1, unit], rel_tol=1e-12, abs_tol=1e-12)
    assert extraction.export(tmp_path, "dot")[0].read_text().startswith("digraph")


# -- the command --------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_extract_sopa_trained(tmp_path: Any, capsys: Any) -> None:
    torch.set_num_threads(1)
    checkpoint = tmp_path / "sopa"
    train = f"train sopa --data sst2 --out {checkpoint} --max-steps 5 --no-progress --set mlp_hidden=8 --json"
    assert main([*train.split(), "--set", 'patterns="2-2_3-2"']) == 0
    capsys.readouterr()
    extract = f"extract {checkpoint} --sentences 20 --max-words 30 --out {tmp_path / 'att'} --json"
    assert main(extract.split()) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["automata"] == 4 and report["max_abs_error"] < 1e-5 and report["semiring"] == "max-plus"
    assert len(report["files"]) == 5 and "<SoPa:START>" in (tmp_path / "att" / "words.syms").read_text()


def saved(tmp_path: Any, sst2: Any, name: str, **kwargs: Any) -> str:
    """A freshly built model of the registry saved as a checkpoint (trained ones are tested above for SoPa)."""
    _, words, _ = sst2
    vocab = Vocabulary([PAD, UNK, *words[:150]])
    torch.manual_seed(16)
    model = build_model(name, vocab_size=len(vocab), num_classes=2, **kwargs)
    directory = tmp_path / name
    save_checkpoint(
        directory,
        model,
        model_name=name,
        model_kwargs={"num_classes": 2, "vocab_size": len(vocab), **kwargs},
        vocab=vocab,
        metadata={"data": "sst2"},
    )
    return str(directory)


@pytest.mark.parametrize(
    ("name", "kwargs", "automata"),
    [
        ("qrnn", {"hidden_size": 3, "num_layers": 1, "window": 2, "backend": "torch"}, 3),
        ("qrnn", {"hidden_size": 3, "num_layers": 2, "window": 1, "pooling": "ifo", "backend": "torch"}, 3),
        ("rcnn", {"hidden_size": 3, "num_layers": 1, "backend": "torch"}, 3),
        ("isan", {"hidden_size": 3, "backend": "torch"}, 3),
        ("sopa", {"patterns": "2-1_4-2", "mode": "reference", "backend": "torch"}, 3),
    ],
)
def test_cli_extract_checkpoints(
    sst2: Any, tmp_path: Any, capsys: Any, name: str, kwargs: dict[str, Any], automata: int
) -> None:
    directory = saved(tmp_path, sst2, name, **kwargs)
    assert main(["extract", directory, "--sentences", "15", "--max-words", "20", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["automata"] == automata and report["max_abs_error"] < 1e-5 and report["checked_tokens"] > 0


def test_cli_extract_refuses_non_rational_models(sst2: Any, tmp_path: Any, capsys: Any) -> None:
    assert main(["extract", saved(tmp_path, sst2, "bilstm", hidden_size=3)]) == 1
    assert "bilstm is not a rational model" in capsys.readouterr().err
    assert main(["extract", saved(tmp_path, sst2, "rrnn-b", hidden_size=2, bidirectional=True)]) == 1
    assert "bidirectional layers are not extracted" in capsys.readouterr().err
