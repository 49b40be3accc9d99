"""Run under ``torchrun --nproc_per_node 2``: train every registered model a few steps with DistributedDataParallel
(gloo) on a tiny synthetic data set and check that each rank trains on its own shard (the ranks' first batches
differ) and that every parameter is identical on both ranks and has moved.

Prints one line ``ok MODEL`` per model on rank 0; any failure raises (a non-zero exit of torchrun).
Used by tests/nn/test_ddp.py; not collected by pytest itself.
"""

from __future__ import annotations

import os
import random
import sys

import torch
import torch.distributed as dist

from kleene.data import ClassificationData, Example, LanguageModelData, Vocabulary
from kleene.nn import TrainConfig, Trainer, build_model, registered_models

#: Tiny sizes per model family (the defaults are sized for real data).
RATIONAL = {"hidden_size": 4, "num_layers": 2, "embedding_dim": 8, "mlp_hidden": 4}
TINY = {
    "cnn": {"embedding_dim": 8, "channels": 4, "mlp_hidden": 4, "window": 2},
    "bilstm": {"embedding_dim": 8, "hidden_size": 4, "mlp_hidden": 4},
    "sopa": {"embedding_dim": 8, "patterns": "2-2_3-2", "mlp_hidden": 4},
    "lstm-lm": {"embedding_dim": 8, "hidden_size": 8},
    # the vocabulary main() builds from its words (the trainer passes it to the rule model through prepare)
    "regex": {
        "embedding_dim": 8,
        "rules": {"1": ["good", "great ."], "0": ["bad | dull"]},
        "vocab": ["<pad>", "<unk>", "good", "bad", "film", "plot", "great", "dull", "a", "the"],
    },
}


def synthetic(words: list[str], count: int, seed: int) -> list[Example]:
    rng = random.Random(seed)
    examples = []
    for _ in range(count):
        tokens = tuple(rng.choice(words) for _ in range(rng.randint(1, 6)))
        examples.append(Example(tokens, int("good" in tokens)))
    return examples


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    words = ["good", "bad", "film", "plot", "great", "dull", "a", "the"]
    classification = ClassificationData(
        "toy", synthetic(words, 32, 1), synthetic(words, 8, 2), synthetic(words, 8, 3), num_classes=2
    )
    rng = random.Random(4)
    stream = [rng.choice(words) for _ in range(200)]
    language = LanguageModelData("toy-lm", stream, stream[:60], stream[:60], level="word")
    vocab = Vocabulary.build([words])
    names = sys.argv[1:] or registered_models()
    if rank == 0:
        print("models " + " ".join(names), flush=True)
    for name in names:
        torch.manual_seed(0)  # the same initial weights on both ranks (DDP also broadcasts them)
        kwargs = dict(TINY.get(name, RATIONAL))
        kwargs["vocab_size"] = len(vocab)
        if "vocab" in kwargs:
            assert kwargs["vocab"] == vocab.tokens, (name, vocab.tokens)
        lm = name.endswith("-lm")
        if not lm:
            kwargs["num_classes"] = 2
        model = build_model(name, **kwargs)
        # a rule-initialised model may keep its initial weights when no step beats them on dev (its own test covers
        # that); here the trained state itself must be compared across ranks
        model.initial_is_candidate = False
        initial = {key: value.detach().clone() for key, value in model.named_parameters()}
        config = TrainConfig(epochs=2, max_steps=4, batch_size=4, window=8, progress=False, eval_every=2)
        data = language if lm else classification
        trainer = Trainer(model, data, vocab, config, model_name=name, model_kwargs=kwargs)
        first = trainer.batches("train", shard=True)[0].tokens.tolist()
        firsts: list[object] = [None] * world
        dist.all_gather_object(firsts, first)
        if any(other == firsts[0] for other in firsts[1:]):
            raise AssertionError(f"{name}: two ranks start on the same batch; each must train on its own shard")
        trainer.fit()
        moved = False
        for key, value in model.named_parameters():
            assert value.grad is None or value.requires_grad, key
            gathered = [torch.empty_like(value) for _ in range(world)]
            dist.all_gather(gathered, value.detach().contiguous())
            for other in gathered[1:]:
                if not torch.equal(gathered[0], other):
                    raise AssertionError(f"{name}: parameter {key} differs across ranks")
            moved = moved or (value.requires_grad and not torch.equal(value.detach(), initial[key]))
        if not moved:
            raise AssertionError(f"{name}: no trainable parameter moved; the check would be vacuous")
        if rank == 0:
            print(f"ok {name}", flush=True)
    dist.destroy_process_group()
    sys.stdout.flush()
    # skip the interpreter's teardown: under load, a library's thread torn down at exit can abort the process
    # ("terminate called without an active exception") after every check has passed
    os._exit(0)


if __name__ == "__main__":
    main()
