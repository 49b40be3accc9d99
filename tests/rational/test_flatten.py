"""Stacked rational layers flattened with a delay (delayed-rnn.md Theorem 1) — proved, checked, refused.

Oracles: the paper's equations (3)-(5) with identity activations transcribed in numpy, run on random
weights and inputs, against the proved automata's Forward scores; wrong delays and a wrong initial state
must be caught by ``check_delay``; the gated stack must be refused (and its Hankel ranks keep growing).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from kleene.automata.ops import bind
from kleene.rational import RecurrenceError, hankel_evidence, prove, zoo
from kleene.rational.certificate import Certificate, Refutation, random_environment
from kleene.rational.flatten import check_delay, length_window

SHAPES = [(2, 1), (3, 1), (2, 2)]


def _proved(rec):  # type: ignore[no-untyped-def]
    result = prove(rec)
    assert isinstance(result, Certificate) and result.checked, result
    return result


def _stack_by_the_paper(env: dict, layers: int, d: int, word: str) -> np.ndarray:  # type: ignore[type-arg]
    """Eq. (3)-(5) with f = identity and zero initial states; returns the top layer's state after each step."""

    def matrix(kind: str, layer: int) -> np.ndarray:
        rows = range(1, d + 1)
        return np.array([[env[zoo.stack_name(kind, layer, d, i, j)] for j in rows] for i in rows])

    def vector(kind: str, layer: int) -> np.ndarray:
        return np.array([env[zoo.stack_name(kind, layer, d, i)] for i in range(1, d + 1)])

    h = [np.zeros(d) for _ in range(layers)]
    tops = []
    for symbol in word:
        below = np.array([env[zoo.stack_name("u", 1, d, i)][symbol] for i in range(1, d + 1)])
        for layer in range(1, layers + 1):
            upper = below if layer == 1 else matrix("a", layer) @ below + vector("b", layer)
            h[layer - 1] = matrix("w", layer) @ h[layer - 1] + upper
            below = h[layer - 1]
        tops.append(h[-1].copy())
    return np.array(tops)


@pytest.mark.parametrize(("layers", "d"), SHAPES)
def test_stack_and_flattening_are_rational_and_agree_with_delay(layers: int, d: int) -> None:
    stacked, delayed = _proved(zoo.stacked_linear(layers, d)), _proved(zoo.delayed_linear(layers, d))
    assert stacked.automata[0].wfsa.has_epsilons  # layer l reads layer l-1 at the current step
    assert not delayed.automata[0].wfsa.has_epsilons  # the flattened layer reads only previous states
    check = check_delay(stacked, delayed, layers - 1)
    assert check.holds, check
    for wrong in {layers, max(layers - 2, 0)} - {layers - 1}:
        assert not check_delay(stacked, delayed, wrong).holds


@pytest.mark.parametrize(("layers", "d"), SHAPES)
def test_automata_match_the_papers_equations(layers: int, d: int) -> None:
    stacked, delayed = _proved(zoo.stacked_linear(layers, d)), _proved(zoo.delayed_linear(layers, d))
    rng = np.random.default_rng(7)
    alphabet = ("a", "b")
    for _ in range(2):
        env = random_environment(stacked.recurrence, alphabet, rng)
        s_envs, d_envs = stacked.weight_environments(env, alphabet), delayed.weight_environments(env, alphabet)
        word = "".join(rng.choice(list(alphabet), size=6))
        expected = _stack_by_the_paper(env, layers, d, word)
        for unit in range(d):
            s_wfsa = bind(stacked.automata[unit].wfsa, s_envs[unit], alphabet)
            d_wfsa = bind(delayed.automata[unit].wfsa, d_envs[unit], alphabet)
            for t in range(1, len(word) + 1):
                assert s_wfsa.score(word[:t]) == pytest.approx(expected[t - 1, unit], abs=1e-9)
                padded = word[:t] + "a" * (layers - 1)  # any k-1 further symbols
                assert d_wfsa.score(padded) == pytest.approx(expected[t - 1, unit], abs=1e-9)


def test_lemma1_initial_state_is_needed() -> None:
    stacked = _proved(zoo.stacked_linear(2, 1))
    rec = zoo.delayed_linear(2, 1)
    for component in rec.components:
        component.init = sympy.Integer(0)  # the naive zero initial state of the flattened layer
    check = check_delay(stacked, _proved(rec), 1)
    assert not check.holds and check.counterexample is not None


def test_gated_stack_is_refused_with_growing_hankel_ranks() -> None:
    result = prove(zoo.stacked_gated_linear())
    assert isinstance(result, Refutation)
    assert "product of two state values" in result.reason
    evidence = hankel_evidence(zoo.stacked_gated_linear(), ("a",), max_length=7)
    assert evidence.ranks == sorted(evidence.ranks) and evidence.ranks[-1] == len(evidence.ranks)  # full rank


def test_length_window_and_errors() -> None:
    window = length_window(("a", "b"), 2, at_least=True)
    assert window.score("ab") == 1.0 and window.score("abab") == 1.0 and window.score("a") == 0.0
    stacked = _proved(zoo.stacked_linear(2, 1))
    with pytest.raises(RecurrenceError, match="delay must be"):
        check_delay(stacked, stacked, -1)
    with pytest.raises(RecurrenceError, match="no output in common"):
        check_delay(stacked, _proved(zoo.elman_linear(1)), 1)


def test_cli_flatten(capsys: pytest.CaptureFixture[str]) -> None:
    from kleene.cli import main

    assert main(["prove", "stacked-linear", "--layers", "3", "--flatten", "--no-cross-check"]) == 0
    assert "holds" in capsys.readouterr().out
    assert main(["prove", "rrnn-b", "--flatten"]) == 2
