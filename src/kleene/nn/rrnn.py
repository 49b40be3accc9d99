"""Rational RNNs (rational-recurrences.md §4-6, Appendix D): RRNN(B), RRNN(B) in max-plus, RRNN(C), RRNN(F).

Each layer is ``hidden_size`` copies of a small WFSA compiled by ``kleene.compile``; the layer's projections of
its input fill the WFSA's per-step slots (μ, φ) and its learned constants (γ, ρ) are the template's constants:

* B (Fig. 1): q0 -∀α/1-> q0, q0 -∀α/u-> q1, q1 -∀α/f-> q1, final q1: ``c_t = f_t ⊙ c_{t-1} + u_t`` (eq. 23)
  with ``f = σ(W_f v + b_f)`` and ``u = (1 - f) ⊙ W_u v``. In max-plus (eq. 24): ``f = log σ(W_f v + b_f)``,
  ``u = W_u v`` and ``c_t = max(f_t + c_{t-1}, u_t)``, starting from the semiring zero -inf.
* C (Fig. 2): q0 -u1-> q1 -u2-> q2 with self-loops f1, f2 (eq. 25).
* F (Fig. 4, eq. 19/26): C plus q3 reached from q0 by an ε-arc of weight ``r = σ(b_r)``, q3 -u2-> q2, and two
  final states q1, q2 with weights ``p1 = σ(b_p1)``, ``p2 = σ(b_p2)``: ``c_t = p1 ⊙ c1_t + p2 ⊙ c2_t``
  (Appendix D's eq. 26g prints ``p1 ⊙ c2``; §5.1's eq. 19c and the WFSA say ``c1``, which is what runs here).

Output (Appendix D): ``h_t = tanh(o_t ⊙ c_t)`` with the optional output gate ``o = σ(W_o v + b_o)`` (max-plus:
``tanh(o_t + c_t)``, ``o = log σ(...)``); without the gate ``h_t = tanh(c_t)``.

Stacking, bidirectional layers (the compiler's ``bidirectional`` option: the upper half of the dimensions reads the
sequence backwards) and the three dropouts of Appendix E: embedding dropout (on the word vectors, in the models),
vertical dropout (between layers and before the head) and variational recurrent dropout (one mask per sequence,
shared by every time step, on each layer's input -- the form SRU-style recurrences use, since they have no
hidden-to-hidden matrix to drop).
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, ClassVar, NamedTuple

import sympy
import torch
from torch import nn
from torch.nn.utils import parametrize

from kleene.automata.labels import ANY, EPSILON
from kleene.automata.semiring import Semiring, get_semiring
from kleene.automata.weights import ALPHA, logsigmoid, sigmoid
from kleene.automata.wfsa import WFSA
from kleene.compile import CompiledRecurrence, Factor, OutputMap, Template, TemplateArc, compile
from kleene.compile.functions import OUTPUT
from kleene.data.checks import check_count, check_features, check_lengths, check_real
from kleene.errors import KleeneError, LayerError
from kleene.nn import projection
from kleene.nn.embedding import check_token_batch, word_embedding
from kleene.nn.registry import register_model

__all__ = [
    "ACTIVATIONS",
    "RRNN_KINDS",
    "GateConstants",
    "LayerError",
    "RRNNClassifier",
    "RRNNLanguageModel",
    "RationalClassifier",
    "RationalLanguageModel",
    "RationalLayer",
    "RationalStack",
    "SlotLayer",
    "StreamState",
    "chain_template",
    "gate_semiring",
    "rrnn_gated_template",
    "rrnn_template",
]

Tensor = torch.Tensor
RRNN_KINDS = ("B", "B-maxplus", "C", "F")
#: Initial forget-gate bias of max-plus layers: c_t = max(f_t + c_{t-1}, u_t) is a decayed running max, and with
#: f ≈ log σ(0) = -0.69 the last word (often ".") decides the final state and training stalls (SST-2: the loss of
#: a 160-sentence run moves 1%); σ(3) ≈ 0.95 keeps earlier words visible (the same run's loss falls by 68%).
MAX_PLUS_FORGET_BIAS = 3.0
#: ``layer(input_size, hidden_size, **options)`` builds one layer of a stack (a layer class or a partial of one).
LayerFactory = Callable[..., "RationalLayer"]


# --------------------------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------------------------
def chain_template(
    name: str,
    states: Sequence[str],
    moves: Sequence[tuple[str, str, Sequence[str]]],
    *,
    epsilons: Sequence[tuple[str, str, str]] = (),
    final: Sequence[tuple[str, str | None]] = (),
    constants: Sequence[str] = (),
    initial: str = "q0",
    semiring: str = "real",
) -> Template:
    """A template from names: moves (src, dst, weight names: slots, or constants when listed in ``constants``;
    none = weight one), epsilons (src, dst, constant), final (state, constant or None) and the single initial
    state (weight one)."""
    index = {s: i for i, s in enumerate(states)}
    const_index = {c: i for i, c in enumerate(constants)}
    slot_names: list[str] = []
    for _, _, names in moves:
        for name in names:
            if name not in slot_names and name not in const_index:
                slot_names.append(name)

    def move(names: Sequence[str]) -> Factor:
        return Factor(
            tuple(slot_names.index(n) for n in names if n not in const_index),
            tuple(const_index[n] for n in names if n in const_index),
        )

    return Template(
        states=tuple(states),
        slots=tuple(slot_names),
        constants=tuple(constants),
        moves=tuple(TemplateArc(index[a], index[b], move(names)) for a, b, names in moves),
        epsilons=tuple(TemplateArc(index[a], index[b], Factor(constants=(const_index[c],))) for a, b, c in epsilons),
        initial=((index[initial], Factor()),),
        final=tuple((index[q], Factor(constants=(const_index[c],) if c else ())) for q, c in final),
        semiring=semiring,
        name=name,
    )


def rrnn_template(kind: str) -> Template:
    """The WFSA of RRNN(``kind``) (B, B-maxplus, C or F) as a compiler template.

    Raises:
        LayerError: an unknown kind.
    """
    if kind in ("B", "B-maxplus"):
        return chain_template(
            f"rrnn-{kind}",
            ["q0", "q1"],
            [("q0", "q0", ()), ("q0", "q1", ["u"]), ("q1", "q1", ["f"])],
            final=[("q1", None)],
        )
    if kind == "C":
        return chain_template(
            "rrnn-C",
            ["q0", "q1", "q2"],
            [("q0", "q0", ()), ("q0", "q1", ["u1"]), ("q1", "q1", ["f1"]), ("q1", "q2", ["u2"]), ("q2", "q2", ["f2"])],
            final=[("q2", None)],
        )
    if kind == "F":
        return chain_template(
            "rrnn-F",
            ["q0", "q1", "q2", "q3"],
            [
                ("q0", "q0", ()),
                ("q0", "q1", ["u1"]),
                ("q1", "q1", ["f1"]),
                ("q1", "q2", ["u2"]),
                ("q2", "q2", ["f2"]),
                ("q3", "q2", ["u2"]),
            ],
            epsilons=[("q0", "q3", "gamma")],
            final=[("q1", "rho1"), ("q2", "rho2")],
            constants=["gamma", "rho1", "rho2"],
        )
    raise LayerError(f"unknown RRNN kind {kind!r}; use one of {RRNN_KINDS}")


def rrnn_gated_template(kind: str, semiring: str | Semiring) -> Template:
    """RRNN(``kind``) whose weights are the gates themselves (``kleene.compile.functions``): the kernel reads the raw
    forget pre-activations ``zf`` (``zf1``, ``zf2``) and inputs ``wu`` (``wu1``, ``wu2``), in that slot order (the
    layout of one projection's output), and computes ``f = σ(zf)`` and ``u = (1 − σ(zf)) ⊗ wu`` (``wu`` where ⊕
    selects) as elements of ``semiring`` (``Semiring.sym_probability``: ``log σ`` where its elements are
    log-weights, computed in the kernel).

    Raises:
        LayerError: an unknown kind, or a semiring gates cannot enter (``gate_semiring``).
    """
    algebra = gate_semiring(semiring)
    base = rrnn_template(kind)
    element = algebra.sym_probability

    orders = 1 if kind.startswith("B") else 2
    suffixes = [""] if orders == 1 else ["1", "2"]
    names = [f"zf{x}" for x in suffixes] + [f"wu{x}" for x in suffixes]
    weights: dict[str, sympy.Expr] = {}
    for x in suffixes:
        z, w = (sympy.Function(n + x)(ALPHA) for n in ("zf", "wu"))
        weights["f" + x] = element(sigmoid(z))
        weights["u" + x] = w if algebra.best else algebra.sym_times(element(1 - sigmoid(z)), w)
    wfsa = WFSA(algebra, name=f"rrnn-{kind}-gated")
    for state in base.states:
        wfsa.add_state(state)
    for arc in base.moves:
        factors = [weights[base.slots[i]] for i in arc.weight.slots]
        wfsa.add_arc(arc.src, arc.dst, ANY, algebra.sym_times(*factors) if factors else algebra.one)
    for arc in base.epsilons:
        wfsa.add_arc(arc.src, arc.dst, EPSILON, base.weight_expr(arc.weight))
    for q, w in base.initial:
        wfsa.set_initial(q, algebra.one if w == Factor() else base.weight_expr(w))
    for q, w in base.final:
        wfsa.set_final(q, algebra.one if w == Factor() else base.weight_expr(w))
    return Template.from_wfsa(wfsa, slots=names)


#: Output activations of the rational layers (Appendix D's tanh; the original code's relu and identity).
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"tanh": torch.tanh, "relu": torch.relu, "none": lambda x: x}
#: The activations in the kernels' vocabulary (``kleene.compile.functions.CALLS``), as sympy maps.
KERNEL_ACTIVATIONS: dict[str, Callable[[sympy.Expr], sympy.Expr]] = {"tanh": sympy.tanh, "none": lambda x: x}


def rrnn_output_map(storage: Semiring, activation: str, gate: str | None) -> OutputMap | None:
    """The output ``act(o ⊗ c)`` (o the gate σ of the raw slot named ``gate``, stored as ``Semiring.stored_gate``
    stores it) or ``act(c)`` (``gate`` None) on the stored c = y, as an output map (RRNN's, and QRNN's O ⊗ c); None
    for an activation outside the kernels' vocabulary (relu)."""
    if activation not in KERNEL_ACTIVATIONS:
        return None
    value: sympy.Expr = sympy.Symbol(OUTPUT)
    if gate is not None:
        z = sympy.Symbol(gate)
        log_stored = storage.probability_storage == "logarithm"
        value = storage.sym_times(logsigmoid(z) if log_stored else sigmoid(z), value)
    return OutputMap(KERNEL_ACTIVATIONS[activation](value))


