"""Rules (issue 23): whole-sentence rules and label priorities against a plain-Python oracle, one read-back
threshold, rules read back as written when nothing changed, the trainer keeping a rule-initialised network that
training made worse, and bad rules files as one-line errors."""

from __future__ import annotations

import inspect
import itertools
import json
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from kleene.data import ClassificationData, Example, Vocabulary
from kleene.errors import RuleError
from kleene.extract import READ_BACK_THRESHOLD, hard_automata, read_back
from kleene.nn import build_model
from kleene.nn.checkpoint import save_checkpoint
from kleene.nn.rules import (
    RegexClassifier,
    RulesPredictor,
    load_rules,
    parse_rules,
)
from kleene.nn.training import TrainConfig, Trainer

WORDS = ["<pad>", "<unk>", "who", "name", "is", "the", "capital", "where", "how", "many", "what", "which", "year"]

FA_RNN_STYLE = {
    "default": "OTHER",
    "match": "sentence",
    "priority": ["NUM", "HUM", "LOC"],
    "rules": {
        "HUM": ["who .*", {"regex": "name", "match": "span"}],
        "LOC": [". is the capital", "where .*"],
        "NUM": [".* how many .*", "[what which] year"],
    },
}


def oracle(tokens: Sequence[str]) -> str:
    """The rule set above, written by hand in plain Python (words outside WORDS are <unk>)."""
    t = [w if w in WORDS else "<unk>" for w in tokens]
    fired = {
        "HUM": (len(t) >= 1 and t[0] == "who") or "name" in t,
        "LOC": (len(t) == 4 and t[1:] == ["is", "the", "capital"]) or (len(t) >= 1 and t[0] == "where"),
        "NUM": any(t[i : i + 2] == ["how", "many"] for i in range(len(t)))
        or (len(t) == 2 and t[0] in ("what", "which") and t[1] == "year"),
    }
    return next((label for label in ("NUM", "HUM", "LOC") if fired[label]), "OTHER")


def sentences() -> list[list[str]]:
    """Every sentence of up to 3 words over a small alphabet (with an unknown word), and random longer ones."""
    alphabet = ["who", "name", "is", "capital", "where", "how", "many", "what", "year", "paris"]
    every = [list(s) for n in range(4) for s in itertools.product(alphabet, repeat=n)]
    rng = random.Random(0)
    every += [[rng.choice([*alphabet, "the"]) for _ in range(rng.randint(4, 7))] for _ in range(300)]
    every += [["x", "is", "the", "capital"], ["how", "many", "is", "the", "capital"], ["which", "year"]]
    return every


def batch(rows: list[list[str]], vocab: Vocabulary) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(r) for r in rows])
    ids = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = torch.tensor(vocab.encode(row), dtype=torch.long)
    return ids, lengths


def test_a_rule_set_round_trips_through_its_json_and_a_checkpoint_rebuild() -> None:
    # before the test below: its forward under gradients builds the rules' kernels with their backward, in one
    # library each, which the forward-only test below then loads
    ruleset = parse_rules(FA_RNN_STYLE)
    again = parse_rules(json.loads(json.dumps(ruleset.to_json())))
    assert again == ruleset and again.whole_sentence() == [True, False, True, True, True, True]
    rebuilt = build_model("regex", vocab_size=len(WORDS), num_classes=4, rules=ruleset.to_json(), vocab=WORDS,
                          labels=["HUM", "LOC", "NUM", "OTHER"])  # fmt: skip
    model = RegexClassifier.from_rules(FA_RNN_STYLE, WORDS)
    rebuilt.load_state_dict(model.state_dict())
    ids, lengths = batch([["who", "is"], ["how", "many", "who"], ["name", "is", "the", "capital"]], Vocabulary(WORDS))
    assert torch.equal(rebuilt(ids, lengths), model(ids, lengths))
    assert parse_rules({"HUM": ["who"]}).to_json() == {"default": "HUM", "rules": {"HUM": ["who"]}}  # as before


