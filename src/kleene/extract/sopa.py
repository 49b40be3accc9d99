"""SoPa (sopa-soft-patterns.md) taken apart: one WFSA per pattern that scores a whole padded document.

The layer's document score ``s_doc = ⊕_{1≤t≤n} [h_t]_END`` is a WFSA's Forward once the pattern chain is wrapped:

- ``idle`` (initial, a ``∀α/1̄`` loop) is the time before a span; its value is always 1̄, which is also START's
  restart value ``h_0[START]``, so a span begins by a START move (main path, self-loop) taken from ``idle``;
- ``done`` (final, a ``∀α/1̄`` loop) is the time after a span: every END state has an ``ε/1̄`` arc into it, so a
  path ends its span at some step t and the Forward ⊕-sums the END scores over t, as eq. 8 does.

Semirings: the layer runs max-times in log space (its slots are log-weights), so its automata are over
``max-plus`` with weights ``log E(w·v + b)`` and their Forward is the layer's log-score (``exp`` gives the
probability-like number the MLP reads); max-plus and real patterns are over their own semiring.

Paper mode (eqs. 7-8, ``epsilon_cap`` k): after each token at most k epsilons in a row. The automaton keeps
post-token copies ``s{i}_e{l}`` of the pattern states, one per number l ≤ k of epsilons just taken; every copy
of state i consumes like state i into ``s{j}`` (l = 0), and ``s{i}_e{l} -ε/eps_i-> s{i+1}_e{l+1}``. The restart
vector ``h_0 = eps(π)`` is the chain ``idle -ε/eps0-> h0_s1 -ε/eps1-> …`` (states that consume but never end a
span, as h_0 enters h_t only through the next token's moves). When END is reachable by epsilons alone, the
equations also count the empty span once per step: the arc ``idle -∀α/⊗eps-> done``.

Reference mode (the authors' code): one optional epsilon *before* a token, as composite moves
``eps_i ⊗ phi_{i+1}`` (i → i+1) and ``eps_i ⊗ mu_{i+1}`` (i → i+2); fixed self-loop and epsilon scales are part
of the weights; in the max semirings every pattern state starts at the authors' zero -100 (initial weights) and
the document score is floored at -100 (``idle``'s final weight).

The document is the classifier's padded token sequence: ``boundary`` copies of ``SOPA_START`` before the tokens
and of ``SOPA_END`` after them (``sopa_document``); the two boundary vectors are extra rows of the features.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import sympy

from kleene.automata.labels import ANY, EPSILON
from kleene.automata.semiring import Semiring, get_semiring
from kleene.automata.weights import ALPHA
from kleene.automata.wfsa import WFSA
from kleene.extract.core import AffineInput, Extraction, ExtractionError, Structure, Unit, to_numpy, vocabulary_rows
from kleene.nn.sopa import REFERENCE_ZERO
from kleene.rational.recurrence import input_symbol

#: Padding tokens of a SoPa document (their vectors are the classifier's ``start_vector`` / ``end_vector``).
SOPA_START, SOPA_END = "<SoPa:START>", "<SoPa:END>"
__all__ = ["REFERENCE_ZERO", "SOPA_END", "SOPA_START", "from_sopa", "from_sopa_patterns", "sopa_document"]


def storage_semiring(semiring: str | Semiring) -> Semiring:
    """The semiring a SoPa pattern's automata are over: the layer's storage (max-times runs in log space: max-plus)."""
    return get_semiring(semiring).storage


def _times(storage: Semiring, *factors: sympy.Expr) -> sympy.Expr:
    """A semiring product written in the storage's numbers (real: ×, max-plus: +)."""
    return storage.sym_times(*factors)


def _call(name: str) -> sympy.Expr:
    return sympy.Function(name)(input_symbol(0))


def _weight(name: str) -> sympy.Expr:
    return sympy.Function(name)(ALPHA)


