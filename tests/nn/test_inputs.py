"""Issue 12: every layer, model and compiled module checks its inputs at the boundary; empty batches and sequences
are legal. Each regression test below failed on the main of issue 12 (a raw torch error, a SIGFPE or a silently
wrong answer); the fuzz tests throw malformed inputs and require a kleene error, and well-formed ones and require
the batch's answer to equal the oracle of running each sequence alone, unpadded.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kleene.compile import compile
from kleene.compile.template import sopa_pattern
from kleene.errors import CompileError, KleeneError, LayerError, ModelConfigError, TrainingError
from kleene.nn import RRNNLayer, TrainConfig, build_model, registered_models
from kleene.nn.qrnn import QRNNLayer
from kleene.nn.rrnn import rrnn_template

VOCAB = 12
#: The words of the VOCAB ids, for the models built from rules over words.
TOKENS = ["<pad>", "<unk>", *(f"w{i}" for i in range(2, VOCAB))]


@functools.cache
def tiny(name: str) -> torch.nn.Module:
    """A small model of each registered name, in eval mode (dropout off), on the torch backend where it has one."""
    torch.manual_seed(0)
    sizes = {
        "cnn": {"embedding_dim": 6, "channels": 4, "mlp_hidden": 4, "window": 3},
        "bilstm": {"embedding_dim": 6, "hidden_size": 3, "mlp_hidden": 4},
        "sopa": {"embedding_dim": 6, "patterns": "2-2_3-2", "mlp_hidden": 4},
        "lstm-lm": {"embedding_dim": 6, "hidden_size": 5},
        "regex": {"embedding_dim": 6, "rules": {"1": ["w2 .", "w3 w4*"], "2": ["[^w5] w6"]}, "vocab": TOKENS},
    }.get(name, {"hidden_size": 3, "num_layers": 2, "embedding_dim": 6, "mlp_hidden": 4})
    kwargs = {"vocab_size": VOCAB, **sizes}
    if not name.endswith("-lm"):
        kwargs["num_classes"] = 3
    return build_model(name, **kwargs).eval()


MODELS = registered_models()


# -- regressions of issue 12 ---------------------------------------------------------------------------------------
def test_sopa_refuses_lengths_for_more_documents_than_tokens() -> None:
    with pytest.raises(LayerError, match=r"lengths must have shape \(B,\) = \(1,\)"):
        tiny("sopa")(torch.ones(1, 4, dtype=torch.long), torch.tensor([4, 2]))


@pytest.mark.parametrize("name", ["sopa", "rrnn-b", "cnn"])
def test_negative_and_fractional_lengths_are_refused(name: str) -> None:
    tokens = torch.ones(2, 4, dtype=torch.long)
    with pytest.raises(LayerError, match=r"lengths must lie in 0\.\.T = 0\.\.4; got min -1"):
        tiny(name)(tokens, torch.tensor([4, -1]))
    with pytest.raises(LayerError, match="lengths must hold integers"):
        tiny(name)(tokens, torch.tensor([4.5, 2.0]))


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("bad", [VOCAB, -1])
def test_token_ids_outside_the_vocabulary_are_refused(name: str, bad: int) -> None:
    tokens = torch.tensor([[2, bad, 3]])
    with pytest.raises(LayerError, match=rf"tokens must be ids in 0..{VOCAB - 1}"):
        tiny(name)(tokens, torch.tensor([3]))


@pytest.mark.parametrize("name", MODELS)
def test_empty_batches_and_empty_documents(name: str) -> None:
    model = tiny(name)
    lm = name.endswith("-lm")
    for batch, steps in ((0, 4), (0, 0), (3, 0)):
        out = model(torch.zeros(batch, steps, dtype=torch.long), torch.zeros(batch, dtype=torch.long))
        assert tuple(out.shape) == ((batch, steps, VOCAB) if lm else (batch, 3))
        assert torch.isfinite(out).all()
    if not lm:  # T = 0 and a zero length among longer documents give the same answer
        alone = model(torch.zeros(1, 0, dtype=torch.long), torch.zeros(1, dtype=torch.long))
        mixed = model(torch.tensor([[0, 0, 0], [4, 5, 6]]), torch.tensor([0, 3]))
        torch.testing.assert_close(mixed[0], alone[0], rtol=1e-5, atol=1e-6)


def test_complex_slots_are_refused_not_cast() -> None:
    module = compile(rrnn_template("B"), "real", 2, backend="torch")
    slots = torch.rand(1, 3, 2, 2, dtype=torch.complex64)
    with pytest.raises(CompileError, match="slots must be a real floating tensor"):
        module(slots)


@pytest.mark.parametrize("backend", ["torch", "cpp"])
def test_compiled_module_takes_an_empty_batch(backend: str) -> None:
    module = compile(sopa_pattern(3), "max-plus", 2, backend=backend)
    out, final = module(torch.zeros(0, 5, module.plan.num_slots, 2), torch.zeros(0, dtype=torch.long))
    assert tuple(out.shape) == (0, 5, 2) and tuple(final.shape) == (0, module.plan.num_states, 2)


@pytest.mark.parametrize("dim", [-3, 0, 2.5, True, "4"])
def test_compile_refuses_a_bad_dim(dim: object) -> None:
    with pytest.raises(CompileError, match="dim must be an integer >= 1"):
        compile(rrnn_template("B"), "real", dim, backend="torch")  # type: ignore[arg-type]


@pytest.mark.parametrize("layer", [RRNNLayer(5, 3), QRNNLayer(5, 3)])
def test_a_layer_input_of_the_wrong_width_is_refused(layer: torch.nn.Module) -> None:
    with pytest.raises(LayerError, match=r"last dimension 5 \(the module's input width\)"):
        layer(torch.rand(2, 4, 7), torch.tensor([4, 2]))


def test_unknown_keywords_and_wrong_types_name_the_model() -> None:
    with pytest.raises(ModelConfigError, match=r"model 'rrnn-b' cannot be built .*nosuchkw"):
        build_model("rrnn-b", vocab_size=5, num_classes=2, nosuchkw=1)
    with pytest.raises(LayerError, match=r"hidden_size must be an integer >= 1, got 2\.5"):
        build_model("rrnn-b", vocab_size=5, num_classes=2, hidden_size=2.5)
    with pytest.raises(ModelConfigError, match="vocab_size must be an integer >= 1, got 0"):
        build_model("sopa", vocab_size=0, num_classes=2)


# -- fuzz: malformed inputs ----------------------------------------------------------------------------------------
def _bad_lengths(batch: int, steps: int) -> st.SearchStrategy[object]:
    """Lengths that are wrong for a (batch, steps) token tensor: wrong count, out of range, wrong dtype."""
    wrong_count = st.integers(0, 4).filter(lambda n: n != batch).map(lambda n: torch.zeros(n, dtype=torch.long))
    out_of_range = st.sampled_from([-1, steps + 1, -(2**40)]).map(lambda v: torch.full((batch,), v)) if batch else None
    float_lengths = st.just(torch.full((batch,), 1.5))
    options = [wrong_count, float_lengths, st.just(torch.zeros(batch, dtype=torch.bool)), st.just("3")]
    options += [st.just(torch.zeros(batch, 1, dtype=torch.long))]
    if out_of_range is not None:
        options.append(out_of_range)
    return st.one_of(*options)


@st.composite
def malformed_batches(draw: st.DrawFn) -> tuple[object, object]:
    batch, steps = draw(st.integers(0, 3)), draw(st.integers(0, 5))
    good_tokens = torch.randint(0, VOCAB, (batch, steps), generator=torch.Generator().manual_seed(batch * 7 + steps))
    good_lengths = torch.full((batch,), steps, dtype=torch.long)
    which = draw(st.sampled_from(["tokens", "lengths"]))
    if which == "lengths":
        return good_tokens, draw(_bad_lengths(batch, steps))
    bad_tokens = draw(
        st.one_of(
            st.just(good_tokens.float()),
            st.just(good_tokens.unsqueeze(-1)),
            st.just(good_tokens.tolist()),
            st.sampled_from([VOCAB, VOCAB + 100, -1]).map(lambda v: torch.full((max(batch, 1), max(steps, 1)), v)),
        )
    )
    if isinstance(bad_tokens, torch.Tensor) and bad_tokens.dim() == 2 and bad_tokens.shape[0] != batch:
        good_lengths = torch.full((bad_tokens.shape[0],), bad_tokens.shape[1], dtype=torch.long)
    return bad_tokens, good_lengths


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(MODELS), malformed_batches())
def test_fuzz_models_refuse_malformed_batches(name: str, batch: tuple[object, object]) -> None:
    tokens, lengths = batch
    with pytest.raises(LayerError):
        tiny(name)(tokens, lengths)


# -- fuzz: well-formed inputs against the one-sequence-at-a-time oracle --------------------------------------------
@st.composite
def documents(draw: st.DrawFn) -> list[list[int]]:
    return draw(st.lists(st.lists(st.integers(1, VOCAB - 1), max_size=6), max_size=4))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(MODELS), documents())
@pytest.mark.slow
def test_fuzz_a_batch_equals_its_documents_alone(name: str, docs: list[list[int]]) -> None:
    model = tiny(name)
    steps = max((len(d) for d in docs), default=0)
    tokens = torch.zeros(len(docs), steps, dtype=torch.long)
    for row, doc in enumerate(docs):
        tokens[row, : len(doc)] = torch.tensor(doc, dtype=torch.long)
    lengths = torch.tensor([len(d) for d in docs], dtype=torch.long)
    with torch.no_grad():
        out = model(tokens, lengths)
        assert out.shape[0] == len(docs)
        for row, doc in enumerate(docs):
            alone = model(torch.tensor([doc], dtype=torch.long).reshape(1, len(doc)), torch.tensor([len(doc)]))
            got = out[row, : len(doc)] if name.endswith("-lm") else out[row]
            # float32 sums in another order (padding changes the batched kernels' shapes): a few ulps of O(1) values
            torch.testing.assert_close(got, alone[0], rtol=1e-5, atol=1e-5)


# -- fuzz: trainer settings -----------------------------------------------------------------------------------------
COUNTS = ("epochs", "batch_size", "patience", "halve_after", "window", "max_steps", "eval_every")
BAD_COUNTS = st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.booleans(), st.text(max_size=3))
BAD_REALS = st.one_of(
    st.floats(max_value=-1e-12), st.sampled_from([float("nan"), float("inf")]), st.booleans(), st.just("1e-3")
)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzz_trainer_settings(data: st.DataObject) -> None:
    field = data.draw(st.sampled_from([*COUNTS, "lr", "weight_decay", "clip", "seed", "progress"]))
    if field in COUNTS:
        value = data.draw(BAD_COUNTS)
    elif field == "seed":
        value = data.draw(st.one_of(st.integers(max_value=-1), st.floats(), st.text(max_size=2)))
    elif field == "progress":
        value = data.draw(st.one_of(st.integers(), st.text(max_size=2)))
    else:
        value = data.draw(BAD_REALS if field != "lr" else st.one_of(BAD_REALS, st.just(0.0)))
    with pytest.raises(TrainingError, match=field):
        TrainConfig(**{field: value})


def test_every_kleene_error_here_is_a_kleene_error() -> None:
    for error in (LayerError, CompileError, ModelConfigError, TrainingError):
        assert issubclass(error, KleeneError)


# -- fuzz: compiled modules (slots, lengths, h0) ---------------------------------------------------------------------
@functools.cache
def compiled(backend: str) -> torch.nn.Module:
    return compile(rrnn_template("C"), "real", 2, backend=backend)


@st.composite
def malformed_module_inputs(draw: st.DrawFn) -> tuple[object, object, object]:
    module = compiled("torch")
    batch, steps, slots_count = draw(st.integers(0, 3)), draw(st.integers(0, 4)), module.plan.num_slots
    states = module.plan.num_states
    slots = torch.rand(batch, steps, slots_count, 2)
    lengths: object = torch.full((batch,), steps)
    h0: object = None
    which = draw(st.sampled_from(["slots", "lengths", "h0"]))
    if which == "slots":
        slots = draw(
            st.sampled_from(
                [
                    torch.rand(batch, steps, slots_count, 3),  # wrong D
                    torch.rand(batch, steps, slots_count + 1, 2),  # wrong S
                    torch.rand(batch, steps, 2),  # wrong rank
                    torch.rand(batch, steps, slots_count, 2).to(torch.complex64),
                    torch.ones(batch, steps, slots_count, 2, dtype=torch.long),
                    slots.tolist(),
                ]
            )
        )
        lengths = None
    elif which == "lengths":
        lengths = draw(_bad_lengths(batch, steps))
    else:
        h0 = draw(
            st.sampled_from(
                [
                    torch.rand(batch + 1, states, 2),
                    torch.rand(batch, states + 1, 2),
                    torch.rand(batch, states, 2).to(torch.complex64),
                    torch.rand(batch, states),
                ]
            )
        )
    return slots, lengths, h0


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["torch", "cpp"]), malformed_module_inputs())
def test_fuzz_compiled_modules_refuse_malformed_inputs(backend: str, inputs: tuple[object, object, object]) -> None:
    slots, lengths, h0 = inputs
    with pytest.raises(CompileError):
        compiled(backend)(slots, lengths, h0)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["torch", "cpp"]), st.lists(st.integers(0, 5), max_size=4))
def test_fuzz_compiled_modules_batch_equals_rows_alone(backend: str, lengths: list[int]) -> None:
    module = compiled(backend)
    steps = max(lengths, default=0)
    slots = torch.rand(len(lengths), steps, module.plan.num_slots, 2, generator=torch.Generator().manual_seed(steps))
    with torch.no_grad():
        out, final = module(slots, torch.tensor(lengths, dtype=torch.long))
        for row, length in enumerate(lengths):
            alone, alone_final = module(slots[row : row + 1, :length], torch.tensor([length]))
            # float32, the same recurrence on the same row: only the kernels' work split differs (a few ulps)
            torch.testing.assert_close(out[row, :length], alone[0], rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(final[row], alone_final[0], rtol=1e-6, atol=1e-6)
