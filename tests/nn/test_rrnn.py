"""Rational RNN layers against plain PyTorch transcriptions of Rational Recurrences Appendix D (eqs. 23-26)."""

from __future__ import annotations

import pytest
import torch

from kleene.nn.rrnn import LayerError, RRNNClassifier, RRNNLanguageModel, RRNNLayer, rrnn_template


def equations(layer: RRNNLayer, x: torch.Tensor, kind: str, hidden: int) -> torch.Tensor:
    """h_t of Appendix D for one direction of ``layer`` (its first ``hidden`` units), x of shape (T, in)."""
    rows = slice(0, hidden)
    w_f, b_f = layer.forget.weight, layer.forget.bias
    w_u = layer.update.weight
    dim = layer.dim

    def affine(j: int, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        block = slice(j * dim, j * dim + dim)
        return (w_f[block] @ v + b_f[block])[rows], (w_u[block] @ v)[rows]

    def gate(v: torch.Tensor) -> torch.Tensor | None:
        return None if layer.gate is None else (layer.gate.weight @ v + layer.gate.bias)[rows]

    out = []
    if kind == "B-maxplus":
        c = torch.full((hidden,), float("-inf"), dtype=x.dtype)
        for v in x:
            f_pre, w_uv = affine(0, v)
            c = torch.maximum(torch.nn.functional.logsigmoid(f_pre) + c, w_uv)  # (24a-c)
            o = gate(v)
            out.append(torch.tanh(c if o is None else torch.nn.functional.logsigmoid(o) + c))  # (24d-e)
        return torch.stack(out)
    c1 = torch.zeros(hidden, dtype=x.dtype)
    c2 = torch.zeros(hidden, dtype=x.dtype)
    if kind == "F":
        r, p1, p2 = torch.sigmoid(layer.recurrence.parametrizations.constants.original[:, rows])  # type: ignore[union-attr]
    for v in x:
        f_pre1, wu1 = affine(0, v)
        f1 = torch.sigmoid(f_pre1)
        u1 = (1 - f1) * wu1  # (23b/25b/26b)
        if kind == "B":
            c1 = f1 * c1 + u1  # (23c)
            c = c1
        else:
            f_pre2, wu2 = affine(1, v)
            f2 = torch.sigmoid(f_pre2)
            u2 = (1 - f2) * wu2
            if kind == "C":
                c1, c2 = c1 * f1 + u1, c2 * f2 + c1 * u2  # (25c-d)
                c = c2
            else:
                c1, c2 = c1 * f1 + u1, c2 * f2 + (c1 + r) * u2  # (26e-f)
                c = p1 * c1 + p2 * c2  # (19c)
        o = gate(v)
        out.append(torch.tanh(c if o is None else torch.sigmoid(o) * c))  # (23d-e)
    return torch.stack(out)


@pytest.mark.parametrize("kind", ["B", "B-maxplus", "C", "F"])
@pytest.mark.parametrize(("gate", "bidirectional"), [(False, False), (True, True)])
def test_layer_matches_appendix_d(kind: str, gate: bool, bidirectional: bool) -> None:
    torch.manual_seed(0)
    hidden = 3
    layer = RRNNLayer(4, hidden, kind, output_gate=gate, bidirectional=bidirectional, backend="torch").double()
    x = torch.randn(2, 6, 4, dtype=torch.float64)
    lengths = torch.tensor([6, 4])
    with torch.no_grad():
        h, _ = layer(x, lengths)
    for b in range(2):
        n = int(lengths[b])
        torch.testing.assert_close(h[b, :n, :hidden], equations(layer, x[b, :n], kind, hidden))
        assert torch.all(h[b, n:] == 0)
        if bidirectional:
            # the backward half is the same cell (its own rows) run on the reversed valid steps
            flipped = RRNNLayer(4, hidden, kind, output_gate=gate, backend="torch").double()
            with torch.no_grad():
                for name in ("forget", "update", "gate"):
                    module = getattr(layer, name)
                    if module is None:
                        continue
                    weight = module.weight.view(-1, layer.dim, 4)[:, hidden:].reshape(-1, 4)
                    getattr(flipped, name).weight.copy_(weight)
                    if module.bias is not None:
                        getattr(flipped, name).bias.copy_(module.bias.view(-1, layer.dim)[:, hidden:].reshape(-1))
                if kind == "F":
                    theirs = flipped.recurrence.parametrizations.constants.original
                    theirs.copy_(layer.recurrence.parametrizations.constants.original[:, hidden:])
            want = equations(flipped, x[b, :n].flip(0), kind, hidden).flip(0)
            torch.testing.assert_close(h[b, :n, hidden:], want)


@pytest.mark.parametrize("backend", ["torch", "cpp"])
def test_backends_agree_and_gradcheck(backend: str) -> None:
    torch.manual_seed(1)
    layer = RRNNLayer(3, 2, "F", output_gate=True, backend=backend).double()
    lengths = torch.tensor([4, 2])
    x = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: layer(v, lengths)[0], (x,))


