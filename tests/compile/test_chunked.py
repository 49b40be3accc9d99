"""The chunked scan (kleene.compile.chunked) against the sequential kernel and the torch reference, in float64."""

from __future__ import annotations

import random

import pytest
import torch

from kleene.compile import Template, compile
from kleene.compile.chunked import ChunkedRunner, check_scan, choose_scan, chunked_speedup, default_chunks
from kleene.compile.module import _BACKENDS
from kleene.compile.reference import run_reference, static_params
from kleene.compile.runtime.cpu import compiler
from kleene.errors import CompileError

from .oracle import SEMIRINGS, function_wfsa, random_slots, random_template, set_constants

try:
    compiler()
    HAVE_CPP = True
except Exception:  # noqa: BLE001 - without a compiler the chunked scan is still checked on the torch backend
    HAVE_CPP = False

BACKENDS = ("torch", "cpp") if HAVE_CPP else ("torch",)


def _masked(y: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(y), y, torch.zeros_like(y))


def _results(runner, plan, slots, constants, lengths, h0, seed):  # type: ignore[no-untyped-def]
    """(output, final state, grad slots, grad constants, grad h0) of one runner on fresh leaves."""
    x = slots.detach().clone().requires_grad_()
    c = constants.detach().clone().requires_grad_()
    h = None if h0 is None else h0.detach().clone().requires_grad_()
    params = static_params(plan, c, x.new_empty((1, x.shape[-1])))
    out, final = runner(plan, x, params, lengths, h)
    gen = torch.Generator().manual_seed(seed)
    loss = (_masked(out) * torch.randn(out.shape, generator=gen, dtype=out.dtype)).sum()
    loss = loss + (_masked(final) * torch.randn(final.shape, generator=gen, dtype=out.dtype)).sum()
    leaves = [x, c] + ([h] if h is not None else [])
    grads = torch.autograd.grad(loss, leaves, allow_unused=True, materialize_grads=True)
    return (out.detach(), final.detach(), *grads)


def _close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    # float64 sums/products of O(T) terms in (0, 1]: agreement to ~1e-12 relative; zeros (-inf) must coincide
    assert torch.equal(torch.isfinite(a), torch.isfinite(b)), what
    torch.testing.assert_close(_masked(a), _masked(b), rtol=1e-10, atol=1e-12, msg=what)


#: (restart, bidirectional, output, with h0) for the two random templates of each semiring: together every
#: combination of restart x bidirectional, every output, with and without h0 (8 templates: cold builds stay short)
CASES = [
    (False, False, "steps", True),
    (True, True, "sum", False),
    (True, False, "last", True),
    (False, True, "steps", False),
    (False, True, "sum", True),
    (True, False, "steps", False),
    (True, True, "last", True),
    (False, False, "last", False),
]


