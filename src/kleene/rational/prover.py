"""The rationality prover: recurrence in, WFSAs and a checkable certificate (or a refusal) out.

The construction is general (no per-model automata):

1. Each update is read as a semiring sum of products (``SemiringSyntax.expand``),
   opening only the nodes that contain state symbols. A node containing a state
   that is neither the semiring's ⊕ nor its ⊗ (``sigmoid(w h_{t-1} + ...)``,
   ``tanh(...)``, a real product in max-plus) refuses the recurrence, naming it;
   so does a product of two state values.
2. Each product is a *term*: at most one state value (previous ``c_{t-1}``, or
   current ``c_t``) times constant factors times input-dependent factors.
3. For each output, the components it depends on (transitively) form one
   automaton: a bias state ``q0`` (initial weight one, ``∀α/1`` self-loop), one state
   per component (initial weight = its initial value), an arc per term
   (``∀α/w(α)`` with a weight function parameterised by the term's
   input-dependent coefficient, or a constant), an epsilon arc per current-step
   reference, and final weights read off the output map.
4. A term ``κ ⊗ g(x_t)`` whose input factor ``g`` also weights another arc into the
   same state is routed ``ε/κ`` through an auxiliary state, so ``g`` stays one shared
   weight function (this is how RRNN(F) gets its ``q3``, Fig. 4).
5. Inputs that read previous inputs (window K > 1) are handled by tracking the
   last K−1 symbols in the states over the given finite alphabet (Appendix A):
   every state is paired with a history, arcs consume concrete symbols, and each
   weight function is specialised per history. Unreachable states are trimmed.

The result is a ``Certificate`` (checked by induction, see ``certificate.py``) or a
``Refutation`` naming the offending term.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
from sympy.core.function import AppliedUndef

from kleene.automata.labels import ANY, EPSILON, Sym
from kleene.automata.ops import reachable
from kleene.automata.semiring import Semiring
from kleene.automata.weights import ALPHA
from kleene.automata.wfsa import WFSA
from kleene.rational.certificate import AutomatonProof, Certificate, Refutation
from kleene.rational.recurrence import (
    BOS,
    ONE_NOW,
    NotInSemiring,
    Recurrence,
    RecurrenceError,
    SemiringSyntax,
    canonical_numbers,
    histories,
    input_symbol,
    same,
    specialise,
)

BIAS = "1"  # the role name of the bias state


class _Refused(Exception):
    def __init__(self, reason: str, component: str | None, offending: str):
        super().__init__(reason)
        self.reason = reason
        self.component = component
        self.offending = offending


@dataclass(frozen=True)
class Term:
    """One incoming contribution: ``source ⊗ constant ⊗ varying`` (source None: the bias)."""

    source: str | None
    current: bool
    constant: sympy.Expr
    varying: sympy.Expr | None


@dataclass
class RoleArc:
    """An arc between roles (bias, components, auxiliary states) before history expansion."""

    src: str
    dst: str
    epsilon: bool
    constant: sympy.Expr
    varying: sympy.Expr | None
    name: str = ""


@dataclass
class Analysis:
    terms: dict[str, list[Term]] = field(default_factory=dict)
    outputs: dict[str, dict[str | None, sympy.Expr]] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# reading the recurrence
# ---------------------------------------------------------------------------------------------


def _short(node: sympy.Basic, limit: int = 80) -> str:
    text = str(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _refuse_node(exc: NotInSemiring, rec: Recurrence, where: str, component: str | None) -> _Refused:
    node, symbol = exc.node, exc.symbol
    s = rec.ring
    if isinstance(node, (sympy.Function, sympy.Pow)):
        kind = f"{type(node).__name__}(...)" if isinstance(node, sympy.Function) else "a power"
        why = f"{kind} is not a {s.name}-semiring operation"
    else:
        why = f"{type(node).__name__} is not the {s.name} semiring's ⊕ or ⊗"
    reason = f"{symbol} appears inside {_short(node)} in {where}: {why}, so the update is not affine in the state"
    return _Refused(reason, component, str(node))


def _terms_of(rec: Recurrence, expr: sympy.Expr, where: str, component: str | None) -> list[Term]:
    s = rec.ring
    syntax = SemiringSyntax(s)
    blocked = rec.prev_symbols | rec.now_symbols | {ONE_NOW}
    try:
        products = syntax.expand(expr, blocked)
    except NotInSemiring as exc:
        raise _refuse_node(exc, rec, where, component) from None
    terms: list[Term] = []
    for product in products:
        states = [f for f in product if f in blocked]
        rest = [f for f in product if f not in blocked]
        if len(states) > 1:
            shown = " ⊗ ".join(map(str, states))
            raise _Refused(
                f"{shown} in {where}: a product of two state values, so the update is not affine in the state",
                component,
                shown,
            )
        if any(same(f, s.sym_zero) for f in rest):
            continue
        constant = [f for f in rest if not rec.depends_on_input(f)]
        varying = [f for f in rest if rec.depends_on_input(f)]
        source = rec.component_of(states[0]).name if states and states[0] != ONE_NOW else None
        current = bool(states) and (states[0] in rec.now_symbols or states[0] == ONE_NOW)
        one = canonical_numbers(s.sym_one)
        terms.append(
            Term(
                source,
                current,
                canonical_numbers(s.sym_times(*constant)) if constant else one,
                s.sym_times(*varying) if varying else None,
            )
        )
    return terms


def analyse(rec: Recurrence) -> Analysis:
    """Read every update and output as terms.

    Raises:
        RecurrenceError: the recurrence is malformed.
        _Refused: an update or output outside the construction (the reason names the term).
    """
    rec.validate()
    try:
        rec.now_order()
    except RecurrenceError as exc:
        raise _Refused(str(exc), None, "current-step cycle") from None
    out = Analysis()
    for comp in rec.components:
        assert comp.update is not None
        terms = _terms_of(rec, comp.update, f"the update of {comp.name}", comp.name)
        for term in terms:
            if term.current and term.varying is not None:
                raise _Refused(
                    f"{term.source}_t (current step) is multiplied by the input-dependent {term.varying} in the "
                    f"update of {comp.name}; a current-step reference becomes an epsilon arc, which consumes no input",
                    comp.name,
                    str(term.varying),
                )
        out.terms[comp.name] = terms
    for name, expr in rec.outputs.items():
        weights: dict[str | None, sympy.Expr] = {}
        for term in _terms_of(rec, expr, f"output {name}", None):
            if term.varying is not None:
                raise _Refused(
                    f"output {name} multiplies {term.source or 'a constant'} by the input-dependent {term.varying}; "
                    "final weights must be constants",
                    None,
                    str(term.varying),
                )
            old = weights.get(term.source)
            weights[term.source] = term.constant if old is None else rec.ring.sym_plus(old, term.constant)
        out.outputs[name] = weights
    return out


# ---------------------------------------------------------------------------------------------
# building role graphs
# ---------------------------------------------------------------------------------------------


def _needed(rec: Recurrence, analysis: Analysis, output: str) -> list[str]:
    todo = [src for src in analysis.outputs[output] if src is not None]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(t.source for t in analysis.terms[name] if t.source is not None)
    return [c.name for c in rec.components if c.name in seen]


def _merge(s: Semiring, terms: list[Term]) -> list[Term]:
    """One term per (source, current): parallel contributions are ⊕-combined."""
    groups: dict[tuple[str | None, bool], list[Term]] = {}
    for t in terms:
        groups.setdefault((t.source, t.current), []).append(t)
    merged = []
    for (source, current), group in groups.items():
        if len(group) == 1:
            merged.append(group[0])
        elif all(t.varying is None for t in group):
            merged.append(Term(source, current, canonical_numbers(s.sym_plus(*(t.constant for t in group))), None))
        else:
            one = canonical_numbers(s.sym_one)
            total = s.sym_plus(*(s.sym_times(t.constant, t.varying if t.varying is not None else one) for t in group))
            merged.append(Term(source, current, one, canonical_numbers(total)))
    return merged


def _role_arcs(
    rec: Recurrence, analysis: Analysis, comps: list[str], share: bool
) -> tuple[list[RoleArc], dict[str, sympy.Expr]]:
    """The arcs between roles and each role's invariant value (in previous-state symbols)."""
    s = rec.ring
    values: dict[str, sympy.Expr] = {name: rec.component_of(name).prev for name in comps}
    arcs: list[RoleArc] = []
    bias_used = any(t.source is None for c in comps for t in analysis.terms[c])
    if bias_used:
        values[BIAS] = s.sym_one
    for comp in comps:
        terms = _merge(s, analysis.terms[comp])
        incoming = [t for t in terms if not t.current]
        plain_inputs = {t.varying for t in incoming if t.varying is not None and same(t.constant, s.sym_one)}
        for t in terms:
            src = BIAS if t.source is None else t.source
            if t.current:
                arcs.append(RoleArc(src, comp, True, t.constant, None))
            elif share and t.varying is not None and not same(t.constant, s.sym_one) and t.varying in plain_inputs:
                aux = f"{src}⊗{t.constant}"
                if aux not in values:
                    values[aux] = canonical_numbers(s.sym_times(s.sym_one if src == BIAS else values[src], t.constant))
                    arcs.append(RoleArc(src, aux, True, t.constant, None))
                arcs.append(RoleArc(aux, comp, False, s.sym_one, t.varying))
            elif t.varying is not None and not same(t.constant, s.sym_one):
                arcs.append(RoleArc(src, comp, False, s.sym_one, s.sym_times(t.constant, t.varying)))
            else:
                arcs.append(RoleArc(src, comp, False, t.constant, t.varying))
    if bias_used:
        arcs.insert(0, RoleArc(BIAS, BIAS, False, s.sym_one, None))
    _name_weight_functions(arcs)
    return arcs, values