def layer_semiring(semiring: str | Semiring) -> Semiring:
    """``semiring`` checked for a compiled layer: a known semiring with a kernel realisation.

    Raises:
        LayerError: an unknown semiring or one without kernels (boolean), naming it and why.
    """
    try:
        algebra = get_semiring(semiring)
        algebra.kernel_algebra()
    except KleeneError as error:
        raise LayerError(f"semiring {semiring!r}: {error}") from None
    return algebra


def gate_semiring(semiring: str | Semiring) -> Semiring:
    """``semiring`` checked for gated layers (``layer_semiring``): it must carry a gate σ(z) in (0, 1) as an element
    (``Semiring.probability_storage``: stored as p or as log p).

    Raises:
        LayerError: an unknown semiring, or one whose element for a probability is neither (min-plus stores costs
            −log p; boolean has no kernel), naming it and why.
    """
    algebra = layer_semiring(semiring)
    if algebra.probability_storage is None:
        raise LayerError(
            f"semiring {algebra.name!r}: a gate's probability p must be stored as p or log p; the {algebra.name} "
            f"semiring stores p = 0.5 as {algebra.stored_probability(0.5):g}, so its gated layers would not compute "
            "the paper's recurrence"
        )
    return algebra


class GateConstants(nn.Module):
    """Parametrization: a compiled recurrence's constants are the gate σ(raw) (γ, ρ in (0, 1), eq. 20c), stored as
    ``Semiring.stored_gate`` stores a gate."""

    def __init__(self, storage: Semiring):
        super().__init__()
        self.storage = storage

    def forward(self, raw: Tensor) -> Tensor:
        return self.storage.stored_gate(raw)



