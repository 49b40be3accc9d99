"""``kleene convert --from CODE CHECKPOINT --args ARGS.json -o RUN``: a model trained with an original code as a
kleene checkpoint (model.safetensors + config.json) that ``kleene evaluate``, ``report`` and ``extract`` read.

``CHECKPOINT`` is the original's saved state dict (a torch file, read weights-only: nothing is unpickled, or
safetensors); ``ARGS.json`` its arguments as it took them (e.g. ``json.dump(vars(args), f)``, the original's key
names). Per code (docs/original-code.md):

- ``soft_patterns``: soft_patterns.py's model and command line; its word vectors are read from the file of its
  ``-e`` argument (``--embeddings`` or the ``embedding_file`` of ARGS.json), restricted to the words of its training
  and development texts (``td``, ``vd``) when those files exist, as its ``read_embeddings`` does.
- ``rational-recurrences``: ``classification/train_classifier.py``'s Model and command line, ``--vocab`` the words
  of its ``emb_layer.word2id`` in id order, one per line; or ``language_model/train_lm.py``'s (told apart by the
  keys), its word ids rebuilt from its ``--train`` file (ARGS.json) unless ``--vocab`` gives them.
- ``sru``: the sru repository's ``classification/train_classifier.py`` Model; ARGS.json the arguments of its
  ``sru.SRU(...)`` encoder; ``--vocab`` as above.
- ``pytorch-qrnn``: salesforce/awd-lstm-lm's QRNN ``RNNModel`` (told apart by its keys; ARGS.json its ``main.py``
  arguments, ``--vocab`` its ``corpus.dictionary.idx2word``), or a language model of the user's own around a
  ``QRNN``: ``--embedding-key`` and ``--output-key`` name the state dict's embedding (``KEY.weight``) and output
  layer (``KEY.weight``, ``KEY.bias``); ARGS.json the ``QRNN(...)`` arguments; ``--vocab`` the words in id order.

Example::

    kleene convert --from soft_patterns model_25.pth --args args.json --data sst2 -o runs/sopa-original
    kleene evaluate runs/sopa-original --split test
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

#: The original codes ``--from`` takes.
CODES = ["soft_patterns", "rational-recurrences", "sru", "pytorch-qrnn"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert a model trained with an original code into a kleene checkpoint",
        description="Load the state dict saved by an original research code with its own command-line arguments "
        "(nothing is unpickled) and write a kleene checkpoint that evaluate, report and extract read.",
    )
    parser.add_argument("--from", dest="code", required=True, choices=CODES, help="the original code")
    parser.add_argument("checkpoint", type=Path, help="the original's saved state dict (.pt/.pth, or .safetensors)")
    parser.add_argument("--args", type=Path, required=True, help="JSON object of the original's arguments")
    parser.add_argument("--embeddings", type=Path, help="soft_patterns: its -e word-vector file (default: from ARGS)")
    parser.add_argument(
        "--vocab", type=Path, help="the original's words in id order, one a line (its word2id or dictionary)"
    )
    parser.add_argument("--embedding-key", help="pytorch-qrnn: the embedding's key prefix (its KEY.weight)")
    parser.add_argument("--output-key", help="pytorch-qrnn: the output layer's key prefix (KEY.weight, KEY.bias)")
    parser.add_argument("--data", help="data set recorded for evaluate/report/extract (e.g. sst2 or a file)")
    parser.add_argument("-o", "--out", type=Path, required=True, help="checkpoint directory to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint at --out")
    parser.set_defaults(handler=run)


def _read_args(path: Path) -> dict[str, Any]:
    from kleene.errors import OriginalCodeError

    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise OriginalCodeError(f"--args {str(path)!r}: no such file") from error
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise OriginalCodeError(f"--args {str(path)!r} is not JSON text: {str(error)[:120]}") from error
    if not isinstance(value, dict):
        raise OriginalCodeError(f"--args {str(path)!r} must hold a JSON object, got {type(value).__name__}")
    return value


def _data_words(options: dict[str, Any]) -> set[str] | None:
    """The words of the original's training and development texts (its ``vocab_from_text``), if both exist."""
    paths = [options.get(key) for key in ("td", "vd")]
    if not all(isinstance(p, str) and Path(p).is_file() for p in paths):
        return None
    words: set[str] = set()
    for path in paths:
        with Path(str(path)).open(encoding="ISO-8859-1") as lines:
            for line in lines:
                words.update(line.split())
    return words


def _read_words(path: Path | None, code: str) -> list[str]:
    """The words of ``--vocab``: one a line (their ``emb_layer.word2id`` in id order)."""
    from kleene.errors import OriginalCodeError

    if path is None:
        raise OriginalCodeError(f"{code} keeps its word ids outside its state dict: pass --vocab FILE (its word2id)")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise OriginalCodeError(f"--vocab {str(path)!r}: no such file") from error
    except UnicodeDecodeError as error:
        raise OriginalCodeError(f"--vocab {str(path)!r} is not UTF-8 text: {error}") from error
    return text.splitlines()  # their words hold no whitespace (str.split made them)


