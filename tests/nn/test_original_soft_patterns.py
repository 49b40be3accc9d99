"""Models of Noahs-ARK/soft_patterns (soft_patterns.py, commit 591c79f) loaded into kleene (``from_soft_patterns``)
against an independent transcription of the authors' forward, written here from reading their code: float64, 1e-9.

Their state dict holds no word vectors: their ``read_embeddings`` builds the matrix (row 0 UNK, 1 START, 2 END, then
the words) and ``read_docs`` pads every document with max length - 1 START and END tokens; the probability semiring
is their default (``--maxplus``, ``--maxtimes`` choose the others)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
import torch

from kleene.errors import OriginalCodeError
from kleene.nn.original import SOFT_PATTERNS_ARGS, from_soft_patterns
from kleene.nn.sopa import parse_pattern_spec

AUTHORS = {  # zero, one, plus, times, from_float, to_float
    "max-times": (-100.0, 0.0, torch.maximum, torch.add, lambda x: torch.log(torch.sigmoid(x)), torch.exp),
    "max-plus": (-100.0, 0.0, torch.maximum, torch.add, lambda x: x, lambda x: x),
    "real": (0.0, 1.0, torch.add, torch.mul, torch.sigmoid, lambda x: x),  # their ProbSemiring
}


def authors_forward(
    state: dict[str, torch.Tensor],
    spec: dict[int, int],
    semiring: str,
    docs: list[torch.Tensor],
    bias_scale: float,
    self_loop_scale: float | None,
    eps_scale: float | None,
) -> torch.Tensor:
    """The authors' SoftPatternClassifier.forward on already-embedded, already-padded documents.

    Self-loops: a second diagonal (scaled by the fixed ``self_loop_scale``), or with ``--shared_sl`` (a learned
    ``state["self_loop_scale"]``, one diagonal) the main path's row of the same state scaled by ``from_float`` of
    the learned scale (per pattern and state, or one scalar), or none (``--no_sl``: one diagonal, no learned scale).
    """
    zero, one, plus, times, from_float, to_float = AUTHORS[semiring]
    total, max_len = sum(spec.values()), max(spec)
    num_diags = state["diags"].shape[0] // (total * max_len)
    ends = [length - 1 for length, count in spec.items() for _ in range(count)]
    if "self_loop_scale" in state:  # --shared_sl: their forward passes the learned scale through from_float
        sl = from_float(state["self_loop_scale"])
        if sl.dim() == 2:
            sl = sl.expand(total, max_len)
        loops = True
    else:
        sl = from_float(torch.tensor(self_loop_scale, dtype=torch.float64)) if self_loop_scale is not None else one
        loops = num_diags == 2
    es = from_float(torch.tensor(eps_scale, dtype=torch.float64)) if eps_scale is not None else one
    no_eps = "epsilon" not in state
    eps_value = None if no_eps else times(torch.as_tensor(es), from_float(state["epsilon"]))  # (P, Lmax-1)
    out = []
    for doc in docs:
        scores = torch.full((total,), zero, dtype=torch.float64)
        hidden = torch.full((total, max_len), zero, dtype=torch.float64)
        hidden[:, 0] = one
        for v in doc:
            trans = from_float(state["diags"] @ v + bias_scale * state["bias"][:, 0]).view(total, num_diags, max_len)
            if eps_value is None:
                after_eps = hidden
            else:
                after_eps = plus(
                    hidden,
                    torch.cat([torch.full((total, 1), zero, dtype=torch.float64), times(hidden[:, :-1], eps_value)], 1),
                )
            main = torch.cat(
                [torch.full((total, 1), one, dtype=torch.float64), times(after_eps[:, :-1], trans[:, -1, :-1])], 1
            )
            # trans[:, 0] is the self-loop diagonal, or the main path's when there is one diagonal
            hidden = plus(main, times(torch.as_tensor(sl), times(after_eps, trans[:, 0, :]))) if loops else main
            scores = plus(scores, hidden[torch.arange(total), ends])
        out.append(to_float(scores))
    features = torch.stack(out)
    layers = sorted(k for k in state if k.startswith("mlp.layers.") and k.endswith("weight"))
    for i in range(len(layers)):
        if i:
            features = torch.relu(features)
        features = features @ state[f"mlp.layers.{i}.weight"].T + state[f"mlp.layers.{i}.bias"]
    return features


def authors_state_dict(
    spec: dict[int, int], dim: int, num_diags: int, classes: int, hidden: int, shared_sl: int = 0, eps: bool = True
) -> dict:
    """Random parameters named and shaped as the authors' ``SoftPatternClassifier.state_dict()`` (``--shared_sl``
    1: a (P, Lmax) ``self_loop_scale``, 2: a (1,) one; their shared models have one diagonal)."""
    total, max_len = sum(spec.values()), max(spec)
    rows = total * num_diags * max_len
    state = {
        "diags": torch.randn(rows, dim, dtype=torch.float64),
        "bias": torch.randn(rows, 1, dtype=torch.float64),
        "epsilon": torch.randn(total, max_len - 1, dtype=torch.float64),
        "mlp.layers.0.weight": torch.randn(hidden, total, dtype=torch.float64),
        "mlp.layers.0.bias": torch.randn(hidden, dtype=torch.float64),
        "mlp.layers.1.weight": torch.randn(classes, hidden, dtype=torch.float64),
        "mlp.layers.1.bias": torch.randn(classes, dtype=torch.float64),
    }
    if shared_sl:
        shape = (total, max_len) if shared_sl == 1 else (1,)
        state["self_loop_scale"] = torch.randn(*shape, dtype=torch.float64)
    if not eps:
        del state["epsilon"]
    return state


FLAGS = {"real": {}, "max-plus": {"maxplus": True}, "max-times": {"maxtimes": True}}  # their command line


def original_embeddings(words: int, dim: int, zero_boundaries: bool = False) -> torch.Tensor:
    """A matrix laid out as their ``read_embeddings`` returns it: UNK (zeros), START, END, then ``words`` vectors.
    Their START/END rows are zeros; random ones here make a test see which rows the loader reads."""
    table = torch.randn(3 + words, dim, dtype=torch.float64)
    table[0] = 0
    if zero_boundaries:
        table[1:3] = 0
    return table


def their_documents(table: torch.Tensor, ids: list[list[int]], pad: int) -> list[torch.Tensor]:
    """Their ``read_docs``: each document of their ids padded with ``pad`` START (1) and END (2) tokens, embedded."""
    return [table[torch.tensor([1] * pad + doc + [2] * pad)] for doc in ids]


def kleene_batch(ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """The same documents in kleene's ids (their UNK 0 -> 1, their word row i -> i - 1), zero-padded."""
    steps = max(len(doc) for doc in ids)
    tokens = torch.tensor([[1 if i == 0 else i - 1 for i in doc] + [0] * (steps - len(doc)) for doc in ids])
    return tokens, torch.tensor([len(doc) for doc in ids])


