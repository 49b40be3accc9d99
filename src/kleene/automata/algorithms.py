"""Algorithms on one WFSA, each written once against the Semiring interface.

- ``closure_matrix``: the Kleene star of a matrix (exact, or capped at k terms).
- ``score``: the Forward algorithm, with epsilon arcs (cycles included).
- ``viterbi``: the best single path with a backtrace naming every arc.
- ``all_spans``: SoPa's search score over every non-empty substring.
- ``pathsum``: the semiring sum over all strings (shortest distance).
- ``score_symbolic``: the Forward score as a sympy expression.

Epsilon semantics: a path may take epsilon arcs at the start and after each
consumed symbol. ``epsilon_cap=None`` allows any number (the exact closure
``E*``); ``epsilon_cap=k`` allows at most k in a row (``I + E + ... + E^k``;
k=1 is SoPa's first-order ``I + T(eps)``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np
import sympy

from .errors import AlphabetError, DivergenceError, WeightError
from .semiring import REAL, Semiring, _is_torch, sympy_constant
from .weights import Env, instantiate, is_symbolic
from .wfsa import WFSA, Arc

# ----------------------------------------------------------------------------------------
# Kleene star of a matrix


def closure_matrix(
    matrix: Any, semiring: Semiring, cap: int | None = None, state_names: Sequence[str] | None = None
) -> Any:
    """``M* = I + M + M^2 + ...`` (``cap=None``) or ``I + M + ... + M^cap``.

    Works on numpy arrays and torch tensors (differentiably) of shape (..., Q, Q): leading axes are a batch
    of independent matrices.

    Raises:
        DivergenceError: the exact star does not converge; the message names a
            cycle of states responsible (real/log: spectral radius >= 1) and, for a batch, which matrix.
    """
    n = matrix.shape[-1]
    eye = semiring.identity(n, like=matrix)
    if cap is not None:
        if cap < 0:
            raise ValueError(f"epsilon cap must be >= 0, got {cap}")
        if cap == 0 or n == 0:  # I alone, one copy per matrix of the batch
            return semiring.plus(semiring.zeros(matrix.shape, like=matrix), eye)
        result, power = eye, eye
        for _ in range(cap):
            power = semiring.matmul(power, matrix)
            result = semiring.plus(result, power)  # the powers carry the batch shape
        return result
    if n == 0:
        return semiring.zeros(matrix.shape, like=matrix)
    if semiring.name in ("real", "log"):
        return _linear_star(matrix, semiring, state_names)
    return _lehmann_star(matrix, semiring, state_names)


def _as_numpy(matrix: Any) -> np.ndarray:
    return matrix.detach().cpu().numpy() if _is_torch(matrix) else np.asarray(matrix)


def _batch_index(mask: np.ndarray) -> tuple[int, ...]:
    """The batch position of the first true entry of a (..., ) mask."""
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _divergence(
    semiring: Semiring, matrix: np.ndarray, at: tuple[int, ...], why: str, names: Sequence[str] | None
) -> str:
    """The message of a diverging star: which matrix of a batch, why, and the worst cycle there."""
    where = f" (matrix {list(at)} of the batch)" if at else ""
    return f"the {semiring.name} star diverges{where}: {why}{_describe_cycle(matrix[at], semiring, names)}"


def _linear_star(matrix: Any, semiring: Semiring, names: Sequence[str] | None) -> Any:
    """Real and log stars by solving ``(I - M) X = I`` after checking convergence (not while torch.compile traces)."""
    torch_mode = _is_torch(matrix)
    linear = matrix if semiring is REAL else (matrix.exp() if torch_mode else np.exp(matrix))
    if not (torch_mode and _tracing()):
        radius = np.max(np.abs(np.linalg.eigvals(_as_numpy(linear).astype(float))), axis=-1)
        if np.any(radius >= 1.0 - 1e-12):
            at = _batch_index(radius >= 1.0 - 1e-12)
            why = f"spectral radius {float(radius[at]):.4g} >= 1; "
            raise DivergenceError(_divergence(semiring, _as_numpy(matrix), at, why, names))
    n = matrix.shape[-1]
    # round-off leaves tiny values where no path exists: those entries are exactly zero
    reachable = _reachability(linear != 0)
    if torch_mode:
        import torch

        eye = torch.eye(n, dtype=linear.dtype, device=linear.device).expand_as(linear)
        solved = torch.where(reachable, torch.linalg.solve(eye - linear, eye), torch.zeros_like(linear))
        if semiring is REAL:
            return solved
        positive = solved > 0
        safe = torch.where(positive, solved, torch.ones_like(solved))
        return torch.where(positive, torch.log(safe), torch.full_like(solved, -np.inf))
    eye_np = np.broadcast_to(np.eye(n), linear.shape)
    star = np.where(reachable, np.linalg.solve(eye_np - linear, eye_np), 0.0)
    if semiring is REAL:
        return star
    with np.errstate(divide="ignore"):
        return np.where(star > 0, np.log(np.where(star > 0, star, 1.0)), -np.inf)


def _tracing() -> bool:
    import torch

    return bool(torch.compiler.is_compiling())


def _reachability(support: Any) -> Any:
    """Which states reach which in zero or more steps (Warshall): a boolean (..., Q, Q) array or tensor."""
    n = support.shape[-1]
    if _is_torch(support):
        import torch

        reach = support | torch.eye(n, dtype=torch.bool, device=support.device)
    else:
        reach = support | np.eye(n, dtype=bool)
    for k in range(n):
        reach = reach | (reach[..., :, k : k + 1] & reach[..., k : k + 1, :])
    return reach


def _lehmann_star(matrix: Any, semiring: Semiring, names: Sequence[str] | None) -> Any:
    """Lehmann's algebraic path algorithm: valid in any semiring with a star; batched over leading axes."""
    a = matrix if _is_torch(matrix) else np.array(matrix, dtype=semiring.numpy_dtype)
    n = a.shape[-1]
    for k in range(n):
        try:
            pivot = semiring.star(a[..., k, k])
        except DivergenceError:
            diverging = semiring.star_diverges(_as_numpy(a[..., k, k]))
            at = _batch_index(np.asarray(diverging)) if np.ndim(diverging) else ()
            raise DivergenceError(_divergence(semiring, _as_numpy(matrix), at, "", names)) from None
        if _is_torch(pivot) or np.ndim(pivot):
            pivot = pivot[..., None, None]
        through = semiring.times(semiring.times(a[..., :, k : k + 1], pivot), a[..., k : k + 1, :])
        a = semiring.plus(a, through)
    return semiring.plus(semiring.identity(n, like=matrix), a)