def _name_weight_functions(arcs: list[RoleArc]) -> None:
    """Paper-style names: phi_j on self-loops, mu_j into j, eta_j / mu_j_i when j has several inputs."""
    names: dict[sympy.Expr, str] = {}
    taken: set[str] = set()
    for arc in arcs:
        if arc.varying is None:
            continue
        if arc.varying in names:
            arc.name = names[arc.varying]
            continue
        into = {a.varying for a in arcs if a.dst == arc.dst and a.src != a.dst and a.varying is not None}
        if arc.src == arc.dst:
            name = f"phi_{arc.dst}"
        elif len(into) <= 1:
            name = f"mu_{arc.dst}"
        elif "⊗" in arc.src or arc.src == BIAS:
            name = f"eta_{arc.dst}"
        else:
            name = f"mu_{arc.dst}_{arc.src}"
        base, k = name, 2
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        names[arc.varying] = name
        arc.name = name


# ---------------------------------------------------------------------------------------------
# expanding roles into a WFSA (with input histories when the window is > 1)
# ---------------------------------------------------------------------------------------------


def _tag(history: tuple[Hashable, ...], alphabet: Sequence[Hashable]) -> str:
    parts = []
    for h in history:
        text = "bos" if h == BOS else str(h)
        parts.append(text if text.isidentifier() else f"s{list(alphabet).index(h)}")
    return "_".join(parts)