DOCS = [[5, 6, 7, 8, 9], [10, 3, 0], [11]]  # their ids: words from 3, 0 is UNK

CASES = [  # (semiring, --shared_sl, diagonals, --self_loop_scale, --eps_scale, epsilons)
    *[
        (semiring, shared, 1 if shared else 2, sl, es, True)
        for semiring in AUTHORS
        for shared in (0, 1, 2)
        for sl, es in ((None, None), (None if shared else 0.6, 0.7))
    ],
    ("max-times", 0, 1, None, 0.3, True),  # --no_sl
    ("max-plus", 0, 1, None, None, False),  # --no_sl --no_eps
    ("real", 1, 1, None, None, False),  # --shared_sl 1 --no_eps
    ("max-times", 2, 1, None, None, False),
]


def case_args(semiring: str, shared_sl: int, num_diags: int, sl: float | None, es: float | None, eps: bool) -> dict:
    """Their command-line arguments of one case (only what differs from their defaults, plus the patterns)."""
    args: dict[str, Any] = {"patterns": "4-2_2-2_3-1", **FLAGS[semiring]}
    if shared_sl:
        args["shared_sl"] = shared_sl
    if num_diags == 1 and not shared_sl:
        args["no_sl"] = True
    if not eps:
        args["no_eps"] = True
    if sl is not None:
        args["self_loop_scale"] = sl
    if es is not None:
        args["eps_scale"] = es
    return args