def _describe_cycle(matrix: np.ndarray, semiring: Semiring, names: Sequence[str] | None) -> str:
    """Name the worst simple cycle of the matrix's support graph."""
    import networkx as nx

    label = (lambda i: names[i]) if names is not None else (lambda i: f"state {i}")
    graph = nx.DiGraph()
    n = matrix.shape[0]
    graph.add_nodes_from(range(n))
    for i in range(n):
        for j in range(n):
            if not semiring.is_zero(matrix[i, j]):
                graph.add_edge(i, j)
    worst: tuple[float, list[int]] | None = None
    for cycle in islice(nx.simple_cycles(graph), 2000):
        weight = semiring.one
        for i, j in zip(cycle, cycle[1:] + cycle[:1]):
            weight = semiring.times(weight, matrix[i, j])
        badness = abs(float(weight)) if semiring.name == "real" else float(weight)
        if semiring.name == "min-plus":
            badness = -badness
        if worst is None or badness > worst[0]:
            worst = (badness, cycle)
    if worst is None:
        return "no cycle found"
    loop = " -> ".join(label(i) for i in worst[1] + worst[1][:1])
    return f"cycle {loop}"


# ----------------------------------------------------------------------------------------
# Forward


def _vecmat(semiring: Semiring, vector: Any, matrix: Any) -> Any:
    return semiring.matmul(vector[None, :], matrix)[0]


