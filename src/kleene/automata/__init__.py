"""kleene.automata: semirings, labels, the WFSA type and its algorithms.

Knows nothing of neural networks; torch appears only as a batched array backend.
"""

# AT&T text
# algorithms (forward, viterbi, closure, spans, pathsum, symbolic scores)
from .algorithms import (
    SpanScores,
    Step,
    ViterbiPath,
    all_spans,
    closure_matrix,
    pathsum,
    score,
    score_symbolic,
    viterbi,
)
from .att import read_att, read_symbols, write_att, write_symbols

# batched torch forward
from .batched import DenseWFSA, batched_forward

# drawing
from .draw import to_dot

# equivalence
from .equivalence import Counterexample, EquivalenceResult, equivalent
from .errors import (
    AlphabetError,
    DivergenceError,
    FormatError,
    KleeneError,
    SemiringError,
    UnknownStateError,
    WeightError,
)

# JSON
from .jsonio import from_json, to_json
from .labels import ANY, EPSILON, AnySymbol, Epsilon, Label, NoneOf, OneOf, Sym, SymbolTable

# networkx
from .nxio import from_networkx, to_networkx

# rational operations
from .ops import concat, intersect, kleene_plus, kleene_star, remove_epsilon, reverse, trim, union
from .semiring import BOOLEAN, LOG, MAX_PLUS, MAX_TIMES, MIN_PLUS, REAL, SEMIRINGS, Semiring, get_semiring
from .weights import ALPHA, sigmoid, weight_functions
from .wfsa import WFSA, Arc

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
    "DenseWFSA",
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
    "SpanScores",
    "Step",
    "Sym",
    "SymbolTable",
    "UnknownStateError",
    "ViterbiPath",
    "WeightError",
    "all_spans",
    "batched_forward",
    "closure_matrix",
    "concat",
    "equivalent",
    "from_json",
    "from_networkx",
    "get_semiring",
    "intersect",
    "kleene_plus",
    "kleene_star",
    "pathsum",
    "read_att",
    "read_symbols",
    "remove_epsilon",
    "reverse",
    "score",
    "score_symbolic",
    "sigmoid",
    "to_dot",
    "to_json",
    "to_networkx",
    "trim",
    "union",
    "viterbi",
    "weight_functions",
    "write_att",
    "write_symbols",
]
