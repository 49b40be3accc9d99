"""Models trained with Noahs-ARK/soft_patterns (``soft_patterns.py``, commit 591c79f), run as a reference-mode
``SoPaClassifier``.

What the original computes (read from its ``SoftPatternClassifier`` and ``data.py``): the command line chooses the
semiring, **the probability semiring by default** (``ProbSemiring``: σ, +, ×), ``--maxplus`` (wins when both are
given) or ``--maxtimes`` (max-times in log space). Its word vectors are not in its state dict: ``read_embeddings``
builds them from ``-e FILE`` as rows ``UNK`` (0, zeros), ``START`` (1), ``END`` (2), then the words' normalised
vectors; ``read_docs`` pads every document with ``max pattern length − 1`` START tokens before and END tokens after.
The START/END vectors are therefore rows 1 and 2 of that matrix (zeros in that version), never anything else.

Refused (``OriginalCodeError``): ``--use_rnn`` (an LSTM under the patterns), arguments that contradict the state dict.
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kleene.errors import OriginalCodeError
from kleene.nn.original.common import Checkpoint, OriginalArgs, check_size, read_args, read_state_dict
from kleene.nn.sopa import PatternGroup, SharedSelfLoops, SoPaClassifier, parse_pattern_spec, raw_constants

__all__ = [
    "SOFT_PATTERNS_ARGS",
    "SOFT_PATTERNS_IGNORED",
    "from_soft_patterns",
    "original_semiring",
    "read_embedding_file",
    "soft_patterns_model",
]

Tensor = torch.Tensor

#: The command-line arguments of soft_patterns.py that shape the model, with its defaults (``soft_pattern_arg_parser``,
#: ``mlp_arg_parser``, ``lstm_arg_parser``). The MLP sizes are read from the weights (checked when given).
SOFT_PATTERNS_ARGS: dict[str, Any] = {
    "patterns": "5-50_4-50_3-50_2-50",
    "maxplus": False,
    "maxtimes": False,
    "bias_scale_param": 0.1,
    "eps_scale": None,
    "self_loop_scale": None,
    "no_eps": False,
    "no_sl": False,
    "shared_sl": 0,
    "use_rnn": False,
    "hidden_dim": 100,
    "mlp_hidden_dim": None,
    "num_mlp_layers": None,
}
#: Its other arguments (data files, training and run settings): accepted, they change no value at evaluation.
SOFT_PATTERNS_IGNORED = frozenset({
    "num_iterations", "patience", "model_save_dir", "scheduler", "word_dropout", "td", "tl", "pre_computed_patterns",
    "learning_rate", "clip", "debug", "batch_size", "max_doc_len", "seed", "num_train_instances", "vd", "vl",
    "input_model", "dropout", "gpu", "embedding_file",
})  # fmt: skip

#: Rows of the original's embedding matrix (``data.py``): UNK, START, END, then the words.
UNK_ROW, START_ROW, END_ROW, FIRST_WORD_ROW = 0, 1, 2, 3


def original_semiring(options: dict[str, Any]) -> str:
    """The kleene semiring of the original's flags: ``--maxplus`` wins over ``--maxtimes``; neither: probability."""
    return "max-plus" if options["maxplus"] else "max-times" if options["maxtimes"] else "real"


def from_soft_patterns(
    checkpoint: Checkpoint,
    args: OriginalArgs | None = None,
    *,
    embeddings: Tensor,
    padded: bool = False,
    backend: str = "auto",
) -> SoPaClassifier:
    """The model of ``soft_patterns_model`` (see there), without its keyword arguments."""
    return soft_patterns_model(checkpoint, args, embeddings=embeddings, padded=padded, backend=backend)[0]