class _Stepper:
    """Per-symbol transition matrices and the epsilon closure of one automaton."""

    def __init__(self, wfsa: WFSA, env: Env | None, epsilon_cap: int | None):
        self.wfsa, self.env = wfsa, env
        self.semiring = wfsa.semiring
        self._cache: dict[Hashable, np.ndarray] = {}
        self.closure = (
            closure_matrix(wfsa.epsilon_matrix(env), self.semiring, epsilon_cap, wfsa.states)
            if wfsa.has_epsilons
            else None
        )

    def close(self, vector: np.ndarray) -> np.ndarray:
        return vector if self.closure is None else _vecmat(self.semiring, vector, self.closure)

    def start(self) -> np.ndarray:
        return self.close(self.wfsa.vector(self.wfsa.initial, self.env))

    def step(self, vector: np.ndarray, symbol: Hashable, position: int) -> np.ndarray:
        self.wfsa.check_symbol(symbol, position)
        try:
            matrix = self._cache[symbol]
        except KeyError:
            matrix = self._cache[symbol] = self.wfsa.transition_matrix(symbol, self.env)
        except TypeError:  # unhashable symbol
            matrix = self.wfsa.transition_matrix(symbol, self.env)
        return self.close(_vecmat(self.semiring, vector, matrix))

    def finish(self, vector: np.ndarray) -> Any:
        final = self.wfsa.vector(self.wfsa.final, self.env)
        return self.semiring.sum(self.semiring.times(vector, final), axis=0)


def _stepper(wfsa: WFSA, env: Env | None, epsilon_cap: int | None) -> Any:
    """The sparse stepper for large constant-weight automata, else the dense one."""
    from .sparse import SparseStepper, engine_store

    store = engine_store(wfsa)
    return _Stepper(wfsa, env, epsilon_cap) if store is None else SparseStepper(wfsa, store, epsilon_cap)


def forward_vectors(
    wfsa: WFSA, symbols: Sequence[Hashable], env: Env | None = None, epsilon_cap: int | None = None
) -> list[np.ndarray]:
    """The Forward vectors ``Omega_0 .. Omega_n`` (after each epsilon closure)."""
    stepper = _Stepper(wfsa, env, epsilon_cap)
    vectors = [stepper.start()]
    for i, x in enumerate(symbols):
        vectors.append(stepper.step(vectors[-1], x, i))
    return vectors


def score(wfsa: WFSA, symbols: Sequence[Hashable], env: Env | None = None, epsilon_cap: int | None = None) -> Any:
    """The Forward score of ``symbols``: the semiring sum over all paths deriving it.

    Note:
        Symbolic weights need ``env`` (see ``kleene.automata.weights.evaluate``).

    Raises:
        AlphabetError: a symbol outside the declared alphabet (named, with its position).
        DivergenceError: the exact epsilon closure does not converge.
    """
    stepper = _stepper(wfsa, env, epsilon_cap)
    vector = stepper.start()
    for i, x in enumerate(symbols):
        vector = stepper.step(vector, x, i)
    return _plain(stepper.finish(vector))


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic | np.ndarray) else value


@dataclass(frozen=True)
class SpanScores:
    """SoPa's search score: ``total`` over all non-empty spans, ``ends[t]`` over spans ending at t+1."""

    total: Any
    ends: list[Any]


def all_spans(
    wfsa: WFSA, symbols: Sequence[Hashable], env: Env | None = None, epsilon_cap: int | None = None
) -> SpanScores:
    """The semiring sum of ``score(symbols[i:j])`` over all ``0 <= i < j <= n``.

    In the real semiring this is the expected count of matches; in max semirings
    the best match. ``ends[j-1]`` sums the spans ending at ``j``.
    """
    stepper = _stepper(wfsa, env, epsilon_cap)
    s = wfsa.semiring
    restart = stepper.start()
    live = s.zeros((wfsa.num_states,))
    total, ends = s.zero, []
    for i, x in enumerate(symbols):
        live = stepper.step(s.plus(live, restart), x, i)
        end = _plain(stepper.finish(live))
        ends.append(end)
        total = s.plus(total, end)
    return SpanScores(_plain(total), ends)