def _case(case: int) -> tuple[str, Template, dict[str, object], bool]:
    """(semiring, random template, compile options, whether with h0) of ``CASES[case]`` (the other tests reuse
    these templates and options so that their cpp kernels are the same builds)."""
    semiring = SEMIRINGS[case // 2]
    restart, bidirectional, output, with_h0 = CASES[case]
    rng = random.Random(700 + case)
    template = random_template(rng, semiring)
    options = {"restart": restart, "bidirectional": bidirectional, "output": output}
    return semiring, template, {**options, "epsilon_cap": rng.choice([None, 1])}, with_h0


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("seed", range(2))
def test_chunked_agrees_with_sequential_and_reference(semiring: str, seed: int) -> None:
    case = 2 * SEMIRINGS.index(semiring) + seed
    _, template, options, with_h0 = _case(case)
    gen = torch.Generator().manual_seed(case)
    module = compile(template, semiring, 4, "torch", **options).double()  # type: ignore[arg-type]
    set_constants(module, gen)
    plan = module.plan
    slots = random_slots(semiring, (4, 10, len(template.slots), 4), gen)
    lengths = torch.tensor([10, 7, 0, 3])  # full, not a multiple of the chunks, empty, shorter than a chunk
    h0 = random_slots(semiring, (4, template.num_states, 4), gen) if with_h0 else None
    expected = _results(run_reference, plan, slots, module.constants, lengths, h0, case)
    # the torch backend for every case; the cpp kernels (built cold: seconds each, three plans per template) for
    # two templates (the chunked runner calls whatever backend it is given: its logic is tested on torch)
    for backend in BACKENDS if seed == 0 and semiring in ("real", "max-times") else ("torch",):
        runners = [(f"{backend} sequential", _BACKENDS[backend](plan))]
        runners += [(f"{backend} chunk {k}", ChunkedRunner(plan, _BACKENDS[backend], k)) for k in (1, 3, 4, 10)]
        # the log-depth scan of the chunks' initial states (a GPU's default), on 10, 4 and 3 chunks
        runners += [
            (f"{backend} chunk {k} log-depth", ChunkedRunner(plan, _BACKENDS[backend], k, parallel_scan=True))
            for k in (1, 3, 4)
        ]
        for name, runner in runners:
            got = _results(runner, plan, slots, module.constants, lengths, h0, case)
            for i, (a, b) in enumerate(zip(got, expected)):
                _close(a, b, f"{name}: result {i}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", [0, 6])  # real without restart; max-times, restart, bidirectional
def test_chunked_gradcheck(backend: str, case: int) -> None:
    """float64 gradcheck through the chunked scan (kernels' own backward, the torch scan, the rerun)."""
    semiring, template, options, _ = _case(case)
    gen = torch.Generator().manual_seed(31)
    module = compile(template, semiring, 2, backend, **options).double()  # type: ignore[arg-type]
    set_constants(module, gen)
    slots = random_slots(semiring, (2, 5, len(template.slots), 2), gen).requires_grad_()
    h0 = random_slots(semiring, (2, template.num_states, 2), gen).requires_grad_()
    constants = module.constants.detach().clone().requires_grad_()
    lengths = torch.tensor([5, 3])
    runner = ChunkedRunner(module.plan, _BACKENDS[backend], 1, parallel_scan=True)  # 5 chunks, log-depth scan

    def run(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        params = static_params(module.plan, c, x.new_empty((1, 2)))
        return tuple(_masked(y) for y in runner(module.plan, x, params, lengths, h))

    assert torch.autograd.gradcheck(run, (slots, h0, constants))


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_scan_option(backend: str) -> None:
    """``scan="chunked"`` on the module: same outputs as sequential, on long, empty and zero-length inputs."""
    # max-times, restart, both directions, output "last": the cpp kernels test_chunked_agrees_with_sequential_and_
    # reference[0-max-times] builds (the option's logic does not depend on the semiring)
    semiring, template, options, _ = _case(6)
    gen = torch.Generator().manual_seed(5)
    chunked = compile(template, semiring, 4, backend, scan="chunked", **options).double()  # type: ignore[arg-type]
    sequential = compile(template, semiring, 4, backend, scan="sequential", **options).double()  # type: ignore[arg-type]
    set_constants(chunked, gen)
    sequential.load_state_dict(chunked.state_dict())
    assert "scan=chunked" in repr(chunked)
    slots = random_slots(semiring, (2, 300, len(template.slots), 4), gen)  # long enough for the automatic chunks
    for x, lengths in (
        (slots, torch.tensor([300, 131])),
        (slots[:0], None),  # an empty batch
        (slots[:, :0], None),  # empty sequences
    ):
        a, b = chunked(x, lengths), sequential(x, lengths)
        for u, v in zip(a, b):
            _close(u, v, f"shape {tuple(x.shape)}")


def test_scan_is_checked() -> None:
    template = random_template(random.Random(0), "real")
    with pytest.raises(CompileError, match="scan must be one of"):
        compile(template, "real", 2, "torch", scan="parallel")  # type: ignore[arg-type]
    with pytest.raises(CompileError, match="chunk must be"):
        ChunkedRunner(compile(template, "real", 2, "torch").plan, _BACKENDS["torch"], 0)
    assert check_scan("auto") == "auto"


def test_cost_model() -> None:
    """The automatic choice: chunked only where idle threads outweigh the extra work and the serial calls."""
    for restart in (False, True):
        plan = compile(random_template(random.Random(1), "real"), "real", 16, "torch", restart=restart).plan
        q = plan.num_states
        # one thread: the chunked scan only adds work
        for shape in ((1, 4096, 512), (1, 16384, 16), (4, 4096, 64)):
            assert chunked_speedup(plan, *shape, threads=1) < 1
            assert choose_scan(plan, *shape, threads=1) == "sequential"
        # one 16-lane block of one sequence keeps one thread of 64 busy: chunks use the others
        assert chunked_speedup(plan, 1, 16384, 16, threads=64) > 4
        assert choose_scan(plan, 1, 16384, 16, threads=64) == "chunked"
        # enough lane blocks for every thread already: never chunked, however long the sequence
        assert choose_scan(plan, 4, 16384, 64, threads=16) == "sequential"
        # too short to cut into chunks of MIN_CHUNK steps
        assert default_chunks(plan, 1, 100, 16, threads=64) == 1
        assert choose_scan(plan, 1, 100, 16, threads=64) == "sequential"
        assert chunked_speedup(plan, 0, 16384, 16, threads=64) == 0.0
        # the model by hand at (1, 1024, 16) on 4 threads in 4 chunks of 256 steps: the calls' steps add up, one
        # round each (head: 1 or 3 sequences, basis: 2 sequences at Q times the work, rerun: 4 sequences)
        expected = 1024 / (256 * (1 + q + 1))
        assert chunked_speedup(plan, 1, 1024, 16, threads=4, chunks=4) == pytest.approx(expected)


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_chunked_weight_functions(semiring: str) -> None:
    """A template with weight functions (gates, squares, exponentials of a raw slot): ``basis_plan``'s copies load
    them like the original (cpp kernels for the real semiring only: builds are slow)."""
    template = Template.from_wfsa(function_wfsa(semiring), slots=("f", "u"))
    gen = torch.Generator().manual_seed(3)
    module = compile(template, semiring, 3, "torch", restart=True, bidirectional=True).double()
    slots = torch.randn((2, 9, 2, 4), generator=gen, dtype=torch.float64)[..., :3].contiguous()
    lengths = torch.tensor([9, 4])
    expected = _results(run_reference, module.plan, slots, module.constants, lengths, None, 3)
    for backend in BACKENDS if semiring == "real" else ("torch",):
        got = _results(
            ChunkedRunner(module.plan, _BACKENDS[backend], 2), module.plan, slots, module.constants, lengths, None, 3
        )
        for i, (a, b) in enumerate(zip(got, expected)):
            _close(a, b, f"{backend}: result {i}")


@pytest.mark.skipif(not HAVE_CPP, reason="no C++ compiler")
@pytest.mark.slow
def test_chunked_under_torch_compile() -> None:
    """``scan="chunked"`` traces into one graph (the kernels' custom ops and the torch scan), same loss and gradient;
    ``scan="auto"`` traces too (the sequential path: no thread count is read while tracing)."""
    semiring, template, options, _ = _case(0)
    gen = torch.Generator().manual_seed(9)
    x = random_slots(semiring, (2, 200, len(template.slots), 4), gen).requires_grad_()
    for scan in ("chunked", "auto"):
        module = compile(template, semiring, 4, "cpp", scan=scan, **options).double()  # type: ignore[arg-type]
        if scan == "chunked":  # 4 chunks of 50 steps: every phase (the basis call too) in the graph
            module._chunked = ChunkedRunner(module.plan, _BACKENDS["cpp"], 50)

        def loss(v: torch.Tensor, module: torch.nn.Module = module) -> torch.Tensor:
            out, final = module(v)
            return _masked(out).sum() + _masked(final).sum()

        expected = loss(x)
        (grad,) = torch.autograd.grad(expected, x)
        got = torch.compile(loss, backend="aot_eager", fullgraph=True)(x)
        (got_grad,) = torch.autograd.grad(got, x)
        _close(got.detach(), expected.detach(), f"{scan}: loss")
        _close(got_grad, grad, f"{scan}: gradient")
