"""A small trainer for registered models: seeds, Adam, gradient clipping, early stopping and learning-rate halving,
a progress bar, evaluation, checkpoints, and DistributedDataParallel on several processes.

Schedule (Rational Recurrences, Appendix E): the development metric (accuracy for classifiers, loss for language
models) is measured after every epoch (or every ``eval_every`` steps); the learning rate is halved after
``halve_after`` evaluations without improvement and training stops after ``patience`` evaluations without
improvement. The best model on the development set is the one kept, evaluated on the test set and saved.

Language models: by default the stream is cut into independent windows of ``window`` tokens (shuffled, each from
the initial state). With ``carry_state`` the stream is cut into ``batch_size`` contiguous rows read ``window`` tokens
at a time in order, and each window continues from the (detached) ``StreamState`` of the one before: truncated
backpropagation through time over the whole stream, for models with ``stream(tokens, states)`` (the rational LMs).

Distributed: under ``torchrun`` (``WORLD_SIZE`` > 1) ``init_distributed()`` joins a gloo process group; every rank
trains on its own shard of each epoch's batches, DDP averages the gradients, all ranks evaluate the whole development
set (so that they take the same schedule decisions), and rank 0 alone writes the checkpoint and shows progress.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import random
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from kleene.data import (
    Batch,
    ClassificationData,
    LanguageModelData,
    Vocabulary,
    classification_batches,
    glove_matrix,
    is_data_path,
    language_model_batches,
    load,
    load_glove,
)
from kleene.data.checks import check_count, check_real
from kleene.errors import DataError, FormatError, TrainingError
from kleene.nn.checkpoint import check_checkpoint_target, save_checkpoint
from kleene.nn.modes import inference
from kleene.nn.registry import build_model, model_builder, model_tasks

__all__ = [
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingError",
    "TrainingWarning",
    "init_distributed",
    "prepare",
    "seed_everything",
    "stream_batches",
    "train",
]


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators.

    Caution:
        Seeds this process's global generators only (not CUDA's per-device state beyond ``torch.manual_seed``, not
        other processes).
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def init_distributed() -> tuple[int, int]:
    """(rank, world size); joins a gloo process group when launched by torchrun with ``WORLD_SIZE`` > 1."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1:
        dist.init_process_group("gloo")
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def stream_batches(ids: list[int], batch_size: int, window: int) -> list[Batch]:
    """The stream cut into ``batch_size`` contiguous rows, read ``window`` inputs at a time: batch k's row i continues
    batch k-1's row i (the last batch may be narrower). Targets are the next tokens.

    Raises:
        TrainingError: a stream too short for one token per row, or a batch size or window below 1.
    """
    if batch_size < 1 or window < 1:
        raise TrainingError(f"batch_size and window must be >= 1; got {batch_size} and {window}")
    stream = torch.as_tensor(ids, dtype=torch.long)
    row = (len(stream) - 1) // batch_size
    if row == 0:
        raise TrainingError(f"a stream of {len(stream)} tokens is too short for {batch_size} rows of one token + 1")
    inputs = stream[: batch_size * row].view(batch_size, row)
    targets = stream[1 : batch_size * row + 1].view(batch_size, row)
    return [
        Batch(inputs[:, s : s + window], torch.full((batch_size,), min(window, row - s)), targets[:, s : s + window])
        for s in range(0, row, window)
    ]


@dataclass
class TrainConfig:
    """Training settings (stored in the checkpoint).

    Note:
        ``epochs=None`` trains until ``max_steps`` (which it then requires); with both, the first reached stops
        training, and ``fit`` warns (``TrainingWarning``) when ``epochs`` stops it before ``max_steps``.
    Raises:
        TrainingError: a count that is not an integer >= 1 (batch_size, patience, halve_after, window; epochs,
            max_steps and eval_every when given; epochs and max_steps both None), a learning rate that is not a
            finite number > 0, or a weight decay or clipping norm that is not a finite number >= 0.
    """

    epochs: int | None = 10
    max_steps: int | None = None
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    clip: float = 5.0
    patience: int = 30
    halve_after: int = 10
    eval_every: int | None = None
    seed: int = 0
    window: int = 64
    carry_state: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "patience", "halve_after", "window", "max_steps", "eval_every"):
            value = getattr(self, name)
            if value is not None or name not in ("epochs", "max_steps", "eval_every"):
                check_count(value, f"training setting {name}", minimum=1, error=TrainingError)
        if self.epochs is None and self.max_steps is None:
            raise TrainingError("training settings epochs and max_steps are both None: training would never stop")
        check_count(self.seed, "training setting seed", minimum=0, error=TrainingError)
        if check_real(self.lr, "training setting lr", minimum=0.0, error=TrainingError) == 0:
            raise TrainingError("training setting lr must be a finite number > 0, got 0.0")
        check_real(self.weight_decay, "training setting weight_decay", minimum=0.0, error=TrainingError)
        check_real(self.clip, "training setting clip", minimum=0.0, error=TrainingError)
        if not isinstance(self.progress, bool):
            raise TrainingError(f"training setting progress must be True or False, got {self.progress!r}")


