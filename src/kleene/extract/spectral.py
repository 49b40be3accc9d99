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
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from kleene.automata.labels import Sym, SymbolTable
from kleene.automata.wfsa import WFSA
from kleene.errors import SpectralError

__all__ = [
    "Fidelity",
    "RecurrentFunction",
    "RestrictedVocabulary",
    "SpectralError",
    "SpectralResult",
    "StringFunction",
    "choose_rank",
    "enumerate_strings",
    "fidelity",
    "hankel_blocks",
    "plot_singular_values",
    "recurrent_hankel_blocks",
    "sample_basis",
    "spectral_from_hankel",
    "spectral_learn",
]

Word = tuple[Hashable, ...]
#: Scores a batch of strings at once (one float per string).
StringFunction = Callable[[Sequence[Word]], np.ndarray]


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
    # a trie of the prefixes (of the reversed sentences for suffixes): node k > 0 is one string, reached from node
    # parent[k] by symbol[k], seen count[k] times; nodes are numbered in the order their strings first appear
    child: dict[tuple[int, Hashable], int] = {}
    parent: list[int] = [0]
    symbol: list[Hashable] = [None]
    count: list[int] = [0]
    for sentence in sentences:
        node = 0
        for word in (reversed(tuple(sentence)) if suffixes else sentence):
            key = (node, word)
            found = child.get(key)
            if found is None:
                found = child[key] = len(count)
                parent.append(node)
                symbol.append(word)
                count.append(0)
            count[found] += 1
            node = found
    candidates = list(range(1, len(count)))
    if len(candidates) > size - 1 > 0:  # only the strings at least as frequent as the (size-1)-th need the full order
        cut = sorted(count[1:], reverse=True)[size - 2]
        candidates = [k for k in candidates if count[k] >= cut]

    def string(node: int) -> Word:
        out: list[Hashable] = []
        while node:
            out.append(symbol[node])
            node = parent[node]
        return tuple(out) if suffixes else tuple(reversed(out))

    strings = {k: string(k) for k in candidates}
    ranked = sorted(candidates, key=lambda k: (-count[k], len(strings[k]), str(strings[k])))
    return [(), *(strings[k] for k in ranked[: size - 1])]


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


@dataclass(frozen=True)
class RestrictedVocabulary:
    """The most frequent words of a corpus as an alphabet, every other word read as one symbol.

    Spectral learning over a large vocabulary needs a Hankel block per symbol, so the automaton reads only the
    frequent words; ``map`` turns a sentence into a string over ``alphabet``: a listed word is itself, a word of
    ``classes`` becomes its class symbol (optional word classes, e.g. by polarity), any other word ``other``.

    Raises:
        SpectralError: a word listed twice, or a class or other-word symbol that is also a listed word.
    """

    words: tuple[str, ...]
    other: str = "<other>"
    classes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(set(self.words)) != len(self.words):
            raise SpectralError("the restricted vocabulary lists a word twice")
        for symbol in [self.other, *self.classes.values()]:
            if symbol in self.words:
                raise SpectralError(f"the symbol {symbol!r} for words off the list is itself one of the words")
        listed = [word for word in self.classes if word in self.words]
        if listed:
            raise SpectralError(f"word {listed[0]!r} is both listed and given a class")

    @classmethod
    def most_frequent(
        cls, sentences: Sequence[Sequence[str]], size: int, other: str = "<other>"
    ) -> RestrictedVocabulary:
        """The ``size`` most frequent words (ties: first seen first).

        Raises:
            SpectralError: ``size`` < 1.
        """
        if size < 1:
            raise SpectralError(f"a restricted vocabulary needs at least one word; got size {size}")
        counts = Counter(word for sentence in sentences for word in sentence)
        return cls(tuple(word for word, _ in counts.most_common(size)), other)

    @property
    def alphabet(self) -> list[str]:
        """The words, the class symbols (first-seen order), then ``other``."""
        class_symbols = [symbol for symbol in dict.fromkeys(self.classes.values()) if symbol != self.other]
        return [*self.words, *class_symbols, self.other]

    def map(self, sentence: Sequence[str]) -> tuple[str, ...]:
        known = set(self.words)
        return tuple(word if word in known else self.classes.get(word, self.other) for word in sentence)


