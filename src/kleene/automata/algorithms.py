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

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np
import sympy

from kleene.automata.semiring import Semiring, _is_torch, sympy_constant
from kleene.automata.weights import Env, instantiate, is_symbolic
from kleene.automata.wfsa import WFSA, Arc
from kleene.errors import AlphabetError, ArgumentError, DivergenceError, WeightError

# ----------------------------------------------------------------------------------------
# Kleene star of a matrix


def closure_matrix(
    matrix: Any,
    semiring: Semiring,
    cap: int | None = None,
    state_names: Sequence[str] | None = None,
    live: Any = None,
) -> Any:
    """``M* = I + M + M^2 + ...`` (``cap=None``) or ``I + M + ... + M^cap``.

    Works on numpy arrays and torch tensors (differentiably) of shape (..., Q, Q): leading axes are a batch
    of independent matrices. The exact star is computed in the semiring itself (Lehmann's algorithm: in the log
    semiring with logaddexp and ``a* = -log(1 - e^a)``, exact over the whole float range); in a ring (real) it
    is the solution of ``(I - M) X = I``.

    Args:
        live: an optional boolean (Q,) mask of the states that matter: the arcs from or to the other states are
            ignored (their rows and columns of the result are those of I), so a divergent cycle among them
            does not raise.

    Raises:
        DivergenceError: the exact star does not converge; the message names a
            cycle of states responsible (real: spectral radius >= 1) and, for a batch, which matrix.
        ValueError: a negative cap, or a ``live`` mask that is not Q booleans.
    """
    n = matrix.shape[-1]
    if live is not None:
        matrix = _restrict(matrix, semiring, live)
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
    if semiring.is_field:
        return _linear_star(matrix, semiring, state_names)
    return _lehmann_star(matrix, semiring, state_names)


def _restrict(matrix: Any, semiring: Semiring, live: Any) -> Any:
    """``matrix`` with the rows and columns of the states outside the boolean (Q,) mask ``live`` set to zero."""
    mask = np.asarray(live, dtype=bool)
    n = matrix.shape[-1]
    if mask.shape != (n,):
        raise ValueError(f"live must be a boolean mask of the {n} states; got shape {mask.shape}")
    keep = mask[:, None] & mask[None, :]
    if _is_torch(matrix):
        import torch

        keep_t = torch.as_tensor(keep, device=matrix.device)
        return torch.where(keep_t, matrix, semiring.zeros(matrix.shape, like=matrix))
    return np.where(keep, matrix, semiring.zeros(matrix.shape))


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
    """The star in a ring: solve ``(I - M) X = I`` after checking convergence (not while torch.compile traces).

    Round-off of the solve leaves tiny values where no path exists; those entries are set to exactly zero in
    value only, so that their gradient (the derivative of the solve, e.g. with respect to an arc of weight 0 that
    would open a path) still flows.
    """
    torch_mode = _is_torch(matrix)
    if not (torch_mode and _tracing()):
        radius = np.max(np.abs(np.linalg.eigvals(_as_numpy(matrix).astype(float))), axis=-1)
        if np.any(radius >= 1.0 - 1e-12):
            at = _batch_index(radius >= 1.0 - 1e-12)
            why = f"spectral radius {float(radius[at]):.4g} >= 1; "
            raise DivergenceError(_divergence(semiring, _as_numpy(matrix), at, why, names))
    n = matrix.shape[-1]
    reachable = _reachability(matrix != 0)
    if torch_mode:
        import torch

        eye = torch.eye(n, dtype=matrix.dtype, device=matrix.device).expand_as(matrix)
        solved = torch.linalg.solve(eye - matrix, eye)
        return solved - torch.where(reachable, torch.zeros_like(solved), solved).detach()
    eye_np = np.broadcast_to(np.eye(n), matrix.shape)
    return np.where(reachable, np.linalg.solve(eye_np - matrix, eye_np), 0.0)


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
    worst: tuple[tuple[bool, float], list[int]] | None = None
    for cycle in islice(nx.simple_cycles(graph), 2000):
        weight = semiring.one
        for i, j in zip(cycle, cycle[1:] + cycle[:1]):
            weight = semiring.times(weight, matrix[i, j])
        # a cycle whose own star diverges first; otherwise (real: a spectral radius >= 1 from several cycles) the
        # one of largest magnitude in the real image, where there is one
        magnitude = abs(float(semiring.to_real(weight))) if semiring.has_real_image else 0.0
        badness = (bool(semiring.star_diverges(weight)), magnitude)
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