def _consumable_symbols(wfsa: WFSA) -> list[Hashable]:
    from .labels import Sym

    if wfsa.alphabet is not None:
        return list(wfsa.alphabet)
    symbols: list[Hashable] = []
    for i, arc in enumerate(wfsa.arcs):
        if arc.label.consumes and not isinstance(arc.label, Sym):
            raise AlphabetError(f"arc {i} has predicate label {arc.label}; pathsum needs the automaton's alphabet")
        if isinstance(arc.label, Sym) and arc.label.symbol not in symbols:
            symbols.append(arc.label.symbol)
    return symbols


def pathsum(wfsa: WFSA, env: Env | None = None) -> Any:
    """The semiring sum of the scores of all strings: ``lambda (E + sum_a T(a))* rho``.

    Raises:
        DivergenceError: the sum diverges (naming a cycle).
        AlphabetError: predicate labels with no alphabet to enumerate.
    """
    from . import sparse

    if sparse.engine_store(wfsa) is not None:
        return sparse.pathsum(wfsa)
    s = wfsa.semiring
    total = wfsa.epsilon_matrix(env)
    for symbol in _consumable_symbols(wfsa):
        total = s.plus(total, wfsa.transition_matrix(symbol, env))
    star = closure_matrix(total, s, None, wfsa.states)
    start = _vecmat(s, wfsa.vector(wfsa.initial, env), star)
    return _plain(s.sum(s.times(start, wfsa.vector(wfsa.final, env)), axis=0))


# ----------------------------------------------------------------------------------------
# Viterbi


@dataclass(frozen=True)
class Step:
    """One arc of a path: which arc, between which states, consuming what."""

    arc: int
    src: str
    dst: str
    kind: str  # "main", "self-loop" or "epsilon"
    symbol: Hashable | None
    weight: Any

    def __str__(self) -> str:
        consumed = "ε" if self.symbol is None else repr(self.symbol)
        return f"{self.src} -[{consumed} / {self.weight:.4g} ({self.kind})]-> {self.dst}"


@dataclass(frozen=True)
class ViterbiPath:
    """The best path: its weight (semiring zero when none exists) and its arcs."""

    weight: Any
    steps: list[Step] = field(default_factory=list)
    start: str | None = None
    end: str | None = None

    @property
    def found(self) -> bool:
        return self.start is not None

    def __str__(self) -> str:
        if not self.found:
            return "no path"
        lines = [f"weight {self.weight:.6g}: start at {self.start}"]
        lines += [f"  {step}" for step in self.steps]
        lines.append(f"  end at {self.end}")
        return "\n".join(lines)