@dataclass
class TrainResult:
    """What ``train`` returns: the final ``metrics``, the learning ``curve`` (one mapping per evaluation) and the
    ``checkpoint`` directory (None when nothing was saved)."""

    metrics: dict[str, Any]
    curve: list[dict[str, Any]] = field(default_factory=list)
    checkpoint: Path | None = None


class _Meter:
    """Running loss, accuracy and speed for the progress bar."""

    def __init__(self) -> None:
        self.loss = self.correct = 0.0
        self.count = self.tokens = 0
        self.start = time.perf_counter()

    def add(self, loss: float, count: int, correct: float, tokens: int) -> None:
        self.loss += loss * count
        self.count += count
        self.correct += correct
        self.tokens += tokens

    def summary(self) -> dict[str, float]:
        seconds = max(time.perf_counter() - self.start, 1e-9)
        count = max(self.count, 1)
        return {"loss": self.loss / count, "accuracy": self.correct / count, "tokens_per_s": self.tokens / seconds}


class Trainer:
    """Trains ``model`` (a registered model's module) on ``data`` with ``vocab``; see the module docstring.

    Note:
        ``model_name`` and ``model_kwargs`` are what ``build_model`` needs to rebuild the model from the checkpoint.
    Raises:
        TrainingError: the model's ``task`` does not match the data set.
    """

    def __init__(
        self,
        model: nn.Module,
        data: ClassificationData | LanguageModelData,
        vocab: Vocabulary,
        config: TrainConfig,
        *,
        model_name: str,
        model_kwargs: dict[str, Any],
        metadata: dict[str, Any] | None = None,
    ):
        task = getattr(model, "task", None)
        expected = "classification" if isinstance(data, ClassificationData) else "language_model"
        if task != expected:
            raise TrainingError(f"model {model_name!r} is a {task} model but data set {data.name!r} needs {expected}")
        self.model = model
        #: where the batches go: the model's device (its first parameter's; the CPU without parameters)
        self.device = next((p.device for p in model.parameters()), torch.device("cpu"))
        self.data = data
        self.vocab = vocab
        self.config = config
        self.model_name = model_name
        self.model_kwargs = model_kwargs
        self.metadata = metadata or {}
        self.rank, self.world_size = init_distributed()
        self.is_classifier = expected == "classification"
        if config.carry_state:
            if self.is_classifier:
                raise TrainingError("carry_state is for language models; the data set is a classification one")
            if not callable(getattr(model, "stream", None)):
                raise TrainingError(f"carry_state needs a model with stream(tokens, states); {model_name!r} has none")
            if self.world_size > 1:
                raise TrainingError(f"carry_state runs on one process (WORLD_SIZE is {self.world_size})")
        if self.is_classifier:
            _check_label_ids(data, model_kwargs.get("num_classes"), model_name)  # type: ignore[arg-type]
        self._ids: dict[str, list[int]] = {}
        self._evaluation_batches: dict[str, list[Batch]] = {}  # unshuffled and unsharded: built once per split
        self._optimizer: torch.optim.Optimizer | None = None
        self.network: nn.Module = model
        if self.world_size > 1:
            self.network = nn.parallel.DistributedDataParallel(model)

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """Adam over the trainable parameters, built at first use (building it imports ``torch._dynamo``, seconds
        that evaluation alone does not need)."""
        if self._optimizer is None:
            trainable = [parameter for parameter in self.model.parameters() if parameter.requires_grad]
            self._optimizer = torch.optim.Adam(trainable, lr=self.config.lr, weight_decay=self.config.weight_decay)
        return self._optimizer

    # -- data ----------------------------------------------------------------------------------------------------------
    def batches(self, split: str, *, epoch: int = 0, shard: bool = False) -> list[Batch]:
        """The batches of ``split``; training batches are shuffled per epoch and, with ``shard``, this rank's share.
        The other splits' batches are built once (the same list each call)."""
        if split != "train" and not shard:
            if split not in self._evaluation_batches:
                self._evaluation_batches[split] = self._batches(split, epoch=0, shard=False)
            return self._evaluation_batches[split]
        return self._batches(split, epoch=epoch, shard=shard)

    def _batches(self, split: str, *, epoch: int, shard: bool) -> list[Batch]:
        rank, world = (self.rank, self.world_size) if shard else (0, 1)
        if isinstance(self.data, ClassificationData):
            batcher = partial(classification_batches, self.data.split(split), self.vocab, self.config.batch_size)
        else:
            if split not in self._ids:
                self._ids[split] = self.vocab.encode(self.data.split(split))
            if self.config.carry_state:
                return stream_batches(self._ids[split], self.config.batch_size, self.config.window)
            batcher = partial(language_model_batches, self._ids[split], self.config.batch_size, self.config.window)
        return batcher(shuffle=split == "train", seed=self.config.seed, epoch=epoch, rank=rank, world_size=world)

    def _loss(self, logits: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, float, int]:
        """(mean loss, number of correct predictions, number of predictions)."""
        if self.is_classifier:
            loss = nn.functional.cross_entropy(logits, batch.targets)
            correct = float((logits.argmax(dim=-1) == batch.targets).sum())
            return loss, correct, len(batch.targets)
        flat_logits, flat_targets = logits.reshape(-1, logits.shape[-1]), batch.targets.reshape(-1)
        loss = nn.functional.cross_entropy(flat_logits, flat_targets)
        correct = float((flat_logits.argmax(dim=-1) == flat_targets).sum())
        return loss, correct, flat_targets.numel()

    # -- evaluation ----------------------------------------------------------------------------------------------------
    def evaluate(self, split: str = "dev") -> dict[str, float]:
        """Loss and accuracy on ``split`` (plus perplexity and bits per token for language models)."""
        meter = _Meter()
        states = None
        with inference(self.model):
            for batch in self.batches(split):
                batch = batch.to(self.device)
                logits, states = self._forward(self.model, batch, states)
                loss, correct, count = self._loss(logits, batch)
                meter.add(float(loss), count, correct, batch.num_tokens)
        summary = meter.summary()
        result = {"loss": summary["loss"], "accuracy": summary["accuracy"]}
        if not self.is_classifier:
            result["perplexity"] = math.exp(min(summary["loss"], 700.0))
            result["bits_per_token"] = summary["loss"] / math.log(2)
        return result

    def _better(self, new: dict[str, float], best: dict[str, float] | None) -> bool:
        if best is None:
            return True
        return new["accuracy"] > best["accuracy"] if self.is_classifier else new["loss"] < best["loss"]

    def _forward(self, network: nn.Module, batch: Batch, states: Any) -> tuple[torch.Tensor, Any]:
        """The logits of ``batch``; with ``carry_state`` it continues from ``states`` (None at an epoch's start) and
        returns the detached states for the next batch."""
        if not self.config.carry_state:
            return network(batch.tokens, batch.lengths), None
        logits, new_states = self.model.stream(batch.tokens, states)  # type: ignore[operator]
        return logits, [state.detach() for state in new_states]

    # -- training ------------------------------------------------------------------------------------------------------
    def _steps(self, first: list[Batch]) -> Iterator[tuple[int, Batch]]:
        """(epoch, batch) pairs over all epochs: this rank's share of each epoch's shuffled batches (``first``: those
        of epoch 0, built already)."""
        epochs = range(self.config.epochs) if self.config.epochs is not None else itertools.count()
        for epoch in epochs:
            for batch in first if epoch == 0 else self.batches("train", epoch=epoch, shard=True):
                yield epoch, batch

    def fit(self, out_dir: str | Path | None = None, *, overwrite: bool = True) -> TrainResult:
        """Train; keep the best model on the dev set (the initial model included when the model says
        ``initial_is_candidate``: it is kept when no step beats it); evaluate it on dev and test; save it to
        ``out_dir`` (rank 0).

        Raises:
            CheckpointError: (``overwrite=False``) ``out_dir`` holds a checkpoint already; checked before training.
        """
        config = self.config
        if out_dir is not None and self.rank == 0:
            check_checkpoint_target(out_dir, overwrite=overwrite)
        first_epoch = self.batches("train", epoch=0, shard=True)
        steps_per_epoch = len(first_epoch)
        if steps_per_epoch == 0:
            raise TrainingError(f"data set {self.data.name!r}: no training batches on rank {self.rank}")
        eval_every = config.eval_every or steps_per_epoch
        total = config.epochs * steps_per_epoch if config.epochs is not None else config.max_steps
        if config.max_steps is not None and total is not None:
            if total < config.max_steps and self.rank == 0:
                warnings.warn(
                    f"training stops after {total} steps, before max_steps = {config.max_steps}: epochs = "
                    f"{config.epochs} of {steps_per_epoch} steps each comes first (leave epochs unset to train "
                    f"{config.max_steps} steps)",
                    TrainingWarning,
                    stacklevel=2,
                )
            total = min(total, config.max_steps)
        assert total is not None
        # a model whose initial state is knowledge (``initial_is_candidate``: a rule-initialised network) is a
        # candidate itself, so it is never returned worse on dev than it started
        candidate = getattr(self.model, "initial_is_candidate", False) is True and len(self.batches("dev")) > 0
        best: dict[str, float] | None = self.evaluate("dev") if candidate else None
        best_step = 0
        best_state = copy.deepcopy(self.model.state_dict())
        since_best = since_halving = 0
        curve: list[dict[str, Any]] = []
        meter = _Meter()
        step = 0
        started = time.perf_counter()
        tokens_seen = 0
        with _progress(config.progress and self.rank == 0, total, self.model_name, self.data.name) as update:
            self.model.train()
            states, state_epoch = None, -1
            for epoch, batch in self._steps(first_epoch):
                if epoch != state_epoch:  # each epoch reads the stream from its start
                    states, state_epoch = None, epoch
                batch = batch.to(self.device)
                logits, states = self._forward(self.network, batch, states)
                loss, correct, count = self._loss(logits, batch)
                self.optimizer.zero_grad()
                loss.backward()
                if config.clip > 0:
                    nn.utils.clip_grad_norm_(self.model.parameters(), config.clip)
                self.optimizer.step()
                step += 1
                tokens_seen += batch.num_tokens
                meter.add(float(loss.detach()), count, correct, batch.num_tokens)
                update(step, meter.summary())
                finished = step >= total
                if step % eval_every and not finished:
                    continue
                dev = self.evaluate("dev")
                lr = self.optimizer.param_groups[0]["lr"]
                point = {"step": step, "epoch": epoch, "lr": lr, **_prefixed("train", meter.summary())}
                curve.append({**point, **_prefixed("dev", dev)})
                meter = _Meter()
                if self._better(dev, best):
                    best, best_step, since_best, since_halving = dev, step, 0, 0
                    best_state = copy.deepcopy(self.model.state_dict())
                else:
                    since_best += 1
                    since_halving += 1
                    if since_halving >= config.halve_after:
                        for group in self.optimizer.param_groups:
                            group["lr"] /= 2
                        since_halving = 0
                if finished or since_best >= config.patience:
                    break
        train_seconds = time.perf_counter() - started
        self.model.load_state_dict(best_state)
        # the kept model's dev metrics were measured when it was kept (evaluation is deterministic): not run again
        metrics: dict[str, Any] = {
            **_prefixed("dev", best if best is not None else self.evaluate("dev")),
            **_prefixed("test", self.evaluate("test")),
            "steps": step,
            "best_step": best_step,
            "train_seconds": train_seconds,
            "train_tokens_per_s": tokens_seen * self.world_size / max(train_seconds, 1e-9),
            "parameters": sum(parameter.numel() for parameter in self.model.parameters() if parameter.requires_grad),
            "world_size": self.world_size,
        }
        checkpoint = None
        if out_dir is not None and self.rank == 0:
            checkpoint = save_checkpoint(
                out_dir,
                self.model,
                model_name=self.model_name,
                model_kwargs=self.model_kwargs,
                vocab=self.vocab,
                metrics=metrics,
                curve=curve,
                metadata={**self.metadata, "training": asdict(config), "torch": torch.__version__},
                overwrite=overwrite,
            )
        if self.world_size > 1:
            dist.barrier()
        return TrainResult(metrics, curve, checkpoint)


