"""RRNN(B, C, F) with ``semiring=``: each layer against an independent transcription of its WFSA's Forward recurrence
in the semiring's own elements (Rational Recurrences eq. 23-26, §5.2), written here in plain torch, float64."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from kleene.errors import LayerError
from kleene.nn.rrnn import RRNNClassifier, RRNNLayer

Tensor = torch.Tensor
Op = Callable[[Tensor, Tensor], Tensor]


def _logaddexp(a: Tensor, b: Tensor) -> Tensor:
    return torch.logaddexp(a, b)


# semiring name -> (plus, times, zero, the element of probability p, the element of a raw input value w,
#                   elements to the stored numbers the layer outputs)
Map = Callable[[Tensor], Tensor]
ALGEBRA: dict[str, tuple[Op, Op, float, Map, Map, Map]] = {
    "real": (torch.add, torch.mul, 0.0, lambda p: p, lambda w: w, lambda e: e),
    "log": (_logaddexp, torch.add, -math.inf, torch.log, lambda w: w, lambda e: e),
    "max-plus": (torch.maximum, torch.add, -math.inf, torch.log, lambda w: w, lambda e: e),
    "max-times": (torch.maximum, torch.mul, 0.0, lambda p: p, torch.exp, torch.log),
}
SUMMING = {"real": True, "log": True, "max-plus": False, "max-times": False}


def transcription(layer: RRNNLayer, x: Tensor, name: str) -> Tensor:
    """The cell values c_t (B, T, D), in stored form, of ``layer`` on ``x`` by the WFSA's recurrence."""
    plus, times, zero, prob, value, stored = ALGEBRA[name]
    b, t, _ = x.shape
    d, orders = layer.dim, layer.orders
    f_pre = layer.forget(x).view(b, t, orders, d)
    w = layer.update(x).view(b, t, orders, d)
    f = prob(torch.sigmoid(f_pre))
    u = times(prob(1 - torch.sigmoid(f_pre)), value(w)) if SUMMING[name] else value(w)
    zeros = torch.full((b, d), zero, dtype=x.dtype)
    c1, c2 = zeros, zeros
    outputs = []
    if layer.kind == "F":
        raw = layer.recurrence.parametrizations.constants.original  # rows gamma, rho1, rho2
        gamma, rho1, rho2 = (prob(torch.sigmoid(raw[k])) for k in range(3))
    for step in range(t):
        if orders == 1:  # B: c_t = u_t ⊕ c_{t-1} ⊗ f_t
            c1 = plus(u[:, step, 0], times(c1, f[:, step, 0]))
            outputs.append(c1)
            continue
        new1 = plus(u[:, step, 0], times(c1, f[:, step, 0]))
        new2 = plus(times(c1, u[:, step, 1]), times(c2, f[:, step, 1]))
        if layer.kind == "F":  # q0 -ε/γ-> q3 -u2-> q2; finals ρ1 on q1, ρ2 on q2
            new2 = plus(new2, times(gamma, u[:, step, 1]))
        c1, c2 = new1, new2
        outputs.append(plus(times(rho1, c1), times(rho2, c2)) if layer.kind == "F" else c2)
    return stored(torch.stack(outputs, 1))


@pytest.mark.parametrize("name", sorted(ALGEBRA))
@pytest.mark.parametrize("kind", ["B", "C", "F"])
def test_layer_is_its_automaton_in_every_semiring(kind: str, name: str) -> None:
    torch.manual_seed(0)
    layer = RRNNLayer(4, 3, kind, semiring=name, activation="none", backend="torch").double()
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    h, _ = layer(x, torch.tensor([5, 5]))
    expected = transcription(layer, x, name)
    # a handful of well-conditioned sums and products of numbers of order 1: float64 rounding, amplified by ≤ 10²
    torch.testing.assert_close(h, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["log", "max-times"])
