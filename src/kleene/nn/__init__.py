"""kleene.nn: trainable layers built from automata, delayed RNNs, and the training utilities."""

from .delayed import ConversionError, Delayed, DelayedStack, delayed_from_stacked, delayed_loss_mask

__all__ = ["ConversionError", "Delayed", "DelayedStack", "delayed_from_stacked", "delayed_loss_mask"]
