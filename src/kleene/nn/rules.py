"""Rules as trainable layers, and trained layers as rules again (issue 15; FA-RNN, Jiang et al. 2020).

``AutomatonLayer`` turns WFSAs over a vocabulary into one compiled recurrence whose transitions the network scores
from word embeddings. Parameterisation (all values in the semiring's storage form, ``⊗``/``⊕`` of the storage)::

    slot[a](x) = w[a] ⊗ F(u[a] · e(x))      if the token x matches arc a's label (Sym, OneOf, NoneOf, ANY)
               = zero                      otherwise (the label is an exact mask)

``w[a]`` is a parameter initialised to the arc's weight, ``u[a]`` a parameter (E,) initialised to zero and ``F``
maps a real residual r to the element standing for the factor exp(r) (r itself in log-weight storage, exp(r) in
the real semiring), so ``F(0)`` is the semiring's one and, before training, every slot holds the automaton's weight
or zero: the layer computes exactly the automaton's scores. Epsilon, initial and final weights are learned
constants initialised to the automaton's weights (absent ones stay zero through a mask). With ``leak=ε`` the words
outside a label are read too, with ``w[a] ⊗ F(u[a] · e(x) + λ[a])``, ``λ[a]`` initialised to log ε: the untrained
layer is then the automaton up to ε, and training can let new words in (docs/rules.md).

Several automata run as one recurrence: their states are aligned by index (state 0 of each is state 0 of the
template) and the template holds the union of their (source, target) pairs; each automaton is one dimension d of
the compiled module and fills only its own arcs (parallel arcs of one pair are ⊕-added in the slot). So a rule set
compiles one kernel whatever its rules. The document score of an automaton is the semiring sum over all non-empty
spans (SoPa's search score, ``restart=True, output="sum"``; ``WFSA.all_spans`` computes the same in pure Python).

``RegexClassifier.from_rules`` builds one automaton per regular expression (``kleene.automata.regex``, over words,
max-times), ⊕-aggregates the scores of each label's rules and reads them with a linear layer initialised so that
the untrained model predicts what ``RulesPredictor`` (the rules alone) predicts: **the first label in priority
order (the rule set's ``priority``, else its order) with a matching rule; the default label when no rule
matches**. A rule matches some non-empty span (the default) or, declared ``"match": "sentence"``, the whole
sentence: those run in a second layer compiled with ``anchored=True`` (FA-RNN-style whole-sentence rules).
``kleene.extract.read_back`` turns the trained automata into hard automata and regular expressions (``to_regex``;
an unchanged rule as written), at the one threshold ``kleene.extract.READ_BACK_THRESHOLD``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sympy
import torch
from torch import nn
from torch.nn.utils import parametrize

from kleene.automata.labels import ANY, EPSILON, Label
from kleene.automata.regexp import regex
from kleene.automata.semiring import Semiring
from kleene.automata.weights import ALPHA
from kleene.automata.wfsa import WFSA
from kleene.compile import CompiledRecurrence, Template, compile
from kleene.data.checks import check_lengths, check_real, check_tokens
from kleene.data.vocab import PAD, UNK, Vocabulary
from kleene.errors import KleeneError, RuleError
from kleene.nn.embedding import check_token_batch, word_embedding
from kleene.nn.registry import register_model

__all__ = [
    "MATCH_MODES",
    "AutomatonLayer",
    "RegexClassifier",
    "RuleError",
    "RuleSet",
    "RulesPredictor",
    "load_rules",
    "parse_rules",
]

Tensor = torch.Tensor

#: How a rule matches a sentence: some non-empty span of it ("span", the default) or all of it ("sentence").
MATCH_MODES = ("span", "sentence")


def _check_residual_semiring(semiring: Semiring) -> None:
    """Raises RuleError: a semiring that carries no factor exp(r) (``Semiring.carries_factors``)."""
    if not semiring.carries_factors:
        raise RuleError(
            f"semiring {semiring.name!r}: its storage ({semiring.storage.name}) has no multiplicative factor exp(r) "
            "with exp(0) = one, which the learned residual needs (use real, log, max-plus or max-times)"
        )


def _vocab_tokens(vocab: Vocabulary | Sequence[str]) -> list[str]:
    tokens = vocab.tokens if isinstance(vocab, Vocabulary) else list(vocab)
    if len(tokens) < 2 or tokens[:2] != [PAD, UNK] or not all(isinstance(t, str) for t in tokens):
        raise RuleError(
            f"vocab must be a kleene Vocabulary or a list of token strings starting with {PAD!r}, {UNK!r}; "
            f"got {tokens[:3]!r}..."
        )
    return tokens


def label_mask(label: Label, tokens: Sequence[str]) -> Tensor:
    """Which vocabulary ids a label accepts (padding never; ``<unk>`` only through predicates: Σ, [^...])."""
    mask = torch.tensor([label.matches(t) for t in tokens], dtype=torch.bool)
    mask[0] = False
    return mask


# --------------------------------------------------------------------------------------------
# The layer
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _ArcRef:
    automaton: int
    index: int  # arc index in the automaton
    pair: int  # move index in the template


class _MaskedConstants(nn.Module):
    """Parametrization: constants absent from an automaton stay the storage zero."""

    present: Tensor

    def __init__(self, present: Tensor, zero: float):
        super().__init__()
        self.register_buffer("present", present)
        self.zero = zero

    def forward(self, raw: Tensor) -> Tensor:
        return torch.where(self.present, raw, torch.full_like(raw, self.zero))


class AutomatonLayer(nn.Module):
    """WFSAs over a vocabulary as one trainable, compiled recurrence (parameterisation in the module docstring).

    ``forward(tokens, vectors, lengths)`` -> document scores (B, D) in storage form, D = ``len(automata)``: the
    semiring sum of each automaton's score over all non-empty spans of each sequence, or (``anchored``) the score of
    the whole sequence.

    Args:
        automata: WFSAs in one semiring with numeric weights; consuming labels are symbols or predicates over the
            vocabulary's tokens; epsilon arcs are allowed.
        vocab: the token of each id (``Vocabulary`` or list starting with ``<pad>``, ``<unk>``).
        embedding_dim: the size of the word vectors the residuals read.
        random_init: ignore the labels (every arc reads every word) and start from random arc weights and
            residuals: the same network without the automata's knowledge.
        leak: ``None`` (labels are exact masks) or a probability ε in (0, 0.5): every arc also reads the words outside
            its label, with weight ``w ⊗ F(u·e(x) + λ)``, ``λ`` a per-arc parameter initialised to log ε. The
            untrained layer is then the automaton up to ε (not exactly), but training can let new words in.
        anchored: score whole sequences (``WFSA.score``; compiled without restart, output "last") instead of the sum
            over non-empty spans (``WFSA.all_spans``).

    Caution:
        The slots are dense: (B, T, K, D) values for the K distinct (source, target) pairs of all D automata, most
        of them zero. That is small for a rule set (examples/rules/trec.json: 18 rules, K = 10 pairs, 7 states);
        for hundreds of automata of different shapes, build several layers. States are aligned by index, so
        number them alike (``regex`` does: its start state is 0).

    Raises:
        RuleError: no automata, automata in different semirings, symbolic weights, a semiring without a
            residual factor (min-plus, boolean) or a bad vocabulary.
        CompileError: a semiring the kernels cannot run.
    """

    match: Tensor
    gather: Tensor

    def __init__(
        self,
        automata: Sequence[WFSA],
        vocab: Vocabulary | Sequence[str],
        embedding_dim: int,
        *,
        random_init: bool = False,
        leak: float | None = None,
        anchored: bool = False,
        backend: str = "auto",
        seed: int = 0,
    ):
        super().__init__()
        if not isinstance(anchored, bool):
            raise RuleError(f"anchored must be True or False, got {anchored!r}")
        self.anchored = anchored
        if leak is not None and (isinstance(leak, bool) or not isinstance(leak, (int, float)) or not 0 < leak < 0.5):
            raise RuleError(f"leak must be None or a probability in (0, 0.5), got {leak!r}")
        automata = list(automata)
        if not automata or not all(isinstance(a, WFSA) for a in automata):
            raise RuleError(f"automata must be a non-empty list of WFSAs, got {automata!r:.80}")
        semiring = automata[0].semiring
        for i, a in enumerate(automata):
            if a.semiring != semiring:
                raise RuleError(
                    f"automaton {i} is over the {a.semiring.name} semiring, automaton 0 over {semiring.name}"
                )
            if a.is_symbolic:
                raise RuleError(f"automaton {i} ({a.name}) has symbolic weights; bind them first (ops.bind)")
            if a.num_states == 0:
                raise RuleError(f"automaton {i} ({a.name}) has no states")
        _check_residual_semiring(semiring)
        semiring.kernel_algebra()
        self.algebra, self.storage = semiring, semiring.storage
        self.automata = automata
        self.tokens = _vocab_tokens(vocab)
        self.random_init = random_init
        storage = self.storage
        zero, one = float(storage.zero), float(storage.one)
        num_states = max(a.num_states for a in automata)
        pairs: dict[tuple[int, int], int] = {}
        eps_pairs: dict[tuple[int, int], int] = {}
        arcs: list[_ArcRef] = []
        weights: list[float] = []
        masks: list[Tensor] = []
        eps_values: dict[tuple[int, int], dict[int, float]] = {}
        for d, a in enumerate(automata):
            for i, arc in enumerate(a.arcs):
                w = float(semiring.to_storage(arc.weight if arc.weight is not None else semiring.one))
                if arc.label.consumes:
                    k = pairs.setdefault((arc.src, arc.dst), len(pairs))
                    arcs.append(_ArcRef(d, i, k))
                    weights.append(w)
                    every = torch.ones(len(self.tokens), dtype=torch.bool)
                    masks.append(every if random_init else label_mask(arc.label, self.tokens))
                    masks[-1][0] = False
                else:
                    eps_pairs.setdefault((arc.src, arc.dst), len(eps_pairs))
                    slot = eps_values.setdefault((arc.src, arc.dst), {})
                    slot[d] = float(storage.plus(slot[d], w)) if d in slot else w
        if not pairs:
            raise RuleError("the automata have no consuming arc: they score no non-empty span")
        self.arc_refs = arcs
        initial_states = sorted({q for a in automata for q in a.initial})
        final_states = sorted({q for a in automata for q in a.final})
        # The shared topology as a WFSA with symbolic weights, read by Template.from_wfsa: a slot per (source,
        # target) pair of consuming arcs, a constant per epsilon pair, initial and final state.
        shared = WFSA(semiring, name=f"rules{num_states}x{len(pairs)}")
        for q in range(num_states):
            shared.add_state(f"q{q}")
        slot_names = [f"a{i}_{j}" for (i, j) in pairs]
        for (i, j), name in zip(pairs, slot_names):
            shared.add_arc(i, j, ANY, sympy.Function(name)(ALPHA))
        for i, j in eps_pairs:
            shared.add_arc(i, j, EPSILON, sympy.Symbol(f"eps{i}_{j}"))
        for q in initial_states:
            shared.set_initial(q, sympy.Symbol(f"init{q}"))
        for q in final_states:
            shared.set_final(q, sympy.Symbol(f"final{q}"))
        self.template = Template.from_wfsa(shared, slots=slot_names)
        constants = list(self.template.constants)
        dim = len(automata)
        self.recurrence: CompiledRecurrence = compile(
            self.template, semiring, dim, backend, restart=not anchored, output="last" if anchored else "sum"
        )
        values = torch.full((len(constants), dim), zero)
        for (i, j) in eps_pairs:
            for d, w in eps_values[(i, j)].items():
                values[constants.index(f"eps{i}_{j}"), d] = w
        for kind, states in (("init", initial_states), ("final", final_states)):
            for q in states:
                for d, a in enumerate(automata):
                    table = a.initial if kind == "init" else a.final
                    if q in table:
                        weight = table[q] if table[q] is not None else semiring.one
                        values[constants.index(f"{kind}{q}"), d] = float(semiring.to_storage(weight))
        present = values != zero
        if constants:
            with torch.no_grad():
                self.recurrence.constants.copy_(torch.where(present, values, torch.full_like(values, one)))
            parametrize.register_parametrization(self.recurrence, "constants", _MaskedConstants(present, zero))
        generator = torch.Generator().manual_seed(seed)
        if random_init:
            half = semiring.stored_probability(0.5)
            self.arc_weight = nn.Parameter(torch.full((len(arcs),), half))
            scale = 1 / math.sqrt(embedding_dim)
            self.residual = nn.Parameter(torch.randn(len(arcs), embedding_dim, generator=generator) * scale)
        else:
            self.arc_weight = nn.Parameter(torch.tensor(weights, dtype=torch.float32))
            self.residual = nn.Parameter(torch.zeros(len(arcs), embedding_dim))
        self.register_buffer("match", torch.stack(masks), persistent=False)  # (A, V)
        self.leak = leak
        if leak is not None:
            self.leak_gate = nn.Parameter(torch.full((len(arcs),), math.log(leak)))
        # gather[k, d, p]: the p-th arc of automaton d on template move k, or A (a column of zeros)
        groups: dict[tuple[int, int], list[int]] = {}
        for n, r in enumerate(arcs):
            groups.setdefault((r.pair, r.automaton), []).append(n)
        parallel = max(len(g) for g in groups.values())
        gather = torch.full((len(pairs), dim, parallel), len(arcs), dtype=torch.long)
        for (k, d), members in groups.items():
            gather[k, d, : len(members)] = torch.tensor(members)
        self.register_buffer("gather", gather, persistent=False)
        self.embedding_dim = embedding_dim

    @property
    def num_automata(self) -> int:
        return len(self.automata)

    def arc_scores(self, tokens: Tensor, vectors: Tensor) -> Tensor:
        """Every arc's weight at every step (B, T, A) in storage form: ``w ⊗ F(u·e(x))`` where x matches, else zero
        (with a leak: ``w ⊗ F(u·e(x) + λ)``)."""
        residual = vectors @ self.residual.T.to(vectors.dtype)
        weight = self.arc_weight.to(vectors.dtype)
        value = self.storage.times(weight, self.storage.stored_factor(residual))
        matched = self.match.T[tokens]  # (B, T, A)
        if self.leak is None:
            outside = torch.full_like(value, float(self.storage.zero))
        else:
            leaked = residual + self.leak_gate.to(vectors.dtype)
            outside = self.storage.times(weight, self.storage.stored_factor(leaked))
        return torch.where(matched, value, outside)

    def slots(self, tokens: Tensor, vectors: Tensor) -> Tensor:
        """The compiled recurrence's slots (B, T, K, D)."""
        values = self.arc_scores(tokens, vectors)
        padded = torch.cat([values, torch.full_like(values[..., :1], float(self.storage.zero))], -1)
        gathered = padded[..., self.gather]  # (B, T, K, D, P)
        if gathered.shape[-1] == 1:
            return gathered[..., 0]
        return self.storage.sum(gathered, -1)

    def forward(self, tokens: Tensor, vectors: Tensor, lengths: Tensor) -> Tensor:
        """Document scores (B, D) in storage form (zero for an empty sequence).

        ``tokens`` (B, T) are ids of ``vocab``, ``vectors`` (B, T, E) the embeddings the residuals read (usually of
        those tokens) and ``lengths`` (B,) the sequences' lengths.

        Raises:
            RuleError: tokens that are not a (B, T) integer tensor of ids in the vocabulary, vectors of another
                shape than (B, T, E) or not real floating, lengths that are not one integer in 0..T per sequence.
        """
        tokens = check_tokens(tokens, len(self.tokens), error=RuleError, name="AutomatonLayer: tokens")
        if not isinstance(vectors, Tensor) or not vectors.is_floating_point():
            raise RuleError(f"AutomatonLayer: vectors must be a real floating tensor, got {type(vectors).__name__}")
        if vectors.dim() != 3 or vectors.shape[:2] != tokens.shape or vectors.shape[-1] != self.embedding_dim:
            raise RuleError(
                f"AutomatonLayer: vectors have shape {tuple(vectors.shape)}; expected (B, T) = {tuple(tokens.shape)} "
                f"and E = {self.embedding_dim}"
            )
        lengths = check_lengths(
            lengths, tokens.shape[0], tokens.shape[1], error=RuleError, device=tokens.device,
            name="AutomatonLayer: lengths",
        )
        output, _ = self.recurrence(self.slots(tokens, vectors), lengths)
        return output

    # -- back to hard automata ----------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Rule sets
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RuleSet:
    """Regular expressions per label, the label predicted when no rule matches, which rules match whole sentences
    (``sentence``, one flag per rule in ``flat`` order; empty: none) and the labels' priority (which label wins when
    several match; empty: the order of ``rules``)."""

    rules: tuple[tuple[str, tuple[str, ...]], ...]
    default: str
    sentence: tuple[bool, ...] = ()
    priority: tuple[str, ...] = ()

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self.rules]

    @property
    def ranked(self) -> list[str]:
        """The labels with rules, the winning one first (``priority``, else the order of ``rules``)."""
        return list(self.priority) if self.priority else self.labels

    def flat(self) -> list[tuple[str, str]]:
        """(label, regex) for every rule, in order."""
        return [(label, text) for label, texts in self.rules for text in texts]

    def whole_sentence(self) -> list[bool]:
        """Whether each rule (``flat`` order) matches whole sentences (else any non-empty span)."""
        return list(self.sentence) if self.sentence else [False] * len(self.flat())

    def to_json(self) -> dict[str, Any]:
        """The full form of the rules file (``parse_rules`` reads it back); the keys of features left at their
        defaults are omitted."""
        whole = iter(self.whole_sentence())
        table = {
            label: [{"regex": text, "match": "sentence"} if next(whole) else text for text in texts]
            for label, texts in self.rules
        }
        out: dict[str, Any] = {"default": self.default, "rules": table}
        if self.priority:
            out["priority"] = list(self.priority)
        return out


