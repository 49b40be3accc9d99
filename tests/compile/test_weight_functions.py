"""Weight functions inside the kernels: templates whose weights are elementwise expressions of raw slots.

Checked against kleene.automata's Forward algorithm evaluating the very WFSA the template was read from (an oracle
that knows nothing of storage forms, stable spellings or derivatives), the torch reference, float64 gradcheck of the
generated C++ backward, and the layer it serves: RRNNLayer with its gates inside the kernel computes what the gates
computed in torch (tests/nn/test_rrnn_fused.py's ``gates_in_torch``) fed to the raw-slot template computed.
"""

from __future__ import annotations

import math

import pytest
import sympy
import torch

from kleene.automata import WFSA
from kleene.automata.labels import ANY, EPSILON
from kleene.automata.weights import ALPHA, sigmoid, weight_functions
from kleene.compile import CompiledRecurrence, CompileError, Template, compile, lower
from kleene.compile.functions import lower_function, stabilize
from kleene.compile.runtime.cpu import compiler, cpp_source
from kleene.errors import WeightError

from .oracle import SEMIRINGS, function_wfsa

try:
    compiler()
except Exception as exc:  # noqa: BLE001 - the reason is shown in the skip message
    pytest.skip(f"no C++ compiler: {exc}", allow_module_level=True)

pytestmark = pytest.mark.cpp
f, u = weight_functions("f", "u")


def _masked(y: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(y), y, torch.zeros_like(y))


# --------------------------------------------------------------------------------------------
# Reading templates
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("semiring", "weight", "function"),
    [
        ("real", sigmoid(f), "sigmoid(f)"),
        ("real", (1 - sigmoid(f)) * u, "1 - sigmoid(f)"),
        ("real", sympy.exp(2 * f), "exp(2*f)"),
        ("log", 2 * f, "2*f"),
        ("log", f**2, "f**2"),
        ("log", sympy.log(sigmoid(f)) + u, "log(sigmoid(f))"),
        ("max-times", sigmoid(f), "sigmoid(f)"),
        ("max-plus", sympy.log(sigmoid(f)), "log(sigmoid(f))"),
    ],
)
def test_from_wfsa_reads_weight_functions(semiring: str, weight: sympy.Expr, function: str) -> None:
    w = WFSA(semiring)
    w.add_states("a", "b")
    w.set_initial("a")
    w.set_final("b")
    w.add_arc("a", "b", ANY, weight)
    t = Template.from_wfsa(w)
    assert [str(e) for e in t.functions] == [function]
    assert t.moves[0].weight.functions == (0,)
    assert set(t.slots) >= {str(s) for s in t.functions[0].free_symbols}
    assert sympy.simplify(t.weight_expr(t.moves[0].weight) - weight) == 0  # the template reads back to its WFSA


def test_real_square_of_a_slot_is_a_product_of_slots() -> None:
    w = WFSA("real")
    w.add_states("a", "b")
    w.set_initial("a")
    w.set_final("b")
    w.add_arc("a", "b", ANY, f**2)
    t = Template.from_wfsa(w)
    assert t.moves[0].weight.slots == (0, 0) and not t.functions


def _one_arc(weight: object, label: object = ANY, semiring: str = "real") -> WFSA:
    w = WFSA(semiring)
    w.add_states("a", "b")
    w.set_initial("a")
    w.set_final("b")
    w.add_arc("a", "b", label, weight)
    return w


@pytest.mark.parametrize(
    ("weight", "message"),
    [
        (sympy.Function("f")(ALPHA + 1), r"f\(alpha \+ 1\) is not a per-step slot"),
        (sigmoid(sympy.Symbol("g") * f), r"constants enter as separate factors \(offending part: g\)"),
        (sympy.Max(f, u), r"not elementwise in the kernel vocabulary.*Max"),
        (f ** sympy.Rational(1, 2), r"not elementwise|non-integer power"),
        (sigmoid(ALPHA), r"offending part: sigmoid\(alpha\)"),
    ],
)
def test_refusals_name_the_arc(weight: sympy.Expr, message: str) -> None:
    with pytest.raises(CompileError, match=r"arc 0 \(a -∀α-> b\).*" + message):
        Template.from_wfsa(_one_arc(weight))


def test_weight_functions_only_on_consuming_arcs() -> None:
    t = Template.from_wfsa(_one_arc(sigmoid(f)))
    with pytest.raises(CompileError, match=r"epsilon 0 \(a -> b\) uses a slot"):
        Template(t.states, t.slots, (), (), epsilons=t.moves, final=t.final, functions=t.functions)
    with pytest.raises(WeightError, match="consumes none"):  # the automaton itself refuses it first
        _one_arc(sigmoid(f), EPSILON)


