"""Certificates of rationality, re-checkable from their stored data alone.

A ``Certificate`` holds the recurrence, the constructed automata, the
parameterisation of every weight function (``mu_c(α) := (1 − f(x_t))·g(x_t)``) and,
for every state q, an *invariant*: the value ``V_q(c)`` its Forward weight must have
(``1̄`` for the bias state, ``c_j`` for component j, ``c_j ⊗ κ`` for an auxiliary state;
with input histories, that value when the last inputs equal the state's history and
``0̄`` otherwise). ``check()`` proves ``A[x_{:t}] = output(c_t)`` for all t by induction:

* base case: the epsilon closure of the initial weights equals ``V(c_0)``;
* inductive step: one Forward step (consume ``x_t``, then epsilon closure) from
  ``V(c_{t-1})`` equals ``V(c_t)`` with ``c_t`` given by the updates — a sympy
  identity per state whose residual must be exactly zero in the semiring's
  symbolic operations (real: ``expand(lhs − rhs) == 0``; other semirings: equal
  canonical sum-of-products forms, see ``SemiringSyntax.monomials``);
* output: ``⊕_q V_q(c) ⊗ ρ(q)`` equals the output map.

``cross_check()`` runs the recurrence and the automata's Forward (``WFSA.score``) on
random instantiations and random strings. Certificates render as text and
Markdown/LaTeX, serialise to JSON (never pickle) and draw their automata.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sympy
from sympy.core.function import AppliedUndef

from kleene.automata.labels import AnySymbol
from kleene.automata.semiring import Semiring, get_semiring
from kleene.automata.weights import ALPHA, expression_from_tree, expression_to_tree
from kleene.automata.wfsa import WFSA
from kleene.errors import FormatError
from kleene.rational.recurrence import (
    BOS,
    ONE_NOW,
    NumericEvaluator,
    Recurrence,
    RecurrenceError,
    SemiringSyntax,
    as_float,
    canonical_numbers,
    close,
    histories,
    input_symbol,
    same,
    specialise,
    symbol_atom,
)

FORMAT = "kleene.certificate"
VERSION = 1


class _CheckFailure(Exception):
    pass


@dataclass
class Identity:
    """One proof obligation: the Forward side ``lhs`` must equal the recurrence side ``rhs``."""

    kind: str  # "base", "step" or "output"
    where: str
    lhs: sympy.Expr
    rhs: sympy.Expr
    residual: str

    @property
    def ok(self) -> bool:
        return self.residual == ""


@dataclass
class AutomatonProof:
    """One automaton of a certificate with its invariant and weight-function parameterisation."""

    output: str
    wfsa: WFSA
    invariant: list[tuple[sympy.Expr, tuple[Hashable, ...] | None]]
    parameterisation: dict[str, sympy.Expr]
    roles: dict[str, str] = field(default_factory=dict)


def _constant(value: Any) -> sympy.Expr:
    """A stored semiring constant as sympy (integral floats as integers, ±inf as ±oo)."""
    if isinstance(value, sympy.Basic):
        return value
    if isinstance(value, (bool, np.bool_)):
        return sympy.true if value else sympy.false
    number = float(value)
    if math.isinf(number):
        return sympy.oo if number > 0 else -sympy.oo
    return sympy.Integer(int(number)) if number.is_integer() else sympy.Float(number)


def _topological(n: int, edges: list[tuple[int, int]]) -> list[int]:
    indegree = [0] * n
    for _, b in edges:
        indegree[b] += 1
    order, todo = [], [q for q in range(n) if indegree[q] == 0]
    while todo:
        q = todo.pop()
        order.append(q)
        for a, b in edges:
            if a == q:
                indegree[b] -= 1
                if indegree[b] == 0:
                    todo.append(b)
    if len(order) != n:
        raise _CheckFailure("the epsilon arcs form a cycle; certificates need acyclic epsilon arcs")
    return order


class _Checker:
    """Re-derives every identity of one automaton from the stored data."""

    def __init__(self, rec: Recurrence, proof: AutomatonProof):
        self.rec = rec
        self.proof = proof
        self.s: Semiring = rec.ring
        self.syntax = SemiringSyntax(self.s)
        self.wfsa = proof.wfsa
        if self.wfsa.semiring is not self.s:
            raise _CheckFailure(f"automaton over {self.wfsa.semiring.name}, recurrence over {self.s.name}")
        if len(proof.invariant) != self.wfsa.num_states:
            raise _CheckFailure("the invariant does not give one value per state")
        self._check_parameterisation()
        eps = [(a.src, a.dst) for a in self.wfsa.arcs if not a.label.consumes]
        self.eps_order = _topological(self.wfsa.num_states, eps)

    def _check_parameterisation(self) -> None:
        constants = set(self.rec.constant_symbols)
        weights = [a.weight for a in self.wfsa.arcs] + [*self.wfsa.initial.values(), *self.wfsa.final.values()]
        for w in weights:
            if isinstance(w, sympy.Basic) and w.free_symbols - constants - {ALPHA}:
                stray = sorted(map(str, w.free_symbols - constants - {ALPHA}))
                raise _CheckFailure(f"automaton weight {w} uses symbols {stray} that are neither constants nor α")
        allowed = constants | {input_symbol(0)}
        for name, expr in self.proof.parameterisation.items():
            bad = {s for s in expr.free_symbols - allowed if not s.name.startswith("'")}
            if bad:
                raise _CheckFailure(
                    f"weight function {name} is parameterised by non-input symbols {sorted(map(str, bad))}"
                )
            if input_symbol(0) not in expr.free_symbols and not self.rec.input_calls(expr):
                raise _CheckFailure(f"weight function {name} := {expr} does not depend on the input")

    def weight(self, w: Any, x: sympy.Expr) -> sympy.Expr:
        if not isinstance(w, sympy.Basic):
            return _constant(w)
        out = w
        for call in w.atoms(AppliedUndef):
            name = call.func.__name__
            if name not in self.proof.parameterisation:
                raise _CheckFailure(f"weight function {name} has no parameterisation")
            out = out.xreplace({call: self.proof.parameterisation[name].xreplace({input_symbol(0): x})})
        return out.xreplace({ALPHA: x})

    def closure(self, vector: list[sympy.Expr]) -> list[sympy.Expr]:
        s, out = self.s, list(vector)
        for q in self.eps_order:
            for a in self.wfsa.arcs:
                if a.src == q and not a.label.consumes and not same(out[q], s.sym_zero):
                    out[a.dst] = s.sym_plus(out[a.dst], s.sym_times(out[q], self.weight(a.weight, sympy.S.Zero)))
        return out

    def step(self, vector: list[sympy.Expr], symbol: Hashable | None, x: sympy.Expr) -> list[sympy.Expr]:
        s = self.s
        terms: list[list[sympy.Expr]] = [[] for _ in vector]
        for a in self.wfsa.arcs:
            if not a.label.consumes or same(vector[a.src], s.sym_zero):
                continue
            if symbol is None and not isinstance(a.label, AnySymbol):
                raise _CheckFailure(f"arc label {a.label} needs a concrete symbol, but inputs read no history")
            if symbol is None or a.label.matches(symbol):
                terms[a.dst].append(s.sym_times(vector[a.src], self.weight(a.weight, x)))
        return self.closure([s.sym_plus(*t) if t else s.sym_zero for t in terms])

    def updated(self, x: sympy.Expr, history: tuple[Hashable, ...]) -> dict[sympy.Symbol, sympy.Expr]:
        """``c_t`` in terms of ``c_{t-1}`` for input ``x`` after ``history``."""
        new: dict[sympy.Symbol, sympy.Expr] = {ONE_NOW: self.s.sym_one}
        for comp in self.rec.now_order():
            assert comp.update is not None
            expr = specialise(comp.update, history).xreplace({input_symbol(0): x})
            new[comp.now] = expr.xreplace(new)
        return {c.prev: new[c.now] for c in self.rec.components}

    def identities(self) -> list[Identity]:
        rec, s, out = self.rec, self.s, []
        K = rec.window
        hist: list[tuple[Hashable, ...]] = histories(rec.alphabet or (), K)
        start = (BOS,) * (K - 1)
        inv = self.proof.invariant
        names = self.wfsa.states

        def expected(values: dict[sympy.Symbol, sympy.Expr], h: tuple[Hashable, ...]) -> list[sympy.Expr]:
            return [v.xreplace(values) if (hq is None or hq == h) else s.sym_zero for v, hq in inv]

        def compare(kind: str, where: str, lhs: list[sympy.Expr], rhs: list[sympy.Expr]) -> None:
            for q, (a, b) in enumerate(zip(lhs, rhs)):
                a, b = canonical_numbers(a), canonical_numbers(b)
                out.append(Identity(kind, f"{where}, state {names[q]}", a, b, self.syntax.residual(a, b)))

        initial = [_constant(self.wfsa.initial[q]) if q in self.wfsa.initial else s.sym_zero for q in range(len(inv))]
        inits = rec.initial_values()
        compare("base", "t = 0", self.closure(initial), expected(inits, start))
        identity = {c.prev: c.prev for c in rec.components}
        for h in hist:
            if K == 1:
                before = expected(identity, h)
                compare(
                    "step",
                    "x_t",
                    self.step(before, None, input_symbol(0)),
                    expected(self.updated(input_symbol(0), h), h),
                )
                continue
            # the all-padding history occurs only at t-1 = 0, where the state is c_0
            prev = inits if h == start else identity
            before = expected(prev, h)
            for a in rec.alphabet or ():
                where = f"history {','.join(map(str, h))} then {a}"
                x = symbol_atom(a)
                after = {c: e.xreplace(prev) for c, e in self.updated(x, h).items()}
                compare("step", where, self.step(before, a, x), expected(after, (*h[1:], a)))
        for name, expr in rec.outputs.items():
            if name != self.proof.output:
                continue
            target = expr.xreplace({c.now: c.prev for c in rec.components})
            for h in hist:
                terms = [
                    s.sym_times(v, _constant(self.wfsa.final[q]))
                    for q, (v, hq) in enumerate(inv)
                    if q in self.wfsa.final and (hq is None or hq == h)
                ]
                lhs = s.sym_plus(*terms) if terms else s.sym_zero
                if K > 1 and h == start:  # only at t = 0
                    lhs, target_h = lhs.xreplace(inits), target.xreplace(inits)
                else:
                    target_h = target
                where = f"output {name}" + (f" after history {','.join(map(str, h))}" if K > 1 else "")
                lhs, target_h = canonical_numbers(lhs), canonical_numbers(target_h)
                out.append(Identity("output", where, lhs, target_h, self.syntax.residual(lhs, target_h)))
        return out


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------


class _Result(ABC):
    """What certificates and refutations share: timing, Hankel evidence, rendering of the recurrence."""

    rational: bool = False
    recurrence: Recurrence
    hankel: Any = None
    seconds: float = 0.0

    @abstractmethod
    def summary(self) -> dict[str, Any]: ...

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @abstractmethod
    def to_dict(self) -> dict[str, Any]: ...

    def _equations_text(self) -> list[str]:
        rows = []
        for kind, lhs, rhs in self.recurrence.equations():
            label = {"init": "initial", "update": "update", "output": "output"}[kind]
            rows.append(f"  {label:7} {lhs} = {rhs}")
        return rows

    def _equations_latex(self) -> list[str]:
        rec = self.recurrence
        rows = [f"{rec.latex(lhs)} &= {rec.latex(rhs)}" for _, lhs, rhs in rec.equations()]
        return ["$$", r"\begin{aligned}", " \\\\\n".join(rows), r"\end{aligned}", "$$"]

    def _inputs_text(self) -> list[str]:
        rec = self.recurrence
        rows = []
        for f in rec.input_functions:
            meaning = f" = {f.meaning}" if f.meaning else ""
            rows.append(f"  input    {f.call}{meaning}")
        if rec.constant_symbols:
            rows.append("  constants " + ", ".join(map(str, rec.constant_symbols)))
        return rows

    def _hankel_text(self) -> list[str]:
        return self.hankel.render_lines() if self.hankel is not None else []


class Certificate(_Result):
    """A proof that a recurrence is rational: automata, parameterisation, invariant, identities."""

    rational = True

    def __init__(self, recurrence: Recurrence, automata: list[AutomatonProof]):
        self.recurrence = recurrence
        self.automata = automata
        self.identities: list[Identity] = []
        self.failure: str | None = None
        self.checked: bool | None = None
        self.numeric: dict[str, Any] | None = None
        self.hankel = None
        self.seconds = 0.0

    @property
    def semiring(self) -> Semiring:
        return self.recurrence.ring

    # -- checking -------------------------------------------------------------------------
    def check(self) -> bool:
        """Re-derive and decide every identity of the induction from the stored data.

        Sets ``identities``, ``failure`` (the first reason it fails) and ``checked``.
        """
        self.identities, self.failure = [], None
        try:
            self.recurrence.validate()
            for proof in self.automata:
                self.identities.extend(_Checker(self.recurrence, proof).identities())
        except (_CheckFailure, RecurrenceError) as exc:
            self.failure = str(exc)
        if self.failure is None:
            bad = next((i for i in self.identities if not i.ok), None)
            if bad is not None:
                self.failure = f"{bad.kind} identity fails at {bad.where}: residual {bad.residual}"
        self.checked = self.failure is None
        return self.checked

    def environments(
        self, rng: np.random.Generator, alphabet: Sequence[Hashable]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A random instantiation: the recurrence's environment and each automaton's weight environment."""
        env = random_environment(self.recurrence, alphabet, rng)
        return env, self.weight_environments(env, alphabet)

    def weight_environments(self, env: Mapping[str, Any], alphabet: Sequence[Hashable]) -> list[dict[str, Any]]:
        """Each automaton's weight environment when the recurrence's inputs and constants take ``env``'s values.

        Note:
            Weight functions are tabulated over ``alphabet`` for windows without history (BOS-padded).
        """
        rec = self.recurrence
        evaluator = NumericEvaluator(rec, env)
        weight_envs = []
        for proof in self.automata:
            wenv: dict[str, Any] = {c.name: env[c.name] for c in rec.constant_symbols}
            for name, param in proof.parameterisation.items():
                window = (BOS,) * (rec.window - 1)
                wenv[name] = {a: evaluator.value(param, {}, (*window, a)) for a in alphabet}
            weight_envs.append(wenv)
        return weight_envs

    def cross_check(self, trials: int = 3, strings: int = 6, max_length: int = 6, seed: int = 0) -> bool:
        """Compare the recurrence with each automaton's Forward score numerically.

        Random instantiations (input-function tables and constants drawn in the
        semiring's domain) and random strings over the alphabet (default ``a, b, c``).
        Records ``numeric = {"ok", "comparisons", "max_error"}``.
        """
        rec = self.recurrence
        alphabet = list(rec.alphabet or ["a", "b", "c"])
        rng = np.random.default_rng(seed)
        count, worst, ok = 0, 0.0, True
        for _ in range(trials):
            env, weight_envs = self.environments(rng, alphabet)
            for _ in range(strings):
                length = int(rng.integers(0, max_length + 1))
                xs = [alphabet[int(i)] for i in rng.integers(0, len(alphabet), size=length)]
                expected = rec.run(xs, env)[-1]
                for proof, wenv in zip(self.automata, weight_envs):
                    got = as_float(proof.wfsa.score(xs, env=wenv))
                    want = as_float(expected[proof.output])
                    count += 1
                    if not close(got, want):
                        ok = False
                    if not (math.isinf(got) or math.isinf(want)):
                        worst = max(worst, abs(got - want))
        self.numeric = {"ok": ok, "comparisons": count, "max_error": worst}
        return ok

    # -- summaries ------------------------------------------------------------------------
    def distinct_automata(self) -> list[AutomatonProof]:
        """One automaton per distinct state graph (outputs that differ only in final weights share one)."""
        seen: dict[Any, AutomatonProof] = {}
        for proof in self.automata:
            w = proof.wfsa
            key = (tuple(w.states), tuple((a.src, a.dst, str(a.label), str(a.weight)) for a in w.arcs))
            seen.setdefault(key, proof)
        return list(seen.values())

    def automata_count(self) -> str:
        n = len(self.automata)
        dims = self.recurrence.dims
        if dims:
            return dims if n == 1 else f"{n}·{dims}"
        return str(n)

    def summary(self) -> dict[str, Any]:
        rec = self.recurrence
        out: dict[str, Any] = {
            "name": rec.name,
            "rational": True,
            "semiring": rec.ring.name,
            "automata": self.automata_count(),
            "states": [p.wfsa.num_states for p in self.distinct_automata()],
            "arcs": [len(p.wfsa.arcs) for p in self.distinct_automata()],
            "checked": bool(self.checked),
            "identities": len(self.identities),
            "window": rec.window,
            "seconds": round(self.seconds, 3),
        }
        if rec.window > 1 and rec.alphabet:
            out["history_states"] = history_comparison(rec, self.automata[0])
        if self.failure:
            out["failure"] = self.failure
        if self.numeric is not None:
            out["numeric"] = self.numeric
        if self.hankel is not None:
            out["hankel"] = self.hankel.to_dict()
        return out

    # -- rendering --------------------------------------------------------------------------
    def _automaton_lines(self, proof: AutomatonProof) -> list[str]:
        w = proof.wfsa
        rows = [f"Automaton {w.name}: {w.num_states} states, {len(w.arcs)} arcs (output {proof.output})"]
        if proof.roles:
            rows.append("  roles: " + "; ".join(f"{q} ↔ {v}" for q, v in proof.roles.items()))
        shown = w.arcs if len(w.arcs) <= 40 else w.arcs[:40]
        for a in shown:
            rows.append(f"  {w.states[a.src]} -{a.label}/{a.weight}-> {w.states[a.dst]}")
        if len(w.arcs) > len(shown):
            rows.append(f"  ... {len(w.arcs) - len(shown)} more arcs")
        rows.append("  initial: " + ", ".join(f"{w.states[q]}/{v}" for q, v in w.initial.items()))
        rows.append("  final:   " + ", ".join(f"{w.states[q]}/{v}" for q, v in w.final.items()))
        for name, expr in sorted(proof.parameterisation.items()):
            rows.append(f"  weight function {name}(α) := {expr.xreplace({input_symbol(0): ALPHA})}  (α = x_t)")
        return rows

    def _proof_lines(self) -> list[str]:
        kinds = {"base": "base case (t = 0)", "step": "inductive step (t-1 → t)", "output": "output map"}
        rows = ["Proof by induction on t: every Forward weight Ω_t(q) equals the state's invariant value at c_t."]
        for kind, label in kinds.items():
            ids = [i for i in self.identities if i.kind == kind]
            bad = sum(not i.ok for i in ids)
            rows.append(f"  {label}: {len(ids)} identities, {'all residuals exactly 0' if not bad else f'{bad} FAIL'}")
            for i in [i for i in ids if not same(i.lhs, self.semiring.sym_zero) or not i.ok][:6]:
                rows.append(f"    {i.where}: {i.lhs} = {i.rhs}   residual: {i.residual or '0'}")
        verdict = "checked" if self.checked else f"NOT checked: {self.failure}"
        rows.append(f"  ⇒ A[x_:t] = output(c_t) for every t ≥ 0 ({verdict})")
        return rows

    def render_text(self) -> str:
        rec = self.recurrence
        unit = f" (one hidden unit of {rec.dims})" if rec.dims else ""
        rows = [f"{rec.name}: rational over the {rec.ring.name} semiring{unit}"]
        if rec.doc:
            rows.append(f"  {rec.doc}")
        rows.append("Recurrence:")
        rows += self._equations_text() + self._inputs_text()
        states = self.summary()["states"]
        rows.append(f"Construction: automata: {self.automata_count()}; states per distinct automaton: {states}")
        if rec.window > 1 and rec.alphabet:
            rows.append("  " + history_comparison(rec, self.automata[0]))
        for proof in self.distinct_automata():
            rows += self._automaton_lines(proof)
        rows += self._proof_lines()
        if self.numeric is not None:
            n = self.numeric
            rows.append(
                f"Numeric cross-check: {n['comparisons']} comparisons with WFSA.score, "
                f"max |error| {n['max_error']:.2e} ({'ok' if n['ok'] else 'MISMATCH'})"
            )
        rows += self._hankel_text()
        return "\n".join(rows)

    def render_markdown(self) -> str:
        """Markdown with LaTeX equations: the recurrence, the automata, the proof."""
        rec = self.recurrence
        rows = [f"## {rec.name}: rational over the {rec.ring.name} semiring", ""]
        if rec.doc:
            rows += [rec.doc, ""]
        rows += [*self._equations_latex(), ""]
        for proof in self.distinct_automata():
            w = proof.wfsa
            rows += [f"### Automaton `{w.name}` ({w.num_states} states, {len(w.arcs)} arcs)", ""]
            rows += ["| from | label | weight | to |", "|---|---|---|---|"]
            for a in w.arcs[:60]:
                rows.append(
                    f"| {w.states[a.src]} | {a.label} | ${sympy.latex(_constant(a.weight))}$ | {w.states[a.dst]} |"
                )
            rows.append("")
            initial = ", ".join(f"{w.states[q]} / ${sympy.latex(_constant(v))}$" for q, v in w.initial.items())
            final = ", ".join(f"{w.states[q]} / ${sympy.latex(_constant(v))}$" for q, v in w.final.items())
            rows += [f"Initial: {initial}. Final: {final}.", ""]
            if proof.roles:
                rows += ["States: " + "; ".join(f"{q} ↔ `{v}`" for q, v in proof.roles.items()) + ".", ""]
            for name, expr in sorted(proof.parameterisation.items()):
                fn = sympy.Function(name)(ALPHA)
                rows.append(f"- ${sympy.latex(fn)} := {sympy.latex(expr.xreplace({input_symbol(0): ALPHA}))}$")
            rows.append("")
        rows += ["### Proof", "", "```", *self._proof_lines(), "```"]
        return "\n".join(rows)

    def render_latex(self) -> str:
        return "\n".join(self._equations_latex())

    def draw(self, directory: str | Path, fmt: str = "svg") -> list[Path]:
        """Write each distinct automaton as ``<name>.<fmt>`` (graphviz) and return the paths."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for proof in self.distinct_automata():
            stem = (proof.wfsa.name or self.recurrence.name).replace(":", "-").replace("/", "-")
            dot = proof.wfsa.to_dot()
            dot.format = fmt
            rendered = dot.render(filename=stem, directory=str(out), cleanup=True)
            paths.append(Path(rendered))
        return paths

    # -- JSON -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        from kleene.automata.jsonio import to_document

        return {
            "format": FORMAT,
            "version": VERSION,
            **self.summary(),
            "recurrence": recurrence_to_dict(self.recurrence),
            "proofs": [
                {
                    "output": p.output,
                    "automaton": to_document(p.wfsa),
                    "invariant": [
                        {"value": expression_to_tree(v), "history": None if h is None else [str(x) for x in h]}
                        for v, h in p.invariant
                    ],
                    "parameterisation": {k: expression_to_tree(v) for k, v in p.parameterisation.items()},
                    "roles": p.roles,
                }
                for p in self.automata
            ],
        }

    @classmethod
    def from_json(cls, text: str) -> Certificate:
        """Read a certificate written by ``to_json``; ``checked`` is reset (call ``check()``).

        Raises:
            FormatError: not a certificate, or malformed content.
        """
        from kleene.automata.jsonio import from_document

        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(f"certificate JSON line {exc.lineno}: {exc.msg}") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
            raise FormatError(f"not a {FORMAT} version {VERSION} document")
        rec = recurrence_from_dict(doc["recurrence"])
        automata = []
        for i, p in enumerate(doc["proofs"]):
            try:
                automata.append(
                    AutomatonProof(
                        output=p["output"],
                        wfsa=from_document(p["automaton"]),
                        invariant=[
                            (expression_from_tree(e["value"]), None if e["history"] is None else tuple(e["history"]))
                            for e in p["invariant"]
                        ],
                        parameterisation={k: expression_from_tree(v) for k, v in p["parameterisation"].items()},
                        roles=dict(p.get("roles", {})),
                    )
                )
            except (KeyError, TypeError) as exc:
                raise FormatError(f"certificate proof {i}: missing or malformed field {exc}") from None
        return cls(rec, automata)


class Refutation(_Result):
    """A refusal: the recurrence is outside the construction; the reason names the offending term."""

    rational = False

    def __init__(self, recurrence: Recurrence, reason: str, component: str | None, offending: str):
        self.recurrence = recurrence
        self.reason = reason
        self.component = component
        self.offending = offending
        self.hankel = None
        self.seconds = 0.0
        self.checked = False

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.recurrence.name,
            "rational": False,
            "semiring": self.recurrence.ring.name,
            "automata": None,
            "states": [],
            "checked": False,
            "reason": self.reason,
            "offending": self.offending,
            "seconds": round(self.seconds, 3),
        }
        if self.hankel is not None:
            out["hankel"] = self.hankel.to_dict()
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            **self.summary(),
            "recurrence": recurrence_to_dict(self.recurrence),
        }

    def render_text(self) -> str:
        rows = [f"{self.recurrence.name}: REFUSED over the {self.recurrence.ring.name} semiring"]
        if self.recurrence.doc:
            rows.append(f"  {self.recurrence.doc}")
        rows.append("Recurrence:")
        rows += self._equations_text() + self._inputs_text()
        rows.append(f"Reason: {self.reason}")
        rows += self._hankel_text()
        return "\n".join(rows)

    def render_markdown(self) -> str:
        rows = [f"## {self.recurrence.name}: refused", "", *self._equations_latex(), "", f"**Reason:** {self.reason}"]
        if self.hankel is not None:
            rows += ["", "```", *self._hankel_text(), "```"]
        return "\n".join(rows)

    def render_latex(self) -> str:
        return "\n".join(self._equations_latex())


def history_comparison(rec: Recurrence, proof: AutomatonProof) -> str:
    """Our state count for a window-K construction next to Appendix A and Proposition 11."""
    sigma, K = len(rec.alphabet or ()), rec.window
    states, roles = proof.wfsa.num_states, len(proof.roles)
    pairs = roles * sum(sigma**k for k in range(K))
    text = (
        f"{states} states for |Σ| = {sigma}, K = {K}: {roles} roles × (1 + |Σ| + … + |Σ|^(K−1)) = {pairs} "
        f"(role, input history) pairs, {pairs - states} unreachable or dead ones trimmed"
    )
    if K == 2 and roles == 2:
        text += f"; Appendix A's construction has 2|Σ|+1 = {2 * sigma + 1}"
    return text + f"; Proposition 11 states O(2^(|Σ|^(K−1))) = O(2^{sigma ** (K - 1)}), this count is O(|Σ|^(K−1))"


# ---------------------------------------------------------------------------------------------
# random instantiations
# ---------------------------------------------------------------------------------------------


def random_value(semiring: Semiring, rng: np.random.Generator, scale: float = 1.0) -> Any:
    """A random element in the semiring's usual range (finite, away from overflow); real values in ±scale."""
    return semiring.random_element(rng, scale)


