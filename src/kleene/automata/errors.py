"""The kleene exception hierarchy: every error names what is wrong and where."""

from __future__ import annotations


class KleeneError(Exception):
    """Base class of every error kleene raises on purpose."""


class UnknownStateError(KleeneError, KeyError):
    """A state name or index that the automaton does not have."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class AlphabetError(KleeneError, ValueError):
    """A symbol outside the automaton's alphabet, or a label that needs one."""


class WeightError(KleeneError, ValueError):
    """A weight outside the semiring's domain (NaN, negative for max-times, ...)."""


class DivergenceError(KleeneError, ArithmeticError):
    """A Kleene star (epsilon closure, pathsum) whose series does not converge."""


class FormatError(KleeneError, ValueError):
    """Malformed AT&T text or JSON; the message names the line."""


class SemiringError(KleeneError, ValueError):
    """An unknown semiring name or an operation the semiring does not support."""


class BudgetExceededError(KleeneError, RuntimeError):
    """An operation that would build more states than its budget allows (e.g. determinizing without the twins
    property, which never terminates)."""


class ArgumentError(KleeneError, ValueError):
    """An argument outside its documented range (a negative count, an unknown option, ...)."""
