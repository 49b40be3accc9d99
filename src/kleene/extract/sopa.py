"""SoPa (sopa-soft-patterns.md) taken apart: one WFSA per pattern that scores a whole padded document.

The layer's document score ``s_doc = ⊕_{1≤t≤n} [h_t]_END`` is a WFSA's Forward once the pattern chain is wrapped:

- ``idle`` (initial, a ``∀α/1̄`` loop) is the time before a span; its value is always 1̄, which is also START's
  restart value ``h_0[START]``, so a span begins by a START move (main path, self-loop) taken from ``idle``;
- ``done`` (final, a ``∀α/1̄`` loop) is the time after a span: every END state has an ``ε/1̄`` arc into it, so a
  path ends its span at some step t and the Forward ⊕-sums the END scores over t, as eq. 8 does.

The automaton is read from the layer's compiled template (``PatternGroup.template``: its moves, epsilons, initial
and final weights) and run options (restart, ``epsilon_cap``), so it cannot drift from the layer.

Semirings: the automata are over the layer's storage semiring (max-times runs in log space: max-plus, with weights
``log E(w·v + b)``; their Forward is the layer's log-score, ``exp`` gives the number the MLP reads); the other
semirings store themselves.

Epsilons (paper mode, eqs. 7-8, ``epsilon_cap`` k): after each token at most k epsilons in a row. The automaton
keeps post-token copies ``s{i}_e{l}`` of the template's states, one per number l ≤ k of epsilons just taken;
every copy of state i consumes like state i into ``s{j}`` (l = 0), and ``s{i}_e{l} -ε/eps-> s{j}_e{l+1}``. The
restart vector ``h_0 = λ ⊗ E^{≤k}`` is ``idle`` (λ) and the copies ``h0_s{j}_e{l}`` reached from it by l epsilons
(states that consume but never end a span, as h_0 enters h_t only through the next token's moves). When a final
state is among them, the layer also counts the empty span once per step: the arc ``idle -∀α/h_0[END]-> done``.

Reference mode (the authors' code): the template has no epsilon arcs; one optional epsilon *before* a token is
part of its composite moves (``eps_i ⊗ phi_{i+1}``: i → i+1, ``eps_i ⊗ mu_{i+1}``: i → i+2), and fixed self-loop
and epsilon scales are part of the weights. Where semiring zero is -inf the authors stand in -100: every pattern
state starts there (initial weights) and the document score is floored at -100 (``idle``'s final weight).

Shared self-loops (either mode; the authors' ``--shared_sl``): the self-loop input ``s{i}`` is the main path's row i
(END: the layer's ``end_weight``), and the loop weight is ``s{i}(x) ⊗ sl{i}``, ``sl{i}`` a constant of each unit (the
pattern's learned scale in storage form).

The document is the classifier's padded token sequence: ``boundary`` copies of ``SOPA_START`` before the tokens
and of ``SOPA_END`` after them (``sopa_document``); the two boundary vectors are extra rows of the features.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import sympy

from kleene.automata.labels import ANY, EPSILON
from kleene.automata.semiring import Semiring
from kleene.automata.weights import ALPHA
from kleene.automata.wfsa import WFSA
from kleene.compile.template import Factor, TemplateArc
from kleene.extract.core import AffineInput, Extraction, ExtractionError, Structure, Unit, to_numpy, vocabulary_rows
from kleene.nn.sopa import REFERENCE_ZERO
from kleene.rational.recurrence import input_symbol

#: Padding tokens of a SoPa document (their vectors are the classifier's ``start_vector`` / ``end_vector``).
SOPA_START, SOPA_END = "<SoPa:START>", "<SoPa:END>"
__all__ = ["REFERENCE_ZERO", "SOPA_END", "SOPA_START", "from_sopa", "from_sopa_patterns", "sopa_document"]


def _times(storage: Semiring, *factors: sympy.Expr) -> sympy.Expr:
    """A semiring product written in the storage's numbers (real: ×, max-plus: +)."""
    return storage.sym_times(*factors)


def _call(name: str) -> sympy.Expr:
    return sympy.Function(name)(input_symbol(0))


def _weight(name: str) -> sympy.Expr:
    return sympy.Function(name)(ALPHA)


