"""Flattening a stack of rational layers into one rational layer with a delay (delayed-rnn.md Theorem 1).

A k-layer stack of linear Elman layers (identity activations, ``zoo.stacked_linear``) is rational: each layer
reads the one below at the *current* step, which the prover turns into epsilon arcs. Its flattening into a
single layer with block-bidiagonal weights and delay k−1 (``zoo.delayed_linear``, initial state from Lemma 1)
is rational too, with no epsilon arcs. ``check_delay`` proves the two agree with the delay:

    delayed(w u) = stacked(w)    for every string w and every u of length k−1,

i.e. the series ``stacked · Σ^{k−1}`` and ``delayed`` restricted to strings of length ≥ k−1 are equal. Both are
WFSAs (concatenation and intersection of rational series), so equality is decided exactly by Tzeng's
algorithm once the symbolic weights have values; the weights are polynomials in the parameters, so agreement
at a few random parameter points proves the identity with probability 1 (Schwartz–Zippel), and a single
disagreement is a counterexample string.

Stacks whose upper gates read the lower layer multiplicatively are not rational even with identity
activations (``zoo.stacked_gated_linear`` computes t!); the prover refuses them.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kleene.automata.equivalence import Counterexample, equivalent
from kleene.automata.labels import ANY
from kleene.automata.ops import bind, concat, intersect
from kleene.automata.wfsa import WFSA
from kleene.rational.certificate import Certificate, random_environment
from kleene.rational.recurrence import RecurrenceError

__all__ = ["DelayCheck", "check_delay", "length_window"]


def length_window(alphabet: Sequence[Hashable], length: int, *, at_least: bool) -> WFSA:
    """The real automaton of weight 1 on strings of exactly (or at least) ``length`` symbols."""
    window = WFSA("real", alphabet=list(alphabet), name=f"Σ^{length}" + ("Σ*" if at_least else ""))
    states = [window.add_state(f"n{i}") for i in range(length + 1)]
    for src, dst in itertools.pairwise(states):
        window.add_arc(src, dst, ANY, 1.0)
    if at_least:
        window.add_arc(states[-1], states[-1], ANY, 1.0)
    window.set_initial(states[0])
    window.set_final(states[-1])
    return window


@dataclass
class DelayCheck:
    """The outcome of ``check_delay``: equal with the delay at every trial, or the first counterexample."""

    stacked: str
    delayed: str
    delay: int
    outputs: list[str]
    trials: int
    holds: bool
    counterexample: Counterexample | None = None
    failing_output: str | None = None

    def __str__(self) -> str:
        head = f"{self.delayed}(w u) = {self.stacked}(w) for |u| = {self.delay}, outputs {', '.join(self.outputs)}"
        if self.holds:
            return f"{head}: holds (Tzeng equivalence at {self.trials} random parameter points)"
        return f"{head}: FAILS for output {self.failing_output}: {self.counterexample}"


def check_delay(
    stacked: Certificate,
    delayed: Certificate,
    delay: int,
    *,
    alphabet: Sequence[Hashable] = ("a", "b"),
    trials: int = 3,
    seed: int = 0,
    tolerance: float = 1e-9,
) -> DelayCheck:
    """Decide whether ``delayed``'s outputs are ``stacked``'s delayed by ``delay`` steps, for every input string.

    Note:
        Both recurrences must name their input functions and constants alike (one random instantiation serves
        both) and share their output names; real semiring only.

    Raises:
        RecurrenceError: outputs or parameters that do not match, or a negative delay.
    """
    if delay < 0:
        raise RecurrenceError(f"check_delay: the delay must be >= 0, got {delay}")
    s_rec, d_rec = stacked.recurrence, delayed.recurrence
    outputs = [name for name in s_rec.outputs if name in d_rec.outputs]
    if not outputs:
        raise RecurrenceError(f"check_delay: {s_rec.name} and {d_rec.name} have no output in common")
    missing = {f.name for f in d_rec.input_functions} - {f.name for f in s_rec.input_functions}
    missing |= {c.name for c in d_rec.constant_symbols} - {c.name for c in s_rec.constant_symbols}
    if missing:
        raise RecurrenceError(f"check_delay: {d_rec.name} has parameters {sorted(missing)} that {s_rec.name} lacks")
    rng = np.random.default_rng(seed)
    exactly, at_least = length_window(alphabet, delay, at_least=False), length_window(alphabet, delay, at_least=True)
    s_proofs = {p.output: i for i, p in enumerate(stacked.automata)}
    d_proofs = {p.output: i for i, p in enumerate(delayed.automata)}
    for _ in range(trials):
        env = random_environment(s_rec, alphabet, rng)
        s_envs, d_envs = stacked.weight_environments(env, alphabet), delayed.weight_environments(env, alphabet)
        for output in outputs:
            i, j = s_proofs[output], d_proofs[output]
            left = concat(bind(stacked.automata[i].wfsa, s_envs[i], alphabet), exactly)
            right = intersect(bind(delayed.automata[j].wfsa, d_envs[j], alphabet), at_least)
            result = equivalent(left, right, tolerance=tolerance)
            if not result.equivalent:
                return DelayCheck(s_rec.name, d_rec.name, delay, outputs, trials, False, result.counterexample, output)
    return DelayCheck(s_rec.name, d_rec.name, delay, outputs, trials, True)