def compile_layer(
    template: Template,
    semiring: str | Semiring,
    dim: int,
    bidirectional: bool,
    backend: str,
    output: str = "steps",
) -> CompiledRecurrence:
    """Compile ``template`` for ``dim`` dimensions; constants, if any, become the gate σ(raw) with raw ~ N(0, 1),
    in the semiring's storage form (``GateConstants``)."""
    recurrence = compile(template, semiring, dim, backend, output=output, bidirectional=bidirectional)  # type: ignore[arg-type]
    if template.constants:
        with torch.no_grad():
            recurrence.constants.normal_()
        parametrize.register_parametrization(recurrence, "constants", GateConstants(get_semiring(semiring).storage))
    return recurrence


# --------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------
def full_lengths(x: Tensor) -> Tensor:
    """Every sequence of ``x`` (B, T, ...) at its full length T."""
    return torch.full((x.shape[0],), x.shape[1], dtype=torch.long, device=x.device)


class StreamState(NamedTuple):
    """What a layer carries from one chunk of a sequence to the next: its WFSA state (B, Q, D) and, for layers
    with a convolution window K > 1, the last K-1 inputs (B, K-1, input) (None for the others)."""

    recurrence: Tensor
    inputs: Tensor | None = None

    def detach(self) -> StreamState:
        """The same state cut from the graph (truncated backpropagation through time)."""
        return StreamState(self.recurrence.detach(), None if self.inputs is None else self.inputs.detach())


class RationalLayer(nn.Module):
    """One layer of a ``RationalStack``: ``forward(x (B, T, in), lengths, h0=None) -> (h (B, T, out), final
    state)``, padded positions of ``h`` zero. Subclasses set ``input_size``, ``output_size`` and (unless they
    override ``reads_both_ways``) ``self.recurrence``, and implement ``forward``; ``SlotLayer`` implements it for
    layers that are one compiled recurrence between an input map and an output map.
    """

    recurrence: CompiledRecurrence
    input_size: int
    output_size: int
    #: The rational cell the layer runs, named as the zoo names its family (``"rrnn"``, ``"sru"``, ``"qrnn"``,
    #: ``"rcnn"``, ``"isan"``): what ``kleene.extract`` reads the layer's automata by. None: no exact extraction.
    cell_family: ClassVar[str | None] = None

    def cell_states(self, x: Tensor, lengths: Tensor) -> Tensor:
        """The cell states c (B, T, D) in storage form before any output map: the values the automata of
        ``cell_family`` score (max-times: logarithms).

        Raises:
            LayerError: the layer has no rational cell (``cell_family`` is None).
        """
        raise LayerError(f"{type(self).__name__} has no rational cell states (its cell_family is None)")

    def check(self, x: Any, lengths: Any) -> Tensor:
        """The checked lengths (int64, on x's device) of a layer input ``x``.

        Raises:
            LayerError: ``x`` is not a real floating (B, T, input_size) tensor, or ``lengths`` is not one integer in
                0..T per sequence.
        """
        name = type(self).__name__
        check_features(x, self.input_size, error=LayerError, name=f"{name} input x")
        batch, steps = x.shape[0], x.shape[1]
        return check_lengths(lengths, batch, steps, error=LayerError, device=x.device, name=f"{name}: lengths")

    @property
    def reads_both_ways(self) -> bool:
        """Whether half the dimensions read each sequence right to left (a bidirectional layer)."""
        return bool(self.recurrence.plan.options.bidirectional)

    def stream(self, x: Tensor, state: Any = None, lengths: Tensor | None = None) -> tuple[Tensor, StreamState]:
        """``x`` as the continuation of a sequence whose previous chunk left ``state`` (None: a new sequence):
        consecutive chunks give the outputs of the whole sequence. ``lengths`` as in ``forward`` (default: T);
        a sequence shorter than T ends inside this chunk and its state is the one at its length.

        Raises:
            LayerError: a state that is not a ``StreamState``, or a bidirectional layer (its backward direction
                reads each chunk's end first).
        """
        if state is not None and not isinstance(state, StreamState):
            raise LayerError(f"a stream state is a StreamState, got {type(state).__name__}")
        if self.reads_both_ways:
            raise LayerError("a bidirectional layer cannot stream: its backward direction reads each chunk's end first")
        lengths = full_lengths(x) if lengths is None else lengths
        h, final = self(x, lengths, None if state is None else state.recurrence)
        return h, StreamState(final)