class _PatternBuilder:
    """The symbolic automaton of one pattern of ``length`` states (see the module docstring for the construction).

    Weight functions: ``mu{i}`` (main path out of state i), ``phi{i}`` (self-loop on i, times the loop scale),
    reference mode's composites ``eps{i}_phi{j}`` / ``eps{i}_mu{j}``; constants ``eps{i}``.
    """

    def __init__(self, length: int, storage: Semiring, self_loops: bool, epsilons: bool, loop_scale: float | None):
        self.length, self.storage = length, storage
        self.self_loops, self.epsilons = self_loops, epsilons
        self.wfsa = WFSA(storage)
        scale = [] if loop_scale is None else [sympy.Float(loop_scale)]
        self.parameterisation: dict[str, sympy.Expr] = {f"mu{i}": _call(f"m{i}") for i in range(length - 1)}
        if self_loops:
            self.parameterisation.update({f"phi{i}": _times(storage, _call(f"s{i}"), *scale) for i in range(length)})

    def _consume_like(self, src: str, i: int) -> None:
        """The moves of pattern state i (self-loop, main path) out of ``src``, into the plain states."""
        if self.self_loops:
            self.wfsa.add_arc(src, f"s{i}", ANY, _weight(f"phi{i}"))
        if i + 1 < self.length:
            self.wfsa.add_arc(src, f"s{i + 1}", ANY, _weight(f"mu{i}"))

    def _wrap(self, end_states: Sequence[str]) -> None:
        one = self.storage.one
        self.wfsa.add_arc("idle", "idle", ANY, one)
        self.wfsa.add_arc("done", "done", ANY, one)
        for end in end_states:
            self.wfsa.add_arc(end, "done", EPSILON, one)
        self.wfsa.set_initial("idle", one)
        self.wfsa.set_final("done", one)

    def paper(self, epsilon_cap: int | None) -> Structure:
        length = self.length
        depth = 0 if not self.epsilons else length - 1 if epsilon_cap is None else min(epsilon_cap, length - 1)
        post = {(0, i) for i in range(0 if self.self_loops else 1, length)}  # (epsilons taken, state)
        for level in range(1, depth + 1):
            post |= {(level, i + 1) for (lv, i) in post if lv == level - 1 and i + 1 < length}

        def name(level: int, i: int) -> str:
            return f"s{i}" if level == 0 else f"s{i}_e{level}"

        self.wfsa.add_state("idle")
        for i in range(1, depth + 1):
            self.wfsa.add_state(f"h0_s{i}")
        for level, i in sorted(post):
            self.wfsa.add_state(name(level, i))
        self.wfsa.add_state("done")
        self._consume_like("idle", 0)
        for i in range(1, depth + 1):
            self.wfsa.add_arc("idle" if i == 1 else f"h0_s{i - 1}", f"h0_s{i}", EPSILON, sympy.Symbol(f"eps{i - 1}"))
            self._consume_like(f"h0_s{i}", i)
        for level, i in sorted(post):
            self._consume_like(name(level, i), i)
            if (level + 1, i + 1) in post:
                self.wfsa.add_arc(name(level, i), name(level + 1, i + 1), EPSILON, sympy.Symbol(f"eps{i}"))
        self._wrap([name(level, i) for level, i in sorted(post) if i == length - 1])
        if self.epsilons and depth == length - 1:  # h_0[END] ≠ 0̄: the empty span, once per step
            empty = _times(self.storage, *(sympy.Symbol(f"eps{i}") for i in range(length - 1)))
            self.wfsa.add_arc("idle", "done", ANY, empty)
        return Structure(self.wfsa, self.parameterisation)

    def reference(self, floor: float | None) -> Structure:
        length = self.length
        self.wfsa.add_states("idle", *(f"s{i}" for i in range(length)), "done")
        for name in ["idle"] + [f"s{i}" for i in range(length)]:
            i = 0 if name == "idle" else int(name[1:])
            self._consume_like(name, i)
            if self.epsilons and i + 1 < length:  # one epsilon, then the next state's move
                eps = sympy.Symbol(f"eps{i}")
                if self.self_loops:
                    self.parameterisation[f"eps{i}_phi{i + 1}"] = _times(
                        self.storage, eps, self.parameterisation[f"phi{i + 1}"]
                    )
                    self.wfsa.add_arc(name, f"s{i + 1}", ANY, _weight(f"eps{i}_phi{i + 1}"))
                if i + 2 < length:
                    self.parameterisation[f"eps{i}_mu{i + 1}"] = _times(self.storage, eps, _call(f"m{i + 1}"))
                    self.wfsa.add_arc(name, f"s{i + 2}", ANY, _weight(f"eps{i}_mu{i + 1}"))
        self._wrap([f"s{length - 1}"])
        if floor is not None:
            self.wfsa.set_final("idle", floor)
        return Structure(self.wfsa, self.parameterisation)


