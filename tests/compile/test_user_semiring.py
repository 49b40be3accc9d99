"""A semiring kleene does not ship, defined through the public API, end to end.

The fuzzy/bottleneck semiring max-min on [0, 1] (⊕ = max, ⊗ = min, zero 0, one 1): a path weighs its
weakest arc and a string its best path. It is used for WFSA scoring and Viterbi (against brute-force path
enumeration), the batched torch Forward, the prover, and a compiled C++ kernel forward and backward
(against brute force, the torch reference and gradcheck: the gradient routes to the selected term).
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import numpy as np
import pytest
import sympy
import torch

from kleene.automata import ANY, EPSILON, WFSA, Sym, batched_forward, get_semiring, viterbi
from kleene.automata.semiring import MAX, MIN, KernelAlgebra, Semiring, register_semiring
from kleene.compile import Factor, Template, TemplateArc, compile
from kleene.errors import WeightError
from kleene.rational import Certificate, prove
from kleene.rational.zoo import sopa

from ..automata.oracle import brute_force_best, brute_force_score


def _torch(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


class MaxMinSemiring(Semiring):
    """``<[0, 1], max, min, 0, 1>``: the fuzzy (bottleneck) semiring."""

    name = "max-min"
    aliases = ("fuzzy", "bottleneck")
    zero, one = 0.0, 1.0
    idempotent = True
    best = "max"
    k_closed = 0
    invertible = False
    kernel = KernelAlgebra(plus=MAX, times=MIN)
    sym_plus_head, sym_times_head = sympy.Max, sympy.Min

    def _check_number(self, number: float, where: str) -> None:
        if not 0.0 <= number <= 1.0:
            raise WeightError(f"{where}: {number} is not in [0, 1], the max-min semiring")

    def plus(self, a: Any, b: Any) -> Any:
        if _torch(a) or _torch(b):
            return torch.maximum(torch.as_tensor(a), torch.as_tensor(b))
        out = np.maximum(a, b)
        return out.item() if np.ndim(out) == 0 else out

    def times(self, a: Any, b: Any) -> Any:
        if _torch(a) or _torch(b):
            return torch.minimum(torch.as_tensor(a), torch.as_tensor(b))
        out = np.minimum(a, b)
        return out.item() if np.ndim(out) == 0 else out

    def sum(self, x: Any, axis: int = -1) -> Any:
        if _torch(x):
            return torch.amax(x, dim=axis) if x.shape[axis] else x.new_zeros(x.sum(axis).shape)
        x = np.asarray(x, dtype=float)
        return np.max(x, axis=axis, initial=0.0)

    def product(self, x: Any, axis: int = -1) -> Any:
        if _torch(x):
            return torch.amin(x, dim=axis) if x.shape[axis] else x.new_ones(x.sum(axis).shape)
        x = np.asarray(x, dtype=float)
        return np.min(x, axis=axis, initial=1.0)

    def _star_values(self, a: Any) -> Any:  # 1 ⊕ a ⊕ min(a, a) ⊕ ... = max(1, a) = 1
        return torch.ones_like(a) if _torch(a) else (1.0 if np.ndim(a) == 0 else np.ones(np.shape(a)))

    def sym_plus(self, *terms: sympy.Expr) -> sympy.Expr:
        live = [t for t in terms if t != 0]  # zero is ⊕'s identity (sympy cannot know m(x) >= 0)
        return sympy.Max(*live) if live else sympy.Integer(0)

    def sym_times(self, *factors: sympy.Expr) -> sympy.Expr:
        if any(f == 0 for f in factors):
            return sympy.Integer(0)
        live = [f for f in factors if f != 1]  # one is ⊗'s identity (sympy cannot know m(x) <= 1)
        return sympy.Min(*live) if live else sympy.Integer(1)

    def sym_star(self, a: sympy.Expr) -> sympy.Expr:
        return sympy.Integer(1)


MAX_MIN = register_semiring(MaxMinSemiring())


def _automaton() -> WFSA:
    """Three states, parallel paths, a self-loop and epsilon arcs (one on a cycle)."""
    a = WFSA("max-min", alphabet=["a", "b"])
    for name in "pqr":
        a.add_state(name)
    a.set_initial(0, 0.9)
    a.add_arc(0, 1, Sym("a"), 0.7)
    a.add_arc(0, 2, Sym("a"), 0.4)
    a.add_arc(1, 1, Sym("b"), 0.8)
    a.add_arc(1, 2, Sym("b"), 0.3)
    a.add_arc(2, 1, EPSILON, 0.6)
    a.add_arc(1, 0, EPSILON, 0.5)
    a.add_arc(2, 2, Sym("a"), 0.95)
    a.set_final(1, 0.85)
    a.set_final(2, 0.2)
    return a


def test_registered_by_name_and_aliases() -> None:
    assert get_semiring("max-min") is MAX_MIN and get_semiring("fuzzy") is MAX_MIN
    assert get_semiring("bottleneck").viterbi is MAX_MIN
    register_semiring(MAX_MIN)  # again: a no-op
    with pytest.raises(WeightError, match=r"not in \[0, 1\]"):
        MAX_MIN.check(1.5)


def test_scoring_and_viterbi_against_brute_force() -> None:
    a = _automaton()
    for n in range(4):
        for string in itertools.product("ab", repeat=n):
            expected = brute_force_score(a, string, max_epsilons=4)
            assert a.score(list(string)) == pytest.approx(expected)
            if expected > 0:
                best = viterbi(a, list(string))
                assert best.weight == pytest.approx(brute_force_best(a, string, max_epsilons=4)[0])
                assert best.weight == pytest.approx(expected)  # idempotent: the best path is the sum


def test_batched_forward_matches_scoring() -> None:
    a = _automaton()
    strings = [list(s) for n in range(4) for s in itertools.product("ab", repeat=n)]
    q, t_max = a.num_states, 3
    index = {"a": 0, "b": 1}
    step = torch.zeros(2, q, q, dtype=torch.float64)
    eps = torch.zeros(q, q, dtype=torch.float64)
    for arc in a.arcs:
        target = eps if not arc.label.consumes else step[index[arc.label.symbol]]
        target[arc.src, arc.dst] = max(float(target[arc.src, arc.dst]), float(arc.weight))
    transitions = torch.zeros(len(strings), t_max, q, q, dtype=torch.float64)
    for b, s in enumerate(strings):
        for t, sym in enumerate(s):
            transitions[b, t] = step[index[sym]]
    initial = torch.tensor([float(a.initial.get(i, 0.0)) for i in range(q)], dtype=torch.float64)
    final = torch.tensor([float(a.final.get(i, 0.0)) for i in range(q)], dtype=torch.float64)
    lengths = torch.tensor([len(s) for s in strings])
    got = batched_forward(transitions, lengths, initial, final, "max-min", epsilon=eps)
    expected = torch.tensor([a.score(s) for s in strings], dtype=torch.float64)
    torch.testing.assert_close(got, expected)


def test_the_prover_reads_max_min_recurrences() -> None:
    """SoPa's recurrence written in max-min (bottleneck pattern scores) is proved rational; its certificate's
    automaton is a max-min WFSA and the certificate checks (numerically and symbolically)."""
    result = prove(sopa(3, "max-min"), alphabet=["a", "b"])
    assert isinstance(result, Certificate), result
    assert result.semiring is MAX_MIN and result.checked
    assert all(proof.wfsa.semiring is MAX_MIN for proof in result.automata)


# --------------------------------------------------------------------------------------------
# A compiled C++ kernel
# --------------------------------------------------------------------------------------------
def _template() -> Template:
    """Two slot moves per step, a constant on a move, an epsilon with a constant, a final constant."""
    return Template(
        states=("s0", "s1", "s2"),
        slots=("f", "g"),
        constants=("c", "e", "r"),
        moves=(
            TemplateArc(0, 0, Factor()),
            TemplateArc(0, 1, Factor((0,))),
            TemplateArc(1, 1, Factor((1,), (0,))),
            TemplateArc(1, 2, Factor((0, 1))),
        ),
        epsilons=(TemplateArc(1, 2, Factor(constants=(1,))),),
        initial=((0, Factor()),),
        final=((1, Factor(constants=(2,))), (2, Factor())),
        semiring="max-min",
        name="bottleneck3",
    )


def _brute_force(template: Template, slots: torch.Tensor, constants: torch.Tensor, length: int, d: int) -> float:
    """The score of the first ``length`` steps of lane ``d`` by path enumeration over the template's WFSA."""
    wfsa = template.to_wfsa()
    env: dict[str, Any] = {
        name: {t: float(slots[t, i, d]) for t in range(length)} for i, name in enumerate(template.slots)
    }
    env.update({c: float(constants[i, d]) for i, c in enumerate(template.constants)})
    return float(brute_force_score(wfsa, list(range(length)), max_epsilons=2, env=env))