def soft_patterns_model(
    checkpoint: Checkpoint,
    args: OriginalArgs | None = None,
    *,
    embeddings: Tensor,
    padded: bool = False,
    backend: str = "auto",
) -> tuple[SoPaClassifier, dict[str, Any]]:
    """A reference-mode ``SoPaClassifier`` holding a model saved by soft_patterns.py (its ``state_dict()``: keys
    ``diags``, ``bias``, ``epsilon``, ``mlp.layers.i.*`` and, for ``--shared_sl``, ``self_loop_scale``).

    ``checkpoint``: the state dict or its file (``kleene.nn.original.common.Checkpoint``); ``args``: its command-line
    arguments as given (an ``argparse.Namespace`` of its parser, or a dict of ``SOFT_PATTERNS_ARGS`` keys; the
    defaults are its own: the probability semiring, patterns ``5-50_4-50_3-50_2-50``, bias scale 0.1);
    Also returns the JSON-serialisable keyword arguments that rebuild the model (``build_model("sopa", **kwargs)``,
    what a kleene checkpoint stores). ``embeddings`` (V, E): its embedding matrix as ``read_embeddings`` builds it
    (row 0 UNK, 1 START, 2 END, then the words, V ≥ 3): START and END are read from rows 1 and 2.

    Token ids of the returned model: with ``padded=False`` (default) kleene's: 0 padding, 1 ``<unk>`` (the
    original's UNK row), ``i ≥ 2`` the original's row ``i + 1``, and the model pads each document with START/END
    vectors itself; with ``padded=True`` the original's own ids (documents as its ``read_docs`` returns them, START and
    END tokens included) and no padding is added.

    Raises:
        OriginalCodeError: ``--use_rnn``, an unknown argument, an embedding matrix without the START/END rows or of
            another width than ``diags``, missing or unexpected keys, shapes that do not fit ``patterns``, or
            arguments that contradict the state dict (``--no_sl``, ``--no_eps``, ``--shared_sl``, MLP sizes).
    """
    code = "soft_patterns"
    state_dict = read_state_dict(checkpoint, code)
    options = read_args(args, code, SOFT_PATTERNS_ARGS, SOFT_PATTERNS_IGNORED)
    keys = set(state_dict)
    unsupported = sorted(k for k in keys if k.startswith("rnn."))
    if options["use_rnn"] or unsupported:
        raise OriginalCodeError(f"--use_rnn models (an LSTM under the patterns) are not supported (keys {unsupported})")
    if not isinstance(embeddings, Tensor) or embeddings.dim() != 2 or embeddings.shape[0] < FIRST_WORD_ROW:
        shape = tuple(embeddings.shape) if isinstance(embeddings, Tensor) else type(embeddings).__name__
        raise OriginalCodeError(
            f"embeddings must be soft_patterns' (V, E) matrix with rows UNK, START, END first (V >= 3); got {shape}"
        )
    try:
        spec = parse_pattern_spec(options["patterns"])
    except Exception as error:  # its own message names the format
        raise OriginalCodeError(f"patterns={options['patterns']!r}: {error}") from error
    for needed in ("diags", "bias"):
        if needed not in keys:
            raise OriginalCodeError(f"the state dict has no {needed!r} (keys: {sorted(keys)})")
    total, max_len = sum(spec.values()), max(spec)
    diags, bias = state_dict["diags"], state_dict["bias"]
    rows, word_dim = diags.shape[0], diags.shape[1]
    if rows % (total * max_len) or rows // (total * max_len) not in (1, 2):
        raise OriginalCodeError(
            f"diags has {rows} rows, which is not {total} patterns x (1 or 2) diagonals x {max_len} states for "
            f"patterns={options['patterns']!r}"
        )
    num_diags = rows // (total * max_len)
    if embeddings.shape[1] != word_dim:
        raise OriginalCodeError(f"embeddings have dimension {embeddings.shape[1]}, but diags expect {word_dim}")
    if tuple(bias.shape) != (rows, 1):
        raise OriginalCodeError(f"bias has shape {tuple(bias.shape)}; expected {(rows, 1)}")
    eps = state_dict.get("epsilon")
    if eps is not None and tuple(eps.shape) != (total, max_len - 1):
        raise OriginalCodeError(f"epsilon has shape {tuple(eps.shape)}; expected {(total, max_len - 1)}")
    if bool(options["no_eps"]) != (eps is None):
        raise OriginalCodeError(f"no_eps={options['no_eps']!r}, but the state dict {'lacks' if eps is None else 'has'} "
                                "'epsilon'")  # fmt: skip
    learned = state_dict.get("self_loop_scale")
    shared = None if learned is None else _shared_kind(tuple(learned.shape), total, max_len, num_diags)
    stated_shared = int(options["shared_sl"] or 0)
    if stated_shared != (0 if shared is None else 1 if shared == "per-state" else 2):
        raise OriginalCodeError(f"shared_sl={options['shared_sl']!r}, but the state dict's self_loop_scale is "
                                f"{None if learned is None else tuple(learned.shape)}")  # fmt: skip
    self_loops = not options["no_sl"]
    if self_loops and num_diags == 1 and shared is None:
        raise OriginalCodeError("no_sl=False, but diags has 1 diagonal and there is no learned self_loop_scale")
    if not self_loops and num_diags == 2:
        raise OriginalCodeError("no_sl=True, but diags has 2 diagonals (a self-loop diagonal)")
    if not self_loops:
        shared = None  # --no_sl with --shared_sl: its forward never reads the scale
    mlp_keys = sorted(k for k in keys if k.startswith("mlp.layers.") and k.endswith(".weight"))
    if not mlp_keys:
        raise OriginalCodeError("the state dict has no mlp.layers.*.weight")
    extra = keys - {"diags", "bias", "epsilon", "self_loop_scale"} - {k for k in keys if k.startswith("mlp.layers.")}
    if extra:
        raise OriginalCodeError(f"unexpected keys in the state dict: {sorted(extra)}")
    mlp_weights = [state_dict[f"mlp.layers.{i}.weight"] for i in range(len(mlp_keys))]
    check_size(options, "num_mlp_layers", len(mlp_weights), code)
    if len(mlp_weights) > 1:
        check_size(options, "mlp_hidden_dim", int(mlp_weights[0].shape[0]), code)
    table = embeddings if padded else original_to_kleene_rows(embeddings)
    kwargs: dict[str, Any] = {
        "vocab_size": int(table.shape[0]),
        "num_classes": int(mlp_weights[-1].shape[0]),
        "embedding_dim": int(word_dim),
        "patterns": "_".join(f"{length}-{count}" for length, count in spec.items()),
        "semiring": original_semiring(options),
        "mode": "reference",
        "self_loops": self_loops,
        "epsilons": eps is not None,
        "bias_scale": float(options["bias_scale_param"]),
        "self_loop_scale": None if shared is not None or not self_loops else _number(options["self_loop_scale"]),
        "epsilon_scale": _number(options["eps_scale"]),
        "shared_self_loops": shared,
        "mlp_hidden": int(mlp_weights[0].shape[0]) if len(mlp_weights) > 1 else 1,
        "mlp_layers": len(mlp_weights),
        "dropout": 0.0,
        "freeze_embeddings": True,
        "boundary_padding": not padded,
    }
    model = SoPaClassifier(**kwargs, backend=backend)
    model.to(diags.dtype)
    diag_view = diags.reshape(total, num_diags, max_len, word_dim)
    bias_view = bias.reshape(total, num_diags, max_len)
    with torch.no_grad():
        model.embedding.weight.copy_(table)
        model.start_vector.copy_(embeddings[START_ROW])  # with padded=True unused: the documents hold START/END ids
        model.end_vector.copy_(embeddings[END_ROW])
        first = 0
        for group in model.patterns.groups:
            assert isinstance(group, PatternGroup)
            rows_of = slice(first, first + group.count)
            length = group.length
            group.main_weight.copy_(diag_view[rows_of, -1, : length - 1])
            group.main_bias.copy_(bias_view[rows_of, -1, : length - 1])
            if group.loop_share is not None:  # one diagonal: the self-loop on i reads row i
                group.end_weight.copy_(diag_view[rows_of, 0, length - 1 : length])
                group.end_bias.copy_(bias_view[rows_of, 0, length - 1 : length])
                assert learned is not None
                scales = learned.reshape(1) if shared == "global" else learned[rows_of, :length]
                group.loop_share.raw.copy_(scales)
            elif self_loops:
                group.loop_weight.copy_(diag_view[rows_of, 0, :length])
                group.loop_bias.copy_(bias_view[rows_of, 0, :length])
            if eps is not None:
                raw_constants(group.recurrence).copy_(eps[rows_of, : length - 1].T)
            first += group.count
        for i, layer in enumerate(model.mlp.layers):
            assert isinstance(layer, nn.Linear)
            layer.weight.copy_(state_dict[f"mlp.layers.{i}.weight"])
            layer.bias.copy_(state_dict[f"mlp.layers.{i}.bias"])
    return model, kwargs


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def original_to_kleene_rows(embeddings: Tensor) -> Tensor:
    """kleene's table (V − 1, E) from the original's (V, E): a zero padding row 0, the UNK row as ``<unk>`` (1), the
    words from row 2 (the original's rows 3...); START and END are not tokens in kleene (the model adds them)."""
    return torch.cat([torch.zeros_like(embeddings[:1]), embeddings[UNK_ROW : UNK_ROW + 1], embeddings[FIRST_WORD_ROW:]])