@pytest.mark.parametrize(("semiring", "shared_sl", "num_diags", "sl_scale", "eps_scale", "eps"), CASES)
def test_loaded_state_dict_reproduces_their_forward(
    semiring: str, shared_sl: int, num_diags: int, sl_scale: float | None, eps_scale: float | None, eps: bool
) -> None:
    torch.manual_seed(1)
    spec = parse_pattern_spec("4-2_2-2_3-1")
    state = authors_state_dict(spec, 5, num_diags, classes=3, hidden=4, shared_sl=shared_sl, eps=eps)
    table = original_embeddings(9, 5)
    args = case_args(semiring, shared_sl, num_diags, sl_scale, eps_scale, eps)
    model = from_soft_patterns(state, args, embeddings=table).eval()
    want = authors_forward(state, spec, semiring, their_documents(table, DOCS, 3), 0.1, sl_scale, eps_scale)
    with torch.no_grad():
        got = model(*kleene_batch(DOCS))
    assert model.patterns.shared_self_loops == (None, "per-state", "global")[shared_sl]
    # float64 sums and products of O(1) terms over <= 11 steps: rounding far below 1e-9
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_the_default_semiring_is_theirs_the_probability_semiring() -> None:
    """Loading a model trained with their defaults needs no semiring argument (kleene's max-times would be far off)."""
    torch.manual_seed(2)
    # the lengths (2, 3, 4) of test_loaded_state_dict_reproduces_their_forward's banks: their kernels, not one more
    # (their documents carry max length - 1 = 3 START and END tokens)
    spec = parse_pattern_spec("3-2_2-1_4-1")
    state = authors_state_dict(spec, 4, 2, classes=2, hidden=3)
    table = original_embeddings(9, 4)
    docs = their_documents(table, DOCS, 3)
    model = from_soft_patterns(state, {"patterns": "3-2_2-1_4-1"}, embeddings=table).eval()
    with torch.no_grad():
        got = model(*kleene_batch(DOCS))
    torch.testing.assert_close(got, authors_forward(state, spec, "real", docs, 0.1, None, None), rtol=1e-9, atol=1e-9)
    assert (got - authors_forward(state, spec, "max-times", docs, 0.1, None, None)).abs().max() > 1e-3
    assert SOFT_PATTERNS_ARGS["patterns"] == "5-50_4-50_3-50_2-50" and SOFT_PATTERNS_ARGS["bias_scale_param"] == 0.1


def their_namespace(**changes: Any) -> argparse.Namespace:
    """What their parser returns: every argument, the model's and the training's (data files, rates, seeds)."""
    values = {
        **SOFT_PATTERNS_ARGS, "mlp_hidden_dim": 25, "num_mlp_layers": 2, "num_iterations": 10, "patience": 30,
        "model_save_dir": None, "scheduler": False, "word_dropout": 0, "td": "train.data", "tl": "train.labels",
        "pre_computed_patterns": None, "learning_rate": 1e-3, "clip": None, "debug": 0, "batch_size": 1,
        "max_doc_len": -1, "seed": 100, "num_train_instances": None, "vd": "dev.data", "vl": "dev.labels",
        "input_model": None, "dropout": 0, "gpu": False, "embedding_file": "glove.txt",
    }  # fmt: skip
    return argparse.Namespace(**{**values, **changes})


