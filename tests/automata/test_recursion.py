"""The one Forward recursion (kleene.automata.recursion) in each element type, against brute-force path
enumeration (tests/automata/oracle.py: explicit paths, no matrices, no closure)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import sympy
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kleene.automata import WFSA, get_semiring
from kleene.automata.algorithms import score_symbolic
from kleene.automata.batched import DenseWFSA
from kleene.automata.recursion import MatrixStepper, SymbolicArrays, run_forward
from kleene.automata.star import closure_matrix

from . import oracle
from .strategies import ALPHABET, strings, wfsas

SEMIRINGS = ["real", "log", "max-plus", "min-plus", "max-times", "boolean"]


def _agree(got: Any, expected: Any, semiring: str) -> bool:
    """Equal up to the round-off of a few dozen float64 operations on weights of magnitude <= 3."""
    if semiring == "boolean":
        return bool(got) == bool(expected)
    got, expected = float(got), float(expected)
    if math.isinf(expected) or math.isinf(got):
        return got == expected
    return math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_batched_prefix_scores_equal_path_enumeration(semiring: str, data: st.DataObject) -> None:
    """``batched_forward(per_step=True)`` on a padded batch: entry (b, t) is the sum over the explicit paths of
    string b's first t+1 symbols, and the semiring zero past its length."""
    a = data.draw(wfsas(semiring))
    batch = data.draw(st.lists(strings, min_size=1, max_size=3))
    cap = data.draw(st.sampled_from([0, 1, 2]))
    assume(all(oracle.path_count(a, x[: t + 1], cap) <= 2000 for x in batch for t in range(len(x))))
    dense = DenseWFSA.from_wfsa(a)
    ids, lengths = dense.encode(batch)
    got = dense.score_batch(ids, lengths, epsilon_cap=cap, per_step=True)
    assert tuple(got.shape) == (len(batch), max(len(x) for x in batch))
    zero = a.semiring.zero
    for b, x in enumerate(batch):
        for t in range(got.shape[1]):
            expected = oracle.brute_force_score(a, x[: t + 1], cap) if t < len(x) else zero
            assert _agree(got[b, t].item(), expected, semiring), (b, t, x)


@pytest.mark.parametrize("semiring", SEMIRINGS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_symbolic_scores_equal_path_enumeration(semiring: str, data: st.DataObject) -> None:
    """``score_symbolic`` of constant weights (sympy numbers under the semiring's sym operations) is the sum
    over the explicit paths."""
    a = data.draw(wfsas(semiring, max_states=4, max_arcs=8))
    x = data.draw(strings)
    cap = data.draw(st.sampled_from([0, 1, 2]))
    assume(oracle.path_count(a, x, cap) <= 2000)
    expr = score_symbolic(a, x, cap)
    value = float(expr) if isinstance(expr, sympy.Expr) else bool(expr)
    assert _agree(value, oracle.brute_force_score(a, x, cap), semiring)


def test_symbolic_exact_closure_is_the_geometric_series() -> None:
    """The exact star of a 2-cycle ``0 -g-> 1 -h-> 0`` over sympy: ``C[0, 0] = 1/(1 - gh)`` and
    ``C[0, 1] = g/(1 - gh)`` in the real semiring, and its values at g=0.5, h=0.8 are the numeric closure's."""
    g, h = sympy.symbols("g h")
    s = SymbolicArrays(get_semiring("real"))
    matrix = s.zeros((2, 2))
    matrix[0, 1], matrix[1, 0] = g, h
    star = closure_matrix(matrix, s)
    assert sympy.simplify(star[0, 0] - 1 / (1 - g * h)) == 0
    assert sympy.simplify(star[0, 1] - g / (1 - g * h)) == 0
    numeric = closure_matrix(np.array([[0.0, 0.5], [0.8, 0.0]]), get_semiring("real"))
    values = np.array([[float(e.subs({g: 0.5, h: 0.8})) for e in row] for row in star])
    np.testing.assert_allclose(values, numeric, rtol=1e-12)
    capped = closure_matrix(matrix, s, cap=3)
    assert sympy.expand(capped[0, 1] - (g + g**2 * h)) == 0


def test_symbolic_arrays_keep_zero_out_of_expressions() -> None:
    """Zero annihilates products and vanishes from sums (no ``-oo + x`` left in a log expression); star(0) = 1."""
    s = SymbolicArrays(get_semiring("log"))
    x = sympy.Symbol("x")
    assert s.times(s.zero, x) == s.zero
    assert s.sum(np.array([s.zero, x, s.zero], dtype=object)) == x
    assert s.star(s.zero) == s.one
    assert s.sum(s.zeros((0,))) == s.zero


@pytest.mark.parametrize("semiring", ["real", "log", "max-plus"])
def test_run_forward_masks_numpy_and_torch_batches_alike(semiring: str) -> None:
    """The lengths mask of ``run_forward`` on a numpy batch and a torch batch gives each string's own score (the
    dense stepper on one string at a time), and prefix scores of zero past each length."""
    a = WFSA(semiring, alphabet=ALPHABET)
    a.add_states("p", "q")
    a.set_initial("p")
    a.set_final("q", 0.5 if semiring == "real" else -0.7)
    a.add_arc("p", "q", "a", -0.3 if semiring != "real" else 0.4)
    a.add_arc("q", "q", "b", -1.2 if semiring != "real" else 0.6)
    a.add_arc("q", "p", "c", -0.1 if semiring != "real" else 0.9)
    s = a.semiring
    batch = [list("ab"), list("abbcab"), [], list("a")]
    longest = max(map(len, batch))
    steps = s.zeros((longest, len(batch), 2, 2))
    for b, x in enumerate(batch):
        for t, symbol in enumerate(x):
            steps[t, b] = a.transition_matrix(symbol)
    lengths = np.array([len(x) for x in batch])
    initial, final = a.vector(a.initial), a.vector(a.final)
    for backend in (np.asarray, torch.as_tensor):
        stepper = MatrixStepper(s, backend(np.stack([initial] * len(batch))), backend(final), None,
                                lambda m, t: m)
        vector, prefixes = run_forward(stepper, s, [backend(m) for m in steps], backend(lengths), per_step=True)
        scores = np.asarray(stepper.finish(vector))
        for b, x in enumerate(batch):
            assert _agree(scores[b], a.score(x), semiring)
            for t in range(longest):
                expected = a.score(x[: t + 1]) if t < len(x) else s.zero
                assert _agree(np.asarray(prefixes[t])[b], expected, semiring)