class SlotLayer(RationalLayer, abc.ABC):
    """A rational layer that is one compiled recurrence (``self.recurrence``) between two maps: ``slots(x)`` gives
    the kernel's slots (B, T, S, D) and whatever the output needs, and the layer's output is the recurrence's own
    output map (``Template.output_map``, run inside the kernel, with ``output_constants()``) when its template has
    one, else ``output(c, x, extra)`` from the recurrence's states c (B, T, D)."""

    @abc.abstractmethod
    def slots(self, x: Tensor) -> tuple[Tensor, Any]:
        """The kernel's slots of ``x`` (B, T, input) and the ``extra`` that ``output`` reads."""

    def output(self, c: Tensor, x: Tensor, extra: Any) -> Tensor:
        """The layer's output (B, T, out) from the recurrence's states ``c`` and the input ``x``.

        Raises:
            LayerError: the layer defines no such map (its recurrence's output map is its output).
        """
        raise LayerError(f"{type(self).__name__} has no output map outside its kernel (see its template's output_map)")

    def output_constants(self) -> Tensor | None:
        """The constants (C, D) of the recurrence's output map (None: it has none)."""
        return None

    def cell_states(self, x: Tensor, lengths: Tensor) -> Tensor:
        slots, _ = self.slots(x)
        return self.recurrence(slots, lengths, mapped=False)[0]

    def forward(self, x: Tensor, lengths: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        lengths = self.check(x, lengths)
        slots, extra = self.slots(x)
        if self.recurrence.plan.output_map is not None:  # the kernel writes h, 0 at padding
            return self.recurrence(slots, lengths, h0, output_constants=self.output_constants())
        c, final = self.recurrence(slots, lengths, h0)
        h = self.output(c, x, extra)
        valid = torch.arange(x.shape[1], device=x.device)[None, :, None] < lengths[:, None, None]
        return torch.where(valid, h, torch.zeros_like(h)), final


class RRNNLayer(SlotLayer):
    """RRNN(B), RRNN(C) or RRNN(F) (Appendix D) of ``hidden_size`` units per direction, in any ``gate_semiring``.

    The gates map into the semiring through its storage form (``Semiring.stored_gate``): ``f = σ(W_f v + b_f)`` as an
    element (log σ where elements are log-weights); the input is interpolated, ``u = (1 − f) ⊗ W_u v``, in a summing
    semiring and taken as it is, ``u = W_u v``, in a selecting one (§5.2's max-plus choice, eq. 21b; ``best``);
    the output is ``act(o ⊗ c)`` with the optional output gate ``o = σ(W_o v + b_o)`` mapped the same way, else
    ``act(c)``, on stored values (max-times: log values). ``activation``: ``tanh`` (Appendix D), ``relu`` or
    ``none``. ``kind="B-maxplus"`` is RRNN(B) in max-plus (the paper's RRNN(B)_m+; ``semiring`` must then be
    max-plus or None).

    ``forget_bias`` initialises b_f (default: torch's init, and ``MAX_PLUS_FORGET_BIAS`` in a selecting semiring).

    Raises:
        LayerError: an unknown kind or activation, or a semiring gates cannot enter (``gate_semiring``).
    """

    cell_family = "rrnn"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        kind: str = "B",
        *,
        semiring: str | Semiring | None = None,
        activation: str = "tanh",
        output_gate: bool = False,
        bidirectional: bool = False,
        forget_bias: float | None = None,
        backend: str = "auto",
    ):
        super().__init__()
        rrnn_template(kind)  # an unknown kind is refused first
        if kind == "B-maxplus":
            if semiring is not None and gate_semiring(semiring) != get_semiring("max-plus"):
                raise LayerError(f"kind 'B-maxplus' is RRNN(B) in max-plus; it cannot take semiring={semiring!r}")
            semiring = "max-plus"
        if not isinstance(activation, str) or activation not in ACTIVATIONS:
            raise LayerError(f"activation {activation!r} is not one of {sorted(ACTIVATIONS)}")
        self.input_size = input_size
        self.kind, self.output_gate, self.activation = kind, output_gate, activation
        self.algebra = gate_semiring("real" if semiring is None else semiring)
        self.storage = self.algebra.storage
        self.semiring = self.algebra.name
        self.orders = 1 if kind.startswith("B") else 2
        dim = hidden_size * (2 if bidirectional else 1)
        self.dim = self.output_size = dim
        # per order j: W_f^(j) v + b_f^(j) and W_u^(j) v (no bias, as Appendix D); then W_o v + b_o
        self.forget = projection.Linear(input_size, self.orders * dim)
        self.update = projection.Linear(input_size, self.orders * dim, bias=False)
        self.gate = projection.Linear(input_size, dim) if output_gate else None
        # one projection's output (forget pre-activations, inputs, the output gate's) is the kernel's slots: the
        # gates and the output map run inside (``rrnn_output_map``; a relu output stays in torch, ``output``)
        template = rrnn_gated_template(kind, self.algebra)
        mapped = rrnn_output_map(self.storage, activation, "zo" if output_gate else None)
        if mapped is not None:
            slots = (*template.slots, "zo") if output_gate else template.slots
            template = replace(template, slots=slots, output_map=mapped)
        self.recurrence = compile_layer(template, self.algebra, dim, bidirectional, backend)
        if forget_bias is None and self.algebra.best:  # a selecting recurrence: a decayed running best
            forget_bias = MAX_PLUS_FORGET_BIAS
        if forget_bias is not None:
            with torch.no_grad():
                self.forget.bias.fill_(forget_bias)

    def slots(self, x: Tensor) -> tuple[Tensor, Any]:
        """The raw slots (B, T, S, D) of the recurrence's template: ``W_f v + b_f``, ``W_u v`` and, with an output gate
        inside the kernel, ``W_o v + b_o``, by one GEMM."""
        b, t, _ = x.shape
        weights = [self.forget.weight, self.update.weight]
        biases = [self.forget.bias, self.forget.bias.new_zeros(self.orders * self.dim)]
        if self.gate is not None and self.recurrence.plan.output_map is not None:
            weights.append(self.gate.weight)
            biases.append(self.gate.bias)
        raw = projection.linear(x, torch.cat(weights, 0), torch.cat(biases, 0))
        return raw.view(b, t, self.recurrence.plan.num_slots, self.dim), None

    def output(self, c: Tensor, x: Tensor, extra: Any) -> Tensor:
        act = ACTIVATIONS[self.activation]
        if self.gate is None:
            return act(c)
        return act(self.storage.times(self.storage.stored_gate(self.gate(x)), c))