def _factor_names(storage: Semiring, weight: Factor, slots: Sequence[str], constants: Sequence[str]) -> list[str]:
    """The names of a factor's constants then slots (a move's weight function is named by them joined by ``_``)."""
    if weight.literal is not None:  # pragma: no cover - SoPa's templates have no literals
        raise ExtractionError(f"a SoPa template weight with a literal {weight.literal!r}")
    return [constants[c] for c in weight.constants] + [slots[k] for k in weight.slots]


def _pattern_structure(group: Any) -> Structure:
    """The automaton of one group's compiled template, run as the layer runs it (restart, ⊕ over steps, at most
    ``epsilon_cap`` epsilons in a row; see the module docstring): read from ``group.template``, not re-derived.

    Weight functions are named by their factors (``mu1``, ``phi2``, ``eps0_phi1``...); a slot ``mu{i}`` is the
    input ``m{i}(x_t)``, ``phi{i}`` is ``s{i}(x_t)`` times the layer's self-loop scale: a fixed number, or with
    shared self-loops the constant ``sl{i}`` (each pattern's learned scale; ``s{i}`` then reads the main path's
    row i); constants ``eps{i}``.
    """
    template, storage = group.template, group.storage
    slots, constants = template.slots, template.constants
    q = len(template.states)
    cap = group.epsilon_cap if template.epsilons else 0
    depth = q - 1 if cap is None else cap  # SoPa's epsilons go forward: no path takes more than Q-1 of them

    def loop_scale(i: int) -> list[sympy.Expr]:
        if group.loop_share is not None:
            return [sympy.Symbol(f"sl{i}")]
        return [] if group.loop_scale is None else [sympy.Float(group.loop_scale)]

    scaled = {
        name: _call(f"m{i}") if kind == "mu" else storage.sym_times(_call(f"s{i}"), *loop_scale(i))
        for name, (kind, i) in zip(slots, group.slot_moves)
    }
    parameterisation: dict[str, sympy.Expr] = {}

    def move_weight(arc: TemplateArc) -> sympy.Expr:
        names = _factor_names(storage, arc.weight, slots, constants)
        name = "_".join(names)
        parameterisation[name] = storage.sym_times(
            *(sympy.Symbol(n) for n in names if n in constants), *(scaled[n] for n in names if n in scaled)
        )
        return _weight(name)

    def constant(weight: Factor) -> sympy.Expr:
        return storage.sym_times(*(sympy.Symbol(n) for n in _factor_names(storage, weight, slots, constants)))

    def state(prefix: str, index: int, level: int) -> str:
        return f"{prefix}s{index}" if level == 0 else f"{prefix}s{index}_e{level}"

    wfsa = WFSA(storage)
    one = storage.one
    wfsa.add_state("idle")
    # post-token copies (state, epsilons taken since the token); the start copies h0_* hold h_0 = λ ⊗ E^l
    post = {(m.dst, 0) for m in template.moves} | ({(i, 0) for i in range(q)} if group.floored else set())
    starts = {(src, 0): constant(w) for src, w in template.initial}
    start_levels = [dict(starts)]
    for level in range(depth):
        post |= {(e.dst, level + 1) for e in template.epsilons if (e.src, level) in post}
        reached: dict[int, sympy.Expr] = {}
        for e in template.epsilons:
            if (e.src, level) in start_levels[-1]:
                reached[e.dst] = storage.sym_plus(
                    *([reached[e.dst]] if e.dst in reached else []),
                    storage.sym_times(start_levels[-1][e.src, level], constant(e.weight)),
                )
        start_levels.append({(dst, level + 1): value for dst, value in reached.items()})
    for level, found in enumerate(start_levels[1:], 1):
        for index, _ in found:
            wfsa.add_state(state("h0_", index, level))
    for index, level in sorted(post, key=lambda x: (x[1], x[0])):
        wfsa.add_state(state("", index, level))
    wfsa.add_state("done")

    def consume(source: str, index: int, factor: sympy.Expr | None) -> None:
        for arc in template.moves:
            if arc.src == index:
                weight = move_weight(arc) if factor is None else storage.sym_times(factor, move_weight(arc))
                wfsa.add_arc(source, state("", arc.dst, 0), ANY, weight)

    for (index, _), value in starts.items():  # idle stands in the initial states with weight 1̄ ⊗ λ
        consume("idle", index, None if value == storage.sym_one else value)
    for level, found in enumerate(start_levels[1:], 1):
        for (index, _), _value in found.items():
            consume(state("h0_", index, level), index, None)
        for e in template.epsilons:
            if (e.src, level - 1) in start_levels[level - 1] and (e.dst, level) in found:
                source = "idle" if level == 1 else state("h0_", e.src, level - 1)
                wfsa.add_arc(source, state("h0_", e.dst, level), EPSILON, constant(e.weight))
    for index, level in post:
        consume(state("", index, level), index, None)
        for e in template.epsilons:
            if e.src == index and (e.dst, level + 1) in post and level < depth:
                wfsa.add_arc(state("", index, level), state("", e.dst, level + 1), EPSILON, constant(e.weight))
    wfsa.add_arc("idle", "idle", ANY, one)
    wfsa.add_arc("done", "done", ANY, one)
    for final_state, weight in template.final:
        for index, level in post:
            if index == final_state:
                wfsa.add_arc(state("", index, level), "done", EPSILON, constant(weight))
    # the empty span, once per step (the layer's ``empty_span``): h_0 = λ ⊗ E^{≤cap} ends at a final state
    empty = [
        storage.sym_times(value, constant(weight))
        for found in start_levels[1:]
        for (index, _), value in found.items()
        for final_state, weight in template.final
        if final_state == index
    ]
    if empty:
        wfsa.add_arc("idle", "done", ANY, storage.sym_plus(*empty))
    wfsa.set_initial("idle", one)
    wfsa.set_final("done", one)
    if group.floored:
        wfsa.set_final("idle", REFERENCE_ZERO)
    return Structure(wfsa, parameterisation)