def run(args: argparse.Namespace) -> int:
    from kleene.errors import CheckpointError
    from kleene.nn.checkpoint import CONFIG_NAME, save_checkpoint

    if (args.out / CONFIG_NAME).exists() and not args.overwrite:
        raise CheckpointError(f"{args.out} already holds a checkpoint; pass --overwrite to replace it")
    options = _read_args(args.args)
    if args.code == "soft_patterns":
        model, name, kwargs, vocab, note = _soft_patterns(args, options)
    else:
        model, name, kwargs, vocab, note = _state_dict_model(args, options)
    metadata = {"converted_from": args.code, "checkpoint": str(args.checkpoint), "original_args": options}
    if args.data:
        metadata["data"] = args.data
    if getattr(model, "task", None) == "language_model":  # evaluate streams, carrying states, as the originals do
        window = next((options[k] for k in ("bptt", "unroll_size") if isinstance(options.get(k), int)), 64)
        metadata["training"] = {"carry_state": True, "window": window}
    save_checkpoint(args.out, model.float(), model_name=name, model_kwargs=kwargs, vocab=vocab, metadata=metadata)
    print(f"wrote {args.out}: {note}")
    return 0


def _soft_patterns(args: argparse.Namespace, options: dict[str, Any]) -> tuple[Any, str, dict[str, Any], Any, str]:
    from kleene.data.vocab import PAD, UNK, Vocabulary
    from kleene.errors import OriginalCodeError
    from kleene.nn.original.soft_patterns import read_embedding_file, soft_patterns_model

    embedding_file = args.embeddings or options.get("embedding_file")
    if not isinstance(embedding_file, (str, Path)):
        raise OriginalCodeError("soft_patterns keeps its word vectors outside its state dict: pass --embeddings FILE")
    restrict = _data_words(options)
    words, table = read_embedding_file(embedding_file, restrict)
    model, kwargs = soft_patterns_model(args.checkpoint, options, embeddings=table, backend="auto")
    restricted = "" if restrict is None else f" (restricted to the {len(restrict)} words of td/vd, as the original did)"
    note = f"sopa (reference mode, {kwargs['semiring']}) over {len(words)} words{restricted}"
    return model, "sopa", kwargs, Vocabulary([PAD, UNK, *words]), note


def _train_words(options: dict[str, Any]) -> list[str] | None:
    """rational-recurrences' language-model word ids rebuilt from its ``--train`` file (None: no such file)."""
    from kleene.errors import OriginalCodeError
    from kleene.nn.original.language_model import rational_recurrences_words

    train = options.get("train")
    if not isinstance(train, str) or not Path(train).is_file():
        return None
    try:
        return rational_recurrences_words(Path(train).read_text(encoding="utf-8").splitlines())
    except UnicodeDecodeError as error:
        raise OriginalCodeError(f"its --train file {train!r} is not UTF-8 text: {error}; pass --vocab") from error


def _state_dict_model(args: argparse.Namespace, options: dict[str, Any]) -> tuple[Any, str, dict[str, Any], Any, str]:
    """rational-recurrences (its classifier or, told by its keys, its language model), sru, pytorch-qrnn."""
    from kleene.errors import OriginalCodeError
    from kleene.nn.original.classifiers import rational_recurrences_classifier, sru_classifier
    from kleene.nn.original.common import read_state_dict
    from kleene.nn.original.language_model import (
        awd_lstm_lm_model,
        pytorch_qrnn_language_model,
        rational_recurrences_language_model,
    )

    state_dict = read_state_dict(args.checkpoint, args.code)
    if args.code == "pytorch-qrnn" and "rnns.0.linear.module.bias" in state_dict:  # awd-lstm-lm's RNNModel
        model, kwargs, vocab = awd_lstm_lm_model(state_dict, options, words=_read_words(args.vocab, args.code))
        return model, "qrnn", kwargs, vocab, f"qrnn language model (awd-lstm-lm) over {len(vocab)} words"
    if args.code == "pytorch-qrnn":
        keys = {"embedding_key": args.embedding_key, "output_key": args.output_key}
        if None in keys.values():
            raise OriginalCodeError("pytorch-qrnn is a layer: name its model's --embedding-key and --output-key")
        words = _read_words(args.vocab, args.code)
        model, kwargs, vocab = pytorch_qrnn_language_model(state_dict, options, words=words, **keys)
        return model, "qrnn", kwargs, vocab, f"qrnn language model over {len(vocab)} words"
    if args.code == "rational-recurrences" and "embedding_layer.embedding.weight" in state_dict:
        words = (None if args.vocab else _train_words(options)) or _read_words(args.vocab, args.code)
        model, kwargs, vocab = rational_recurrences_language_model(state_dict, options, words=words)
        return model, "rrnn-f", kwargs, vocab, f"rrnn-f language model over {len(vocab)} words"
    convert = rational_recurrences_classifier if args.code == "rational-recurrences" else sru_classifier
    model, kwargs, vocab = convert(state_dict, options, words=_read_words(args.vocab, args.code))
    name = "rrnn-f" if args.code == "rational-recurrences" else "sru"
    return model, name, kwargs, vocab, f"{name} classifier over {len(vocab)} words"