class RationalStack(nn.Module):
    """Stacked rational layers with vertical and variational recurrent dropout (Appendix E).

    ``dense``: densely connected stacking (QRNN): each layer's input is concatenated to its output along the
    channel dimension before the next layer, so layer l reads the embeddings and every earlier layer's output.

    ``layer_norm``: every layer's output goes through its own ``nn.LayerNorm`` (padded positions stay zero).

    ``make_layer(input_size, index)`` builds layer ``index``; ``forward(x, lengths)`` returns the last layer's
    outputs (B, T, out) and the list of each layer's final states.
    """

    def __init__(
        self,
        input_size: int,
        num_layers: int,
        make_layer: Callable[[int, int], RationalLayer],
        *,
        vertical_dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        dense: bool = False,
        layer_norm: bool = False,
    ):
        super().__init__()
        if num_layers < 1:
            raise LayerError(f"num_layers must be >= 1, got {num_layers}")
        if not isinstance(layer_norm, bool):
            raise LayerError(f"layer_norm must be True or False, got {layer_norm!r}")
        layers: list[RationalLayer] = []
        size = input_size
        for index in range(num_layers):
            layer = make_layer(size, index)
            layers.append(layer)
            size = size + layer.output_size if dense else layer.output_size
        self.layers = nn.ModuleList(layers)
        # layer normalisation of every layer's output (as the paper's language models; torch's LayerNorm)
        self.norms = nn.ModuleList(nn.LayerNorm(layer.output_size) for layer in layers) if layer_norm else None
        self.dense = dense
        self.output_size = size
        self.vertical = nn.Dropout(vertical_dropout)
        self.recurrent_dropout = recurrent_dropout

    @classmethod
    def of(
        cls,
        layer: LayerFactory,
        input_size: int,
        hidden_size: int,
        num_layers: int,
        *,
        bidirectional: bool = False,
        dense: bool = False,
        vertical_dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        layer_norm: bool = False,
        backend: str = "auto",
    ) -> RationalStack:
        """``num_layers`` layers ``layer(size, hidden_size, backend=..., bidirectional=...)``.

        ``backend`` and ``bidirectional`` are passed when the layer takes them (an LSTM layer has no backend).

        Raises:
            LayerError: a non-default ``backend``/``bidirectional`` for a layer without that option.
        """
        accepted = inspect.signature(layer).parameters
        options: dict[str, Any] = {}
        for name, value, default in (("backend", backend, "auto"), ("bidirectional", bidirectional, False)):
            if name in accepted:
                options[name] = value
            elif value != default:
                raise LayerError(f"{_layer_name(layer)} layers have no option {name} (asked for {value!r})")
        return cls(
            input_size,
            num_layers,
            lambda size, index: layer(size, hidden_size, **options),
            vertical_dropout=vertical_dropout,
            recurrent_dropout=recurrent_dropout,
            dense=dense,
            layer_norm=layer_norm,
        )

    def normalised(self, index: int, h: Tensor, lengths: Tensor | None) -> Tensor:
        """Layer ``index``'s output ``h`` after its layer norm (if any); padded positions (beyond ``lengths``) zero."""
        if self.norms is None:
            return h
        h = self.norms[index](h)
        if lengths is None:
            return h
        valid = torch.arange(h.shape[1], device=h.device)[None, :, None] < lengths[:, None, None]
        return torch.where(valid, h, torch.zeros_like(h))

    def variational(self, x: Tensor) -> Tensor:
        """One dropout mask per sequence and feature, shared by all time steps."""
        if not self.training or self.recurrent_dropout == 0:
            return x
        keep = 1 - self.recurrent_dropout
        mask = torch.bernoulli(x.new_full((x.shape[0], 1, x.shape[2]), keep)) / keep
        return x * mask

    def stream(
        self, x: Tensor, states: Sequence[StreamState] | None = None, lengths: Tensor | None = None
    ) -> tuple[Tensor, list[StreamState]]:
        """Each layer's ``stream``: ``x`` continues the sequence whose previous chunk left ``states`` (one per layer;
        None: a new sequence). Returns the last layer's outputs and the states for the next chunk. In training,
        variational dropout draws its mask per chunk.

        Raises:
            LayerError: ``states`` of the wrong length.
        """
        if states is not None and len(states) != len(self.layers):
            raise LayerError(f"states must hold one state per layer ({len(self.layers)}); got {len(states)}")
        new_states = []
        for index, layer in enumerate(self.layers):
            if index:
                x = self.vertical(x)
            assert isinstance(layer, RationalLayer)
            h, state = layer.stream(self.variational(x), None if states is None else states[index], lengths)
            h = self.normalised(index, h, lengths)
            x = torch.cat([x, h], -1) if self.dense else h
            new_states.append(state)
        return x, new_states

    def forward(
        self, x: Tensor, lengths: Tensor, states: Sequence[Tensor | None] | None = None
    ) -> tuple[Tensor, list[Tensor]]:
        finals = []
        for index, layer in enumerate(self.layers):
            if index:
                x = self.vertical(x)
            h, final = layer(self.variational(x), lengths, None if states is None else states[index])
            h = self.normalised(index, h, lengths)
            x = torch.cat([x, h], -1) if self.dense else h
            finals.append(final)
        return x, finals


