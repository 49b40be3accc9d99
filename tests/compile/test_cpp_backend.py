"""The generated C++ backend against the torch reference: values, gradients, gradcheck, the build cache."""

from __future__ import annotations

import random
import time

import pytest
import torch

from kleene.automata.examples import paper_automaton_f
from kleene.compile import Options, Template, compile, dense_template, lower
from kleene.compile.reference import run_reference, static_params
from kleene.compile.runtime.cpu import build, checkpoint_chunk, compiler, cpp_source
from kleene.errors import CompileError

from .oracle import SEMIRINGS, random_slots, random_template, set_constants

try:
    compiler()
except Exception as exc:  # noqa: BLE001 - the reason is shown in the skip message
    pytest.skip(f"no C++ compiler: {exc}", allow_module_level=True)

pytestmark = pytest.mark.cpp


def _pair(template: Template, semiring: str, dim: int, **options: object):  # type: ignore[no-untyped-def]
    cpp = compile(template, semiring, dim, "cpp", **options).double()  # type: ignore[arg-type]
    ref = compile(template, semiring, dim, "torch", **options).double()  # type: ignore[arg-type]
    return cpp, ref


def _masked(y: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(y), y, torch.zeros_like(y))


def _agree(cpp, ref, slots: torch.Tensor, lengths: torch.Tensor, h0: torch.Tensor | None, seed: int) -> None:  # type: ignore[no-untyped-def]
    ref.load_state_dict(cpp.state_dict())
    inputs = [slots.clone().requires_grad_()] + ([h0.clone().requires_grad_()] if h0 is not None else [])
    results = []
    for module in (cpp, ref):
        x = [t.detach().clone().requires_grad_() for t in inputs]
        out, final = module(x[0], lengths, x[1] if h0 is not None else None)
        gen = torch.Generator().manual_seed(seed)
        loss = (_masked(out) * torch.randn(out.shape, generator=gen, dtype=out.dtype)).sum()
        loss = loss + (_masked(final) * torch.randn(final.shape, generator=gen, dtype=out.dtype)).sum()
        # the constants, if any (a template without them has no parameter)
        grads = torch.autograd.grad(loss, [*x, *module.parameters()], allow_unused=True, materialize_grads=True)
        results.append((out.detach(), final.detach(), grads))
    (out_c, fin_c, g_c), (out_r, fin_r, g_r) = results
    for got, expected in ((out_c, out_r), (fin_c, fin_r)):
        assert torch.equal(torch.isfinite(got), torch.isfinite(expected))
        torch.testing.assert_close(_masked(got), _masked(expected), rtol=1e-9, atol=1e-10)
    for got, expected in zip(g_c, g_r):
        torch.testing.assert_close(got, expected, rtol=1e-8, atol=1e-10)