def test_compiled_kernel_matches_in_log_storage(name: str) -> None:
    torch.manual_seed(1)
    layer = RRNNLayer(3, 2, "F", semiring=name, output_gate=True, backend="torch").double()
    compiled = RRNNLayer(3, 2, "F", semiring=name, output_gate=True, backend="cpp").double()
    compiled.load_state_dict(layer.state_dict())
    x = torch.randn(3, 4, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([4, 2, 0])
    h, _ = layer(x, lengths)
    h2, _ = compiled(x, lengths)
    torch.testing.assert_close(h2, h, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda v: compiled(v, lengths)[0], (x,))


def test_b_maxplus_is_b_in_max_plus() -> None:
    torch.manual_seed(2)
    alias = RRNNLayer(3, 2, "B-maxplus", backend="torch").double()
    layer = RRNNLayer(3, 2, "B", semiring="max-plus", backend="torch").double()
    layer.load_state_dict(alias.state_dict())
    x = torch.randn(2, 3, 3, dtype=torch.float64)
    torch.testing.assert_close(layer(x, torch.tensor([3, 1]))[0], alias(x, torch.tensor([3, 1]))[0], rtol=0, atol=0)
    with pytest.raises(LayerError, match="B-maxplus"):
        RRNNLayer(3, 2, "B-maxplus", semiring="log")


@pytest.mark.parametrize("activation", ["relu", "none", "tanh"])
def test_activation(activation: str) -> None:
    torch.manual_seed(3)
    layer = RRNNLayer(3, 2, "B", activation=activation, backend="torch").double()
    x = torch.randn(1, 4, 3, dtype=torch.float64)
    c = transcription(layer, x, "real")
    expected = {"relu": torch.relu, "none": lambda v: v, "tanh": torch.tanh}[activation](c)
    torch.testing.assert_close(layer(x, torch.tensor([4]))[0], expected, rtol=1e-12, atol=1e-12)


def test_refusals_name_the_reason() -> None:
    with pytest.raises(LayerError, match=r"min-plus.*stores p = 0.5"):
        RRNNLayer(3, 2, "B", semiring="min-plus")
    with pytest.raises(LayerError, match="boolean"):
        RRNNLayer(3, 2, "B", semiring="boolean")
    with pytest.raises(LayerError, match="activation 'sigmoid'"):
        RRNNLayer(3, 2, "B", activation="sigmoid")
    with pytest.raises(LayerError, match=r"activation \['tanh'\]"):
        RRNNLayer(3, 2, "B", activation=["tanh"])  # type: ignore[arg-type]
    with pytest.raises(LayerError, match="semiring 3"):
        RRNNLayer(3, 2, "B", semiring=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(ALGEBRA))
def test_extracted_automata_score_like_the_layer_in_every_semiring(name: str) -> None:
    """RRNN(F) (ε-arc, constants, two gates) extracted in each semiring: the constant automaton over the words and
    the symbolic one (weights as expressions of the word vectors, ``sym_from_storage`` for max-times) both give the
    layer's cell states, read as elements; the automata live in the layer's semiring."""
    from kleene.automata import score
    from kleene.extract import from_kleene_layer, kleene_layer_states

    torch.manual_seed(2)
    layer = RRNNLayer(3, 2, "F", semiring=name, backend="torch").double().eval()
    words = ["a", "b", "c"]
    vectors = torch.randn(3, 3, dtype=torch.float64)
    extraction = from_kleene_layer(layer, vectors.numpy(), words)
    sentence = ["b", "a", "c", "c"]
    with torch.no_grad():
        states = kleene_layer_states(layer, vectors[[1, 0, 2, 2]][None], torch.tensor([4]))[0].numpy()
    assert extraction.verify([sentence], [states]) < 1e-12 * max(1.0, float(abs(states[abs(states) < 1e300]).max()))
    for unit in range(2):
        constant, symbolic = extraction.wfsa(unit), extraction.symbolic(unit)
        assert constant.semiring.name == name == symbolic.semiring.name
        by_words = score(constant, sentence)
        by_vectors = score(symbolic, sentence, env=extraction.environment())
        assert by_words == pytest.approx(states[-1, unit], rel=1e-10, abs=1e-12)
        assert by_vectors == pytest.approx(states[-1, unit], rel=1e-10, abs=1e-12)


def test_classifier_takes_semiring_and_activation() -> None:
    model = RRNNClassifier(10, 2, "C", semiring="max-times", activation="relu", hidden_size=3, num_layers=1,
                           embedding_dim=4, mlp_hidden=3, backend="torch")  # fmt: skip
    logits = model(torch.randint(1, 10, (2, 5)), torch.tensor([5, 3]))
    assert logits.shape == (2, 2) and torch.isfinite(logits).all()


@pytest.mark.parametrize("name", sorted(ALGEBRA))
@pytest.mark.parametrize("kind", ["B", "C", "F"])
def test_zoo_proves_each_kind_in_each_semiring(kind: str, name: str) -> None:
    from kleene.rational import prove, zoo

    result = prove(zoo.rrnn_semiring(kind, name))
    assert result.rational and result.checked, result
    states = {"B": 2, "C": 3, "F": 3}[kind]
    assert [a.wfsa.num_states for a in result.automata] == [states]


def test_layer_norm_normalises_every_layer_and_keeps_padding_zero() -> None:
    from kleene.nn.rrnn import RationalStack

    torch.manual_seed(4)
    stack = RationalStack(
        3, 2, lambda size, index: RRNNLayer(size, 4, "C", semiring="log", backend="torch"), layer_norm=True
    ).double()
    with torch.no_grad():
        for norm in stack.norms:
            norm.weight.uniform_(0.5, 2.0)
            norm.bias.uniform_(-1.0, 1.0)
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    lengths = torch.tensor([5, 3])
    h, _ = stack(x, lengths)
    expected = x
    for layer, norm in zip(stack.layers, stack.norms):
        raw, _ = layer(expected, lengths)
        mean, var = raw.mean(-1, keepdim=True), raw.var(-1, unbiased=False, keepdim=True)
        expected = (raw - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias
        expected = torch.where(torch.arange(5)[None, :, None] < lengths[:, None, None], expected, 0.0)
    torch.testing.assert_close(h, expected, rtol=1e-12, atol=1e-12)
    assert (h[1, 3:] == 0).all()
    streamed = torch.cat([stack.stream(x[:, :2])[0], stack.stream(x[:, 2:], stack.stream(x[:, :2])[1])[0]], 1)
    torch.testing.assert_close(streamed[0], h[0], rtol=1e-12, atol=1e-12)
    with pytest.raises(LayerError, match="layer_norm"):
        RationalStack(3, 1, lambda size, index: RRNNLayer(size, 2, backend="torch"), layer_norm="yes")  # type: ignore[arg-type]


@pytest.mark.slow
def test_cli_trains_rrnn_f_in_max_plus_with_layer_norm(tmp_path: Any) -> None:
    from kleene.cli import main

    torch.set_num_threads(1)
    out = tmp_path / "rrnn-f"
    assert main(["train", "rrnn-f", "--data", "sst2", "--out", str(out), "--max-steps", "2", "--set",
                 "semiring=max-plus", "--set", "layer_norm=true", "--set", "activation=relu", "--set", "hidden_size=3",
                 "--set", "num_layers=1", "--json"]) == 0  # fmt: skip
    config = (out / "config.json").read_text()
    assert '"max-plus"' in config and '"layer_norm": true' in config


def qrnn_transcription(layer: Any, x: Tensor, name: str) -> Tensor:
    """fo/ifo/f-pooling of a QRNN layer by its equations in the semiring's elements (stored form)."""
    plus, times, zero, prob, value, stored = ALGEBRA[name]
    k = layer.window
    padded = torch.cat([x.new_zeros(x.shape[0], k - 1, x.shape[2]), x], 1)
    pre = torch.stack([layer.convolution(padded[:, t : t + k].transpose(1, 2))[..., 0] for t in range(x.shape[1])], 1)
    parts = dict(zip(layer.gates, pre.split(layer.hidden_size, -1)))
    z = value(torch.tanh(parts["z"]))
    f = torch.sigmoid(parts["f"])
    interpolated = times(prob(1 - f), z) if SUMMING[name] else z
    u = times(prob(torch.sigmoid(parts["i"])), z) if "i" in parts else interpolated
    c = torch.full((x.shape[0], layer.hidden_size), zero, dtype=x.dtype)
    outputs = []
    for t in range(x.shape[1]):
        c = plus(times(c, prob(f[:, t])), u[:, t])
        outputs.append(times(prob(torch.sigmoid(parts["o"][:, t])), c) if "o" in parts else c)
    return stored(torch.stack(outputs, 1))


@pytest.mark.parametrize("name", sorted(ALGEBRA))
@pytest.mark.parametrize(("pooling", "window"), [("f", 1), ("fo", 2), ("ifo", 3)])
def test_qrnn_pooling_in_every_semiring(name: str, pooling: str, window: int) -> None:
    from kleene.nn.qrnn import QRNNLayer

    torch.manual_seed(5)
    layer = QRNNLayer(3, 4, window=window, pooling=pooling, semiring=name, backend="torch").double()
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    h, _ = layer(x, torch.tensor([6, 6]))
    torch.testing.assert_close(h, qrnn_transcription(layer, x, name), rtol=1e-12, atol=1e-12)
    first, state = layer.stream(x[:, :4])
    second, _ = layer.stream(x[:, 4:], state)
    torch.testing.assert_close(torch.cat([first, second], 1), h, rtol=1e-12, atol=1e-12)


def test_qrnn_semiring_refusals() -> None:
    from kleene.nn.qrnn import QRNNLayer

    with pytest.raises(LayerError, match="field semiring"):
        QRNNLayer(3, 2, semiring="max-plus", context_size=4)
    with pytest.raises(LayerError, match="unknown QRNN pooling"):
        QRNNLayer(3, 2, pooling=["fo"])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(ALGEBRA))
def test_sru_cell_in_every_semiring(name: str) -> None:
    from kleene.nn.sru import SRULayer

    plus, times, zero, prob, value, stored = ALGEBRA[name]
    torch.manual_seed(6)
    layer = SRULayer(3, 3, semiring=name, backend="torch").double()
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    h, _ = layer(x, torch.tensor([5, 5]))
    f_pre, r_pre = layer.gates(x).split(3, -1)
    w = value(layer.transform(x))
    u = times(prob(1 - torch.sigmoid(f_pre)), w) if SUMMING[name] else w
    c = torch.full((2, 3), zero, dtype=torch.float64)
    cells = []
    for t in range(5):
        c = plus(times(c, prob(torch.sigmoid(f_pre[:, t]))), u[:, t])
        cells.append(c)
    r = torch.sigmoid(r_pre)
    expected = r * torch.tanh(stored(torch.stack(cells, 1))) + (1 - r) * x  # the highway on stored values
    torch.testing.assert_close(h, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(ALGEBRA))
@pytest.mark.parametrize("adaptive", [True, False])
def test_rcnn_chain_in_every_semiring(name: str, adaptive: bool) -> None:
    from kleene.nn.rcnn import RCNNLayer

    plus, times, zero, prob, value, stored = ALGEBRA[name]
    torch.manual_seed(7)
    layer = RCNNLayer(3, 2, order=2, adaptive_decay=adaptive, semiring=name, backend="torch").double()
    with torch.no_grad():
        layer.bias.uniform_(-1, 1)
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    h, _ = layer(x, torch.tensor([4, 4]))
    u = value(layer.inputs(x)).view(2, 4, 2, 2)
    if adaptive:
        lam = prob(torch.sigmoid(layer.decay(x)))
    else:
        raw = layer.recurrence.parametrizations.constants.original[0]
        lam = prob(torch.sigmoid(raw)).expand(2, 4, 2)
    c1 = c2 = torch.full((2, 2), zero, dtype=torch.float64)
    cells = []
    for t in range(4):  # c1 = c1 ⊗ λ ⊕ u1; c2 = c2 ⊗ λ ⊕ c1_{t-1} ⊗ u2
        c1, c2 = plus(times(c1, lam[:, t]), u[:, t, 0]), plus(times(c2, lam[:, t]), times(c1, u[:, t, 1]))
        cells.append(c2)
    expected = torch.tanh(stored(torch.stack(cells, 1)) + layer.bias)
    torch.testing.assert_close(h, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", [*sorted(ALGEBRA), "min-plus"])
def test_isan_in_every_semiring(name: str) -> None:
    """ISAN (no gates, so min-plus too): c_i = ⊕_j W_ij ⊗ c_j ⊕ b_i with W_x, b_x the affine maps' stored values."""
    from kleene.nn.isan import ISANLayer

    ops = dict(ALGEBRA, **{"min-plus": (torch.minimum, torch.add, math.inf, None, lambda w: w, lambda e: e)})
    plus, times, zero, _, value, stored = ops[name]
    torch.manual_seed(8)
    layer = ISANLayer(3, 3, semiring=name, backend="torch").double()
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    h, _ = layer(x, torch.tensor([4, 2]))
    matrix, offset = value(layer.matrix(x)).view(2, 4, 3, 3), value(layer.offset(x))
    c = torch.full((2, 3), zero, dtype=torch.float64)
    cells = []
    for t in range(4):
        terms = times(matrix[:, t], c[:, None, :])  # [b, i, j]: W_ij ⊗ c_j
        total = offset[:, t]
        for j in range(3):
            total = plus(total, terms[:, :, j])
        c = total
        cells.append(c)
    expected = stored(torch.stack(cells, 1))
    torch.testing.assert_close(h[0], expected[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(h[1, :2], expected[1, :2], rtol=1e-12, atol=1e-12)
    assert torch.all(h[1, 2:] == 0)


@pytest.mark.parametrize("name", ["rrnn-b", "rrnn-c", "rrnn-f", "qrnn", "sru", "rcnn", "isan", "sopa"])
def test_every_rational_model_takes_a_semiring(name: str) -> None:
    """``kleene train NAME --set semiring=max-plus``'s model: every layer of every rational classifier runs in the
    semiring it was given (the registry passes ``semiring`` through), and the classifier runs."""
    from kleene.nn import build_model

    torch.manual_seed(0)
    sizes = {"patterns": "2-2_3-2"} if name == "sopa" else {"hidden_size": 3, "num_layers": 1}
    model = build_model(name, vocab_size=12, num_classes=3, semiring="max-plus", backend="torch", **sizes)
    layers = [m for m in model.modules() if hasattr(m, "algebra")]
    assert layers and {m.algebra.name for m in layers} == {"max-plus"}
    logits = model(torch.randint(1, 12, (2, 5)), torch.tensor([5, 2]))
    assert logits.shape == (2, 3) and torch.isfinite(logits).all()
