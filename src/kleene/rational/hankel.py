"""Hankel-matrix evidence for (non-)rationality of one hidden unit.

For a function f: Σ* → R, the Hankel block H_k has rows and columns indexed by the
strings of length ≤ k and entries H_k[u, v] = f(uv). Over the reals (a field),
rank H_k is a lower bound on the number of states of every WFSA computing f, for
every k (Fliess / Carlyle–Paz). So:

* for a rational recurrence the ranks stop growing at or below the state count of
  the constructed automaton — equal to it exactly when that automaton is minimal;
* ranks that keep growing with k (1, 3, 7, 15, ... over two symbols: full rank) are
  evidence that no finite WFSA computes f, i.e. of non-rationality (evidence, not a
  proof: any finite block has finite rank).

The function is one output of the recurrence under a concrete random instantiation
(input-function tables and constants drawn as in ``random_environment``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kleene.rational.certificate import random_environment
from kleene.rational.recurrence import Recurrence, RecurrenceError, as_float, iter_strings


@dataclass
class HankelEvidence:
    """Ranks of growing Hankel blocks of one output under one instantiation."""

    output: str
    alphabet: list[Hashable]
    sizes: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    singular_values: list[list[float]] = field(default_factory=list)
    tolerance: float = 1e-9

    @property
    def full_rank(self) -> bool:
        """Whether every block has full rank (the ranks keep growing)."""
        return all(r == n for r, n in zip(self.ranks, self.sizes))

    @property
    def stabilised(self) -> bool:
        """Whether the last two blocks have the same rank."""
        return len(self.ranks) >= 2 and self.ranks[-1] == self.ranks[-2]

    def render_lines(self) -> list[str]:
        shown = ", ".join(f"{r}/{n}" for r, n in zip(self.ranks, self.sizes))
        verdict = (
            f"stable at {self.ranks[-1]}: a lower bound on the states of any WFSA for this unit"
            if self.stabilised
            else "still growing: evidence that no finite WFSA computes this unit"
        )
        return [
            f"Hankel evidence (output {self.output}, |Σ| = {len(self.alphabet)}, one random instantiation): "
            f"rank/size of blocks k = 0..{len(self.ranks) - 1}: {shown} — {verdict}"
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "alphabet": [str(a) for a in self.alphabet],
            "sizes": self.sizes,
            "ranks": self.ranks,
            "tolerance": self.tolerance,
        }


def hankel_block(values: dict[tuple[Hashable, ...], Any], alphabet: Sequence[Hashable], k: int) -> list[list[Any]]:
    """The matrix f(uv) for u, v over strings of length ≤ k (shortest first), as rows."""
    strings = list(iter_strings(alphabet, k))
    return [[values[u + v] for v in strings] for u in strings]


def numeric_rank(matrix: Any, tolerance: float) -> tuple[int, list[float]]:
    """Rank counting singular values above ``tolerance`` times the largest one (float64)."""
    sv = np.linalg.svd(np.asarray(matrix, dtype=float), compute_uv=False)
    if sv.size == 0 or sv[0] == 0:
        return 0, [float(x) for x in sv]
    return int(np.sum(sv > tolerance * sv[0])), [float(x) for x in sv]


def precise_rank(rows: list[list[Any]], tolerance: Any) -> tuple[int, list[float]]:
    """Rank by Gaussian elimination with full pivoting on mpmath numbers.

    Counts pivots above ``tolerance`` times the largest entry; returns the pivot
    magnitudes (relative to it) as the decay profile.
    """
    a = [list(r) for r in rows]
    n, m = len(a), len(a[0]) if a else 0
    scale = max((abs(x) for r in a for x in r), default=0)
    if not scale:
        return 0, []
    pivots: list[float] = []
    for k in range(min(n, m)):
        i, j = max(((i, j) for i in range(k, n) for j in range(k, m)), key=lambda ij: abs(a[ij[0]][ij[1]]))
        pivot = a[i][j]
        if abs(pivot) <= tolerance * scale:
            break
        pivots.append(float(abs(pivot) / scale))
        a[k], a[i] = a[i], a[k]
        for row in a:
            row[k], row[j] = row[j], row[k]
        for below in range(k + 1, n):
            factor = a[below][k] / pivot
            if factor:
                a[below] = [x - factor * y for x, y in zip(a[below], a[k])]
    return len(pivots), pivots


def hankel_evidence(
    rec: Recurrence,
    alphabet: Sequence[Hashable] | None = None,
    output: str | None = None,
    max_length: int | None = None,
    seed: int = 0,
    tolerance: float = 1e-30,
    scale: float = 3.0,
    precision: int | None = 60,
) -> HankelEvidence:
    """Ranks of H_0 .. H_max_length for one output of ``rec`` (default: the first).

    ``max_length`` defaults to the largest k with |Σ|^(2k) ≤ 1024 strings to run.
    With ``precision`` (decimal digits) the recurrence runs in mpmath and ranks come
    from exact-pivoting elimination at relative ``tolerance``: smooth nonlinear units
    have geometrically decaying Hankel spectra, so float64 (tolerance ~1e-9) hides
    rank that 60 digits (tolerance 1e-30) resolves. ``precision=None`` uses float64 SVD.
    Input-function values and constants are drawn uniformly in ±``scale``: large
    enough that saturating nonlinearities are far from linear (with small weights,
    tanh(x) ≈ x and the nonlinear part hides below the rank tolerance).

    Raises:
        RecurrenceError: a semiring other than real (ranks are linear algebra over a field).
    """
    if not rec.ring.is_field:
        raise RecurrenceError(f"{rec.name}: Hankel ranks need the real semiring, not {rec.ring.name}")
    alphabet = list(alphabet or rec.alphabet or ["a", "b"])
    output = output or next(iter(rec.outputs))
    if max_length is None:
        max_length = 1
        while len(alphabet) ** (2 * (max_length + 1)) <= 1024:
            max_length += 1
    env = random_environment(rec, alphabet, np.random.default_rng(seed), scale)
    values: dict[tuple[Hashable, ...], float] = {}
    longest = [s for s in iter_strings(alphabet, 2 * max_length) if len(s) == 2 * max_length]
    for prefix, outs in rec.run_prefixes(longest, env, precision).items():  # each shared prefix run once
        values[prefix] = outs[output] if precision else as_float(outs[output])
    evidence = HankelEvidence(output, alphabet, tolerance=tolerance)
    for k in range(max_length + 1):
        block = hankel_block(values, alphabet, k)
        if precision:
            import mpmath

            with mpmath.workdps(precision):
                rank, sv = precise_rank(block, mpmath.mpf(tolerance))
        else:
            rank, sv = numeric_rank(block, tolerance)
        evidence.sizes.append(len(block))
        evidence.ranks.append(rank)
        evidence.singular_values.append(sv)
    return evidence