@dataclass
class RecurrentFunction:
    """A string function computed left to right, ``f(x₁…x_T) = readout(step(…step(initial, x₁)…, x_T))``, in batches.

    States are the rows of a 2-D float array: ``step(states, symbols)`` advances row i by the symbol whose index in
    ``alphabet`` is ``symbols[i]``; ``readout(states)`` gives one float per row. Calling the object scores strings
    (it is a ``StringFunction``); strings are run together, one ``step`` per depth of their prefix trie, so that a
    common prefix is read once.
    """

    alphabet: Sequence[Hashable]
    initial: np.ndarray
    step: Callable[[np.ndarray, np.ndarray], np.ndarray]
    readout: Callable[[np.ndarray], np.ndarray]

    def __post_init__(self) -> None:
        self._index = {symbol: i for i, symbol in enumerate(self.alphabet)}

    def symbol_index(self, symbol: Hashable, string: Word) -> int:
        """Raises SpectralError for a symbol outside the alphabet (naming it and its string)."""
        if symbol not in self._index:
            raise SpectralError(f"symbol {symbol!r} of string {string!r} is not in the alphabet")
        return self._index[symbol]

    def step_all(self, states: np.ndarray, symbol: Hashable) -> np.ndarray:
        """Every row advanced by the same symbol."""
        return self.step(states, np.full(len(states), self.symbol_index(symbol, (symbol,))))

    def states(self, strings: Sequence[Word]) -> np.ndarray:
        """The state after each string (one row per string), reading every distinct prefix once."""
        strings = [tuple(string) for string in strings]
        level: dict[Word, int] = {(): 0}
        level_states = np.asarray(self.initial)[None, :]
        out = np.empty((len(strings), level_states.shape[1]), dtype=level_states.dtype)
        by_length: dict[int, list[int]] = {}
        for i, string in enumerate(strings):
            by_length.setdefault(len(string), []).append(i)
        for i in by_length.get(0, []):
            out[i] = level_states[0]
        for depth in range(1, max(by_length, default=0) + 1):
            nodes: dict[Word, int] = {}
            parents, symbols = [], []
            for string in strings:
                if len(string) >= depth and string[:depth] not in nodes:
                    nodes[string[:depth]] = len(nodes)
                    parents.append(level[string[: depth - 1]])
                    symbols.append(self.symbol_index(string[depth - 1], string))
            level_states = self.step(level_states[np.array(parents)], np.array(symbols))
            level = nodes
            for i in by_length.get(depth, []):
                out[i] = level_states[level[strings[i]]]
        return out

    def __call__(self, strings: Sequence[Word]) -> np.ndarray:
        return np.asarray(self.readout(self.states(strings)), dtype=np.float64).reshape(-1)


def recurrent_hankel_blocks(
    f: RecurrentFunction, prefixes: Sequence[Word], suffixes: Sequence[Word]
) -> tuple[np.ndarray, dict[Hashable, np.ndarray]]:
    """``hankel_blocks`` for a recurrent function over its whole alphabet, without listing the strings ``p σ s``.

    The states after every row string ``p σ`` (and ``p``) are computed once; then the suffix basis is read as a trie
    from all of them at once, one ``step`` of ``|P|·(|Σ|+1)`` rows per trie node, and the readout at each node that is
    a suffix fills that column of every block.

    Raises:
        SpectralError: ε missing from a basis, or a symbol outside ``f.alphabet``.
    """
    if () not in prefixes or () not in suffixes:
        raise SpectralError("both bases must contain the empty string ε (as the tuple ())")
    prefixes, suffixes = [tuple(p) for p in prefixes], [tuple(s) for s in suffixes]
    middles: list[Word] = [(), *((a,) for a in f.alphabet)]
    row_states = f.states([p + m for m in middles for p in prefixes])
    column = {suffix: j for j, suffix in enumerate(suffixes)}
    children: dict[Word, list[Word]] = {}
    for suffix in suffixes:
        for n in range(1, len(suffix) + 1):
            siblings = children.setdefault(suffix[: n - 1], [])
            if suffix[:n] not in siblings:
                siblings.append(suffix[:n])
    values = np.empty((len(row_states), len(suffixes)))
    pending: list[tuple[Word, np.ndarray]] = [((), row_states)]  # (trie node, the states before its last symbol)
    while pending:  # depth first, stepping a node only when it is visited: one path of the trie holds states
        node, before = pending.pop()
        states = f.step_all(before, node[-1]) if node else before
        if node in column:
            values[:, column[node]] = np.asarray(f.readout(states), dtype=np.float64).reshape(-1)
        pending.extend((child, states) for child in reversed(children.get(node, [])))
    rows = len(prefixes)
    blocks = [values[k * rows : (k + 1) * rows] for k in range(len(middles))]
    return blocks[0], dict(zip(f.alphabet, blocks[1:]))