# --------------------------------------------------------------------------------------------
# Models for the trainer
# --------------------------------------------------------------------------------------------
def last_states(h: Tensor, lengths: Tensor, bidirectional: bool) -> Tensor:
    """The sequence representation: h at each sequence's last valid step (forward half) and at step 0
    (backward half, which has read the whole sequence there). An empty sequence is represented by zeros, as its
    padded positions are (so T = 0 and a zero length with T > 0 agree)."""
    if h.shape[1] == 0:
        return h.new_zeros((h.shape[0], h.shape[2]))
    index = (lengths - 1).clamp_min(0)
    forward = h[torch.arange(h.shape[0], device=h.device), index]
    if not bidirectional:
        return forward
    half = h.shape[-1] // 2
    return torch.cat([forward[:, :half], h[:, 0, half:]], -1)


#: The keys of a classifier's ``frame`` (``frame_tokens``).
FRAME_KEYS = ("start", "end", "fill", "min_length")


def check_frame(frame: Any, vocab_size: int) -> dict[str, Any] | None:
    """``frame`` checked: None, or a dict of exactly ``FRAME_KEYS`` with ``start``/``end`` None or token ids,
    ``fill`` a token id and ``min_length`` an integer >= 0.

    Raises:
        LayerError: anything else, naming the key and the value.
    """
    if frame is None:
        return None
    if not isinstance(frame, dict) or sorted(frame) != sorted(FRAME_KEYS):
        raise LayerError(f"frame must be None or a dict with the keys {list(FRAME_KEYS)}; got {frame!r}")
    for key in ("start", "end", "fill"):
        if frame[key] is not None or key == "fill":
            check_count(frame[key], f"frame[{key!r}]", minimum=0, error=LayerError)
            if frame[key] >= vocab_size:
                raise LayerError(f"frame[{key!r}] = {frame[key]} is not a token id below vocab_size {vocab_size}")
    check_count(frame["min_length"], "frame['min_length']", minimum=0, error=LayerError)
    return dict(frame)


def frame_tokens(
    tokens: Tensor, lengths: Tensor, *, start: int | None, end: int | None, fill: int, min_length: int
) -> tuple[Tensor, Tensor]:
    """Each sequence ``w`` of ``tokens`` (B, T) as ``fill``… ``start`` w ``end`` (``start``/``end`` None: left out),
    with as many ``fill`` tokens on the left as bring it to ``min_length`` steps (none if it is longer); padding 0
    after. Returns the new tokens (B, T') and lengths."""
    inner = int(start is not None) + int(end is not None)
    framed = torch.clamp(lengths + inner, min=min_length)
    steps = int(framed.max()) if lengths.numel() else 0
    offset = (framed - lengths - inner)[:, None]
    position = torch.arange(steps, device=tokens.device)[None, :]
    out = torch.where(position < offset, fill, 0).to(tokens.dtype).expand(tokens.shape[0], steps).clone()
    first_word = offset + int(start is not None)
    if start is not None:
        out = torch.where(position == offset, start, out)
    index = position - first_word
    is_word = (index >= 0) & (index < lengths[:, None])
    if tokens.shape[1]:
        words = tokens.gather(1, index.clamp(0, tokens.shape[1] - 1))
        out = torch.where(is_word, words, out)
    if end is not None:
        out = torch.where(position == first_word + lengths[:, None], end, out)
    return out, framed