def test_weight_functions_do_not_cross_semirings() -> None:
    t = Template.from_wfsa(_one_arc(sigmoid(f)))
    with pytest.raises(CompileError, match="written in the real semiring"):
        lower(t, "max-times")


def test_template_validates_functions() -> None:
    t = Template.from_wfsa(_one_arc(sigmoid(f) * u))
    with pytest.raises(CompileError, match=r"weight function 0: .* reads v, not a raw input"):
        Template(t.states, t.slots, (), t.moves, final=t.final, functions=(sigmoid(sympy.Symbol("v")),))


# --------------------------------------------------------------------------------------------
# Storage forms and derivatives
# --------------------------------------------------------------------------------------------
def test_stable_storage_forms() -> None:
    z, w = sympy.symbols("z w")
    from kleene.automata.weights import logsigmoid

    assert stabilize(sympy.log(sigmoid(z))) == logsigmoid(z)
    assert stabilize(sympy.log(1 - sigmoid(z))) == logsigmoid(-z)
    assert stabilize(sympy.log(sigmoid(z) ** 2 * sympy.exp(w))) == 2 * logsigmoid(z) + w
    from kleene.automata import get_semiring

    load = lower_function(sigmoid(z) * (1 - sigmoid(w)), get_semiring("max-times"), ["w", "z"])
    assert load.expr == logsigmoid(z) + logsigmoid(-w) and load.inputs == (0, 1)
    assert load.grads == (-sigmoid(w), sigmoid(-z))  # d log σ(-w)/dw = -σ(w); d log σ(z)/dz = σ(-z)


# --------------------------------------------------------------------------------------------
# Kernels against the automaton, the reference and gradcheck
# --------------------------------------------------------------------------------------------
def _raw(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=torch.float64) * 1.5