def _shared_kind(shape: tuple[int, ...], total: int, max_len: int, num_diags: int) -> SharedSelfLoops:
    """The ``shared_self_loops`` of a learned ``self_loop_scale`` of ``shape`` (their ``--shared_sl`` 1 or 2)."""
    if num_diags != 1:
        raise OriginalCodeError(
            "the state dict has a learned self_loop_scale (--shared_sl) but diags has 2 diagonals; --shared_sl "
            "models keep 1 (the self-loops read the main path's rows)"
        )
    if shape == (total, max_len):
        return "per-state"
    if shape in ((1,), ()):
        return "global"
    raise OriginalCodeError(
        f"self_loop_scale has shape {shape}; expected {(total, max_len)} (--shared_sl 1) or (1,) (--shared_sl 2)"
    )


def read_embedding_file(path: str | Path, words: Iterable[str] | None = None) -> tuple[list[str], Tensor]:
    """Their ``read_embeddings(path, fixed_vocab=words)``: the words of a word-vector text file (``word v1 v2 ...``
    per line, an optional ``COUNT DIM`` header) that are printable ASCII (and in ``words`` when given), in file order,
    and the float64 matrix (UNK zeros, START zeros, END zeros, then each word's vector divided by its norm).

    Raises:
        OriginalCodeError: a missing or unreadable file, a line whose vector is not DIM numbers, a zero vector.
    """
    file = Path(path)
    if not file.is_file():
        raise OriginalCodeError(f"embedding file {str(file)!r}: no such file")
    printable, wanted = set(string.printable), None if words is None else set(words)
    names: list[str] = []
    rows: list[list[float]] = []
    try:
        with file.open(encoding="utf-8") as lines:
            first = lines.readline().rstrip().split()
            header = len(first) == 2
            dim = int(first[1]) if header else len(first) - 1
            pending = [] if header else [" ".join(first)]
            for number, line in enumerate([*pending, *lines], start=1 if not header else 2):
                word, _, values = line.rstrip().partition(" ")
                if not word or not all(c in printable for c in word) or (wanted is not None and word not in wanted):
                    continue
                vector = [float(v) for v in values.split()]
                if len(vector) != dim:
                    found = len(vector)
                    raise OriginalCodeError(f"{file}:{number}: {found} numbers after {word[:40]!r}, expected {dim}")
                names.append(word)
                rows.append(vector)
    except (UnicodeDecodeError, ValueError) as error:
        if isinstance(error, OriginalCodeError):
            raise
        raise OriginalCodeError(f"embedding file {str(file)!r} is not word-vector text: {str(error)[:120]}") from error
    if dim < 1:
        raise OriginalCodeError(f"embedding file {str(file)!r}: no vectors")
    table = torch.tensor(rows, dtype=torch.float64).reshape(len(rows), dim)
    norms = table.norm(dim=1, keepdim=True)
    if bool((norms == 0).any()):
        zero = names[int((norms == 0).nonzero()[0, 0])]
        raise OriginalCodeError(f"embedding file {str(file)!r}: the vector of {zero!r} is zero")
    return names, torch.cat([table.new_zeros(3, dim), table / norms])