def _modules(dim: int) -> tuple[Any, Any]:
    try:
        cpp = compile(_template(), "max-min", dim, "cpp").double()
    except Exception as exc:  # noqa: BLE001 - the reason is shown in the skip message
        pytest.skip(f"no C++ backend here: {exc}")
    ref = compile(_template(), "max-min", dim, "torch").double()
    with torch.no_grad():
        cpp.constants.copy_(torch.rand(cpp.constants.shape, generator=torch.Generator().manual_seed(3)))
    ref.load_state_dict(cpp.state_dict())
    return cpp, ref


def test_compiled_kernel_forward_and_backward_against_brute_force() -> None:
    assert ANY.consumes
    dim, b, t = 3, 4, 5
    cpp, ref = _modules(dim)
    slots = torch.rand((b, t, 2, dim), generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    lengths = torch.tensor([5, 3, 1, 0])
    out, final = cpp(slots.requires_grad_(), lengths)
    out_ref, final_ref = ref(slots, lengths)
    torch.testing.assert_close(out, out_ref, rtol=0, atol=0)
    torch.testing.assert_close(final, final_ref, rtol=0, atol=0)
    constants = cpp.constants.detach()
    for i in range(b):
        for step in range(int(lengths[i])):
            for d in range(dim):
                expected = _brute_force(cpp.template, slots[i].detach(), constants, step + 1, d)
                assert float(out[i, step, d].detach()) == expected
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    grads = torch.autograd.grad((out * weights).sum(), [slots, cpp.constants], retain_graph=True)
    grads_ref = torch.autograd.grad((out_ref * weights).sum(), [slots, ref.constants])
    for got, expected in zip(grads, grads_ref):
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-15)
    # selection: each output's gradient is one unit on exactly one input it selected
    single = torch.autograd.grad(out[0, 4, 1], [slots, cpp.constants], retain_graph=True)
    assert sum(float(g.abs().sum()) for g in single) == 1.0