class TrainingWarning(UserWarning):
    """Training runs, but not as asked (``kleene`` prints it as one ``warning:`` line)."""


def _check_label_ids(data: ClassificationData, num_classes: int | None, model_name: str) -> None:
    """Refuse examples whose class id the model has no output for (data with labels it never saw)."""
    if not isinstance(num_classes, int):
        return
    unseen = sorted({e.label for split in (data.train, data.dev, data.test) for e in split if e.label >= num_classes})
    if unseen:
        names = [data.labels[i] if i < len(data.labels) else str(i) for i in unseen]
        listed = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
        raise TrainingError(
            f"data set {data.name!r} has labels that model {model_name!r} never saw in training: {listed} "
            f"(it has {num_classes} classes, 0..{num_classes - 1})"
        )


def _prefixed(prefix: str, values: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}_{key}": value for key, value in values.items()}


class _progress:
    """A rich progress bar on stderr (loss, accuracy, tokens/s) when enabled, else a no-op; a context manager."""

    def __init__(self, enabled: bool, total: int, model: str, data: str):
        self.enabled = enabled
        self.total = total
        self.description = f"{model} on {data}"

    def __enter__(self) -> Any:
        if not self.enabled:
            return lambda step, summary: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "loss {task.fields[loss]:.4f}  acc {task.fields[accuracy]:.3f}  {task.fields[speed]:,.0f} tok/s"
            ),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self.bar.__enter__()
        task = self.bar.add_task(self.description, total=self.total, loss=float("nan"), accuracy=0.0, speed=0.0)

        def update(step: int, summary: dict[str, float]) -> None:
            self.bar.update(
                task, completed=step, loss=summary["loss"], accuracy=summary["accuracy"], speed=summary["tokens_per_s"]
            )

        return update

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.__exit__(None, None, None)