def viterbi(
    wfsa: WFSA, symbols: Sequence[Hashable], env: Env | None = None, epsilon_cap: int | None = None
) -> ViterbiPath:
    """The best single path deriving ``symbols`` under the semiring's Viterbi order.

    The order is that of ``semiring.viterbi`` (max-times for real, max-plus for
    log, the semiring itself when idempotent). Path weights are semiring products.

    Raises:
        WeightError: a negative arc weight in the real semiring (no max-times order).
        DivergenceError: an epsilon cycle improves paths without bound (exact mode).
    """
    from . import sparse

    if sparse.engine_store(wfsa) is not None:
        path: ViterbiPath = sparse.viterbi(wfsa, symbols, epsilon_cap)
        return path
    s, v = wfsa.semiring, wfsa.semiring.viterbi

    def nonnegative(w: Any, where: str) -> Any:
        if s is REAL and w < 0:
            raise WeightError(f"{where}: Viterbi in the real semiring ranks paths by max-times and needs "
                              f"nonnegative weights; got {w}")
        return w

    def weight_of(i: int, x: Hashable | None) -> Any:
        return nonnegative(wfsa.arc_weight(i, x, env), f"arc {i} on {x!r}")

    eps = [(i, a, weight_of(i, None)) for i, a in enumerate(wfsa.arcs) if not a.label.consumes]
    # A layer maps a state to (weight, pointer). A pointer is None (an initial state),
    # ("node", p, q) (state q of the finished layer at position p), or (arc index, pointer).
    Layer = dict[int, tuple[Any, Any]]

    def offer(layer: Layer, q: int, weight: Any, pointer: Any) -> bool:
        if s.is_zero(weight) or (q in layer and not v.better(weight, layer[q][0])):
            return False
        layer[q] = (weight, pointer)
        return True

    def relax(layer: Layer) -> Layer:
        best, frontier = dict(layer), dict(layer)
        limit = wfsa.num_states if epsilon_cap is None else epsilon_cap
        for count in range(1, limit + 1):
            improved: Layer = {}
            for i, arc, weight in eps:
                if arc.src in frontier:
                    w, pointer = frontier[arc.src]
                    if offer(best, arc.dst, s.times(w, weight), (i, pointer)):
                        improved[arc.dst] = best[arc.dst]
            if improved and epsilon_cap is None and count == limit:
                names = ", ".join(wfsa.state_name(q) for q in improved)
                raise DivergenceError(f"an epsilon cycle through {names} improves paths without bound")
            if not improved:
                break
            frontier = improved
        return best

    start: Layer = {}
    for q, value in enumerate(wfsa.vector(wfsa.initial, env)):
        offer(start, q, nonnegative(_plain(value), f"initial weight of {wfsa.state_name(q)}"), None)
    history = [relax(start)]
    for position, x in enumerate(symbols):
        wfsa.check_symbol(x, position)
        layer: Layer = {}
        for i, arc in enumerate(wfsa.arcs):
            if arc.src in history[-1] and arc.label.matches(x):
                w = s.times(history[-1][arc.src][0], weight_of(i, x))
                offer(layer, arc.dst, w, (i, ("node", position, arc.src)))
        history.append(relax(layer))
    final = wfsa.vector(wfsa.final, env)
    ends: Layer = {}
    for q, (w, _) in history[-1].items():
        rho = nonnegative(_plain(final[q]), f"final weight of {wfsa.state_name(q)}")
        offer(ends, q, _plain(s.times(w, rho)), None)
    if not ends:
        return ViterbiPath(s.zero)
    best_q = next(iter(ends))
    for q in ends:
        if v.better(ends[q][0], ends[best_q][0]):
            best_q = q
    return _backtrace(wfsa, symbols, history, best_q, ends[best_q][0], env)


def _backtrace(
    wfsa: WFSA, symbols: Sequence[Hashable], history: list[dict[int, tuple[Any, Any]]], end: int, weight: Any,
    env: Env | None,
) -> ViterbiPath:
    steps: list[Step] = []
    pointer = history[len(symbols)][end][1]
    while pointer is not None:
        if pointer[0] == "node":
            _, position, state = pointer
            pointer = history[position][state][1]
            continue
        arc_index, previous = pointer
        arc: Arc = wfsa.arcs[arc_index]
        symbol = symbols[previous[1]] if arc.label.consumes else None
        weight_here = _plain(wfsa.arc_weight(arc_index, symbol, env))
        steps.append(Step(arc_index, wfsa.state_name(arc.src), wfsa.state_name(arc.dst), arc.kind, symbol, weight_here))
        pointer = previous
    steps.reverse()
    start = steps[0].src if steps else wfsa.state_name(end)
    return ViterbiPath(weight, steps, start, wfsa.state_name(end))


# ----------------------------------------------------------------------------------------
# Symbolic scores


def _sym_weight(wfsa: WFSA, weight: Any, symbol: Hashable | None) -> sympy.Expr:
    if is_symbolic(weight):
        return weight if symbol is None else instantiate(weight, symbol)
    return sympy_constant(weight)


def _sym_matrix(wfsa: WFSA, symbol: Hashable | None) -> list[list[list[sympy.Expr]]]:
    """Per (src, dst), the list of symbolic arc weights for ``symbol`` (None: epsilon)."""
    n = wfsa.num_states
    cells: list[list[list[sympy.Expr]]] = [[[] for _ in range(n)] for _ in range(n)]
    for arc in wfsa.arcs:
        hit = (not arc.label.consumes) if symbol is None else _label_matches_symbolic(arc, symbol)
        if hit:
            cells[arc.src][arc.dst].append(_sym_weight(wfsa, arc.weight, symbol))
    return cells


