"""Exact extraction against the modules themselves, on SST-2 sentences with GloVe vectors.

Oracles: torch's own ``nn.RNN`` (with nonnegative weights and inputs ReLU is the identity, so the
module computes the linear Elman network), the ``sru`` package's own ``SRUCell``, a line-by-line
transcription of pytorch-qrnn's forward (the package itself is not installed: it needs CUDA/cupy),
kleene's own layers, and real OpenFst (pynini) reading the AT&T exports.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np
import pytest
import torch

from kleene.automata import from_json, read_att
from kleene.cli import main
from kleene.data import load_classification, load_glove
from kleene.extract import (
    Extraction,
    ExtractionError,
    from_kleene_layer,
    from_linear_rnn,
    from_qrnn_weights,
    from_sru_cell,
    from_torch_rnn,
    kleene_layer_states,
    qrnn_output_gate,
)
from kleene.nn.rrnn import RRNNLayer
from kleene.nn.sru import SRULayer

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}


def sst2_sample() -> tuple[list[list[str]], list[str], np.ndarray]:
    """30 SST-2 dev sentences (at most 25 tokens), their vocabulary and GloVe vectors (random when missing)."""
    sentences = [list(e.tokens[:25]) for e in load_classification("sst2").split("dev")[:30]]
    words = sorted({w for s in sentences for w in s})
    glove = load_glove(set(words))
    rng = np.random.default_rng(0)
    features = np.stack([glove[w].double().numpy() if w in glove else rng.normal(0, 0.3, 50) for w in words])
    return sentences, words, features


@pytest.fixture(scope="module")
def sst2() -> tuple[list[list[str]], list[str], np.ndarray]:
    return sst2_sample()


def vectors(words: list[str], features: np.ndarray, sentence: list[str], dtype: torch.dtype) -> torch.Tensor:
    index = {w: i for i, w in enumerate(words)}
    return torch.as_tensor(features[[index[w] for w in sentence]], dtype=dtype)


# -- torch.nn.RNN read as a linear Elman network ------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.slow
def test_linear_rnn_matches_torch_rnn(sst2: Any, dtype: torch.dtype) -> None:
    sentences, words, features = sst2
    features = np.abs(features)  # nonnegative inputs and weights: ReLU(z) = z along every run
    torch.manual_seed(0)
    rnn = torch.nn.RNN(50, 6, nonlinearity="relu", batch_first=True).to(dtype)
    with torch.no_grad():
        for p in rnn.parameters():
            p.abs_().mul_(0.1)
    h0 = torch.rand(1, 1, 6, dtype=dtype)
    extraction = from_torch_rnn(rnn, features.astype(np.float32) if dtype == torch.float32 else features, words,
                                activation="identity", h0=h0)
    states = [rnn(vectors(words, features, s, dtype)[None], h0)[0][0].detach().numpy() for s in sentences]
    assert extraction.verify(sentences, states) < TOLERANCE[dtype]
    assert extraction.summary()["automata"] == 6
    assert extraction.checked_tokens == sum(map(len, sentences))


def test_linear_rnn_symbolic_and_constant_automata_agree(sst2: Any) -> None:
    sentences, words, features = sst2
    rng = np.random.default_rng(1)
    w_ih, w_hh, b = rng.normal(0, 0.2, (3, 50)), rng.normal(0, 0.4, (3, 3)), rng.normal(0, 0.1, 3)
    extraction = from_linear_rnn(w_ih, w_hh, b, features, words)
    sentence = sentences[0]
    h = np.zeros(3)  # the recurrence by hand
    for x in vectors(words, features, sentence, torch.float64).numpy():
        h = w_hh @ h + w_ih @ x + b
    for unit in range(3):
        constant = extraction.wfsa(unit, sorted(set(sentence)))
        symbolic = extraction.symbolic(unit)
        assert math.isclose(constant.score(sentence), h[unit], abs_tol=1e-10)
        assert math.isclose(symbolic.score(sentence, env=extraction.environment()), h[unit], abs_tol=1e-10)
    # an out-of-vocabulary word scored by the symbolic automaton from its vector alone
    unseen = rng.normal(0, 0.3, 50)
    expected = w_hh @ (w_ih @ unseen + b) + w_ih @ unseen + b
    env = extraction.environment({"<new>": unseen})
    assert math.isclose(extraction.symbolic(1).score(["<new>", "<new>"], env=env), expected[1], abs_tol=1e-10)


def test_nonlinear_rnn_is_refused() -> None:
    rnn = torch.nn.RNN(4, 3)
    with pytest.raises(ExtractionError, match="not rational"):
        from_torch_rnn(rnn, np.zeros((2, 4)), ["a", "b"], activation="tanh")
    with pytest.raises(ExtractionError, match="single-layer"):
        from_torch_rnn(torch.nn.RNN(4, 3, num_layers=2), np.zeros((2, 4)), ["a", "b"], activation="identity")


def test_out_of_vocabulary_word_is_named(sst2: Any) -> None:
    _, words, features = sst2
    extraction = from_linear_rnn(np.ones((2, 50)), np.eye(2), np.zeros(2), features, words)
    with pytest.raises(ExtractionError, match="'zzzq' is not in the vocabulary"):
        extraction.forward([["zzzq"]])


# -- pytorch-qrnn -------------------------------------------------------------------------------


def pytorch_qrnn_forward(linear: torch.nn.Linear, x: torch.Tensor, window: int, output_gate: bool) -> tuple[Any, Any]:
    """A transcription of pytorch-qrnn's QRNNLayer.forward (zoneout off) and CPU ForgetMult, for one sentence."""
    if window == 2:
        previous = torch.cat([torch.zeros_like(x[:1]), x[:-1]])
        source = torch.cat([x, previous], 1)  # QRNNLayer.forward: cat([X, Xm1], 2), the current word first
    else:
        source = x
    y = linear(source)
    if output_gate:
        z, f, o = y.chunk(3, dim=1)
    else:
        z, f = y.chunk(2, dim=1)
    z, f = torch.tanh(z), torch.sigmoid(f)
    c, result = torch.zeros_like(z[0]), []
    for t in range(len(x)):  # ForgetMult: h_t = f_t * x_t + (1 - f_t) * h_{t-1}
        c = f[t] * z[t] + (1 - f[t]) * c
        result.append(c)
    cells = torch.stack(result)
    return cells, (torch.sigmoid(o) * cells if output_gate else cells)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_qrnn_window_one(sst2: Any, dtype: torch.dtype) -> None:
    sentences, words, features = sst2
    torch.manual_seed(2)
    linear = torch.nn.Linear(50, 3 * 5).to(dtype)
    extraction = from_qrnn_weights(linear.weight, linear.bias, features, words, window=1, output_gate=True)
    cells, hidden = zip(*(pytorch_qrnn_forward(linear, vectors(words, features, s, dtype), 1, True) for s in sentences))
    assert extraction.verify(sentences, [c.detach().numpy() for c in cells]) < TOLERANCE[dtype]
    # h = o ⊙ c read from the automata's prefix scores and the output gate
    scores = extraction.forward(sentences[:3])
    for b, s in enumerate(sentences[:3]):
        gate = qrnn_output_gate(linear.weight, linear.bias, vectors(words, features, s, torch.float64).numpy())
        assert np.max(np.abs(gate * scores[b, : len(s)] - hidden[b].detach().numpy())) < TOLERANCE[dtype]


