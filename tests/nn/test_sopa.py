"""SoPa against independent transcriptions: the paper's equations (7)-(8) in probability space, and the
authors' released transition (epsilon before consuming, restart, -100 zeros) in their storage form."""

from __future__ import annotations

import math

import pytest
import torch

from kleene.automata.semiring import get_semiring
from kleene.nn.sopa import (
    PatternGroup,
    SoftPatterns,
    SoPaClassifier,
    SoPaError,
    parse_pattern_spec,
)

# semiring (plus, times, zero, one) on probability-space values, as the paper writes them
PAPER_SEMIRINGS = {
    "max-times": (torch.maximum, torch.mul, 0.0, 1.0),
    "max-plus": (torch.maximum, torch.add, -math.inf, 0.0),
    "real": (torch.add, torch.mul, 0.0, 1.0),
    "log": (torch.logaddexp, torch.add, -math.inf, 0.0),
}


def encode(x: torch.Tensor, encoder: str) -> torch.Tensor:
    return torch.sigmoid(x) if encoder == "sigmoid" else x


def raw_epsilons(group: PatternGroup) -> torch.Tensor | None:
    if not group.recurrence.template.constants:
        return None
    return group.recurrence.parametrizations.constants.original  # (L-1, count)


def paper_scores(group: PatternGroup, vectors: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Equations (3)-(8) for every pattern of ``group``, one document at a time, in probability space."""
    plus, times, zero, one = PAPER_SEMIRINGS[group.semiring]
    enc = group.encoder
    length = group.length
    eps_raw = raw_epsilons(group)

    def semiring_vecmat(h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:  # [h ⊗ M]_j = ⊕_i h_i ⊗ M_ij
        out = torch.full((length,), zero, dtype=h.dtype)
        for j in range(length):
            for i in range(length):
                out[j] = plus(out[j], times(h[i], m[i, j]))
        return out

    def zeros_matrix() -> torch.Tensor:
        return torch.full((length, length), zero, dtype=vectors.dtype)

    def loop_score(p: int, i: int, v: torch.Tensor) -> torch.Tensor:
        if group.loop_share is None:
            return encode(group.loop_weight[p, i] @ v + group.loop_bias[p, i], enc)
        # shared: the main path's row i (END: its own row), times the learned scale E(raw[p, i]) (or E(raw[0]))
        w, b = (
            (group.main_weight[p, i], group.main_bias[p, i])
            if i + 1 < length
            else (group.end_weight[p, 0], group.end_bias[p, 0])
        )
        raw = group.loop_share.raw
        return times(encode(raw[p, i] if raw.dim() == 2 else raw[0], enc), encode(w @ v + b, enc))

    results = torch.zeros(vectors.shape[0], group.count, dtype=vectors.dtype)
    for p in range(group.count):
        t_eps = zeros_matrix()
        for i in range(length):
            t_eps[i, i] = one  # max(I, T(eps)) with I the semiring identity
        if eps_raw is not None and group.epsilons:
            for i in range(length - 1):
                t_eps[i, i + 1] = encode(eps_raw[i, p], enc)
        pi = torch.full((length,), zero, dtype=vectors.dtype)
        pi[0] = one
        h0 = semiring_vecmat(pi, t_eps)
        for b in range(vectors.shape[0]):
            h = h0
            score = torch.tensor(zero, dtype=vectors.dtype)
            for t in range(int(lengths[b])):
                v = vectors[b, t]
                transition = zeros_matrix()
                for i in range(length):
                    if group.self_loops:
                        transition[i, i] = loop_score(p, i, v)
                    if i + 1 < length:
                        transition[i, i + 1] = encode(group.main_weight[p, i] @ v + group.main_bias[p, i], enc)
                h = plus(semiring_vecmat(semiring_vecmat(h, transition), t_eps), h0)
                score = plus(score, h[length - 1])
            results[b, p] = score
    return results


@pytest.mark.parametrize(
    ("semiring", "encoder", "self_loops", "epsilons", "shared"),
    [
        ("max-times", "sigmoid", True, True, None),
        ("max-times", "sigmoid", False, True, None),
        ("max-plus", "identity", True, True, None),
        ("max-plus", "sigmoid", True, False, None),
        ("real", "sigmoid", True, True, None),
        ("real", "identity", False, False, None),
        ("log", "sigmoid", True, True, None),
        ("log", "identity", True, True, None),
        ("max-times", "sigmoid", True, True, "per-state"),
        ("max-plus", "identity", True, False, "global"),
        ("real", "sigmoid", True, True, "global"),
        ("log", "identity", True, True, "per-state"),
    ],
)
def test_paper_mode_matches_equations(
    semiring: str, encoder: str, self_loops: bool, epsilons: bool, shared: str | None
) -> None:
    torch.manual_seed(3)
    bank = SoftPatterns(
        6,
        "2-2_3-2_4-1",
        semiring=semiring,
        encoder=encoder,
        self_loops=self_loops,
        epsilons=epsilons,
        shared_self_loops=shared,  # type: ignore[arg-type]
    ).double()
    vectors = torch.randn(3, 5, 6, dtype=torch.float64)
    lengths = torch.tensor([5, 2, 3])
    # under gradients: the bank's forward and backward build in one library, which the gradient tests below reuse
    got = get_semiring(semiring).from_storage(bank(vectors, lengths)).detach()
    with torch.no_grad():
        want = torch.cat([paper_scores(g, vectors, lengths) for g in bank.groups], 1)  # type: ignore[arg-type]
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_paper_mode_scores_the_empty_span_of_a_length_two_pattern() -> None:
    # h_t contains h_0 = eps(π), whose END value is E(c_0) for a 2-state pattern (eq. 7a, 8); the other groups are
    # there so that the bank's kernel is the one test_paper_mode_matches_equations builds (its source depends on the
    # set of lengths and the counts' vector widths, not on the counts themselves)
    torch.manual_seed(0)
    bank = SoftPatterns(4, "2-1_3-1_4-1", semiring="max-times").double()
    with torch.no_grad():
        bank.groups[0].main_bias.fill_(-30.0)  # the main path is (almost) never taken
        bank.groups[0].loop_bias.fill_(-30.0)
        raw_epsilons(bank.groups[0]).fill_(2.0)  # type: ignore[union-attr]
        stored = bank(torch.randn(1, 3, 4, dtype=torch.float64), torch.tensor([3]))
        score = get_semiring("max-times").from_storage(stored)
    assert bank.groups[0].length == 2 and score.shape == (1, 3)
    assert float(score[0, 0]) == pytest.approx(1 / (1 + math.exp(-2.0)), rel=1e-6)


# --------------------------------------------------------------------------------------------
# Reference mode (the authors' transcription and loader: tests/nn/test_original_soft_patterns.py)
# --------------------------------------------------------------------------------------------
def test_global_shared_self_loops_learn_one_scale_for_the_bank() -> None:
    torch.manual_seed(5)
    model = SoPaClassifier(
        20, 2, embedding_dim=6, patterns="2-2_4-2", semiring="real", mode="reference", shared_self_loops="global"
    )
    groups = list(model.patterns.groups)
    assert groups[0].loop_share is groups[1].loop_share
    shares = [name for name, _ in model.named_parameters() if "loop_share" in name]
    assert len(shares) == 1 and dict(model.named_parameters())[shares[0]].shape == (1,)
    assert not hasattr(groups[0], "loop_weight")
    per_state = SoftPatterns(6, "2-2_4-3", shared_self_loops="per-state")
    assert [tuple(g.loop_share.raw.shape) for g in per_state.groups] == [(2, 2), (3, 4)]  # type: ignore[union-attr]


@pytest.mark.parametrize("shared", ["per-state", "global"])
def test_shared_self_loops_survive_a_checkpoint(tmp_path, shared: str) -> None:  # type: ignore[no-untyped-def]
    from kleene.nn.checkpoint import load_checkpoint, save_checkpoint
    from kleene.nn.registry import build_model

    kwargs = {
        "vocab_size": 15,
        "num_classes": 3,
        "embedding_dim": 5,
        "patterns": "2-2_3-1",
        "mode": "reference",
        "semiring": "max-times",
        "shared_self_loops": shared,
    }
    torch.manual_seed(6)
    model = build_model("sopa", **kwargs).eval()
    save_checkpoint(tmp_path, model, model_name="sopa", model_kwargs=kwargs)
    loaded = load_checkpoint(tmp_path).model
    assert loaded.patterns.shared_self_loops == shared
    if shared == "global":  # still one parameter after loading
        assert loaded.patterns.groups[0].loop_share is loaded.patterns.groups[1].loop_share
    tokens, lengths = torch.randint(1, 15, (3, 6)), torch.tensor([6, 4, 1])
    with torch.no_grad():
        torch.testing.assert_close(loaded(tokens, lengths), model(tokens, lengths), rtol=0, atol=0)


def test_configuration_errors() -> None:
    with pytest.raises(SoPaError, match="'3x2' is not LENGTH-COUNT"):
        parse_pattern_spec("3x2")
    with pytest.raises(SoPaError, match="at least 2 states"):
        parse_pattern_spec("1-4")
    with pytest.raises(SoPaError, match="needs positive weights"):
        SoftPatterns(4, "3-1", semiring="max-times", encoder="identity")
    with pytest.raises(SoPaError, match="identity encoder, not sigmoid"):
        SoftPatterns(4, "3-1", semiring="max-plus", encoder="sigmoid", mode="reference")
    with pytest.raises(SoPaError, match="semiring must be one of"):
        SoftPatterns(4, "3-1", semiring="boolean")
    with pytest.raises(SoPaError, match="semiring must be one of"):  # larger scores must be better
        SoftPatterns(4, "3-1", semiring="min-plus")
    with pytest.raises(SoPaError, match="semiring must be one of"):
        SoftPatterns(4, "3-1", semiring="no-such-semiring")
    with pytest.raises(SoPaError, match="shared_self_loops must be None or one of"):
        SoftPatterns(4, "3-1", shared_self_loops="per-pattern")  # type: ignore[arg-type]
    with pytest.raises(SoPaError, match="needs self_loops=True"):
        SoftPatterns(4, "3-1", shared_self_loops="global", self_loops=False)
    with pytest.raises(SoPaError, match=r"self_loop_scale must be None, not 0\.5"):
        SoftPatterns(4, "3-1", shared_self_loops="global", mode="reference", self_loop_scale=0.5)


# --------------------------------------------------------------------------------------------
# Gradients and training
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("semiring", ["real", "max-plus"])
def test_gradcheck_float64(semiring: str) -> None:
    torch.manual_seed(2)
    # the lengths of test_paper_mode_matches_equations' banks: the same kernel (its source depends on the set of
    # lengths, semiring, options and counts' vector widths, not on sizes), built there with its backward
    bank = SoftPatterns(3, "2-1_3-2_4-1", semiring=semiring, encoder="sigmoid").double()
    lengths = torch.tensor([4, 2])
    vectors = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: bank(v, lengths), (vectors,))


DISTINCT_CASES = [
    ("paper", "max-times", None, 0.0),
    ("paper", "real", "global", 0.0),
    ("paper", "log", None, 0.0),
    ("reference", "max-plus", None, 0.0),
    ("reference", "max-times", "per-state", 0.0),
    ("reference", "real", None, 0.0),
    ("paper", "max-times", None, 0.3),
]


@pytest.mark.parametrize(("mode", "semiring", "shared", "word_dropout"), DISTINCT_CASES)
def test_distinct_vectors_give_the_per_position_scores_and_gradients(
    mode: str, semiring: str, shared: str | None, word_dropout: float
) -> None:
    """The classifier encodes each distinct word once and gathers (``distinct_vectors``); the scores and every
    parameter's gradient must be those of encoding the boundary-padded vectors of ``embed`` position by position."""
    torch.manual_seed(3)
    model = SoPaClassifier(
        25,
        3,
        embedding_dim=5,
        patterns="2-2_4-2_3-1",
        semiring=semiring,
        mode=mode,  # type: ignore[arg-type]
        shared_self_loops=shared,  # type: ignore[arg-type]
        dropout=0.0,
        word_dropout=word_dropout,
    ).double()
    lengths = torch.tensor([6, 2, 0, 4, 1])
    tokens = torch.randint(1, 25, (5, 6))
    tokens[1, 0] = tokens[3, 2] = tokens[0, 4]  # repeated words share a row of the table
    tokens[torch.arange(6)[None, :] >= lengths[:, None]] = 0
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad and not n.startswith("mlp.")]
    parameters = [p for _, p in named]
    torch.manual_seed(4)  # the same word dropout in both runs
    got = model.pattern_scores(tokens, lengths)
    got_grads = torch.autograd.grad(got.sum(), parameters)
    torch.manual_seed(4)
    vectors, padded = model.embed(tokens, lengths)
    want = model.patterns.algebra.from_storage(model.patterns(vectors, padded))
    want_grads = torch.autograd.grad(want.sum(), parameters)
    if not word_dropout:
        table, index, _ = model.distinct_vectors(tokens, lengths)
        assert table.shape[0] == len(set(tokens[tokens != 0].tolist())) + 3  # the words, START, END, padding
        torch.testing.assert_close(table[index][index != 0], vectors[index != 0], rtol=0, atol=0)
    # the same float64 operations on the same numbers, gradients summed in another order: rounding only
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for (name, _), a, b in zip(named, got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10, msg=name)


