"""Generation from language models, checked against one full forward pass of the generated text (the models are
causal, so the logits at each position of the final sequence are those the generator saw), brute force for beam
search, and the softmax distribution for sampling."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from kleene.errors import LayerError, ModelConfigError
from kleene.nn.generate import generate, next_token_log_probs
from kleene.nn.registry import build_model, model_builder, registered_models

VOCAB = 6


def _language_models() -> list[str]:
    names = []
    for name in registered_models():
        try:
            model = build_model(name, vocab_size=VOCAB, **_tiny(name))
        except ModelConfigError:  # a classifier: it needs num_classes
            continue
        if getattr(model, "task", None) == "language_model":
            names.append(name)
    return names


def _tiny(name: str) -> dict[str, int]:
    if name == "sopa" or getattr(model_builder(name), "task", None) == "classification":
        return {}
    return {"hidden_size": 4, "embedding_dim": 3}


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    lm = build_model("rrnn-f", vocab_size=VOCAB, hidden_size=5, embedding_dim=4, backend="torch").double()
    return lm.eval()


def _full_log_probs(model: torch.nn.Module, sequence: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([sequence]), torch.tensor([len(sequence)]))[0]
    return torch.log_softmax(logits.double(), -1)


@pytest.mark.parametrize("name", _language_models())
def test_every_language_model_is_causal(name: str) -> None:
    """Generation's precondition: changing a later token never changes an earlier position's logits."""
    torch.manual_seed(1)
    lm = build_model(name, vocab_size=VOCAB, **_tiny(name)).double().eval()
    a = torch.tensor([[1, 2, 3, 4, 5]])
    b = torch.tensor([[1, 2, 3, 5, 1]])
    lengths = torch.tensor([5])
    with torch.no_grad():
        la, lb = lm(a, lengths), lm(b, lengths)
    assert torch.equal(la[:, :3], lb[:, :3])


def test_greedy_takes_the_argmax_at_every_step(model: torch.nn.Module) -> None:
    prompt = [1, 2]
    result = generate(model, prompt, 8, strategy="greedy")
    assert len(result.tokens) == 8
    full = _full_log_probs(model, prompt + result.tokens)
    positions = range(len(prompt) - 1, len(prompt) - 1 + len(result.tokens))
    assert result.tokens == [int(torch.argmax(full[p])) for p in positions]
    expected = sum(float(full[p, token]) for p, token in zip(positions, result.tokens))
    assert result.log_prob == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_beam_search_finds_the_best_continuation_by_brute_force(model: torch.nn.Module) -> None:
    prompt = [3]
    best = max(
        itertools.product(range(VOCAB), repeat=2),
        key=lambda pair: float(_full_log_probs(model, prompt + list(pair))[0, pair[0]])
        + float(_full_log_probs(model, prompt + list(pair))[1, pair[1]]),
    )
    result = generate(model, prompt, 2, strategy="beam", beam_size=VOCAB * VOCAB)
    assert tuple(result.tokens) == best
    assert generate(model, prompt, 5, strategy="beam", beam_size=1).tokens == generate(model, prompt, 5).tokens


def test_beam_search_stops_at_a_stop_token(model: torch.nn.Module) -> None:
    greedy = generate(model, [1], 6).tokens
    stop = greedy[2]
    result = generate(model, [1], 6, strategy="beam", beam_size=1, stop=[stop])
    assert result.tokens == greedy[: greedy.index(stop) + 1]


def test_sampling_is_seeded_and_top1_is_greedy(model: torch.nn.Module) -> None:
    first = generate(model, [1, 2], 10, strategy="sample", seed=7)
    assert generate(model, [1, 2], 10, strategy="sample", seed=7) == first
    assert generate(model, [1, 2], 10, strategy="sample", top_k=1, seed=3).tokens == generate(model, [1, 2], 10).tokens


@pytest.mark.slow
def test_sampling_follows_the_tempered_softmax(model: torch.nn.Module) -> None:
    temperature, draws = 0.7, 3000
    with torch.no_grad():
        probs = torch.softmax(next_token_log_probs(model, [[4]])[0] / temperature, -1).numpy()
    counts = [0] * VOCAB
    for seed in range(draws):
        counts[generate(model, [4], 1, strategy="sample", temperature=temperature, seed=seed).tokens[0]] += 1
    for token in range(VOCAB):
        p = probs[token]
        # 5 standard deviations of a binomial count: fails by chance with probability < 1e-6 per token
        assert abs(counts[token] - draws * p) <= 5 * math.sqrt(draws * p * (1 - p)) + 1, (token, counts, probs)


@pytest.mark.parametrize(
    ("prompt", "steps", "options", "message"),
    [
        ([], 3, {}, "at least one token"),
        ([1, -2], 3, {}, r"prompt\[1\]"),
        ([1, VOCAB], 3, {}, "outside the vocabulary"),
        ([1], -1, {}, "max_new_tokens"),
        ([1], 2, {"strategy": "nucleus"}, "strategy"),
        ([1], 2, {"temperature": 0}, "temperature"),
        ([1], 2, {"top_k": 0}, "top_k"),
        ([1], 2, {"beam_size": 0}, "beam_size"),
    ],
)
def test_bad_arguments_are_named(
    model: torch.nn.Module, prompt: list[int], steps: int, options: dict, message: str
) -> None:
    with pytest.raises(LayerError, match=message):
        generate(model, prompt, steps, **options)


def test_a_classifier_is_refused() -> None:
    classifier = build_model("rrnn-b", vocab_size=VOCAB, num_classes=2, hidden_size=3, embedding_dim=50)
    with pytest.raises(LayerError, match="language model"):
        generate(classifier, [1], 2)


def test_zero_new_tokens_is_empty(model: torch.nn.Module) -> None:
    assert generate(model, [1], 0).tokens == []


def test_kleene_generate_continues_a_prompt(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from kleene.cli import main
    from kleene.data import PAD, UNK, Vocabulary
    from kleene.nn.checkpoint import load_checkpoint, save_checkpoint

    vocab = Vocabulary([PAD, UNK, *sorted(set("ROMEO: thanks"))])
    kwargs = {"vocab_size": len(vocab), "hidden_size": 6, "embedding_dim": 5}
    torch.manual_seed(2)
    lm = build_model("rrnn-c", **kwargs)
    save_checkpoint(
        tmp_path, lm, model_name="rrnn-c", model_kwargs=kwargs, vocab=vocab, metadata={"data": "tinyshakespeare"}
    )
    assert main(["generate", str(tmp_path), "--prompt", "ROMEO:", "--max-tokens", "12", "--strategy", "greedy"]) == 0
    printed = capsys.readouterr().out.rstrip("\n")
    expected = generate(load_checkpoint(tmp_path).model, vocab.encode(list("ROMEO:")), 12)
    assert printed == "ROMEO:" + "".join(vocab.decode(expected.tokens))
    assert main(["generate", str(tmp_path), "--prompt", "", "--max-tokens", "3"]) == 1
    assert "at least one token" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "options"), [("rrnn-f", {}), ("qrnn", {"window": 2})])
def test_streaming_decoding_equals_rereading_the_prefix(name: str, options: dict) -> None:
    """Models with ``stream`` are fed one token per step from their carried state; the result must be what the
    prefix-rereading decoder (used for models without ``stream``) gives."""
    torch.manual_seed(4)
    lm = build_model(name, vocab_size=VOCAB, hidden_size=5, embedding_dim=4, **options).double().eval()
    assert callable(getattr(lm, "stream", None))

    class Rereading(torch.nn.Module):  # the same model without its stream method
        task = "language_model"

        def __init__(self) -> None:
            super().__init__()
            self.inner = lm

        def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            return self.inner(tokens, lengths)

    for options_ in ({"strategy": "greedy"}, {"strategy": "beam", "beam_size": 3}, {"strategy": "sample", "seed": 5}):
        streamed, reread = generate(lm, [1, 2, 3], 7, **options_), generate(Rereading(), [1, 2, 3], 7, **options_)
        assert streamed.tokens == reread.tokens, options_
        assert streamed.log_prob == pytest.approx(reread.log_prob, rel=1e-9, abs=1e-9)
