"""Rules as layers: the compiled rule layer against ``WFSA.all_spans`` (pure Python), a classifier from rules
against the rules alone on real TREC questions, gradcheck, the read-back and input validation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from kleene.automata import ANY, EPSILON, WFSA, NoneOf, OneOf, regex
from kleene.data import Vocabulary, load_classification
from kleene.errors import LayerError, RuleError
from kleene.extract import hard_automata, read_back
from kleene.nn import build_model
from kleene.nn.rules import AutomatonLayer, RegexClassifier, RulesPredictor, load_rules, parse_rules

TREC_RULES = Path(__file__).resolve().parents[2] / "examples" / "rules" / "trec.json"
WORDS = ["<pad>", "<unk>", "who", "what", "is", "the", "capital", "of", "how", "many", "big", "a"]


def batch(sentences: list[list[str]], words: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    index = {w: i for i, w in enumerate(words)}
    lengths = torch.tensor([len(s) for s in sentences], dtype=torch.long)
    ids = torch.zeros(len(sentences), max([len(s) for s in sentences], default=0), dtype=torch.long)
    for b, sentence in enumerate(sentences):
        for t, word in enumerate(sentence):
            ids[b, t] = index.get(word, 1)
    return ids, lengths


def user_automata(semiring: str) -> list[WFSA]:
    """Two automata with every label kind, epsilons, parallel arcs, constant weights and initial/final weights."""
    a = WFSA(semiring)
    a.add_states("s", "x", "y")
    a.set_initial(0, 0.9 if semiring == "real" else math.log(0.9))
    a.add_arc(0, 1, "what", 0.5 if semiring == "real" else math.log(0.5))
    a.add_arc(0, 1, OneOf(["who", "how"]), 0.7 if semiring == "real" else math.log(0.7))  # parallel to the arc above
    a.add_arc(1, 1, NoneOf(["the"]), 0.3 if semiring == "real" else math.log(0.3))
    a.add_arc(1, 2, EPSILON, 0.4 if semiring == "real" else math.log(0.4))
    a.add_arc(2, 2, "of", 0.6 if semiring == "real" else math.log(0.6))
    a.set_final(2, 0.8 if semiring == "real" else math.log(0.8))
    b = WFSA(semiring)
    b.add_states("s", "t")
    b.set_initial(0)
    b.add_arc(0, 1, ANY, 0.25 if semiring == "real" else math.log(0.25))
    b.add_arc(1, 0, EPSILON, 0.5 if semiring == "real" else math.log(0.5))
    b.set_final(1)
    return [a, b]


def log_rules() -> list[WFSA]:
    """Two rules and the two automata of ``user_automata``, in the log semiring: one layer (one kernel) that the
    exactness test and the gradcheck both run."""
    return [regex("what . of | who", "log"), regex("[how who] [^the]* big", "log"), *user_automata("log")]


SENTENCES = [
    ["what", "is", "the", "capital", "of", "of"],
    ["who", "is", "big"],
    ["the"],
    [],
    ["how", "many", "zebras", "of"],
]


@pytest.mark.parametrize("semiring", ["real", "log", "max-plus", "max-times"])
@pytest.mark.parametrize("backend", ["torch", "cpp"])
def test_layer_computes_the_automata_exactly(semiring: str, backend: str) -> None:
    automata = user_automata("real" if semiring in ("real", "max-times") else semiring)
    if semiring == "max-times":
        automata = [regex("what . of | who", "max-times"), regex("[how who] [^the]*", "max-times")]
    if semiring == "log":
        automata = log_rules()
    layer = AutomatonLayer(automata, WORDS, 4, backend=backend).double()
    ids, lengths = batch(SENTENCES, WORDS)
    scores = layer(ids, torch.randn(*ids.shape, 4, dtype=torch.float64), lengths)
    algebra = automata[0].semiring
    for b, sentence in enumerate(SENTENCES):
        seen = [w if w in WORDS else "<unk>" for w in sentence]
        for d, automaton in enumerate(automata):
            expected = float(algebra.to_storage(automaton.all_spans(seen).total))
            got = float(scores[b, d].detach())
            if math.isinf(expected):
                assert got == expected
            else:  # the parameters hold the weights in float32 (2^-24 relative each); a span has < 12 factors
                assert got == pytest.approx(expected, rel=1e-6, abs=1e-6)


def test_one_kernel_for_many_rules() -> None:
    ruleset = load_rules(TREC_RULES)
    model = RegexClassifier.from_rules(ruleset, WORDS, labels=["DESC", "ENTY", "ABBR", "HUM", "LOC", "NUM"])
    assert model.layer.recurrence.dim == len(ruleset.flat())
    assert model.layer.num_automata == len(ruleset.flat())


@pytest.mark.slow
def test_cli_trains_from_a_rules_file_and_reports_the_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before test_untrained_classifier_predicts_the_rules_on_trec: training builds the TREC rules' kernel with its
    # backward, in one library, which that forward-only test then loads
    from kleene.cli import main

    out = tmp_path / "run"
    args = ["train", "regex", "--data", "trec", "--rules", str(TREC_RULES), "--max-steps", "3", "--out", str(out)]
    assert main([*args, "--set", "leak=0.001", "--no-progress", "--pretrained", "none", "--json"]) == 0
    assert main(["report", str(out), "-o", str(tmp_path / "r.html"), "--no-progress"]) == 0
    page = (tmp_path / "r.html").read_text()
    count = len(load_rules(TREC_RULES).flat())
    assert f"Rules before and after training ({count})" in page and "stand for" in page and "words gained" in page
    bad = tmp_path / "bad.json"
    bad.write_text('{"HUM": ["who ("]}')
    assert main(["train", "regex", "--data", "trec", "--rules", str(bad), "--out", str(tmp_path / "bad-run")]) == 1
    assert "label 'HUM', rule 1" in capsys.readouterr().err


@pytest.fixture(scope="module")
def trec_rules_oracle() -> tuple[Any, Vocabulary, list[list[str]], list[str]]:
    """TREC, its vocabulary, its test and dev sentences, and what the rules alone predict on them (the oracle,
    run once for every classifier compared with it)."""
    data = load_classification("trec")
    vocab = Vocabulary.build([[t for e in data.train for t in e.tokens]])
    rules = RulesPredictor(load_rules(TREC_RULES), vocab)
    sentences = [list(e.tokens) for e in data.test] + [list(e.tokens) for e in data.dev]
    return data, vocab, sentences, [rules.predict(s) for s in sentences]


@pytest.mark.parametrize("leak", [None, 1e-3])
@pytest.mark.slow
def test_untrained_classifier_predicts_the_rules_on_trec(
    leak: float | None, trec_rules_oracle: tuple[Any, Vocabulary, list[list[str]], list[str]]
) -> None:
    data, vocab, sentences, expected = trec_rules_oracle
    model = RegexClassifier.from_rules(load_rules(TREC_RULES), vocab, labels=data.labels, leak=leak)
    model.eval()
    with torch.no_grad():
        predicted: list[str] = []
        for start in range(0, len(sentences), 256):
            ids, lengths = batch(sentences[start : start + 256], vocab.tokens)
            predicted += [data.labels[int(i)] for i in model(ids, lengths).argmax(-1)]
    assert predicted == expected
    # the rules are not trivial on these sentences: every label is predicted, and not always the same one
    assert set(expected) == set(data.labels)


@pytest.mark.parametrize("leak", [None, 1e-3])
@pytest.mark.parametrize("backend", ["torch", "cpp"])
@pytest.mark.slow
def test_gradcheck_through_the_rule_initialised_layer(backend: str, leak: float | None) -> None:
    layer = AutomatonLayer(log_rules(), WORDS, 3, backend=backend, leak=leak).double()
    ids, lengths = batch(SENTENCES, WORDS)
    names = ["arc_weight", "residual"] + (["leak_gate"] if leak is not None else [])
    # the parameters at the rule-initialised point (residual zero, gate log ε) and the word vectors
    inputs = [getattr(layer, name).detach().clone().requires_grad_(True) for name in names]
    vectors = torch.randn(*ids.shape, 3, dtype=torch.float64, requires_grad=True)

    def run(v: torch.Tensor, *parameters: torch.Tensor) -> torch.Tensor:
        out = torch.func.functional_call(layer, dict(zip(names, parameters, strict=True)), (ids, v, lengths))
        return torch.where(torch.isinf(out), torch.zeros_like(out), out)

    assert torch.autograd.gradcheck(run, (vectors, *inputs))


def test_readback_of_an_untrained_model_is_the_rules() -> None:
    rules = {"HUM": ["who is"], "NUM": ["how [many big]"], "LOC": ["capital of ."]}
    model = RegexClassifier.from_rules(rules, WORDS)
    for r in read_back(model, [["who", "is", "big"], ["how", "many"]]):
        assert r.lost == []
        assert r.fidelity == 1.0
        assert r.regex == r.original  # nothing changed: the rule as written


def test_a_leak_keeps_the_rules_predictions_and_lets_words_in() -> None:
    # before test_readback_drops_the_words_that_lost_their_weight: the same kernel (two rules of those shapes), built
    # here with its backward in one library
    rules = {"HUM": ["who is"], "NUM": ["how [many big]"]}
    sentences = [["who", "is", "big"], ["how", "many"], ["how", "the"], ["what", "is"], []]
    ids, lengths = batch(sentences, WORDS)
    exact = RegexClassifier.from_rules(rules, WORDS, embedding_dim=4)
    leaky = RegexClassifier.from_rules(rules, WORDS, embedding_dim=4, leak=1e-3)
    leaky.load_state_dict(exact.state_dict(), strict=False)
    # a leaked word scores at most ε = 1e-3 where the exact rule scores zero; matched spans are unchanged
    difference = (leaky.label_scores(ids, lengths) - exact.label_scores(ids, lengths)).detach()
    assert bool((difference >= 0).all()) and float(difference.max()) <= 1e-3 * (1 + 1e-6)
    assert leaky(ids, lengths).argmax(-1).tolist() == exact(ids, lengths).argmax(-1).tolist()
    with torch.no_grad():
        leaky.layer.leak_gate.zero_()  # every arc now reads every word at its full weight
    num = read_back(leaky)[1]
    assert "the" in num.gained and num.lost == []
    with pytest.raises(RuleError, match="leak"):
        RegexClassifier.from_rules(rules, WORDS, leak=0.7)


def test_readback_drops_the_words_that_lost_their_weight() -> None:
    model = RegexClassifier.from_rules({"NUM": ["how [many big]"], "HUM": ["who ."]}, WORDS, embedding_dim=4)
    with torch.no_grad():
        model.embedding.weight.zero_()
        model.embedding.weight[WORDS.index("big"), 0] = 1.0
        model.embedding.weight[WORDS.index("the"), 0] = 1.0
        model.layer.residual[:, 0] = -5.0  # "big" and "the" now weigh exp(-5) on every arc
    num, hum = read_back(model, [["how", "big"], ["who", "the"], ["who", "is"]])
    assert num.lost == ["big"] and num.regex == "how many"
    assert hum.lost == ["big", "the"] and hum.regex == "who [^big the]"
    assert num.fidelity == 1.0 and hum.fidelity == 1.0


def test_random_init_reads_every_word() -> None:
    model = RegexClassifier.from_rules({"HUM": ["who"], "NUM": ["how many"]}, WORDS, init="random")
    assert bool(model.layer.match[:, 2:].all())
    ids, lengths = batch([["the", "capital"]], WORDS)
    assert bool(torch.isfinite(model.rule_scores(ids, lengths)).all())


def test_registry_and_checkpoint_kwargs() -> None:
    rules = parse_rules({"default": "0", "rules": {"1": ["who"], "0": ["how many"]}}).to_json()
    model = build_model("regex", vocab_size=len(WORDS), num_classes=2, rules=rules, vocab=WORDS)
    json.dumps(rules)
    ids, lengths = batch([["who"], ["how", "many"], ["the"]], WORDS)
    assert model(ids, lengths).argmax(-1).tolist() == [1, 0, 0]


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([], "expected a JSON object"),
        ({}, "non-empty object"),
        ({"HUM": []}, "non-empty list"),
        ({"HUM": ["who ("]}, "label 'HUM', rule 1"),
        ({"HUM": ["who", 3]}, "rule 2"),
        ({"rules": {"HUM": ["who"]}, "fallback": "HUM"}, "unknown keys"),
        ({"rules": {"HUM": ["who"]}, "default": 3}, "default"),
    ],
)
def test_bad_rule_sets(rules: object, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        parse_rules(rules)


def test_bad_rules_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text('{\n  "HUM": ["who"],\n  "NUM" ["how"]\n}\n')
    with pytest.raises(RuleError, match="line 3"):
        load_rules(path)
    with pytest.raises(RuleError, match=r"(?i)no such file"):
        load_rules(tmp_path / "missing.json")


def test_bad_classifier_inputs() -> None:
    with pytest.raises(RuleError, match="not a class of the data"):
        RegexClassifier.from_rules({"HUM": ["who"]}, WORDS, labels=["DESC", "LOC"])
    with pytest.raises(RuleError, match="needs rules"):
        build_model("regex", vocab_size=len(WORDS), num_classes=2)
    with pytest.raises(RuleError, match=r"ids 0\.\.1"):
        build_model("regex", vocab_size=len(WORDS), num_classes=2, rules={"HUM": ["who"]}, vocab=WORDS)
    with pytest.raises(RuleError, match="weighted rules"):
        RegexClassifier.from_rules({"HUM": ["who<0.5>"]}, WORDS)
    with pytest.raises(RuleError, match="init"):
        RegexClassifier.from_rules({"HUM": ["who"]}, WORDS, init="glove")
    for gain in (0.0, -1.0, float("nan")):
        with pytest.raises(RuleError, match="gain"):
            RegexClassifier.from_rules({"HUM": ["who"]}, WORDS, gain=gain)
    with pytest.raises(RuleError, match="vocab"):
        RegexClassifier.from_rules({"HUM": ["who"]}, ["who", "what"])
    model = RegexClassifier.from_rules({"HUM": ["who"], "NUM": ["how"]}, WORDS)
    with pytest.raises(LayerError, match="tokens"):
        model(torch.tensor([[len(WORDS)]]), torch.tensor([1]))
    with pytest.raises(RuleError, match="threshold"):
        read_back(model, threshold=1.5)
    empty = model(torch.zeros(0, 0, dtype=torch.long), torch.zeros(0, dtype=torch.long))
    assert empty.shape == (0, 2)


def test_bad_layer_inputs() -> None:
    with pytest.raises(RuleError, match="non-empty list"):
        AutomatonLayer([], WORDS, 4)
    with pytest.raises(RuleError, match="semiring"):
        AutomatonLayer([regex("who", "real"), regex("who", "log")], WORDS, 4)
    with pytest.raises(RuleError, match="exp"):
        AutomatonLayer([regex("who", "min-plus")], WORDS, 4)
    with pytest.raises(RuleError, match="no consuming arc"):
        AutomatonLayer([regex("()", "real")], WORDS, 4)


@pytest.mark.slow
def test_tour_section_round_trip(tmp_path: Path) -> None:
    from rich.console import Console

    from kleene.tour import TourContext, rules_round_trip

    context = TourContext(tmp_path, Console(file=None, quiet=True), seed=0, quick=True)
    rules_round_trip(context)
    found = context.results["rules"]
    assert found["zero_shot"] == found["rules_alone"]  # the rules' own vocabulary view is the network's here
    assert len(found["readback"]) == 11 and all(r.fidelity is not None for r in found["readback"])


def test_the_layer_checks_its_inputs() -> None:
    layer = AutomatonLayer([regex("who .", "max-times")], WORDS, 4, backend="torch")
    ids, lengths = batch([["who", "is"]], WORDS)
    vectors = torch.zeros(1, 2, 4)
    assert layer(ids, vectors, lengths).shape == (1, 1)
    with pytest.raises(RuleError, match=r"tokens must be ids in 0\.\.11"):
        layer(torch.tensor([[12, 2]]), vectors, lengths)
    with pytest.raises(RuleError, match=r"vectors have shape \(1, 2, 3\)"):
        layer(ids, torch.zeros(1, 2, 3), lengths)
    with pytest.raises(RuleError, match="real floating"):
        layer(ids, torch.zeros(1, 2, 4, dtype=torch.long), lengths)
    with pytest.raises(RuleError, match="lengths"):
        layer(ids, vectors, torch.tensor([3]))
    with pytest.raises(RuleError, match="threshold"):
        hard_automata(layer, torch.zeros(len(WORDS), 4), threshold=0)
    with pytest.raises(RuleError, match="embedding has shape"):
        hard_automata(layer, torch.zeros(3, 4))
    with pytest.raises(RuleError, match="leak"):
        AutomatonLayer([regex("who", "max-times")], WORDS, 4, leak=True)  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_experiment_at_its_smallest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TREC_RULES.parents[1]))
    import rules_trec  # type: ignore[import-not-found]

    args = ["--datasets", "trec", "--fractions", "0.01", "--seeds", "0", "--epochs", "1", "--min-steps", "2"]
    assert rules_trec.main([*args, "--threads", "1", "--out", str(tmp_path)]) == 0
    found = json.loads((tmp_path / "rules_trec.json").read_text())
    assert [r["arm"] for r in found["runs"]] == ["rules", "rules-leak", "random"]
    for run in found["runs"][:2]:  # before training, both rule-initialised networks are the rules
        assert run["zero_shot_test"] == found["rules_alone"]["test"]
    assert "| 1% | 49 |" in (tmp_path / "rules_trec.md").read_text()
    assert len(load_rules(TREC_RULES.parent / "sst2.json").flat()) >= 5