@pytest.mark.slow
def test_sentence_rules_and_priorities_compile_to_exactly_the_rules_predictions() -> None:
    rows = sentences()
    vocab = Vocabulary(WORDS)
    model = RegexClassifier.from_rules(FA_RNN_STYLE, WORDS).eval()
    labels = [*parse_rules(FA_RNN_STYLE).labels, "OTHER"]
    with torch.no_grad():
        predicted = [labels[int(i)] for i in model(*batch(rows, vocab)).argmax(-1)]
    expected = [oracle(row) for row in rows]
    assert predicted == expected
    assert [RulesPredictor(FA_RNN_STYLE, WORDS).predict(row) for row in rows] == expected
    assert {"NUM", "HUM", "LOC", "OTHER"} <= set(expected)  # every label is exercised
    assert model.layer is not None and model.sentence_layer is not None
    assert model.layer.num_automata == 1 and model.sentence_layer.num_automata == 5


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"rules": {"HUM": ["who"]}, "match": "whole"}, r"'match' must be one of \['span', 'sentence'\]"),
        ({"rules": {"HUM": [{"regex": "who", "match": 1}]}}, r"label 'HUM', rule 1: 'match' must be"),
        ({"rules": {"HUM": [{"re": "who"}]}}, r"a rule object has 'regex'"),
        ({"rules": {"HUM": ["who"], "LOC": ["where"]}, "priority": ["HUM"]}, "'priority' must list each label"),
        ({"rules": {"HUM": ["who"], "LOC": ["where"]}, "priority": ["HUM", "HUM"]}, "'priority' must list"),
        ({"rules": {"HUM": ["who"]}, "priority": "HUM"}, "'priority' must list"),
    ],
)
def test_bad_sentence_rules_and_priorities(rules: object, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        parse_rules(rules)


def test_an_unchanged_rule_reads_back_in_its_own_word_order() -> None:
    model = RegexClassifier.from_rules({"DESC": ["[what which name] is"], "HUM": ["who"]}, [*WORDS[:2], "who", "is",
                                       "what", "which", "name"])  # fmt: skip
    desc, hum = read_back(model)
    assert desc.regex == "[what which name] is" and hum.regex == "who"


def drop_big_halfway(model: RegexClassifier) -> None:
    """'big' now weighs exp(-0.5) = 0.61 of its rule weight on every arc: kept at 0.5, dropped at 0.7."""
    layer = model.layer
    assert layer is not None
    with torch.no_grad():
        model.embedding.weight.zero_()
        model.embedding.weight[WORDS2.index("big"), 0] = 1.0
        layer.residual[:, 0] = -0.5


WORDS2 = ["<pad>", "<unk>", "how", "many", "big", "who"]


def test_one_read_back_threshold_for_read_back_and_the_report(tmp_path: Path) -> None:
    from kleene.cli import main

    assert inspect.signature(read_back).parameters["threshold"].default == READ_BACK_THRESHOLD
    assert inspect.signature(hard_automata).parameters["threshold"].default == READ_BACK_THRESHOLD
    rules = {"NUM": ["how [many big]"], "HUM": ["who"]}
    model = RegexClassifier.from_rules(rules, WORDS2, embedding_dim=4)
    drop_big_halfway(model)
    assert read_back(model)[0].regex == "how [many big]"  # 0.61 >= 0.5
    assert read_back(model, threshold=0.7)[0].regex == "how many"
    kwargs = {"rules": parse_rules(rules).to_json(), "vocab": WORDS2, "labels": ["NUM", "HUM"], "embedding_dim": 4,
              "vocab_size": len(WORDS2), "num_classes": 2}  # fmt: skip
    save_checkpoint(tmp_path / "run", model, model_name="regex", model_kwargs=kwargs, vocab=Vocabulary(WORDS2))
    assert main(["report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html"), "--no-progress"]) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<code>how [many big]</code></td><td>—</td><td>—</td>" in page  # as read_back() reads it: nothing lost
    assert f"at least {READ_BACK_THRESHOLD} times its original weight" in page


def test_training_never_returns_a_rule_network_worse_on_dev_than_its_rules() -> None:
    """The training labels contradict the rules (and the dev labels, which the rules get right): every step makes
    the network worse on dev, so the trainer must return the untrained, rule-exact network."""
    rules = {"default": "0", "rules": {"1": ["good"], "0": ["bad"]}}
    words = ["<pad>", "<unk>", "good", "bad", "film"]
    train = [Example(("good", "film"), 0), Example(("bad", "film"), 1)] * 8
    dev = [Example(("good",), 1), Example(("bad", "film"), 0), Example(("film", "good"), 1), Example(("bad",), 0)]
    data = ClassificationData("contradicting", train, dev, dev, 2, ("0", "1"))
    kwargs = {"rules": parse_rules(rules).to_json(), "vocab": words, "labels": ["0", "1"], "embedding_dim": 4,
              "vocab_size": len(words), "num_classes": 2}  # fmt: skip
    model = build_model("regex", **kwargs)
    config = TrainConfig(epochs=3, batch_size=4, lr=0.5, progress=False, patience=100)
    trainer = Trainer(model, data, Vocabulary(words), config, model_name="regex", model_kwargs=kwargs)
    assert trainer.evaluate("dev")["accuracy"] == 1.0  # the rules are right on dev
    result = trainer.fit()
    assert result.metrics["dev_accuracy"] == 1.0 and result.metrics["best_step"] == 0
    assert all(point["dev_accuracy"] < 1.0 for point in result.curve)  # every trained candidate was worse


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"HUM": ["who \xff"]}', r"not UTF-8 text \(byte 14"),
        (b"[" * 100_000 + b"]" * 100_000, "JSON nested deeper than 64 levels"),
    ],
)
def test_bad_rules_files_are_rule_errors(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "rules.json"
    path.write_bytes(content)
    with pytest.raises(RuleError, match=message):
        load_rules(path)


def test_a_label_in_other_digits_is_not_a_class_id() -> None:
    with pytest.raises(RuleError, match=r"rule label '١': the data's classes are the ids 0\.\.1, written in ASCII"):
        build_model("regex", vocab_size=len(WORDS2), num_classes=2, rules={"١": ["who"]}, vocab=WORDS2)
    for label in ("01", "+1", "１"):
        with pytest.raises(RuleError, match="ASCII digits"):
            build_model("regex", vocab_size=len(WORDS2), num_classes=2, rules={label: ["who"]}, vocab=WORDS2)


def test_the_cli_says_one_line_for_bad_rules_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kleene.cli import main

    cases = [
        (b'{"HUM": ["who \xff"]}', "trec", "not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, "trec", "nested deeper than 64"),
        ('{"default": "0", "rules": {"١": ["good"]}}'.encode(), "sst2", "written in ASCII digits"),
    ]
    for n, (content, data, message) in enumerate(cases):
        path = tmp_path / f"rules{n}.json"
        path.write_bytes(content)
        out = tmp_path / f"run{n}"
        args = ["train", "regex", "--data", data, "--rules", str(path), "--out", str(out), "--pretrained", "none"]
        assert main([*args, "--no-progress", "--max-steps", "1"]) == 1
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and "internal error" not in err