# -- one call: data, vocabulary, model, training ---------------------------------------------------------------


def prepare(
    model_name: str,
    data_name: str,
    *,
    model_kwargs: dict[str, Any] | None = None,
    fold: int = 0,
    train_size: int | None = None,
    pretrained: str | None = "glove",
    seed: int = 0,
    text_column: str | None = None,
    label_column: str | None = None,
    task: str | None = None,
) -> tuple[nn.Module, ClassificationData | LanguageModelData, Vocabulary, dict[str, Any]]:
    """Load ``data_name``, build its vocabulary and the model; returns (model, data, vocab, full model kwargs).

    Note:
        Classification vocabularies hold the training tokens, plus the dev/test tokens that have a GloVe vector when
        ``pretrained == "glove"`` (whose embeddings are then initialized from GloVe, unit length). ``train_size``
        keeps a seeded random subset of the training examples (for learning curves). A path given as ``data_name``
        is read for the model's task: labelled text for a classifier (``text_column`` / ``label_column`` choose
        its columns, see ``kleene.data.read_labelled_file``), plain text for a language model (``task``: the one the
        model serves, else classification unless ``task="language_model"``). A builder with the
        attribute ``wants_vocabulary`` (rule models) also receives ``vocab`` (the tokens) and ``labels`` (the class
        names).
    Raises:
        TrainingError: a model whose builder declares another ``task`` than the data set's, an unknown
            ``pretrained`` value, or GloVe with an embedding size other than 50.
    """
    if train_size is not None:
        check_count(train_size, "train_size", minimum=1, error=TrainingError)
    if model_kwargs is not None and not isinstance(model_kwargs, dict):
        raise TrainingError(f"model_kwargs must be a dict of keyword arguments, got {model_kwargs!r}")
    seed_everything(seed)
    tasks = model_tasks(model_name)
    if task is not None and task not in tasks:
        raise TrainingError(f"model {model_name!r} cannot be built for task {task!r} (its tasks: {', '.join(tasks)})")
    wanted = task or (tasks[0] if len(tasks) == 1 else None)
    try:
        data = load(data_name, fold, task=wanted, text_column=text_column, label_column=label_column)
    except (FormatError, DataError) as error:
        binary = "not a text file" in str(error)  # no task reads a binary file: no hint
        if wanted is not None or "language_model" not in tasks or not is_data_path(str(data_name)) or binary:
            raise
        raise type(error)(
            f"{error} (to train {model_name!r} as a language model on plain text: --task language_model)"
        ) from error
    task = "classification" if isinstance(data, ClassificationData) else "language_model"
    if tasks and task not in tasks:
        raise TrainingError(f"model {model_name!r} is a {tasks[0]} model but data set {data_name!r} needs {task}")
    if isinstance(data, ClassificationData) and train_size is not None:
        chosen = random.Random(seed).sample(range(len(data.train)), min(train_size, len(data.train)))
        data = ClassificationData(
            data.name, [data.train[i] for i in sorted(chosen)], data.dev, data.test, data.num_classes, data.labels
        )
    kwargs = dict(model_kwargs or {})
    vectors: dict[str, torch.Tensor] | None = None
    if isinstance(data, ClassificationData):
        train_tokens = [token for example in data.train for token in example.tokens]
        extra: list[str] = []
        if pretrained == "glove":  # one read of the file: the dev/test words it knows, and every row's vector
            seen = set(train_tokens)
            other = {token for split in (data.dev, data.test) for example in split for token in example.tokens}
            vectors = load_glove(seen | other)
            extra = sorted(word for word in vectors if word not in seen)
        vocab = Vocabulary.build([train_tokens, extra])
        kwargs.setdefault("num_classes", data.num_classes)
    else:
        vocab = Vocabulary.build([data.train])
    kwargs["vocab_size"] = len(vocab)
    if getattr(model_builder(model_name), "wants_vocabulary", False):  # models built from rules over words
        kwargs["vocab"] = vocab.to_json()
        if isinstance(data, ClassificationData):
            kwargs.setdefault("labels", list(data.labels))
    model = build_model(model_name, **kwargs)
    if pretrained == "glove" and isinstance(data, ClassificationData):
        embedding = getattr(model, "embedding", None)
        if not isinstance(embedding, nn.Embedding) or embedding.embedding_dim != 50:
            raise TrainingError(f"model {model_name!r}: GloVe vectors need an nn.Embedding `embedding` of size 50")
        matrix, _ = glove_matrix(vocab, seed=seed, vectors=vectors)
        with torch.no_grad():
            embedding.weight.copy_(matrix)
    elif pretrained not in (None, "none", "glove"):
        raise TrainingError(f"unknown pretrained embeddings {pretrained!r} (expected 'glove' or none)")
    return model, data, vocab, kwargs


