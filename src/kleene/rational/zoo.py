"""The zoo: recurrences from the papers, written in the recurrence language (no automata here).

Every entry is a function returning a ``Recurrence``; ``prove`` builds the automata.
``ZOO`` maps the command-line names to them, ``REFUSED`` lists the entries that
must be refused. Input functions stand for one hidden unit's input-dependent
quantities (``f(x_t)`` is ``[f_t]_i``); their ``meaning`` records the paper's formula.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import sympy

from kleene.rational.recurrence import PAPER_SEMIRING, Recurrence, RecurrenceError, sigmoid

DEFAULT_ALPHABET = ("a", "b", "c")


def _size(entry: str, name: str, value: Any) -> int:
    """``value`` checked to be an integer >= 1 (not a bool).

    Raises:
        RecurrenceError: anything else, naming the zoo entry, the argument and the value.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RecurrenceError(f"{entry} needs {name} to be an integer >= 1, got {value!r}")
    return value


def _alphabet(entry: str, alphabet: Any) -> list[Hashable]:
    """``alphabet`` checked to be a non-empty list (or tuple) of hashable symbols; a string is refused (is "ab" one
    symbol or two?).

    Raises:
        RecurrenceError: anything else.
    """
    if isinstance(alphabet, (str, bytes)) or not isinstance(alphabet, Sequence) or not alphabet:
        raise RecurrenceError(f"{entry} needs alphabet to be a non-empty list of symbols, got {alphabet!r}")
    if not all(isinstance(symbol, Hashable) for symbol in alphabet):
        raise RecurrenceError(f"{entry}: alphabet symbols must be hashable, got {list(alphabet)!r}")
    return list(alphabet)


def _gated_unit(name: str, doc: str, meaning_u: str, with_nonlinearity: bool = False) -> Recurrence:
    """c_t = f_t ⊙ c_{t−1} + (1 − f_t) ⊙ g_t: Example 6 and its relatives (automaton B)."""
    rec = Recurrence(name, "real", dims="d", doc=doc)
    c = rec.state("c", init=0)
    f = rec.input("f", meaning="σ(W_f v_t + b_f)_i")
    g = rec.input("g", meaning=meaning_u)
    rec.update(c, f * c + (1 - f) * g)
    rec.output("c", c)
    return rec


def example6() -> Recurrence:
    return _gated_unit("example-6", "Example 6 (rational-recurrences §3.1, Eq. 5)", "g(W_u v_t + b_u)_i")


def sru() -> Recurrence:
    return _gated_unit("sru", "SRU as analysed in the paper (Lei et al. 2017b): c_t = f⊙c + (1−f)⊙W x_t", "(W x_t)_i")


def t_rnn() -> Recurrence:
    return _gated_unit("t-rnn", "T-RNN (Balduzzi & Ghifary 2016): h_t = f⊙h + (1−f)⊙z_t", "(W_z x_t)_i")


def scrn() -> Recurrence:
    """SCRN's slow context units (Mikolov et al. 2014): s_t = (1 − a) B x_t + a s_{t−1}."""
    rec = Recurrence("scrn", "real", dims="d", doc="SCRN context units: s_t = (1−a)·B x_t + a·s_{t−1}, a constant")
    s = rec.state("s", init=0)
    b = rec.input("b", meaning="(B x_t)_i")
    a = rec.constant("a")
    rec.update(s, a * s + (1 - a) * b)
    rec.output("s", s)
    return rec


def rrnn_b() -> Recurrence:
    """RRNN(B) (Appendix D, Eq. 23) in the real semiring; its max-plus form (Example 15) is ``rrnn_b_maxplus``."""
    rec = Recurrence("rrnn-b", "real", dims="d", doc="RRNN(B), Appendix D Eq. 23a-c")
    c = rec.state("c", init=0)
    f = rec.input("f", meaning="σ(W_f v_t + b_f)_i")
    w = rec.input("w", meaning="(W_u v_t)_i")
    rec.update(c, f * c + (1 - f) * w)
    rec.output("c", c)
    return rec


