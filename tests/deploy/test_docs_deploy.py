"""docs/deploy.md runs: its Python blocks in order, and its onnxruntime example with torch and kleene unimportable.

tests/test_docs.py leaves this page to this test (``RUN_ELSEWHERE``), which runs every block as that test would
(``as_a_reader``), the third in a fresh namespace (it stands alone), and checks what the first two computed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.test_docs import ROOT, as_a_reader, python_blocks

pytest.importorskip("onnxruntime")

DOC = ROOT / "docs/deploy.md"


@pytest.mark.slow
def test_deploy_doc_runs_and_its_onnxruntime_example_equals_eager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = [code for _, code, reason in python_blocks(DOC) if reason is None]
    assert len(blocks) == len(python_blocks(DOC)) == 3
    as_a_reader(tmp_path, monkeypatch)
    namespace: dict[str, object] = {"__name__": "__doc_snippet__"}
    for number, block in enumerate(blocks[:2], start=1):
        exec(compile(block, f"docs/deploy.md python block {number}", "exec"), namespace)
    # block 2 (the onnxruntime program) read the files block 1 wrote; its logits are the eager model's
    model, tokens, lengths, logits = (namespace[k] for k in ("model", "tokens", "lengths", "logits"))
    assert isinstance(model, torch.nn.Module) and isinstance(logits, np.ndarray)
    assert isinstance(tokens, np.ndarray) and isinstance(lengths, np.ndarray)
    assert tokens[2].tolist() == [10, 0, 0, 0, 0] and lengths.tolist() == [5, 5, 1, 0]  # "long", ""
    assert not tokens[3].any()
    assert tokens[0, 2] == 1  # "," is not in the vocabulary
    with torch.no_grad():
        eager = model.eval()(torch.from_numpy(tokens), torch.from_numpy(lengths)).numpy()
    assert np.abs(logits - eager).max() <= 1e-5 * np.abs(eager).max()
    exec(compile(blocks[2], "docs/deploy.md python block 3", "exec"), {"__name__": "__doc_snippet__"})
    # the same program in a process where importing torch or kleene fails
    guard = "import sys\nsys.modules['torch'] = None\nsys.modules['kleene'] = None\n"
    result = subprocess.run(
        [sys.executable, "-c", guard + blocks[1]], capture_output=True, text=True, check=False, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    labels = re.findall(r"'(\w+)'", result.stdout.strip().splitlines()[-1])
    assert labels == [("negative", "positive")[k] for k in logits.argmax(-1)]
