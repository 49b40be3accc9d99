"""Random templates and the kleene.automata Forward algorithm as an independent oracle for compiled recurrences."""

from __future__ import annotations

import math
import random

import sympy
import torch

from kleene.automata import WFSA, get_semiring
from kleene.automata.labels import ANY
from kleene.automata.weights import sigmoid, weight_functions
from kleene.compile import CompiledRecurrence, Factor, Options, Template, TemplateArc

SEMIRINGS = ("real", "log", "max-plus", "max-times")


def to_storage(semiring: str, value: float) -> float:
    """A probability-like value in (0, 1] as the storage form of ``semiring``."""
    return value if semiring == "real" else math.log(value)


def from_storage(semiring: str, value: float) -> float:
    """A storage value as the semiring value kleene.automata computes with."""
    if semiring == "max-times":
        return math.exp(value)
    return value


def random_template(rng: random.Random, semiring: str, epsilons: bool = True) -> Template:
    """2-4 states, random moves with 0-2 slots, constants and literals, epsilon arcs (cycles allowed)."""
    q = rng.randint(2, 4)
    slots = [f"s{i}" for i in range(rng.randint(1, 3))]
    constants = [f"c{i}" for i in range(rng.randint(1, 3))]
    literal = get_semiring(semiring).check(
        0.7 if semiring in ("real", "max-times") else (math.log(0.7) if semiring == "log" else -0.3)
    )

    def factor(use_slots: bool, need_constant: bool = False) -> Factor:
        chosen = tuple(rng.sample(range(len(slots)), rng.randint(1 if use_slots else 0, min(2, len(slots)))))
        consts = tuple(rng.sample(range(len(constants)), rng.randint(1 if need_constant else 0, 1)))
        return Factor(chosen if use_slots else (), consts, literal if rng.random() < 0.2 else None)

    pairs = [(i, j) for i in range(q) for j in range(q)]
    moves = tuple(TemplateArc(i, j, factor(True)) for i, j in rng.sample(pairs, rng.randint(q, min(len(pairs), 2 * q))))
    eps = ()
    if epsilons:
        eps = tuple(
            TemplateArc(i, j, factor(False, need_constant=True)) for i, j in rng.sample(pairs, rng.randint(0, 3))
        )
    initial = tuple((s, factor(False)) for s in sorted(rng.sample(range(q), rng.randint(1, 2))))
    final = tuple((s, factor(False)) for s in sorted(rng.sample(range(q), rng.randint(1, 2))))
    return Template(
        tuple(f"q{i}" for i in range(q)),
        tuple(slots),
        tuple(constants),
        moves,
        eps,
        initial,
        final,
        semiring=semiring,
        name="random",
    )


def random_slots(
    semiring: str, shape: tuple[int, ...], generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Slot values in storage form, probability-like in (0.05, 0.95), without ties."""
    values = torch.rand(shape, generator=generator, dtype=dtype) * 0.9 + 0.05
    return values if semiring == "real" else values.log()


def set_constants(module: CompiledRecurrence, generator: torch.Generator, low: float = 0.05, high: float = 0.3) -> None:
    """Small probability-like constants (so exact epsilon closures converge), in storage form."""
    values = torch.rand(module.constants.shape, generator=generator, dtype=torch.float64) * (high - low) + low
    with torch.no_grad():
        module.constants.copy_(values if module.plan.semiring.name == "real" else values.log())


def oracle_outputs(
    template: Template,
    semiring: str,
    options: Options,
    slots: torch.Tensor,
    constants: torch.Tensor,
    lengths: list[int],
) -> torch.Tensor:
    """Per-step outputs (B, T, D) in storage form computed by kleene.automata's Forward / all_spans."""
    wfsa = template.to_wfsa()
    b_size, t_size, _, d_size = slots.shape
    zero = get_semiring("max-plus" if semiring == "max-times" else semiring).zero
    out = torch.full((b_size, t_size, d_size), float(zero), dtype=torch.float64)
    for b in range(b_size):
        for d in range(d_size):
            env: dict[str, object] = {
                name: {t: from_storage(semiring, float(slots[b, t, i, d])) for t in range(t_size)}
                for i, name in enumerate(template.slots)
            }
            env.update({c: from_storage(semiring, float(constants[i, d])) for i, c in enumerate(template.constants)})
            backwards = options.bidirectional and d >= d_size // 2
            sequence = list(range(lengths[b]))[:: -1 if backwards else 1]
            if options.restart:
                ends = wfsa.all_spans(sequence, env, epsilon_cap=options.epsilon_cap).ends
            else:
                ends = [
                    wfsa.score(sequence[: t + 1], env, epsilon_cap=options.epsilon_cap) for t in range(len(sequence))
                ]
            for t, value in enumerate(ends):
                stored = to_storage(semiring, value) if semiring == "max-times" and value > 0 else value
                if semiring == "max-times" and value == 0:
                    stored = -math.inf
                out[b, lengths[b] - 1 - t if backwards else t, d] = stored
    return out


def function_wfsa(semiring: str) -> WFSA:
    """A 3-state WFSA over ``semiring`` whose weights are weight functions of a raw slot ``f`` (gates, squares,
    affine and exponential forms) times a bare slot ``u``: ``f`` appears only inside functions, ``u`` only bare."""
    f, u = weight_functions("f", "u")
    s = get_semiring(semiring)

    def element(p: sympy.Expr) -> sympy.Expr:
        return sympy.log(p) if s.log_weights else p

    weights = [
        element(sigmoid(f)),
        s.sym_times(element(1 - sigmoid(f)), u),
        element(sigmoid(f) ** 2),
        s.sym_times(element(sympy.exp(-(f**2))), u),
        2 * f if s.log_weights else sympy.exp(f) if s.name == "max-times" else sympy.tanh(f),
    ]
    w = WFSA(s, name=f"functions-{semiring}")
    w.add_states("a", "b", "c")
    w.set_initial("a")
    w.set_final("b")
    w.set_final("c", math.log(0.5) if s.log_weights else 0.5)
    for (src, dst), weight in zip([("a", "a"), ("a", "b"), ("b", "b"), ("b", "c"), ("c", "c")], weights):
        w.add_arc(src, dst, ANY, weight)
    return w


_y, _r, _k, _b = sympy.symbols("y r k b")
#: Output maps over the step output y, two extra raw slots (``r``, ``k``) and a constant ``b``, each with its
#: transcription in torch written apart from the expression (h from y, r, k, b); every one finite where y = -inf.
OUTPUT_MAPS = {
    "highway": (
        sigmoid(_r) * sympy.tanh(_y) + (1 - sigmoid(_r)) * _k,
        (),
        lambda y, r, k, b: torch.sigmoid(r) * torch.tanh(y) + (1 - torch.sigmoid(r)) * k,
    ),
    "bias": (sympy.tanh(_y + _b), ("b",), lambda y, r, k, b: torch.tanh(y + b)),
    "gated": (
        _b * sympy.tanh(_y) * sigmoid(_r) + _k**2,
        ("b",),
        lambda y, r, k, b: b * torch.tanh(y) * torch.sigmoid(r) + k * k,
    ),
}


def with_output_map(template: Template, kind: str) -> Template:
    """``template`` with slots ``r`` and ``k`` appended (read by the map only) and ``OUTPUT_MAPS[kind]`` as its
    output map."""
    from dataclasses import replace

    from kleene.compile import OutputMap

    expr, constants, _ = OUTPUT_MAPS[kind]
    return replace(template, slots=(*template.slots, "r", "k"), output_map=OutputMap(expr, constants))