def rrnn_b_maxplus() -> Recurrence:
    rec = Recurrence("rrnn-b-maxplus", "max-plus", dims="d", doc="RRNN(B)_m+, Example 15 / Eq. 24a-c")
    c = rec.state("c")  # max-plus zero: -inf
    f = rec.input("f", meaning="log σ(W_f v_t + b_f)_i")
    u = rec.input("u", meaning="(W_u v_t)_i")
    rec.update(c, sympy.Max(f + c, u))
    rec.output("c", c)
    return rec


def rrnn_c() -> Recurrence:
    rec = Recurrence("rrnn-c", "real", dims="d", doc="RRNN(C), Appendix D Eq. 25a-d (§4.2, Fig. 2)")
    c1, c2 = rec.states("c1 c2", init=0)
    f1, f2 = rec.input("f1", meaning="σ(W_f1 v_t + b_f1)_i"), rec.input("f2", meaning="σ(W_f2 v_t + b_f2)_i")
    w1, w2 = rec.input("w1", meaning="(W_u1 v_t)_i"), rec.input("w2", meaning="(W_u2 v_t)_i")
    rec.update(c1, c1 * f1 + (1 - f1) * w1)
    rec.update(c2, c2 * f2 + c1 * (1 - f2) * w2)
    rec.output("c", c2)
    return rec


def rrnn_f() -> Recurrence:
    """RRNN(F) (§5.1 Eq. 19; Eq. 26g's ``p1 ⊙ c^(2)`` is a typo for ``p1 ⊙ c^(1)``, as Eq. 19c shows)."""
    rec = Recurrence("rrnn-f", "real", dims="d", doc="RRNN(F), §5.1 Eq. 19-20 / Appendix D Eq. 26 (Fig. 4)")
    c1, c2 = rec.states("c1 c2", init=0)
    f1, f2 = rec.input("f1", meaning="σ(W_f1 v_t + b_f1)_i"), rec.input("f2", meaning="σ(W_f2 v_t + b_f2)_i")
    w1, w2 = rec.input("w1", meaning="(W_u1 v_t)_i"), rec.input("w2", meaning="(W_u2 v_t)_i")
    r, p1, p2 = rec.constants("r p1 p2")
    u1, u2 = (1 - f1) * w1, (1 - f2) * w2
    rec.update(c1, c1 * f1 + u1)
    rec.update(c2, c2 * f2 + (c1 + r) * u2)
    rec.output("c", p1 * c1 + p2 * c2)
    return rec


RRNN_KINDS = ("B", "C", "F")


def _admitted(rec: Recurrence, gate: Any, value: Any, complement: str, lags: int = 0) -> Any:
    """What a gated cell admits of ``value`` in ``rec``'s semiring: ``n ⊗ value`` with ``n`` the complement gate
    1 − f as an element (input ``complement``) where ⊕ sums, ``value`` as it is where ⊕ selects (Rational
    Recurrences §5.2: max-plus has no 1 − f). ``gate`` names the gate, for the input's meaning."""
    if rec.ring.best:
        return value
    g = rec.input(complement, lags=lags, meaning=f"1 − {gate} as an element (σ of the negated pre-activation)")
    return rec.times(g, value)


