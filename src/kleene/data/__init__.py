"""kleene.data: dataset loaders (vendored SST-2, tiny-shakespeare, GloVe; subj, CR, MR, PTB from a data root),
vocabularies, batching and cross-validation folds."""

from kleene.data.batching import Batch, classification_batches, language_model_batches, pad_sequences
from kleene.data.datasets import (
    CLASSIFICATION,
    LANGUAGE_MODELLING,
    ClassificationData,
    DataWarning,
    Example,
    LanguageModelData,
    UnknownDatasetError,
    cross_validation_folds,
    is_data_path,
    load,
    load_classification,
    load_labelled,
    load_language_model,
    load_text,
    read_classification_file,
)
from kleene.data.embeddings import GLOVE_DIM, glove_matrix, load_glove
from kleene.data.sources import VENDOR_DIR, DatasetNotFoundError, data_roots, find_file
from kleene.data.vocab import PAD, UNK, Vocabulary
from kleene.errors import DataError

__all__ = [
    "CLASSIFICATION",
    "GLOVE_DIM",
    "LANGUAGE_MODELLING",
    "PAD",
    "UNK",
    "VENDOR_DIR",
    "Batch",
    "ClassificationData",
    "DataError",
    "DataWarning",
    "DatasetNotFoundError",
    "Example",
    "LanguageModelData",
    "UnknownDatasetError",
    "Vocabulary",
    "classification_batches",
    "cross_validation_folds",
    "data_roots",
    "find_file",
    "glove_matrix",
    "is_data_path",
    "language_model_batches",
    "load",
    "load_classification",
    "load_glove",
    "load_labelled",
    "load_language_model",
    "load_text",
    "pad_sequences",
    "read_classification_file",
]
