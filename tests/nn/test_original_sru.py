"""``sru.SRUCell`` and the ``sru.SRU`` wrapper (the package, 2.6) loaded into kleene (``from_sru``/``from_sru_module``)
against the package itself (evaluation, CPU): float64, to 1e-9; SRU v2 (weight_c ≠ 0) and custom_m are refused with
the reason."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from kleene.errors import OriginalCodeError
from kleene.nn.original.sru import SRU_ARGS, SRU_CELL_ARGS, from_sru, from_sru_module

sru = pytest.importorskip("sru", reason="the sru package is the oracle here: pip install sru==2.6.0")


def cell(input_size: int, hidden_size: int, seed: int, **options: Any) -> Any:
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its CUDA kernels do not compile on a CPU-only machine
        module = sru.SRUCell(input_size, hidden_size, **options)
    with torch.no_grad():
        module.bias.normal_()
        module.weight_c.zero_()
        if module.layer_norm is not None:
            module.layer_norm.weight.normal_(1.0, 0.2)
            module.layer_norm.bias.normal_(0.0, 0.2)
    return module.double().eval()


def package_forward(original: Any, x: torch.Tensor, c0: torch.Tensor | None = None) -> tuple[Any, Any]:
    """The package's CPU forward in float64: its pure-Python recurrence, which it runs when gradients are on (its
    inference kernel takes float32 only)."""
    with warnings.catch_warnings(), torch.enable_grad():
        warnings.simplefilter("ignore")  # "Running SRU on CPU with grad_enabled=True"
        h, c = original(x, c0)
    return h.detach(), c.detach()


CONFIGS = [
    {},
    {"use_tanh": True},
    {"bidirectional": True},
    {"has_skip_term": False},
    {"rescale": False, "highway_bias": -1.0},
    {"highway_bias": 1.0},  # rescale: scale_x = sqrt(1 + 2e)
    {"layer_norm": True},
    {"layer_norm": True, "normalize_after": True, "use_tanh": True},
    {"n_proj": 2},
    {"bidirectional": True, "layer_norm": True, "highway_bias": 0.5},
]


@pytest.mark.parametrize("options", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "defaults")
@pytest.mark.parametrize("same_size", [True, False])
def test_cells_match_the_package(options: dict[str, Any], same_size: bool) -> None:
    bidirectional = options.get("bidirectional", False)
    hidden = 3
    n_in = hidden * (2 if bidirectional else 1) if same_size else 5
    original = cell(n_in, hidden, len(str(options)) + same_size, **options)
    layer = from_sru_module(original, backend="torch").eval()
    x = torch.randn(7, 2, n_in, dtype=torch.float64)
    c0 = torch.randn(2, original.output_size, dtype=torch.float64)
    for start in (None, c0):
        h, c = package_forward(original, x, start)
        got_h, got_c = layer(x.transpose(0, 1), start)
        assert torch.allclose(got_h.transpose(0, 1), h, rtol=0, atol=1e-9)
        assert torch.allclose(got_c, c, rtol=0, atol=1e-9)


def test_state_dict_and_config() -> None:
    original = cell(5, 3, 1, use_tanh=True)
    layer = from_sru(original.state_dict(), {"input_size": 5, "hidden_size": 3, "use_tanh": True}, backend="auto")
    x = torch.randn(4, 2, 5, dtype=torch.float64)
    got = layer(x.transpose(0, 1))[0].transpose(0, 1)
    assert torch.allclose(got, package_forward(original, x)[0], rtol=0, atol=1e-9)


def test_sru_v2_is_refused_naming_the_term() -> None:
    original = cell(3, 3, 2)
    with torch.no_grad():
        original.weight_c[4] = 0.25  # the reset gate of unit 1
    with pytest.raises(OriginalCodeError, match=r"SRU v2: weight_c\[4\] = 0.25 ≠ 0 .* reset gate of unit 1"):
        from_sru_module(original)
    with pytest.raises(OriginalCodeError, match="not rational"):
        from_sru_module(original)


def test_other_refusals() -> None:
    sd = cell(3, 3, 3).state_dict()
    with pytest.raises(OriginalCodeError, match="custom_m is refused"):
        from_sru(sd, {"input_size": 3, "hidden_size": 3, "custom_m": torch.nn.Linear(3, 9)})
    with pytest.raises(OriginalCodeError, match=r"unknown sru.SRUCell arguments \['window'\]"):
        from_sru(sd, {"input_size": 3, "hidden_size": 3, "window": 2})
    with pytest.raises(OriginalCodeError, match=r"unknown sru.SRUCell arguments \['num_layers'\]"):
        from_sru(sd, {"num_layers": 1})  # a cell has no num_layers (the wrapper has)
    with pytest.raises(OriginalCodeError, match="hidden_size=4, but the checkpoint's weights have hidden_size=3"):
        from_sru(sd, {"input_size": 3, "hidden_size": 4})


def wrapper(input_size: int, hidden_size: int, seed: int, **options: Any) -> Any:
    """A package ``sru.SRU`` with random biases and layer norms and weight_c = 0 (SRU-2017 cells)."""
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = sru.SRU(input_size, hidden_size, **options)
    with torch.no_grad():
        for layer in module.rnn_lst:
            layer.bias.normal_()
            layer.weight_c.zero_()
            if layer.layer_norm is not None:
                layer.layer_norm.weight.normal_(1.0, 0.2)
                layer.layer_norm.bias.normal_(0.0, 0.2)
    return module.double().eval()


WRAPPER_CONFIGS = [
    {},
    {"num_layers": 3, "highway_bias": -1.0},  # rescale False by default: the skip is x, not scale_x · x
    {"rescale": True, "highway_bias": 1.0},
    {"bidirectional": True, "num_layers": 1},
    {"bidirectional": True, "nn_rnn_compatible_return": True},
    {"layer_norm": True, "use_tanh": True},
    {"projection_size": 2},
    {"proj_input_to_hidden_first": True},
]


@pytest.mark.parametrize(
    "options", WRAPPER_CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "defaults"
)
def test_the_sru_wrapper_matches_the_package(options: dict[str, Any]) -> None:
    original = wrapper(5, 3, len(str(options)), **options)
    model = from_sru(original.state_dict(), {"input_size": 5, "hidden_size": 3, **options}, backend="torch").eval()
    from_module = from_sru_module(original, backend="torch").eval()
    layers = options.get("num_layers", 2)
    x = torch.randn(6, 2, 5, dtype=torch.float64)
    c0 = torch.randn(layers, 2, original.output_size, dtype=torch.float64)
    for start in (None, c0):
        h, c = package_forward(original, x, start)
        for loaded in (model, from_module):
            got_h, got_c = loaded(x.transpose(0, 1), start)
            assert torch.allclose(got_h.transpose(0, 1), h, rtol=0, atol=1e-9)
            assert got_c.shape == c.shape and torch.allclose(got_c, c, rtol=0, atol=1e-9)


def test_the_wrappers_default_is_rescale_false_and_the_cells_true() -> None:
    """With no argument given, each reads its own package default: the wrapper rescale=False, the cell rescale=True
    (scale_x = sqrt(1 + 2e) with highway_bias 1), and each matches its package module."""
    assert SRU_ARGS["rescale"] is False and SRU_CELL_ARGS["rescale"] is True
    original = wrapper(3, 3, 21, num_layers=1, highway_bias=1.0)
    x = torch.randn(4, 2, 3, dtype=torch.float64)
    got = from_sru(original.state_dict(), backend="torch")(x.transpose(0, 1))[0].transpose(0, 1)
    assert torch.allclose(got, package_forward(original, x)[0], rtol=0, atol=1e-9)
    single = cell(3, 3, 22, highway_bias=1.0)
    got_cell = from_sru(single.state_dict(), backend="torch")(x.transpose(0, 1))[0].transpose(0, 1)
    assert torch.allclose(got_cell, package_forward(single, x)[0], rtol=0, atol=1e-9)
    unscaled = from_sru(single.state_dict(), {"rescale": False}, backend="torch")(x.transpose(0, 1))[0]
    assert (unscaled.transpose(0, 1) - got_cell).abs().max() > 1e-3


def test_wrapper_messages_name_the_wrappers_keys() -> None:
    original = wrapper(3, 3, 23)
    sd = original.state_dict()
    with torch.no_grad():
        sd["rnn_lst.1.weight_c"][1] = 0.5
    with pytest.raises(OriginalCodeError, match=r"SRU v2: rnn_lst\.1\.weight_c\[1\] = 0.5"):
        from_sru(sd)
    sd["rnn_lst.1.weight_c"].zero_()
    del sd["rnn_lst.1.bias"]
    with pytest.raises(OriginalCodeError, match=r"the state dict has no 'rnn_lst\.1\.bias'"):
        from_sru(sd)
    with pytest.raises(OriginalCodeError, match="num_layers=3, but the checkpoint's weights have num_layers=2"):
        from_sru(original.state_dict(), {"num_layers": 3})
    with pytest.raises(OriginalCodeError, match=r"unknown sru.SRU arguments \['n_proj'\]"):
        from_sru(original.state_dict(), {"n_proj": 2})  # the wrapper calls it projection_size