def rrnn_semiring(kind: str = "F", semiring: str = "log") -> Recurrence:
    """RRNN(``kind``) (B, C or F) in any semiring, as ``kleene.nn``'s ``RRNNLayer(kind, semiring=...)`` runs it:
    the gates ``f`` and values ``w`` are elements of the semiring (the layer maps σ(z) and W_u v into it), the
    input is ``u = nf ⊗ w`` with ``nf`` = 1 − f as an element where ⊕ sums and ``u = w`` where it selects, and

    B: ``c = c ⊗ f ⊕ u``; C: ``c1 = c1 ⊗ f1 ⊕ u1``, ``c2 = c2 ⊗ f2 ⊕ c1 ⊗ u2``; F: C with ``⊕ r ⊗ u2`` in c2 (the
    ε-arc γ) and output ``p1 ⊗ c1 ⊕ p2 ⊗ c2`` (all states start at the semiring's zero). In the real semiring this
    is ``rrnn_b/c/f`` with nf = 1 − f; in max-plus it is Example 15 (``rrnn_b_maxplus``).

    Raises:
        RecurrenceError: an unknown kind or semiring.
    """
    if kind not in RRNN_KINDS:
        raise RecurrenceError(f"rrnn-semiring: kind must be one of {RRNN_KINDS}, got {kind!r}")
    doc = f"RRNN({kind}) in the {semiring} semiring"
    rec = Recurrence(f"rrnn-{kind.lower()}-{semiring}", semiring, dims="d", doc=doc)
    if kind == "B":
        c = rec.state("c")
        f, w = rec.input("f", meaning="the forget gate σ(·) as an element"), rec.input("w", meaning="the value")
        rec.update(c, rec.plus(rec.times(c, f), _admitted(rec, "f", w, "nf")))
        rec.output("c", c)
        return rec
    c1, c2 = rec.states("c1 c2")
    f1, f2 = rec.input("f1", meaning="gate σ(·) as an element"), rec.input("f2", meaning="gate σ(·) as an element")
    w1, w2 = rec.input("w1", meaning="first value"), rec.input("w2", meaning="second value")
    u1, u2 = _admitted(rec, "f1", w1, "nf1"), _admitted(rec, "f2", w2, "nf2")
    rec.update(c1, rec.plus(rec.times(c1, f1), u1))
    terms = [rec.times(c2, f2), rec.times(c1, u2)]
    if kind == "C":
        rec.update(c2, rec.plus(*terms))
        rec.output("c", c2)
        return rec
    r, p1, p2 = rec.constants("r p1 p2")
    rec.update(c2, rec.plus(*terms, rec.times(r, u2)))  # (c1 ⊕ r) ⊗ u2, distributed
    rec.output("c", rec.plus(rec.times(p1, c1), rec.times(p2, c2)))
    return rec


def _named_in(rec: Recurrence) -> Recurrence:
    """``rec`` named for its semiring: the paper's forms keep the paper's names (``isan-2``), the others carry their
    semiring's name (``isan-2-log``, "... in log")."""
    if not rec.in_paper_semiring:
        rec.name, rec.doc = f"{rec.name}-{rec.ring.name}", f"{rec.doc} in {rec.ring.name}"
    return rec


def rcnn(order: int = 2, constant_lambda: bool = False, semiring: str = PAPER_SEMIRING) -> Recurrence:
    """n-gram RCNN (Lei et al. 2016; §4.2 Eq. 14, Appendix B): n + 1 states. In ``semiring`` (as ``kleene.nn``'s
    ``RCNNLayer(semiring=...)`` runs it): ``c_j = c_j ⊗ λ ⊕ c_{j−1} ⊗ u_j`` with ``c_0 = one``, λ and u_j elements."""
    _size("rcnn", "order", order)
    kind = "constant" if constant_lambda else "input-only"
    doc = f"{order}-gram RCNN with {kind} λ (Eq. 14, Appendix B)"
    rec = _named_in(Recurrence(f"rcnn-{order}", semiring, dims="d", doc=doc))
    cs = rec.states(" ".join(f"c{j}" for j in range(1, order + 1)))
    lam = rec.constant("lam") if constant_lambda else rec.input("lam", meaning="σ(W_λ v_t + b_λ)_i as an element")
    us = [rec.input(f"u{j}", meaning=f"(u_t^({j}))_i") for j in range(1, order + 1)]
    previous: Any = None
    for c, u in zip(cs, us):
        rec.update(c, rec.plus(rec.times(c, lam), u if previous is None else rec.times(previous, u)))
        previous = c
    rec.output("c", cs[-1])
    return rec


def _indices(d: int, *indices: int) -> str:
    """Indices up to ``d`` run together while d < 10 (``12``) and are separated beyond (``1_12``): names stay unique."""
    return ("" if d < 10 else "_").join(map(str, indices))


def matrix_entry(prefix: str, i: int, j: int, d: int) -> str:
    """The name of entry (i, j) of a d x d matrix: ``W12`` while d < 10, ``W1_12`` beyond."""
    return f"{prefix}{_indices(d, i, j)}"