def _label_matches_symbolic(arc: Arc, symbol: Hashable) -> bool:
    from .labels import AnySymbol

    if isinstance(symbol, sympy.Basic) and not isinstance(arc.label, AnySymbol):
        return bool(arc.label.matches(str(symbol)))
    return bool(arc.label.matches(symbol))


def _sym_vecmat(s: Semiring, vector: list[sympy.Expr], cells: list[list[list[sympy.Expr]]]) -> list[sympy.Expr]:
    n = len(vector)
    out = []
    for j in range(n):
        terms = []
        for i in range(n):
            if vector[i] == s.sym_zero:
                continue
            for w in cells[i][j]:
                terms.append(s.sym_times(vector[i], w))
        out.append(s.sym_plus(*terms) if terms else s.sym_zero)
    return out


def _sym_closure(wfsa: WFSA, cap: int | None) -> list[list[list[sympy.Expr]]] | None:
    """Symbolic ``E*`` as cells: exact (Lehmann) or capped; acyclic graphs use the finite sum."""
    s = wfsa.semiring
    n = wfsa.num_states
    if not wfsa.has_epsilons:
        return None
    eps = _sym_matrix(wfsa, None)
    matrix = [[s.sym_plus(*c) if c else s.sym_zero for c in row] for row in eps]
    if cap is None and not _has_epsilon_cycle(wfsa):
        cap = n
    if cap is None:
        a = [row[:] for row in matrix]
        for k in range(n):
            pivot = s.sym_star(a[k][k])
            a = [
                [s.sym_plus(a[i][j], s.sym_times(a[i][k], pivot, a[k][j])) for j in range(n)]
                for i in range(n)
            ]
        result = [[s.sym_plus(s.sym_one if i == j else s.sym_zero, a[i][j]) for j in range(n)] for i in range(n)]
    else:
        identity = [[s.sym_one if i == j else s.sym_zero for j in range(n)] for i in range(n)]
        result, power = identity, identity
        for _ in range(cap):
            power = [
                [s.sym_plus(*(s.sym_times(power[i][k], matrix[k][j]) for k in range(n))) for j in range(n)]
                for i in range(n)
            ]
            result = [[s.sym_plus(result[i][j], power[i][j]) for j in range(n)] for i in range(n)]
    return [[[c] if c != s.sym_zero else [] for c in row] for row in result]


def _has_epsilon_cycle(wfsa: WFSA) -> bool:
    import networkx as nx

    graph = nx.DiGraph([(a.src, a.dst) for a in wfsa.arcs if not a.label.consumes])
    return not nx.is_directed_acyclic_graph(graph)


def score_symbolic(wfsa: WFSA, symbols: Sequence[Hashable], epsilon_cap: int | None = None) -> sympy.Expr:
    """The Forward score as a sympy expression of the weight functions.

    Each consumed symbol ``x`` replaces ``ALPHA`` (so ``mu(ALPHA)`` becomes
    ``mu(x)``); pass sympy symbols (``x1, x2, ...``) to get the papers' general
    formulas. Constants stay numbers. The result uses the semiring's symbolic
    operations (``Add``/``Mul`` for real, ``Max``/``Add`` for max-plus, ...).
    """
    s = wfsa.semiring
    closure = _sym_closure(wfsa, epsilon_cap)
    vector = [
        _sym_weight(wfsa, wfsa.initial[q], None) if q in wfsa.initial else s.sym_zero for q in range(wfsa.num_states)
    ]
    if closure is not None:
        vector = _sym_vecmat(s, vector, closure)
    for x in symbols:
        vector = _sym_vecmat(s, vector, _sym_matrix(wfsa, x))
        if closure is not None:
            vector = _sym_vecmat(s, vector, closure)
    terms = [
        s.sym_times(vector[q], _sym_weight(wfsa, wfsa.final[q], None))
        for q in wfsa.final
        if vector[q] != s.sym_zero
    ]
    return s.sym_plus(*terms) if terms else s.sym_zero
