"""Models of Noahs-ARK/rational-recurrences loaded into kleene (``from_rational_recurrences``) against an
independent transcription of the original ``RRNN`` forward (its CPU paths), written here from reading its code:
float64, to 1e-9."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from kleene.errors import OriginalCodeError
from kleene.nn.original import RRNNReferenceLayer, from_rational_recurrences

Tensor = torch.Tensor
Op = Callable[[Tensor, Tensor], Tensor]

# (⊕, ⊗, whether the original takes its semiring path, its initial state)
SEMIRINGS: dict[str, tuple[Op, Op, bool, float]] = {
    "plus_times": (torch.add, torch.mul, False, 0.0),
    "max_plus": (torch.maximum, torch.add, True, -100.0),
    "log": (lambda a, b: torch.log(torch.exp(a) + torch.exp(b)), torch.add, True, -100.0),
}


def original_state_dict(
    n_in: int, d: int, layers: int, output_gate: bool, layer_norm: bool, prefix: str = ""
) -> dict[str, Tensor]:
    """Random weights with the original's names and shapes (biases of every row nonzero, even the unused ones)."""
    k = 5 if output_gate else 4
    sd: dict[str, Tensor] = {}
    for i in range(layers):
        p = f"{prefix}rnn_lst.{i}."
        sd[p + "weight"] = torch.randn(n_in if i == 0 else d, d * k, dtype=torch.float64) * 0.6
        sd[p + "bias"] = torch.randn(d * k, dtype=torch.float64)
        sd[p + "bias_eps"] = torch.randn(d, dtype=torch.float64)
        sd[p + "bias_final"] = torch.randn(2 * d, dtype=torch.float64)
        if layer_norm:
            sd[f"{prefix}ln_lst.{i}.gamma"] = 1 + 0.3 * torch.randn(d, dtype=torch.float64)
            sd[f"{prefix}ln_lst.{i}.beta"] = 0.3 * torch.randn(d, dtype=torch.float64)
    return sd


def transcription(
    sd: dict[str, Tensor],
    semiring: str,
    activation: str,
    x: Tensor,
    init: tuple[Tensor, Tensor] | None = None,
    prefix: str = "",
) -> tuple[Tensor, Tensor, Tensor]:
    """The original RRNN on x (T, B, n): per layer, the gates from one matrix (per unit: in1, in2, f1, f2[, o]),
    the two-state recurrence with its ε-arc into the second state, the ρ-weighted sum, the gate, the activation and
    the layer norm with the unbiased std. Returns (output (T, B, D), final c1s, final c2s (L, B, D))."""
    plus, times, semiring_path, start = SEMIRINGS[semiring]
    act = {"tanh": torch.tanh, "relu": torch.relu, "none": lambda v: v}[activation]
    finals1, finals2 = [], []
    i = 0
    while f"{prefix}rnn_lst.{i}.weight" in sd:
        p = f"{prefix}rnn_lst.{i}."
        w, b = sd[p + "weight"], sd[p + "bias"]
        d = sd[p + "bias_eps"].shape[0]
        k = w.shape[1] // d
        pre = (x @ w).view(x.shape[0], x.shape[1], d, k)
        bias = b.view(k, d)
        forget1 = torch.sigmoid(pre[..., 2] + bias[2])
        forget2 = torch.sigmoid(pre[..., 3] + bias[3])
        eps = torch.sigmoid(sd[p + "bias_eps"])
        rho = torch.sigmoid(sd[p + "bias_final"]).view(d, 2)
        if semiring_path:
            in1, in2 = pre[..., 0], pre[..., 1]
            forget1, forget2, eps = forget1.log(), forget2.log(), eps.log()
            rho = (2 * rho).log()
        else:
            in1, in2 = pre[..., 0] * (1 - forget1), pre[..., 1] * (1 - forget2)
        if init is None:
            c1 = torch.full((x.shape[1], d), start, dtype=x.dtype)
            c2 = c1.clone()
        else:
            c1, c2 = init[0][i], init[1][i]
        cs = []
        for t in range(x.shape[0]):
            new1 = plus(times(c1, forget1[t]), in1[t])
            new2 = plus(times(c2, forget2[t]), times(plus(eps, c1), in2[t]))
            c1, c2 = new1, new2
            cs.append(plus(times(c1, rho[:, 0]), times(c2, rho[:, 1])))
        c = torch.stack(cs)
        h = act(torch.sigmoid(pre[..., 4] + bias[4]) * c) if k == 5 else act(c)
        if f"{prefix}ln_lst.{i}.gamma" in sd:
            std = h.std(-1, keepdim=True, unbiased=True)
            h = sd[f"{prefix}ln_lst.{i}.gamma"] * (h - h.mean(-1, keepdim=True)) / (std + 1e-6)
            h = h + sd[f"{prefix}ln_lst.{i}.beta"]
        finals1.append(c1)
        finals2.append(c2)
        x = h
        i += 1
    return x, torch.stack(finals1), torch.stack(finals2)