def _activation(semiring: Semiring, encoder: str) -> str:
    """The encoder E in the storage's numbers (``kleene.nn.sopa.encode_to_storage``): log σ where elements are stored
    as their logs (``Semiring.stores_logarithms``: max-times), else σ or the identity."""
    return "logsigmoid" if encoder == "sigmoid" and semiring.stores_logarithms else encoder


def _per_state(prefix: str, activation: str, weight: np.ndarray, bias: np.ndarray) -> dict[str, AffineInput]:
    """Input functions ``{prefix}{i} = E(weight[i] · v + bias[i])``, one per state i."""
    return {f"{prefix}{i}": AffineInput(activation, weight[i][None, :], float(bias[i])) for i in range(len(weight))}


def _pattern_units(patterns: Any) -> list[Unit]:
    activation = _activation(patterns.algebra, patterns.encoder)
    units: list[Unit] = []
    for group in patterns.groups:
        floor = REFERENCE_ZERO if group.floored else None
        length = group.length
        main_w, main_b = to_numpy(group.main_weight), to_numpy(group.main_bias) * group.bias_scale
        shares = group.loop_scales()  # shared self-loops: (count, L) storage form; the loops read main rows
        if shares is not None:
            loop_w = np.concatenate([main_w, to_numpy(group.end_weight)], 1)
            loop_b = np.concatenate([main_b, to_numpy(group.end_bias) * group.bias_scale], 1)
            share = to_numpy(shares)
        elif group.self_loops:
            loop_w, loop_b = to_numpy(group.loop_weight), to_numpy(group.loop_bias) * group.bias_scale
        constants_of = group.epsilon_constants()
        eps = None if constants_of is None else to_numpy(constants_of)  # [constants, count], storage form
        structure = _pattern_structure(group)
        for p in range(group.count):  # the patterns of a group share their structure
            inputs = _per_state("m", activation, main_w[p], main_b[p])
            if group.self_loops:
                inputs.update(_per_state("s", activation, loop_w[p], loop_b[p]))
            constants = {} if eps is None else {c: float(eps[k, p]) for k, c in enumerate(group.template.constants)}
            if shares is not None:
                constants.update({f"sl{i}": float(share[p, i]) for i in range(length)})
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
    """A document as the classifier pads it: ``boundary`` START tokens, the tokens, ``boundary`` END tokens.

    Caution:
        ``boundary`` must be the classifier's own (``SoPaClassifier.boundary``); a negative one pads nothing.
    """
    return [SOPA_START] * boundary + list(tokens) + [SOPA_END] * boundary
