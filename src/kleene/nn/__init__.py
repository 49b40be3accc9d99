"""kleene.nn: trainable layers built from automata, delayed RNNs, and the training utilities."""

from kleene.nn.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from kleene.nn.delayed import ConversionError, Delayed, DelayedStack, delayed_from_stacked, delayed_loss_mask
from kleene.nn.generate import Generation, generate
from kleene.nn.isan import ISANClassifier, ISANLanguageModel, ISANLayer
from kleene.nn.qrnn import QRNNClassifier, QRNNEncoderDecoder, QRNNLanguageModel, QRNNLayer
from kleene.nn.rcnn import RCNNClassifier, RCNNLanguageModel, RCNNLayer
from kleene.nn.registry import ModelConfigError, UnknownModelError, build_model, register_model, registered_models
from kleene.nn.rrnn import RationalLayer, RationalStack, RRNNClassifier, RRNNLanguageModel, RRNNLayer
from kleene.nn.rules import (
    AutomatonLayer,
    RegexClassifier,
    RuleError,
    RuleSet,
    RulesPredictor,
    load_rules,
    parse_rules,
)
from kleene.nn.sopa import SoftPatterns, SoPaClassifier, SoPaError
from kleene.nn.sru import SRUClassifier, SRULanguageModel, SRULayer
from kleene.nn.training import TrainConfig, Trainer, TrainingError, TrainResult, prepare, seed_everything, train

__all__ = [
    "AutomatonLayer",
    "Checkpoint",
    "CheckpointError",
    "ConversionError",
    "Delayed",
    "DelayedStack",
    "Generation",
    "ISANClassifier",
    "ISANLanguageModel",
    "ISANLayer",
    "ModelConfigError",
    "QRNNClassifier",
    "QRNNEncoderDecoder",
    "QRNNLanguageModel",
    "QRNNLayer",
    "RCNNClassifier",
    "RCNNLanguageModel",
    "RCNNLayer",
    "RRNNClassifier",
    "RRNNLanguageModel",
    "RRNNLayer",
    "RationalLayer",
    "RationalStack",
    "RegexClassifier",
    "RuleError",
    "RuleSet",
    "RulesPredictor",
    "SRUClassifier",
    "SRULanguageModel",
    "SRULayer",
    "SoPaClassifier",
    "SoPaError",
    "SoftPatterns",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingError",
    "UnknownModelError",
    "build_model",
    "delayed_from_stacked",
    "delayed_loss_mask",
    "generate",
    "load_checkpoint",
    "load_rules",
    "parse_rules",
    "prepare",
    "register_model",
    "registered_models",
    "save_checkpoint",
    "seed_everything",
    "train",
]