def compare(
    semiring: str, activation: str, output_gate: bool, layer_norm: bool, layers: int, with_init: bool, backend: str
) -> None:
    torch.manual_seed(hash((semiring, activation, output_gate, layer_norm, layers, with_init)) % 1000)
    n_in, d, batch, steps = 5, 4, 3, 7
    sd = original_state_dict(n_in, d, layers, output_gate, layer_norm)
    config: dict[str, Any] = {"semiring": semiring, "use_tanh": int(activation == "tanh")}
    config["use_relu"] = int(activation == "relu")
    model = from_rational_recurrences(sd, config, backend=backend).eval()
    x = torch.randn(steps, batch, n_in, dtype=torch.float64)
    init = None
    if with_init:
        init = (torch.randn(layers, batch, d, dtype=torch.float64), torch.randn(layers, batch, d, dtype=torch.float64))
    expected, c1, c2 = transcription(sd, semiring, activation, x, init)
    got, (g1, g2) = model(x.transpose(0, 1), init_hidden=init)
    assert got.dtype == torch.float64
    assert torch.allclose(got.transpose(0, 1), expected, rtol=0, atol=1e-9)
    assert torch.allclose(g1, c1, rtol=0, atol=1e-9) and torch.allclose(g2, c2, rtol=0, atol=1e-9)


@pytest.mark.parametrize("semiring", list(SEMIRINGS))
@pytest.mark.parametrize("output_gate", [True, False])
@pytest.mark.parametrize("layer_norm", [False, True])
def test_each_semiring_gate_and_layer_norm(semiring: str, output_gate: bool, layer_norm: bool) -> None:
    compare(semiring, "tanh", output_gate, layer_norm, 2, False, "torch")


@pytest.mark.parametrize("semiring", list(SEMIRINGS))
@pytest.mark.parametrize("activation", ["relu", "none"])
def test_activations_and_initial_states(semiring: str, activation: str) -> None:
    compare(semiring, activation, True, False, 3, True, "torch")


@pytest.mark.parametrize("semiring", list(SEMIRINGS))
def test_compiled_backend(semiring: str) -> None:
    compare(semiring, "tanh", True, True, 2, True, "auto")


def test_classifier_prefix_and_gradients() -> None:
    """The state dict of the original's classifier (RRNN under ``encoder.``); the gradients follow the original's
    parametrization too (γ, ρ read from the raw biases)."""
    torch.manual_seed(11)
    sd = original_state_dict(5, 4, 2, True, False, prefix="encoder.")
    sd["emb_layer.embedding.weight"] = torch.randn(10, 5, dtype=torch.float64)
    sd = {key: value.requires_grad_() for key, value in sd.items()}
    model = from_rational_recurrences(sd, {"semiring": "max_plus"}, backend="torch")
    x = torch.randn(6, 2, 5, dtype=torch.float64)
    expected = transcription(sd, "max_plus", "tanh", x, prefix="encoder.")[0]
    got = model(x.transpose(0, 1))[0].transpose(0, 1)
    assert torch.allclose(got, expected, rtol=0, atol=1e-9)
    expected.sum().backward()
    got.sum().backward()
    layer = model.layers[1]
    assert isinstance(layer, RRNNReferenceLayer)
    grad, eps_grad, final_grad = (
        layer.raw_constants.grad,
        sd["encoder.rnn_lst.1.bias_eps"].grad,
        sd["encoder.rnn_lst.1.bias_final"].grad,
    )
    assert grad is not None and eps_grad is not None and final_grad is not None
    assert torch.allclose(grad[0], eps_grad, rtol=0, atol=1e-9)
    assert torch.allclose(grad[1:].T.reshape(-1), final_grad, rtol=0, atol=1e-9)


def test_refusals_say_why() -> None:
    sd = original_state_dict(3, 2, 1, False, False)
    with pytest.raises(OriginalCodeError, match=r"max_times.*multiplies them with torch\.mul"):
        from_rational_recurrences(sd, {"semiring": "max_times"})
    with pytest.raises(OriginalCodeError, match="unknown rational-recurrences semiring 'min_plus'"):
        from_rational_recurrences(sd, {"semiring": "min_plus"})
    with pytest.raises(OriginalCodeError, match="use_selu=1 is refused"):
        from_rational_recurrences(sd, {"semiring": "log", "use_tanh": 0, "use_selu": 1})
    with pytest.raises(OriginalCodeError, match="weight_norm=True is refused"):
        from_rational_recurrences({**sd, "rnn_lst.0.gain_in": torch.ones(4)}, {"semiring": "plus_times"})
    with pytest.raises(OriginalCodeError, match="bidirectional=True is refused"):
        from_rational_recurrences(sd, {"semiring": "plus_times", "bidirectional": True})
    with pytest.raises(OriginalCodeError, match=r"unknown rational-recurrences arguments \['hidden'\]"):
        from_rational_recurrences(sd, {"semiring": "plus_times", "hidden": 3})
    with pytest.raises(OriginalCodeError, match="use_output_gate=True but the state dict has use_output_gate=False"):
        from_rational_recurrences(sd, {"semiring": "plus_times", "use_output_gate": True})
    with pytest.raises(OriginalCodeError, match=r"'rnn_lst\.0\.bias_final' has shape"):
        from_rational_recurrences({**sd, "rnn_lst.0.bias_final": torch.zeros(3)}, {"semiring": "plus_times"})
    with pytest.raises(OriginalCodeError, match="found 0 such prefixes"):
        from_rational_recurrences({}, {"semiring": "plus_times"})
    model = from_rational_recurrences(sd, {"semiring": "log"}, backend="torch")
    with pytest.raises(OriginalCodeError, match="init_hidden must be a pair"):
        model(torch.zeros(2, 3, 3, dtype=torch.float64), init_hidden=(torch.zeros(1, 2, 2), torch.zeros(2, 2)))