def _build(
    rec: Recurrence,
    output: str,
    comps: list[str],
    role_arcs: list[RoleArc],
    values: dict[str, sympy.Expr],
    final: dict[str | None, sympy.Expr],
    alphabet: Sequence[Hashable] | None,
) -> AutomatonProof:
    s = rec.ring
    K = rec.window
    roles = ([BIAS] if BIAS in values else []) + comps + [r for r in values if "⊗" in r]
    hist = histories(alphabet or (), K)
    start = (BOS,) * (K - 1)
    lagged = {input_symbol(k) for k in range(1, K)}

    def key(role: str, h: tuple[Hashable, ...]) -> tuple[str, tuple[Hashable, ...]]:
        return (role, h)

    # arcs between (role, history) pairs; weights as (constant, weight function name, parameterisation)
    pairs = [key(r, h) for r in roles for h in hist]
    arcs: list[tuple[tuple[str, tuple[Hashable, ...]], tuple[str, tuple[Hashable, ...]], Any, Any]] = []
    parameterisation: dict[str, sympy.Expr] = {}
    for h in hist:
        for arc in role_arcs:
            if arc.epsilon:
                arcs.append((key(arc.src, h), key(arc.dst, h), EPSILON, arc.constant))
                continue
            weight: sympy.Expr = arc.constant
            if arc.varying is not None:
                param = specialise(arc.varying, h)
                name = arc.name + (f"__{_tag(h, alphabet or ())}" if arc.varying.free_symbols & lagged else "")
                parameterisation[name] = param
                weight = sympy.Function(name)(ALPHA)
            if K == 1:
                arcs.append((key(arc.src, h), key(arc.dst, h), ANY, weight))
            else:
                for a in alphabet or ():
                    arcs.append((key(arc.src, h), key(arc.dst, (*h[1:], a)), Sym(a), weight))
    initial = {key(BIAS, start): s.sym_one} if BIAS in values else {}
    for c in comps:
        init = rec.component_of(c).init
        if not same(init, s.sym_zero):
            initial[key(c, start)] = init
    finals = {key(BIAS if src is None else src, h): w for src, w in final.items() for h in hist}
    kept = _trim(pairs, arcs, initial, finals, s, start if K > 1 else None)

    wfsa = WFSA(s, alphabet, name=f"{rec.name}:{output}")
    invariant: list[tuple[sympy.Expr, tuple[Hashable, ...] | None]] = []
    index: dict[tuple[str, tuple[Hashable, ...]], int] = {}
    number = {r: i for i, r in enumerate(roles)} if BIAS in values else {r: i + 1 for i, r in enumerate(roles)}
    for pair in pairs:
        if pair in kept:
            role, h = pair
            suffix = f"|{','.join(map(str, h))}" if K > 1 else ""
            index[pair] = wfsa.add_state(f"q{number[role]}{suffix}")
            invariant.append((values[role], h if K > 1 else None))
    for src, dst, label, weight in arcs:
        if src in index and dst in index and not same(weight, s.sym_zero):
            wfsa.add_arc(index[src], index[dst], label, weight)
    for pair, w in initial.items():
        if pair in index:
            wfsa.set_initial(index[pair], w)
    for pair, w in finals.items():
        if pair in index and not same(w, s.sym_zero):
            wfsa.set_final(index[pair], w)
    used = {
        f.func.__name__ for a in wfsa.arcs if isinstance(a.weight, sympy.Basic) for f in a.weight.atoms(AppliedUndef)
    }
    roles_shown = {f"q{number[r]}": ("bias (1̄)" if r == BIAS else str(values[r])) for r in roles}
    return AutomatonProof(
        output=output,
        wfsa=wfsa,
        invariant=invariant,
        parameterisation={k: v for k, v in parameterisation.items() if k in used},
        roles=roles_shown,
    )


