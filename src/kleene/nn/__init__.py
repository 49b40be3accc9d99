"""kleene.nn: trainable layers built from automata, delayed RNNs, and the training utilities."""

from .checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from .delayed import ConversionError, Delayed, DelayedStack, delayed_from_stacked, delayed_loss_mask
from .registry import UnknownModelError, build_model, register_model, registered_models
from .training import TrainConfig, Trainer, TrainingError, TrainResult, prepare, seed_everything, train

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "ConversionError",
    "Delayed",
    "DelayedStack",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingError",
    "UnknownModelError",
    "build_model",
    "delayed_from_stacked",
    "delayed_loss_mask",
    "load_checkpoint",
    "prepare",
    "register_model",
    "registered_models",
    "save_checkpoint",
    "seed_everything",
    "train",
]