def test_the_log_path_starts_from_minus_100_not_minus_infinity() -> None:
    """In the log semiring an input below −100 meets the original's initial state −100: log(e^−100 + e^u) ≠ u."""
    sd = original_state_dict(1, 2, 1, False, False)
    sd["rnn_lst.0.weight"].zero_()
    sd["rnn_lst.0.weight"][0, 0] = 1.0  # in1 of unit 1 = x
    model = from_rational_recurrences(sd, {"semiring": "log", "use_tanh": 0}, backend="torch")
    x = torch.full((1, 1, 1), -103.0, dtype=torch.float64)
    _, (c1, _) = model(x)
    forget = torch.nn.functional.logsigmoid(sd["rnn_lst.0.bias"][2 * 2])
    expected = torch.logaddexp(-100 + forget, x[0, 0, 0]).detach()
    assert math.isclose(float(c1[0, 0, 0].detach()), float(expected), abs_tol=1e-12)
    assert float(c1[0, 0, 0].detach()) > -103.0 + 1e-3


@pytest.mark.parametrize(("batch", "steps"), [(0, 4), (2, 0), (0, 0)])
def test_empty_batches_and_sequences(batch: int, steps: int) -> None:
    model = from_rational_recurrences(original_state_dict(3, 2, 2, True, True), {"semiring": "log"}, backend="torch")
    init = (torch.randn(2, batch, 2, dtype=torch.float64), torch.randn(2, batch, 2, dtype=torch.float64))
    h, (c1, c2) = model(torch.zeros(batch, steps, 3, dtype=torch.float64), init_hidden=init)
    assert h.shape == (batch, steps, 2) and torch.equal(c1, init[0]) and torch.equal(c2, init[1])


def test_the_originals_constructor_arguments_load_verbatim() -> None:
    """``RRNN(semiring, input_size, hidden_size, num_layers, dropout, rnn_dropout, ...)`` as given to the original:
    the sizes are checked against the weights and the dropouts (training only) accepted."""
    torch.manual_seed(13)
    sd = original_state_dict(5, 4, 2, True, False)
    args = {"semiring": "max_plus", "input_size": 5, "hidden_size": 4, "num_layers": 2, "dropout": 0.2,
            "rnn_dropout": 0.2, "bidirectional": False, "use_tanh": 1, "use_relu": 0, "use_selu": 0,
            "weight_norm": False, "layer_norm": False, "use_output_gate": True}  # fmt: skip
    model = from_rational_recurrences(sd, args, backend="torch").eval()
    x = torch.randn(6, 2, 5, dtype=torch.float64)
    expected, c1, c2 = transcription(sd, "max_plus", "tanh", x, None)
    got, (g1, g2) = model(x.transpose(0, 1))
    assert torch.allclose(got.transpose(0, 1), expected, rtol=0, atol=1e-9)
    assert torch.allclose(g1, c1, rtol=0, atol=1e-9) and torch.allclose(g2, c2, rtol=0, atol=1e-9)
    with pytest.raises(OriginalCodeError, match="input_size=6, but the checkpoint's weights have input_size=5"):
        from_rational_recurrences(sd, {**args, "input_size": 6})
    with pytest.raises(OriginalCodeError, match="num_layers=1, but the checkpoint's weights have num_layers=2"):
        from_rational_recurrences(sd, {**args, "num_layers": 1})


def test_the_initial_state_comes_before_the_lengths_as_in_every_loaded_model() -> None:
    """``model(x, init_hidden, lengths)``: the original's ``forward(input, init_hidden)``, kleene's lengths last."""
    torch.manual_seed(14)
    sd = original_state_dict(3, 2, 1, False, False)
    model = from_rational_recurrences(sd, {"semiring": "plus_times"}, backend="torch").eval()
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    init = (torch.randn(1, 2, 2, dtype=torch.float64), torch.randn(1, 2, 2, dtype=torch.float64))
    whole, _ = model(x, init, torch.tensor([4, 4]))
    expected, _, _ = transcription(sd, "plus_times", "tanh", x.transpose(0, 1), init)
    assert torch.allclose(whole.transpose(0, 1), expected, rtol=0, atol=1e-9)
