"""The automata package's exceptions: they live in :mod:`kleene.errors`, re-exported here for convenience."""

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
    "AlphabetError",
    "ArgumentError",
    "BudgetExceededError",
    "DivergenceError",
    "FormatError",
    "KleeneError",
    "SemiringError",
    "UnknownStateError",
    "WeightError",
]