def isan(d: int = 2, semiring: str = PAPER_SEMIRING) -> Recurrence:
    """ISAN (Foerster et al. 2017; §4.3 Eq. 16-18, Appendix C): c_t = W_{x_t} c_{t−1} + b_{x_t}; in ``semiring``,
    ``c_i = ⊕_j W_ij ⊗ c_j ⊕ b_i`` (as ``kleene.nn``'s ``ISANLayer(semiring=...)`` runs it).

    Raises:
        RecurrenceError: ``d`` is not an integer >= 1.
    """
    _size("isan", "d", d)
    rec = _named_in(Recurrence(f"isan-{d}", semiring, doc=f"ISAN of hidden size {d} (Eq. 16, Appendix C)"))
    cs = rec.states(" ".join(f"c{i}" for i in range(1, d + 1)))
    for i in range(1, d + 1):
        terms = [
            rec.times(rec.input(matrix_entry("W", i, j, d), meaning=f"[W_x_t]_{i}{j}"), cs[j - 1])
            for j in range(1, d + 1)
        ]
        rec.update(cs[i - 1], rec.plus(*terms, rec.input(f"b{i}", meaning=f"[b_x_t]_{i}")))
    for i in range(1, d + 1):
        rec.output(f"c{i}", cs[i - 1])
    return rec


def elman_linear(d: int = 2) -> Recurrence:
    """The Elman network without nonlinearity (Corollary 14): c_t = W_c c_{t−1} + W_v v_t + b.

    Raises:
        RecurrenceError: ``d`` is not an integer >= 1.
    """
    _size("elman-linear", "d", d)
    rec = Recurrence(f"elman-linear-{d}", "real", doc=f"linear Elman network of size {d} (Corollary 14)")
    cs = rec.states(" ".join(f"c{i}" for i in range(1, d + 1)), init=0)
    for i in range(1, d + 1):
        terms = [rec.constant(matrix_entry("w", i, j, d)) * cs[j - 1] for j in range(1, d + 1)]
        rec.update(cs[i - 1], sympy.Add(*terms) + rec.input(f"u{i}", meaning=f"[W_v v_t + b]_{i}"))
    for i in range(1, d + 1):
        rec.output(f"c{i}", cs[i - 1])
    return rec


def stack_name(kind: str, layer: int, d: int, *indices: int) -> str:
    """The name of a stack's state or parameter: ``h2`` (d = 1, the paper's h^(2)) or ``h2_1``, ``w2_11`` (d > 1)."""
    return f"{kind}{layer}" if d == 1 else f"{kind}{layer}_{_indices(d, *indices)}"


def _stacked_names(layers: int, d: int) -> list[list[str]]:
    """State names of a stack, one list per layer (1-based, top layer last)."""
    _size("a stack", "layers", layers)
    _size("a stack", "d", d)
    return [[stack_name("h", layer, d, i) for i in range(1, d + 1)] for layer in range(1, layers + 1)]


def _stack_update(rec: Recurrence, blocks: list[list[sympy.Symbol]], below_now: bool) -> None:
    """``h^(l) = W^(l) h^(l) + A^(l) (block below, current or previous) + b^(l)``; layer 1 reads ``u(x_t)``."""
    d = len(blocks[0])
    for layer, block in enumerate(blocks, start=1):
        for i, h in enumerate(block, start=1):
            terms = [rec.constant(stack_name("w", layer, d, i, j)) * block[j - 1] for j in range(1, d + 1)]
            if layer == 1:
                terms.append(rec.input(stack_name("u", 1, d, i), meaning=f"[W_x x_t + b]_{i}"))
            else:
                lower = [rec.now(g) if below_now else g for g in blocks[layer - 2]]
                terms += [rec.constant(stack_name("a", layer, d, i, j)) * lower[j - 1] for j in range(1, d + 1)]
                terms.append(rec.constant(stack_name("b", layer, d, i)))
            rec.update(h, sympy.Add(*terms))
    for i, h in enumerate(blocks[-1], start=1):
        rec.output(f"y{i}", h)


def stacked_linear(layers: int = 2, d: int = 1) -> Recurrence:
    """A stack of linear Elman layers (delayed-rnn.md Eq. 3-5 with identity activations), zero initial states.

    ``h^(1)_t = W^(1) h^(1)_{t-1} + [W_x x_t + b]`` and, for l ≥ 2, ``h^(l)_t = W^(l) h^(l)_{t-1} + A^(l) h^(l-1)_t
    + b^(l)``: layer l reads layer l−1's *current* state, a current-step reference (an epsilon arc).
    """
    rec = Recurrence(f"stacked-linear-{layers}x{d}", "real", doc=f"{layers} stacked linear Elman layers of size {d}")
    blocks = [list(rec.states(" ".join(block), init=0)) for block in _stacked_names(layers, d)]
    _stack_update(rec, blocks, below_now=True)
    return rec