@pytest.mark.slow
def test_qrnn_window_two_tracks_the_previous_word(sst2: Any) -> None:
    sentences, words, features = sst2
    few = sentences[:4]
    vocabulary = sorted({w for s in few for w in s})
    rows = vectors(words, features, vocabulary, torch.float64).numpy()
    torch.manual_seed(3)
    linear = torch.nn.Linear(100, 3 * 3).double()
    extraction = from_qrnn_weights(linear.weight, linear.bias, rows, vocabulary, window=2, output_gate=True)
    runs = [pytorch_qrnn_forward(linear, vectors(words, features, s, torch.float64), 2, True) for s in few]
    assert extraction.verify(few, [c.detach().numpy() for c, _ in runs]) < 1e-10
    assert extraction.wfsa(0).num_states == 2 * len(vocabulary) + 1  # q0|<s>, q0|w, q1|w (Appendix A)
    scores = extraction.forward(few)
    for b, s in enumerate(few):
        gate = qrnn_output_gate(linear.weight, linear.bias, vectors(words, features, s, torch.float64).numpy(), 2)
        assert np.max(np.abs(gate * scores[b, : len(s)] - runs[b][1].detach().numpy())) < 1e-10


# -- the sru package ----------------------------------------------------------------------------


def sru_cell(dtype: torch.dtype, zero_vc: bool = True) -> Any:
    sru = pytest.importorskip("sru", reason="the sru package is the oracle here: pip install sru")
    torch.manual_seed(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its CUDA kernels do not compile on this CPU-only machine
        cell = sru.SRUCell(50, 4)
    with torch.no_grad():
        cell.bias.normal_()
        if zero_vc:
            cell.weight_c.zero_()
    return cell.to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sru_package_cell(sst2: Any, dtype: torch.dtype) -> None:
    """The package's final c, and its every h_t = r_t c_t + (1 − r_t) x'_t rebuilt from the automata's c_t."""
    sentences, words, features = sst2
    cell = sru_cell(dtype)
    extraction = from_sru_cell(cell, features, words)
    scores = extraction.forward(sentences)
    d, k = cell.hidden_size, cell.num_matrices
    worst = 0.0
    for b, s in enumerate(sentences):
        x = vectors(words, features, s, dtype)
        # the package's compiled CPU kernel takes float32 only (used under no_grad); float64 runs its Python loop
        with torch.set_grad_enabled(dtype == torch.float64), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hidden, last = (t.detach() for t in cell(x[:, None, :]))
        with torch.no_grad():
            u = (x @ cell.weight).view(len(s), d, k).double()
            reset = torch.sigmoid(u[..., 2] + cell.bias[d:].double()).numpy()
        skip = u[..., 3].numpy() if k == 4 else x.double().numpy() * float(cell.scale_x)
        rebuilt = reset * scores[b, : len(s)] + (1 - reset) * skip
        worst = max(worst, float(np.max(np.abs(scores[b, len(s) - 1] - last[0].numpy()))))
        worst = max(worst, float(np.max(np.abs(rebuilt - hidden[:, 0].numpy()))))
    assert worst < TOLERANCE[dtype]


def test_sru_v2_is_refused() -> None:
    with pytest.raises(ExtractionError, match="SRU v2"):
        from_sru_cell(sru_cell(torch.float64, zero_vc=False), np.zeros((1, 50)), ["a"])


# -- exports ------------------------------------------------------------------------------------


def test_exports_round_trip_and_openfst_scores(sst2: Any, tmp_path: Any) -> None:
    pynini = pytest.importorskip("pynini", reason="pynini (real OpenFst) is the oracle of AT&T exports")
    fst = pytest.importorskip("pywrapfst", reason="pywrapfst ships with pynini")
    sentences, words, features = sst2
    few = sentences[:5]
    vocabulary = sorted({w for s in few for w in s})
    rows = np.abs(vectors(words, features, vocabulary, torch.float64).numpy())
    rng = np.random.default_rng(5)  # nonnegative weights: real automata written as OpenFst log arcs (-log w)
    extraction = from_linear_rnn(rng.uniform(0, 0.1, (3, 50)), rng.uniform(0, 0.3, (3, 3)), rng.uniform(0, 0.1, 3),
                                 rows, vocabulary)
    scores = extraction.forward(few)
    paths = extraction.export(tmp_path / "att", "att")
    symbols = pynini.SymbolTable.read_text(str(paths[0]))
    for unit, path in enumerate(paths[1:]):
        compiler = fst.Compiler(arc_type="log", acceptor=True)  # labels are the table's ids
        compiler.write(path.read_text())
        machine = compiler.compile().arcsort(sort_type="olabel")
        for b, s in enumerate(few):
            lines = [f"{i}\t{i + 1}\t{symbols.find(w)}" for i, w in enumerate(s)] + [str(len(s))]
            string = fst.Compiler(arc_type="log", acceptor=True)
            string.write("\n".join(lines) + "\n")
            composed = fst.compose(machine, string.compile())
            cost = float(fst.shortestdistance(composed, reverse=True)[composed.start()])
            assert math.isclose(math.exp(-cost), scores[b, len(s) - 1, unit], rel_tol=1e-5)
        back = read_att(path.read_text(), "real", paths[0].read_text(), arc_type="log")
        assert math.isclose(back.score(few[0]), scores[0, len(few[0]) - 1, unit], rel_tol=1e-9)
    for path in extraction.export(tmp_path / "json", "json"):
        automaton = from_json(path.read_text())
        assert math.isclose(automaton.score(few[1]), scores[1, len(few[1]) - 1, int(path.stem[4:])], rel_tol=1e-12)
        assert json.loads(path.read_text())["semiring"] == "real"
    dots = extraction.export(tmp_path / "dot", "dot")
    assert len(dots) == 3 and dots[0].read_text().startswith("digraph")


def test_extraction_rejects_bad_input() -> None:
    with pytest.raises(ExtractionError, match="2 words for 4 embedding rows"):
        from_linear_rnn(np.ones((2, 3)), np.eye(2), np.zeros(2), np.zeros((4, 3)), ["a", "b"])
    with pytest.raises(ExtractionError, match="window 1 or 2"):
        from_qrnn_weights(np.zeros((6, 9)), np.zeros(6), np.zeros((2, 3)), ["a", "b"], window=3)
    with pytest.raises(ExtractionError, match="nothing to extract"):
        Extraction("empty", [], ["a"], np.zeros((1, 2)))


# -- kleene's own layers ------------------------------------------------------------------------

LAYERS = {
    "rrnn-B": lambda: RRNNLayer(50, 5, "B", backend="torch"),
    "rrnn-B-maxplus": lambda: RRNNLayer(50, 5, "B-maxplus", backend="torch"),
    "rrnn-B-semiring-max-plus": lambda: RRNNLayer(50, 5, "B", semiring="max-plus", backend="torch"),
    "rrnn-C": lambda: RRNNLayer(50, 5, "C", backend="torch"),
    "rrnn-F": lambda: RRNNLayer(50, 5, "F", backend="torch"),
    "sru-2017": lambda: SRULayer(50, 5, backend="torch"),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.slow
def test_kleene_layers(sst2: Any, name: str, dtype: torch.dtype) -> None:

    sentences, words, features = sst2
    torch.manual_seed(6)
    layer = LAYERS[name]().to(dtype).eval()
    extraction = from_kleene_layer(layer, features, words)
    with torch.no_grad():
        states = [
            kleene_layer_states(layer, vectors(words, features, s, dtype)[None], torch.tensor([len(s)]))[0].numpy()
            for s in sentences
        ]
    assert extraction.verify(sentences, states) < TOLERANCE[dtype]


def test_maxplus_export_scores_in_openfst(sst2: Any, tmp_path: Any) -> None:
    """RRNN(B) max-plus automata written as OpenFst tropical arcs (cost = −score): same best-path scores."""
    pytest.importorskip("pynini", reason="pynini (real OpenFst) is the oracle of AT&T exports")
    fst = pytest.importorskip("pywrapfst", reason="pywrapfst ships with pynini")

    sentences, words, features = sst2
    few = sentences[:4]
    vocabulary = sorted({w for s in few for w in s})
    torch.manual_seed(7)
    layer = LAYERS["rrnn-B-maxplus"]().double().eval()
    extraction = from_kleene_layer(layer, vectors(words, features, vocabulary, torch.float64).numpy(), vocabulary)
    scores = extraction.forward(few)
    paths = extraction.export(tmp_path, "att")
    table = {w: i + 1 for i, w in enumerate(vocabulary)}
    for unit, path in enumerate(paths[1:3]):
        compiler = fst.Compiler(arc_type="standard", acceptor=True)
        compiler.write(path.read_text())
        machine = compiler.compile().arcsort(sort_type="olabel")
        for b, s in enumerate(few):
            string = fst.Compiler(arc_type="standard", acceptor=True)
            string.write("".join(f"{i}\t{i + 1}\t{table[w]}\n" for i, w in enumerate(s)) + f"{len(s)}\n")
            composed = fst.compose(machine, string.compile())
            cost = float(fst.shortestdistance(composed, reverse=True)[composed.start()])
            assert math.isclose(-cost, scores[b, len(s) - 1, unit], rel_tol=1e-5, abs_tol=1e-5)  # float32 in OpenFst


@pytest.mark.slow
def test_cli_extract(tmp_path: Any, capsys: Any) -> None:

    torch.set_num_threads(1)
    checkpoint = tmp_path / "rrnn"
    assert main(["train", "rrnn-b", "--data", "sst2", "--out", str(checkpoint), "--max-steps", "2",
                 "--set", "hidden_size=4", "--set", "num_layers=1", "--json"]) == 0
    capsys.readouterr()
    assert main(["extract", str(checkpoint), "--out", str(tmp_path / "json"), "--format", "json",
                 "--max-words", "50", "--sentences", "40", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["automata"] == 4 and report["max_abs_error"] < 1e-5 and report["checked_tokens"] > 0
    exported = from_json((tmp_path / "json" / "unit000.json").read_text())
    assert exported.num_states == 2 and len(report["files"]) == 4
    assert main(["extract", str(tmp_path / "missing")]) == 1
    assert "not a kleene checkpoint" in capsys.readouterr().err
