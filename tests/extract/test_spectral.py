"""Spectral extraction: exact recovery of known WFSAs, and fidelity to LSTMs trained on Tomita grammars."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kleene.extract.spectral import (
    SpectralError,
    choose_rank,
    enumerate_strings,
    fidelity,
    plot_singular_values,
    sample_basis,
    spectral_learn,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tomita_spectral.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("tomita_spectral", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_wfsa_function(states: int, alphabet: str, seed: int) -> Any:
    """A random real WFSA's string function, by direct matrix products (the independent oracle)."""
    rng = np.random.default_rng(seed)
    initial, final = rng.normal(size=states), rng.normal(size=states)
    matrices = {a: rng.normal(scale=0.5, size=(states, states)) for a in alphabet}

    def f(strings: Any) -> np.ndarray:
        out = []
        for s in strings:
            v = initial
            for a in s:
                v = v @ matrices[a]
            out.append(v @ final)
        return np.array(out)

    return f


def test_recovers_a_rank_three_wfsa_exactly() -> None:
    f = random_wfsa_function(3, "abc", seed=0)
    basis = enumerate_strings("abc", 2)
    result = spectral_learn(f, "abc", basis, basis)
    assert result.rank == 3
    assert result.singular_values[3] < 1e-10 * result.singular_values[0]
    held_out = [tuple(np.random.default_rng(1).choice(list("abc"), size=n)) for n in range(12)]
    report = fidelity(result, f, held_out)
    # float64 rounding through the rank-3 Hankel factorization: ~ eps * cond (sigma_1 / sigma_3 ~ 4) * length (12)
    # * max |f| (0.3) ~ 1e-14 (observed 1e-16); 1e-8 is machine-independent and still far below any real error
    assert report.max_abs_error < 1e-8
    # the kleene WFSA carries the same function through the generic Forward
    for s in held_out[:5]:
        assert math.isclose(result.wfsa.score(s), f([s])[0], abs_tol=1e-8)


def test_sampled_bases_from_data() -> None:
    sentences = [["the", "film", "is", "good"], ["the", "film", "is", "bad"], ["a", "film"]]
    prefixes = sample_basis(sentences, 4)
    suffixes = sample_basis(sentences, 3, suffixes=True)
    assert prefixes == [(), ("the",), ("the", "film"), ("the", "film", "is")]  # the most frequent (twice each)
    assert suffixes == [(), ("bad",), ("film",)]  # ties: shortest, then alphabetical


def test_bad_input_is_named() -> None:
    f = random_wfsa_function(2, "ab", seed=2)
    with pytest.raises(SpectralError, match="empty string"):
        spectral_learn(f, "ab", [("a",)], [()])
    with pytest.raises(SpectralError, match="rank 9"):
        spectral_learn(f, "ab", enumerate_strings("ab", 1), enumerate_strings("ab", 1), rank=9)
    with pytest.raises(SpectralError, match="zero"):
        choose_rank(np.zeros(3))


@pytest.mark.slow
def test_singular_value_plot(tmp_path: Path) -> None:
    path = plot_singular_values(np.array([3.0, 1.0, 0.01]), 2, tmp_path / "sv.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("grammar", [1, 2, 4, 7])
@pytest.mark.slow
def test_tomita_lstm_extraction(grammar: int) -> None:
    """≥95% agreement with the trained LSTM on held-out strings of length ≤ 20, compared with the grammar."""
    torch.set_num_threads(1)
    tomita = load_example()
    model = tomita.train_lstm(grammar, seed=0, steps=150)
    result = tomita.extract(grammar, model)
    strings = tomita.held_out(grammar, seed=0, count=600)
    assert max(map(len, strings)) == 20
    f = tomita.acceptance(model)
    report = fidelity(result, f, strings, threshold=0.5)
    assert report.agreement is not None and report.agreement >= 0.95
    truth = np.array([tomita.TOMITA[grammar]("".join(s)) for s in strings])
    lstm_accuracy = np.mean((f(strings) > 0.5) == truth)
    wfsa_accuracy = np.mean((result.scores(strings) > 0.5) == truth)
    # the automaton is as good a recogniser of the grammar as the network it was extracted from
    assert wfsa_accuracy >= lstm_accuracy - 0.05
    assert result.rank <= 8