def delayed_linear(layers: int = 2, d: int = 1) -> Recurrence:
    """The stack of ``stacked_linear`` flattened into one layer with delay k−1 (delayed-rnn.md Theorem 1).

    The state is the blocks ``ĥ^{l}``; block l reads block l−1's *previous* value (block-bidiagonal
    recurrent weights, no current-step references): ``ĥ^{l}_t = W^(l) ĥ^{l}_{t-1} + A^(l) ĥ^{l-1}_{t-1} + b^(l)``.
    The initial state is Lemma 1's: with identity activations it solves ``ĥ^{l}_{l-1} = h^(l)_0 = 0``,
    a linear system in ``ĥ^{l}_0`` (so it exists when the W^(l) are invertible). Then the output at
    time t + k − 1 equals the stack's at time t, for every input.
    """
    doc = f"{layers} linear Elman layers flattened (delay {layers - 1})"
    rec = Recurrence(f"delayed-linear-{layers}x{d}", "real", doc=doc)
    names = _stacked_names(layers, d)
    unknowns = [[sympy.Symbol(f"init_{n}") for n in block] for block in names]
    initial = _lemma1_initial_state(layers, d, unknowns)
    blocks = [[rec.state(n, init=initial[u]) for n, u in zip(block, row)] for block, row in zip(names, unknowns)]
    _stack_update(rec, blocks, below_now=False)
    return rec


def _lemma1_initial_state(layers: int, d: int, unknowns: list[list[sympy.Symbol]]) -> dict[sympy.Symbol, sympy.Expr]:
    """Lemma 1 for identity activations: ``ĥ_0`` with ``ĥ^{l}_{l-1} = 0`` for every block (stack starts at zero).

    Runs the input-free part of the flattened recurrence symbolically: block l at step l−1 reads blocks
    below it only at steps < l−1, where block 1 still holds its initial zero, so no input enters.
    """

    def matrix(kind: str, layer: int) -> sympy.Matrix:
        rows = range(1, d + 1)
        return sympy.Matrix([[sympy.Symbol(stack_name(kind, layer, d, i, j)) for j in rows] for i in rows])

    solved: dict[sympy.Symbol, sympy.Expr] = {u: sympy.Integer(0) for u in unknowns[0]}
    history = [[sympy.zeros(d, 1)]]  # history[l-1][t] = ĥ^{l}_t (block 1 stays at zero until an input arrives)
    for layer in range(2, layers + 1):
        bias = sympy.Matrix([sympy.Symbol(stack_name("b", layer, d, i)) for i in range(1, d + 1)])
        states = [sympy.Matrix(unknowns[layer - 1])]
        for t in range(1, layer):
            states.append(matrix("w", layer) * states[-1] + matrix("a", layer) * history[-1][t - 1] + bias)
        solution = sympy.solve(list(states[layer - 1]), unknowns[layer - 1], dict=True)
        if not solution:
            raise RecurrenceError(f"delayed-linear: Lemma 1 has no initial state for block {layer}")
        values = {u: sympy.simplify(solution[0][u]) for u in unknowns[layer - 1]}
        solved.update(values)
        history.append([s.xreplace(values) for s in states])
    return solved


def stacked_gated_linear() -> Recurrence:
    """Two stacked RRNN(B)-style units whose upper gate reads the lower state through an identity activation.

    ``c1_t = f(x_t) c1_{t-1} + u(x_t)``; ``c2_t = (a c1_t) c2_{t-1} + v(x_t)``: the upper gate multiplies a
    state by a state. Not rational: with ``c1_t = t`` (f = u = 1) and a = 1, v = 0, c2 = 1 it computes t!.
    """
    rec = Recurrence("stacked-gated-linear", "real", doc="stacked gated units, upper gate = identity of lower state")
    c1, c2 = rec.states("c1 c2", init=0)
    f, u, v = rec.inputs("f u v")
    a = rec.constant("a")
    rec.update(c1, f * c1 + u)
    rec.update(c2, a * rec.now(c1) * c2 + v)
    rec.output("c", c2)
    return rec


