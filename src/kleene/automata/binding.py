"""Binding symbolic weights: an automaton's weights evaluated in an environment, as a constant automaton.

The algorithms run on constant weights (the arc store); an automaton with symbolic weights is bound first, and
``bind_with_origins`` says which arc of the original each bound arc stands for (to name arcs in results).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from kleene.automata.labels import Sym, SymbolTable
from kleene.automata.weights import ALPHA, Env, is_symbolic
from kleene.automata.wfsa import WFSA
from kleene.errors import AlphabetError


def bind(a: WFSA, env: Env, alphabet: Iterable[Hashable] | None = None) -> WFSA:
    """``a`` with every symbolic weight evaluated in ``env``: a constant automaton with the same scores.

    An arc whose weight reads the consumed symbol (``mu(α)``) becomes one ``Sym`` arc per symbol its
    label admits, each with that symbol's value; other weights are evaluated once and keep their label.
    ``alphabet`` (default: ``a``'s own) is the result's alphabet, over which predicates are expanded.

    Raises:
        AlphabetError: a predicate label with a symbol-dependent weight and no alphabet to expand it over.
        WeightError: a weight that ``env`` does not determine (naming the arc).
    """
    return bind_with_origins(a, env, alphabet)[0]


def bind_with_origins(a: WFSA, env: Env | None, alphabet: Iterable[Hashable] | None = None) -> tuple[WFSA, list[int]]:
    """``bind(a, env, alphabet)`` and, per arc of the result, the index of the arc of ``a`` it comes from (the
    arcs keep their order: an expanded arc's copies stand where it stood).

    Raises:
        As ``bind``.
    """
    table = SymbolTable(list(alphabet)) if alphabet is not None else (
        None if a.alphabet is None else SymbolTable(a.alphabet, epsilon=a.alphabet.epsilon))
    out = WFSA(a.semiring, table, a.name)
    origins: list[int] = []
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
                origins.append(index)
        else:
            out.add_arc(arc.src, arc.dst, arc.label, a.numeric(arc.weight, None, env, where))
            origins.append(index)
    for q, w in a.initial.items():
        out.set_initial(q, a.numeric(w, None, env, f"initial weight of {a.state_name(q)}"))
    for q, w in a.final.items():
        out.set_final(q, a.numeric(w, None, env, f"final weight of {a.state_name(q)}"))
    return out, origins
