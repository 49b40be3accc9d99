"""Delayed RNNs: the stacked -> delayed conversion against torch's own stacked modules, and the Delayed wrapper."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from kleene.errors import LayerError
from kleene.nn import ConversionError, Delayed, delayed_from_stacked, delayed_loss_mask

DOUBLE = torch.float64
#: Tolerances of the float64 comparisons below: both sides compute the same O(1) values (tanh/sigmoid-bounded states of
#: a few layers, 6 steps) with the products grouped differently (one block matrix vs per-layer matrices), so they
#: differ by a few ulps times the number of summed terms (~1e-15); 1e-12 (1e-13 for a single LSTM) leaves three orders
#: of magnitude for another machine's summation order (BLAS kernels and vector widths differ between CPUs) and still
#: catches any wrong weight or step. Lemma 1's recovery is ill-conditioned and has its own bound (recovery_tolerance).
INPUT, HIDDEN, BATCH, LENGTH = 3, 4, 2, 6
CELLS = [
    pytest.param(nn.RNN, {"nonlinearity": "tanh"}, id="rnn-tanh"),
    pytest.param(nn.RNN, {"nonlinearity": "relu"}, id="rnn-relu"),
    pytest.param(nn.LSTM, {}, id="lstm"),
]


def make_stacked(cell, extra, layers: int, *, batch_first: bool, bias: bool, seed: int) -> nn.RNNBase:
    torch.manual_seed(seed)
    stacked = cell(INPUT, HIDDEN, layers, batch_first=batch_first, bias=bias, dtype=DOUBLE, **extra)
    with torch.no_grad():  # weights larger than torch's init so that every layer matters
        for parameter in stacked.parameters():
            parameter.uniform_(-0.8, 0.8)
    return stacked.eval()


def random_input(batch_first: bool, length: int = LENGTH) -> torch.Tensor:
    shape = (BATCH, length, INPUT) if batch_first else (length, BATCH, INPUT)
    return torch.randn(shape, dtype=DOUBLE)


def random_state(cell: type[nn.RNNBase], layers: int):
    """Arbitrary initial states, as torch accepts them (not restricted to the activation's range)."""
    hidden = 1.5 * torch.randn(layers, BATCH, HIDDEN, dtype=DOUBLE)
    return (hidden, 2 * torch.randn(layers, BATCH, HIDDEN, dtype=DOUBLE)) if cell is nn.LSTM else hidden


@pytest.mark.parametrize(("cell", "extra"), CELLS)
@pytest.mark.parametrize("layers", [1, 2, 3, 4])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("warmup", ["auto", "clamp"])
def test_conversion_equals_torch_stacked(cell, extra, layers, batch_first, bias, warmup):
    stacked = make_stacked(cell, extra, layers, batch_first=batch_first, bias=bias, seed=layers)
    converted = delayed_from_stacked(stacked, warmup=warmup)
    assert converted.delay == layers - 1
    assert type(converted.inner) is cell and converted.inner.num_layers == 1
    assert converted.inner.hidden_size == layers * HIDDEN
    x = random_input(batch_first)
    state = random_state(cell, layers)
    torch.testing.assert_close(converted(x, state), stacked(x, state)[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(converted(x), stacked(x)[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize(("cell", "extra"), CELLS)
def test_conversion_gradients_equal_torch_stacked(cell, extra):
    stacked = make_stacked(cell, extra, 3, batch_first=True, bias=True, seed=7)
    converted = delayed_from_stacked(stacked)
    x = random_input(True).requires_grad_()
    state = random_state(cell, 3)
    weights = torch.randn(BATCH, LENGTH, HIDDEN, dtype=DOUBLE)
    (expected,) = torch.autograd.grad((stacked(x, state)[0] * weights).sum(), x)
    (got,) = torch.autograd.grad((converted(x, state) * weights).sum(), x)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("cell", "extra"), CELLS)
def test_clamped_conversion_weight_gradients_equal_torch_stacked(cell, extra):
    """Each block of the inner weights receives exactly the gradient of the stacked weight it copies."""
    layers, n = 3, HIDDEN
    stacked = make_stacked(cell, extra, layers, batch_first=True, bias=True, seed=8)
    converted = delayed_from_stacked(stacked, warmup="clamp")
    x, state = random_input(True), random_state(cell, layers)
    weights = torch.randn(BATCH, LENGTH, HIDDEN, dtype=DOUBLE)
    (stacked(x, state)[0] * weights).sum().backward()
    (converted(x, state) * weights).sum().backward()
    inner = converted.inner
    for gate in range(4 if cell is nn.LSTM else 1):
        gate_rows = slice(gate * n, (gate + 1) * n)
        for layer in range(layers):
            rows = slice(gate * layers * n + layer * n, gate * layers * n + (layer + 1) * n)
            pairs = [
                (inner.weight_hh_l0.grad[rows, layer * n : (layer + 1) * n], f"weight_hh_l{layer}"),
                (inner.bias_ih_l0.grad[rows], f"bias_ih_l{layer}"),
                (inner.bias_hh_l0.grad[rows], f"bias_hh_l{layer}"),
                (
                    inner.weight_ih_l0.grad[rows]
                    if layer == 0
                    else inner.weight_hh_l0.grad[rows, (layer - 1) * n : layer * n],
                    f"weight_ih_l{layer}",
                ),
            ]
            for got, name in pairs:
                torch.testing.assert_close(got, getattr(stacked, name).grad[gate_rows], rtol=0, atol=1e-12)


@pytest.mark.parametrize(("cell", "extra"), CELLS)
@pytest.mark.parametrize("layers", [3, 4])
def test_block_bidiagonal_structure(cell, extra, layers):
    stacked = make_stacked(cell, extra, layers, batch_first=True, bias=True, seed=3)
    inner = delayed_from_stacked(stacked).inner
    gates = 4 if cell is nn.LSTM else 1
    n = HIDDEN
    for gate in range(gates):
        for row in range(layers):
            rows = slice(gate * layers * n + row * n, gate * layers * n + (row + 1) * n)
            gate_rows = slice(gate * n, (gate + 1) * n)
            block_ih = inner.weight_ih_l0[rows]
            if row == 0:
                assert torch.equal(block_ih, stacked.weight_ih_l0[gate_rows])
            else:
                assert not block_ih.any()
            for col in range(layers):
                block = inner.weight_hh_l0[rows, col * n : (col + 1) * n]
                if col == row:
                    assert torch.equal(block, getattr(stacked, f"weight_hh_l{row}")[gate_rows])
                elif col == row - 1:
                    assert torch.equal(block, getattr(stacked, f"weight_ih_l{row}")[gate_rows])
                else:
                    assert not block.any(), (gate, row, col)


def reachable_state(converted, cell, layers: int):
    """A stacked initial state that Lemma 1 can reach: push a random single-layer state through the warm-up.

    Returns (stacked state, the single-layer initial state that produced it).
    """
    n = HIDDEN
    start_hidden = 0.5 * torch.rand(1, BATCH, layers * n, dtype=DOUBLE)
    start = (start_hidden, torch.randn(1, BATCH, layers * n, dtype=DOUBLE)) if cell is nn.LSTM else start_hidden
    hidden = [start_hidden[0, :, :n]]
    cells = [start[1][0, :, :n]] if cell is nn.LSTM else []
    state = start
    with torch.no_grad():
        for step in range(1, layers):
            _, state = converted.inner(torch.zeros(BATCH, 1, INPUT, dtype=DOUBLE), state)
            step_hidden = state[0] if cell is nn.LSTM else state
            hidden.append(step_hidden[0, :, step * n : (step + 1) * n])
            if cell is nn.LSTM:
                cells.append(state[1][0, :, step * n : (step + 1) * n])
    stacked_state = (torch.stack(hidden), torch.stack(cells)) if cell is nn.LSTM else torch.stack(hidden)
    return stacked_state, start


def recovery_tolerance(converted, cell, layers: int, start) -> float:
    """The accuracy to expect of Lemma 1's recovered initial state, from the conditioning of the problem.

    The warm-up is a smooth map F: start -> stacked state (per batch row, square: k n hidden (and k n cell) values
    each way); Lemma 1 computes F^{-1}. Rounding the stacked state and each backward step by a few ulps moves the
    result by at most about ||J_F^{-1}||_inf ulps of the state's scale (first order), so the bound is
    ``16 eps ||J_F^{-1}||_inf max(1, |state|)``: 16 covers the handful of roundings per step (observed: <= 1.2
    eps ||J_F^{-1}|| on AMD). It ranges from ~1e-13 (2 layers) to ~1e-4 for the 4-layer LSTM, whose J_F^{-1} has
    norm ~3e10 (its recovery error is 6e-9 on an AMD EPYC and 2.7e-8 on an Intel Xeon, so no fixed 1e-8 fits).
    """
    n, lstm = HIDDEN, cell is nn.LSTM
    zero_input = torch.zeros(1, 1, INPUT, dtype=DOUBLE)

    def warmup(flat: torch.Tensor) -> torch.Tensor:
        hidden = flat[: layers * n].reshape(1, 1, layers * n)
        state = (hidden, flat[layers * n :].reshape(1, 1, layers * n)) if lstm else hidden
        blocks_h, blocks_c = [hidden[0, :, :n]], [state[1][0, :, :n]] if lstm else []
        for step in range(1, layers):
            _, state = converted.inner(zero_input, state)
            blocks_h.append((state[0] if lstm else state)[0, :, step * n : (step + 1) * n])
            if lstm:
                blocks_c.append(state[1][0, :, step * n : (step + 1) * n])
        return torch.cat([block.reshape(-1) for block in blocks_h + blocks_c])

    parts = start if lstm else (start,)
    worst = 0.0
    for row in range(BATCH):
        point = torch.cat([part[0, row] for part in parts])
        jacobian = torch.autograd.functional.jacobian(warmup, point)
        inverse_norm = float(torch.linalg.inv(jacobian).abs().sum(1).max())
        worst = max(worst, inverse_norm * max(1.0, float(warmup(point).detach().abs().max())))
    return 16 * torch.finfo(DOUBLE).eps * worst


@pytest.mark.parametrize(("cell", "extra"), CELLS)
@pytest.mark.parametrize("layers", [2, 3, 4])
def test_lemma1_initial_state_where_it_exists(cell, extra, layers):
    stacked = make_stacked(cell, extra, layers, batch_first=True, bias=True, seed=11 + layers)
    if extra.get("nonlinearity") == "relu":
        # Lemma 1 inverts relu by the identity, which misses preimages of clipped zeros; with positive weights and
        # a positive start no unit is clipped during the warm-up
        with torch.no_grad():
            for parameter in stacked.parameters():
                parameter.abs_()
    converted = delayed_from_stacked(stacked, warmup="lemma1")
    state, start = reachable_state(converted, cell, layers)
    x = random_input(True)
    # the same float64 forward pass, with the layers' products grouped as blocks: a well-conditioned sum of O(1) terms
    # over 6 steps and a few layers, so both agree to ~1e-14; 1e-10 leaves 4 orders of magnitude for summation order
    torch.testing.assert_close(converted(x, state), stacked(x, state)[0], rtol=0, atol=1e-10)
    # the activations are injective on the warm-up and W_h is invertible: the initial state that produced `state` is
    # the only one, and Lemma 1 must recover it, as accurately as the problem's conditioning allows
    recovered = converted.lemma1_initial_state(state, x)
    tolerance = recovery_tolerance(converted, cell, layers, start)
    for got, expected in zip(recovered if cell is nn.LSTM else (recovered,), start if cell is nn.LSTM else (start,)):
        torch.testing.assert_close(got, expected, rtol=0, atol=tolerance)


def test_lemma1_two_layer_tanh_reaches_any_state_in_range():
    stacked = make_stacked(nn.RNN, {"nonlinearity": "tanh"}, 2, batch_first=False, bias=True, seed=5)
    converted = delayed_from_stacked(stacked, warmup="lemma1")
    state = 1.8 * torch.rand(2, BATCH, HIDDEN, dtype=DOUBLE) - 0.9
    x = random_input(False)
    torch.testing.assert_close(converted(x, state), stacked(x, state)[0], rtol=0, atol=1e-11)


def test_lemma1_zero_state_of_two_layer_lstm():
    """h0 = c0 = 0 leaves the output gate free (h = o tanh(0) for every o), so Lemma 1 reaches torch's default."""
    stacked = make_stacked(nn.LSTM, {}, 2, batch_first=True, bias=True, seed=2)
    converted = delayed_from_stacked(stacked, warmup="lemma1")
    x = random_input(True)
    torch.testing.assert_close(converted(x), stacked(x)[0], rtol=0, atol=1e-12)


def test_lemma1_unreachable_states_raise():
    tanh = delayed_from_stacked(make_stacked(nn.RNN, {}, 2, batch_first=True, bias=True, seed=1), warmup="lemma1")
    outside = torch.full((2, BATCH, HIDDEN), 1.5, dtype=DOUBLE)
    with pytest.raises(ConversionError, match=r"layer 2 .* outside the range \(-1, 1\) of tanh"):
        tanh(random_input(True), outside)
    relu = delayed_from_stacked(
        make_stacked(nn.RNN, {"nonlinearity": "relu"}, 2, batch_first=True, bias=True, seed=1), warmup="lemma1"
    )
    with pytest.raises(ConversionError, match=r"outside the range \[0, inf\) of relu"):
        relu(random_input(True), -torch.ones(2, BATCH, HIDDEN, dtype=DOUBLE))
    lstm = delayed_from_stacked(make_stacked(nn.LSTM, {}, 2, batch_first=True, bias=True, seed=1), warmup="lemma1")
    hidden = torch.full((2, BATCH, HIDDEN), 0.5, dtype=DOUBLE)
    cell = torch.full((2, BATCH, HIDDEN), 0.1, dtype=DOUBLE)  # |h| > |tanh(c)|: no output gate in (0, 1) fits
    with pytest.raises(ConversionError, match=r"layer 2 at step 1 needs h = o \* tanh\(c\)"):
        lstm(random_input(True), (hidden, cell))


def test_unbatched_input():
    stacked = make_stacked(nn.LSTM, {}, 3, batch_first=True, bias=True, seed=4)
    converted = delayed_from_stacked(stacked)
    x = torch.randn(LENGTH, INPUT, dtype=DOUBLE)
    state = (torch.randn(3, HIDDEN, dtype=DOUBLE), torch.randn(3, HIDDEN, dtype=DOUBLE))
    torch.testing.assert_close(converted(x, state), stacked(x, state)[0], rtol=0, atol=1e-12)


def test_float32_conversion():
    torch.manual_seed(0)
    stacked = nn.LSTM(INPUT, HIDDEN, 3, batch_first=True)
    converted = delayed_from_stacked(stacked)
    x = torch.randn(BATCH, LENGTH, INPUT)
    # against the float64 truth, not against each other: both float32 passes are an LSTM's contracting recurrence on
    # O(1) values (|h| < 1), whose rounding errors stay within a few dozen ulps (observed ~0.3 eps); 64 eps is stated
    reference = copy.deepcopy(stacked).double()(x.double())[0]
    bound = 64 * torch.finfo(torch.float32).eps
    with torch.no_grad():
        torch.testing.assert_close(converted(x).double(), reference, rtol=0, atol=bound)
        torch.testing.assert_close(stacked(x)[0].double(), reference, rtol=0, atol=bound)


@pytest.mark.parametrize(
    ("module", "message"),
    [
        (nn.GRU(3, 4, 2), "expected torch.nn.RNN or torch.nn.LSTM, got GRU"),
        (nn.LSTM(3, 4, 2, bidirectional=True), "bidirectional"),
        (nn.LSTM(3, 4, 2, proj_size=2), "proj_size=2"),
    ],
)
def test_unsupported_modules_raise(module, message):
    with pytest.raises(ConversionError, match=message):
        delayed_from_stacked(module)


def test_unknown_warmup_raises():
    with pytest.raises(LayerError, match="warmup must be"):
        delayed_from_stacked(nn.RNN(3, 4, 2), warmup="backwards")  # type: ignore[arg-type]


# -- the Delayed wrapper -------------------------------------------------------------------------------------------


def test_delayed_wrapper_per_sequence_null_inputs():
    """Each sequence gets its d nulls right after its own end, as if it were run alone."""
    torch.manual_seed(0)
    lstm = nn.LSTM(INPUT, HIDDEN, batch_first=True, dtype=DOUBLE)
    delay = 3
    wrapped = Delayed(lstm, delay)
    lengths = torch.tensor([6, 2, 4])
    x = torch.randn(3, 6, INPUT, dtype=DOUBLE)  # padding positions hold garbage on purpose
    output, _ = wrapped(x, lengths)
    assert output.shape == (3, 6, HIDDEN)
    for b, length in enumerate(lengths.tolist()):
        alone = torch.cat([x[b, :length], torch.zeros(delay, INPUT, dtype=DOUBLE)]).unsqueeze(0)
        expected = lstm(alone)[0][0, delay : delay + length]
        torch.testing.assert_close(output[b, :length], expected, rtol=0, atol=1e-13)


def test_delayed_wrapper_sees_exactly_delay_steps_ahead():
    torch.manual_seed(0)
    delay = 2
    wrapped = Delayed(nn.RNN(INPUT, HIDDEN, batch_first=False, dtype=DOUBLE), delay)
    x = torch.randn(LENGTH, 1, INPUT, dtype=DOUBLE, requires_grad=True)
    output, _ = wrapped(x)
    t = 1
    (grad,) = torch.autograd.grad(output[t].sum(), x)
    influence = grad.abs().sum(dim=(1, 2))
    assert bool((influence[: t + delay + 1] > 0).all())
    assert not influence[t + delay + 1 :].any()


def test_delayed_wrapper_custom_null_and_lengths_keyword():
    class CumulativeSum(nn.Module):
        """A toy recurrent layer with kleene's (x, lengths) calling convention."""

        batch_first = True

        def __init__(self) -> None:
            super().__init__()
            self.seen_lengths: torch.Tensor | None = None

        def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
            self.seen_lengths = lengths
            return x.cumsum(dim=1)

    layer = CumulativeSum()
    null = torch.tensor([10.0, 0.0])
    wrapped = Delayed(layer, 2, null=null)
    x = torch.ones(2, 3, 2)
    output = wrapped(x, torch.tensor([3, 1]))
    assert layer.seen_lengths is not None and layer.seen_lengths.tolist() == [5, 3]
    # sequence 1 (length 1): its input, then the nulls [10, 0] twice; the delayed output for input 0 is step 2
    assert output[1, 0].tolist() == [21.0, 1.0]
    assert output[0].tolist() == [[3.0, 3.0], [13.0, 3.0], [23.0, 3.0]]
    # inputs with several feature dimensions, like a compiled layer's slots (B, T, A, D)
    slots = torch.ones(2, 3, 2, 2)
    output = wrapped(slots, torch.tensor([3, 1]))
    assert output.shape == slots.shape
    assert output[1, 0].tolist() == [[21.0, 1.0], [21.0, 1.0]]
    with pytest.raises(ValueError, match="null input of shape"):
        Delayed(layer, 1, null=torch.zeros(3))(x)


def test_delayed_loss_mask():
    mask = delayed_loss_mask([3, 1], max_length=3, delay=2)
    assert mask.tolist() == [
        [False, False, True, True, True],
        [False, False, True, False, False],
    ]
    assert Delayed(nn.RNN(1, 1), 2).loss_mask([3, 1], 3).equal(mask)
    with pytest.raises(LayerError, match="delay must be >= 0"):
        Delayed(nn.RNN(1, 1), -1)


# -- the sequence-reversal example ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_reversal_example_runs_and_reports_the_analytic_bound(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "delayed_reversal.py"
    command = [sys.executable, str(script), "--epochs", "1", "--delays", "0", "19", "--train", "200", "--valid", "100",
               "--test", "100", "--out", str(tmp_path)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    rows = json.loads((tmp_path / "delayed_reversal.json").read_text())["rows"]
    assert [row["model"] for row in rows] == ["bilstm", "lstm", "d-lstm (d=19)"]
    # (1 + 1/V) / 2 + floor((d + 1) / 2) / T (1 - 1/V) with T = 20, V = 4
    assert [row["bound"] for row in rows] == [1.0, 0.625, 1.0]
    assert (tmp_path / "delayed_reversal.png").stat().st_size > 10_000
    assert rows[1]["test_accuracy_unreachable"] is not None and rows[2]["test_accuracy_unreachable"] is None
    assert "| d-lstm (d=19) | 19 |" in (tmp_path / "delayed_reversal.md").read_text()


def test_reversal_bound_is_the_share_of_reachable_outputs():
    """The paper's closed form equals: reachable outputs always right, the others right with probability 1/V."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "delayed_reversal.py"
    spec = importlib.util.spec_from_file_location("delayed_reversal", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    for delay in range(example.LENGTH):
        share = int(example.reachable(delay).sum()) / example.LENGTH
        assert example.bound(delay) == pytest.approx(share + (1 - share) / example.VOCAB, abs=1e-12), delay


@pytest.mark.parametrize(
    ("lengths", "message"),
    [([3, -1], "0..4"), ([3, 5], "0..4"), ([3], "one length per sequence"), (torch.tensor([1.5, 2.0]), "integer")],
)
def test_delayed_checks_its_lengths(lengths: object, message: str) -> None:
    """Before: a negative or too long length padded the wrong steps, a fractional one was truncated."""
    wrapped = Delayed(nn.RNN(2, 3, batch_first=True), 1)
    with pytest.raises(ConversionError, match=message):
        wrapped(torch.zeros(2, 4, 2), lengths)
    output, _ = wrapped(torch.zeros(2, 4, 2), [4, 0])
    assert output.shape == (2, 4, 3)