def _closure_where_useful(wfsa: WFSA, matrix: Any, cap: int | None, useful: Callable[[], np.ndarray] | None) -> Any:
    """The closure of ``matrix`` (an arc matrix of ``wfsa``), where only cycles on a successful path may diverge.

    When the exact star diverges, the closure is recomputed on the states ``useful()`` names (those on some
    successful path of what is computed, as after ``trim`` and in OpenFst): the others' rows and columns serve no
    successful path. ``useful=None`` keeps every state.
    """
    try:
        return closure_matrix(matrix, wfsa.semiring, cap, wfsa.states)
    except DivergenceError:
        if useful is None:
            raise
        return closure_matrix(matrix, wfsa.semiring, cap, wfsa.states, live=useful())


def _useful_states(wfsa: WFSA, symbols: Sequence[Hashable]) -> np.ndarray:
    """The (Q,) mask of the states on some successful path deriving ``symbols`` (a pathsum's, over any string, is
    ``_useful_in``).

    Arcs of weight zero and zero initial/final weights make no path (as in ``trim``); symbolic weights count.
    """
    s = wfsa.semiring

    def nonzero(weight: Any) -> bool:
        return is_symbolic(weight) or not s.is_zero(weight)

    arcs = [arc for arc in wfsa.arcs if nonzero(arc.weight)]
    starts = {q for q, w in wfsa.initial.items() if nonzero(w)}
    ends = {q for q, w in wfsa.final.items() if nonzero(w)}

    def spread(states: set[int], moves: list[tuple[int, int]]) -> set[int]:
        """``states`` and everything the (src, dst) ``moves`` reach from them."""
        seen, stack = set(states), list(states)
        while stack:
            q = stack.pop()
            for src, dst in moves:
                if src == q and dst not in seen:
                    seen.add(dst)
                    stack.append(dst)
        return seen

    useful = np.zeros(wfsa.num_states, dtype=bool)
    eps = [(arc.src, arc.dst) for arc in arcs if not arc.label.consumes]
    back_eps = [(d, c) for c, d in eps]

    def consuming(x: Hashable) -> list[tuple[int, int]]:
        return [(arc.src, arc.dst) for arc in arcs if arc.label.consumes and _matches(arc, x)]

    forward = [spread(starts, eps)]
    for x in symbols:
        forward.append(spread({d for c, d in consuming(x) if c in forward[-1]}, eps))
    backward = spread(ends, back_eps)
    for t in range(len(symbols), -1, -1):
        useful[sorted(forward[t] & backward)] = True
        if t:
            backward = spread({c for c, d in consuming(symbols[t - 1]) if d in backward}, back_eps)
    return useful


def _matches(arc: Arc, symbol: Hashable) -> bool:
    try:
        return bool(arc.label.matches(symbol))
    except TypeError:  # an unhashable symbol matches no set-valued label
        return False