def check_sizes(owner: str, *, sizes: dict[str, Any], dropouts: dict[str, Any]) -> None:
    """Sizes must be integers >= 1 and dropout probabilities numbers in [0, 1).

    Raises:
        LayerError: the first value that is not (named with ``owner``).
    """
    for key, value in sizes.items():
        check_count(value, f"{owner}: {key}", minimum=1, error=LayerError)
    for key, value in dropouts.items():
        check_real(value, f"{owner}: {key}", minimum=0.0, below=1.0, error=LayerError)


def _layer_name(layer: LayerFactory) -> str:
    target = getattr(layer, "func", layer)  # a functools.partial names its class through .func
    return str(getattr(target, "__name__", target))


class RationalClassifier(nn.Module):
    """Embedding (+ dropout) -> a ``RationalStack`` of ``layer`` -> final hidden states -> 2-layer tanh MLP (§6.3).

    ``layer(input_size, hidden_size, backend=..., [bidirectional=True])`` builds one layer: a ``RationalLayer``
    class, or a ``functools.partial`` of one carrying its own options (``RRNNClassifier`` passes the kind).

    ``mlp_hidden=0``: the head is one linear map (after the dropout), as the original codes' classifiers
    (``kleene convert``). ``frame``: None, or ``{"start": id | None, "end": id | None, "fill": id, "min_length":
    n}``: each sequence is read as ``fill``… ``start`` tokens… ``end``, left-filled to at least ``n`` steps
    (``frame_tokens``), as the original codes' batches present a sentence.
    """

    task = "classification"

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        layer: LayerFactory,
        *,
        hidden_size: int = 128,
        num_layers: int = 2,
        bidirectional: bool = False,
        dense: bool = False,
        embedding_dim: int = 50,
        embedding_dropout: float = 0.0,
        vertical_dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        mlp_hidden: int = 100,
        freeze_embeddings: bool = True,
        layer_norm: bool = False,
        frame: dict[str, Any] | None = None,
        backend: str = "auto",
    ):
        super().__init__()
        check_count(mlp_hidden, f"{type(self).__name__}: mlp_hidden", minimum=0, error=LayerError)
        check_sizes(
            type(self).__name__,
            sizes={"hidden_size": hidden_size, "num_layers": num_layers, "embedding_dim": embedding_dim,
                   "num_classes": num_classes},
            dropouts={"embedding_dropout": embedding_dropout, "vertical_dropout": vertical_dropout,
                      "recurrent_dropout": recurrent_dropout},
        )  # fmt: skip
        self.embedding = word_embedding(vocab_size, embedding_dim, freeze_embeddings)
        self.embedding_dropout = nn.Dropout(embedding_dropout)
        self.stack = RationalStack.of(
            layer,
            embedding_dim,
            hidden_size,
            num_layers,
            bidirectional=bidirectional,
            dense=dense,
            vertical_dropout=vertical_dropout,
            recurrent_dropout=recurrent_dropout,
            layer_norm=layer_norm,
            backend=backend,
        )
        self.bidirectional = bidirectional
        self.frame = check_frame(frame, vocab_size)
        if mlp_hidden == 0:
            self.head = nn.Sequential(nn.Dropout(vertical_dropout), nn.Linear(self.stack.output_size, num_classes))
        else:
            self.head = nn.Sequential(
                nn.Dropout(vertical_dropout),
                nn.Linear(self.stack.output_size, mlp_hidden),
                nn.Tanh(),
                nn.Linear(mlp_hidden, num_classes),
            )

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """Logits (B, C) or (B, T, V) of ``tokens`` (B, T) ids in 0..vocab_size-1 and ``lengths`` (B,) in 0..T.

        Raises:
            LayerError: tokens or lengths that do not fit (the message names which and why).
        """
        tokens, lengths = check_token_batch(self.embedding, tokens, lengths, type(self).__name__)
        if self.frame is not None:
            tokens, lengths = frame_tokens(tokens, lengths, **self.frame)
        h, _ = self.stack(self.embedding_dropout(self.embedding(tokens)), lengths)
        return self.head(last_states(h, lengths, self.bidirectional))