def random_environment(
    rec: Recurrence, alphabet: Sequence[Hashable], rng: np.random.Generator, scale: float = 1.0
) -> dict[str, Any]:
    """Random tables for the input functions (over BOS-padded windows) and random constants."""
    env: dict[str, Any] = {}
    padded = [BOS, *alphabet]
    for f in rec.input_functions:
        windows: list[tuple[Hashable, ...]] = [()]
        for k in range(f.lags + 1):
            pool = padded if k < f.lags else list(alphabet)
            windows = [(*w, a) for w in windows for a in pool]
        env[f.name] = {(w[0] if len(w) == 1 else w): random_value(rec.ring, rng, scale) for w in windows}
    for c in rec.constant_symbols:
        env[c.name] = random_value(rec.ring, rng, scale)
    return env


# ---------------------------------------------------------------------------------------------
# safe JSON for sympy expressions and recurrences
# ---------------------------------------------------------------------------------------------


def recurrence_to_dict(rec: Recurrence) -> dict[str, Any]:
    return {
        "name": rec.name,
        "semiring": rec.ring.name,
        "dims": rec.dims,
        "alphabet": None if rec.alphabet is None else [str(a) for a in rec.alphabet],
        "doc": rec.doc,
        "components": [{"name": c.name, "init": expression_to_tree(c.init)} for c in rec.components],
        "inputs": [{"name": f.name, "lags": f.lags, "meaning": f.meaning} for f in rec.input_functions],
        "constants": [c.name for c in rec.constant_symbols],
        "updates": {c.name: expression_to_tree(c.update) for c in rec.components if c.update is not None},
        "outputs": {k: expression_to_tree(v) for k, v in rec.outputs.items()},
    }


def recurrence_from_dict(doc: Any) -> Recurrence:
    """Rebuild a recurrence through the DSL (so every declaration is re-validated)."""
    try:
        rec = Recurrence(
            doc["name"], get_semiring(doc["semiring"]), doc.get("dims"), doc.get("alphabet"), doc.get("doc", "")
        )
        for c in doc["components"]:
            rec.state(c["name"], expression_from_tree(c["init"]))
        for f in doc["inputs"]:
            rec.input(f["name"], int(f["lags"]), f.get("meaning", ""))
        for name in doc["constants"]:
            rec.constant(name)
        for name, e in doc["updates"].items():
            rec.update(rec.component_of(name).prev, expression_from_tree(e))
        for name, e in doc["outputs"].items():
            rec.output(name, expression_from_tree(e))
    except (KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"malformed recurrence in certificate: {exc}") from None
    return rec
