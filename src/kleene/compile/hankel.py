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

from .certificate import random_environment
from .recurrence import Recurrence, RecurrenceError, as_float, iter_strings


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


def hankel_block(values: dict[tuple[Hashable, ...], float], alphabet: Sequence[Hashable], k: int) -> np.ndarray:
    """The matrix f(uv) for u, v over strings of length ≤ k (shortest first)."""
    strings = list(iter_strings(alphabet, k))
    return np.array([[values[u + v] for v in strings] for u in strings], dtype=float)


def numeric_rank(matrix: np.ndarray, tolerance: float) -> tuple[int, list[float]]:
    """Rank counting singular values above ``tolerance`` times the largest one."""
    sv = np.linalg.svd(matrix, compute_uv=False)
    if sv.size == 0 or sv[0] == 0:
        return 0, [float(x) for x in sv]
    return int(np.sum(sv > tolerance * sv[0])), [float(x) for x in sv]


def hankel_evidence(
    rec: Recurrence,
    alphabet: Sequence[Hashable] | None = None,
    output: str | None = None,
    max_length: int | None = None,
    seed: int = 0,
    tolerance: float = 1e-9,
    scale: float = 3.0,
) -> HankelEvidence:
    """Ranks of H_0 .. H_max_length for one output of ``rec`` (default: the first).

    ``max_length`` defaults to the largest k with |Σ|^(2k) ≤ 1024 strings to run.
    Input-function values and constants are drawn uniformly in ±``scale``: large
    enough that saturating nonlinearities are far from linear (with small weights,
    tanh(x) ≈ x and the nonlinear part hides below the rank tolerance).

    Raises:
        RecurrenceError: a semiring other than real (ranks are linear algebra over a field).
    """
    if rec.ring.name != "real":
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
    for string in longest:
        for t, outs in enumerate(rec.run(string, env)):
            values[tuple(string[:t])] = as_float(outs[output])
    evidence = HankelEvidence(output, alphabet, tolerance=tolerance)
    for k in range(max_length + 1):
        block = hankel_block(values, alphabet, k)
        rank, sv = numeric_rank(block, tolerance)
        evidence.sizes.append(block.shape[0])
        evidence.ranks.append(rank)
        evidence.singular_values.append(sv)
    return evidence
