"""kleene.automata: semirings, labels, the WFSA type and its algorithms.

Knows nothing of neural networks; torch appears only as a batched array backend.
"""

from .errors import (
    AlphabetError,
    DivergenceError,
    FormatError,
    KleeneError,
    SemiringError,
    UnknownStateError,
    WeightError,
)
from .labels import ANY, EPSILON, AnySymbol, Epsilon, Label, NoneOf, OneOf, Sym, SymbolTable
from .semiring import BOOLEAN, LOG, MAX_PLUS, MAX_TIMES, MIN_PLUS, REAL, SEMIRINGS, Semiring, get_semiring
from .weights import ALPHA, sigmoid, weight_functions
from .wfsa import WFSA, Arc

# algorithms (forward, viterbi, closure, spans, pathsum, symbolic scores)
# batched torch forward
# rational operations
from .ops import concat, intersect, kleene_plus, kleene_star, remove_epsilon, reverse, trim, union
# equivalence
from .equivalence import Counterexample, EquivalenceResult, equivalent
# AT&T text
from .att import read_att, read_symbols, write_att, write_symbols
# JSON
from .jsonio import from_json, to_json
# networkx
from .nxio import from_networkx, to_networkx
# drawing
from .draw import to_dot

__all__ = [
    "ALPHA",
    "ANY",
    "BOOLEAN",
    "EPSILON",
    "LOG",
    "MAX_PLUS",
    "MAX_TIMES",
    "MIN_PLUS",
    "REAL",
    "SEMIRINGS",
    "WFSA",
    "AlphabetError",
    "AnySymbol",
    "Arc",
    "Counterexample",
    "DivergenceError",
    "Epsilon",
    "EquivalenceResult",
    "FormatError",
    "KleeneError",
    "Label",
    "NoneOf",
    "OneOf",
    "Semiring",
    "SemiringError",
    "Sym",
    "SymbolTable",
    "UnknownStateError",
    "WeightError",
    "concat",
    "equivalent",
    "from_json",
    "from_networkx",
    "get_semiring",
    "intersect",
    "kleene_plus",
    "kleene_star",
    "read_att",
    "read_symbols",
    "remove_epsilon",
    "reverse",
    "sigmoid",
    "to_dot",
    "to_json",
    "to_networkx",
    "trim",
    "union",
    "weight_functions",
    "write_att",
    "write_symbols",
]
