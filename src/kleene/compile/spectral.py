"""Spectral extraction: a WFSA learned from the Hankel matrix of any string function (an LSTM's output, say).

For a function ``f`` from strings to reals, the Hankel matrix over a prefix basis P and a suffix
basis S is ``H[p, s] = f(p s)``; for each symbol σ, ``H_σ[p, s] = f(p σ s)``. When f is computed by
a WFSA with n states, H has rank at most n, and with ε in both bases the WFSA is recovered from
a rank-r factorisation (Hsu, Kakade & Zhang 2012; Balle, Carreras, Luque & Quattoni 2014):

    H ≈ U_r Σ_r V_rᵀ                      (truncated SVD)
    A_σ = (H V_r)⁺ H_σ V_r                 (r × r, one per symbol)
    α₀ᵀ = H[ε, :] V_r                      (initial weights: the row of the empty prefix)
    α_∞ = (H V_r)⁺ H[:, ε]                 (final weights: the column of the empty suffix)

so that ``f(x₁…x_T) ≈ α₀ᵀ A_{x₁} … A_{x_T} α_∞``. For a non-rational cell (LSTM, GRU, tanh Elman,
SRU v2) this is an approximation whose quality is measured, never assumed: ``fidelity`` reports
the mean absolute error and, for classifiers, the agreement of decisions on held-out strings.
The rank comes from the singular values (``choose_rank``; ``plot_singular_values`` draws them).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kleene.automata.errors import KleeneError
from kleene.automata.labels import Sym, SymbolTable
from kleene.automata.wfsa import WFSA

__all__ = [
    "Fidelity",
    "SpectralError",
    "SpectralResult",
    "StringFunction",
    "choose_rank",
    "enumerate_strings",
    "fidelity",
    "hankel_blocks",
    "plot_singular_values",
    "sample_basis",
    "spectral_learn",
]

Word = tuple[Hashable, ...]
#: Scores a batch of strings at once (one float per string).
StringFunction = Callable[[Sequence[Word]], np.ndarray]


class SpectralError(KleeneError):
    """Bad input to spectral learning (the message says which)."""


def enumerate_strings(alphabet: Sequence[Hashable], max_length: int) -> list[Word]:
    """Every string over ``alphabet`` of length 0..``max_length``, shortest first."""
    out: list[Word] = []
    for n in range(max_length + 1):
        out.extend(itertools.product(alphabet, repeat=n))
    return out


def sample_basis(sentences: Sequence[Sequence[Hashable]], size: int, *, suffixes: bool = False) -> list[Word]:
    """The ``size`` most frequent prefixes (or suffixes) of ``sentences``, with ε first.

    For large vocabularies, where enumerating strings is hopeless (Balle et al.'s sampled bases).
    """
    if size < 1:
        raise SpectralError(f"a basis needs at least one string (ε); got size {size}")
    counts: Counter[Word] = Counter()
    for sentence in sentences:
        words = tuple(sentence)
        for n in range(1, len(words) + 1):
            counts[words[-n:] if suffixes else words[:n]] += 1
    ranked = sorted(counts, key=lambda w: (-counts[w], len(w), str(w)))
    return [(), *ranked[: size - 1]]


def hankel_blocks(
    f: StringFunction, prefixes: Sequence[Word], suffixes: Sequence[Word], alphabet: Sequence[Hashable]
) -> tuple[np.ndarray, dict[Hashable, np.ndarray]]:
    """``H`` (``|P| × |S|``) and ``H_σ`` for every symbol, from one batched evaluation of ``f``.

    Raises:
        SpectralError: ε missing from a basis, or ``f`` returning the wrong number of values.
    """
    if () not in prefixes or () not in suffixes:
        raise SpectralError("both bases must contain the empty string ε (as the tuple ())")
    middles: list[Word] = [(), *((a,) for a in alphabet)]
    strings = sorted({p + m + s for p in prefixes for m in middles for s in suffixes}, key=lambda w: (len(w), str(w)))
    values = np.asarray(f(strings), dtype=np.float64).reshape(-1)
    if values.shape != (len(strings),):
        raise SpectralError(f"the string function returned {values.shape[0]} values for {len(strings)} strings")
    table = dict(zip(strings, values))

    def block(middle: Word) -> np.ndarray:
        return np.array([[table[p + middle + s] for s in suffixes] for p in prefixes])

    return block(()), {a: block((a,)) for a in alphabet}


def choose_rank(singular_values: np.ndarray, relative: float = 0.02, max_rank: int | None = None) -> int:
    """The number of singular values above ``relative`` times the largest (at least 1, at most ``max_rank``)."""
    values = np.asarray(singular_values, dtype=np.float64)
    if values.size == 0 or values[0] <= 0:
        raise SpectralError("the Hankel matrix is zero: the function has no signal to extract")
    rank = int(np.sum(values > relative * values[0]))
    return max(1, min(rank, max_rank or rank))


@dataclass
class SpectralResult:
    """The learned automaton and what it was learned from."""

    wfsa: WFSA
    rank: int
    singular_values: np.ndarray
    alphabet: list[Hashable]
    initial: np.ndarray
    final: np.ndarray
    transitions: dict[Hashable, np.ndarray]

    def scores(self, strings: Sequence[Sequence[Hashable]]) -> np.ndarray:
        """``α₀ᵀ A_{x₁} … A_{x_T} α_∞`` for each string (vectorised matrix products, not the generic Forward).

        Raises:
            SpectralError: a symbol outside the alphabet (named, with its string).
        """
        out = np.empty(len(strings))
        for i, string in enumerate(strings):
            vector = self.initial
            for symbol in string:
                if symbol not in self.transitions:
                    raise SpectralError(f"symbol {symbol!r} of string {i} is not in the alphabet")
                vector = vector @ self.transitions[symbol]
            out[i] = vector @ self.final
        return out


def spectral_learn(
    f: StringFunction,
    alphabet: Sequence[Hashable],
    prefixes: Sequence[Word],
    suffixes: Sequence[Word],
    rank: int | None = None,
    *,
    relative: float = 0.02,
    name: str = "spectral",
) -> SpectralResult:
    """Learn a real-weighted automaton approximating ``f`` (see the module docstring for the algorithm).

    Args:
        rank: the number of states; None chooses it with ``choose_rank(singular values, relative)``.

    Raises:
        SpectralError: bases without ε, a rank above the Hankel matrix's size, a zero Hankel matrix.
    """
    alphabet = list(alphabet)
    if not alphabet:
        raise SpectralError("spectral learning needs a nonempty alphabet")
    hankel, per_symbol = hankel_blocks(f, prefixes, suffixes, alphabet)
    _, singular, vt = np.linalg.svd(hankel, full_matrices=False)
    if rank is None:
        rank = choose_rank(singular, relative)
    if not 1 <= rank <= len(singular):
        raise SpectralError(f"rank {rank} is outside 1..{len(singular)} (the Hankel matrix is {hankel.shape})")
    v = vt[:rank].T
    pseudo = np.linalg.pinv(hankel @ v)
    empty_prefix, empty_suffix = list(prefixes).index(()), list(suffixes).index(())
    initial = hankel[empty_prefix] @ v
    final = pseudo @ hankel[:, empty_suffix]
    transitions = {a: pseudo @ per_symbol[a] @ v for a in alphabet}
    return SpectralResult(_as_wfsa(initial, final, transitions, alphabet, name), rank, singular, alphabet, initial,
                          final, transitions)


def _as_wfsa(
    initial: np.ndarray, final: np.ndarray, transitions: dict[Hashable, np.ndarray], alphabet: list[Hashable], name: str
) -> WFSA:
    wfsa = WFSA("real", SymbolTable(alphabet), name=name)
    for i in range(len(initial)):
        wfsa.add_state(f"s{i}")
    for i, weight in enumerate(initial):
        if weight != 0:
            wfsa.set_initial(i, float(weight))
    for i, weight in enumerate(final):
        if weight != 0:
            wfsa.set_final(i, float(weight))
    for symbol, matrix in transitions.items():
        for i, j in zip(*np.nonzero(matrix)):
            wfsa.add_arc(int(i), int(j), Sym(symbol), float(matrix[i, j]))
    return wfsa


@dataclass(frozen=True)
class Fidelity:
    """How closely the automaton follows the function on held-out strings."""

    strings: int
    mean_abs_error: float
    max_abs_error: float
    agreement: float | None  # the fraction of equal decisions (classifiers), else None

    def as_dict(self) -> dict[str, Any]:
        return {"strings": self.strings, "mean_abs_error": self.mean_abs_error, "max_abs_error": self.max_abs_error,
                "agreement": self.agreement}


def fidelity(
    result: SpectralResult, f: StringFunction, strings: Sequence[Word], threshold: float | None = None
) -> Fidelity:
    """Mean and max absolute error on ``strings``; with ``threshold``, the fraction of strings on which
    ``automaton > threshold`` equals ``f > threshold`` (0.5 for probabilities, 0 for logits)."""
    if not strings:
        raise SpectralError("fidelity needs at least one held-out string")
    truth = np.asarray(f(strings), dtype=np.float64).reshape(-1)
    learned = result.scores(strings)
    errors = np.abs(truth - learned)
    agreement = None if threshold is None else float(np.mean((truth > threshold) == (learned > threshold)))
    return Fidelity(len(strings), float(errors.mean()), float(errors.max()), agreement)


def plot_singular_values(singular_values: np.ndarray, rank: int, path: str | Path, title: str = "") -> Path:
    """Draw the Hankel matrix's singular values (log scale) with the chosen rank marked; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = np.asarray(singular_values)
    figure, axes = plt.subplots(figsize=(5, 3.2))
    axes.semilogy(np.arange(1, len(values) + 1), np.maximum(values, 1e-16), "o-", markersize=3)
    axes.axvline(rank + 0.5, color="tab:red", linestyle="--", label=f"rank {rank}")
    axes.set_xlabel("index")
    axes.set_ylabel("singular value")
    axes.set_title(title or "Hankel singular values")
    axes.legend()
    figure.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out)
    plt.close(figure)
    return out