def test_their_parsed_arguments_load_verbatim() -> None:
    torch.manual_seed(3)
    # the lengths (2, 3, 4) of test_loaded_state_dict_reproduces_their_forward's banks: their kernels, not one more
    # (their documents carry max length - 1 = 3 START and END tokens)
    spec = parse_pattern_spec("3-2_2-1_4-1")
    state = authors_state_dict(spec, 4, 1, classes=2, hidden=25, shared_sl=2)
    table = original_embeddings(9, 4)
    args = their_namespace(patterns="3-2_2-1_4-1", maxtimes=True, shared_sl=2, self_loop_scale=0.5)  # ignored by them
    model = from_soft_patterns(state, args, embeddings=table).eval()
    want = authors_forward(state, spec, "max-times", their_documents(table, DOCS, 3), 0.1, None, None)
    with torch.no_grad():
        torch.testing.assert_close(model(*kleene_batch(DOCS)), want, rtol=1e-9, atol=1e-9)
    with pytest.raises(
        OriginalCodeError, match=r"mlp_hidden_dim=7, but the checkpoint's weights have mlp_hidden_dim=25"
    ):
        from_soft_patterns(
            state, their_namespace(patterns="3-2_2-1_4-1", shared_sl=2, mlp_hidden_dim=7), embeddings=table
        )


def test_start_and_end_are_rows_one_and_two_of_their_matrix_never_random() -> None:
    torch.manual_seed(4)
    # the lengths (2, 3, 4) of test_loaded_state_dict_reproduces_their_forward's banks: their kernels, not one more
    # (their documents carry max length - 1 = 3 START and END tokens)
    spec = parse_pattern_spec("3-2_2-1_4-1")
    state = authors_state_dict(spec, 4, 2, classes=2, hidden=3)
    for zero_boundaries in (True, False):  # theirs are zeros; other rows are read as they are
        table = original_embeddings(9, 4, zero_boundaries)
        model = from_soft_patterns(state, {"patterns": "3-2_2-1_4-1"}, embeddings=table).eval()
        assert torch.equal(model.start_vector, table[1]) and torch.equal(model.end_vector, table[2])
        want = authors_forward(state, spec, "real", their_documents(table, DOCS, 3), 0.1, None, None)
        with torch.no_grad():
            torch.testing.assert_close(model(*kleene_batch(DOCS)), want, rtol=1e-9, atol=1e-9)
    with pytest.raises(OriginalCodeError, match=r"rows UNK, START, END first \(V >= 3\); got \(2, 4\)"):
        from_soft_patterns(state, {"patterns": "3-2_2-1_4-1"}, embeddings=torch.zeros(2, 4, dtype=torch.float64))


def test_documents_padded_already_take_their_own_ids() -> None:
    torch.manual_seed(5)
    # the lengths (2, 3, 4) of test_loaded_state_dict_reproduces_their_forward's banks: their kernels, not one more
    # (their documents carry max length - 1 = 3 START and END tokens)
    spec = parse_pattern_spec("3-2_2-1_4-1")
    state = authors_state_dict(spec, 4, 2, classes=2, hidden=3)
    table = original_embeddings(9, 4)
    args = {"patterns": "3-2_2-1_4-1", "maxplus": True}
    model = from_soft_patterns(state, args, embeddings=table, padded=True).eval()
    padded = [[1, 1, 1, *doc, 2, 2, 2] for doc in DOCS]  # their read_docs output
    steps = max(len(doc) for doc in padded)
    tokens = torch.tensor([doc + [0] * (steps - len(doc)) for doc in padded])
    want = authors_forward(state, spec, "max-plus", their_documents(table, DOCS, 3), 0.1, None, None)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens, torch.tensor([len(d) for d in padded])), want, rtol=1e-9, atol=1e-9)


