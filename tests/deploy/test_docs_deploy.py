"""docs/deploy.md runs: its Python blocks in order, and its onnxruntime example with torch and kleene unimportable."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


@pytest.mark.slow
def test_deploy_doc_runs_and_its_onnxruntime_example_equals_eager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = python_blocks()
    assert len(blocks) == 3
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for number, block in enumerate(blocks[:2], start=1):
        exec(compile(block, f"docs/deploy.md python block {number}", "exec"), namespace)
    # block 2 (the onnxruntime program) read the files block 1 wrote; its logits are the eager model's
    model, tokens, lengths, logits = (namespace[k] for k in ("model", "tokens", "lengths", "logits"))
    assert isinstance(model, torch.nn.Module) and isinstance(logits, np.ndarray)
    assert isinstance(tokens, np.ndarray) and isinstance(lengths, np.ndarray)
    assert tokens[2].tolist() == [10, 0, 0, 0, 0] and lengths.tolist() == [5, 5, 1]  # "long"
    assert tokens[0, 2] == 1  # "," is not in the vocabulary
    with torch.no_grad():
        eager = model.eval()(torch.from_numpy(tokens), torch.from_numpy(lengths)).numpy()
    assert np.abs(logits - eager).max() <= 1e-5 * np.abs(eager).max()
    exec(compile(blocks[2], "docs/deploy.md python block 3", "exec"), {})
    # the same program in a process where importing torch or kleene fails
    guard = "import sys\nsys.modules['torch'] = None\nsys.modules['kleene'] = None\n"
    result = subprocess.run(
        [sys.executable, "-c", guard + blocks[1]], capture_output=True, text=True, check=False, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    labels = re.findall(r"'(\w+)'", result.stdout.strip().splitlines()[-1])
    assert labels == [("negative", "positive")[k] for k in logits.argmax(-1)]
