"""Weight pushing (Mohri): move weights towards the initial or the final states without changing any score.

With ``d(q)`` the shortest distance from ``q`` to the final states (pushing towards the initial states), every
arc ``p -x/w-> q`` becomes ``p -x/divide(w ⊗ d(q), d(p))-> q``, final weights ``divide(ρ_q, d(q))`` and initial
weights ``λ_q ⊗ d(q)``: the weights leaving each state then sum to one. Pushing towards the final states is the
same on the reversed automaton, with the distances from the initial states.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from kleene.errors import AlphabetError, ArgumentError, WeightError

from .labels import AnySymbol, Label, NoneOf, OneOf, Sym, SymbolTable
from .ops import bind, trim
from .sparse import useful_states
from .star import closure_matrix
from .weights import Env
from .wfsa import WFSA

Towards = Literal["initial", "final"]


def _symbol_count(label: Label, alphabet: SymbolTable | None) -> int | None:
    """How many symbols ``label`` reads (epsilon: one move); None for a predicate with no alphabet to count."""
    if not label.consumes or isinstance(label, Sym):
        return 1
    if isinstance(label, OneOf):
        return len(label.members) if alphabet is None else sum(1 for s in label.members if s in alphabet)
    if alphabet is None:
        return None
    if isinstance(label, AnySymbol):
        return len(alphabet)
    if isinstance(label, NoneOf):
        return len(alphabet) - sum(1 for s in label.members if s in alphabet)
    return len(label.symbols(alphabet))


def state_distances(a: WFSA, towards: Towards = "final") -> list[Any]:
    """Per state, the semiring sum of the weights of all paths to the final states (``towards="final"``, final
    weights included) or from the initial states (``towards="initial"``, initial weights included).

    An arc with a predicate label counts once per symbol it reads. Computed by the sparse engine's shortest
    distance (strongly connected components in topological order, ``kleene.automata.sparse.state_distances``) in
    time about linear in the arcs; automata with predicate labels use the dense Kleene star of the one-step matrix
    (``closure_matrix``, cubic in the number of states). Only cycles on the paths summed can diverge.

    Caution:
        Needs numeric weights. In a non-idempotent semiring (real, log) predicate labels need the alphabet.

    Raises:
        DivergenceError: a sum that diverges (a cycle of weight >= 1 in real/log, a negative cycle in min-plus).
        AlphabetError: a predicate label without alphabet in a non-idempotent semiring.
        WeightError: symbolic weights.
    """
    if towards not in ("initial", "final"):
        raise ArgumentError(f"towards must be 'initial' or 'final', got {towards!r}")
    if a.is_symbolic:
        raise WeightError("state_distances needs numeric weights; bind(a, env) first")
    from .sparse import arc_store
    from .sparse import state_distances as sparse_distances

    store = arc_store(a)
    if store is not None and not store.predicates:
        distances: list[Any] = sparse_distances(store, towards).tolist()
        return distances
    s = a.semiring
    n = a.num_states
    step: np.ndarray = s.zeros((n, n))
    for i, arc in enumerate(a.arcs):
        count = _symbol_count(arc.label, a.alphabet)
        if count is None:
            if not s.idempotent:
                raise AlphabetError(
                    f"arc {i} has the predicate label {arc.label}; summing over its symbols needs the alphabet"
                )
            count = 1
        if count == 0:
            continue
        weight = s.sum(s.full((count,), arc.weight), axis=0) if count > 1 else arc.weight
        step[arc.src, arc.dst] = s.plus(step[arc.src, arc.dst], weight)
    # only the states these paths pass through: those reached from the initial (or reaching the final) states
    src, dst = np.nonzero(step != s.zero)
    start = a.vector(a.final if towards == "final" else a.initial) != s.zero
    if towards == "final":
        src, dst = dst, src
    live = useful_states(src, dst, n, start, np.ones(n, dtype=bool))
    star = closure_matrix(step, s, None, a.states, live=live)
    if towards == "final":
        final = a.vector(a.final)
        return [_plain(v) for v in s.sum(s.times(star, final[None, :]), axis=1)]
    initial = a.vector(a.initial)
    return [_plain(v) for v in s.sum(s.times(initial[:, None], star), axis=0)]


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic | np.ndarray) else value


def push(a: WFSA, towards: Towards = "initial", *, env: Env | None = None) -> WFSA:
    """An equivalent automaton whose weights are pushed towards the initial (or final) states.

    After pushing towards the initial states, the weights of the arcs and the final weight out of every state
    sum to one, and the total weight sits in the initial weights (with one initial state, the initial weight is
    the automaton's pathsum). The input is trimmed first (states on no successful path have no distance).

    Caution:
        Needs a semiring with division (all of kleene's) in which the distances converge. In the real semiring
        a useful state whose distance cancels to zero cannot be pushed. Symbolic weights are bound in ``env``.

    Raises:
        ArgumentError: ``towards`` is neither "initial" nor "final".
        WeightError: symbolic weights without ``env``; a state whose distance is zero (real weights cancelling).
        DivergenceError: the distances diverge.
        AlphabetError: see ``state_distances``.
    """
    if towards not in ("initial", "final"):
        raise ArgumentError(f"push: towards must be 'initial' or 'final', got {towards!r}")
    if a.is_symbolic:
        if env is None:
            raise WeightError("push: the automaton has symbolic weights; pass env= (or bind(a, env) first)")
        a = bind(a, env)
    a = trim(a)
    s = a.semiring
    from .sparse import array_store

    store = array_store(a)
    if store is not None:
        return _push_store(a, store, towards)
    d = state_distances(a, "final" if towards == "initial" else "initial")

    def divide(x: Any, q: int) -> Any:
        try:
            return s.divide(x, d[q])
        except WeightError:
            raise WeightError(f"push: the distance of state {a.state_name(q)} is zero, so it cannot be divided"
                              " out (weights cancel)") from None

    out = WFSA(s, a.alphabet, a.name)
    for name in a.states:
        out.add_state(name)
    for arc in a.arcs:
        if towards == "initial":
            weight = divide(s.times(arc.weight, d[arc.dst]), arc.src)
        else:
            weight = divide(s.times(d[arc.src], arc.weight), arc.dst)
        out.add_arc(arc.src, arc.dst, arc.label, weight)
    for q, w in a.initial.items():
        out.set_initial(q, s.times(w, d[q]) if towards == "initial" else divide(w, q))
    for q, w in a.final.items():
        out.set_final(q, divide(w, q) if towards == "initial" else s.times(d[q], w))
    return out


def _push_store(a: WFSA, store: Any, towards: Towards) -> WFSA:
    """``push`` of a trimmed constant-weight automaton without predicate labels, in arrays (the same operations as
    the loop above, elementwise)."""
    from .sparse import state_distances as sparse_distances
    from .sparse import with_weights

    s = a.semiring
    d = sparse_distances(store, "final" if towards == "initial" else "initial")
    zero = np.flatnonzero(d == s.zero)
    if zero.size:
        raise WeightError(f"push: the distance of state {a.state_name(int(zero[0]))} is zero, so it cannot be divided"
                          " out (weights cancel)")
    with np.errstate(invalid="ignore", over="ignore"):
        if towards == "initial":
            weight = s._divide(s.times(store.weight, d[store.dst]), d[store.src])
        else:
            weight = s._divide(s.times(d[store.src], store.weight), d[store.dst])
    plain = [float(x) for x in d.tolist()]
    if towards == "initial":
        initial = {q: _plain(s.times(w, plain[q])) for q, w in a.initial.items()}
        final = {q: _plain(s._divide(w, plain[q])) for q, w in a.final.items()}
    else:
        initial = {q: _plain(s._divide(w, plain[q])) for q, w in a.initial.items()}
        final = {q: _plain(s.times(plain[q], w)) for q, w in a.final.items()}
    return with_weights(a, store, np.asarray(weight, dtype=store.weight.dtype), initial, final)