def choose_rank(singular_values: np.ndarray, relative: float = 0.02, max_rank: int | None = None) -> int:
    """The number of singular values above ``relative`` times the largest (at least 1, at most ``max_rank``)."""
    values = np.asarray(singular_values, dtype=np.float64)
    if values.size == 0 or values[0] <= 0:
        raise SpectralError("the Hankel matrix is zero: the function has no signal to extract")
    rank = int(np.sum(values > relative * values[0]))
    return max(1, min(rank, max_rank or rank))


@dataclass
class SpectralResult:
    """The learned automaton and what it was learned from.

    Note:
        ``wfsa`` (a kleene WFSA with one arc per nonzero matrix entry) is built on first use; ``scores`` works on the
        matrices directly, so sweeping many ranks over a large alphabet never builds it.
    """

    rank: int
    singular_values: np.ndarray
    alphabet: list[Hashable]
    initial: np.ndarray
    final: np.ndarray
    transitions: dict[Hashable, np.ndarray]
    name: str = "spectral"

    @cached_property
    def wfsa(self) -> WFSA:
        return _as_wfsa(self.initial, self.final, self.transitions, self.alphabet, self.name)

    def scores(self, strings: Sequence[Sequence[Hashable]]) -> np.ndarray:
        """``α₀ᵀ A_{x₁} … A_{x_T} α_∞`` for each string (matrix products batched over the strings' prefix trie, not the
        generic Forward).

        Raises:
            SpectralError: a symbol outside the alphabet (named, with its string).
        """
        matrices = [self.transitions[symbol] for symbol in self.alphabet]

        def step(rows: np.ndarray, symbols: np.ndarray) -> np.ndarray:
            out = np.empty_like(rows)
            for symbol in np.unique(symbols):
                chosen = symbols == symbol
                out[chosen] = rows[chosen] @ matrices[symbol]
            return out

        automaton = RecurrentFunction(self.alphabet, self.initial, step, lambda rows: rows @ self.final)
        return automaton([tuple(string) for string in strings])


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
    return spectral_from_hankel(hankel, per_symbol, prefixes, suffixes, rank, relative=relative, name=name)


def spectral_from_hankel(
    hankel: np.ndarray,
    per_symbol: dict[Hashable, np.ndarray],
    prefixes: Sequence[Word],
    suffixes: Sequence[Word],
    rank: int | None = None,
    *,
    relative: float = 0.02,
    name: str = "spectral",
) -> SpectralResult:
    """The spectral step of ``spectral_learn`` on Hankel blocks computed elsewhere (``hankel_blocks`` or
    ``recurrent_hankel_blocks``); the alphabet is the keys of ``per_symbol``, in order.

    Raises:
        SpectralError: bases without ε, blocks whose shapes are not ``|P| × |S|``, a rank outside the matrix, a zero
            Hankel matrix.
    """
    if () not in prefixes or () not in suffixes:
        raise SpectralError("both bases must contain the empty string ε (as the tuple ())")
    alphabet = list(per_symbol)
    shape = (len(prefixes), len(suffixes))
    for symbol, block in [("ε", hankel), *per_symbol.items()]:
        if np.shape(block) != shape:
            raise SpectralError(f"the Hankel block of {symbol!r} has shape {np.shape(block)}, expected {shape}")
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
    return SpectralResult(rank, singular, alphabet, initial, final, transitions, name)


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

    @classmethod
    def of(cls, truth: np.ndarray, learned: np.ndarray, threshold: float | None = None) -> Fidelity:
        """The errors of ``learned`` against ``truth`` (equal-length vectors) and, with ``threshold``, the fraction
        of entries on which ``learned > threshold`` equals ``truth > threshold``.

        Raises:
            SpectralError: empty or different-length vectors.
        """
        truth = np.asarray(truth, dtype=np.float64).reshape(-1)
        learned = np.asarray(learned, dtype=np.float64).reshape(-1)
        if truth.size == 0 or truth.shape != learned.shape:
            raise SpectralError(f"fidelity needs two equal, nonempty vectors; got {truth.size} and {learned.size}")
        errors = np.abs(truth - learned)
        agreement = None if threshold is None else float(np.mean((truth > threshold) == (learned > threshold)))
        return cls(truth.size, float(errors.mean()), float(errors.max()), agreement)


def fidelity(
    result: SpectralResult, f: StringFunction, strings: Sequence[Word], threshold: float | None = None
) -> Fidelity:
    """Mean and max absolute error on ``strings``; with ``threshold``, the fraction of strings on which
    ``automaton > threshold`` equals ``f > threshold`` (0.5 for probabilities, 0 for logits)."""
    if not strings:
        raise SpectralError("fidelity needs at least one held-out string")
    return Fidelity.of(np.asarray(f(strings), dtype=np.float64), result.scores(strings), threshold)


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
