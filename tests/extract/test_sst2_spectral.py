"""Spectral extraction over a restricted vocabulary: batched Hankel blocks of recurrent functions; the SST-2 demo."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kleene.extract.spectral import (
    Fidelity,
    RecurrentFunction,
    RestrictedVocabulary,
    SpectralError,
    hankel_blocks,
    recurrent_hankel_blocks,
    sample_basis,
    spectral_from_hankel,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sst2_spectral.py"
ALPHABET = ["the", "film", "good", "bad", "."]


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("sst2_spectral", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the example's dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def random_sentences(seed: int, count: int = 60, longest: int = 7) -> list[tuple[str, ...]]:
    rng = np.random.default_rng(seed)
    return [tuple(rng.choice(ALPHABET, size=rng.integers(0, longest + 1))) for _ in range(count)]


def tanh_rnn(seed: int, size: int = 4) -> tuple[RecurrentFunction, Any]:
    """A random tanh Elman network as a batched RecurrentFunction, and the same network scored string by string."""
    rng = np.random.default_rng(seed)
    inputs, recurrent = rng.normal(size=(len(ALPHABET), size)), rng.normal(scale=0.7, size=(size, size))
    initial, readout = rng.normal(size=size), rng.normal(size=size)

    def step(states: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        return np.tanh(states @ recurrent + inputs[symbols])

    def one_by_one(strings: Any) -> np.ndarray:
        out = []
        for string in strings:
            h = initial
            for word in string:
                h = np.tanh(h @ recurrent + inputs[ALPHABET.index(word)])
            out.append(h @ readout)
        return np.array(out)

    return RecurrentFunction(ALPHABET, initial, step, lambda states: states @ readout), one_by_one


def wfsa_as_recurrent(seed: int, states: int = 3) -> tuple[RecurrentFunction, Any]:
    """A random real WFSA run as a recurrent function (state = forward row vector), and its direct matrix products."""
    rng = np.random.default_rng(seed)
    initial, final = rng.normal(size=states), rng.normal(size=states)
    matrices = np.stack([rng.normal(scale=0.5, size=(states, states)) for _ in ALPHABET])

    def direct(strings: Any) -> np.ndarray:
        out = []
        for string in strings:
            v = initial
            for word in string:
                v = v @ matrices[ALPHABET.index(word)]
            out.append(v @ final)
        return np.array(out)

    step = lambda rows, symbols: np.einsum("bi,bij->bj", rows, matrices[symbols])  # noqa: E731
    return RecurrentFunction(ALPHABET, initial, step, lambda rows: rows @ final), direct


def test_recurrent_function_scores_every_string_as_the_loop_does() -> None:
    batched, one_by_one = tanh_rnn(seed=0)
    strings = [*random_sentences(1), (), ("the",), ("the",), ("the", "film")]
    np.testing.assert_allclose(batched(strings), one_by_one(strings), rtol=0, atol=1e-12)
    assert batched.states([()]).shape == (1, 4)


def test_recurrent_hankel_blocks_equal_the_generic_ones() -> None:
    """The cached-state, suffix-trie computation against listing every p σ s and scoring it separately."""
    batched, one_by_one = tanh_rnn(seed=2)
    sentences = random_sentences(3)
    prefixes, suffixes = sample_basis(sentences, 25), sample_basis(sentences, 18, suffixes=True)
    assert any(len(s) >= 2 for s in suffixes) and any(len(p) >= 2 for p in prefixes)
    fast, fast_blocks = recurrent_hankel_blocks(batched, prefixes, suffixes)
    slow, slow_blocks = hankel_blocks(one_by_one, prefixes, suffixes, ALPHABET)
    assert fast.shape == (25, 18)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
    assert list(fast_blocks) == ALPHABET
    for word in ALPHABET:
        np.testing.assert_allclose(fast_blocks[word], slow_blocks[word], rtol=0, atol=1e-12)


def test_a_wfsa_is_recovered_from_recurrent_blocks() -> None:
    batched, direct = wfsa_as_recurrent(seed=4)
    sentences = random_sentences(5, count=200, longest=4)
    prefixes, suffixes = sample_basis(sentences, 40), sample_basis(sentences, 40, suffixes=True)
    hankel, per_symbol = recurrent_hankel_blocks(batched, prefixes, suffixes)
    result = spectral_from_hankel(hankel, per_symbol, prefixes, suffixes)
    assert result.rank == 3
    held_out = random_sentences(6, count=50, longest=15)
    # float64: ~ eps * cond (sigma_1 / sigma_3 ~ 4) * length (15) * max |f| (2.4) ~ 1e-13 (observed 4e-15); see
    # test_spectral.test_recovers_a_rank_three_wfsa_exactly
    assert Fidelity.of(direct(held_out), result.scores(held_out)).max_abs_error < 1e-8


def test_bad_input_is_named() -> None:
    batched, _ = tanh_rnn(seed=0)
    with pytest.raises(SpectralError, match="'great' of string"):
        batched([("the", "great")])
    with pytest.raises(SpectralError, match="empty string"):
        recurrent_hankel_blocks(batched, [("the",)], [()])
    hankel, per_symbol = recurrent_hankel_blocks(batched, [(), ("the",)], [(), (".",)])
    per_symbol["bad"] = per_symbol["bad"][:1]
    with pytest.raises(SpectralError, match="'bad' has shape"):
        spectral_from_hankel(hankel, per_symbol, [(), ("the",)], [(), (".",)])
    with pytest.raises(SpectralError, match="'<other>' for words off the list is itself one of the words"):
        RestrictedVocabulary(("the", "<other>"))
    with pytest.raises(SpectralError, match="'<c>' for words off the list is itself"):
        RestrictedVocabulary(("the", "<c>"), classes={"film": "<c>"})
    with pytest.raises(SpectralError, match="'the' is both listed and given a class"):
        RestrictedVocabulary(("the",), classes={"the": "<c>"})
    with pytest.raises(SpectralError, match="at least one word"):
        RestrictedVocabulary.most_frequent([["a"]], 0)
    with pytest.raises(SpectralError, match="equal, nonempty"):
        Fidelity.of(np.zeros(3), np.zeros(2))


def test_restricted_vocabulary() -> None:
    sentences = [["the", "film", "is", "good"], ["the", "film", "is", "bad"], ["the", "plot"]]
    restricted = RestrictedVocabulary.most_frequent(sentences, 3)
    assert restricted.words == ("the", "film", "is")
    assert restricted.alphabet == ["the", "film", "is", "<other>"]
    assert restricted.map(["the", "plot", "is", "dull"]) == ("the", "<other>", "is", "<other>")
    grouped = RestrictedVocabulary(("the",), classes={"good": "<pos>", "dull": "<neg>", "fine": "<pos>"})
    assert grouped.alphabet == ["the", "<pos>", "<neg>", "<other>"]
    assert grouped.map(["the", "dull", "plot", "fine"]) == ("the", "<neg>", "<other>", "<pos>")


def test_fidelity_of_counts_decisions() -> None:
    report = Fidelity.of(np.array([0.2, 0.7, 0.9]), np.array([0.4, 0.4, 0.95]), threshold=0.5)
    assert report.strings == 3 and report.agreement == pytest.approx(2 / 3)
    assert report.mean_abs_error == pytest.approx((0.2 + 0.3 + 0.05) / 3)
    assert report.max_abs_error == pytest.approx(0.3)


TRAIN = [["the", "film", "is", "good"], ["the", "plot", "is", "dull"], ["the", "film", "is", "bad", "dull"]]
SENTENCES = [["the", "film"], ["the", "plot", "is", "dull"], ["bad"], ["is", "the", "film", "good", "the"], ["odd"]]


def classifier_with_symbol_rows(example: Any, symbols: dict[str, list[str]]) -> tuple[Any, Any]:
    """A small random classifier whose vocabulary also holds each symbol as a token, its embedding row set to the
    plain mean of the rows of the listed training tokens: the oracle reads a symbol as an ordinary word."""
    from kleene.data import Vocabulary

    vocab = Vocabulary(["<pad>", "<unk>", "the", "film", "is", "good", "bad", "dull", "plot", "odd", *symbols])
    torch.manual_seed(0)
    model = example.PrefixLSTMClassifier(len(vocab), hidden_size=8).eval()
    with torch.no_grad():
        for symbol, tokens in symbols.items():
            model.embedding.weight[vocab.index(symbol)] = model.embedding.weight[vocab.encode(tokens)].mean(0)
    return model, vocab


def test_lstm_string_function_equals_the_classifier() -> None:
    """The step-by-step scalar over the restricted alphabet equals the module's packed forward, with <other> read as
    the count-weighted mean embedding of the training tokens outside the list."""
    example = load_example()
    model, vocab = classifier_with_symbol_rows(example, {"<other>": ["good", "plot", "dull", "bad", "dull"]})
    restricted = RestrictedVocabulary.most_frequent(TRAIN, 3)  # the, is, film
    f = example.lstm_string_function(model, vocab, restricted, TRAIN)
    mapped = [restricted.map(s) for s in SENTENCES]
    np.testing.assert_allclose(f(mapped), example.sentence_logits(model, vocab, mapped), atol=1e-5)
    bias = model.out.bias.detach()
    assert f([()])[0] == pytest.approx(float(bias[1] - bias[0]), abs=1e-6)


def test_lstm_string_function_with_word_classes() -> None:
    """Each class symbol reads the count-weighted mean embedding of its training tokens; a class without training
    tokens the mean of its words; <other> (words of no class) the mean of all the training tokens off the list."""
    example = load_example()
    classes = {"good": "<c1>", "plot": "<c0>", "dull": "<c0>", "bad": "<c0>", "odd": "<c2>"}
    symbols = {
        "<c1>": ["good"],
        "<c0>": ["plot", "dull", "bad", "dull"],
        "<c2>": ["odd"],
        "<other>": ["good", "plot", "dull", "bad", "dull"],
    }
    model, vocab = classifier_with_symbol_rows(example, symbols)
    restricted = RestrictedVocabulary(("the", "film", "is"), classes=classes)
    assert restricted.alphabet == ["the", "film", "is", "<c1>", "<c0>", "<c2>", "<other>"]
    f = example.lstm_string_function(model, vocab, restricted, TRAIN)
    mapped = [restricted.map([*s, "unseen"]) for s in SENTENCES]
    assert mapped[-1] == ("<c2>", "<other>")
    np.testing.assert_allclose(f(mapped), example.sentence_logits(model, vocab, mapped), atol=1e-5)


def test_polarity_classes_are_ordered_by_the_single_word_logit() -> None:
    example = load_example()
    model, vocab = classifier_with_symbol_rows(example, {})
    classes = example.polarity_classes(model, vocab, ["the", "is"], TRAIN, 2)
    assert set(classes) == {"film", "good", "bad", "dull", "plot", "odd"}
    alone = dict(zip(classes, example.sentence_logits(model, vocab, [[w] for w in classes])))
    negative = [alone[w] for w, c in classes.items() if c == "<other:0>"]
    positive = [alone[w] for w, c in classes.items() if c == "<other:1>"]
    assert negative and positive and max(negative) <= min(positive)


@pytest.mark.slow
def test_quick_example_runs_and_reuses_its_checkpoint(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    example = load_example()
    assert example.main(["--quick", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "sst2_spectral.json").read_text())
    assert not report["lstm"]["cached"]
    for name in ("sst2_spectral.png", "sst2_spectral_singular_values.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (tmp_path / "sst2_spectral.md").read_text()
    assert "| words | scalar | lengths |" in text
    for row in report["sizes"]:
        assert row["alphabet"] == row["size"] + (row["classes"] if row["classes"] > 1 else 0) + 1
        assert row["hankel_entries"] == row["prefixes"] * row["suffixes"] * (row["alphabet"] + 1)
        for output in ("logit", "probability"):
            o = row["outputs"][output]
            values = np.array(o["singular_values"])
            assert np.all(np.diff(values) <= 1e-9) and o["chosen_rank"] >= 1
            assert {p["rank"] for p in o["sweep"]} >= {1, 2, 4, 8}
            assert sum(b["sentences"] for b in o["by_length"]) == 60
            # a rank-8 automaton follows the function it was learned from more closely than a rank-1 automaton
            errors = {p["rank"]: p["vs_lstm_mapped"]["mean_abs_error"] for p in o["sweep"]}
            assert errors[8] < errors[1]
        # the quick LSTM is trained enough to make decisions the small automata must follow
        logit = {p["rank"]: p["vs_lstm_mapped"]["agreement"] for p in row["outputs"]["logit"]["sweep"]}
        assert logit[8] >= 0.9
    assert example.main(["--quick", "--out", str(tmp_path)]) == 0
    again = json.loads((tmp_path / "sst2_spectral.json").read_text())
    assert again["lstm"]["cached"]
    assert again["lstm"]["dev_accuracy"] == report["lstm"]["dev_accuracy"]
    for first, second in zip(report["sizes"], again["sizes"]):  # the same checkpoint gives the same automata
        assert first["outputs"] == second["outputs"]
