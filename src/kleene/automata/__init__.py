"""kleene.automata: semirings, labels, the WFSA type and its algorithms.

Knows nothing of neural networks; torch appears only as a batched array backend.
"""

from kleene.automata.algorithms import (
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
from kleene.automata.att import read_att, read_symbols, write_att, write_symbols
from kleene.automata.batched import DenseWFSA, batched_forward
from kleene.automata.draw import to_dot
from kleene.automata.equivalence import Counterexample, EquivalenceResult, equivalent
from kleene.automata.jsonio import from_json, to_json
from kleene.automata.labels import ANY, EPSILON, AnySymbol, Epsilon, Label, NoneOf, OneOf, Sym, SymbolTable
from kleene.automata.nxio import from_networkx, to_networkx
from kleene.automata.ops import bind, concat, intersect, kleene_plus, kleene_star, remove_epsilon, reverse, trim, union
from kleene.automata.semiring import (
    BOOLEAN,
    LOG,
    MAX_PLUS,
    MAX_TIMES,
    MIN_PLUS,
    REAL,
    SEMIRINGS,
    KernelAlgebra,
    KernelOp,
    Semiring,
    get_semiring,
    register_semiring,
)
from kleene.automata.weights import ALPHA, parse_weight, sigmoid, weight_functions
from kleene.automata.wfsa import WFSA, Arc
from kleene.errors import (
    AlphabetError,
    DivergenceError,
    FormatError,
    KleeneError,
    SemiringError,
    UnknownStateError,
    WeightError,
)

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
    "KernelAlgebra",
    "KernelOp",
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
    "bind",
    "closure_matrix",
    "concat",
    "equivalent",
    "from_json",
    "from_networkx",
    "get_semiring",
    "intersect",
    "kleene_plus",
    "kleene_star",
    "parse_weight",
    "pathsum",
    "read_att",
    "read_symbols",
    "register_semiring",
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
