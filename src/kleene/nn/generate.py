"""Text generation from a trained language model: greedy decoding, sampling (temperature, top-k), beam search.

Every ``*-lm`` model maps ``(tokens (B, T), lengths (B,))`` to next-token logits ``(B, T, V)`` and is causal (the
logits at step t read tokens up to t only). Generation feeds the growing prefixes back through the model and reads
the logits at each prefix's last position. A model with ``stream(tokens, states) -> (logits, states)`` (the rational
language models: ``RationalLanguageModel.stream``, windowed layers included) is instead fed one token per step from
its carried state, so a continuation of n tokens costs n steps; other models re-read the prefix at each step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

from kleene.errors import LayerError
from kleene.nn.modes import inference

__all__ = ["Generation", "generate", "next_token_log_probs"]

Strategy = Literal["greedy", "sample", "beam"]
STRATEGIES: tuple[str, ...] = ("greedy", "sample", "beam")


@dataclass(frozen=True)
class Generation:
    """The generated continuation (token ids, without the prompt) and its log-probability under the model."""

    tokens: list[int]
    log_prob: float


def _vocabulary_size(model: nn.Module) -> int:
    """The size of the model's input vocabulary: its ``embedding``'s rows when it has one (every kleene language
    model), else found by one forward step on the padding id 0, which every model reads."""
    embedding = getattr(model, "embedding", None)
    if isinstance(embedding, nn.Embedding):
        return int(embedding.num_embeddings)
    return int(next_token_log_probs(model, [[0]]).shape[-1])


def next_token_log_probs(model: nn.Module, prefixes: Sequence[Sequence[int]]) -> Tensor:
    """log p(next token | prefix) for each prefix, shape (len(prefixes), V); every prefix must be non-empty."""
    lengths = torch.tensor([len(p) for p in prefixes], dtype=torch.int64)
    tokens = torch.zeros((len(prefixes), int(lengths.max())), dtype=torch.int64)
    for row, prefix in enumerate(prefixes):
        tokens[row, : len(prefix)] = torch.tensor(list(prefix), dtype=torch.int64)
    device = _device(model)
    logits = model(tokens.to(device), lengths.to(device)).cpu()  # (decoding runs on the CPU: same draws anywhere)
    last = logits[torch.arange(len(prefixes)), lengths - 1]
    return torch.log_softmax(last.double(), dim=-1)


def _device(model: nn.Module) -> torch.device:
    """The model's device (its first parameter's; the CPU without parameters)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def _check(model: nn.Module, prompt: Sequence[int], max_new_tokens: int, options: dict[str, object]) -> list[int]:
    if getattr(model, "task", None) != "language_model":
        raise LayerError(
            f"generate: model must be a language model (task 'language_model'), got {type(model).__name__}"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise LayerError(f"generate: max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    ids = _token_ids(prompt, "prompt")
    if not ids:
        raise LayerError("generate: prompt must hold at least one token id (the model needs a context to continue)")
    strategy = options["strategy"]
    if strategy not in STRATEGIES:
        raise LayerError(f"generate: strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    temperature = options["temperature"]
    if (
        not isinstance(temperature, (int, float))
        or isinstance(temperature, bool)
        or not temperature > 0
        or not math.isfinite(temperature)
    ):
        raise LayerError(f"generate: temperature must be a finite number > 0, got {temperature!r}")
    seed = options["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64):
        raise LayerError(f"generate: seed must be None or an integer in [0, 2**64), got {seed!r}")
    for name in ("top_k", "beam_size"):
        value = options[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise LayerError(f"generate: {name} must be an integer >= 1, got {value!r}")
    return ids


def _token_ids(values: Any, argument: str) -> list[int]:
    """Token ids as ints: a sequence of ints, numpy integers or integer scalar tensors, a 1-D integer numpy array
    or tensor.

    Raises:
        LayerError: anything else (naming the argument, the position and what it got).
    """
    if isinstance(values, (torch.Tensor, np.ndarray)) and values.ndim != 1:
        raise LayerError(f"generate: {argument} must be one sequence of token ids, got an array of shape "
                         f"{tuple(values.shape)}")
    try:
        items = list(values)
    except TypeError:
        raise LayerError(f"generate: {argument} must be a sequence of token ids, got {values!r}") from None
    ids = []
    for position, token in enumerate(items):
        value: Any = token
        if isinstance(token, torch.Tensor):
            integral = token.ndim == 0 and not token.dtype.is_floating_point and not token.dtype.is_complex
            value = int(token) if integral and token.dtype != torch.bool else None
        elif isinstance(token, np.integer):
            value = int(token)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise LayerError(
                f"generate: {argument}[{position}] must be a token id >= 0 (an int, a numpy integer or an integer "
                f"tensor), got {token!r}"
            )
        ids.append(value)
    return ids


def generate(
    model: nn.Module,
    prompt: Sequence[int],
    max_new_tokens: int,
    *,
    strategy: Strategy = "greedy",
    temperature: float = 1.0,
    top_k: int | None = None,
    beam_size: int = 4,
    stop: Sequence[int] = (),
    seed: int | None = None,
) -> Generation:
    """Continue ``prompt`` (token ids) by at most ``max_new_tokens`` tokens.

    - ``greedy``: the most likely next token at each step;
    - ``sample``: a draw from softmax(logits / ``temperature``), restricted to the ``top_k`` most likely tokens when
      given (seeded by ``seed``: the same seed gives the same text);
    - ``beam``: beam search with ``beam_size`` hypotheses, returning the most likely continuation found.
    Generation ends early after a token of ``stop`` (which is kept). ``log_prob`` is the model's log-probability of
    the continuation (at temperature 1, whatever the strategy).

    Caution:
        The model runs in eval mode (dropout off) for the call and is restored to its mode afterwards.
    Token ids may be ints, numpy integers or integer tensors (a 1-D array or tensor as a whole). ``seed`` is None
    or an integer in [0, 2**64) (``torch.Generator.manual_seed``'s range).

    Raises:
        LayerError: not a language model, an empty prompt, a token id outside the vocabulary, or a bad option
            (``temperature`` must be finite and > 0).
    """
    options: dict[str, object] = {
        "strategy": strategy,
        "temperature": temperature,
        "top_k": top_k,
        "beam_size": beam_size,
        "seed": seed,
    }
    ids = _check(model, prompt, max_new_tokens, options)
    stop_ids = _token_ids(stop, "stop")
    with inference(model):
        vocabulary = _vocabulary_size(model)
        for position, token in enumerate(ids):
            if token >= vocabulary:
                raise LayerError(
                    f"generate: prompt[{position}] = {token} is outside the vocabulary (size {vocabulary})"
                )
        stops = set(stop_ids)
        if strategy == "beam":
            return _beam(model, ids, max_new_tokens, beam_size, stops)
        return _left_to_right(model, ids, max_new_tokens, strategy, temperature, top_k, stops, seed)


class _Decoder:
    """Next-token log-probabilities for a batch of hypotheses that grow one token per step."""

    def __init__(self, model: nn.Module, prompt: list[int], rows: int):
        self.model = model
        self.stream: Any = getattr(model, "stream", None)
        self.streaming = callable(self.stream)
        self.prefixes = [list(prompt) for _ in range(rows)]
        self.states: Any = None
        self.log_probs = self._first(prompt, rows)

    def _first(self, prompt: list[int], rows: int) -> Tensor:
        if not self.streaming:
            return next_token_log_probs(self.model, self.prefixes)
        prompts = torch.tensor([prompt] * rows, dtype=torch.int64, device=_device(self.model))
        logits, self.states = self.stream(prompts)
        return torch.log_softmax(logits[:, -1].double().cpu(), dim=-1)

    def advance(self, rows: Sequence[int], tokens: Sequence[int]) -> None:
        """Keep hypotheses ``rows`` (in this order; a row may repeat), extended by ``tokens``."""
        self.prefixes = [[*self.prefixes[r], token] for r, token in zip(rows, tokens)]
        if not self.streaming:
            self.log_probs = next_token_log_probs(self.model, self.prefixes)
            return
        device = _device(self.model)
        index = torch.tensor(list(rows), dtype=torch.int64, device=device)
        states = [type(s)(*(None if f is None else f.index_select(0, index) for f in s)) for s in self.states]
        logits, self.states = self.stream(torch.tensor([[token] for token in tokens], device=device), states)
        self.log_probs = torch.log_softmax(logits[:, -1].double().cpu(), dim=-1)


def _left_to_right(
    model: nn.Module,
    ids: list[int],
    steps: int,
    strategy: str,
    temperature: float,
    top_k: int | None,
    stops: set[int],
    seed: int | None,
) -> Generation:
    rng = torch.Generator().manual_seed(seed) if seed is not None else None
    decoder = _Decoder(model, ids, 1) if steps else None
    tokens: list[int] = []
    total = 0.0
    for _ in range(steps):
        assert decoder is not None
        log_probs = decoder.log_probs[0]
        if strategy == "greedy":
            token = int(torch.argmax(log_probs))
        else:
            scores = (log_probs - log_probs.max()) / temperature  # the best at 0: no inf - inf at tiny temperatures
            if top_k is not None and top_k < scores.numel():
                threshold = torch.topk(scores, top_k).values[-1]
                scores = torch.where(scores >= threshold, scores, torch.full_like(scores, -torch.inf))
            token = int(torch.multinomial(torch.softmax(scores, -1), 1, generator=rng))
        total += float(log_probs[token])
        tokens.append(token)
        if token in stops or len(tokens) == steps:
            break
        decoder.advance([0], [token])
    return Generation(tokens, total)


def _beam(model: nn.Module, ids: list[int], steps: int, width: int, stops: set[int]) -> Generation:
    if steps == 0:
        return Generation([], 0.0)
    decoder = _Decoder(model, ids, 1)
    beams: list[tuple[float, list[int]]] = [(0.0, [])]
    finished: list[tuple[float, list[int]]] = []
    for step in range(steps):
        candidates: list[tuple[float, int, list[int]]] = []
        for row, ((score, tokens), log_probs) in enumerate(zip(beams, decoder.log_probs)):
            best = torch.topk(log_probs, min(width, log_probs.numel()))
            candidates += [(score + float(v), row, [*tokens, int(i)]) for v, i in zip(best.values, best.indices)]
        candidates.sort(key=lambda c: -c[0])
        beams, rows = [], []
        for score, row, tokens in candidates[:width]:
            if tokens[-1] in stops:
                finished.append((score, tokens))
            else:
                beams.append((score, tokens))
                rows.append(row)
        if not beams or step + 1 == steps:
            break
        decoder.advance(rows, [tokens[-1] for _, tokens in beams])
    score, tokens = max(finished + beams, key=lambda c: c[0])
    return Generation(tokens, score)
