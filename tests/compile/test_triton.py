"""The generated Triton kernels, run by Triton's interpreter on CPU tensors, against the torch reference.

Triton decides at decoration time whether a kernel is interpreted, so the ``interpreter`` fixture sets
``TRITON_INTERPRET=1`` before any generated kernel module is loaded (modules are cached per mode). The
interpreter is thousands of times slower than a GPU: sizes are tiny. The ahead-of-time test compiles the
same generated kernels to PTX for sm_80 with Triton's real compiler (no GPU needed).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import pytest
import torch

from kleene.automata.examples import paper_automaton_f
from kleene.compile import CompileError, Options, Template, compile, dense_template, lower, sopa_pattern
from kleene.compile.reference import run_reference, static_params

from .oracle import (
    OUTPUT_MAPS,
    SEMIRINGS,
    function_wfsa,
    oracle_outputs,
    random_slots,
    random_template,
    set_constants,
    with_output_map,
)

pytest.importorskip("triton", reason="the optional triton package (pip install 'kleene[gpu]') is not installed")

from kleene.compile.codegen.triton import generate_triton
from kleene.compile.runtime import gpu


@pytest.fixture(scope="module")
def interpreter() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        yield


def _masked(y: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(y), y, torch.zeros_like(y))


def _pair(template: Template, semiring: str, dim: int, dtype: torch.dtype = torch.float64, **options: object):  # type: ignore[no-untyped-def]
    kernel = compile(template, semiring, dim, "triton", **options).to(dtype)  # type: ignore[arg-type]
    ref = compile(template, semiring, dim, "torch", **options).to(dtype)  # type: ignore[arg-type]
    assert kernel.backend == "triton" and kernel._runner is not run_reference
    return kernel, ref


def _agree(kernel, ref, slots: torch.Tensor, lengths: torch.Tensor, h0: torch.Tensor | None, seed: int,  # type: ignore[no-untyped-def]
           rtol: float = 1e-9, atol: float = 1e-10) -> None:
    """Outputs, final states and the gradients of a random projection of both agree."""
    ref.load_state_dict(kernel.state_dict())
    results = []
    for module in (kernel, ref):
        x = slots.detach().clone().requires_grad_()
        h = None if h0 is None else h0.detach().clone().requires_grad_()
        out, final = module(x, lengths, h)
        gen = torch.Generator().manual_seed(seed)
        loss = (_masked(out) * torch.randn(out.shape, generator=gen, dtype=out.dtype)).sum()
        loss = loss + (_masked(final) * torch.randn(final.shape, generator=gen, dtype=out.dtype)).sum()
        wrt = [x, *module.parameters()] + ([h] if h is not None else [])  # constants, if any
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
        results.append((out.detach(), final.detach(), grads))
    (out_k, fin_k, g_k), (out_r, fin_r, g_r) = results
    for got, expected in ((out_k, out_r), (fin_k, fin_r)):
        assert torch.equal(torch.isfinite(got), torch.isfinite(expected))
        torch.testing.assert_close(_masked(got), _masked(expected), rtol=rtol, atol=atol)
    assert g_k[0] is not None and bool(g_k[0].abs().sum() > 0), "no gradient reached the slots"
    for got, expected in zip(g_k, g_r):
        if expected is None:
            assert got is None or bool((got == 0).all())
            continue
        torch.testing.assert_close(got, expected, rtol=rtol * 10, atol=atol * 10)


@pytest.mark.usefixtures("interpreter")
@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.slow
def test_random_templates_agree_with_reference(semiring: str, seed: int) -> None:
    """Random topologies with epsilon arcs (cycles allowed), every output mode, both directions, h0."""
    rng = random.Random(400 + seed)
    gen = torch.Generator().manual_seed(seed)
    template = random_template(rng, semiring)
    options = {"restart": seed == 1, "epsilon_cap": rng.choice([None, 1]), "bidirectional": seed != 1,
               "output": ("steps", "sum", "last")[seed]}
    kernel, ref = _pair(template, semiring, 4, **options)
    set_constants(kernel, gen)
    slots = random_slots(semiring, (3, 5, len(template.slots), 4), gen)
    h0 = random_slots(semiring, (3, template.num_states, 4), gen) if seed == 0 else None
    lengths = torch.tensor([rng.randint(1, 5), 5, 0])
    _agree(kernel, ref, slots, lengths, h0, seed)


@pytest.mark.usefixtures("interpreter")
@pytest.mark.parametrize("semiring", ["real", "log", "max-times"])
def test_weight_functions_agree_with_reference(semiring: str) -> None:
    """Gates, squares and exponentials of raw slots computed in the kernel (load path and chain rule), with
    |z| up to 40 (stable spellings), both directions."""
    gen = torch.Generator().manual_seed(9)
    template = Template.from_wfsa(function_wfsa(semiring))
    kernel, ref = _pair(template, semiring, 4, bidirectional=True)
    slots = torch.randn((2, 4, len(template.slots), 4), generator=gen, dtype=torch.float64) * 1.5
    slots[0, 1, 0, 0], slots[1, 0, 0, 3] = 40.0, -40.0
    _agree(kernel, ref, slots, torch.tensor([4, 3]), None, 9)


@pytest.mark.usefixtures("interpreter")
@pytest.mark.parametrize(("semiring", "kind"), [("real", "highway"), ("max-times", "gated")])
def test_output_maps_agree_with_reference(semiring: str, kind: str) -> None:
    """An output map (``oracle.OUTPUT_MAPS``: raw slots only the map reads, a constant) in the store path and the
    backward, both directions, an empty sequence (h 0 at padding)."""
    gen = torch.Generator().manual_seed(10)
    template = with_output_map(Template.from_wfsa(paper_automaton_f(semiring)), kind)
    kernel, ref = _pair(template, semiring, 4, bidirectional=True)
    set_constants(kernel, gen)
    ref.load_state_dict(kernel.state_dict())
    slots = random_slots(semiring, (3, 4, len(template.slots), 4), gen)
    slots[:, :, -2:] = torch.randn((3, 4, 2, 4), generator=gen, dtype=torch.float64)
    constants = torch.randn((len(OUTPUT_MAPS[kind][1]), 4), generator=gen, dtype=torch.float64)
    lengths = torch.tensor([4, 0, 2])
    results = []
    for module in (kernel, ref):
        x, c = slots.clone().requires_grad_(), constants.clone().requires_grad_()
        h, _ = module(x, lengths, output_constants=c if len(c) else None)
        weights = torch.randn(h.shape, generator=torch.Generator().manual_seed(11), dtype=h.dtype)
        grads = torch.autograd.grad((h * weights).sum(), [x, c, *module.parameters()], allow_unused=True)
        results.append((h.detach(), [g for g in grads if g is not None]))
    assert bool((results[0][0][1] == 0).all())
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-9, atol=1e-10)
    assert len(results[0][1]) == len(results[1][1])
    for got, expected in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(got, expected, rtol=1e-8, atol=1e-9)


@pytest.mark.slow
@pytest.mark.usefixtures("interpreter")
def test_min_plus_and_dense_topology() -> None:
    """The fifth kernel algebra (tropical costs) on an ISAN-style dense topology, with h0."""
    gen = torch.Generator().manual_seed(5)
    template = dense_template(3)
    kernel, ref = _pair(template, "min-plus", 4, output="last")
    slots = -random_slots("log", (2, 4, 9, 4), gen)  # costs: -log of probabilities
    h0 = -random_slots("log", (2, 3, 4), gen)
    _agree(kernel, ref, slots, torch.tensor([4, 3]), h0, 5)


@pytest.mark.usefixtures("interpreter")
def test_sopa_pattern_against_the_automaton_forward() -> None:
    """SoPa's document score (restart, sum over spans) equals kleene.automata's all-spans Forward,
    an oracle independent of the reference backend."""
    gen = torch.Generator().manual_seed(6)
    semiring = "max-times"
    template = sopa_pattern(4)
    options = Options(restart=True, output="steps", bidirectional=True)
    kernel = compile(template, semiring, 4, "triton", restart=True, bidirectional=True).double()
    set_constants(kernel, gen)
    slots = random_slots(semiring, (2, 5, len(template.slots), 4), gen)
    lengths = [5, 3]
    out, _ = kernel(slots, torch.tensor(lengths))
    expected = oracle_outputs(template, semiring, options, slots, kernel.constants.detach(), lengths)
    assert torch.equal(torch.isfinite(out), torch.isfinite(expected))
    torch.testing.assert_close(_masked(out), _masked(expected), rtol=1e-9, atol=1e-10)


@pytest.mark.slow
@pytest.mark.usefixtures("interpreter")
def test_float32_blocks_and_bidirectional_split(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several programs per sequence (BLOCK=4, D=10 -> 2 forward + 2 reversed blocks, partial ones masked),
    in float32."""
    monkeypatch.setattr(gpu, "TRITON_BLOCK", 4)
    gen = torch.Generator().manual_seed(7)
    template = Template.from_wfsa(paper_automaton_f("log"))
    kernel, ref = _pair(template, "log", 10, torch.float32, bidirectional=True, restart=True, output="sum")
    set_constants(kernel, gen)
    slots = random_slots("log", (2, 6, 4, 10), gen, torch.float32)
    _agree(kernel, ref, slots, torch.tensor([6, 2]), None, 7, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("interpreter")
@pytest.mark.parametrize("semiring", ["real", "log"])
@pytest.mark.slow
def test_gradcheck(semiring: str) -> None:
    """float64 gradcheck (fast mode: random projections) of the generated backward (F: epsilon, two finals,
    restart, bidirectional, h0)."""
    gen = torch.Generator().manual_seed(8)
    module = compile(Template.from_wfsa(paper_automaton_f(semiring)), semiring, 2, "triton", restart=True,
                     bidirectional=True).double()
    set_constants(module, gen)
    slots = random_slots(semiring, (1, 3, 4, 2), gen).requires_grad_()
    h0 = random_slots(semiring, (1, 4, 2), gen).requires_grad_()
    constants = module.constants.detach().clone().requires_grad_()
    lengths = torch.tensor([3])

    def run(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        params = static_params(module.plan, c, x.new_empty((1, 2)))
        return tuple(_masked(y) for y in module._runner(module.plan, x, params, lengths, h))

    assert torch.autograd.gradcheck(run, (slots, h0, constants), fast_mode=True)


@pytest.mark.usefixtures("interpreter")
def test_kernels_are_interpreted_generated_code() -> None:
    plan = lower(Template.from_wfsa(paper_automaton_f()), "real", Options())
    module = gpu.import_triton_source(generate_triton(plan), "kleene_triton")
    assert type(module.kleene_forward).__name__ == "InterpretedFunction"
    assert module.__file__ is not None and module.__file__.endswith(".py")


def test_without_gpu_or_interpreter_the_backend_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if torch.cuda.is_available():  # pragma: no cover - no GPU where the tests run
        pytest.skip("a GPU is present, so the triton backend builds")
    with pytest.raises(CompileError, match="needs a CUDA device"):
        compile(Template.from_wfsa(paper_automaton_f()), "real", 2, "triton")


@pytest.mark.parametrize(
    ("template", "semiring", "dtype", "options", "opcode"),
    [
        (Template.from_wfsa(paper_automaton_f("log")), "log", torch.float32,
         Options(restart=True, output="sum", bidirectional=True), r"max(\.NaN)?\.f32"),
        (sopa_pattern(5), "max-times", torch.float64, Options(output="last", epsilon_cap=2), r"max(\.NaN)?\.f64"),
        (Template.from_wfsa(function_wfsa("max-times")), "max-times", torch.float32, Options(bidirectional=True),
         r"ex2\.approx(\.ftz)?\.f32"),  # the weight functions' exp
    ],
    ids=["F-log-f32", "sopa5-maxtimes-f64", "functions-maxtimes-f32"],
)
def test_ahead_of_time_ptx_for_sm80(
    template: Template, semiring: str, dtype: torch.dtype, options: Options, opcode: str,
    monkeypatch: pytest.MonkeyPatch, tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """Triton's real compiler (not the interpreter) lowers both generated kernels to sm_80 PTX without a GPU;
    the semiring's ⊕ (a max, also inside logaddexp) shows up as a GPU instruction of the right width (the
    NaN-propagating ``max.NaN`` where the GPU has one)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("KLEENE_CACHE", str(tmp_path))
    ptx = gpu.triton_ptx(lower(template, semiring, options), dtype, capability=80)
    assert sorted(ptx) == ["kleene_backward", "kleene_forward"]
    for name, text in ptx.items():
        assert f".visible .entry {name}(" in text
        assert ".target sm_80" in text
        assert re.search(opcode, text), opcode


def test_ahead_of_time_refuses_interpreter_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(CompileError, match="TRITON_INTERPRET"):
        gpu.triton_ptx(lower(sopa_pattern(2), "max-times"))
