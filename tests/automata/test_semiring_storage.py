"""What a semiring answers for layers: how a probability, a gate, a factor and an encoded score are stored.

The oracle is the semiring's own definition, computed apart in float64: ``to_storage(from_probability(p))`` for a
probability, σ by its formula 1 / (1 + e^−z), and ⊗ of stored factors against the stored product.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kleene.automata.semiring import SEMIRINGS, get_semiring
from kleene.errors import SemiringError

CARRYING = [s for s in SEMIRINGS if s.probability_storage is not None]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def test_the_shipped_semirings_state_their_probability_storage():
    forms = {s.name: s.probability_storage for s in SEMIRINGS}
    assert forms == {
        "real": "linear",
        "log": "logarithm",
        "max-plus": "logarithm",
        "max-times": "logarithm",
        "min-plus": None,  # costs −log p
        "boolean": None,  # p > 0
    }
    assert {s.name for s in SEMIRINGS if s.carries_factors} == {"real", "log", "max-plus", "max-times"}
    assert {s.name for s in SEMIRINGS if s.stores_logarithms} == {"max-times"}


@pytest.mark.parametrize("semiring", CARRYING, ids=lambda s: s.name)
def test_stored_probabilities_are_the_stored_elements_of_probabilities(semiring):
    p = np.array([1e-6, 0.25, 0.5, 0.9, 1.0])
    expected = [semiring.stored_probability(float(x)) for x in p]
    np.testing.assert_allclose(semiring.stored_probabilities(p), expected, rtol=1e-12)
    as_tensor = semiring.stored_probabilities(torch.tensor(p, dtype=torch.float64))
    np.testing.assert_allclose(as_tensor.numpy(), expected, rtol=1e-12)
    assert isinstance(semiring.stored_probabilities(0.5), float)


@pytest.mark.parametrize("semiring", CARRYING, ids=lambda s: s.name)
def test_stored_gate_is_the_stored_sigmoid_and_stable_where_it_underflows(semiring):
    z = np.array([-30.0, -2.0, 0.0, 1.5, 8.0])  # σ(z) rounds by less than 1e-12 relative in its log here
    expected = [semiring.stored_probability(float(p)) for p in _sigmoid(z)]
    np.testing.assert_allclose(semiring.stored_gate(z), expected, rtol=1e-12)
    tensor = torch.tensor(z, requires_grad=True)
    gate = semiring.stored_gate(tensor)
    np.testing.assert_allclose(gate.detach().numpy(), expected, rtol=1e-12)
    gate.sum().backward()  # d log σ / dz = 1 − σ; d σ / dz = σ (1 − σ)
    slope = 1 - _sigmoid(z) if semiring.probability_storage == "logarithm" else _sigmoid(z) * (1 - _sigmoid(z))
    np.testing.assert_allclose(tensor.grad.numpy(), slope, rtol=1e-12)
    if semiring.probability_storage == "logarithm":  # log σ(−800) = −800, where σ itself is 0 in float64
        assert semiring.stored_gate(-800.0) == pytest.approx(-800.0)
        assert semiring.stored_gate(40.0) == pytest.approx(-math.exp(-40.0), rel=1e-12)  # −log1p(e^−40)
        assert float(semiring.stored_gate(torch.tensor(-800.0, dtype=torch.float64))) == pytest.approx(-800.0)


@pytest.mark.parametrize("semiring", [s for s in SEMIRINGS if s.carries_factors], ids=lambda s: s.name)
def test_stored_factors_multiply_under_times(semiring):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=5), rng.normal(size=5)
    storage = semiring.storage
    assert float(semiring.stored_factor(0.0)) == float(storage.one)
    np.testing.assert_allclose(
        storage.times(semiring.stored_factor(a), semiring.stored_factor(b)), semiring.stored_factor(a + b), rtol=1e-12
    )
    # a factor exp(r) with r = log p is the probability p
    p = np.array([0.1, 0.7])
    np.testing.assert_allclose(semiring.stored_factor(np.log(p)), semiring.stored_probabilities(p), rtol=1e-12)


@pytest.mark.parametrize("semiring", SEMIRINGS, ids=lambda s: s.name)
def test_stored_sigmoid_is_to_storage_of_the_element(semiring):
    if semiring.probability_storage is None:
        return  # min-plus and boolean: the element σ(x) is not one of theirs (below)
    z = np.array([-3.0, 0.0, 2.0])
    np.testing.assert_allclose(
        semiring.stored_sigmoid(torch.tensor(z)).numpy(), semiring.to_storage(_sigmoid(z)), rtol=1e-12
    )


@pytest.mark.parametrize("name", ["min-plus", "boolean"])
def test_semirings_without_probability_storage_refuse_gates_and_factors(name):
    semiring = get_semiring(name)
    assert not semiring.carries_factors
    for call in (semiring.stored_gate, semiring.stored_factor, semiring.stored_probabilities):
        with pytest.raises(SemiringError, match=rf"the {name} semiring stores a probability p as .* neither p nor log"):
            call(np.array([0.5]))


def test_a_user_semiring_answers_by_its_own_operations():
    from tests.compile.test_user_semiring import MAX_MIN

    assert MAX_MIN.probability_storage == "linear"  # p is p: gated layers run in it (docs/semirings.md)
    assert not MAX_MIN.carries_factors  # min(2, 3) is not 6: a learned residual cannot scale a weight
    np.testing.assert_allclose(MAX_MIN.stored_gate(np.array([0.0])), [0.5])
    assert math.isclose(MAX_MIN.sym_probability(0.5), 0.5)
