"""kleene.automata: semirings, labels, the WFSA type and its algorithms.

Knows nothing of neural networks; torch appears only as a batched array backend.
"""

from kleene.automata.algorithms import (
    SpanScores,
    Step,
    ViterbiPath,
    all_spans,
    pathsum,
    score,
    score_batch,
    score_symbolic,
    viterbi,
)
from kleene.automata.att import read_att, read_symbols, write_att, write_symbols
from kleene.automata.batched import DenseWFSA, batched_forward
from kleene.automata.determinize import determinize, is_deterministic
from kleene.automata.draw import to_dot
from kleene.automata.equivalence import Counterexample, EquivalenceResult, equivalent
from kleene.automata.jsonio import from_json, to_json
from kleene.automata.labels import ANY, EPSILON, AnySymbol, Epsilon, Label, NoneOf, OneOf, Sym, SymbolTable
from kleene.automata.minimize import minimize, reduce
from kleene.automata.minterms import Minterms, minterms
from kleene.automata.nxio import from_networkx, to_networkx
from kleene.automata.ops import bind, concat, intersect, kleene_plus, kleene_star, remove_epsilon, reverse, trim, union
from kleene.automata.paths import random_paths, shortest_path_automaton, shortest_paths
from kleene.automata.push import push, state_distances
from kleene.automata.regexp import regex, to_regex
from kleene.automata.semiring import (
    BOOLEAN,
    LOG,
    MAX_PLUS,
    MAX_TIMES,
    MIN_PLUS,
    REAL,
    SEMIRINGS,
    Semiring,
    get_semiring,
    register_semiring,
)
from kleene.automata.star import closure_matrix
from kleene.automata.weights import ALPHA, parse_weight, sigmoid, weight_functions
from kleene.automata.wfsa import WFSA, Arc
from kleene.errors import (
    AlphabetError,
    ArgumentError,
    BudgetExceededError,
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
    "ArgumentError",
    "BudgetExceededError",
    "Counterexample",
    "DenseWFSA",
    "DivergenceError",
    "Epsilon",
    "EquivalenceResult",
    "FormatError",
    "KleeneError",
    "Label",
    "Minterms",
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
    "determinize",
    "equivalent",
    "from_json",
    "from_networkx",
    "get_semiring",
    "intersect",
    "is_deterministic",
    "kleene_plus",
    "kleene_star",
    "minimize",
    "minterms",
    "parse_weight",
    "pathsum",
    "push",
    "random_paths",
    "read_att",
    "read_symbols",
    "reduce",
    "regex",
    "register_semiring",
    "remove_epsilon",
    "reverse",
    "score",
    "score_batch",
    "score_symbolic",
    "shortest_path_automaton",
    "shortest_paths",
    "sigmoid",
    "state_distances",
    "to_dot",
    "to_json",
    "to_networkx",
    "to_regex",
    "trim",
    "union",
    "viterbi",
    "weight_functions",
    "write_att",
    "write_symbols",
]