def qrnn(window: int = 2, alphabet: Sequence[Hashable] = DEFAULT_ALPHABET, pooling: str = "f") -> Recurrence:
    """QRNN pooling with a K-window convolution (Bradbury et al. 2017; Appendix A; qrnn-notes.md).

    ``pooling="f"`` (and fo, whose output gate lies outside the recurrence): ``c_t = f ⊙ c_{t−1} + (1 − f) ⊙ z``;
    ``"ifo"``: ``c_t = f ⊙ c_{t−1} + i ⊙ z`` with an independent input gate.
    """
    _size("qrnn", "window", window)
    alphabet = _alphabet("qrnn", alphabet)
    if pooling not in ("f", "fo", "ifo"):
        raise RecurrenceError(f"qrnn pooling must be f, fo or ifo, got {pooling!r}")
    ifo = pooling == "ifo"
    rec = Recurrence(
        f"qrnn-{'ifo-' if ifo else ''}k{window}",
        "real",
        dims="d",
        alphabet=alphabet,
        doc=f"QRNN {pooling}-pooling, window K={window}: the gates read x_(t-K+1..t) (Appendix A)",
    )
    c = rec.state("c", init=0)
    f = rec.input("f", lags=window - 1, meaning="σ(conv_K(W_f, v))_i")
    i = rec.input("i", lags=window - 1, meaning="σ(conv_K(W_i, v))_i") if ifo else None
    z = rec.input("z", lags=window - 1, meaning="tanh(conv_K(W_z, v))_i")
    rec.update(c, f * c + (i if i is not None else 1 - f) * z)
    rec.output("c", c)
    return rec


def qrnn_semiring(
    window: int = 1, alphabet: Sequence[Hashable] = DEFAULT_ALPHABET, pooling: str = "f", semiring: str = "log"
) -> Recurrence:
    """QRNN pooling in any semiring, as ``kleene.nn``'s ``QRNNLayer(semiring=...)`` runs it: ``c = c ⊗ f ⊕ u`` with
    the gates (``f``; ``i`` for ifo-pooling) and the candidate ``z`` elements read from the last ``window`` words,
    and ``u = i ⊗ z`` (ifo), ``u = nf ⊗ z`` with nf = 1 − f as an element where ⊕ sums, ``u = z`` where it
    selects. In the real semiring this is ``qrnn`` with nf = 1 − f.

    Raises:
        RecurrenceError: an unknown pooling, a bad window or alphabet.
    """
    _size("qrnn-semiring", "window", window)
    alphabet = _alphabet("qrnn-semiring", alphabet)
    if pooling not in ("f", "fo", "ifo"):
        raise RecurrenceError(f"qrnn pooling must be f, fo or ifo, got {pooling!r}")
    lags = window - 1
    doc = f"QRNN {pooling}-pooling, window K={window}, in the {semiring} semiring"
    rec = Recurrence(f"qrnn-{pooling}-k{window}-{semiring}", semiring, dims="d", alphabet=alphabet, doc=doc)
    c = rec.state("c")
    f = rec.input("f", lags=lags, meaning="σ(conv_K(W_f, v))_i as an element")
    z = rec.input("z", lags=lags, meaning="tanh(conv_K(W_z, v))_i as an element")
    if pooling == "ifo":
        u = rec.times(rec.input("i", lags=lags, meaning="σ(conv_K(W_i, v))_i as an element"), z)
    else:
        u = _admitted(rec, "f", z, "nf", lags=lags)
    rec.update(c, rec.plus(rec.times(c, f), u))
    rec.output("c", c)
    return rec


def t_lstm(alphabet: Sequence[Hashable] = DEFAULT_ALPHABET) -> Recurrence:
    """T-LSTM (Balduzzi & Ghifary 2016): gates read x_{t−1} and x_t (Eq. 10)."""
    alphabet = _alphabet("t-lstm", alphabet)
    rec = Recurrence(
        "t-lstm", "real", dims="d", alphabet=alphabet, doc="T-LSTM: c_t = f⊙c + i⊙z, f and i read x_(t-1), x_t"
    )
    c = rec.state("c", init=0)
    f = rec.input("f", lags=1, meaning="σ(V_f v_(t-1) + W_f v_t + b_f)_i")
    i = rec.input("i", lags=1, meaning="σ(V_i v_(t-1) + W_i v_t + b_i)_i")
    z = rec.input("z", meaning="(W_z v_t)_i")
    rec.update(c, f * c + i * z)
    rec.output("c", c)
    return rec


