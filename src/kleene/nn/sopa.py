"""SoPa: soft patterns (sopa-soft-patterns.md), a bank of chain WFSAs compiled by ``kleene.compile``.

A pattern of length L is a chain of L states (START = 0, END = L-1) with a main-path move i -> i+1, a
self-loop on every state and an epsilon i -> i+1 (self-loops and epsilons are switchable). Main-path and
self-loop weights are ``E(w·v_x + bias_scale * b)`` with E the sigmoid or the identity (eq. 3); epsilon
weights are ``E(c_i)`` (eq. 4). The document score of a pattern is the semiring sum over time of the END
state's value, masked by each document's length (eq. 8), then an MLP classifies the vector of scores.

Two semantics (``mode``):

* ``"paper"`` -- equations (7)-(8): epsilons are taken *after* consuming a token (at most
  ``epsilon_cap`` in a row, 1 in the paper), ``h_0 = eps(π)`` is ⊕-added at every step (the compiler's
  ``restart``), and ``s_doc = ⊕_{1≤t≤n} h_t[END]``. Since ``h_t`` contains ``h_0``, a pattern whose END is
  reachable by epsilons alone (length 2 with cap 1) also scores the empty span, as the equations say.
* ``"reference"`` -- the authors' released code (Noahs-ARK/soft_patterns): at most one epsilon, taken
  *before* consuming a token; the START state is reset to semiring one after every token while keeping its
  self-loop; fixed self-loop and epsilon scales (``self_loop_scale``, ``epsilon_scale`` as floats, encoded
  like a transition); a bias scale (0.1); and semiring zero represented by -100 in the max semirings. The
  epsilon-then-move pairs are compiled as composite moves (eps_i ⊗ mu_{i+1}, eps_i ⊗ phi_{i+1}), so the
  template has no epsilon arcs; -100 enters as the initial state and as the floor of the document score.
  ``kleene.nn.original.from_soft_patterns`` loads a state dict saved by that code.

Shared self-loops (``shared_self_loops``, the authors' ``--shared_sl``; either mode): the self-loop on state i
reads the score of the main-path row i (the END state, which has no move out, gets a row of its own:
``end_weight``/``end_bias``) and is discounted by a learned scale, ``E(raw) ⊗ E(w_i·v_x + bias_scale * b_i)``:
``"per-state"`` (``--shared_sl 1``) learns one raw scale per pattern and state, ``"global"`` (``--shared_sl 2``)
one for the whole bank (a ``SelfLoopShare`` module shared by every group).

Semirings: any of ``SEMIRINGS`` (``"max-times"``, ``"max-plus"``, ``"real"``, ``"log"``; a ``Semiring`` object
works too): every encoding asks the semiring (``storage``, ``to_storage``/``from_storage``,
``storage.times``/``sum``/``product``, ``log_weights``, ``best``), never its name. Max-times runs in log space
(its storage is max-plus: slots are log-weights). The MLP receives the semiring's elements as numbers: max-times
scores are exponentiated back to probabilities (the authors' ``to_float``).

The compiled template is the one definition of a pattern: the layer's score, and everything interpretation and
extraction read (span scores, best spans and their paths: ``PatternGroup.end_scores``, ``span_totals``,
``best_starts``, ``best_paths``), run it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parametrize

from kleene.automata.semiring import SEMIRINGS as ALL_SEMIRINGS
from kleene.automata.semiring import Semiring, get_semiring
from kleene.compile import CompiledRecurrence, Factor, Template, TemplateArc, compile, sopa_pattern
from kleene.compile.bank import CompiledBank, bank_backend, bank_runs_on, prebuild
from kleene.compile.module import kernel_dtype
from kleene.compile.runtime.cpu import DTYPE_SUFFIXES
from kleene.compile.runtime.op import onnx_exporting
from kleene.compile.template import OutputMode
from kleene.errors import SemiringError, SoPaError, WeightError
from kleene.nn.embedding import check_token_batch, word_embedding
from kleene.nn.registry import register_model

__all__ = [
    "MLP",
    "SHARED_SELF_LOOPS",
    "SelfLoopShare",
    "SoPaClassifier",
    "SoPaError",
    "SoftPatterns",
    "parse_pattern_spec",
]

Tensor = torch.Tensor
Mode = Literal["paper", "reference"]
SharedSelfLoops = Literal["per-state", "global"]
#: The values of ``shared_self_loops`` besides None (the authors' ``--shared_sl`` 1 and 2).
SHARED_SELF_LOOPS: tuple[SharedSelfLoops, ...] = ("per-state", "global")
Encoder = Literal["sigmoid", "identity"]
#: One arc of a path: (kind "main"/"self-loop"/"epsilon", source, target, step in the span or None, storage weight).
PathStep = tuple[str, int, int, int | None, Tensor]

#: The authors' semiring zero in the max semirings ("not really -inf, shh").
REFERENCE_ZERO = -100.0
#: The classifier's default bank (tuned on SST-2 dev with 50-d GloVe; see RESULTS.md).
DEFAULT_PATTERNS = "3-50_4-50_5-50_6-50"


def parse_pattern_spec(spec: str | Mapping[int, int] | Sequence[tuple[int, int]]) -> dict[int, int]:
    """``{length: count}`` sorted by length, from ``"5-50_4-50"`` (the authors' format), a mapping or pairs.

    Raises:
        SoPaError: a malformed spec, a length < 2 or a count < 1.
    """
    if isinstance(spec, str):
        pairs: list[tuple[int, int]] = []
        for part in spec.split("_"):
            fields = part.split("-")
            if len(fields) != 2 or not all(f.strip().isdigit() for f in fields):
                raise SoPaError(f"pattern spec {spec!r}: {part!r} is not LENGTH-COUNT")
            pairs.append((int(fields[0]), int(fields[1])))
    else:
        pairs = list(spec.items()) if isinstance(spec, Mapping) else [tuple(p) for p in spec]  # type: ignore[misc]
    result: dict[int, int] = {}
    for length, count in pairs:
        if int(length) < 2:
            raise SoPaError(f"pattern spec: a pattern needs at least 2 states, got length {length}")
        if int(count) < 1:
            raise SoPaError(f"pattern spec: length {length} has count {count}; counts must be >= 1")
        result[int(length)] = result.get(int(length), 0) + int(count)
    if not result:
        raise SoPaError("pattern spec is empty")
    return dict(sorted(result.items()))


# --------------------------------------------------------------------------------------------
# The semiring and the weights in storage form
# --------------------------------------------------------------------------------------------
def _runs_sopa(semiring: Semiring) -> bool:
    """Whether SoPa can run in ``semiring``: real-number elements, and larger document scores mean better matches
    (the MLP reads the scores as numbers, interpretation ranks spans by them)."""
    return np.dtype(semiring.numpy_dtype).kind == "f" and semiring.best != "min"


#: The semirings kleene ships that SoPa runs in.
SEMIRINGS = tuple(s.name for s in ALL_SEMIRINGS if _runs_sopa(s))


def sopa_semiring(semiring: str | Semiring) -> Semiring:
    """The ``Semiring`` of a SoPa layer.

    Raises:
        SoPaError: an unknown semiring, or one SoPa cannot run in (see ``SEMIRINGS``).
    """
    try:
        algebra = get_semiring(semiring)
    except SemiringError:
        algebra = None
    if algebra is None or not _runs_sopa(algebra):
        raise SoPaError(f"SoPa semiring must be one of {SEMIRINGS}, not {semiring!r}")
    return algebra


def _accepts_negatives(semiring: Semiring) -> bool:
    """Whether every real number is an element (the identity encoder passes raw scores on)."""
    try:
        semiring.check(-1.0)
    except WeightError:
        return False
    return True


def reference_encoder(semiring: str | Semiring) -> Encoder:
    """The authors' ``from_float`` in ``semiring``: the identity for log-weight elements (max-plus), the sigmoid for
    probability-like ones (max-times, real)."""
    return "identity" if sopa_semiring(semiring).log_weights else "sigmoid"


def _check_encoder(semiring: Semiring, encoder: str) -> None:
    if encoder not in ("sigmoid", "identity"):
        raise SoPaError(f"SoPa encoder must be 'sigmoid' or 'identity', not {encoder!r}")
    if encoder == "identity" and not _accepts_negatives(semiring):
        raise SoPaError(
            f"the {semiring.name} semiring (stored in {semiring.storage.name}) needs positive weights, which the "
            "identity encoder does not give: use encoder='sigmoid'"
        )


def encode_to_storage(scores: Tensor, semiring: str | Semiring, encoder: str) -> Tensor:
    """``E(scores)`` in the semiring's storage form (``Semiring.stored_sigmoid``: log σ where it stores logarithms)."""
    algebra = get_semiring(semiring)
    return algebra.stored_sigmoid(scores) if encoder == "sigmoid" else algebra.to_storage(scores)


class _EncodedConstants(nn.Module):
    """Parametrization: the recurrence's epsilon constants are ``scale ⊗ E(raw)`` in storage form."""

    def __init__(self, semiring: Semiring, encoder: str, scale: float | None):
        super().__init__()
        self.algebra, self.encoder = semiring, encoder
        self.scale = scale

    def forward(self, raw: Tensor) -> Tensor:
        value = encode_to_storage(raw, self.algebra, self.encoder)
        if self.scale is not None:
            value = self.algebra.storage.times(value, self.scale)
        return value


class SelfLoopShare(nn.Module):
    """The learned self-loop scales of shared self-loops: ``raw`` (count, L) per pattern and state, or (1,) one scale
    for every pattern; ``forward`` gives ``E(raw)`` in storage form (the authors' ``from_float(self_loop_scale)``)."""

    def __init__(self, *shape: int):
        super().__init__()
        self.raw = nn.Parameter(torch.randn(*shape))

    def forward(self, semiring: Semiring, encoder: str) -> Tensor:
        return encode_to_storage(self.raw, semiring, encoder)


def reference_template(length: int, self_loops: bool, epsilons: bool) -> Template:
    """The authors' transition: one optional epsilon *before* each consumed token, as composite moves.

    From state i a token leads to i (phi_i), i+1 (mu_i), and through the epsilon i -> i+1 first to
    i+1 (eps_i ⊗ phi_{i+1}) and i+2 (eps_i ⊗ mu_{i+1}). Slots and constants carry the names of
    ``sopa_pattern`` (mu{i}, phi{i}, eps{i}).
    """
    slot_names = [f"mu{i}" for i in range(length - 1)] + ([f"phi{i}" for i in range(length)] if self_loops else [])
    slot = {name: k for k, name in enumerate(slot_names)}
    constant_names = [f"eps{i}" for i in range(length - 1)] if epsilons else []
    moves: list[TemplateArc] = []
    for i in range(length):
        if i + 1 < length:
            moves.append(TemplateArc(i, i + 1, Factor((slot[f"mu{i}"],))))
        if self_loops:
            moves.append(TemplateArc(i, i, Factor((slot[f"phi{i}"],))))
        if epsilons and i + 1 < length:
            if self_loops:
                moves.append(TemplateArc(i, i + 1, Factor((slot[f"phi{i + 1}"],), (i,))))
            if i + 2 < length:
                moves.append(TemplateArc(i, i + 2, Factor((slot[f"mu{i + 1}"],), (i,))))
    return Template(
        states=tuple(f"s{i}" for i in range(length)),
        slots=tuple(slot_names),
        constants=tuple(constant_names),
        moves=tuple(moves),
        initial=((0, Factor()),),
        final=((length - 1, Factor()),),
        semiring="max-times",
        name=f"sopa-reference{length}",
    )


# --------------------------------------------------------------------------------------------
# One group of patterns of the same length
# --------------------------------------------------------------------------------------------
def group_template(
    length: int, mode: Mode, self_loops: bool, epsilons: bool, epsilon_cap: int | None
) -> tuple[Template, int | None]:
    """The template of a group of patterns of ``length`` states and the epsilon cap it compiles with (the paper's
    ``sopa_pattern``; reference mode: the authors' one-epsilon automaton, exact closure)."""
    if mode == "paper":
        return sopa_pattern(length, self_loops=self_loops, epsilons=epsilons), epsilon_cap
    return reference_template(length, self_loops, epsilons), None


def group_options(epsilon_cap: int | None) -> dict[str, Any]:
    """The compile options of every pattern group: restart at each step, the sum of the steps' scores."""
    return {"restart": True, "output": "sum", "epsilon_cap": epsilon_cap}


class PatternGroup(nn.Module):
    """``count`` patterns of one ``length``: their transition parameters and their compiled recurrence.

    Parameters (per pattern p, state i): ``main_weight[p, i]`` / ``main_bias[p, i]`` for the move
    i -> i+1 (i < L-1), ``loop_weight[p, i]`` / ``loop_bias[p, i]`` for the self-loop on i, and the raw
    epsilon parameters ``recurrence.parametrizations.constants.original[i, p]`` (c_i of eq. 4). With shared
    self-loops there is no ``loop_weight``/``loop_bias``: the self-loop on i < L-1 reads the main-path row i, the
    one on END reads ``end_weight[p, 0]`` / ``end_bias[p, 0]``, each ⊗ ``loop_share`` (a ``SelfLoopShare``).

    The compiled template is SoPa's only definition: the document score (``forward``/``score``), the scores of the
    spans ending at each step (``end_scores``), span totals (``span_totals``), best starts (``best_starts``) and
    best paths (``best_paths``) all run it, with other options where needed (``run``).
    """

    _slot_index: Tensor

    def __init__(
        self,
        input_dim: int,
        length: int,
        count: int,
        *,
        semiring: str | Semiring,
        encoder: str,
        mode: Mode,
        self_loops: bool,
        epsilons: bool,
        epsilon_cap: int | None,
        bias_scale: float,
        self_loop_scale: float | None,
        epsilon_scale: float | None,
        backend: str,
        loop_share: SelfLoopShare | None = None,
    ):
        super().__init__()
        self.algebra = sopa_semiring(semiring)
        self.storage = self.algebra.storage
        self.length, self.count = length, count
        self.semiring, self.encoder, self.mode = self.algebra.name, encoder, mode
        self.self_loops, self.epsilons, self.epsilon_cap = self_loops, epsilons, epsilon_cap
        self.bias_scale = bias_scale
        # the authors stand in -100 for an infinite semiring zero
        self.floored = mode == "reference" and self.storage.log_weights
        self.loop_scale = None if self_loop_scale is None else _encoded_float(self_loop_scale, self.algebra, encoder)
        if loop_share is not None and (not self_loops or self_loop_scale is not None):
            raise SoPaError("shared self-loops need self_loops=True and learn their scale (self_loop_scale=None)")
        #: the learned scales of shared self-loops (None: independent self-loop parameters)
        self.loop_share = loop_share
        self.main_weight = nn.Parameter(_unit_rows(count, length - 1, input_dim))
        self.main_bias = nn.Parameter(torch.randn(count, length - 1))
        if self_loops and loop_share is None:
            self.loop_weight = nn.Parameter(_unit_rows(count, length, input_dim))
            self.loop_bias = nn.Parameter(torch.randn(count, length))
        elif self_loops:
            self.end_weight = nn.Parameter(_unit_rows(count, 1, input_dim))
            self.end_bias = nn.Parameter(torch.randn(count, 1))
        template, self._cap = group_template(length, mode, self_loops, epsilons, epsilon_cap)
        self.template = template
        options = group_options(self._cap)
        self.recurrence: CompiledRecurrence = compile(template, self.algebra, count, backend, **options)
        self._variants: dict[tuple[object, ...], CompiledRecurrence] = {}
        if template.constants:
            with torch.no_grad():
                self.recurrence.constants.copy_(torch.randn_like(self.recurrence.constants))
            parametrize.register_parametrization(
                self.recurrence,
                "constants",
                _EncodedConstants(self.algebra, encoder, _eps_scale(epsilon_scale, self.algebra, encoder)),
            )
        # slot names are mu{i} (main path out of state i) and phi{i} (self-loop on state i)
        # position of each slot in cat([main (L-1 states), loop (L states)], -1)
        #: per slot of the template, (kind "mu"/"phi", state i): the main path out of i or the self-loop on i
        self.slot_moves = [_slot_kind(name) for name in template.slots]
        positions = [i if kind == "mu" else length - 1 + i for kind, i in self.slot_moves]
        self.register_buffer("_slot_index", torch.tensor(positions), persistent=False)

    def transitions(self, inputs: Tensor, dropout: nn.Module | None = None) -> tuple[Tensor, Tensor | None]:
        """Main-path (B, T, count, L-1) and self-loop (B, T, count, L) weights in storage form.

        ``dropout`` acts on the encoded scores before any self-loop scale (as the authors' code does; a shared
        self-loop reads the dropped-out main-path score).
        """
        if not self.self_loops:
            main = self._encoded(inputs, self.main_weight, self.main_bias, dropout)
            return main, None
        if self.loop_share is None:
            main = self._encoded(inputs, self.main_weight, self.main_bias, dropout)
            loop = self._encoded(inputs, self.loop_weight, self.loop_bias, dropout)
            if self.loop_scale is not None:
                loop = self.storage.times(loop, self.loop_scale)
            return main, loop
        rows = self._encoded(
            inputs,
            torch.cat([self.main_weight, self.end_weight], 1),
            torch.cat([self.main_bias, self.end_bias], 1),
            dropout,
        )
        scale = self.loop_share(self.algebra, self.encoder).to(rows.dtype)
        return rows[..., :-1], self.storage.times(rows, scale)

    def loop_scales(self) -> Tensor | None:
        """Shared self-loops: the learned scales (count, L) in storage form, else None."""
        if self.loop_share is None:
            return None
        scale = self.loop_share(self.algebra, self.encoder)
        return scale.expand(self.count, self.length) if scale.dim() == 1 else scale

    def _encoded(self, inputs: Tensor, weight: Tensor, bias: Tensor, dropout: nn.Module | None) -> Tensor:
        scores = encode_to_storage(self._affine(inputs, weight, bias), self.algebra, self.encoder)
        return scores if dropout is None else dropout(scores)

    def _affine(self, inputs: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        """``w·v + bias_scale * b`` for every (pattern, state): (B, T, count, states)."""
        count, states, dim = weight.shape
        flat = nn.functional.linear(inputs, weight.reshape(count * states, dim), self.bias_scale * bias.reshape(-1))
        return flat.view(*inputs.shape[:-1], count, states)

    def slots(self, main: Tensor, loop: Tensor | None) -> Tensor:
        """Stack the weights as the template's slots (B, T, S, count)."""
        weights = main if loop is None else torch.cat([main, loop], -1)
        return weights.index_select(-1, self._slot_index).transpose(2, 3)

    def epsilon_constants(self) -> Tensor | None:
        """The epsilon weights (L-1, count) in storage form (encoded and scaled), None without epsilons."""
        return self.recurrence.constants if self.template.constants else None

    def empty_span(self, constants: Tensor | None = None) -> Tensor | None:
        """Paper mode: ``h_0[END]`` (per pattern) when END is reachable by epsilons alone, else None."""
        cap = self.epsilon_cap
        if self.mode != "paper" or not self.epsilons or (cap is not None and cap < self.length - 1):
            return None
        constants = self.recurrence.constants if constants is None else constants  # (L-1, count) storage form
        return self.storage.product(constants, axis=0)

    def forward(
        self, inputs: Tensor, lengths: Tensor, dropout: nn.Module | None = None, index: Tensor | None = None
    ) -> Tensor:
        """Document scores (B, count) in storage form of word vectors ``inputs`` (B, T, E), or, with ``index``
        (B, T), of the vectors ``inputs[index]`` (``inputs`` (U, E): each distinct vector once; see ``table_slots``).
        """
        if index is None:
            main, loop = self.transitions(inputs, dropout)
            return self.score(self.slots(main, loop), lengths)
        return self.score(self.table_slots(inputs, index, dropout), lengths)

    def table_slots(self, table: Tensor, index: Tensor, dropout: nn.Module | None = None) -> Tensor:
        """The template's slots (B, T, S, count) of the vectors ``table[index]``: the same values as
        ``slots(*transitions(table[index], dropout))``, with the transitions of each distinct vector in ``table``
        (U, E) encoded once and then gathered (a document's words repeat, its boundary vectors too).

        Caution: an active ``dropout`` (training, p > 0) acts per position (the authors drop each transition score
        of each step), so then the vectors are gathered first and encoded per position.
        """
        if _drops(dropout):
            main, loop = self.transitions(table[index], dropout)
            return self.slots(main, loop)
        main, loop = self.transitions(table[None])
        rows = self.slots(main, loop)[0]  # (U, S, count)
        flat = rows.reshape(rows.shape[0], rows.shape[1] * rows.shape[2])  # (U, S * count); U = 0: empty batch
        return nn.functional.embedding(index, flat).view(*index.shape, *rows.shape[1:])

    def score(self, slots: Tensor, lengths: Tensor, *, constants: Tensor | None = None, floor: bool = True) -> Tensor:
        """Document scores (B, count) in storage form from the template's slots (B, T, S, count) (eq. 8).

        ``constants`` replaces the epsilon weights (L-1, count) in storage form; ``floor=False`` drops reference
        mode's -100 stand-in for zero (initial states and the score's floor), so only real paths count.
        """
        floored = floor and self.floored
        h0 = slots.new_full((slots.shape[0], self.length, self.count), REFERENCE_ZERO) if floored else None
        if constants is None:
            scores, _ = self.recurrence(slots, lengths, h0)
        else:
            scores, _ = self.run(slots, lengths, restart=True, output="sum", constants=constants, h0=h0)
        return self.finish(scores, lengths, slots.shape[1], constants=constants, floored=floored)

    def finish(
        self, scores: Tensor, lengths: Tensor, steps: int, *, constants: Tensor | None = None, floored: bool = False
    ) -> Tensor:
        """The document scores (B, count) from the recurrence's ⊕ over steps ``scores`` (B, count) of documents
        padded to ``steps``: the empty span's share (paper mode; ``constants`` as in ``score``) and, if ``floored``
        (the recurrence started from -100), reference mode's floor."""
        extra = self.empty_span(constants)
        if extra is not None and steps:
            # h_0[END] is part of every h_t, so it is ⊕-added once per step (n times in the real semiring)
            valid = torch.arange(steps, device=lengths.device)[None, :] < lengths[:, None]
            terms = torch.where(valid[..., None], extra.to(scores.dtype), self.storage.zeros((), like=scores))
            scores = self.storage.plus(scores, self.storage.sum(terms, axis=1))
        if floored:
            scores = scores.clamp_min(REFERENCE_ZERO)
        return scores

    # -- the same template, run for interpretation ----------------------------------------
    def run(
        self,
        slots: Tensor,
        lengths: Tensor,
        *,
        restart: bool,
        output: OutputMode,
        semiring: Semiring | None = None,
        constants: Tensor | None = None,
        h0: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """This group's template compiled with other options (torch backend), as ``CompiledRecurrence.forward``.

        ``semiring`` (default: the layer's) runs it in another semiring (a real pattern's Viterbi semiring): slots
        and the layer's epsilon constants are mapped into its storage form through the elements. ``constants``
        (storage form of the semiring run) replaces the epsilon weights.
        """
        target = self.algebra if semiring is None else semiring
        key = (restart, output, target)
        module = self._variants.get(key)
        if module is None:
            module = compile(
                self.template, target, self.count, "torch", restart=restart, output=output, epsilon_cap=self._cap
            )
            self._variants[key] = module
        if semiring is not None:
            slots = target.to_storage(self.algebra.from_storage(slots))
        if constants is None:
            constants = self.recurrence.constants
            if semiring is not None:
                constants = target.to_storage(self.algebra.from_storage(constants))
        outputs: tuple[Tensor, Tensor] = torch.func.functional_call(
            module, {"constants": constants.to(slots.dtype)}, (slots, lengths, h0)
        )
        return outputs

    def end_scores(self, slots: Tensor, lengths: Tensor) -> Tensor:
        """``⊕`` over the spans ending at each step (B, T, count), storage form, zero past each length.

        Spans start anywhere (the restart of eq. 7b); the empty span (paper mode, END reachable by epsilons
        alone) counts at every step. ``⊕_t`` of these is ``score(..., floor=False)``.
        """
        steps, _ = self.run(slots, lengths, restart=True, output="steps")
        extra = self.empty_span()
        if extra is not None:
            valid = torch.arange(slots.shape[1], device=lengths.device)[None, :, None] < lengths[:, None, None]
            steps = torch.where(valid, self.storage.plus(steps, extra.to(steps.dtype)), steps)
        return steps

    def best_starts(self, slots: Tensor, lengths: Tensor, ends: Tensor) -> Tensor:
        """The first step (B, count) of the best span ending at step ``ends[b, c]`` (``ends + 1``: the empty span).

        The gradient of the Viterbi score w.r.t. the slots marks the arcs of the best path (torch-struct's
        argmax); its first marked step is the span's start. Ties prefer a longer span.

        Caution: meaningful in the selecting semirings (``algebra.best``) and where the score is not zero.
        """
        with torch.enable_grad():
            leaf = slots.detach().requires_grad_(True)
            picked = self.end_scores(leaf, lengths).gather(1, ends[:, None, :])
            (grad,) = torch.autograd.grad(picked.sum(), leaf)
        used = ((grad != 0) & ~grad.isnan()).any(2)  # (B, T, count)
        steps = torch.arange(slots.shape[1], device=slots.device)[None, :, None]
        first = torch.where(used, steps, slots.shape[1]).amin(1)
        return torch.where(first <= ends, first, ends + 1)

    def span_totals(self, slots: Tensor, lengths: Tensor, chunk: int = 1 << 22) -> Tensor:
        """``totals[b, s, e, c]``: ``⊕`` over the paths of pattern c deriving steps s..e of row b (a whole span),
        storage form, zero where e < s or e >= length (B, T, T, count).

        One run of the template without restart per start (O(T²) steps), several starts stacked along the batch
        (at most about ``chunk`` slot values per run).
        """
        batch, steps = slots.shape[:2]
        totals = self.storage.zeros((batch, steps, steps, self.count), like=slots)
        per_start = max(1, slots[:1].numel() * batch)
        group = max(1, chunk // per_start)
        offsets = torch.arange(steps, device=slots.device)
        for first in range(0, steps, group):
            starts = range(first, min(steps, first + group))
            shifted = torch.cat([slots[:, (offsets + s).clamp(max=steps - 1)] for s in starts])
            ahead = torch.cat([(lengths - s).clamp_min(0) for s in starts])
            runs = self.run(shifted, ahead, restart=False, output="steps")[0].view(len(starts), batch, steps, -1)
            for k, s in enumerate(starts):
                totals[:, s, s:] = runs[k, :, : steps - s]
        return totals

    def best_paths(
        self, slots: Tensor, lengths: Tensor, columns: Sequence[int]
    ) -> list[tuple[Tensor, Tensor, list[PathStep]] | None]:
        """Row n's best path of pattern ``columns[n]`` over its whole span ``slots[n, :lengths[n]]`` (N, T, S, count).

        Returns per row (best path's weight, span total, steps), weights in storage form, or None when no path
        derives the span. The path is the gradient of the Viterbi score (in ``algebra.viterbi``: the layer's own
        semiring when it selects, max-times for real) w.r.t. the slots: one marked slot per step names the move;
        the epsilons between moves follow from the chain's states (epsilons go i -> i+1).
        """
        zero = self.storage.zero
        eps = self.epsilon_constants()
        results: list[tuple[Tensor, Tensor, list[PathStep]] | None] = [None] * len(columns)
        rows = [n for n in range(len(columns)) if int(lengths[n]) > 0]
        empty = self.empty_span()
        for n, column in enumerate(columns):
            if int(lengths[n]) == 0 and empty is not None and empty[column] != zero:
                steps = self._epsilons(0, self.length - 1, column, eps)
                results[n] = (empty[column], empty[column], steps)
        if not rows:
            return results
        index = torch.tensor(rows, device=slots.device)
        spans, spans_lengths = slots.index_select(0, index), lengths.index_select(0, index)
        cols = torch.tensor([columns[n] for n in rows], device=slots.device)
        last = (spans_lengths - 1)[:, None, None].expand(-1, 1, self.count)
        viterbi = None if self.algebra.idempotent else self.algebra.viterbi
        with torch.enable_grad():
            leaf = spans.detach().requires_grad_(True)
            best = self.run(leaf, spans_lengths, restart=False, output="steps", semiring=viterbi)[0].gather(1, last)
            picked = best[:, 0].gather(1, cols[:, None])
            (grad,) = torch.autograd.grad(picked.sum(), leaf)
        grad = grad.nan_to_num(0.0)
        if viterbi is None:  # one path is the span's total
            totals = best[:, 0].detach()
        else:
            totals = self.run(spans, spans_lengths, restart=False, output="steps")[0].gather(1, last)[:, 0]
        for k, n in enumerate(rows):
            column = columns[n]
            total = totals[k, column]
            if total == zero:
                continue
            state, weight, steps = 0, self.storage.one, []
            for t in range(int(spans_lengths[k])):
                slot = int(grad[k, t, :, column].abs().argmax())
                kind, source = self.slot_moves[slot]
                steps += self._epsilons(state, source, column, eps)
                value = spans[k, t, slot, column]
                if kind == "mu":
                    steps.append(("main", source, source + 1, t, value))
                    state = source + 1
                else:
                    steps.append(("self-loop", source, source, t, value))
                    state = source
            steps += self._epsilons(state, self.length - 1, column, eps)
            for step in steps:
                weight = self.storage.times(weight, step[4])
            results[n] = (torch.as_tensor(weight, dtype=total.dtype), total, steps)
        return results

    def _epsilons(self, source: int, target: int, column: int, eps: Tensor | None) -> list[PathStep]:
        """The epsilon steps source -> source+1 -> ... -> target of pattern ``column``."""
        if target > source and eps is None:  # pragma: no cover - a path without epsilons moves by tokens only
            raise SoPaError(f"no epsilon leads from state {source} to {target}")
        return [("epsilon", i, i + 1, None, eps[i, column]) for i in range(source, target)]  # type: ignore[index]


def _slot_kind(name: str) -> tuple[str, int]:
    match = re.fullmatch(r"(mu|phi)(\d+)", name)
    if match is None:  # pragma: no cover - both SoPa templates name their slots this way
        raise SoPaError(f"unexpected SoPa slot name {name!r}")
    return match.group(1), int(match.group(2))


def _eps_scale(scale: float | None, semiring: Semiring, encoder: str) -> float | None:
    return None if scale is None else _encoded_float(scale, semiring, encoder)


def _encoded_float(value: float, semiring: Semiring, encoder: str) -> float:
    return float(encode_to_storage(torch.tensor(value, dtype=torch.float64), semiring, encoder))


def _check_index(table: Tensor, index: Tensor) -> None:
    if table.dim() != 2:
        raise SoPaError(f"with an index, inputs must be a (U, E) table of vectors, got shape {tuple(table.shape)}")
    if index.dim() != 2 or index.dtype not in (torch.int32, torch.int64):
        raise SoPaError(f"index must be an integer (B, T) tensor, got {index.dtype} of shape {tuple(index.shape)}")
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= table.shape[0]):
        raise SoPaError(f"index holds rows {int(index.min())}..{int(index.max())}; the table has {table.shape[0]}")


def _drops(dropout: nn.Module | None) -> bool:
    """Whether ``dropout`` is active (training, p > 0): it then acts per position."""
    return dropout is not None and dropout.training and getattr(dropout, "p", 1.0) > 0


def _unit_rows(*shape: int) -> Tensor:
    rows = torch.randn(*shape)
    return rows / rows.norm(dim=-1, keepdim=True)


# --------------------------------------------------------------------------------------------
# The pattern bank and the classifier
# --------------------------------------------------------------------------------------------
class SoftPatterns(nn.Module):
    """A bank of soft patterns: word vectors (B, T, E) and lengths -> document scores (B, P) in storage form.

    Patterns are ordered by length (as ``parse_pattern_spec`` sorts them).

    ``shared_self_loops`` (``"per-state"``, ``"global"``; the authors' ``--shared_sl`` 1, 2) ties each self-loop to
    the main path's scores with a learned scale (module docstring).

    Raises:
        SoPaError: an unknown semiring (or one SoPa cannot run in) or encoder, the identity encoder in a semiring
            without negative elements (max-times), a reference mode that does not use the authors' encoder, or
            shared self-loops that are not one of ``SHARED_SELF_LOOPS``, without self-loops or with a fixed
            ``self_loop_scale``.
    """

    def __init__(
        self,
        input_dim: int,
        patterns: str | Mapping[int, int] | Sequence[tuple[int, int]] = "2-10_3-10_4-10_5-10_6-10_7-10",
        *,
        semiring: str | Semiring = "max-times",
        encoder: Encoder | None = None,
        mode: Mode = "paper",
        self_loops: bool = True,
        epsilons: bool = True,
        epsilon_cap: int | None = 1,
        bias_scale: float | None = None,
        self_loop_scale: float | None = None,
        epsilon_scale: float | None = None,
        shared_self_loops: SharedSelfLoops | None = None,
        backend: str = "auto",
    ):
        super().__init__()
        if mode not in ("paper", "reference"):
            raise SoPaError(f"SoPa mode must be 'paper' or 'reference', not {mode!r}")
        algebra = sopa_semiring(semiring)
        authors = reference_encoder(algebra)
        encoder = encoder or ("sigmoid" if mode == "paper" else authors)
        _check_encoder(algebra, encoder)
        if mode == "reference":
            if encoder != authors:
                raise SoPaError(
                    f"reference mode reproduces the authors' code, whose {algebra.name} semiring uses the "
                    f"{authors} encoder, not {encoder}"
                )
            if epsilon_cap != 1:
                raise SoPaError("reference mode takes at most one epsilon per token; epsilon_cap must be 1")
        elif self_loop_scale is not None or epsilon_scale is not None:
            raise SoPaError("self_loop_scale and epsilon_scale belong to reference mode (the paper has none)")
        if shared_self_loops is not None:
            if shared_self_loops not in SHARED_SELF_LOOPS:
                raise SoPaError(
                    f"shared_self_loops must be None or one of {SHARED_SELF_LOOPS}, not {shared_self_loops!r}"
                )
            if not self_loops:
                raise SoPaError(f"shared_self_loops={shared_self_loops!r} needs self_loops=True")
            if self_loop_scale is not None:
                raise SoPaError(
                    f"shared_self_loops={shared_self_loops!r} learns the self-loop scale; self_loop_scale must be "
                    f"None, not {self_loop_scale!r}"
                )
        self.spec = parse_pattern_spec(patterns)
        self.shared_self_loops = shared_self_loops
        shared = SelfLoopShare(1) if shared_self_loops == "global" else None
        self.algebra = algebra
        self.semiring, self.encoder, self.mode = algebra.name, encoder, mode
        #: the arcs every pattern has (the groups' settings, for descriptions)
        self.self_loops, self.epsilons, self.epsilon_cap = self_loops, epsilons, epsilon_cap
        self.input_dim = input_dim
        self.groups = nn.ModuleList(
            PatternGroup(
                input_dim,
                length,
                count,
                semiring=algebra,
                encoder=encoder,
                mode=mode,
                self_loops=self_loops,
                epsilons=epsilons,
                epsilon_cap=epsilon_cap,
                bias_scale=(0.1 if mode == "reference" else 1.0) if bias_scale is None else bias_scale,
                self_loop_scale=self_loop_scale,
                epsilon_scale=epsilon_scale,
                backend=backend,
                loop_share=(shared or SelfLoopShare(count, length)) if shared_self_loops is not None else None,
            )
            for length, count in self.spec.items()
        )
        #: run the whole bank as one generated kernel call (``kleene.compile.CompiledBank``) where every group runs
        #: on the cpp backend; False: one call per group (the same scores and gradients)
        self.one_call = True
        #: made here, not at the first call: ``torch.compile`` cannot trace registering its kernel's custom ops, and a
        #: bank made later would change what a compiled graph was guarded on (a recompile). Its kernel is built when
        #: it first runs.
        self._bank = self._make_bank()
        self._prebuilt: set[tuple[torch.dtype, bool]] = set()  # (dtype, backward) the groups' kernels are built for

    def _prebuild(self, groups: Sequence[PatternGroup], like: Tensor) -> None:
        """Before ``groups`` first run their own kernels on ``like`` (the bank's kernel is off or cannot run), build
        the cpp ones concurrently for ``like``'s dtype (``kleene.compile.bank.prebuild``: forward, and backward
        under gradients), once per dtype and direction. The bank's kernel alone is built when it runs (and only
        the entry points it calls): constructing the model builds nothing."""
        need = (kernel_dtype(like.dtype), torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters()))
        if len(groups) < 2 or need in self._prebuilt or torch.compiler.is_compiling():
            return
        if like.device.type != "cpu" or need[0] not in DTYPE_SUFFIXES:  # the dtypes the cpp kernels are written for
            return
        plans = [group.recurrence.plan for group in groups if group.recurrence.backend == "cpp"]
        self._prebuilt.add(need)
        if len(plans) > 1:
            prebuild(plans, *need)

    @property
    def num_patterns(self) -> int:
        return sum(self.spec.values())

    def forward(
        self,
        inputs: Tensor,
        lengths: Tensor,
        transition_dropout: nn.Module | None = None,
        index: Tensor | None = None,
    ) -> Tensor:
        """Document scores (B, P) in storage form of word vectors ``inputs`` (B, T, E), or with ``index`` (B, T) of
        ``inputs[index]`` (``inputs`` (U, E) holding each distinct vector once: encoded once per vector).

        Raises:
            SoPaError: an ``index`` that is not an integer (B, T) tensor of rows of ``inputs``.
        """
        if index is not None:
            _check_index(inputs, index)
        bank = self._one_call(inputs)
        if bank is None:
            self._prebuild(self._groups(), inputs)
            return torch.cat([group(inputs, lengths, transition_dropout, index) for group in self.groups], 1)
        groups = self._groups()
        if index is not None and not _drops(transition_dropout):
            # the transitions of each distinct vector once, as a table of bank rows (U, R), gathered per position
            table = bank.pad_lanes([group.slots(*group.transitions(inputs[None]))[0] for group in groups])
            slots = nn.functional.embedding(index, table)
        else:
            vectors = inputs if index is None else inputs[index]
            slots = bank.pad_lanes([group.slots(*group.transitions(vectors, transition_dropout)) for group in groups])
        return self.bank_scores(slots, lengths)

    def _groups(self) -> list[PatternGroup]:
        return [group for group in self.groups if isinstance(group, PatternGroup)]

    def _make_bank(self) -> CompiledBank | None:
        """The one-call kernel's bank of the groups when they all run on one bank backend (cpp, triton, cuda),
        else None."""
        recurrences = [group.recurrence for group in self._groups()]
        return None if bank_backend(recurrences) is None else CompiledBank(recurrences)

    def runs_one_call(self, like: Tensor) -> bool:
        """Whether a forward on inputs like ``like`` (its device and dtype) runs the whole bank as one kernel call
        (see ``one_call``), rather than a kernel per pattern length."""
        return self._one_call(like) is not None

    def _one_call(self, like: Tensor) -> CompiledBank | None:
        """The bank's one-call kernel (built on first use) when ``one_call`` is on and every group runs a generated
        kernel of one backend (cpp, triton, cuda) that runs on ``like``'s device (``bank_runs_on``) and dtype, else
        None (then each group runs its own kernel)."""
        bank = self._bank
        if bank is None or not self.one_call or not like.dtype.is_floating_point:
            return None
        if onnx_exporting():  # the bank's kernel has no ONNX form; each group's recurrence has one
            return None
        return bank if bank_runs_on(bank.backend, like.device) else None

    def bank_scores(self, slots: Tensor, lengths: Tensor, *, floor: bool = True) -> Tensor:
        """Document scores (B, P) in storage form from the bank's slot rows (B, T, R) (``one_call_layout``: each
        group's ``PatternGroup.slots`` with its lanes padded, ``CompiledBank.pad_lanes``), in one kernel call; the
        same values as ``cat([group.score(slots_g, lengths) ...])``.

        Raises:
            SoPaError: the bank's kernel is off or cannot run (``one_call`` False, groups on the torch backend, or
                slots on a device their backend does not run on).
        """
        bank = self._one_call(slots)
        if bank is None:
            raise SoPaError(
                "bank_scores runs the one-call kernel: it needs one_call=True and groups on one generated-kernel "
                "backend (cpp, triton, cuda) that runs on the slots' device"
            )
        groups = self._groups()
        floored = floor and groups[0].floored
        h0 = slots.new_full((slots.shape[0], bank.layout.state_offsets[-1]), REFERENCE_ZERO) if floored else None
        out, _ = bank([group.recurrence for group in groups], slots, lengths, h0)
        scores = bank.real_lanes(out)
        steps = slots.shape[1]
        return torch.cat([g.finish(s, lengths, steps, floored=floored) for g, s in zip(groups, scores)], 1)

    def one_call_layout(self) -> CompiledBank:
        """The one-call kernel's bank (its row layout, ``pad_lanes``) for the device of the bank's parameters,
        building it if needed.

        Raises:
            SoPaError: the bank's kernel is off or cannot run (see ``bank_scores``).
        """
        bank = self._one_call(torch.empty(0, device=next(self.parameters()).device))
        if bank is None:
            raise SoPaError(
                "the one-call kernel needs one_call=True and groups on one generated-kernel backend (cpp, triton, "
                "cuda) that runs on the parameters' device"
            )
        return bank


class MLP(nn.Module):
    """``num_layers`` linear layers with ReLUs between them (parameter names as the authors' ``mlp.py``)."""

    def __init__(self, input_dim: int, hidden_dim: int, num_layers: int, num_classes: int):
        super().__init__()
        if num_layers < 1:
            raise SoPaError(f"the MLP needs at least one layer, got {num_layers}")
        dims = [input_dim] + [hidden_dim] * (num_layers - 1) + [num_classes]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))

    def forward(self, x: Tensor) -> Tensor:
        x = self.layers[0](x)
        for layer in self.layers[1:]:
            x = layer(torch.relu(x))
        return x


