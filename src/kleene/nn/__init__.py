"""kleene.nn: trainable layers built from automata, delayed RNNs, and the training utilities."""

from .checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from .delayed import ConversionError, Delayed, DelayedStack, delayed_from_stacked, delayed_loss_mask
from .isan import ISANClassifier, ISANLanguageModel, ISANLayer
from .qrnn import QRNNClassifier, QRNNEncoderDecoder, QRNNLanguageModel, QRNNLayer
from .rcnn import RCNNClassifier, RCNNLanguageModel, RCNNLayer
from .registry import UnknownModelError, build_model, register_model, registered_models
from .rrnn import RationalLayer, RationalStack, RRNNClassifier, RRNNLanguageModel, RRNNLayer
from .sopa import SoftPatterns, SoPaClassifier, SoPaError, from_soft_patterns
from .sru import SRUClassifier, SRULanguageModel, SRULayer
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
__all__ += [  # the rational layers (issue 5, part B)
    "ISANClassifier", "ISANLanguageModel", "ISANLayer", "QRNNClassifier", "QRNNEncoderDecoder", "QRNNLanguageModel",
    "QRNNLayer", "RCNNClassifier", "RCNNLanguageModel", "RCNNLayer", "RRNNClassifier", "RRNNLanguageModel",
    "RRNNLayer", "RationalLayer", "RationalStack", "SRUClassifier", "SRULanguageModel", "SRULayer", "SoPaClassifier",
    "SoPaError", "SoftPatterns", "from_soft_patterns",
]  # fmt: skip
