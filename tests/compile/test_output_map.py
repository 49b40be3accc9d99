"""Output maps (``Template.output_map``) inside the kernels: the layer's h from each step's output y, raw slots and
per-dimension constants, stored by the forward, with its chain rule in the backward.

The oracle is the unfused computation: the bare recurrence's step outputs (``mapped=False``) fed to the map
transcribed in torch apart from its sympy expression (``oracle.OUTPUT_MAPS``), and float64 gradcheck of the C++
backward.
"""

from __future__ import annotations

import random

import pytest
import sympy
import torch

from kleene.automata.examples import paper_automaton_f
from kleene.automata.weights import sigmoid
from kleene.compile import CompiledRecurrence, CompileError, OutputMap, Template, compile
from kleene.compile.runtime.cpu import compiler, cpp_op, cpp_source
from kleene.compile.runtime.op import SAVE_CHECKPOINTS, SAVE_NOTHING

from .oracle import OUTPUT_MAPS, random_slots, random_template, set_constants, with_output_map

try:
    compiler()
except Exception as exc:  # noqa: BLE001 - the reason is shown in the skip message
    pytest.skip(f"no C++ compiler: {exc}", allow_module_level=True)

pytestmark = pytest.mark.cpp


def _inputs(semiring: str, template: Template, b: int, t: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slots (B, T, S, D): storage-form values for the template's own slots, raw reals for ``r`` and ``k``; and
    constants (1, D)."""
    gen = torch.Generator().manual_seed(seed)
    s = len(template.slots)
    slots = random_slots(semiring, (b, t, s, d), gen)
    slots[:, :, s - 2 :] = torch.randn((b, t, 2, d), generator=gen, dtype=torch.float64) * 2
    return slots, torch.randn((1, d), generator=gen, dtype=torch.float64)


def _unfused(module, kind: str, slots: torch.Tensor, lengths: torch.Tensor, constants: torch.Tensor):  # type: ignore[no-untyped-def]
    """h from the bare recurrence's y and the torch transcription of the map; 0 at padding."""
    y, final = module(slots, lengths, mapped=False)
    valid = (torch.arange(slots.shape[1])[None, :] < lengths[:, None])[..., None]
    y = torch.where(valid, y, torch.zeros_like(y))
    h = OUTPUT_MAPS[kind][2](y, slots[:, :, -2], slots[:, :, -1], constants[0] if OUTPUT_MAPS[kind][1] else None)
    return torch.where(valid, h, torch.zeros_like(h)), final


def _constants(kind: str, constants: torch.Tensor) -> torch.Tensor | None:
    return constants if OUTPUT_MAPS[kind][1] else None


#: (semiring, map, bidirectional): every semiring and every map, both directions (each case builds two kernels)
CASES = [
    ("real", "highway", True),
    ("log", "bias", False),
    ("max-plus", "gated", True),
    ("max-times", "highway", False),
    ("max-times", "bias", True),
    ("real", "gated", False),
]


#: For each map, the case of ``CASES`` whose kernel the tests of one map (gradcheck, opcheck, empty batches) use:
#: a smooth semiring (real or log), so that finite differences apply
SMOOTH_CASE = {"highway": CASES[0], "bias": CASES[1], "gated": CASES[5]}


def _case(
    semiring: str, kind: str, bidirectional: bool, dim: int
) -> tuple[Template, CompiledRecurrence, random.Random]:
    """The random template of a case of ``CASES``, its C++ module in float64 and the random source that drew it."""
    rng = random.Random(f"{semiring}-{kind}-{bidirectional}")
    template = with_output_map(random_template(rng, semiring), kind)
    return template, compile(template, semiring, dim, "cpp", bidirectional=bidirectional).double(), rng


@pytest.mark.parametrize(("semiring", "kind", "bidirectional"), CASES)
def test_fused_equals_unfused(semiring: str, kind: str, bidirectional: bool) -> None:
    """Random templates: the C++ kernel's h and every gradient equal the unfused torch computation's (float64)."""
    template, module, rng = _case(semiring, kind, bidirectional, 4)
    set_constants(module, torch.Generator().manual_seed(3))
    slots, constants = _inputs(semiring, template, 3, 6, 4, seed=rng.randrange(1000))
    lengths = torch.tensor([6, 0, 4])
    results = []
    for fused in (True, False):
        x, c = slots.clone().requires_grad_(), constants.clone().requires_grad_()
        if fused:
            h, final = module(x, lengths, output_constants=_constants(kind, c))
        else:
            h, final = _unfused(module, kind, x, lengths, c)
        weights = torch.randn(h.shape, generator=torch.Generator().manual_seed(5), dtype=h.dtype)
        finite = torch.where(torch.isfinite(final), final, torch.zeros_like(final))
        grads = torch.autograd.grad((h * weights).sum() + finite.sum(), [x, c, module.constants], allow_unused=True)
        results.append((h.detach(), final.detach(), grads))
    (h_k, fin_k, g_k), (h_r, fin_r, g_r) = results
    assert bool((h_k[1] == 0).all()) and bool((h_k[2, 4:] == 0).all())  # padding and the empty sequence: 0
    torch.testing.assert_close(h_k, h_r, rtol=1e-12, atol=1e-13)
    assert torch.equal(torch.isfinite(fin_k), torch.isfinite(fin_r))
    torch.testing.assert_close(torch.nan_to_num(fin_k), torch.nan_to_num(fin_r), rtol=1e-12, atol=1e-13)
    for got, expected, wrt in zip(g_k, g_r, (slots, constants, module.constants)):
        zero = torch.zeros_like(wrt)  # (a gradient that nothing reaches: None, or zeros from a cached Jacobian)
        torch.testing.assert_close(
            zero if got is None else got, zero if expected is None else expected, rtol=1e-10, atol=1e-12
        )
    # the torch backend evaluates the same expression
    reference = compile(template, semiring, 4, "torch", bidirectional=bidirectional).double()
    reference.load_state_dict(module.state_dict())
    h_t, _ = reference(slots, lengths, output_constants=_constants(kind, constants))
    torch.testing.assert_close(h_t, h_k, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("kind", sorted(OUTPUT_MAPS))
def test_gradcheck(kind: str) -> None:
    """float64 gradcheck of the C++ backward through each map (the kernel of its case in ``SMOOTH_CASE``)."""
    semiring = SMOOTH_CASE[kind][0]
    template, module, _ = _case(*SMOOTH_CASE[kind], 2)
    set_constants(module, torch.Generator().manual_seed(4))
    slots, constants = _inputs(semiring, template, 2, 3, 2, seed=8)
    lengths = torch.tensor([3, 1])

    def run(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return module(x, lengths, output_constants=_constants(kind, c))[0]

    assert torch.autograd.gradcheck(run, (slots.requires_grad_(), constants.requires_grad_()))


def test_empty_batch_and_empty_sequences() -> None:
    template, module, _ = _case(*SMOOTH_CASE["bias"], 4)  # a kernel of test_fused_equals_unfused
    constants = torch.randn(1, 4, dtype=torch.float64)
    h, final = module(torch.zeros(0, 4, len(template.slots), 4, dtype=torch.float64), None, output_constants=constants)
    assert h.shape == (0, 4, 4) and final.shape == (0, 4, 4)
    slots = torch.zeros(2, 0, len(template.slots), 4, dtype=torch.float64, requires_grad=True)
    h, _ = module(slots, torch.tensor([0, 0]), output_constants=constants)
    assert h.shape == (2, 0, 4)


def test_opcheck() -> None:
    semiring = SMOOTH_CASE["gated"][0]
    template, module, _ = _case(*SMOOTH_CASE["gated"], 3)  # a kernel of test_fused_equals_unfused
    set_constants(module, torch.Generator().manual_seed(6))
    forward = cpp_op(module.plan).custom_forward
    slots, constants = _inputs(semiring, template, 2, 5, 3, seed=9)
    params = torch.cat([module.params(slots).detach(), constants], 0).requires_grad_()
    lengths = torch.tensor([5, 3])
    torch.library.opcheck(forward, (slots.requires_grad_(), params, lengths, None, SAVE_CHECKPOINTS))
    torch.library.opcheck(forward, (slots.detach(), params.detach(), lengths, None, SAVE_NOTHING))


def test_the_generated_code_spells_the_map_once() -> None:
    """The forward stores the map (its tanh call in the store path), not y; without a map the code is unchanged."""
    bare = Template.from_wfsa(paper_automaton_f("real"))
    mapped = with_output_map(bare, "bias")
    plain_code = cpp_source(compile(bare, "real", 2, "torch").plan)
    assert "kleene_tanh(" not in plain_code.split("static inline T kleene_tanh")[-1].split("}\n", 1)[-1]
    assert "y_row0[i] = y0;" in plain_code
    code = cpp_source(compile(mapped, "real", 2, "torch").plan)
    assert "y_row0[i] = y0;" not in code
    assert "const T om0_0 = kleene_tanh((T(P[5 * D + i]) + y0));" in code and "y_row0[i] = om0_0;" in code


def test_refusals() -> None:
    bare = Template.from_wfsa(paper_automaton_f("real"))
    y = sympy.Symbol("y")
    with pytest.raises(CompileError, match="reads z"):
        with_map(bare, sympy.tanh(y) * sympy.Symbol("z"))
    with pytest.raises(CompileError, match="repeat"):
        with_map(bare, y, ("y",))
    with pytest.raises(CompileError, match="non-integer power"):
        with_map(bare, sympy.sqrt(y))
    with pytest.raises(CompileError, match="output='steps'"):
        compile(with_map(bare, sympy.tanh(y)), "real", 2, "cpp", output="sum")
    module = compile(with_map(bare, sigmoid(y) * sympy.Symbol("b"), ("b",)), "real", 2, "cpp")
    slots = torch.zeros(1, 2, module.plan.num_slots, 2)
    with pytest.raises(CompileError, match="output_constants"):
        module(slots)
    with pytest.raises(CompileError, match="output_constants"):
        module(slots, output_constants=torch.zeros(2, 2))
    with pytest.raises(CompileError, match="without an output map"):
        compile(with_map(bare, sympy.tanh(y)), "real", 2, "torch", scan="chunked")
    assert compile(with_map(bare, sympy.tanh(y)), "real", 2, "torch", scan="auto").scan == "auto"


def with_map(template: Template, expr: sympy.Expr, constants: tuple[str, ...] = ()) -> Template:
    from dataclasses import replace

    return replace(template, output_map=OutputMap(expr, constants))