def test_compiled_kernel_gradcheck() -> None:
    dim = 2
    cpp, _ = _modules(dim)
    gen = torch.Generator().manual_seed(6)
    slots = torch.rand((2, 4, 2, dim), generator=gen, dtype=torch.float64).requires_grad_()
    h0 = torch.rand((2, 3, dim), generator=gen, dtype=torch.float64).requires_grad_()
    constants = cpp.constants.detach().clone().requires_grad_()
    lengths = torch.tensor([4, 2])
    from kleene.compile.reference import static_params

    def run(x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        params = static_params(cpp.plan, c, x.new_empty((1, dim)))
        return tuple(cpp._runner(cpp.plan, x, params, lengths, h))

    assert torch.autograd.gradcheck(run, (slots, h0, constants))


def test_star_and_closure_are_one() -> None:
    assert MAX_MIN.star(0.3) == 1.0 and MAX_MIN.star_converges(1.0)
    rng = random.Random(0)
    a = _automaton()
    assert math.isfinite(a.score(["a"] * rng.randint(1, 3)))


def test_dense_path_forward_and_backward() -> None:
    """The dense path's kernel (``c_t[i] = max(o_t[i], max_j min(W_t[i, j], c_{t-1}[j]))``) against brute force,
    the semiring's own ``matmul`` per step, and gradcheck (⊗ = min routes the gradient to its smaller operand)."""
    from kleene.compile.runtime.dense import dense_recurrence

    gen = torch.Generator().manual_seed(11)
    b, t, d = 3, 4, 5
    w = torch.rand(b, t, d, d, generator=gen, dtype=torch.float64)
    off = torch.rand(b, t, d, generator=gen, dtype=torch.float64) * 0.5
    c0 = torch.rand(b, d, generator=gen, dtype=torch.float64)
    lengths = torch.tensor([4, 0, 2])
    h, final = dense_recurrence(w, off, lengths, c0, MAX_MIN)
    for s in range(b):
        c = [float(v) for v in c0[s]]
        for step in range(int(lengths[s])):
            c = [max([float(off[s, step, i])] + [min(float(w[s, step, i, j]), c[j]) for j in range(d)])
                 for i in range(d)]  # fmt: skip
            assert h[s, step].tolist() == c  # max and min round nothing
        assert final[s].tolist() == c
    c = c0
    for step in range(t):
        new = MAX_MIN.plus(MAX_MIN.matmul(w[:, step], c[:, :, None])[:, :, 0], off[:, step])
        c = torch.where((lengths > step)[:, None], new, c)
    assert torch.equal(final, c)

    def run(w: torch.Tensor, off: torch.Tensor, c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return dense_recurrence(w, off, lengths, c0, MAX_MIN)

    assert torch.autograd.gradcheck(run, [v.requires_grad_() for v in (w, off, c0)], eps=1e-7, atol=1e-6)