def t_gru(alphabet: Sequence[Hashable] = DEFAULT_ALPHABET) -> Recurrence:
    """T-GRU (Balduzzi & Ghifary 2016): h_t = f⊙h + (1 − f)⊙z with f reading x_{t−1}, x_t."""
    alphabet = _alphabet("t-gru", alphabet)
    rec = Recurrence(
        "t-gru", "real", dims="d", alphabet=alphabet, doc="T-GRU: h_t = f⊙h + (1−f)⊙z, f reads x_(t-1), x_t"
    )
    h = rec.state("h", init=0)
    f = rec.input("f", lags=1, meaning="σ(V_f v_(t-1) + W_f v_t + b_f)_i")
    z = rec.input("z", meaning="(W_z v_t)_i")
    rec.update(h, f * h + (1 - f) * z)
    rec.output("h", h)
    return rec


def sopa(
    length: int = 3, semiring: str = "max-times", self_loops: bool = True, epsilons: bool = True, aggregate: bool = True
) -> Recurrence:
    """One SoPa pattern with ``length`` main-path transitions (SoPa §3, Eq. 3-8).

    States h_0 (START, restarted every token: the bias) .. h_length (END). Each h_j takes
    a self-loop s_j(x_t), a main-path arc m_j(x_t) from h_{j−1}, and an epsilon e_j from
    the *current* h_{j−1}. With ``aggregate``, a component ``doc`` ⊕-accumulates the END
    score over time: the document score of Eq. 8 (max-times/max-plus: best span; real:
    expected count).
    """
    _size("sopa", "length", length)
    rec = Recurrence(
        f"sopa-{length}-{semiring}",
        semiring,
        dims="k",
        doc=f"SoPa pattern of length {length} ({semiring}); self-loops={self_loops}, epsilons={epsilons}",
    )
    eps = [rec.constant(f"e{j}") for j in range(1, length + 1)] if epsilons else []
    hs = rec.states(" ".join(f"h{j}" for j in range(1, length + 1)))
    previous: Any = None
    for j, h in enumerate(hs, start=1):
        m = rec.input(f"m{j}", meaning=f"E(w_{j - 1}·v_x + b_{j - 1})")
        terms = [m if previous is None else rec.times(previous, m)]
        if self_loops:
            terms.append(rec.times(h, rec.input(f"s{j}", meaning=f"E(u_{j}·v_x + a_{j})")))
        if epsilons:
            start = rec.one_now if previous is None else rec.now(previous)
            terms.append(rec.times(start, eps[j - 1]))
        rec.update(h, rec.plus(*terms))
        previous = h
    if aggregate:
        doc = rec.state("doc")
        rec.update(doc, rec.plus(doc, rec.now(hs[-1])))
        rec.output("doc", doc)
    else:
        rec.output("end", hs[-1])
    return rec


def cnn(width: int = 3) -> Recurrence:
    """A one-layer max-pooled CNN filter as SoPa without self-loops and epsilons (SoPa §4, Eq. 9-10)."""
    rec = sopa(width, "max-plus", self_loops=False, epsilons=False, aggregate=True)
    rec.name = f"cnn-{width}"
    rec.doc = f"one-layer CNN filter of width {width}, max-pooled: linear-chain max-plus WFSA (SoPa Eq. 9-10)"
    return rec


# -- refused ------------------------------------------------------------------------------------


def lstm() -> Recurrence:
    rec = Recurrence("lstm", "real", dims="d", doc="LSTM (Hochreiter & Schmidhuber 1997), one hidden unit")
    c, h = rec.states("c h", init=0)
    ai, af, ao, ag = rec.inputs("a_i a_f a_o a_g")
    wi, wf, wo, wg = rec.constants("w_i w_f w_o w_g")
    i, f, o = sigmoid(wi * h + ai), sigmoid(wf * h + af), sigmoid(wo * h + ao)
    g = sympy.tanh(wg * h + ag)
    rec.update(c, f * c + i * g)
    rec.update(h, o * sympy.tanh(rec.now(c)))
    rec.output("h", h)
    return rec