def _rule_text(item: Any, label: str, n: int, where: str, mode: str) -> tuple[str, bool]:
    """One rule of the file: a regex string (matching as ``mode``) or ``{"regex": ..., "match": ...}``."""
    if isinstance(item, Mapping):
        extra = set(item) - {"regex", "match"}
        if extra or "regex" not in item:
            raise RuleError(
                f"{where}: label {label!r}, rule {n}: a rule object has 'regex' and optionally 'match'; got keys "
                f"{sorted(map(str, item))}"
            )
        mode = _match_mode(item.get("match", mode), f"{where}: label {label!r}, rule {n}")
        item = item["regex"]
    if not isinstance(item, str) or not item.strip():
        raise RuleError(f"{where}: label {label!r}, rule {n}: expected a non-empty regex string, got {item!r:.60}")
    try:
        regex(item, "max-times")
    except KleeneError as error:
        raise RuleError(f"{where}: label {label!r}, rule {n} ({item!r}): {error}") from error
    return item, mode == "sentence"


def _match_mode(value: Any, where: str) -> str:
    if not isinstance(value, str) or value not in MATCH_MODES:
        raise RuleError(f"{where}: 'match' must be one of {list(MATCH_MODES)}, got {value!r:.60}")
    return value


def parse_rules(data: Any, where: str = "rules") -> RuleSet:
    """A ``RuleSet`` from ``{"default": LABEL, "rules": {LABEL: [RULE, ...], ...}}`` (optionally with ``"match"``
    and ``"priority"``) or a bare ``{LABEL: [REGEX, ...]}`` (whose default is its first label); a RULE is a regex
    string or ``{"regex": REGEX, "match": "span" | "sentence"}``; see docs/rules.md. Every regex is parsed.

    Raises:
        RuleError: anything else, naming the label and the rule (and the regex error's column).
    """
    if isinstance(data, RuleSet):
        return data
    if not isinstance(data, Mapping):
        raise RuleError(f"{where}: expected a JSON object {{label: [regex, ...]}}, got {type(data).__name__}")
    if "rules" in data:
        extra = set(data) - {"rules", "default", "match", "priority"}
        if extra:
            raise RuleError(
                f"{where}: unknown keys {sorted(map(str, extra))} (expected 'rules' and optionally 'default', "
                "'match', 'priority')"
            )
        table, default = data["rules"], data.get("default")
        mode, priority = _match_mode(data.get("match", "span"), where), data.get("priority")
    else:
        table, default, mode, priority = data, None, "span", None
    if not isinstance(table, Mapping) or not table:
        raise RuleError(f"{where}: 'rules' must be a non-empty object {{label: [regex, ...]}}, got {table!r:.60}")
    rules: list[tuple[str, tuple[str, ...]]] = []
    sentence: list[bool] = []
    for label, texts in table.items():
        if not isinstance(label, str) or not label:
            raise RuleError(f"{where}: label {label!r} must be a non-empty string")
        if isinstance(texts, (str, Mapping)):
            texts = [texts]
        if not isinstance(texts, Sequence) or not texts:
            raise RuleError(f"{where}: label {label!r}: expected a non-empty list of regular expressions")
        parsed = [_rule_text(item, label, n, where, mode) for n, item in enumerate(texts, start=1)]
        rules.append((label, tuple(text for text, _ in parsed)))
        sentence.extend(whole for _, whole in parsed)
    labels = [label for label, _ in rules]
    if default is None:
        default = labels[0]
    if not isinstance(default, str) or not default:
        raise RuleError(f"{where}: default must be a label string, got {default!r}")
    if priority is not None and (
        not isinstance(priority, Sequence) or isinstance(priority, str)
        or not all(isinstance(label, str) for label in priority) or sorted(priority) != sorted(labels)
    ):  # fmt: skip
        raise RuleError(f"{where}: 'priority' must list each label with rules once, {labels}; got {priority!r:.80}")
    return RuleSet(tuple(rules), default, tuple(sentence) if any(sentence) else (), tuple(priority or ()))