class RationalLanguageModel(nn.Module):
    """Embedding (+ dropout) -> a unidirectional ``RationalStack`` of ``layer`` -> dropout -> next-token logits.

    ``layer`` as in ``RationalClassifier``; the logits have shape (B, T, V). ``start``: None, or a token id that
    every sequence (every stream, in ``stream``) is read after, its own logits dropped (rational-recurrences'
    language model starts from the state its ``<s>`` leaves; ``kleene convert``). ``layers``: None, or one dict
    per layer of options that layer takes instead of the shared ones (``hidden_size`` and the layer's own keywords,
    e.g. a QRNN's ``window``), as awd-lstm-lm's QRNN language model has (``kleene convert``).
    """

    task = "language_model"

    def __init__(
        self,
        vocab_size: int,
        layer: LayerFactory,
        *,
        hidden_size: int = 256,
        num_layers: int = 2,
        embedding_dim: int = 128,
        embedding_dropout: float = 0.0,
        vertical_dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        layer_norm: bool = False,
        start: int | None = None,
        layers: list[dict[str, Any]] | None = None,
        backend: str = "auto",
    ):
        super().__init__()
        if layers is not None and (
            not isinstance(layers, list)
            or len(layers) != num_layers
            or not all(isinstance(options, dict) and all(isinstance(k, str) for k in options) for options in layers)
        ):
            raise LayerError(f"layers must be None or a list of num_layers = {num_layers} dicts; got {layers!r}")
        if start is not None:
            check_count(start, f"{type(self).__name__}: start", minimum=0, error=LayerError)
            if start >= vocab_size:
                raise LayerError(f"{type(self).__name__}: start = {start} is not a token id below {vocab_size}")
        self.start = start
        check_sizes(
            type(self).__name__,
            sizes={"vocab_size": vocab_size, "hidden_size": hidden_size, "num_layers": num_layers,
                   "embedding_dim": embedding_dim},
            dropouts={"embedding_dropout": embedding_dropout, "vertical_dropout": vertical_dropout,
                      "recurrent_dropout": recurrent_dropout},
        )  # fmt: skip
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.embedding_dropout = nn.Dropout(embedding_dropout)
        if layers is None:
            self.stack = RationalStack.of(
                layer,
                embedding_dim,
                hidden_size,
                num_layers,
                vertical_dropout=vertical_dropout,
                recurrent_dropout=recurrent_dropout,
                layer_norm=layer_norm,
                backend=backend,
            )
        else:
            per_layer = [{"hidden_size": hidden_size, "backend": backend, **options} for options in layers]
            self.stack = RationalStack(
                embedding_dim,
                num_layers,
                lambda size, index: layer(size, **per_layer[index]),
                vertical_dropout=vertical_dropout,
                recurrent_dropout=recurrent_dropout,
                layer_norm=layer_norm,
            )
        self.dropout = nn.Dropout(vertical_dropout)
        self.decoder = nn.Linear(self.stack.output_size, vocab_size)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """Logits (B, C) or (B, T, V) of ``tokens`` (B, T) ids in 0..vocab_size-1 and ``lengths`` (B,) in 0..T.

        Raises:
            LayerError: tokens or lengths that do not fit (the message names which and why).
        """
        tokens, lengths = check_token_batch(self.embedding, tokens, lengths, type(self).__name__)
        if self.start is not None:
            tokens, lengths = self.started(tokens), lengths + 1
        h, _ = self.stack(self.embedding_dropout(self.embedding(tokens)), lengths)
        return self.decoder(self.dropout(h[:, 0 if self.start is None else 1 :]))

    def started(self, tokens: Tensor) -> Tensor:
        """``tokens`` (B, T) after the ``start`` token (B, 1 + T) (unchanged without one)."""
        if self.start is None:
            return tokens
        return torch.cat([tokens.new_full((tokens.shape[0], 1), self.start), tokens], 1)

    def stream(self, tokens: Tensor, states: Sequence[StreamState] | None = None) -> tuple[Tensor, list[StreamState]]:
        """Logits of ``tokens`` (B, T) continuing the streams whose previous chunk left ``states`` (None: new
        streams, read after ``start`` if any), and the states for the next chunk (``RationalStack.stream``)."""
        if states is None and self.start is not None:
            tokens = self.started(tokens)
            h, new_states = self.stack.stream(self.embedding_dropout(self.embedding(tokens)), states)
            return self.decoder(self.dropout(h[:, 1:])), new_states
        h, new_states = self.stack.stream(self.embedding_dropout(self.embedding(tokens)), states)
        return self.decoder(self.dropout(h)), new_states


class RRNNClassifier(RationalClassifier):
    """RRNN(kind) text classifier (Rational Recurrences §6.3: 2 layers, final states, 2-layer tanh MLP).

    ``semiring`` and ``activation`` as in ``RRNNLayer``; ``options``: those of ``RationalClassifier`` (hidden_size
    128, num_layers 2, dropouts, ...).
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        kind: str = "B",
        *,
        output_gate: bool = False,
        semiring: str | None = None,
        activation: str = "tanh",
        **options: Any,
    ):
        layer = partial(RRNNLayer, kind=kind, output_gate=output_gate, semiring=semiring, activation=activation)
        super().__init__(vocab_size, num_classes, layer, **options)


class RRNNLanguageModel(RationalLanguageModel):
    """RRNN(kind) language model (Rational Recurrences §6.2; output gates on by default, as there).

    ``semiring`` and ``activation`` as in ``RRNNLayer``; ``options``: those of ``RationalLanguageModel``
    (hidden_size 256, num_layers 2, dropouts, ...).
    """

    def __init__(
        self,
        vocab_size: int,
        kind: str = "B",
        *,
        output_gate: bool = True,
        semiring: str | None = None,
        activation: str = "tanh",
        **options: Any,
    ):
        layer = partial(RRNNLayer, kind=kind, output_gate=output_gate, semiring=semiring, activation=activation)
        super().__init__(vocab_size, layer, **options)


def task_builder(
    classifier: Callable[..., nn.Module], language_model: Callable[..., nn.Module], **fixed: Any
) -> Callable[..., nn.Module]:
    """A registry builder: a classifier when the trainer passes ``num_classes``, else a language model."""

    def build(vocab_size: int, num_classes: int | None = None, **kwargs: Any) -> nn.Module:
        if num_classes is None:
            return language_model(vocab_size, **fixed, **kwargs)
        return classifier(vocab_size, num_classes, **fixed, **kwargs)

    return build


for _name, _kind in (("rrnn-b", "B"), ("rrnn-b-maxplus", "B-maxplus"), ("rrnn-c", "C"), ("rrnn-f", "F")):
    register_model(_name, task_builder(RRNNClassifier, RRNNLanguageModel, kind=_kind))