def test_state_dict_errors_name_the_problem() -> None:
    spec = parse_pattern_spec("3-2")
    state = authors_state_dict(spec, 4, 2, 2, 3)
    emb = original_embeddings(4, 4)
    with pytest.raises(OriginalCodeError, match="diags has 12 rows"):
        from_soft_patterns(state, {"patterns": "3-2_2-1"}, embeddings=emb)
    with pytest.raises(OriginalCodeError, match=r"unexpected keys.*'extra'"):
        from_soft_patterns({**state, "extra": torch.zeros(1)}, {"patterns": "3-2"}, embeddings=emb)
    with pytest.raises(OriginalCodeError, match="--use_rnn"):
        from_soft_patterns({**state, "rnn.lstm.weight": torch.zeros(1)}, {"patterns": "3-2"}, embeddings=emb)
    with pytest.raises(OriginalCodeError, match="--use_rnn"):
        from_soft_patterns(state, {"patterns": "3-2", "use_rnn": True}, embeddings=emb)
    with pytest.raises(OriginalCodeError, match="dimension 5"):
        from_soft_patterns(state, {"patterns": "3-2"}, embeddings=torch.randn(7, 5))
    with pytest.raises(OriginalCodeError, match=r"unknown soft_patterns arguments \['semiring'\]"):
        from_soft_patterns(state, {"patterns": "3-2", "semiring": "max-times"}, embeddings=emb)
    with pytest.raises(OriginalCodeError, match="no_eps=True, but the state dict has 'epsilon'"):
        from_soft_patterns(state, {"patterns": "3-2", "no_eps": True}, embeddings=emb)


def test_self_loop_arguments_are_checked_against_the_state_dict() -> None:
    spec = parse_pattern_spec("3-2_2-1")
    emb = original_embeddings(4, 4)
    per_state = authors_state_dict(spec, 4, 1, 2, 3, shared_sl=1)
    with pytest.raises(OriginalCodeError, match=r"self_loop_scale has shape \(2, 3\); expected \(3, 3\)"):
        from_soft_patterns({**per_state, "self_loop_scale": torch.zeros(2, 3)}, {"patterns": spec}, embeddings=emb)
    with pytest.raises(OriginalCodeError, match="diags has 2 diagonals"):
        two = {**authors_state_dict(spec, 4, 2, 2, 3), "self_loop_scale": torch.zeros(1)}
        from_soft_patterns(two, {"patterns": spec, "shared_sl": 2}, embeddings=emb)
    with pytest.raises(OriginalCodeError, match=r"shared_sl=0, but the state dict's self_loop_scale is \(3, 3\)"):
        from_soft_patterns(per_state, {"patterns": spec}, embeddings=emb)
    with pytest.raises(OriginalCodeError, match="no_sl=True, but diags has 2 diagonals"):
        from_soft_patterns(authors_state_dict(spec, 4, 2, 2, 3), {"patterns": spec, "no_sl": True}, embeddings=emb)
    with pytest.raises(OriginalCodeError, match="no_sl=False, but diags has 1 diagonal"):
        from_soft_patterns(authors_state_dict(spec, 4, 1, 2, 3), {"patterns": spec}, embeddings=emb)


def test_no_sl_with_shared_sl_ignores_the_learned_scale() -> None:
    """``--no_sl --shared_sl 1``: their forward never reads the learned scale (one diagonal, no self-loops)."""
    torch.manual_seed(4)
    # the lengths (2, 3, 4) of test_loaded_state_dict_reproduces_their_forward's banks: their kernels, not one more
    # (their documents carry max length - 1 = 3 START and END tokens)
    spec = parse_pattern_spec("3-2_2-1_4-1")
    state = authors_state_dict(spec, 4, 1, 2, 3, shared_sl=1)
    table = original_embeddings(9, 4)
    args = {"patterns": "3-2_2-1_4-1", "maxplus": True, "no_sl": True, "shared_sl": 1}
    model = from_soft_patterns(state, args, embeddings=table).eval()
    assert not model.patterns.groups[0].self_loops and model.patterns.shared_self_loops is None
    no_scale = {k: v for k, v in state.items() if k != "self_loop_scale"}
    want = authors_forward(no_scale, spec, "max-plus", their_documents(table, DOCS, 3), 0.1, None, None)
    with torch.no_grad():
        torch.testing.assert_close(model(*kleene_batch(DOCS)), want, rtol=1e-9, atol=1e-9)