#: How deep a rules file's JSON may nest (a rule set needs 4 levels: object, rules, label list, rule object).
MAX_RULES_DEPTH = 64


def _json_depth_ok(text: str, limit: int) -> bool:
    """Whether the brackets of JSON ``text`` (outside strings) nest at most ``limit`` deep, checked without parsing
    (the parser would recurse as deep as the text)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return False
        elif char in "]}":
            depth -= 1
    return True


def load_rules(path: str | Path) -> RuleSet:
    """Read a rules file (UTF-8 JSON, docs/rules.md).

    Raises:
        RuleError: a missing file, text that is not UTF-8, JSON nested deeper than ``MAX_RULES_DEPTH``, malformed
            JSON (naming its line and column) or a malformed rule set.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise RuleError(f"rules file {str(path)!r}: {error.strerror or error}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RuleError(f"{path}: not UTF-8 text (byte {error.start}: {raw[error.start:error.start + 1]!r})") from None
    if not _json_depth_ok(text, MAX_RULES_DEPTH):
        raise RuleError(f"{path}: JSON nested deeper than {MAX_RULES_DEPTH} levels; a rules file needs 4")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise RuleError(f"{path}: line {error.lineno}, column {error.colno}: {error.msg}") from None
    return parse_rules(data, str(path))


def _class_ids(ruleset: RuleSet, labels: Sequence[str], num_classes: int) -> dict[str, int]:
    """The class id of every label of the rule set (``labels`` names the classes; else ids written as numbers)."""
    ids: dict[str, int] = {}
    for label in [*ruleset.labels, ruleset.default]:
        if labels:
            if label not in labels:
                raise RuleError(f"rule label {label!r} is not a class of the data (classes: {list(labels)})")
            ids[label] = list(labels).index(label)
        else:
            if re.fullmatch(r"0|[1-9][0-9]*", label) is None or int(label) >= num_classes:
                raise RuleError(
                    f"rule label {label!r}: the data's classes are the ids 0..{num_classes - 1}, written in ASCII "
                    "digits"
                )
            ids[label] = int(label)
    return ids


def _compile_rules(ruleset: RuleSet) -> list[WFSA]:
    automata = []
    for label, text in ruleset.flat():
        a = regex(text, "max-times")
        a.name = f"{label}: {text}"
        if any(w is not None and float(w) != 1.0 for w in [*(arc.weight for arc in a.arcs), *a.final.values(),
                                                            *a.initial.values()]):
            raise RuleError(f"label {label!r}, rule {text!r}: weighted rules (<w>) are not supported by from_rules")
        automata.append(a)
    return automata


def rule_matches(automaton: WFSA, tokens: Sequence[str], whole: bool = False) -> bool:
    """Whether ``automaton`` gives some non-empty span of ``tokens`` (``whole``: all of ``tokens``) a non-zero score
    (an empty automaton: never)."""
    if automaton.num_states == 0:
        return False
    score = automaton.score(tokens) if whole else automaton.all_spans(tokens).total
    return not automaton.semiring.is_zero(score)


class RulesPredictor:
    """The rules alone: the first label in priority order (``RuleSet.ranked``) with a matching rule (a span rule:
    some non-empty span; a sentence rule: the whole sentence), else the default.

    Tokens outside ``vocab`` are read as ``<unk>`` (what the network sees; without ``vocab`` they are kept).
    Runs ``WFSA.all_spans`` and ``WFSA.score`` in pure Python: an oracle independent of the compiled layer.
    """

    def __init__(self, rules: RuleSet | Mapping[str, Any], vocab: Vocabulary | Sequence[str] | None = None):
        self.ruleset = parse_rules(rules)
        self.automata = _compile_rules(self.ruleset)
        self.labels = self.ruleset.labels
        self.vocab = None if vocab is None else set(_vocab_tokens(vocab))

    def matches(self, tokens: Sequence[str]) -> list[bool]:
        """Whether each rule (``RuleSet.flat`` order) matches ``tokens``."""
        seen = [t if self.vocab is None or t in self.vocab else UNK for t in tokens]
        whole = self.ruleset.whole_sentence()
        return [rule_matches(a, seen, w) for a, w in zip(self.automata, whole, strict=True)]

    def predict(self, tokens: Sequence[str]) -> str:
        fired = {label for (label, _), hit in zip(self.ruleset.flat(), self.matches(tokens), strict=True) if hit}
        return next((label for label in self.ruleset.ranked if label in fired), self.ruleset.default)


# --------------------------------------------------------------------------------------------
# The classifier
# --------------------------------------------------------------------------------------------
class RegexClassifier(nn.Module):
    """Embedding -> ``AutomatonLayer`` (one automaton per rule) -> ⊕ per label -> linear layer.

    The features are the labels' scores as numbers (max-times: the best span's probability, 1 or 0 before
    training). The output layer starts as the rules' decision: label l (rank k among the n labels with rules) gets
    weight ``gain * (1 + (n - k) / n)`` on its own score, the default label a bias ``gain / (2n)`` and everything
    else zero, so the first matching label wins and, with no match, the default does. ``init="random"`` builds the
    same network with random weights, every arc reading every word (the rules' structure without their words).
    ``leak`` (see ``AutomatonLayer``) lets the arcs learn to read words outside their labels; the untrained model
    then predicts the rules unless leaked paths of weight ~ε tip a decision (ε well below 1/(4n) keeps them).

    Raises:
        RuleError: a bad rule set, labels that are not the data's classes, an unknown ``init``, a ``gain`` that is
            not a positive number, or a bad ``leak``.
    """

    task = "classification"
    rule_order: Tensor
    label_of_rule: Tensor

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        rules: RuleSet | Mapping[str, Any],
        vocab: Sequence[str],
        labels: Sequence[str] = (),
        embedding_dim: int = 50,
        init: str = "rules",
        gain: float = 4.0,
        leak: float | None = None,
        freeze_embeddings: bool = False,
        backend: str = "auto",
        seed: int = 0,
    ):
        super().__init__()
        if init not in ("rules", "random"):
            raise RuleError(f"init must be 'rules' or 'random', not {init!r}")
        if check_real(gain, "gain", minimum=0.0, error=RuleError) == 0:
            raise RuleError("gain must be a finite number > 0, got 0.0")
        self.ruleset = parse_rules(rules)
        tokens = _vocab_tokens(vocab)
        if len(tokens) != vocab_size:
            raise RuleError(f"vocab has {len(tokens)} tokens but vocab_size is {vocab_size}")
        self.class_of = _class_ids(self.ruleset, labels, num_classes)
        self.class_labels = list(labels)
        self.embedding = word_embedding(vocab_size, embedding_dim, freeze_embeddings)
        self.automata = _compile_rules(self.ruleset)
        #: the trainer's dev selection counts the untrained network (the rules exactly) as a candidate
        self.initial_is_candidate = init == "rules"
        whole = self.ruleset.whole_sentence()
        options: dict[str, Any] = {"random_init": init == "random", "leak": leak, "backend": backend, "seed": seed}
        span_rules = [a for a, w in zip(self.automata, whole, strict=True) if not w]
        sentence_rules = [a for a, w in zip(self.automata, whole, strict=True) if w]
        #: the span rules' layer (None: every rule matches whole sentences) and the sentence rules' layer (None: none)
        self.layer = AutomatonLayer(span_rules, tokens, embedding_dim, **options) if span_rules else None
        self.sentence_layer = (
            AutomatonLayer(sentence_rules, tokens, embedding_dim, anchored=True, **options) if sentence_rules else None
        )
        # the layers' columns (span rules, then sentence rules) back in the rule set's order
        order = [r for r, w in enumerate(whole) if not w] + [r for r, w in enumerate(whole) if w]
        self.register_buffer("rule_order", torch.argsort(torch.tensor(order)), persistent=False)
        rule_labels = [label for label, _ in self.ruleset.flat()]
        label_of_rule = torch.tensor([self.ruleset.labels.index(lab) for lab in rule_labels])
        self.register_buffer("label_of_rule", label_of_rule, persistent=False)
        n = len(self.ruleset.labels)
        self.output = nn.Linear(n, num_classes)
        if init == "rules":
            ranked = self.ruleset.ranked
            with torch.no_grad():
                self.output.weight.zero_()
                self.output.bias.zero_()
                for column, label in enumerate(self.ruleset.labels):
                    k = ranked.index(label)
                    self.output.weight[self.class_of[label], column] = gain * (1 + (n - k) / n)
                self.output.bias[self.class_of[self.ruleset.default]] = gain / (2 * n)

    @property
    def layers(self) -> list[AutomatonLayer]:
        """The rule layers: the span rules' then the sentence rules' (each when it has rules)."""
        return [layer for layer in (self.layer, self.sentence_layer) if isinstance(layer, AutomatonLayer)]

    @property
    def leak(self) -> float | None:
        """The layers' ``leak`` (None: labels are exact masks)."""
        return self.layers[0].leak

    def rule_scores(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """Each rule's document score (B, R) in storage form.

        Raises:
            LayerError: tokens or lengths that do not fit (``kleene.nn.embedding.check_token_batch``).
        """
        tokens, lengths = check_token_batch(self.embedding, tokens, lengths, type(self).__name__)
        vectors = self.embedding(tokens)
        scores = torch.cat([layer(tokens, vectors, lengths) for layer in self.layers], -1)
        return scores[:, self.rule_order]

    def label_scores(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """Each label's score (B, L) as numbers: the ⊕ of its rules' scores, out of storage form."""
        scores = self.rule_scores(tokens, lengths)
        storage = self.layers[0].storage
        columns = [storage.sum(scores[:, self.label_of_rule == k], -1) for k in range(len(self.ruleset.labels))]
        return self.layers[0].algebra.from_storage(torch.stack(columns, -1))

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        return self.output(self.label_scores(tokens, lengths))

    @classmethod
    def from_rules(
        cls,
        rules: RuleSet | Mapping[str, Any],
        vocab: Vocabulary | Sequence[str],
        labels: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> RegexClassifier:
        """A classifier whose untrained predictions are the rules' (``RulesPredictor``).

        ``rules``: ``{label: [regex, ...]}`` or ``{"default": label, "rules": {...}}`` (docs/rules.md);
        ``labels``: the class names in class-id order (default: the rule set's labels, its default appended when
        it has no rule). Other keyword arguments go to the constructor (``embedding_dim``, ``init``, ``gain``, ...).

        Raises:
            RuleError: as the constructor.
        """
        ruleset = parse_rules(rules)
        tokens = _vocab_tokens(vocab)
        if labels is None:
            labels = ruleset.labels + ([ruleset.default] if ruleset.default not in ruleset.labels else [])
        labels = list(labels)
        return cls(len(tokens), len(labels), ruleset.to_json(), tokens, labels, **kwargs)


def _build_regex(vocab_size: int, num_classes: int, **kwargs: Any) -> RegexClassifier:
    if "rules" not in kwargs or "vocab" not in kwargs:
        raise RuleError("model 'regex' needs rules (a rule set, e.g. --rules FILE) and the vocabulary")
    return RegexClassifier(vocab_size, num_classes, **kwargs)


#: The trainer passes the vocabulary's tokens (``vocab``) and the data's class names (``labels``) to this builder.
_build_regex.wants_vocabulary = True  # type: ignore[attr-defined]
register_model("regex", _build_regex)