class SoPaClassifier(nn.Module):
    """Embedding -> boundary padding -> ``SoftPatterns`` -> MLP (SoPa §3.3), following the trainer protocol.

    Each document is padded with ``max_length - 1`` START vectors before and END vectors after its tokens
    (as the authors' ``read_docs`` does), so every pattern can match; the boundary vectors are fixed random
    unit vectors (buffers ``start_vector``/``end_vector``). Defaults (patterns, dropout 0.2, trainable embeddings,
    MLP 100) are the SST-2 settings of RESULTS.md; ``kleene.nn.original.from_soft_patterns`` passes the authors' values
    explicitly.
    ``dropout`` acts on the pattern scores before the MLP (paper) or on the transition scores (reference, as the
    authors do); ``word_dropout`` replaces tokens by ``<unk>`` (id ``unk_id``) during training.
    """

    task = "classification"
    start_vector: Tensor
    end_vector: Tensor

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        embedding_dim: int = 50,
        patterns: str | Mapping[int, int] | Sequence[tuple[int, int]] = DEFAULT_PATTERNS,
        semiring: str | Semiring = "max-times",
        encoder: Encoder | None = None,
        mode: Mode = "paper",
        self_loops: bool = True,
        epsilons: bool = True,
        epsilon_cap: int | None = 1,
        bias_scale: float | None = None,
        self_loop_scale: float | None = None,
        epsilon_scale: float | None = None,
        shared_self_loops: SharedSelfLoops | None = None,
        mlp_hidden: int = 100,
        mlp_layers: int = 2,
        dropout: float = 0.2,
        word_dropout: float = 0.0,
        unk_id: int = 1,
        freeze_embeddings: bool = False,
        boundary_padding: bool = True,
        backend: str = "auto",
        seed: int = 0,
    ):
        super().__init__()
        self.embedding = word_embedding(vocab_size, embedding_dim, freeze_embeddings)
        self.patterns = SoftPatterns(
            embedding_dim,
            patterns,
            semiring=semiring,
            encoder=encoder,
            mode=mode,
            self_loops=self_loops,
            epsilons=epsilons,
            epsilon_cap=epsilon_cap,
            bias_scale=bias_scale,
            self_loop_scale=self_loop_scale,
            epsilon_scale=epsilon_scale,
            shared_self_loops=shared_self_loops,
            backend=backend,
        )
        self.mlp = MLP(self.patterns.num_patterns, mlp_hidden, mlp_layers, num_classes)
        self.dropout = nn.Dropout(dropout)
        self.word_dropout, self.unk_id = word_dropout, unk_id
        self.boundary = max(self.patterns.spec) - 1 if boundary_padding else 0
        generator = torch.Generator().manual_seed(seed)
        start_end = torch.randn(2, embedding_dim, generator=generator)
        start_end = start_end / start_end.norm(dim=1, keepdim=True)
        self.register_buffer("start_vector", start_end[0].clone())
        self.register_buffer("end_vector", start_end[1].clone())

    def _dropped_words(self, tokens: Tensor) -> Tensor:
        """Word dropout: tokens replaced by ``unk_id`` with probability ``word_dropout`` while training."""
        if self.training and self.word_dropout > 0:
            drop = torch.rand(tokens.shape, device=tokens.device) < self.word_dropout
            tokens = torch.where(drop & (tokens != 0), torch.full_like(tokens, self.unk_id), tokens)
        return tokens

    def embed(self, tokens: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Word vectors with boundary padding (B, T + 2p, E) and the padded lengths."""
        tokens = self._dropped_words(tokens)
        vectors = self.embedding(tokens)
        p = self.boundary
        if p == 0:
            return vectors, lengths
        start, end = self._boundaries(lengths, vectors.shape[1])
        padded = nn.functional.pad(vectors, (0, 0, p, p))
        padded = torch.where(start[:, :, None], self.start_vector, padded)
        padded = torch.where(end[:, :, None], self.end_vector, padded)
        return padded, lengths + 2 * p

    def _boundaries(self, lengths: Tensor, steps: int) -> tuple[Tensor, Tensor]:
        """Where a document of ``lengths`` padded to ``steps`` + 2p positions reads START (its first p positions)
        and END (the p positions after its words): two (B, steps + 2p) masks."""
        p = self.boundary
        position = torch.arange(steps + 2 * p, device=lengths.device)[None, :]
        ends = lengths[:, None] + p
        return position < p, (position >= ends) & (position < ends + p)

    def distinct_vectors(self, tokens: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``embed`` as (table, index, padded lengths): ``table[index]`` (B, T + 2p, E) are the boundary-padded word
        vectors of ``embed`` at every position a document reads, ``table`` (U, E) holds each distinct vector once
        (the words of the batch, START and END).

        Caution: positions past a padded length hold the padding row's vector, where ``embed`` may hold zeros; no
        score reads them.
        """
        tokens = self._dropped_words(tokens)
        p, words = self.boundary, self.embedding.num_embeddings
        batch, steps = tokens.shape
        ids = nn.functional.pad(tokens, (p, p))
        if p:
            start, end = self._boundaries(lengths, steps)
            ids = torch.where(start, words, ids)  # START: id V, END: id V + 1
            ids = torch.where(end, words + 1, ids)
        distinct, index = torch.unique(ids, return_inverse=True)
        table = self.embedding(distinct.clamp(max=words - 1))
        if p:
            table = torch.where((distinct == words)[:, None], self.start_vector.to(table.dtype), table)
            table = torch.where((distinct == words + 1)[:, None], self.end_vector.to(table.dtype), table)
        return table, index.view(batch, steps + 2 * p), lengths + 2 * p

    def pattern_scores(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """Document scores (B, P) as numbers (max-times: probabilities).

        The transitions of each distinct word of the batch are encoded once (``distinct_vectors``,
        ``SoftPatterns.forward`` with an index); the scores are those of ``patterns(*embed(tokens, lengths))``.

        Raises:
            LayerError: tokens or lengths that do not fit (see ``kleene.nn.embedding.check_token_batch``).
        """
        tokens, lengths = check_token_batch(self.embedding, tokens, lengths, type(self).__name__)
        transition_dropout = self.dropout if self.patterns.mode == "reference" else None
        if torch.compiler.is_compiling():  # torch.unique: a size that depends on the data; a trace encodes per position
            vectors, padded_lengths = self.embed(tokens, lengths)
            scores = self.patterns(vectors, padded_lengths, transition_dropout)
        else:
            table, index, padded_lengths = self.distinct_vectors(tokens, lengths)
            scores = self.patterns(table, padded_lengths, transition_dropout, index)
        return self.patterns.algebra.from_storage(scores)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        scores = self.pattern_scores(tokens, lengths)
        if self.patterns.mode == "paper":
            scores = self.dropout(scores)
        return self.mlp(scores)


def raw_constants(recurrence: nn.Module) -> Tensor:
    """The unencoded parameter behind a parametrized recurrence's ``constants``."""
    raw = recurrence.parametrizations["constants"].original  # type: ignore[union-attr, index]
    assert isinstance(raw, Tensor)
    return raw


def _build_sopa(vocab_size: int, num_classes: int, **kwargs: Any) -> SoPaClassifier:
    return SoPaClassifier(vocab_size, num_classes, **kwargs)


register_model("sopa", _build_sopa)
