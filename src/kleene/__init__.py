"""kleene: weighted finite-state automata with neural compilation."""

__version__ = "0.1.0"
