"""generate's inputs at their edges (issue 23): extreme temperatures and seeds are kleene errors or work, and token
ids may be numpy integers or integer tensors; anything else is refused naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kleene.errors import LayerError
from kleene.nn.generate import generate
from kleene.nn.registry import build_model

VOCAB = 6


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("rrnn-f", vocab_size=VOCAB, hidden_size=5, embedding_dim=4, backend="torch").double().eval()


def test_a_tiny_temperature_samples_the_greedy_continuation(model: torch.nn.Module) -> None:
    greedy = generate(model, [1, 2], 8)
    for temperature in (1e-308, 5e-324, 1e-30):
        assert generate(model, [1, 2], 8, strategy="sample", temperature=temperature, seed=1).tokens == greedy.tokens


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"temperature": float("inf")}, "temperature must be a finite number > 0, got inf"),
        ({"temperature": float("nan")}, "temperature"),
        ({"seed": 2**70}, r"seed must be None or an integer in \[0, 2\*\*64\), got 1180591620717411303424"),
        ({"seed": -1}, "seed"),
        ({"seed": "x"}, "seed"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_bad_temperature_and_seed_are_named(model: torch.nn.Module, options: dict, message: str) -> None:
    with pytest.raises(LayerError, match=message):
        generate(model, [1], 2, strategy="sample", **options)


def test_largest_seed_works(model: torch.nn.Module) -> None:
    first = generate(model, [1], 4, strategy="sample", seed=2**64 - 1)
    assert generate(model, [1], 4, strategy="sample", seed=2**64 - 1) == first


@pytest.mark.parametrize(
    "prompt",
    [np.array([1, 2]), torch.tensor([1, 2]), [np.int64(1), np.int32(2)], [torch.tensor(1), torch.tensor(2)]],
    ids=["numpy-array", "tensor", "numpy-ints", "scalar-tensors"],
)
def test_numpy_and_tensor_token_ids_are_accepted(model: torch.nn.Module, prompt: object) -> None:
    assert generate(model, prompt, 5) == generate(model, [1, 2], 5)  # type: ignore[arg-type]
    stop = generate(model, [1, 2], 5).tokens[:1]
    assert generate(model, [1, 2], 5, stop=np.array(stop)).tokens == stop


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ([1.0, 2], r"prompt\[0\] must be a token id >= 0 \(an int, a numpy integer or an integer tensor\), got 1.0"),
        (np.array([1.0, 2.0]), r"prompt\[0\] must be a token id"),
        (torch.tensor([1.0]), r"prompt\[0\] must be a token id"),
        (torch.tensor([True]), r"prompt\[0\] must be a token id"),
        (torch.tensor([[1, 2]]), r"prompt must be one sequence of token ids, got an array of shape \(1, 2\)"),
        (3, "prompt must be a sequence of token ids, got 3"),
        (["a"], r"prompt\[0\]"),
    ],
)
def test_other_token_ids_are_refused_clearly(model: torch.nn.Module, prompt: object, message: str) -> None:
    with pytest.raises(LayerError, match=message):
        generate(model, prompt, 2)  # type: ignore[arg-type]