def _random_case(semiring: str, seed: int) -> tuple[Template, dict[str, object]]:
    """The random template and options of test_random_templates_agree_with_reference[seed-semiring] (seed 0: steps,
    both directions; 1: sum, restarts, both directions; 2: last, one direction)."""
    rng = random.Random(100 + seed)
    template = random_template(rng, semiring)
    options = {
        "restart": seed == 1,
        "epsilon_cap": rng.choice([None, 1]),
        "bidirectional": seed != 2,
        "output": ("steps", "sum", "last")[seed],
    }
    return template, options


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("seed", range(3))
def test_random_templates_agree_with_reference(semiring: str, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    template, options = _random_case(semiring, seed)
    cpp, ref = _pair(template, semiring, 6, **options)
    set_constants(cpp, gen)
    slots = random_slots(semiring, (3, 7, len(template.slots), 6), gen)
    h0 = random_slots(semiring, (3, template.num_states, 6), gen) if seed == 0 else None
    _agree(cpp, ref, slots, torch.tensor([7, 4, 0]), h0, seed)


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_gradcheck(semiring: str) -> None:
    """float64 gradcheck of the hand-derived backward (F: epsilon, two finals, restart, bidirectional)."""
    gen = torch.Generator().manual_seed(11)
    template = Template.from_wfsa(paper_automaton_f(semiring))
    module = compile(template, semiring, 4, "cpp", restart=True, bidirectional=True).double()
    set_constants(module, gen)
    slots = random_slots(semiring, (2, 4, 4, 4), gen).requires_grad_()
    h0 = random_slots(semiring, (2, 4, 4), gen).requires_grad_()
    constants = module.constants.detach().clone().requires_grad_()
    lengths = torch.tensor([4, 3])

    def run(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        params = static_params(module.plan, c, x.new_empty((1, 4)))
        return tuple(_masked(y) for y in module._runner(module.plan, x, params, lengths, h))

    assert torch.autograd.gradcheck(run, (slots, h0, constants))


def test_float32_and_bfloat16() -> None:
    gen = torch.Generator().manual_seed(12)
    template = Template.from_wfsa(paper_automaton_f())
    cpp, ref = _pair(template, "real", 8)
    cpp.float()
    ref.float()
    ref.load_state_dict(cpp.state_dict())
    slots = random_slots("real", (2, 9, 4, 8), gen, torch.float32)
    torch.testing.assert_close(cpp(slots)[0], ref(slots)[0])
    out, _ = cpp(slots.bfloat16())  # computed in float32, returned in bfloat16 (tests/compile/test_half.py)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, cpp(slots.bfloat16().float())[0].bfloat16())


def test_dense_topology() -> None:
    gen = torch.Generator().manual_seed(13)
    template = dense_template(3)
    cpp, ref = _pair(template, "log", 5)
    _agree(cpp, ref, random_slots("log", (2, 6, 9, 5), gen), torch.tensor([6, 5]), None, 13)


def test_lanes_beyond_one_block() -> None:
    """More dimensions than one lane block (64), odd sizes, bidirectional split inside a block."""
    gen = torch.Generator().manual_seed(14)
    template = Template.from_wfsa(paper_automaton_f("max-plus"))
    cpp, ref = _pair(template, "max-plus", 150, restart=True, bidirectional=True)  # test_gradcheck[max-plus]'s kernel
    set_constants(cpp, gen)
    _agree(cpp, ref, random_slots("max-plus", (2, 5, 4, 150), gen), torch.tensor([5, 2]), None, 14)


@pytest.mark.slow
def test_build_cache(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A first build, then a cached one that is only a lookup; the source is kept beside the library."""
    monkeypatch.setenv("KLEENE_CACHE", str(tmp_path))
    plan = lower(Template.from_wfsa(paper_automaton_f()), "real", Options(output="last"))
    source = cpp_source(plan)
    start = time.perf_counter()
    path, built = build(source)
    first = time.perf_counter() - start
    assert built and path.exists() and path.with_suffix(".cpp").read_text() == source
    start = time.perf_counter()
    again, built_again = build(source)
    assert again == path and not built_again
    assert time.perf_counter() - start < 0.5
    assert first < 20
    assert [p.name for p in tmp_path.joinpath("kernels").iterdir() if p.name.startswith(".build")] == []


def test_reference_runner_is_not_the_kernel() -> None:
    """Guard against a test passing by comparing the reference with itself."""
    module = compile(Template.from_wfsa(paper_automaton_f()), "real", 2, "cpp")
    assert module._runner is not run_reference
    assert module.backend == "cpp"


def _chunk_case(output: str) -> tuple[Template, dict[str, object]]:
    """The log template and options of the chunk tests' kernels, both directions: for "steps" (without restarts)
    and "sum" (with) the random templates test_random_templates_agree_with_reference builds with these options,
    for "last" the paper's automaton F."""
    if output == "last":
        return Template.from_wfsa(paper_automaton_f("log")), {"output": "last", "bidirectional": True}
    return _random_case("log", ("steps", "sum").index(output))


@pytest.mark.parametrize("output", ["steps", "sum", "last"])
def test_backward_across_checkpoint_chunks(output: str) -> None:
    """Sequences longer than a checkpoint chunk (the backward recomputes chunk by chunk), ragged lengths
    ending inside and on chunk borders, both directions."""
    gen = torch.Generator().manual_seed(15)
    template, options = _chunk_case(output)
    assert options["bidirectional"] and options.get("restart", False) == (output == "sum")
    cpp, ref = _pair(template, "log", 6, **options)
    set_constants(cpp, gen)
    chunk = checkpoint_chunk(cpp.plan, 8)
    steps = 2 * chunk + 3
    slots = random_slots("log", (4, steps, len(template.slots), 6), gen)
    _agree(cpp, ref, slots, torch.tensor([steps, chunk, chunk + 1, 0]), None, 15)


@pytest.mark.parametrize("output", ["steps", "sum", "last"])
@pytest.mark.parametrize(("batch", "steps"), [(0, 5), (3, 0), (0, 0)])
def test_empty_batches_and_empty_sequences(output: str, batch: int, steps: int) -> None:
    """B = 0 and T = 0 (the kernels of the chunk test above): the reference's values and gradients, no crash
    (an empty batch used to divide by zero in the work split)."""
    template, options = _chunk_case(output)
    cpp, ref = _pair(template, "log", 6, **options)
    set_constants(cpp, torch.Generator().manual_seed(16))
    slots = random_slots("log", (batch, steps, len(template.slots), 6), torch.Generator().manual_seed(16))
    h0 = random_slots("log", (batch, template.num_states, 6), torch.Generator().manual_seed(17))
    _agree(cpp, ref, slots, torch.full((batch,), steps), h0, 16)
    out, final = cpp(slots)
    assert out.shape == ((batch, steps, 6) if output == "steps" else (batch, 6))
    assert final.shape == (batch, template.num_states, 6)


@pytest.mark.parametrize("output", ["steps", "sum"])
def test_broadcast_and_strided_output_gradients(output: str) -> None:
    """The gradient of ``out.sum()`` arrives as a stride-0 tensor, the one of a transposed use as a strided one;
    both give the reference gradients."""
    gen = torch.Generator().manual_seed(16)
    template = Template.from_wfsa(paper_automaton_f())
    cpp, ref = _pair(template, "real", 5, output=output)
    set_constants(cpp, gen)
    ref.load_state_dict(cpp.state_dict())
    slots = random_slots("real", (3, 9, 4, 5), gen)
    weights = torch.randn((5, 9, 3) if output == "steps" else (5, 3), generator=gen, dtype=torch.float64)
    for loss_of in (lambda y: y.sum(), lambda y: (y.transpose(0, -1) * weights).sum()):
        grads = []
        for module in (cpp, ref):
            x = slots.clone().requires_grad_()
            grads.append(torch.autograd.grad(loss_of(module(x)[0]), [x, *module.parameters()]))
        for got, expected in zip(*grads):
            torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-10)


def test_threads_and_forked_children_agree() -> None:
    """The kernel's thread pool: more threads give the single-thread result, and a forked child (whose
    parent's workers do not exist) computes it too."""
    import os

    gen = torch.Generator().manual_seed(17)
    module = compile(Template.from_wfsa(paper_automaton_f()), "real", 40, "cpp")
    set_constants(module, gen)
    slots = random_slots("real", (9, 6, 4, 40), gen, torch.float32)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = module(slots)[0]
        torch.set_num_threads(3)
        multi = module(slots)[0]
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(single, multi)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        ok = torch.equal(module(slots)[0], single)
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"


def test_parameter_table_cache_sees_every_change() -> None:
    """The module keeps its static parameter table (and, under gradient, its Jacobian) between calls; constants
    changed between calls in place, through ``.data`` (no version bump), by an optimizer step or by a dtype change
    give the reference's values and gradients on the next call."""
    gen = torch.Generator().manual_seed(18)
    cpp, ref = _pair(Template.from_wfsa(paper_automaton_f()), "real", 5)
    set_constants(cpp, gen)
    slots = random_slots("real", (2, 4, 4, 5), gen)
    lengths = torch.tensor([4, 3])

    def check() -> None:
        for _ in range(3):  # a new table (autograd graph), the same table again, then its cached Jacobian
            _agree(cpp, ref, slots, lengths, None, 18)
        assert cpp._table is not None and cpp._table.jacobian is not None
        with torch.no_grad():
            torch.testing.assert_close(cpp(slots, lengths)[0], ref(slots, lengths)[0], rtol=1e-9, atol=1e-10)

    check()
    with torch.no_grad():
        cpp.constants.mul_(1.5)
    check()
    cpp.constants.data[1, 2] = 0.2
    check()
    optimizer = torch.optim.SGD(cpp.parameters(), lr=0.1)
    cpp(slots, lengths)[0].sum().backward()
    optimizer.step()
    check()
    cpp.float()
    ref.load_state_dict(cpp.state_dict())
    ref.float()
    with torch.no_grad():
        torch.testing.assert_close(cpp(slots.float())[0], ref(slots.float())[0])


@pytest.mark.parametrize("semiring", ["real", "log"])
def test_ragged_lane_blocks(semiring: str) -> None:
    """Widths that are not a multiple of the backward's lane vector (SoPa's pattern groups are 85 and 86 wide):
    the ragged tail runs as a whole vector overlapping the previous one; values and gradients are the reference's
    on one and two threads (other block widths), one direction (85) and both (43 lanes each)."""
    from kleene.compile.codegen.cpp import backward_lanes

    gen = torch.Generator().manual_seed(19)
    template = Template.from_wfsa(paper_automaton_f(semiring))
    # real: test_broadcast_and_strided_output_gradients[steps]'s kernel; log: test_gradcheck[log]'s
    options = {} if semiring == "real" else {"output": "steps", "bidirectional": True, "restart": True}
    dim = 85 if semiring == "real" else 86
    cpp, ref = _pair(template, semiring, dim, **options)  # the kernels of the tests above
    assert dim % backward_lanes(cpp.plan)
    set_constants(cpp, gen)
    slots = random_slots(semiring, (2, 6, 4, dim), gen)
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            _agree(cpp, ref, slots, torch.tensor([6, 4]), None, 19)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("output", ["steps", "sum", "last"])
@pytest.mark.slow
def test_stored_states_and_recomputation_agree(output: str) -> None:
    """The backward from stored forward states (log semiring: its kernels store them) and the one recomputing
    from checkpoints (a zero state budget) give the reference's gradients, and each other's to rounding, over
    several checkpoint chunks with ragged lengths, both directions."""
    from kleene.compile.runtime import cpu, op

    gen = torch.Generator().manual_seed(20)
    template, options = _chunk_case(output)  # the chunk test's kernels
    chunk = cpu.checkpoint_chunk(lower(template, "log"), 8)
    steps = 2 * chunk + 3
    slots = random_slots("log", (3, steps, len(template.slots), 6), gen)
    lengths = torch.tensor([steps, chunk + 1, 2])
    grads = []
    for budget in (1 << 30, 0):
        cpp, ref = _pair(template, "log", 6, state_budget=budget, **options)
        expected = op.SAVE_STATES if budget else op.SAVE_CHECKPOINTS
        assert cpu.backward_strategy(cpp.plan, 3, steps, 6, 8) == expected
        set_constants(cpp, torch.Generator().manual_seed(21))
        _agree(cpp, ref, slots, lengths, None, 20)
        x = slots.clone().requires_grad_()
        out, final = cpp(x, lengths)
        grads.append(torch.autograd.grad(_masked(out).sum() + _masked(final).sum(), [x, *cpp.parameters()]))
    for stored, recomputed in zip(*grads):
        torch.testing.assert_close(stored, recomputed, rtol=1e-12, atol=1e-12)


def test_states_are_stored_where_recomputing_costs_exp_and_log() -> None:
    """The choice follows the semiring's kernel operations: logaddexp (exp/log per ⊕) stores, +/× and max do not
    (their libraries have no stored mode, and refuse to be asked for it); the budget is validated."""
    from kleene.compile.runtime import cpu
    from kleene.compile.runtime.op import SAVE_CHECKPOINTS, SAVE_STATES, stores_states

    template = Template.from_wfsa(paper_automaton_f())
    assert stores_states(lower(Template.from_wfsa(paper_automaton_f("log")), "log"))
    assert not stores_states(lower(Template.from_wfsa(paper_automaton_f("max-plus")), "max-plus"))
    module = compile(template, "real", 2, "cpp")
    assert not stores_states(module.plan)
    assert cpu.backward_strategy(module.plan, 1, 1, 2, 4) == SAVE_CHECKPOINTS
    _, kernel = cpu.load_kernel(module.plan)
    slots = torch.rand(1, 3, 4, 2)
    with pytest.raises(CompileError, match="recompute"):
        cpu._run_forward(module.plan, kernel, slots, module.params(slots), torch.tensor([3]), None, SAVE_STATES)
    for bad in (-1, 1.5, True, "256M"):
        with pytest.raises(CompileError, match="state_budget"):
            compile(template, "real", 2, "torch", state_budget=bad)  # type: ignore[arg-type]
