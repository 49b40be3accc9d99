"""Rational operations: union, concatenation, Kleene star and plus, intersection,
epsilon removal, trimming and reversal; ``bind`` turns symbolic weights into numbers.

Every operation is a free function that returns a new automaton and never
mutates its operands. Each is written once against the ``Semiring`` interface
and works with constant and symbolic weights alike (symbolic weights combine
with ``sym_times``/``sym_plus``). State names stay readable: binary operations
prefix them with the operand (``a.q0``, ``b.q0``), ``intersect`` pairs them
(``(q0,q1)``), unary operations keep them.

Alphabets: a predicate label (``ANY``, ``NoneOf``) ranges over its own
automaton's alphabet. When ``union``/``concat`` merge two different alphabets,
predicates are rewritten as ``OneOf`` sets so that they keep their meaning;
``intersect`` works over the common alphabet.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Hashable, Iterable

import numpy as np

from kleene.automata.algorithms import useful_mask
from kleene.automata.labels import EPSILON, AnySymbol, Label, NoneOf, OneOf, Sym, SymbolTable
from kleene.automata.labels import label_of as _label_of
from kleene.automata.labels import meet as _meet
from kleene.automata.semiring import Semiring, sympy_constant
from kleene.automata.sparse import EPSILON_ID, ClosureRows, arc_store, epsilon_closure, remove_epsilon_store
from kleene.automata.star import closure_where_useful as _closure_where_useful
from kleene.automata.weights import ALPHA, Env, Weight, is_symbolic
from kleene.automata.wfsa import WFSA, Arc
from kleene.errors import AlphabetError, DivergenceError, SemiringError

# ----------------------------------------------------------------------------------------
# Weights: constants through the semiring's operations, sympy through its symbolic ones


def _times(semiring: Semiring, *weights: Weight) -> Weight:
    """The semiring product of constant or symbolic weights (constant ones dropped from symbolic products)."""
    if any(is_symbolic(w) for w in weights):
        factors = [w for w in weights if is_symbolic(w) or w != semiring.one]
        return semiring.sym_times(*(sympy_constant(w) for w in factors))
    product: Weight = semiring.one
    for w in weights:
        product = semiring.times(product, w)
    return product


def _plus(semiring: Semiring, *weights: Weight) -> Weight:
    """The semiring sum of constant or symbolic weights (constant zeros dropped from symbolic sums)."""
    if any(is_symbolic(w) for w in weights):
        terms = [w for w in weights if is_symbolic(w) or w != semiring.zero]
        return semiring.sym_plus(*(sympy_constant(w) for w in terms))
    total: Weight = semiring.zero
    for w in weights:
        total = semiring.plus(total, w)
    return total


def _is_zero(semiring: Semiring, weight: Weight) -> bool:
    """Whether ``weight`` is the constant zero (symbolic weights never count as zero)."""
    return not is_symbolic(weight) and semiring.is_zero(weight)


# ----------------------------------------------------------------------------------------
# Operands: semirings, alphabets, labels


def _same_semiring(a: WFSA, b: WFSA, operation: str) -> Semiring:
    """The operands' common semiring.

    Raises:
        SemiringError: the operands are over different semirings.
    """
    if a.semiring is not b.semiring:
        raise SemiringError(
            f"{operation}: the operands are over different semirings ({a.semiring.name} and {b.semiring.name}); "
            "build both over the same one"
        )
    return a.semiring


def _copy_table(table: SymbolTable | None) -> SymbolTable | None:
    """A fresh table, so that a result never shares a mutable alphabet with an operand."""
    return None if table is None else SymbolTable(table, epsilon=table.epsilon)


def _mentioned_symbols(wfsa: WFSA) -> list[Hashable]:
    """The alphabet, or when there is none the symbols its labels name (first use first)."""
    if wfsa.alphabet is not None:
        return list(wfsa.alphabet)
    found: dict[Hashable, None] = {}
    for arc in wfsa.arcs:
        if isinstance(arc.label, Sym):
            found.setdefault(arc.label.symbol)
        elif isinstance(arc.label, OneOf):
            for symbol in sorted(arc.label.members, key=str):
                found.setdefault(symbol)
    return list(found)


def merged_alphabet(a: WFSA, b: WFSA, operation: str) -> SymbolTable | None:
    """The union of the operands' alphabets (``a``'s ids first), or None when neither has one.

    Raises:
        AlphabetError: a symbol of one operand is the epsilon marker of the other's table.
    """
    tables = [t for t in (a.alphabet, b.alphabet) if t is not None]
    if not tables:
        return None
    merged = SymbolTable(epsilon=tables[0].epsilon)
    for side, operand in (("first", a), ("second", b)):
        for symbol in _mentioned_symbols(operand):
            try:
                merged.add(symbol)
            except AlphabetError as exc:
                raise AlphabetError(
                    f"{operation}: cannot merge the alphabet of the {side} operand into a common one: {exc}"
                ) from None
    return merged


def _common_alphabet(a: WFSA, b: WFSA) -> SymbolTable | None:
    """The symbols both operands can read (``a``'s order), or None when neither has an alphabet."""
    if a.alphabet is None or b.alphabet is None:
        return _copy_table(a.alphabet if b.alphabet is None else b.alphabet)
    theirs = b.alphabet
    return SymbolTable((s for s in a.alphabet if s in theirs), epsilon=a.alphabet.epsilon)


def _restrict(label: Label, alphabet: SymbolTable | None) -> Label | None:
    """``label`` limited to ``alphabet``: None when it then accepts no symbol."""
    if not label.consumes or alphabet is None:
        return label
    if isinstance(label, Sym):
        return label if label.symbol in alphabet else None
    if isinstance(label, (AnySymbol, NoneOf)):
        return label if any(label.matches(s) for s in alphabet) else None
    return _label_of(s for s in alphabet if label.matches(s))


def _confine(label: Label, own: SymbolTable) -> Label | None:
    """A predicate of an automaton over ``own`` as the ``OneOf`` set it accepts there.

    Used when a merged alphabet adds symbols ``own`` lacks, which ``ANY`` or
    ``NoneOf`` would otherwise start to accept.
    """
    if not label.consumes or isinstance(label, Sym):
        return label
    return _label_of(s for s in own if label.matches(s))


def _combined_name(template: str, *operands: WFSA) -> str | None:
    names = [w.name for w in operands]
    return template.format(*names) if all(names) else None


# ----------------------------------------------------------------------------------------
# Building results


def _fresh_name(base: str, taken: Collection[str]) -> str:
    """``base``, primed until it differs from every name in ``taken``."""
    name = base
    while name in taken:
        name += "'"
    return name


def _embed(operand: WFSA, out: WFSA, prefix: str = "") -> int:
    """Copy ``operand``'s states (names prefixed) and arcs into ``out``; return the index offset.

    Predicates are confined to the operand's alphabet when ``out``'s is larger
    (see ``_confine``); zero-weight arcs are dropped; initial and final weights are
    left to the caller.
    """
    own, target = operand.alphabet, out.alphabet
    widened = own is not None and target is not None and any(s not in own for s in target)
    offset = out.num_states
    for name in operand.states:
        out.add_state(prefix + name)
    for arc in operand.arcs:
        label = _confine(arc.label, own) if widened and own is not None else arc.label
        if label is not None and not _is_zero(out.semiring, arc.weight):
            out.add_arc(arc.src + offset, arc.dst + offset, label, arc.weight)
    return offset


def _set_weights(out: WFSA, weights: dict[int, Weight], offset: int, final: bool) -> None:
    setter = out.set_final if final else out.set_initial
    for q, w in weights.items():
        setter(q + offset, w)


# ----------------------------------------------------------------------------------------
# The operations


def union(a: WFSA, b: WFSA) -> WFSA:
    """The automaton scoring every string ``a(x) ⊕ b(x)`` (states ``a.*`` and ``b.*``).

    Raises:
        SemiringError: ``a`` and ``b`` are over different semirings.
        AlphabetError: their alphabets cannot be merged.
    """
    semiring = _same_semiring(a, b, "union")
    out = WFSA(semiring, merged_alphabet(a, b, "union"), _combined_name("({} ∪ {})", a, b))
    for prefix, operand in (("a.", a), ("b.", b)):
        offset = _embed(operand, out, prefix)
        _set_weights(out, operand.initial, offset, final=False)
        _set_weights(out, operand.final, offset, final=True)
    return out


def concat(a: WFSA, b: WFSA) -> WFSA:
    """The automaton scoring ``x`` as ``⊕ over x = uv of a(u) ⊗ b(v)`` (states ``a.*`` and ``b.*``).

    Each final state of ``a`` is joined to each initial state of ``b`` by an
    epsilon arc weighted ``rho ⊗ lambda``.

    Raises:
        SemiringError: ``a`` and ``b`` are over different semirings.
        AlphabetError: their alphabets cannot be merged.
    """
    semiring = _same_semiring(a, b, "concat")
    out = WFSA(semiring, merged_alphabet(a, b, "concat"), _combined_name("({} · {})", a, b))
    offset_a = _embed(a, out, "a.")
    offset_b = _embed(b, out, "b.")
    _set_weights(out, a.initial, offset_a, final=False)
    _set_weights(out, b.final, offset_b, final=True)
    _join_finals_to_initials(out, a.final, offset_a, b.initial, offset_b)
    return out


def _join_finals_to_initials(
    out: WFSA, final: dict[int, Weight], final_offset: int, initial: dict[int, Weight], initial_offset: int
) -> None:
    """Epsilon arcs from every final state to every initial state, weighted ``rho ⊗ lambda``."""
    for f, rho in final.items():
        for i, lam in initial.items():
            weight = _times(out.semiring, rho, lam)
            if not _is_zero(out.semiring, weight):
                out.add_arc(f + final_offset, i + initial_offset, EPSILON, weight)


def kleene_plus(a: WFSA) -> WFSA:
    """The automaton scoring ``x`` as ``⊕ over k >= 1 and x = x1..xk of a(x1) ⊗ ... ⊗ a(xk)``.

    Built on ``a``'s own states by epsilon arcs from each final state back to each
    initial state (weight ``rho ⊗ lambda``).

    Note:
        When ``a`` accepts the empty string the sum over factorizations is
        infinite: scoring with exact epsilon closure then needs ``a(ε)*`` to
        converge, and raises ``DivergenceError`` otherwise.
    """
    out = WFSA(a.semiring, _copy_table(a.alphabet), _combined_name("({})+", a))
    _embed(a, out)
    _set_weights(out, a.initial, 0, final=False)
    _set_weights(out, a.final, 0, final=True)
    _join_finals_to_initials(out, a.final, 0, a.initial, 0)
    return out


def kleene_star(a: WFSA) -> WFSA:
    """``ε ⊕ kleene_plus(a)``: adds one state ``star`` that is initial and final with weight one.

    Note:
        See ``kleene_plus`` on automata that accept the empty string.
    """
    out = kleene_plus(a)
    out.name = _combined_name("({})*", a)
    start = out.add_state(_fresh_name("star", out.states))
    out.set_initial(start)
    out.set_final(start)
    return out


def reverse(a: WFSA) -> WFSA:
    """The automaton scoring ``x`` as ``a`` scores ``x`` reversed: arcs flipped, initial and final swapped.

    Note:
        Needs a commutative semiring (all of kleene's are). Every epsilon run
        stays one run, so scores agree with any ``epsilon_cap`` too.
    """
    out = WFSA(a.semiring, _copy_table(a.alphabet), _combined_name("reverse({})", a))
    for name in a.states:
        out.add_state(name)
    for arc in a.arcs:
        out.add_arc(arc.dst, arc.src, arc.label, arc.weight)
    _set_weights(out, a.final, 0, final=False)
    _set_weights(out, a.initial, 0, final=True)
    return out


def _is_void(label: Label, alphabet: SymbolTable | None) -> bool:
    """Whether a consuming label can never match a symbol (an empty ``OneOf``, a full ``NoneOf``)."""
    if isinstance(label, OneOf) and not label.members:
        return True
    return label.consumes and alphabet is not None and _restrict(label, alphabet) is None


def _useful_arcs(a: WFSA) -> list[Arc]:
    return [arc for arc in a.arcs if not _is_zero(a.semiring, arc.weight) and not _is_void(arc.label, a.alphabet)]


def _reachable(starts: Iterable[int], successors: dict[int, list[int]]) -> set[int]:
    seen = set(starts)
    stack = list(seen)
    while stack:
        for nxt in successors.get(stack.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def trim(a: WFSA) -> WFSA:
    """Keep only states on some successful path; drop zero-weight arcs and arcs no symbol can take.

    A state survives when it is reachable from a state with non-zero initial
    weight and reaches a state with non-zero final weight, through useful arcs.
    Surviving states keep their names and relative order.

    Note:
        Symbolic weights are never taken for zero.
    """
    from .sparse import array_store, trim_store

    store = array_store(a)
    if store is not None:
        return trim_store(a, store)
    s = a.semiring
    arcs = _useful_arcs(a)
    forward: dict[int, list[int]] = {}
    backward: dict[int, list[int]] = {}
    for arc in arcs:
        forward.setdefault(arc.src, []).append(arc.dst)
        backward.setdefault(arc.dst, []).append(arc.src)
    starts = [q for q, w in a.initial.items() if not _is_zero(s, w)]
    ends = [q for q, w in a.final.items() if not _is_zero(s, w)]
    keep = sorted(_reachable(starts, forward) & _reachable(ends, backward))
    index = {q: i for i, q in enumerate(keep)}
    out = WFSA(s, _copy_table(a.alphabet), a.name)
    for q in keep:
        out.add_state(a.state_name(q))
    for arc in arcs:
        if arc.src in index and arc.dst in index:
            out.add_arc(index[arc.src], index[arc.dst], arc.label, arc.weight)
    for q in keep:
        if q in a.initial and not _is_zero(s, a.initial[q]):
            out.set_initial(index[q], a.initial[q])
        if q in a.final and not _is_zero(s, a.final[q]):
            out.set_final(index[q], a.final[q])
    return out


#: Up to this many states the exact epsilon closure is the dense ``closure_matrix`` (faster there: measured 0.1-3 ms
#: against the sparse closure's 1.4-3.8 ms at 5-50 states, in every semiring); above it, ``sparse.epsilon_closure``.
DENSE_CLOSURE_STATES = 64


def remove_epsilon(a: WFSA, cap: int | None = None, env: Env | None = None) -> WFSA:
    """An equivalent automaton without epsilon arcs, on the same states.

    With ``C = closure_matrix(E, cap)`` of the epsilon matrix ``E``, the initial
    weights become ``lambda ⊗ C`` and each consuming arc ``p -x/w-> q`` becomes
    arcs ``p -x/(w ⊗ C[q, r])-> r``; parallel arcs with the same label are
    plus-merged (the order of the resulting arcs is unspecified). ``cap=k``
    reproduces ``score(..., epsilon_cap=k)`` exactly (at most k epsilons in a row
    at the start and after each symbol).

    The exact closure (``cap=None``) is sparse (``sparse.epsilon_closure``: strongly
    connected components of the epsilon arcs in reverse topological order, each
    cyclic one's block star by ``closure_matrix``), and with constant weights the
    arcs are built as arrays into an arc store: time and memory grow with the
    closure's non-zeros and the arcs produced, not with Q². ``cap=k``, and
    automata of at most ``DENSE_CLOSURE_STATES`` states, use the dense Q x Q
    closure (the same values up to rounding).

    Note:
        Scores are preserved, single best paths are not (the closure sums paths).
        Epsilon weights must be numeric: symbolic ones are evaluated in ``env``.
        States reachable only through epsilon arcs stay, unreachable; ``trim``
        removes them.

    Raises:
        DivergenceError: the exact closure (``cap=None``) diverges; names a cycle.
        WeightError: a symbolic epsilon weight that ``env`` does not determine.
    """
    s = a.semiring
    if not a.has_epsilons:
        out = WFSA(s, _copy_table(a.alphabet), a.name)
        _embed(a, out)
        _set_weights(out, a.initial, 0, final=False)
        _set_weights(out, a.final, 0, final=True)
        return out
    if cap is not None or a.num_states <= DENSE_CLOSURE_STATES:
        closure = _dense_rows(s, _closure_where_useful(a, a.epsilon_matrix(env), cap, lambda: useful_mask(a)))
    else:
        closure = _sparse_closure(a, env)
    store = arc_store(a)
    if store is not None:
        return remove_epsilon_store(a, store, closure)
    out = WFSA(s, _copy_table(a.alphabet), a.name)
    for name in a.states:
        out.add_state(name)
    reach: dict[int, list[tuple[int, Weight]]] = {}

    def row(q: int) -> list[tuple[int, Weight]]:
        if q not in reach:
            reach[q] = list(zip(*closure.row(q)))
        return reach[q]

    initial: dict[int, Weight] = {}
    for p, lam in a.initial.items():
        for r, c in row(p):
            initial[r] = _plus(s, initial[r], _times(s, lam, c)) if r in initial else _times(s, lam, c)
    merged: dict[tuple[int, int, Label], Weight] = {}
    for arc in a.arcs:
        if not arc.label.consumes:
            continue
        for r, c in row(arc.dst):
            key = (arc.src, r, arc.label)
            weight = _times(s, arc.weight, c)
            merged[key] = _plus(s, merged[key], weight) if key in merged else weight
    for (src, dst, label), weight in merged.items():
        if not _is_zero(s, weight):
            out.add_arc(src, dst, label, weight)
    _set_weights(out, {q: w for q, w in initial.items() if not _is_zero(s, w)}, 0, final=False)
    _set_weights(out, a.final, 0, final=True)
    return out


def _sparse_closure(a: WFSA, env: Env | None) -> ClosureRows:
    """The exact epsilon closure of ``a`` as sparse rows; when it diverges, the closure of the epsilon arcs between
    useful states (cycles off every successful path may diverge, as in ``_closure_where_useful``).

    Raises:
        DivergenceError: a cycle of useful states whose star diverges (named).
        WeightError: a symbolic epsilon weight that ``env`` does not determine.
    """
    s = a.semiring
    store = arc_store(a)
    if store is not None:
        eps = store.arcs_with_label(EPSILON_ID)
        src, dst, weight = store.src[eps], store.dst[eps], store.weight[eps]
    else:
        arcs = [(i, arc) for i, arc in enumerate(a.arcs) if not arc.label.consumes]
        src = np.fromiter((arc.src for _, arc in arcs), dtype=np.int64, count=len(arcs))
        dst = np.fromiter((arc.dst for _, arc in arcs), dtype=np.int64, count=len(arcs))
        values = [a.numeric(arc.weight, None, env, f"arc {i}") for i, arc in arcs]
        weight = np.asarray(values, dtype=s.numpy_dtype).reshape(len(arcs))
    try:
        return epsilon_closure(s, a.num_states, src, dst, weight, a.states)
    except DivergenceError:
        useful = useful_mask(a)
        keep = useful[src] & useful[dst]
        return epsilon_closure(s, a.num_states, src[keep], dst[keep], weight[keep], a.states)


def _dense_rows(semiring: Semiring, matrix: np.ndarray) -> ClosureRows:
    """The non-zeros of a dense closure matrix as sparse rows."""
    matrix = np.asarray(matrix)
    rows, cols = np.nonzero(matrix != semiring.zero)
    length = np.bincount(rows, minlength=matrix.shape[0]).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    return ClosureRows(start, length, cols.astype(np.int64), matrix[rows, cols])


def intersect(a: WFSA, b: WFSA) -> WFSA:
    """The automaton scoring every string ``a(x) ⊗ b(x)``: the product construction.

    States are pairs ``(p,q)`` reachable from the initial pairs. Consuming arcs
    pair up when their labels overlap (predicates are intersected as predicates:
    ``ANY ∩ x = x``, ``OneOf(A) ∩ NoneOf(B) = OneOf(A - B)``, ...), over the
    symbols both alphabets share. Epsilon arcs go through the epsilon-sequencing
    filter: between two symbols, ``a``'s epsilons come first, then ``b``'s,
    so each pair of epsilon runs is counted exactly once; states where ``b`` has
    started its run are named ``(p,q)ε``.

    Note:
        Needs a commutative semiring (all of kleene's are). With ``epsilon_cap``
        the result counts the epsilons of both operands in one run.

    Raises:
        SemiringError: ``a`` and ``b`` are over different semirings.
    """
    s = _same_semiring(a, b, "intersect")
    alphabet = _common_alphabet(a, b)
    out = WFSA(s, alphabet, _combined_name("({} ∩ {})", a, b))
    moves_a, moves_b = _moves_by_state(a), _moves_by_state(b)
    index: dict[tuple[int, int, bool], int] = {}
    names: set[str] = set()
    pending: deque[tuple[int, int, bool]] = deque()

    def pair(p: int, q: int, b_moved: bool) -> int:
        key = (p, q, b_moved)
        if key not in index:
            name = _fresh_name(f"({a.state_name(p)},{b.state_name(q)})" + ("ε" if b_moved else ""), names)
            names.add(name)
            index[key] = out.add_state(name)
            pending.append(key)
        return index[key]

    for p, lam_a in a.initial.items():
        for q, lam_b in b.initial.items():
            weight = _times(s, lam_a, lam_b)
            if not _is_zero(s, weight):
                out.set_initial(pair(p, q, False), weight)
    while pending:
        p, q, b_moved = pending.popleft()
        here = index[(p, q, b_moved)]
        if p in a.final and q in b.final:
            out.set_final(here, _times(s, a.final[p], b.final[q]))
        for x in moves_a[p].consuming:
            for y in moves_b[q].consuming:
                label = _meet(x.label, y.label)
                label = None if label is None else _restrict(label, alphabet)
                if label is not None:
                    out.add_arc(here, pair(x.dst, y.dst, False), label, _times(s, x.weight, y.weight))
        if not b_moved:
            for x in moves_a[p].epsilon:
                out.add_arc(here, pair(x.dst, q, False), EPSILON, x.weight)
        for y in moves_b[q].epsilon:
            out.add_arc(here, pair(p, y.dst, True), EPSILON, y.weight)
    return out


class _Moves:
    """The useful arcs leaving one state, split by whether they consume."""

    def __init__(self) -> None:
        self.consuming: list[Arc] = []
        self.epsilon: list[Arc] = []


def _moves_by_state(a: WFSA) -> list[_Moves]:
    moves = [_Moves() for _ in range(a.num_states)]
    for arc in _useful_arcs(a):
        (moves[arc.src].consuming if arc.label.consumes else moves[arc.src].epsilon).append(arc)
    return moves


# ----------------------------------------------------------------------------------------
# Binding symbolic weights


def bind(a: WFSA, env: Env, alphabet: Iterable[Hashable] | None = None) -> WFSA:
    """``a`` with every symbolic weight evaluated in ``env``: a constant automaton with the same scores.

    An arc whose weight reads the consumed symbol (``mu(α)``) becomes one ``Sym`` arc per symbol its
    label admits, each with that symbol's value; other weights are evaluated once and keep their label.
    ``alphabet`` (default: ``a``'s own) is the result's alphabet, over which predicates are expanded.

    Raises:
        AlphabetError: a predicate label with a symbol-dependent weight and no alphabet to expand it over.
        WeightError: a weight that ``env`` does not determine (naming the arc).
    """
    table = SymbolTable(list(alphabet)) if alphabet is not None else _copy_table(a.alphabet)
    out = WFSA(a.semiring, table, a.name)
    for name in a.states:
        out.add_state(name)
    for index, arc in enumerate(a.arcs):
        where = f"arc {index} ({a.state_name(arc.src)} -> {a.state_name(arc.dst)}, {arc.label})"
        if is_symbolic(arc.weight) and arc.label.consumes and ALPHA in getattr(arc.weight, "free_symbols", ()):
            try:
                symbols = arc.label.symbols(table)
            except AlphabetError as exc:
                raise AlphabetError(f"{where}: {exc}") from None
            for symbol in symbols:
                out.add_arc(arc.src, arc.dst, Sym(symbol), a.numeric(arc.weight, symbol, env, where))
        else:
            out.add_arc(arc.src, arc.dst, arc.label, a.numeric(arc.weight, None, env, where))
    for q, w in a.initial.items():
        out.set_initial(q, a.numeric(w, None, env, f"initial weight of {a.state_name(q)}"))
    for q, w in a.final.items():
        out.set_final(q, a.numeric(w, None, env, f"final weight of {a.state_name(q)}"))
    return out
