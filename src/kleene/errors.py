"""The kleene exception hierarchy, in one place: every error names what is wrong and where.

Every exception kleene raises on purpose derives from :class:`KleeneError`; each also derives from the built-in
exception a Python user would expect (``ValueError`` for a bad value, ``KeyError`` for an unknown name, ...), so
``except ValueError`` keeps working. The packages re-export the errors they raise.
"""

from __future__ import annotations


class KleeneError(Exception):
    """Base class of every error kleene raises on purpose."""


def shown(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to about ``limit`` characters (its last one kept), for messages that echo a user's input."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-1]}"


class _NamedKeyError(KleeneError, KeyError):
    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


# -- automata ------------------------------------------------------------------------------------------------------
class UnknownStateError(_NamedKeyError):
    """A state name or index that the automaton does not have."""


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


# -- rational (the recurrence language and the prover) ---------------------------------------------------------------
class RecurrenceError(KleeneError, ValueError):
    """A malformed recurrence: an undeclared symbol, a missing update, a bad name."""


# -- compile -------------------------------------------------------------------------------------------------------
class CompileError(KleeneError, ValueError):
    """A template, its inputs or a kernel build is unusable (the message says which and why)."""


class DeployError(KleeneError, ValueError):
    """A model that cannot be deployed as asked: TorchScript, an export that fails, an unusable path or sidecar."""


# -- data ----------------------------------------------------------------------------------------------------------
class UnknownDatasetError(_NamedKeyError):
    """A dataset name kleene does not know."""


class DataError(KleeneError, ValueError):
    """A data argument that cannot be used (a fold, a split, a batch size) or a data set without usable examples."""


class DatasetNotFoundError(KleeneError, FileNotFoundError):
    """A dataset file that is neither vendored nor under any data root; the message lists the paths tried."""


# -- nn ------------------------------------------------------------------------------------------------------------
class LayerError(KleeneError, ValueError):
    """A rational layer configured in a way it cannot run, or given inputs it cannot take (the message says which)."""


class SoPaError(LayerError):
    """A SoPa configuration or a state dict that cannot be used (the message says which)."""


class RuleError(LayerError):
    """A rule set, rules file or automaton that cannot become a rule layer (the message names the rule or line)."""


class ConversionError(KleeneError, ValueError):
    """A stacked network that cannot be converted, or an initial state that Lemma 1 cannot reach."""


class TrainingError(KleeneError, ValueError):
    """A model and data set that do not fit together, or settings that cannot work."""


class CheckpointError(KleeneError, ValueError):
    """A path that is not a kleene checkpoint, or one whose config or weights are malformed."""


class UnknownModelError(_NamedKeyError):
    """A model name nobody registered."""


class OriginalCodeError(KleeneError, ValueError):
    """A model trained with an original implementation (rational-recurrences, pytorch-qrnn, sru) that kleene does not
    reproduce exactly, or a malformed state dict of one (the message names the option, term or key and why)."""


class ModelConfigError(KleeneError, ValueError):
    """Keyword arguments a registered model cannot be built from (an unknown keyword, a wrong type or value)."""


# -- extract -------------------------------------------------------------------------------------------------------
class ExtractionError(KleeneError, ValueError):
    """A module that cannot be extracted exactly (the message names the reason), or bad extraction input."""


class SpectralError(KleeneError, ValueError):
    """Bad input to spectral learning (the message says which)."""


# -- viz -----------------------------------------------------------------------------------------------------------
class InterpretError(KleeneError, ValueError):
    """A model, vocabulary or argument that interpretation cannot use (the message says which)."""


class ReportError(KleeneError, ValueError):
    """A checkpoint or data set the report cannot use (the message says why)."""


class DeviceError(KleeneError, ValueError):
    """A device that is not "cpu", "cuda" or "cuda:N", or one this machine does not have."""