def test_stacked_bidirectional_classifier_gets_gradients_everywhere() -> None:
    torch.manual_seed(0)
    model = RRNNClassifier(
        30,
        3,
        "C",
        hidden_size=4,
        num_layers=2,
        bidirectional=True,
        output_gate=True,
        embedding_dropout=0.1,
        vertical_dropout=0.1,
        recurrent_dropout=0.1,
        freeze_embeddings=False,
    )
    tokens = torch.randint(1, 30, (4, 7))
    model(tokens, torch.tensor([7, 5, 2, 1])).logsumexp(1).sum().backward()
    for name, parameter in model.named_parameters():
        if parameter.numel() == 0:  # a template without constants has an empty constant table
            continue
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_variational_dropout_shares_its_mask_over_time() -> None:
    model = RRNNClassifier(10, 2, "B", hidden_size=3, num_layers=1, recurrent_dropout=0.5)
    model.train()
    x = torch.ones(2, 5, 6)
    dropped = model.stack.variational(x)
    assert torch.all(dropped == dropped[:, :1])
    assert set(dropped.unique().tolist()) <= {0.0, 2.0}


def test_unknown_kind() -> None:
    with pytest.raises(LayerError, match="unknown RRNN kind 'D'"):
        rrnn_template("D")


@pytest.mark.parametrize("kind", ["B", "B-maxplus", "C", "F"])
@pytest.mark.slow
def test_classifier_trains_on_real_sst2(kind: str) -> None:
    from kleene.data import Vocabulary, classification_batches, glove_matrix, load

    torch.manual_seed(0)
    train = load("sst2").train[:160]
    vocab = Vocabulary.build([[tok for ex in train for tok in ex.tokens]])
    model = RRNNClassifier(len(vocab), 2, kind, hidden_size=32, num_layers=2)
    with torch.no_grad():
        model.embedding.weight.copy_(glove_matrix(vocab)[0])
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=5e-3)
    batches = classification_batches(train, vocab, 32)

    def total_loss() -> float:
        with torch.no_grad():
            return sum(float(torch.nn.functional.cross_entropy(model(b.tokens, b.lengths), b.targets)) for b in batches)

    before = total_loss()
    for _ in range(8):
        for batch in batches:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(batch.tokens, batch.lengths), batch.targets).backward()
            optimizer.step()
    assert total_loss() < 0.85 * before


@pytest.mark.slow
def test_language_model_trains_on_tiny_shakespeare() -> None:
    from kleene.data import Vocabulary, load

    torch.manual_seed(0)
    text = load("tinyshakespeare").train[:4000]
    vocab = Vocabulary.build([list(text)])
    ids = torch.tensor(vocab.encode(list(text)))
    windows = ids[: (len(ids) - 1) // 40 * 40 + 1]
    inputs, targets = windows[:-1].view(-1, 40), windows[1:].view(-1, 40)
    model = RRNNLanguageModel(len(vocab), "F", hidden_size=64, num_layers=1, embedding_dim=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    lengths = torch.full((inputs.shape[0],), 40)
    losses = []
    for _ in range(25):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs, lengths).flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.75 * losses[0]


def test_stack_options_a_layer_lacks_are_refused_by_name() -> None:
    from kleene.nn import build_model

    with pytest.raises(LayerError, match="ISANLayer layers have no option bidirectional"):
        build_model("isan", vocab_size=10, num_classes=2, bidirectional=True)
    with pytest.raises(LayerError, match="QRNNLayer layers have no option bidirectional"):
        build_model("qrnn", vocab_size=10, num_classes=2, bidirectional=True)
    bidirectional = build_model("rcnn", vocab_size=10, num_classes=2, bidirectional=True, hidden_size=4)
    assert bidirectional.stack.output_size == 8  # RCNN takes the option: both directions' units