def train(
    model_name: str,
    data_name: str,
    *,
    config: TrainConfig | None = None,
    out_dir: str | Path | None = None,
    model_kwargs: dict[str, Any] | None = None,
    fold: int = 0,
    train_size: int | None = None,
    pretrained: str | None = "glove",
    device: str | torch.device | None = None,
    text_column: str | None = None,
    label_column: str | None = None,
    task: str | None = None,
    overwrite: bool = True,
) -> TrainResult:
    """Train a registered model on a named data set or a user's labelled text (``prepare`` + ``Trainer.fit``), on
    ``device`` (default: the CPU).

    Note:
        A data path is recorded in the checkpoint as an absolute path, so that ``kleene evaluate`` and ``kleene
        report`` find it again from any directory, with the chosen columns and the class names.

    Raises:
        TrainingError: ``config`` is not a ``TrainConfig``.
        CheckpointError: with ``overwrite=False``, ``out_dir`` already holds a checkpoint (refused before any work).
        KleeneError: the errors of ``prepare`` (an unknown model or data set, settings the model refuses, data it
            cannot load).
    """
    config = config or TrainConfig()
    if not isinstance(config, TrainConfig):
        raise TrainingError(f"config must be a TrainConfig, got {type(config).__name__}")
    if out_dir is not None:
        check_checkpoint_target(out_dir, overwrite=overwrite)
    if isinstance(data_name, str) and is_data_path(data_name):
        data_name = str(Path(data_name).expanduser().resolve())
    model, data, vocab, kwargs = prepare(
        model_name,
        data_name,
        model_kwargs=model_kwargs,
        fold=fold,
        train_size=train_size,
        pretrained=pretrained,
        seed=config.seed,
        text_column=text_column,
        label_column=label_column,
        task=task,
    )
    if device is not None:
        model.to(device)
    metadata: dict[str, Any] = {"data": data_name, "fold": fold, "train_size": train_size, "pretrained": pretrained}
    if isinstance(data, ClassificationData):
        metadata.update(text_column=text_column, label_column=label_column, labels=list(data.labels))
    trainer = Trainer(model, data, vocab, config, model_name=model_name, model_kwargs=kwargs, metadata=metadata)
    return trainer.fit(out_dir, overwrite=overwrite)
