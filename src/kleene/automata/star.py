"""The Kleene star of a matrix, ``closure_matrix``: the dense strategy of every closure in kleene.automata.

Exact (Lehmann's algorithm in the semiring; a linear solve in a field) or capped at k terms; numpy arrays and
torch tensors (differentiably), batched over leading axes. The sparse strategy (strongly connected components,
for large automata) is ``kleene.automata.sparse.epsilon_closure``, which calls this one on small cyclic blocks;
``kleene.automata.closure.epsilon_closure_rows`` chooses between the two by size. ``where_useful`` is the one rule
of both: only cycles on a successful path may diverge.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any, TypeVar

import numpy as np

from kleene.automata.semiring import Semiring
from kleene.errors import ArgumentError, DivergenceError

T = TypeVar("T")


def is_torch(x: object) -> bool:
    """Whether ``x`` is a torch tensor (recognised without importing torch)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "requires_grad")

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
        ArgumentError: a negative cap, or a ``live`` mask that is not Q booleans.
    """
    n = matrix.shape[-1]
    if live is not None:
        matrix = _restrict(matrix, semiring, live)
    eye = semiring.identity(n, like=matrix)
    if cap is not None:
        if cap < 0:
            raise ArgumentError(f"epsilon cap must be >= 0, got {cap}")
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
        raise ArgumentError(f"live must be a boolean mask of the {n} states; got shape {mask.shape}")
    keep = mask[:, None] & mask[None, :]
    if is_torch(matrix):
        import torch

        keep_t = torch.as_tensor(keep, device=matrix.device)
        return torch.where(keep_t, matrix, semiring.zeros(matrix.shape, like=matrix))
    return np.where(keep, matrix, semiring.zeros(matrix.shape))


def _as_numpy(matrix: Any) -> np.ndarray:
    return matrix.detach().cpu().numpy() if is_torch(matrix) else np.asarray(matrix)


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
    torch_mode = is_torch(matrix)
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
    if is_torch(support):
        import torch

        reach = support | torch.eye(n, dtype=torch.bool, device=support.device)
    else:
        reach = support | np.eye(n, dtype=bool)
    for k in range(n):
        reach = reach | (reach[..., :, k : k + 1] & reach[..., k : k + 1, :])
    return reach


def _lehmann_star(matrix: Any, semiring: Semiring, names: Sequence[str] | None) -> Any:
    """Lehmann's algebraic path algorithm: valid in any semiring with a star; batched over leading axes."""
    a = matrix if is_torch(matrix) else np.array(matrix, dtype=semiring.numpy_dtype)
    n = a.shape[-1]
    for k in range(n):
        try:
            pivot = semiring.star(a[..., k, k])
        except DivergenceError:
            diverging = semiring.star_diverges(_as_numpy(a[..., k, k]))
            at = _batch_index(np.asarray(diverging)) if np.ndim(diverging) else ()
            raise DivergenceError(_divergence(semiring, _as_numpy(matrix), at, "", names)) from None
        if is_torch(pivot) or np.ndim(pivot):
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
        try:
            magnitude = abs(float(semiring.to_real(weight))) if semiring.has_real_image else 0.0
        except OverflowError:  # a log cycle of weight 750 and more: beyond every float in the real image
            magnitude = math.inf
        badness = (bool(semiring.star_diverges(weight)), magnitude)
        if worst is None or badness > worst[0]:
            worst = (badness, cycle)
    if worst is None:
        return "no cycle found"
    loop = " -> ".join(label(i) for i in worst[1] + worst[1][:1])
    return f"cycle {loop}"


def where_useful(
    compute: Callable[[np.ndarray | None], T], useful: Callable[[], np.ndarray] | None, live: np.ndarray | None = None
) -> T:
    """``compute(live)``, where only cycles on a successful path may diverge: when it raises ``DivergenceError``
    and ``useful`` is given, ``compute(mask)`` again with ``mask = useful()`` (and ``live``, when given), the
    (Q,) mask of the states on some successful path of what is computed (as after ``trim``, and in OpenFst).
    ``compute(mask)`` must leave out the arcs from or to the states outside ``mask`` (None: every state).

    Raises:
        DivergenceError: from ``compute``, when ``useful`` is None or the second call raises it too.
    """
    try:
        return compute(live)
    except DivergenceError:
        if useful is None:
            raise
        mask = useful()
        return compute(mask if live is None else live & mask)


def closure_on_useful(
    matrix: Any, semiring: Semiring, cap: int | None, names: Sequence[str] | None,
    useful: Callable[[], np.ndarray] | None,
) -> Any:
    """``closure_matrix`` of ``matrix`` (numpy or torch) where only cycles on a successful path may diverge
    (``where_useful``; ``useful=None`` keeps every state).

    Raises:
        DivergenceError: a cycle of the ``useful`` states whose star diverges (named by ``names``).
    """
    return where_useful(lambda live: closure_matrix(matrix, semiring, cap, names, live=live), useful)