def _function_kernel(semiring: str, dim: int = 4) -> CompiledRecurrence:
    """``function_wfsa(semiring)`` compiled bidirectionally in float64: one kernel per semiring for every test below
    (the lanes of its first half run left to right, so it has the code of a one-direction kernel: the two sources
    differ only in where the lanes split)."""
    return compile(Template.from_wfsa(function_wfsa(semiring)), semiring, dim, "cpp", bidirectional=True).double()


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_forward_equals_automaton_and_reference(semiring: str) -> None:
    """Both directions (lanes 0-1 left to right, 2-3 right to left) against the automaton and the reference; run
    under gradients, so that its one library holds the backward the tests below use."""
    wfsa = function_wfsa(semiring)
    template = Template.from_wfsa(wfsa)
    assert template.functions, "the test template has weight functions"
    d, lengths = 4, [5, 3, 0]
    slots = _raw((3, 5, len(template.slots), d), 11)
    cpp = _function_kernel(semiring, d)
    ref = compile(template, semiring, d, "torch", bidirectional=True).double()
    out, final = (y.detach() for y in cpp(slots.clone().requires_grad_(), torch.tensor(lengths)))
    out_ref, final_ref = ref(slots, torch.tensor(lengths))
    storage = cpp.plan.storage
    expected = torch.full(out.shape, float(storage.zero), dtype=torch.float64)
    semiring_of = cpp.plan.semiring
    for b in range(3):
        for k in range(d):
            backwards = k >= d // 2
            order = list(range(lengths[b]))[:: -1 if backwards else 1]
            # raw numbers; a bare slot (u) is a stored value, read by the automaton as the element it stores
            env = {
                name: {
                    t: float(slots[b, t, i, k]) if name == "f" else float(semiring_of.from_storage(slots[b, t, i, k]))
                    for t in range(5)
                }
                for i, name in enumerate(template.slots)
            }
            for n in range(len(order)):
                value = wfsa.score(order[: n + 1], env)
                position = lengths[b] - 1 - n if backwards else n
                value = torch.tensor(float(value), dtype=torch.float64)
                expected[b, position, k] = float(semiring_of.to_storage(value))
    assert torch.equal(torch.isfinite(out), torch.isfinite(expected))
    torch.testing.assert_close(_masked(out), _masked(expected), rtol=1e-10, atol=1e-11)
    torch.testing.assert_close(out, out_ref, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(final, final_ref, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_gradcheck_cpp(semiring: str) -> None:
    template = Template.from_wfsa(function_wfsa(semiring))
    slots = _raw((2, 4, len(template.slots), 4), 12)
    module = _function_kernel(semiring)
    lengths = torch.tensor([4, 2])
    x = slots.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda s: _masked(module(s, lengths)[0]), (x,), eps=1e-6, atol=1e-7, rtol=1e-6)
    h0 = torch.zeros(2, template.num_states, 4, dtype=torch.float64) + float(module.plan.storage.one) * 0.5
    h = h0.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda s, h: module(s, lengths, h)[1], (x, h), eps=1e-6, atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("semiring", ["real", "log", "max-times"])
def test_extreme_and_nan_inputs(semiring: str) -> None:
    """|z| = 700 keeps gates and their logarithms finite (exp of a non-positive number only); NaN propagates along
    its lane's direction (lane 0 runs left to right, lane 1 right to left)."""
    template = Template.from_wfsa(function_wfsa(semiring))
    cpp = _function_kernel(semiring, 2)
    ref = compile(template, semiring, 2, "torch", bidirectional=True).double()
    slots = _raw((1, 3, len(template.slots), 2), 13)
    slots[0, :, template.slots.index("f"), 0] = torch.tensor([700.0, -700.0, 40.0])
    x = slots.clone().requires_grad_()
    out, _ = cpp(x, torch.tensor([3]))
    assert bool(torch.isfinite(out).all())
    (grad,) = torch.autograd.grad(out.sum(), x)
    assert bool(torch.isfinite(grad).all())
    x_ref = slots.clone().requires_grad_()
    out_ref, _ = ref(x_ref, torch.tensor([3]))
    torch.testing.assert_close(out, out_ref, rtol=1e-12, atol=1e-13)
    (grad_ref,) = torch.autograd.grad(out_ref.sum(), x_ref)
    torch.testing.assert_close(grad, grad_ref, rtol=1e-10, atol=1e-12)
    slots[0, 1, template.slots.index("f"), 1] = math.nan
    out, _ = cpp(slots, torch.tensor([3]))
    assert bool(torch.isnan(out[0, :2, 1]).all()) and bool(torch.isfinite(out[0, 2, 1]))
    assert bool(torch.isfinite(out[0, :, 0]).all())
    slots[0, 1, template.slots.index("f"), 0] = math.nan
    out, _ = cpp(slots, torch.tensor([3]))
    assert bool(torch.isnan(out[0, 1:, 0]).all()) and bool(torch.isfinite(out[0, 0, 0]))


def test_generated_source_spells_the_load_and_its_derivative() -> None:
    template = Template.from_wfsa(function_wfsa("log"))
    source = cpp_source(lower(template, "log"))
    assert "kleene_logsigmoid(" in source and "kleene_sigmoid(" in source  # log σ forward, σ(-z) its derivative


#: (semiring, gate, its torch transcription): the gates ``test_gate_values_to_a_few_ulp`` checks
GATES = [
    ("real", sigmoid(f), torch.sigmoid),
    ("real", 1 - sigmoid(f), lambda z: torch.sigmoid(-z)),
    ("log", sympy.log(sigmoid(f)), torch.nn.functional.logsigmoid),
    ("max-times", sigmoid(f), torch.nn.functional.logsigmoid),
    ("real", sympy.tanh(f), torch.tanh),
]


def _gates_wfsa(semiring: str) -> WFSA:
    """One arc a -> g{i} per gate of ``GATES`` in ``semiring``: after one step from a, state g{i} holds gate i."""
    w = WFSA(semiring)
    w.add_state("a")
    w.set_initial("a")
    for i, (of, gate, _) in enumerate(GATES):
        if of == semiring:
            w.add_state(f"g{i}")
            w.set_final(f"g{i}")
            w.add_arc("a", f"g{i}", ANY, gate)
    return w


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("semiring", sorted({of for of, _, _ in GATES}))
def test_gate_values_to_a_few_ulp(semiring: str, dtype: torch.dtype) -> None:
    """The CPU kernels' own exp/log1p (``codegen.vecmath``) over the whole range, subnormal results included,
    against torch's gates: a few units in the last place (relative to the value, or to the smallest normal).
    The gates of one semiring share a kernel: each is the state it leads to after one step (its weight times the
    initial weight one, exact)."""
    template = Template.from_wfsa(_gates_wfsa(semiring))
    z = torch.cat([torch.linspace(-760, 760, 3001, dtype=torch.float64), torch.linspace(-3, 3, 601)]).to(dtype)
    module = compile(template, semiring, z.numel(), "cpp").to(dtype)
    _, states = module(z.view(1, 1, 1, -1))
    info = torch.finfo(dtype)
    checked = 0
    for i, (of, _, expected) in enumerate(GATES):
        if of == semiring:
            got = states[0, template.states.index(f"g{i}")]
            torch.testing.assert_close(got, expected(z), rtol=4 * info.eps, atol=4 * info.tiny)  # type: ignore[operator]
            checked += 1
    assert checked == len(template.functions)
