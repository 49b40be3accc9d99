"""SoPa interpretation against independent oracles: explicit enumeration of every path over every span (written
here from the paper's eq. 7 and the authors' transition), kleene.automata's Viterbi and all-spans search on the
pattern's WFSA, and the MLP recomputed by hand for leave-one-out."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch

from kleene.automata import EPSILON, WFSA, all_spans, score, viterbi
from kleene.automata.semiring import get_semiring
from kleene.data.vocab import Vocabulary
from kleene.nn import build_model
from kleene.nn.sopa import PatternGroup, SoPaClassifier
from kleene.viz import (
    END_TOKEN,
    START_TOKEN,
    HardPattern,
    InterpretError,
    PhraseMatch,
    explain,
    hard_fidelity,
    hard_patterns,
    removed_value,
    top_phrases,
)

WORDS = ["good", "bad", "movie", "plot", "not", "very"]
VOCAB = Vocabulary(["<pad>", "<unk>", *WORDS])
CONFIGS = [(mode, semiring) for mode in ("paper", "reference") for semiring in ("max-times", "max-plus", "real")]


def corpus(count: int = 8, seed: int = 0) -> list[list[str]]:
    generator = torch.Generator().manual_seed(seed)
    sizes = [0, 1, *torch.randint(2, 6, (count - 2,), generator=generator).tolist()]
    return [[WORDS[i] for i in torch.randint(0, len(WORDS), (n,), generator=generator).tolist()] for n in sizes]


def sopa(mode: str, semiring: str, patterns: str = "2-1_3-2_4-2", seed: int = 0, **kwargs: object) -> SoPaClassifier:
    torch.manual_seed(seed)
    model = SoPaClassifier(
        len(VOCAB),
        3,
        embedding_dim=4,
        patterns=patterns,
        semiring=semiring,
        mode=mode,
        mlp_hidden=5,
        dropout=0.0,
        **kwargs,  # type: ignore[arg-type]
    )
    return model.double().eval()


# ------------------------------------------------------------------------------------------------------------
# The oracle: every path over every span, enumerated
# ------------------------------------------------------------------------------------------------------------
class PatternWeights:
    """One pattern's weights over a document as the model pads it, as numbers the MLP reads (max-times:
    probabilities); positions are padded positions."""

    def __init__(self, model: SoPaClassifier, tokens: list[str], pattern: int):
        ids = torch.tensor(VOCAB.encode(tokens), dtype=torch.long).reshape(1, len(tokens))
        with torch.no_grad():
            vectors, _ = model.embed(ids, torch.tensor([len(tokens)]))
            first = 0
            for group in model.patterns.groups:
                assert isinstance(group, PatternGroup)
                if pattern < first + group.count:
                    break
                first += group.count
            column = pattern - first
            main, loop = group.transitions(vectors)
            semiring = model.patterns.semiring
            self.main = get_semiring(semiring).from_storage(main[0, :, column]).tolist()
            self.loop = None if loop is None else get_semiring(semiring).from_storage(loop[0, :, column]).tolist()
            eps = group.recurrence.constants[:, column] if group.epsilons else None
            self.eps = None if eps is None else get_semiring(semiring).from_storage(eps).tolist()
        self.length, self.mode, self.cap = group.length, group.mode, group.epsilon_cap
        self.multiplicative = semiring != "max-plus"

    def paths(self, start: int, end: int) -> Iterator[tuple[float, tuple[tuple[str, int, int, int | None], ...]]]:
        """Every path deriving tokens [start, end): (weight, ((kind, source, target, position), ...))."""
        yield from self.paths_by_end(start, end, steps=True).get(end, [])

    def paths_by_end(
        self, start: int, stop: int, steps: bool = False
    ) -> dict[int, list[tuple[float, tuple]]]:  # type: ignore[type-arg]
        """Every path from ``start`` by the position it ends at (at most ``stop``), as ``paths`` gives them (their
        steps only when ``steps``; else ()): each path prefix walked once for all its ends."""
        last = self.length - 1
        cap = last if self.cap is None else self.cap
        found: dict[int, list[tuple[float, tuple]]] = {}  # type: ignore[type-arg]

        def go(state: int, i: int, run: int, weight: float, path: tuple) -> None:  # type: ignore[type-arg]
            """Paths from ``state`` before token ``i`` after ``run`` epsilons in a row."""
            if state == last and (self.mode == "paper" or run == 0):
                found.setdefault(i, []).append((weight, path))

            def take(kind: str, target: int, arc_weight: float) -> None:
                consumed = kind != "epsilon"
                taken = (*path, (kind, state, target, i if consumed else None)) if steps else path
                go(target, i + consumed, 0 if consumed else run + 1, self.times(weight, arc_weight), taken)

            if self.eps is not None and state < last:
                paper_epsilon = self.mode == "paper" and run < cap
                reference_epsilon = self.mode == "reference" and run == 0 and i < stop  # a token must follow it
                if paper_epsilon or reference_epsilon:
                    take("epsilon", state + 1, self.eps[state])
            if i < stop and self.loop is not None:
                take("self-loop", state, self.loop[i][state])
            if i < stop and state < last:
                take("main", state + 1, self.main[i][state])

        go(0, start, 0, 1.0 if self.multiplicative else 0.0, ())
        return found

    def times(self, a: float, b: float) -> float:
        return a * b if self.multiplicative else a + b

    def span(self, start: int, end: int, real: bool) -> tuple[float, float] | None:
        """(best path, total over paths) of the span, None when no path derives it."""
        weights = [w for w, _ in self.paths(start, end)]
        return best_and_total(weights, real) if weights else None


def best_and_total(weights: list[float], real: bool) -> tuple[float, float]:
    """(best path, total over paths) of a span's path weights: the total is the sum in the real semiring, else the
    best."""
    return max(weights), (sum(weights) if real else max(weights))


def padded(model: SoPaClassifier, tokens: list[str]) -> list[str]:
    return [START_TOKEN] * model.boundary + tokens + [END_TOKEN] * model.boundary


def oracle_spans(model: SoPaClassifier, tokens: list[str], pattern: int) -> dict[tuple[int, int], tuple[float, float]]:
    """Every span of the padded document that some path derives (the empty span as (0, 0)), in padded positions."""
    words = padded(model, tokens)
    weights = PatternWeights(model, tokens, pattern)
    real = model.patterns.semiring == "real"
    spans = {}
    for start in range(len(words) + 1):
        for end, found in sorted(weights.paths_by_end(start, len(words)).items()):
            if start == end and start > 0:
                continue
            spans[start, end] = best_and_total([w for w, _ in found], real)
    return spans


def oracle_document_score(model: SoPaClassifier, tokens: list[str], pattern: int) -> float:
    """Eq. 8 from the enumeration: ⊕ over spans (the empty span once per step, as h_0 is part of every h_t)."""
    spans = oracle_spans(model, tokens, pattern)
    if model.patterns.semiring != "real":
        return max(
            (best for best, _ in spans.values()), default=-math.inf if model.patterns.semiring == "max-plus" else 0.0
        )
    steps = len(padded(model, tokens))
    return sum(total * (steps if start == end else 1) for (start, end), (_, total) in spans.items())


def model_scores(model: SoPaClassifier, tokens: list[str]) -> list[float]:
    ids = torch.tensor(VOCAB.encode(tokens), dtype=torch.long).reshape(1, len(tokens))
    with torch.no_grad():
        return model.pattern_scores(ids, torch.tensor([len(tokens)]))[0].tolist()


def check_match(model: SoPaClassifier, tokens: list[str], match: PhraseMatch) -> None:
    """A match is a real path of its pattern over its span, with the oracle's weight and the span's total."""
    p = model.boundary
    words = padded(model, tokens)
    assert match.tokens == tuple(words[match.start + p : match.end + p])
    weights = PatternWeights(model, tokens, match.pattern)
    best, total = weights.span(match.start + p, match.end + p, model.patterns.semiring == "real")  # type: ignore[misc]
    assert match.score == pytest.approx(best, rel=1e-9, abs=1e-12)
    assert match.span_score == pytest.approx(total, rel=1e-9, abs=1e-12)
    if model.patterns.semiring == "real":
        assert match.share == pytest.approx(best / total, rel=1e-9)
    else:
        assert match.share is None
    # the steps form a path START -> END consuming exactly the span, and their weights multiply to the score
    state, position, value = 0, match.start, 1.0 if weights.multiplicative else 0.0
    for step in match.steps:
        assert step.source == state
        assert step.target == state + (0 if step.kind == "self-loop" else 1)
        if step.kind == "epsilon":
            assert step.position is None and step.token is None
        else:
            assert step.position == position and step.token == words[position + p]
            position += 1
        state, value = step.target, weights.times(value, step.weight)
    assert (state, position) == (weights.length - 1, match.end)
    assert value == pytest.approx(match.score, rel=1e-9, abs=1e-12)
    assert any(
        math.isclose(w, match.score, rel_tol=1e-9, abs_tol=1e-12)
        and tuple((k, s, t) for k, s, t, _ in path) == tuple((x.kind, x.source, x.target) for x in match.steps)
        for w, path in weights.paths(match.start + p, match.end + p)
    )


# ------------------------------------------------------------------------------------------------------------
# Exactness
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "semiring"), CONFIGS)
@pytest.mark.slow
def test_the_enumeration_oracle_reproduces_the_models_scores(mode: str, semiring: str) -> None:
    model = sopa(mode, semiring)
    for tokens in corpus(5):
        scores = model_scores(model, tokens)
        for pattern in range(model.patterns.num_patterns):
            assert oracle_document_score(model, tokens, pattern) == pytest.approx(scores[pattern], rel=1e-9)


@pytest.mark.parametrize(("mode", "semiring"), CONFIGS)
@pytest.mark.slow
def test_each_patterns_best_match_is_the_best_span(mode: str, semiring: str) -> None:
    model = sopa(mode, semiring)
    for tokens in corpus(6, seed=1):
        explanation = explain(model, VOCAB, tokens)
        scores = model_scores(model, tokens)
        assert len(explanation.contributions) == model.patterns.num_patterns
        for contribution in explanation.contributions:
            match = contribution.best
            assert match is not None
            spans = oracle_spans(model, tokens, contribution.pattern)
            check_match(model, tokens, match)
            if semiring == "real":
                assert match.span_score == pytest.approx(max(total for _, total in spans.values()), rel=1e-9)
            else:  # the best path of the best span IS the pattern's document score
                assert match.score == pytest.approx(max(best for best, _ in spans.values()), rel=1e-9)
                assert match.score == pytest.approx(scores[contribution.pattern], rel=1e-9)


@pytest.mark.parametrize(("mode", "semiring"), CONFIGS)
@pytest.mark.slow
def test_top_phrases_are_the_corpus_best_distinct_spans(mode: str, semiring: str) -> None:
    model = sopa(mode, semiring, seed=2)
    documents = corpus(8, seed=3)
    phrases = top_phrases(model, VOCAB, documents, k=3, progress=False)
    assert sorted(phrases) == list(range(model.patterns.num_patterns))
    for pattern, matches in phrases.items():
        assert 1 <= len(matches) <= 3
        assert len({m.tokens for m in matches}) == len(matches)
        ranking = [m.span_score for m in matches]
        assert ranking == sorted(ranking, reverse=True)
        for match in matches:
            assert match.pattern == pattern
            check_match(model, documents[match.document], match)
        # the first phrase is the best span of the whole corpus
        best = max(total for doc in documents for _, total in oracle_spans(model, doc, pattern).values())
        assert matches[0].span_score == pytest.approx(best, rel=1e-9)


def test_top_phrases_per_document_and_pattern_subset() -> None:
    model = sopa("paper", "max-times", patterns="3-2_4-1")
    documents = corpus(6, seed=4)
    phrases = top_phrases(model, VOCAB, documents, k=20, patterns=[2], progress=False, per_document=3, batch_size=2)
    assert list(phrases) == [2]
    per_document: dict[int, int] = {}
    for match in phrases[2]:
        per_document[match.document] = per_document.get(match.document, 0) + 1
        check_match(model, documents[match.document], match)
    assert max(per_document.values()) <= 3
    assert sum(per_document.values()) > len(documents)  # several matches per document were considered


@pytest.mark.parametrize("semiring", ["max-times", "real"])
def test_paper_mode_agrees_with_kleene_automata(semiring: str) -> None:
    """The pattern as a kleene WFSA over the document's words: all_spans = the model's score, viterbi = the match."""
    model = sopa("paper", semiring, patterns="3-2_4-2", seed=5)
    for tokens in corpus(5, seed=6)[1:]:
        words = padded(model, tokens)
        explanation = explain(model, VOCAB, tokens)
        scores = model_scores(model, tokens)
        for contribution in explanation.contributions:
            weights = PatternWeights(model, tokens, contribution.pattern)
            automaton = WFSA(semiring, name=f"pattern {contribution.pattern}")
            for state in range(weights.length):
                automaton.add_state(f"s{state}")
            automaton.set_initial(0)
            automaton.set_final(weights.length - 1)
            # each token occurrence is its own symbol (its weights depend only on the word, but this keeps it simple)
            symbols = [f"{i}:{w}" for i, w in enumerate(words)]
            for i, symbol in enumerate(symbols):
                for state in range(weights.length - 1):
                    automaton.add_arc(state, state + 1, symbol, weights.main[i][state])
                for state in range(weights.length):
                    automaton.add_arc(state, state, symbol, weights.loop[i][state])  # type: ignore[index]
            for state in range(weights.length - 1):
                automaton.add_arc(state, state + 1, EPSILON, weights.eps[state])  # type: ignore[index]
            assert all_spans(automaton, symbols, epsilon_cap=1).total == pytest.approx(
                scores[contribution.pattern], rel=1e-9
            )
            match = contribution.best
            assert match is not None
            p = model.boundary
            path = viterbi(automaton, symbols[match.start + p : match.end + p], epsilon_cap=1)
            assert path.weight == pytest.approx(match.score, rel=1e-9)
            assert [s.kind for s in path.steps] == [s.kind for s in match.steps]
            if semiring == "real":
                assert score(automaton, symbols[match.start + p : match.end + p], epsilon_cap=1) == pytest.approx(
                    match.span_score, rel=1e-9
                )


def test_the_empty_span_of_a_two_state_pattern() -> None:
    """Paper mode, length 2, one epsilon: END is reachable without a token, so the empty span is a match."""
    model = sopa("paper", "max-times", patterns="2-1")
    with torch.no_grad():
        model.patterns.groups[0].recurrence.parametrizations.constants.original.fill_(30.0)  # eps weight ~ 1
    explanation = explain(model, VOCAB, ["good", "movie"])
    match = explanation.contributions[0].best
    assert match is not None and match.start == match.end and match.tokens == ()
    assert [s.kind for s in match.steps] == ["epsilon"]
    assert match.score == pytest.approx(model_scores(model, ["good", "movie"])[0], rel=1e-12)


# ------------------------------------------------------------------------------------------------------------
# Leave-one-out
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "semiring"), CONFIGS)
def test_leave_one_out_recomputes_the_mlp_by_hand(mode: str, semiring: str) -> None:
    model = sopa(mode, semiring, seed=7)
    tokens = ["very", "good", "movie", "unseen-word"]
    explanation = explain(model, VOCAB, tokens, label=2, top=3)
    scores = torch.tensor(model_scores(model, tokens), dtype=torch.float64)
    (w1, b1), (w2, b2) = [(layer.weight.detach(), layer.bias.detach()) for layer in model.mlp.layers]  # type: ignore[union-attr]

    def logits(x: torch.Tensor) -> torch.Tensor:
        return w2 @ torch.relu(w1 @ x + b1) + b2

    full = logits(scores)
    assert explanation.predicted == int(full.argmax())
    assert explanation.label == 2 and explanation.tokens == tuple(tokens)
    assert explanation.probabilities == pytest.approx(torch.softmax(full, 0).tolist(), rel=1e-9)
    zero = 0.0 if semiring != "max-plus" else -100.0
    assert removed_value(model) == zero
    deltas = {}
    for pattern in range(model.patterns.num_patterns):
        ablated = scores.clone()
        ablated[pattern] = zero
        deltas[pattern] = (full - logits(ablated)).tolist()
    ranked = sorted(deltas, key=lambda q: -abs(deltas[q][explanation.predicted]))[:3]
    assert [c.pattern for c in explanation.contributions] == ranked
    for contribution in explanation.contributions:
        assert contribution.delta == pytest.approx(deltas[contribution.pattern], rel=1e-9, abs=1e-12)


def test_explain_restores_training_mode_and_progress_changes_nothing() -> None:
    model = sopa("paper", "max-times")
    model.train()
    explain(model, VOCAB, ["good"])
    quiet = top_phrases(model, VOCAB, corpus(4), progress=False)
    assert model.training
    assert top_phrases(model, VOCAB, corpus(4), progress=True) == quiet


def test_a_float32_model_matches_its_own_scores() -> None:
    model = sopa("reference", "max-times", seed=12).float()
    for tokens in corpus(4, seed=13):
        scores = model_scores(model, tokens)
        for contribution in explain(model, VOCAB, tokens).contributions:
            assert contribution.best is not None
            assert contribution.best.score == pytest.approx(scores[contribution.pattern], rel=1e-5)


# ------------------------------------------------------------------------------------------------------------
# Hard patterns
# ------------------------------------------------------------------------------------------------------------
SATURATED = 40.0  # sigmoid(±40) is 1 or 0 to double precision (log space: 0 or -40)


def crisp_model(semiring: str = "max-times", mode: str = "paper") -> tuple[SoPaClassifier, list[HardPattern]]:
    """A SoPa whose weights are already 0/1: one-hot word vectors, arc weights ±SATURATED on chosen words."""
    dim = len(VOCAB) + 2  # one dimension per token, START and END
    model = SoPaClassifier(
        len(VOCAB), 2, embedding_dim=dim, patterns="3-2", semiring=semiring, mode=mode, mlp_hidden=4, dropout=0.0
    ).double()
    index = {w: VOCAB.index(w) for w in WORDS}
    choices = [  # per pattern: main arcs, self-loops per state, epsilons
        ([{"very"}, {"good", "bad"}], [set(), {"very"}, set()], [False, False]),
        ([{"not"}, None], [set(), set(), set()], [True, False]),
    ]
    with torch.no_grad():
        model.embedding.weight.copy_(torch.eye(len(VOCAB), dim))
        model.start_vector.copy_(torch.eye(dim)[len(VOCAB)])
        model.end_vector.copy_(torch.eye(dim)[len(VOCAB) + 1])
        group = model.patterns.groups[0]
        group.main_bias.zero_()
        group.loop_bias.zero_()
        for p, (main, loops, eps) in enumerate(choices):
            for arc, words in enumerate(main):
                row = torch.full((dim,), SATURATED if words is None else -SATURATED)
                for w in words or ():
                    row[index[w]] = SATURATED
                if words is None:
                    row[0] = -SATURATED  # the padding id is never read
                group.main_weight[p, arc] = row
            for state, words in enumerate(loops):
                row = torch.full((dim,), -SATURATED)
                for w in words:
                    row[index[w]] = SATURATED
                group.loop_weight[p, state] = row
            raw = group.recurrence.parametrizations.constants.original
            raw[:, p] = torch.tensor([SATURATED if e else -SATURATED for e in eps])
        model.mlp.layers[0].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 1.0]]))
    expected = [
        HardPattern(
            0,
            3,
            (frozenset({"very"}), frozenset({"good", "bad"})),
            (frozenset(), frozenset({"very"}), frozenset()),
            (False, False),
        ),
        HardPattern(1, 3, (frozenset({"not"}), None), (frozenset(), frozenset(), frozenset()), (True, False)),
    ]
    return model.eval(), expected


@pytest.mark.parametrize("semiring", ["max-times", "real"])
def test_hard_patterns_of_crisp_weights_are_exact(semiring: str) -> None:
    model, expected = crisp_model(semiring)
    hard = hard_patterns(model, VOCAB)
    assert [(h.pattern, h.length, h.main, h.self_loops, h.epsilons) for h in hard] == [
        (e.pattern, e.length, e.main, e.self_loops, e.epsilons) for e in expected
    ]
    assert hard[0].describe() in ("very  (very)*  bad|good", "very  (very)*  good|bad")  # good, bad tie
    assert hard[1].describe() == "not?  *"
    documents = [*corpus(12, seed=8), ["very", "very", "good"], ["not", "plot"], ["plot"]]
    labels = [len(d) % 2 for d in documents]
    fidelity = hard_fidelity(model, VOCAB, hard, documents, labels)
    assert fidelity.agreement == 1.0 and fidelity.count == len(documents)
    assert fidelity.soft_accuracy == fidelity.hard_accuracy
    assert 0 < fidelity.coverage <= 1


def test_a_hard_pattern_as_a_symbolic_automaton() -> None:
    _, (first, second) = crisp_model()
    automaton = first.wfsa(WORDS)
    assert score(automaton, ["very", "good"]) is True
    assert score(automaton, ["very", "very", "very", "bad"]) is True
    assert score(automaton, ["good", "very"]) is False
    assert score(automaton, ["very", "movie"]) is False
    skipping = second.wfsa(WORDS)  # "not" may be skipped by its epsilon; the second arc is a wildcard
    assert score(skipping, ["plot"]) is True and score(skipping, ["not", "movie"]) is True
    assert score(skipping, ["very", "plot"]) is False


@pytest.mark.parametrize(("mode", "semiring"), CONFIGS)
def test_a_permissive_hard_pattern_is_the_soft_one(mode: str, semiring: str) -> None:
    """Every word passes every arc: the hard classifier reads exactly the soft scores."""
    model = sopa(mode, semiring, seed=9)
    hard = hard_patterns(model, VOCAB, threshold=1e-300, relative=True)
    assert all(all(words is None for words in h.main) for h in hard)
    fidelity = hard_fidelity(model, VOCAB, hard, corpus(10, seed=10))
    assert fidelity.agreement == 1.0
    assert fidelity.coverage == 1.0


def test_hard_thresholds_select_the_arcs_best_words() -> None:
    model = sopa("paper", "max-times", seed=11)
    strict = hard_patterns(model, VOCAB, threshold=1.0, wildcard_fraction=1.0, relative=True)
    for h in strict:  # only each arc's best word(s) pass a relative threshold of 1
        assert all(words is not None and len(words) == 1 for words in h.main)
        assert all(words is not None and next(iter(words)) == ranked[0] for words, ranked in zip(h.main, h.main_ranked))
    absolute = hard_patterns(model, VOCAB, threshold=0.5, relative=False, wildcard_fraction=1.0, words=["good", "bad"])
    transitions = PatternWeights(model, ["good", "bad"], 0)
    p = model.boundary
    expected = (frozenset(w for i, w in enumerate(["good", "bad"]) if transitions.main[p + i][0] >= 0.5),)
    assert absolute[0].main == expected


# ------------------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------------------
def test_errors_name_what_is_wrong() -> None:
    model = sopa("paper", "max-times")
    with pytest.raises(InterpretError, match="needs a SoPaClassifier, got Linear"):
        explain(torch.nn.Linear(2, 2), VOCAB, ["good"])
    with pytest.raises(InterpretError, match="needs a SoPaClassifier, got CNNClassifier"):
        top_phrases(build_model("cnn", vocab_size=len(VOCAB), num_classes=2), VOCAB, [["good"]])
    with pytest.raises(InterpretError, match="needs a SoPaClassifier, got CNNClassifier"):
        hard_patterns(build_model("cnn", vocab_size=len(VOCAB), num_classes=2), VOCAB)
    with pytest.raises(InterpretError, match="the vocabulary has 3 tokens but the model embeds 8"):
        explain(model, Vocabulary(["<pad>", "<unk>", "good"]), ["good"])
    with pytest.raises(InterpretError, match="pattern 99 is not in the bank"):
        top_phrases(model, VOCAB, [["good"]], patterns=[99], progress=False)
    with pytest.raises(InterpretError, match="label 5 is not a class"):
        explain(model, VOCAB, ["good"], label=5)
    with pytest.raises(InterpretError, match="document 1 is a string"):
        top_phrases(model, VOCAB, [["good"], "bad movie"], progress=False)  # type: ignore[list-item]
    with pytest.raises(InterpretError, match="document 0, token 1: 3 is not a string"):
        explain(model, VOCAB, ["good", 3])  # type: ignore[list-item]
    hard = hard_patterns(model, VOCAB)
    with pytest.raises(InterpretError, match=r"missing \[4\]"):
        hard_fidelity(model, VOCAB, hard[:4], [["good"]])
    broken = HardPattern(0, 2, (frozenset({"splendid"}),), (frozenset(),) * 2, (False,))
    with pytest.raises(InterpretError, match="hard pattern 0, main arc 0: 'splendid' is not in the vocabulary"):
        hard_fidelity(model, VOCAB, [broken, *hard[1:]], [["good"]])
    with pytest.raises(InterpretError, match="relative threshold must be in"):
        hard_patterns(model, VOCAB, threshold=2.0, relative=True)
    identity_real = SoPaClassifier(len(VOCAB), 2, embedding_dim=4, patterns="3-1", semiring="real", encoder="identity")
    with pytest.raises(InterpretError, match="signed weights"):
        explain(identity_real, VOCAB, ["good"])