class _Stepper:
    """Per-symbol transition matrices and the epsilon closure of one automaton."""

    def __init__(
        self, wfsa: WFSA, env: Env | None, epsilon_cap: int | None, symbols: Sequence[Hashable] | None = None
    ):
        self.wfsa, self.env = wfsa, env
        self.semiring = wfsa.semiring
        self._cache: dict[Hashable, np.ndarray] = {}
        useful = (lambda: useful_mask(wfsa)) if symbols is None else (lambda: _useful_states(wfsa, symbols))
        self.closure = (
            _closure_where_useful(wfsa, wfsa.epsilon_matrix(env), epsilon_cap, useful) if wfsa.has_epsilons else None
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


def _stepper(wfsa: WFSA, env: Env | None, epsilon_cap: int | None, symbols: Sequence[Hashable] | None = None) -> Any:
    """The sparse stepper for large constant-weight automata, else the dense one."""
    from kleene.automata.sparse import SparseStepper, engine_store

    store = engine_store(wfsa)
    return _Stepper(wfsa, env, epsilon_cap, symbols) if store is None else SparseStepper(wfsa, store, epsilon_cap)


def check_epsilon_cap(epsilon_cap: Any, operation: str) -> None:
    """Refuse an ``epsilon_cap`` that is not None or a non-negative integer.

    Raises:
        ArgumentError: naming the operation and the value.
    """
    if epsilon_cap is not None and (
        isinstance(epsilon_cap, bool) or not isinstance(epsilon_cap, (int, np.integer)) or epsilon_cap < 0
    ):
        raise ArgumentError(
            f"{operation}: epsilon_cap must be None (the exact closure) or an integer >= 0, got {epsilon_cap!r}"
        )


def score(wfsa: WFSA, symbols: Sequence[Hashable], env: Env | None = None, epsilon_cap: int | None = None) -> Any:
    """The Forward score of ``symbols``: the semiring sum over all paths deriving it.

    Note:
        Symbolic weights need ``env`` (see ``kleene.automata.weights.evaluate``).

    Raises:
        AlphabetError: a symbol outside the declared alphabet (named, with its position).
        DivergenceError: the exact epsilon closure diverges on a successful path of ``symbols`` (cycles off
            every such path do not count, as after ``trim``).
    """
    check_epsilon_cap(epsilon_cap, "score")
    from kleene.automata.sparse import engine_store, forward

    if engine_store(wfsa) is not None:
        return forward(wfsa, symbols, epsilon_cap)
    stepper = _Stepper(wfsa, env, epsilon_cap, symbols)
    vector = stepper.start()
    for i, x in enumerate(symbols):
        vector = stepper.step(vector, x, i)
    return _plain(stepper.finish(vector))


def score_batch(
    wfsa: WFSA, strings: Sequence[Sequence[Hashable]], env: Env | None = None, epsilon_cap: int | None = None
) -> list[Any]:
    """``[score(wfsa, s) for s in strings]`` in one call: constant-weight automata without useful epsilon arcs
    advance all strings together in the sparse engine (see ``kleene.automata.sparse.forward_batch``); others score
    each string. An empty batch gives an empty list.

    Raises:
        ArgumentError: ``strings`` is not a sequence of symbol sequences.
        AlphabetError: a symbol outside the alphabet (naming it, its position and its string's index).
        DivergenceError: as ``score``.
    """
    check_epsilon_cap(epsilon_cap, "score_batch")
    from kleene.automata.sparse import arc_store, forward_batch

    if isinstance(strings, str | bytes) or not isinstance(strings, Sequence):
        got = type(strings).__name__
        raise ArgumentError(f"score_batch: strings must be a sequence of symbol sequences; got {got}")
    for b, string in enumerate(strings):
        if not isinstance(string, Sequence):
            raise ArgumentError(f"score_batch: strings[{b}] must be a sequence of symbols; got {string!r}")
    if not strings:
        return []
    if arc_store(wfsa) is not None:
        return forward_batch(wfsa, strings, epsilon_cap)
    return [score(wfsa, string, env, epsilon_cap) for string in strings]


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

    Raises:
        ArgumentError: ``epsilon_cap`` is neither None nor an integer >= 0.
        AlphabetError: a symbol outside the declared alphabet (named, with its position).
    """
    check_epsilon_cap(epsilon_cap, "all_spans")
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
    from kleene.automata.labels import Sym

    if wfsa.alphabet is not None:
        return list(wfsa.alphabet)
    symbols: list[Hashable] = []
    for i, arc in enumerate(wfsa.arcs):
        if arc.label.consumes and not isinstance(arc.label, Sym):
            raise AlphabetError(f"arc {i} has predicate label {arc.label}; pathsum needs the automaton's alphabet")
        if isinstance(arc.label, Sym) and arc.label.symbol not in symbols:
            symbols.append(arc.label.symbol)
    return symbols


def pathsum(wfsa: WFSA, env: Env | None = None, epsilon_cap: int | None = None) -> Any:
    """The semiring sum of the scores of all strings: ``lambda (E + sum_a T(a))* rho``.

    With ``epsilon_cap=k``, paths take at most k epsilon arcs in a row (as in ``score``):
    ``lambda C (T C)* rho`` with ``C = I + E + ... + E^k`` and ``T = sum_a T(a)``.
    Only cycles on some successful path can make the sum diverge.

    Raises:
        DivergenceError: the sum diverges (naming a cycle).
        AlphabetError: predicate labels with no alphabet to enumerate.
    """
    check_epsilon_cap(epsilon_cap, "pathsum")
    from . import sparse

    if sparse.engine_store(wfsa) is not None:
        return sparse.pathsum(wfsa)
    s = wfsa.semiring
    moves = s.zeros((wfsa.num_states, wfsa.num_states))
    for symbol in _consumable_symbols(wfsa):
        moves = s.plus(moves, wfsa.transition_matrix(symbol, env))
    initial, final = wfsa.vector(wfsa.initial, env), wfsa.vector(wfsa.final, env)
    if epsilon_cap is None:
        step = s.plus(wfsa.epsilon_matrix(env), moves)
    else:
        capped = closure_matrix(wfsa.epsilon_matrix(env), s, epsilon_cap)
        initial, step = _vecmat(s, initial, capped), s.matmul(moves, capped)
    star = _closure_where_useful(wfsa, step, None, lambda: _useful_in(s, step, initial, final))
    return _plain(s.sum(s.times(_vecmat(s, initial, star), final), axis=0))


def _useful_in(semiring: Semiring, step: Any, initial: Any, final: Any) -> np.ndarray:
    """The (Q,) mask of the states on some path ``initial step* final`` with no zero factor (the states that a
    pathsum of that form reads; only their cycles can make it diverge)."""
    from .sparse import useful_states

    src, dst = np.nonzero(np.asarray(step) != semiring.zero)
    starts, ends = np.asarray(initial) != semiring.zero, np.asarray(final) != semiring.zero
    return useful_states(src, dst, len(starts), starts, ends)


def useful_mask(wfsa: WFSA) -> np.ndarray:
    """The (Q,) mask of the useful states of ``wfsa``: accessible from an initial state and co-accessible to a final
    one along arcs of non-zero weight (symbolic weights count as non-zero), as ``trim`` keeps them. Only the cycles
    of these states can make a score, pathsum or closure diverge. Do not modify the result (it may be cached)."""
    from .sparse import arc_store, useful_states

    store = arc_store(wfsa)
    if store is not None:
        return store.useful()
    s = wfsa.semiring

    def nonzero(weight: Any) -> bool:
        return is_symbolic(weight) or not s.is_zero(weight)

    arcs = [a for a in wfsa.arcs if nonzero(a.weight)]
    src = np.fromiter((a.src for a in arcs), dtype=np.int64, count=len(arcs))
    dst = np.fromiter((a.dst for a in arcs), dtype=np.int64, count=len(arcs))
    starts, ends = (np.zeros(wfsa.num_states, dtype=bool) for _ in range(2))
    starts[[q for q, w in wfsa.initial.items() if nonzero(w)]] = True
    ends[[q for q, w in wfsa.final.items() if nonzero(w)]] = True
    return useful_states(src, dst, wfsa.num_states, starts, ends)


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
    check_epsilon_cap(epsilon_cap, "viterbi")
    from . import sparse

    if sparse.engine_store(wfsa) is not None:
        path: ViterbiPath = sparse.viterbi(wfsa, symbols, epsilon_cap)
        return path
    s, v = wfsa.semiring, wfsa.semiring.viterbi

    def nonnegative(w: Any, where: str) -> Any:
        if v is not s and not is_symbolic(w):
            try:
                v.check(w, where)
            except WeightError:
                raise WeightError(
                    f"{where}: Viterbi in the {s.name} semiring ranks paths by {v.name} and needs weights of that "
                    f"semiring; got {w}"
                ) from None
        return w

    def weight_of(i: int, x: Hashable | None) -> Any:
        return nonnegative(wfsa.arc_weight(i, x, env), f"arc {i} on {x!r}")

    useful = useful_mask(wfsa)  # only paths through useful states can succeed: others' cycles must not raise
    eps = [(i, a, weight_of(i, None)) for i, a in enumerate(wfsa.arcs) if not a.label.consumes]  # all checked
    eps = [(i, a, w) for i, a, w in eps if useful[a.src] and useful[a.dst]]
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
        if not useful[q]:
            continue
        offer(start, q, nonnegative(_plain(value), f"initial weight of {wfsa.state_name(q)}"), None)
    history = [relax(start)]
    for position, x in enumerate(symbols):
        wfsa.check_symbol(x, position)
        layer: Layer = {}
        for i, arc in enumerate(wfsa.arcs):
            if arc.src in history[-1] and useful[arc.dst] and arc.label.matches(x):
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
    from kleene.automata.labels import AnySymbol

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

    Caution:
        Neither ``symbols`` nor ``epsilon_cap`` is checked: a symbol outside the alphabet is read like any other
        (``ANY`` arcs take it), and an epsilon cycle's closure is the semiring's symbolic star, whether or not its
        series converges for the values later substituted.
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
