"""DistributedDataParallel: every registered model trains on 2 processes (gloo), each on its own shard of the
batches, and its parameters stay identical.

Issue 12: several layers held an empty ``(0, dim)`` constants parameter that never gets a gradient, and DDP stopped
at step 2. One torchrun runs tests/nn/ddp_train_all.py, which loops over the registered models (tiny sizes, 4 steps).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kleene.nn import build_model, registered_models

from .ddp_train_all import RATIONAL, TINY

SCRIPT = Path(__file__).with_name("ddp_train_all.py")
SRC = Path(__file__).resolve().parents[2] / "src"
#: The models kleene registers itself (the issue's list: none may crash under DDP).
BUILTIN_MODELS = (
    "bilstm", "cnn", "isan", "lstm", "lstm-lm", "qrnn", "rcnn", "regex", "rrnn-b", "rrnn-b-maxplus", "rrnn-c", "rrnn-f",
    "sopa", "sru",
)


def test_every_parameter_of_every_model_is_trainable() -> None:
    """No parameter without a gradient: a frozen parameter is a buffer or has requires_grad False on purpose."""
    for name in registered_models():
        # the DDP script's tiny sizes (the defaults would compile, e.g., ISAN's 800 KB kernel for nothing here)
        kwargs: dict[str, object] = dict(TINY.get(name, RATIONAL)) if name in BUILTIN_MODELS else {}
        kwargs.update({"vocab_size": 10} if name.endswith("-lm") else {"vocab_size": 10, "num_classes": 2})
        model = build_model(name, **kwargs)
        empty = [key for key, value in model.named_parameters() if value.numel() == 0]
        assert not empty, f"{name}: empty parameters {empty}"


@pytest.mark.skipif(sys.platform == "win32", reason="gloo over torchrun is tested on Linux")
@pytest.mark.slow
def test_torchrun_trains_every_registered_model_with_identical_parameters() -> None:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(SCRIPT)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    trained = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("ok ")]
    assert done.returncode == 0, done.stderr[-3000:]
    # the script's own registry (this process may hold models other tests registered)
    (models,) = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("models ")]
    assert trained == models
    assert set(models) >= set(BUILTIN_MODELS)
