"""The automata B, C and F of the rational-recurrences paper, and the paper's equations for their scores.

- ``paper_automaton_b``: Figure 1 / Example 5 (soft unigrams), whose real-semiring score is Eq. 4 and Eq. 6.
- ``paper_automaton_c``: Figure 2 / §4.2 (soft, possibly non-consecutive bigrams), Eqs. 11-12.
- ``paper_automaton_f``: Figure 4 / §5.1 (unigrams and bigrams, with an epsilon shortcut), the z recurrence.

The weights are symbolic: ``mu(alpha)``, ``phi1(alpha)``, ... are weight functions of the consumed symbol, and
``gamma``, ``rho1``, ``rho2`` are constants named in the environment, e.g.
``{"mu": {"the": 0.2, ...}, "phi": lambda x: 0.5, "gamma": 0.3}``.

The ``paper_recurrence_*`` functions compute the same scores the way the paper writes them, as recurrences over
the real semiring; they are independent oracles for the Forward algorithm, not a use of it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import sympy

from kleene.automata.labels import ANY, EPSILON
from kleene.automata.semiring import Semiring
from kleene.automata.weights import Env, weight_functions
from kleene.automata.wfsa import WFSA
from kleene.errors import ArgumentError

#: A small alphabet for the examples (a sentence of four words).
DEFAULT_ALPHABET: tuple[str, ...] = ("the", "movie", "was", "great")

GAMMA, RHO1, RHO2 = sympy.symbols("gamma rho1 rho2")


def paper_automaton_b(semiring: str | Semiring = "real", alphabet: Iterable[Hashable] = DEFAULT_ALPHABET) -> WFSA:
    """Figure 1: q0 (initial, ``∀α/1`` self-loop) ``-α/μ(α)->`` q1 (final, ``∀α/φ(α)`` self-loop)."""
    mu, phi = weight_functions("mu", "phi")
    b = WFSA(semiring, alphabet, name="B")
    q0, q1 = b.add_states("q0", "q1")
    b.set_initial(q0)
    b.add_arc(q0, q0, ANY)
    b.add_arc(q0, q1, ANY, mu)
    b.add_arc(q1, q1, ANY, phi)
    b.set_final(q1)
    return b


def paper_automaton_c(semiring: str | Semiring = "real", alphabet: Iterable[Hashable] = DEFAULT_ALPHABET) -> WFSA:
    """Figure 2: B's chain extended to q2 through ``μ2``; self-loops ``φ1`` on q1 and ``φ2`` on q2; q2 final."""
    c = WFSA(semiring, alphabet, name="C")
    _add_bigram_chain(c)
    c.set_final("q2")
    return c


def paper_automaton_f(semiring: str | Semiring = "real", alphabet: Iterable[Hashable] = DEFAULT_ALPHABET) -> WFSA:
    """Figure 4: C with q1 final too (``ρ1``), q2 final with ``ρ2``, and a shortcut ``q0 -ε/γ-> q3 -α/μ2(α)-> q2``."""
    _, _, mu2, _ = weight_functions("mu1", "phi1", "mu2", "phi2")
    f = WFSA(semiring, alphabet, name="F")
    _add_bigram_chain(f)
    q3 = f.add_state("q3")
    f.add_arc("q0", q3, EPSILON, GAMMA)
    f.add_arc(q3, "q2", ANY, mu2)
    f.set_final("q1", RHO1)
    f.set_final("q2", RHO2)
    return f


def _add_bigram_chain(wfsa: WFSA) -> None:
    """States q0 -μ1-> q1 -μ2-> q2 with self-loops 1, φ1, φ2 and q0 initial (shared by C and F)."""
    mu1, phi1, mu2, phi2 = weight_functions("mu1", "phi1", "mu2", "phi2")
    q0, q1, q2 = wfsa.add_states("q0", "q1", "q2")
    wfsa.set_initial(q0)
    wfsa.add_arc(q0, q0, ANY)
    wfsa.add_arc(q0, q1, ANY, mu1)
    wfsa.add_arc(q1, q1, ANY, phi1)
    wfsa.add_arc(q1, q2, ANY, mu2)
    wfsa.add_arc(q2, q2, ANY, phi2)


