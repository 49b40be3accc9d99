"""The four loaders of ``kleene.nn.original`` share one convention: ``from_<code>(checkpoint, args, *, ...)`` where
``checkpoint`` is a state dict or its file (read without unpickling objects) and every refusal an
``OriginalCodeError``."""

from __future__ import annotations

import inspect
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from kleene.errors import OriginalCodeError
from kleene.nn import original
from kleene.nn.original import from_pytorch_qrnn, from_rational_recurrences, from_soft_patterns, from_sru

LOADERS = [from_soft_patterns, from_rational_recurrences, from_pytorch_qrnn, from_sru]


def qrnn_state() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {"layers.0.linear.weight": torch.randn(6, 3, dtype=torch.float64),
            "layers.0.linear.bias": torch.randn(6, dtype=torch.float64)}  # fmt: skip


class NotATensor:
    """An object a pickle would construct (and could run code for): never loaded."""


def test_the_loaders_share_names_and_argument_order() -> None:
    for loader in LOADERS:
        assert loader.__module__.startswith("kleene.nn.original.")
        parameters = list(inspect.signature(loader).parameters.values())
        assert [p.name for p in parameters[:2]] == ["checkpoint", "args"], loader.__name__
        assert parameters[1].default is None and parameters[-1].name == "backend", loader.__name__
    assert original.from_soft_patterns is from_soft_patterns


def test_files_are_read_weights_only_torch_or_safetensors(tmp_path: Path) -> None:
    state = qrnn_state()
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    want = from_pytorch_qrnn(state, backend="torch").eval()(x)[0]
    torch.save(state, tmp_path / "model.pt")
    torch.save({"state_dict": state, "epoch": 3}, tmp_path / "bundle.pt")
    save_file(state, str(tmp_path / "model.safetensors"))
    for name in ("model.pt", "bundle.pt", "model.safetensors"):
        got = from_pytorch_qrnn(tmp_path / name, backend="torch").eval()(x)[0]
        assert torch.equal(got, want), name


def test_a_pickle_of_objects_is_refused_never_run(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    with path.open("wb") as file:
        pickle.dump({"layers.0.linear.weight": NotATensor()}, file)
    for loader in LOADERS:
        kwargs = {"embeddings": torch.zeros(3, 2)} if loader is from_soft_patterns else {}
        with pytest.raises(OriginalCodeError, match="not a weights-only torch file"):
            loader(path, **kwargs)  # type: ignore[operator]
    with pytest.raises(OriginalCodeError, match="no such file"):
        from_sru(tmp_path / "missing.pt")
    with pytest.raises(OriginalCodeError, match=r"args must be a dict or an argparse.Namespace; got list"):
        from_pytorch_qrnn(qrnn_state(), ["window", 2])  # type: ignore[arg-type]


def test_the_loaded_modules_take_the_state_before_the_lengths() -> None:
    """``model(x, initial state, lengths)``: the originals' ``forward(input, state)`` order, kleene's lengths last."""
    from kleene.nn.original import PytorchQRNN, RRNNReference, SRUReference

    for module, state in ((RRNNReference, "init_hidden"), (PytorchQRNN, "hidden"), (SRUReference, "c0")):
        names = list(inspect.signature(module.forward).parameters)
        assert names == ["self", "x", state, "lengths"], module.__name__
    x, hidden = torch.randn(2, 5, 3, dtype=torch.float64), torch.randn(1, 2, 2, dtype=torch.float64)
    model = from_pytorch_qrnn(qrnn_state(), backend="torch").eval()
    short = model(x, hidden, torch.tensor([5, 3]))[1]
    assert torch.allclose(short[0, 1], model(x[1:, :3], hidden[:, 1:])[1][0, 0])  # c at the second one's length
