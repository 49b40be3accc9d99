"""The epsilon closure of an automaton: one entry point, ``epsilon_closure_rows``, which chooses its strategy by size.

- dense, for the exact closure of at most ``DENSE_CLOSURE_STATES`` states: ``star.closure_matrix`` of the Q x Q
  epsilon matrix (Lehmann's algorithm or a linear solve, cubic in Q);
- sparse, for larger automata and every capped closure: ``sparse.epsilon_closure`` of the epsilon arcs (strongly
  connected components in reverse topological order, each cyclic one's block star by ``closure_matrix``; a capped
  closure one sparse product per power), in time and memory that grow with the closure's non-zeros, not with Q².

Both give the same rows (up to rounding) and raise on the same automata: only cycles on a successful path may
diverge (``star.where_useful``). Every epsilon closure of an automaton in kleene.automata is this one: Forward's
dense and arc-store steps (``score``, ``all_spans``), ``pathsum`` with a cap, ``remove_epsilon``. The torch batch
(``batched``) and the sympy score call ``closure_matrix`` on their matrices directly: those elements have no sparse
form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kleene.automata.sparse import EPSILON_ID, ClosureRows, IntArray, arc_store, epsilon_closure
from kleene.automata.star import closure_matrix, where_useful
from kleene.automata.weights import Env
from kleene.automata.wfsa import WFSA
from kleene.errors import ArgumentError, BudgetExceededError

#: Up to this many states the exact epsilon closure is the dense ``closure_matrix`` (faster there: measured 0.1-3 ms
#: against the sparse closure's 1.4-3.8 ms at 5-50 states, in every semiring); above it, ``sparse.epsilon_closure``.
#: A capped closure is always sparse: ``cap`` dense products cost Q³ each (log, 64 states, cap 3: 22 ms against
#: 0.1 ms), sparse ones grow with the non-zeros (within 0.1 ms of the dense ones at 8 states).
DENSE_CLOSURE_STATES = 64


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


def epsilon_closure_rows(
    wfsa: WFSA,
    cap: int | None = None,
    env: Env | None = None,
    *,
    live: np.ndarray | None = None,
    useful: Callable[[], np.ndarray] | None = None,
    budget: int | None = None,
) -> ClosureRows:
    """The rows of the epsilon closure of ``wfsa``: ``E*`` (``cap=None``) or ``I + E + ... + E^cap`` for the
    Q x Q matrix ``E`` of its epsilon arcs (parallel arcs add); dense for the exact closure of at most
    ``DENSE_CLOSURE_STATES`` states (the rows then carry the matrix: ``ClosureRows.dense``), sparse otherwise.

    Args:
        live: a (Q,) boolean mask: the epsilon arcs from or to the other states are left out.
        useful: called only when the exact star diverges; gives the (Q,) mask of the states whose cycles count
            (those on a successful path of what is computed), and the closure is computed again without the
            other states' arcs. None: a divergence raises.
        budget: the most entries the rows may hold (None: no limit).

    Caution:
        Symbolic epsilon weights are evaluated in ``env``. The rows of the states outside ``live`` (or outside
        ``useful()`` after a divergence) are those of ``I``.

    Raises:
        ArgumentError: ``cap`` is neither None nor an integer >= 0.
        DivergenceError: the exact star diverges (on the ``useful`` states, when given); names a cycle.
        BudgetExceededError: the rows hold more than ``budget`` entries.
        WeightError: a symbolic epsilon weight that ``env`` does not determine.
    """
    check_epsilon_cap(cap, "epsilon_closure_rows")
    if cap is None and wfsa.num_states <= DENSE_CLOSURE_STATES:
        rows = where_useful(lambda mask: _dense(wfsa, cap, env, mask), useful, live)
        if budget is not None and rows.size > budget:
            raise BudgetExceededError(f"the epsilon closure holds more than {budget} entries")
        return rows
    return where_useful(lambda mask: _sparse(wfsa, cap, env, mask, budget), useful, live)


def _dense(wfsa: WFSA, cap: int | None, env: Env | None, live: np.ndarray | None) -> ClosureRows:
    matrix = closure_matrix(wfsa.epsilon_matrix(env), wfsa.semiring, cap, wfsa.states, live=live)
    return ClosureRows.from_dense(wfsa.semiring, matrix)


def _sparse(wfsa: WFSA, cap: int | None, env: Env | None, live: np.ndarray | None, budget: int | None) -> ClosureRows:
    src, dst, weight, names = _epsilon_arcs(wfsa, env)
    if live is not None:
        keep = live[src] & live[dst]
        src, dst, weight = src[keep], dst[keep], weight[keep]
    return epsilon_closure(wfsa.semiring, wfsa.num_states, src, dst, weight, names, cap, budget)


def _epsilon_arcs(wfsa: WFSA, env: Env | None) -> tuple[IntArray, IntArray, np.ndarray, Any]:
    """The epsilon arcs of ``wfsa`` as arrays (sources, destinations, numeric weights) and its state names: from
    the arc store for constant weights, else from the arcs, symbolic weights evaluated in ``env``."""
    store = arc_store(wfsa)
    if store is not None:
        eps = store.arcs_with_label(EPSILON_ID)
        return store.src[eps], store.dst[eps], store.weight[eps], store.names
    s = wfsa.semiring
    arcs = [(i, arc) for i, arc in enumerate(wfsa.arcs) if not arc.label.consumes]
    src = np.fromiter((arc.src for _, arc in arcs), dtype=np.int64, count=len(arcs))
    dst = np.fromiter((arc.dst for _, arc in arcs), dtype=np.int64, count=len(arcs))
    values = [wfsa.numeric(arc.weight, None, env, f"arc {i}") for i, arc in arcs]
    weight: np.ndarray = np.asarray(values, dtype=s.numpy_dtype).reshape(len(arcs))
    return src, dst, weight, wfsa.states
