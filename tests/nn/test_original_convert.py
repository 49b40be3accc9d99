"""``kleene convert --from soft_patterns``: a model saved by soft_patterns.py (built here from the authors'
transcription in test_original_soft_patterns.py) becomes a kleene checkpoint that evaluate, report and extract read,
and whose predictions are the authors' forward on the same text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kleene.cli import main
from kleene.nn import load_checkpoint
from kleene.nn.sopa import parse_pattern_spec
from tests.nn.test_original_soft_patterns import authors_forward, authors_state_dict

WORDS = ["good", "bad", "film", "plot", "great", "dull", "the", "a", "acting", "fine"]
TRAIN = [(1, "good film"), (0, "bad plot"), (1, "great acting"), (0, "dull film"), (1, "fine plot the")]
DEV = [(1, "good acting a"), (0, "bad dull plot"), (1, "the great film"), (0, "dull the acting unknownword")]


def write_original_run(folder: Path, maxtimes: bool) -> tuple[dict, dict, torch.Tensor, dict[str, int]]:
    """What a soft_patterns.py user has: its saved state dict, its arguments, its -e file and its data files."""
    torch.manual_seed(7)
    spec = parse_pattern_spec("3-2_2-2")
    state = {k: v.float() for k, v in authors_state_dict(spec, 4, 2, classes=2, hidden=3).items()}
    torch.save(state, folder / "model_3.pth")
    vectors = torch.randn(len(WORDS) + 1, 4)
    lines = [f"{w} " + " ".join(f"{float(x):.6f}" for x in v) for w, v in zip([*WORDS, "unusedword"], vectors)]
    (folder / "glove.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = folder / "data"
    data.mkdir()
    for split, rows in (("train", TRAIN), ("dev", DEV), ("test", DEV)):
        (data / f"{split}.tsv").write_text("".join(f"{y}\t{x}\n" for y, x in rows), encoding="utf-8")
        (folder / f"{split}.data").write_text("".join(f"{x}\n" for _, x in rows), encoding="utf-8")
    args = {"patterns": "3-2_2-2", "maxtimes": maxtimes, "mlp_hidden_dim": 3, "num_mlp_layers": 2, "seed": 100,
            "embedding_file": str(folder / "glove.txt"), "td": str(folder / "train.data"),
            "vd": str(folder / "dev.data"), "learning_rate": 0.001}  # fmt: skip
    (folder / "args.json").write_text(json.dumps(args), encoding="utf-8")
    # their read_embeddings with the words of td and vd: UNK, START, END (zeros), then the normalised vectors
    used = sorted({w for _, x in TRAIN + DEV for w in x.split()} & set(WORDS), key=WORDS.index)
    table = torch.cat([torch.zeros(3, 4), torch.stack([vectors[WORDS.index(w)] for w in used])]).double()
    table[3:] = table[3:] / table[3:].norm(dim=1, keepdim=True)
    return state, args, table, {w: 3 + i for i, w in enumerate(used)}


@pytest.mark.parametrize("maxtimes", [False, True])
def test_convert_then_evaluate_report_and_extract(
    tmp_path: Path, capsys: pytest.CaptureFixture, maxtimes: bool
) -> None:
    state, _, table, ids = write_original_run(tmp_path, maxtimes)
    run = tmp_path / "run"
    original = [str(tmp_path / "model_3.pth"), "--args", str(tmp_path / "args.json")]
    command = ["convert", "--from", "soft_patterns", *original, "--data", str(tmp_path / "data"), "-o", str(run)]
    assert main(command) == 0
    assert main(command) == 1 and "--overwrite" in capsys.readouterr().err  # an existing checkpoint is kept
    checkpoint = load_checkpoint(run)
    spec = parse_pattern_spec("3-2_2-2")
    double = {k: v.double() for k, v in state.items()}
    docs = [table[torch.tensor([1, 1] + [ids.get(w, 0) for w in x.split()] + [2, 2])] for _, x in DEV]
    want = authors_forward(double, spec, "max-times" if maxtimes else "real", docs, 0.1, None, None)
    assert checkpoint.vocab is not None
    for (_, text), expected in zip(DEV, want):
        tokens = torch.tensor([checkpoint.vocab.encode(text.split())])
        with torch.no_grad():
            got = checkpoint.model(tokens, torch.tensor([tokens.shape[1]]))[0]
        torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)  # float32 checkpoint
    accuracy = sum(int(want[i].argmax()) == y for i, (y, _) in enumerate(DEV)) / len(DEV)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["accuracy"] == pytest.approx(accuracy)
    assert main(["report", str(run), "-o", str(tmp_path / "r.html"), "--no-progress"]) == 0
    assert "<svg" in (tmp_path / "r.html").read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["extract", str(run), "--json", "--sentences", "4"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["max_abs_error"] < 1e-4


def test_convert_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_original_run(tmp_path, False)
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe{")
    base = ["convert", "--from", "soft_patterns", str(tmp_path / "model_3.pth"), "-o", str(tmp_path / "run")]
    assert main([*base, "--args", str(tmp_path / "bad.json")]) == 1
    assert "is not JSON text" in capsys.readouterr().err
    assert main([*base, "--args", str(tmp_path / "missing.json")]) == 1
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "args2.json").write_text(json.dumps({"patterns": "3-2_2-2", "semiring": "prob"}), encoding="utf-8")
    assert main([*base, "--args", str(tmp_path / "args2.json"), "--embeddings", str(tmp_path / "glove.txt")]) == 1
    assert "unknown soft_patterns arguments ['semiring']" in capsys.readouterr().err