def test_distinct_vectors_keep_per_position_transition_dropout() -> None:
    """Reference mode drops transition scores per position, as the authors do: a word repeated in a document
    gets independent masks, so the table path must encode per position then."""
    torch.manual_seed(5)
    # the lengths and semiring of the reference max-plus case above: the same bank kernel
    bank = SoftPatterns(4, "2-1_3-2_4-1", semiring="max-plus", mode="reference").double()
    table = torch.randn(3, 4, dtype=torch.float64)
    index = torch.tensor([[0, 1, 1, 2, 1, 0]])
    lengths = torch.tensor([6])
    dropout = torch.nn.Dropout(0.5)
    torch.manual_seed(6)
    got = bank(table, lengths, dropout, index)
    torch.manual_seed(6)
    want = bank(table[index], lengths, dropout)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    with pytest.raises(SoPaError, match="index holds rows"):
        bank(table, lengths, None, index + 1)
    with pytest.raises(SoPaError, match="integer"):
        bank(table, lengths, None, index.double())


@pytest.mark.parametrize(
    ("mode", "shared"), [("paper", None), ("reference", None), ("reference", "per-state"), ("paper", "global")]
)
def test_every_parameter_gets_a_gradient(mode: str, shared: str | None) -> None:
    torch.manual_seed(0)
    # the real semiring routes gradient to every path (max semirings only to the best one)
    model = SoPaClassifier(
        20,
        2,
        embedding_dim=6,
        patterns="2-2_4-2_3-1",  # float64 and these lengths: the bank kernels of the tests above, not two more
        semiring="real",
        mode=mode,  # type: ignore[arg-type]
        freeze_embeddings=False,
        shared_self_loops=shared,  # type: ignore[arg-type]
    ).double()
    tokens = torch.randint(1, 20, (4, 6))
    loss = model(tokens, torch.tensor([6, 3, 1, 5])).logsumexp(1).sum()
    loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