# -- the paper's equations ------------------------------------------------------------------------------------------


def paper_equation_4(symbols: Sequence[Hashable]) -> sympy.Expr:
    """Eq. 4, B's score of a non-empty string in closed form over the real semiring, as a sympy expression.

    ``⊕_{i<n} (μ(x_i) ⊗ ⊗_{j>i} φ(x_j)) ⊕ μ(x_n)``, with ``μ(x)`` written ``mu(x)`` for the sympy symbol ``x``
    (the convention of ``WFSA.score_symbolic``).

    Raises:
        ArgumentError: ``symbols`` is empty (B gives the empty string zero; Eq. 4 covers only non-empty strings).
    """
    if not symbols:
        raise ArgumentError("symbols: Eq. 4 is stated for non-empty strings only, got an empty sequence")
    mu, phi = sympy.Function("mu"), sympy.Function("phi")
    xs = [sympy.Symbol(str(s)) for s in symbols]
    n = len(xs)
    terms = [mu(xs[i]) * sympy.Mul(*(phi(x) for x in xs[i + 1 :])) for i in range(n - 1)]
    return sympy.Add(*terms, mu(xs[n - 1]))


def paper_recurrence_b(symbols: Sequence[Hashable], env: Env) -> float:
    """Eq. 6: ``c_t = φ(x_t) c_{t-1} + μ(x_t)``, ``c_0 = 0``; Proposition 7 says ``c_n = B[x]``."""
    mu, phi = _functions(env, "mu", "phi")
    c = 0.0
    for x in symbols:
        c = c * phi(x) + mu(x)
    return c


def paper_recurrence_c(symbols: Sequence[Hashable], env: Env) -> float:
    """Eqs. 11-12: ``C_{t+1} = C_t φ2(x_{t+1}) + β_t μ2(x_{t+1})``, ``β_t = β_{t-1} φ1(x_t) + μ1(x_t)``."""
    mu1, phi1, mu2, phi2 = _functions(env, "mu1", "phi1", "mu2", "phi2")
    score, beta = 0.0, 0.0
    for x in symbols:
        score, beta = score * phi2(x) + beta * mu2(x), beta * phi1(x) + mu1(x)
    return score


def paper_recurrence_f(symbols: Sequence[Hashable], env: Env) -> float:
    """§5.1's recurrence: ``z1_t = z1_{t-1} φ1 + z0_{t-1} μ1``, ``z2_t = z2_{t-1} φ2 + (z1_{t-1} + z3_{t-1}) μ2``.

    With ``z0_t = 1`` and ``z3_t = γ z0_t``, and ``F[x] = ρ1 z1_n + ρ2 z2_n``.

    Note:
        The paper's text starts every ``z_0^(j)`` at 0, which would make ``z1_1 = 0`` and contradict both the
        automaton and its own Eq. 19b (``(c1_{t-1} + r) ⊙ u2_t`` at t = 1 is ``r ⊙ u2_1``): the initial state
        starts at one, so ``z0_0 = 1`` and ``z3_0 = γ``, as here.
    """
    mu1, phi1, mu2, phi2 = _functions(env, "mu1", "phi1", "mu2", "phi2")
    gamma, rho1, rho2 = (float(env[name]) for name in ("gamma", "rho1", "rho2"))
    z0, z1, z2, z3 = 1.0, 0.0, 0.0, gamma
    for x in symbols:
        z1, z2 = z1 * phi1(x) + z0 * mu1(x), z2 * phi2(x) + (z1 + z3) * mu2(x)
        z3 = gamma * z0
    return rho1 * z1 + rho2 * z2


def _functions(env: Env, *names: str) -> list[Callable[[Hashable], float]]:
    """The weight functions ``names`` of ``env`` (dicts or callables) as callables."""
    return [_as_callable(env[name]) for name in names]


def _as_callable(table: Any) -> Callable[[Hashable], float]:
    if callable(table):
        return lambda x: float(table(x))
    return lambda x: float(table[x])