def gru() -> Recurrence:
    rec = Recurrence("gru", "real", dims="d", doc="GRU (Cho et al. 2014), one hidden unit")
    h = rec.state("h", init=0)
    az, ar, an = rec.inputs("a_z a_r a_n")
    wz, wr, wn = rec.constants("w_z w_r w_n")
    z, r = sigmoid(wz * h + az), sigmoid(wr * h + ar)
    n = sympy.tanh(an + r * wn * h)
    rec.update(h, (1 - z) * n + z * h)
    rec.output("h", h)
    return rec


def elman() -> Recurrence:
    rec = Recurrence("elman", "real", dims="d", doc="Elman network with tanh, one hidden unit")
    h = rec.state("h", init=0)
    u = rec.input("u", meaning="(W_v v_t + b)_i")
    w = rec.constant("w")
    rec.update(h, sympy.tanh(w * h + u))
    rec.output("h", h)
    return rec


def sru_v2() -> Recurrence:
    rec = Recurrence("sru-v2", "real", dims="d", doc="SRU as released (v2): v ⊙ c_{t-1} inside the forget gate")
    c = rec.state("c", init=0)
    a, x = rec.inputs("a x")
    v = rec.constant("v")
    f = sigmoid(a + v * c)
    rec.update(c, f * c + (1 - f) * x)
    rec.output("c", c)
    return rec


def rcnn_gated() -> Recurrence:
    rec = Recurrence("rcnn-gated", "real", dims="d", doc="bigram RCNN with λ_t = σ(W_c c_{t-1} + W_λ v_t + b)")
    c1, c2 = rec.states("c1 c2", init=0)
    a, u1, u2 = rec.inputs("a u1 u2")
    w = rec.constant("w_c")
    lam = sigmoid(w * c2 + a)
    rec.update(c1, c1 * lam + u1)
    rec.update(c2, c2 * lam + c1 * u2)
    rec.output("c", c2)
    return rec


Builder = Callable[..., Recurrence]

ZOO: dict[str, Builder] = {
    "example-6": example6,
    "sru": sru,
    "t-rnn": t_rnn,
    "scrn": scrn,
    "rrnn-b": rrnn_b,
    "rrnn-b-maxplus": rrnn_b_maxplus,
    "rrnn-c": rrnn_c,
    "rrnn-f": rrnn_f,
    "rrnn-semiring": rrnn_semiring,
    "rcnn": rcnn,
    "isan": isan,
    "elman-linear": elman_linear,
    "stacked-linear": stacked_linear,
    "delayed-linear": delayed_linear,
    "qrnn": qrnn,
    "qrnn-semiring": qrnn_semiring,
    "t-lstm": t_lstm,
    "t-gru": t_gru,
    "sopa": sopa,
    "cnn": cnn,
    "lstm": lstm,
    "gru": gru,
    "elman": elman,
    "sru-v2": sru_v2,
    "rcnn-gated": rcnn_gated,
    "stacked-gated-linear": stacked_gated_linear,
}

#: Entries the prover must refuse.
REFUSED = ("lstm", "gru", "elman", "sru-v2", "rcnn-gated", "stacked-gated-linear")

#: The automaton of the paper each proved entry corresponds to (for the table).
PAPER_AUTOMATON = {
    "example-6": "B (Fig. 1)",
    "sru": "B",
    "t-rnn": "B",
    "scrn": "B",
    "rrnn-b": "B",
    "rrnn-b-maxplus": "B (max-plus)",
    "rrnn-c": "C (Fig. 2)",
    "rrnn-f": "F (Fig. 4)",
    "rrnn-semiring": "B, C or F in any semiring",
    "rcnn": "Appendix B (n+1 states)",
    "isan": "D_1, D_2 (Fig. 3)",
    "elman-linear": "like D (Cor. 14)",
    "stacked-linear": "like D, epsilon arcs between layers",
    "delayed-linear": "like D, block-bidiagonal (delay k-1)",
    "qrnn": "Appendix A",
    "qrnn-semiring": "Appendix A in any semiring",
    "t-lstm": "Appendix A",
    "t-gru": "Appendix A",
    "sopa": "SoPa pattern",
    "cnn": "linear chain (SoPa §4)",
}