def _trim(
    pairs: list[Any],
    arcs: list[Any],
    initial: dict[Any, Any],
    finals: dict[Any, Any],
    s: Semiring,
    start: tuple[Hashable, ...] | None,
) -> set[Any]:
    """The (role, history) pairs to keep: those that can reach a final state, minus start-history
    pairs whose weight after the initial epsilon closure is zero (with a window, the all-padding
    history is left after t = 0 and never re-entered, so those states stay zero forever).

    Note:
        Without histories no state is dropped for being unreachable: the certificate's
        inductive step ranges over every state value, reachable or not.
    """
    live = [(a, b) for a, b, _, w in arcs if not same(w, s.sym_zero)]
    backward = reachable({p for p, w in finals.items() if not same(w, s.sym_zero)}, [(b, a) for a, b in live])
    removable: set[Any] = set()
    if start is not None:
        epsilon = [(a, b) for a, b, label, w in arcs if not label.consumes and not same(w, s.sym_zero)]
        at_zero = reachable({p for p, w in initial.items() if not same(w, s.sym_zero)}, epsilon)
        removable = {p for p in pairs if p[1] == start and p not in at_zero}
    return {p for p in pairs if p in backward and p not in removable}


# ---------------------------------------------------------------------------------------------
# the entry point
# ---------------------------------------------------------------------------------------------


def prove(
    rec: Recurrence,
    *,
    alphabet: Sequence[Hashable] | None = None,
    share_input_factors: bool = True,
    check: bool = True,
    hankel: bool = False,
) -> Certificate | Refutation:
    """Prove ``rec`` rational by construction, or refuse it naming the offending term.

    Args:
        alphabet: the finite alphabet (overrides ``rec.alphabet``); required when inputs
            read previous inputs, optional otherwise.
        share_input_factors: route ``κ ⊗ g`` through an epsilon arc when ``g`` already
            weights another arc into the same state (step 4 of the module docstring).
        check: re-verify the certificate (``Certificate.check``) before returning it.
        hankel: attach Hankel-rank evidence (real semiring only; alphabet default ``a, b``).

    Raises:
        RecurrenceError: ``rec`` that is not a ``Recurrence``, an alphabet that is not a list of hashable symbols, or
            a malformed recurrence (undeclared symbols, missing updates, ...).
    """
    if not isinstance(rec, Recurrence):
        raise RecurrenceError(
            f"prove needs a kleene Recurrence (build one with kleene.rational.Recurrence or take a zoo entry, e.g. "
            f"kleene.rational.zoo.ZOO['rrnn-b']()), got {type(rec).__name__} {rec!r:.60}"
        )
    started = time.perf_counter()
    if alphabet is not None:
        if isinstance(alphabet, (str, bytes)) or not isinstance(alphabet, Sequence):
            raise RecurrenceError(f"alphabet must be a list of symbols (not a string), got {alphabet!r:.60}")
        if not all(isinstance(symbol, Hashable) for symbol in alphabet):
            raise RecurrenceError(f"alphabet symbols must be hashable, got {list(alphabet)!r:.60}")
        rec.alphabet = list(alphabet)
    try:
        analysis = analyse(rec)
    except _Refused as refused:
        result: Certificate | Refutation = Refutation(rec, refused.reason, refused.component, refused.offending)
    else:
        automata = []
        for output in rec.outputs:
            comps = _needed(rec, analysis, output)
            role_arcs, values = _role_arcs(rec, analysis, comps, share_input_factors)
            final = analysis.outputs[output]
            if None in final and BIAS not in values:
                role_arcs.insert(0, RoleArc(BIAS, BIAS, False, rec.ring.sym_one, None))
                values[BIAS] = rec.ring.sym_one
            automata.append(_build(rec, output, comps, role_arcs, values, final, rec.alphabet))
        result = Certificate(rec, automata)
        if check:
            result.check()
    if hankel and rec.ring.is_field:
        from kleene.rational.hankel import hankel_evidence

        result.hankel = hankel_evidence(rec, rec.alphabet)
    result.seconds = time.perf_counter() - started
    return result
