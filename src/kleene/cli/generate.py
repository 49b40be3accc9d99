"""``kleene generate CHECKPOINT --prompt TEXT``: continue a prompt with a trained language model."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kleene.cli._shared import integer_at_least
from kleene.cli.device import add_device_option, device_from


def _temperature(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _language_models() -> str:
    from kleene.nn.registry import model_tasks, registered_models

    return ", ".join(name for name in registered_models() if "language_model" in model_tasks(name))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from kleene.cli._shared import filled_help

    parser = subparsers.add_parser(
        "generate",
        formatter_class=filled_help(LANGUAGE_MODELS=_language_models),
        help="continue a prompt with a trained language model",
        description="Load a language-model checkpoint (`kleene train rrnn-f --data tinyshakespeare`, `kleene train "
        "lstm-lm --data story.txt`, ...) and continue --prompt greedily, by sampling (temperature, top-k) or by beam "
        "search. Models that train as language models: LANGUAGE_MODELS.",
    )
    parser.add_argument("checkpoint", type=Path, help="checkpoint directory of a language model")
    parser.add_argument("--prompt", required=True, help="the text to continue (characters or words, as trained)")
    parser.add_argument("--max-tokens", type=integer_at_least(0), default=200, help="tokens to generate (default 200)")
    parser.add_argument("--strategy", default="sample", choices=["greedy", "sample", "beam"])
    parser.add_argument("--temperature", type=_temperature, default=0.8, help="sampling temperature (default 0.8)")
    parser.add_argument("--top-k", type=integer_at_least(1), help="sample among the k most likely tokens only")
    parser.add_argument("--beam-size", type=integer_at_least(1), default=4)
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (the same seed gives the same text)")
    parser.add_argument("--level", choices=["char", "word"], help="tokenization (default: the training data's)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_device_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kleene.data import UNK, load_language_model
    from kleene.errors import CheckpointError
    from kleene.nn import load_checkpoint
    from kleene.nn.generate import generate

    checkpoint = load_checkpoint(args.checkpoint, map_location=device_from(args))
    vocab = checkpoint.vocab
    if vocab is None or getattr(checkpoint.model, "task", None) != "language_model":
        raise CheckpointError(
            f"{args.checkpoint}: not a language model with a vocabulary (train one on a language-modelling data set)"
        )
    level = args.level
    if level is None:
        metadata = checkpoint.config.get("metadata", {})
        data_name = metadata.get("data") if isinstance(metadata, dict) else None
        if not isinstance(data_name, str):
            raise CheckpointError(f"{args.checkpoint}: no training data set recorded; pass --level char|word")
        level = load_language_model(data_name).level
    tokens = list(args.prompt) if level == "char" else args.prompt.split()
    ids = [vocab.index(t) if t in vocab else vocab.index(UNK) for t in tokens]
    result = generate(
        checkpoint.model,
        ids,
        args.max_tokens,
        strategy=args.strategy,
        temperature=args.temperature,
        top_k=args.top_k,
        beam_size=args.beam_size,
        seed=args.seed,
    )
    words = vocab.decode(result.tokens)
    text = "".join(words) if level == "char" else " ".join(words)
    if args.json:
        print(json.dumps({"prompt": args.prompt, "continuation": text, "log_prob": result.log_prob}))
    else:
        print(args.prompt + ("" if level == "char" else " ") + text)
    return 0