def _activation(semiring: Semiring, encoder: str) -> str:
    """The encoder E in the storage's numbers (``kleene.nn.sopa.encode_to_storage``): log σ where elements are stored
    as their logs (the storage holds log-weights, the semiring does not: max-times), else σ or the identity."""
    stored_as_logs = semiring.storage.log_weights and not semiring.log_weights
    return "logsigmoid" if encoder == "sigmoid" and stored_as_logs else encoder


def _per_state(prefix: str, activation: str, weight: np.ndarray, bias: np.ndarray) -> dict[str, AffineInput]:
    """Input functions ``{prefix}{i} = E(weight[i] · v + bias[i])``, one per state i."""
    return {f"{prefix}{i}": AffineInput(activation, weight[i][None, :], float(bias[i])) for i in range(len(weight))}


def _pattern_units(patterns: Any) -> list[Unit]:
    algebra, mode = patterns.algebra, patterns.mode
    storage = algebra.storage
    activation = _activation(algebra, patterns.encoder)
    units: list[Unit] = []
    for group in patterns.groups:
        floor = REFERENCE_ZERO if group.floored else None
        length = group.length
        main_w, main_b = to_numpy(group.main_weight), to_numpy(group.main_bias) * group.bias_scale
        if group.self_loops:
            loop_w, loop_b = to_numpy(group.loop_weight), to_numpy(group.loop_bias) * group.bias_scale
        eps = to_numpy(group.recurrence.constants) if group.epsilons else None  # [L-1, count], storage form
        builder = _PatternBuilder(length, storage, group.self_loops, group.epsilons, group.loop_scale)
        structure = builder.paper(group.epsilon_cap) if mode == "paper" else builder.reference(floor)
        for p in range(group.count):  # the patterns of a group share their structure
            inputs = _per_state("m", activation, main_w[p], main_b[p])
            if group.self_loops:
                inputs.update(_per_state("s", activation, loop_w[p], loop_b[p]))
            constants = {} if eps is None else {f"eps{i}": float(eps[i, p]) for i in range(length - 1)}
            initial = {f"s{i}": floor for i in range(length)} if floor is not None else {}
            units.append(Unit(f"pattern{len(units)}", structure, inputs, constants, initial))
    return units


def from_sopa_patterns(patterns: Any, embedding: Any, words: Sequence[Hashable] | None = None) -> Extraction:
    """A bank of soft patterns (``kleene.nn.sopa.SoftPatterns``) as one automaton per pattern, in pattern order.

    Each automaton's Forward over a token sequence is the bank's score of that sequence as one document (storage
    form: log-scores for max-times).

    Raises:
        ExtractionError: the bank's parameters do not fit the construction (named).
    """
    if patterns.mode not in ("paper", "reference"):
        raise ExtractionError(f"SoPa mode {patterns.mode!r} is neither 'paper' nor 'reference'")
    names, table = vocabulary_rows(embedding, words)
    label = f"SoPa({patterns.mode}, {patterns.semiring}, {patterns.num_patterns} patterns)"
    return Extraction(label, _pattern_units(patterns), names, table)


def from_sopa(model: Any, words: Sequence[Hashable] | None = None) -> Extraction:
    """A ``SoPaClassifier``'s patterns over its vocabulary plus the padding tokens ``SOPA_START``/``SOPA_END``.

    Score a document with ``sopa_document(tokens, model.boundary)``: the automata's Forward over it is the
    classifier's ``patterns`` output (before the MLP; max-times: log-scores, ``exp`` gives ``pattern_scores``).

    Raises:
        ExtractionError: the vocabulary already holds a padding token's name.
    """
    names, table = vocabulary_rows(model.embedding, words)
    clash = {SOPA_START, SOPA_END} & set(names)
    if clash:
        raise ExtractionError(f"the vocabulary contains the SoPa padding token {sorted(clash)[0]!r}")
    boundary = np.stack([to_numpy(model.start_vector), to_numpy(model.end_vector)])
    return from_sopa_patterns(model.patterns, np.concatenate([table, boundary]), [*names, SOPA_START, SOPA_END])


def sopa_document(tokens: Sequence[Hashable], boundary: int) -> list[Hashable]:
    """A document as the classifier pads it: ``boundary`` START tokens, the tokens, ``boundary`` END tokens."""
    return [SOPA_START] * boundary + list(tokens) + [SOPA_END] * boundary