@pytest.mark.slow
def test_sopa_trains_on_real_sst2() -> None:
    from kleene.data import Vocabulary, classification_batches, glove_matrix, load

    torch.manual_seed(0)
    data = load("sst2")
    train = data.train[:160]
    vocab = Vocabulary.build([[tok for ex in train for tok in ex.tokens]])
    model = SoPaClassifier(len(vocab), 2, patterns="3-8_4-8", mlp_hidden=20)
    with torch.no_grad():
        model.embedding.weight.copy_(glove_matrix(vocab)[0])
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.01)
    batches = classification_batches(train, vocab, 32)

    def mean_loss() -> float:  # under gradients: the first call builds the kernel's forward and backward at once
        losses = (torch.nn.functional.cross_entropy(model(b.tokens, b.lengths), b.targets) for b in batches)
        return sum(float(loss.detach()) for loss in losses)

    before = mean_loss()
    for _ in range(8):
        for batch in batches:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(batch.tokens, batch.lengths), batch.targets).backward()
            optimizer.step()
    assert mean_loss() < 0.85 * before


# --------------------------------------------------------------------------------------------
# The template run for interpretation agrees with the layer's score
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["paper", "reference"])
@pytest.mark.parametrize("semiring", ["max-times", "max-plus", "real", "log"])
def test_end_scores_and_span_totals_add_up_to_the_document_score(mode: str, semiring: str) -> None:
    torch.manual_seed(5)
    bank = SoftPatterns(5, "2-2_3-2_4-1", semiring=semiring, mode=mode).double()
    vectors = torch.randn(3, 6, 5, dtype=torch.float64)
    lengths = torch.tensor([6, 0, 4])
    with torch.no_grad():
        groups = [group for group in bank.groups if isinstance(group, PatternGroup)]
        assert len(groups) == 3
        every_slots = [group.slots(*group.transitions(vectors)) for group in groups]
        if all(group.recurrence.backend == "cpp" for group in groups):
            # the layer's score: the bank's one-call kernel (the kernel the other tests here build for these lengths)
            layer = bank.bank_scores(bank.one_call_layout().pad_lanes(every_slots), lengths, floor=False)
        else:  # no C++ compiler ("auto" fell back to torch): the layer scores group by group
            layer = torch.cat([g.score(s, lengths, floor=False) for g, s in zip(groups, every_slots)], 1)
        for group, slots, score in zip(groups, every_slots, layer.split([g.count for g in groups], 1)):
            storage = group.storage
            ends = group.end_scores(slots, lengths)  # (B, T, C)
            torch.testing.assert_close(storage.sum(ends, axis=1), score, rtol=1e-12, atol=1e-12)
            if semiring == "max-times":
                # and the group's own kernel (what extraction scores with, kleene.extract.hard), in one semiring:
                # test_sopa_bank.py checks the groups' kernels against the one-call kernel bit for bit (max-times,
                # log, max-plus), so the other semirings here build the bank's kernel alone. Under gradients: the
                # group's forward and backward in one library, the one test_sopa_bank.py's groups load
                with torch.enable_grad():
                    own = group.score(group.slots(*group.transitions(vectors)), lengths, floor=False).detach()
                torch.testing.assert_close(storage.sum(ends, axis=1), own, rtol=1e-12, atol=1e-12)
            by_start = storage.sum(group.span_totals(slots, lengths), axis=1)  # ⊕ over starts: (B, end, C)
            empty = group.empty_span()
            if empty is not None:
                valid = (torch.arange(6)[None, :] < lengths[:, None])[..., None]
                by_start = torch.where(valid, storage.plus(by_start, empty), by_start)
            torch.testing.assert_close(by_start, ends, rtol=1e-12, atol=1e-12)
