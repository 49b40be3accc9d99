"""Exact extraction: a trained rational cell taken apart into one WFSA per hidden unit (or pattern).

The structure comes from the prover: the cell's recurrence (a ``kleene.rational.zoo`` entry) is
proved rational, which yields a symbolic automaton whose weight functions are parameterised by
the recurrence's input functions (``phi_c = f(x_t)``, ``mu_c = (1 − f(x_t))·g(x_t)``). Extraction
fills that structure from the trained parameters:

- every input function of a unit is ``act(w · v_x + b)`` of the consumed word's feature vector
  ``v_x`` (its embedding row), an ``AffineInput``;
- the *constant* automaton of a unit over a word list has one ``Sym(word)`` arc per word and
  structural arc, its weight computed from the word's embedding (``Extraction.wfsa``);
- the *symbolic* automaton keeps ``∀α`` arcs whose weights are sympy expressions of the
  embedding coordinates ``v1(α) .. vn(α)`` with the learned numbers inlined, so it scores words
  outside any list given their vectors (``Extraction.symbolic`` and ``Extraction.environment``).

The extraction verifies itself: ``Extraction.verify`` runs every unit's Forward over real
sentences (batched, ``kleene.automata.batched_forward``) and compares the prefix scores with the
hidden states the module computed, recording the maximum absolute error.

Conventions of foreign modules (each adapter's docstring says what it reads):

- ``torch.nn.RNN`` can only run tanh or ReLU; its weights are read as the *linear* Elman network
  ``h_t = W_hh h_{t−1} + W_ih x_t + b`` (Corollary 14) only when the caller says
  ``activation="identity"``: one automaton over all d units (like ISAN), one final state per unit.
- pytorch-qrnn's ``ForgetMult`` computes ``c_t = F_t ⊙ z_t + (1 − F_t) ⊙ c_{t−1}``: its gate ``F``
  is the paper's ``1 − f``. Since ``1 − σ(a) = σ(−a)``, the paper's forget gate is the sigmoid of
  the negated pre-activation, which is what ``from_qrnn_weights`` uses.
- the ``sru`` package (v2) feeds ``v ⊙ c_{t−1}`` into its gates; with ``weight_c`` zero its cell
  state is the 2017 SRU recurrence ``c_t = f ⊙ c_{t−1} + (1 − f) ⊙ x̃_t``.
- kleene's own layers: ``from_kleene_layer`` (RRNN, SRU-2017, QRNN, RCNN, ISAN, read by the family a layer
  declares, ``RationalLayer.cell_family``; ``layers``) and ``from_sopa`` (one automaton per soft pattern scoring a
  whole padded document; ``sopa``); SoPa's patterns as hard automata (``hard``) and its best spans and paths as
  the layer finds them (``reader``); trained rule layers read back as rules (``read_back``; ``rules``).

Modules: ``core`` (``AffineInput``, ``Unit``, ``Structure``, ``Extraction``), ``foreign`` (adapters of foreign
modules), ``layers`` (kleene's rational layers), ``sopa`` (soft patterns), ``hard`` and ``reader`` (SoPa's hard
patterns and spans), ``rules`` (the rules read-back).
"""

from kleene.extract.core import (
    ACTIVATIONS,
    AffineInput,
    Extraction,
    ExtractionError,
    Structure,
    Unit,
    proved_automata,
)
from kleene.extract.foreign import from_linear_rnn, from_qrnn_weights, from_sru_cell, from_torch_rnn, qrnn_output_gate
from kleene.extract.layers import (
    from_kleene_layer,
    kleene_layer_states,
    qrnn_layer_output_gate,
)
from kleene.extract.rules import READ_BACK_THRESHOLD, HardArc, RuleReadback, hard_automata, read_back
from kleene.extract.sopa import REFERENCE_ZERO, from_sopa, from_sopa_patterns, sopa_document

__all__ = [
    "ACTIVATIONS",
    "READ_BACK_THRESHOLD",
    "REFERENCE_ZERO",
    "AffineInput",
    "Extraction",
    "ExtractionError",
    "HardArc",
    "RuleReadback",
    "Structure",
    "Unit",
    "from_kleene_layer",
    "from_linear_rnn",
    "from_qrnn_weights",
    "from_sopa",
    "from_sopa_patterns",
    "from_sru_cell",
    "from_torch_rnn",
    "hard_automata",
    "kleene_layer_states",
    "proved_automata",
    "qrnn_layer_output_gate",
    "qrnn_output_gate",
    "read_back",
    "sopa_document",
]
