"""``kleene report`` end to end: a tiny SoPa trained for a few steps, its page checked as HTML (self-contained, every
section present) and rendered by headless Chromium (a screenshot that is not blank, the elements in the DOM)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import torch

from kleene.cli import main
from kleene.data import Vocabulary, load_classification
from kleene.nn import SoPaClassifier, load_checkpoint
from kleene.nn.checkpoint import Checkpoint
from kleene.viz.draw import PALETTE
from kleene.viz.report import ReportError, ReportOptions, build_report

PATTERNS = 4
DOCUMENTS = 3
FIDELITY_DOCUMENTS = 150


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def train(out: Path, model: str, *settings: str) -> Path:
    torch.set_num_threads(1)
    command = ["train", model, "--data", "sst2", "--out", str(out), "--max-steps", "12", "--eval-every", "4"]
    command += ["--batch-size", "32", "--threads", "1", "--no-progress"]
    for setting in settings:
        command += ["--set", setting]
    assert main(command) == 0
    return out


@dataclass(frozen=True)
class Report:
    checkpoint: Path
    page: Path
    text: str


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """A SoPa trained for 12 steps and its report (4 patterns, 3 documents; the phrases from the dev split, 872
    documents, through ``--corpus``: the train split's 6,920 took half the report's time and test nothing more;
    the patterns ranked on 100 dev documents and the hard patterns' fidelity measured on 150)."""
    root = tmp_path_factory.mktemp("report")
    checkpoint = train(root / "sopa", "sopa", 'patterns="3-3_4-3_5-2"', "mlp_hidden=8")
    page = root / "report.html"
    command = ["report", str(checkpoint), "-o", str(page), "--patterns", str(PATTERNS)]
    command += ["--documents", str(DOCUMENTS), "--corpus", "dev", "--no-progress", "--threads", "1"]
    command += ["--importance-documents", "100", "--fidelity-documents", str(FIDELITY_DOCUMENTS)]
    assert main(command) == 0
    return Report(checkpoint, page, page.read_text(encoding="utf-8"))


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text of <style> elements."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.styles: list[str] = []
        self._in_style = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)

    def with_class(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.tags if name in (attrs.get("class") or "").split()]

    def count(self, tag: str) -> int:
        return sum(t == tag for t, _ in self.tags)


def check_elements(text: str) -> None:
    """The sections and their elements: diagrams, phrase tables, explanation spans, curves, facts."""
    page = Elements(text)
    ids = {attrs.get("id") for _, attrs in page.tags}
    assert {"model", "patterns", "documents", "hard", "curves"} <= ids
    assert len(page.with_class("pattern")) == PATTERNS
    diagrams = [attrs for tag, attrs in page.tags if tag == "div" and attrs.get("class") == "diagram"]
    assert len(diagrams) == PATTERNS
    assert page.count("svg") == PATTERNS + 1  # the diagrams and the curves
    assert len(page.with_class("phrases")) == PATTERNS
    assert len(page.with_class("explanation")) == DOCUMENTS
    assert page.with_class("pos") and page.with_class("neg")  # spans pushing both ways
    assert all(attrs.get("title", "").startswith("pattern ") for attrs in page.with_class("tok")
               if "pos" in (attrs.get("class") or "") or "neg" in (attrs.get("class") or ""))  # fmt: skip
    assert len(page.with_class("facts")) == 1 and len(page.with_class("hardlist")) == 2  # fidelity, hard patterns
    assert len(page.with_class("chosen")) == 1  # the threshold of the hard patterns shown


@pytest.mark.slow
def test_report_is_self_contained_and_complete(report: Report) -> None:
    text = report.text
    page = Elements(text)
    for tag, attrs in page.tags:
        assert tag not in ("script", "link", "iframe", "img", "object", "embed"), tag
        for name in ("src", "href", "xlink:href"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), f"<{tag} {name}={value!r}> leaves the page"
    assert "url(" not in "".join(page.styles) and "@import" not in "".join(page.styles)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text)
    check_elements(text)
    assert "max-times" in text and "3 × length 3, 3 × length 4, 2 × length 5 (8 patterns)" in text
    assert "sst2" in text and "dev accuracy" in text
    assert f"share of the {FIDELITY_DOCUMENTS} dev documents" in text  # --fidelity-documents


@pytest.mark.slow
def test_report_pattern_sections_follow_the_model(report: Report) -> None:
    text = report.text
    checkpoint = load_checkpoint(report.checkpoint)
    shown = [int(p) for p in re.findall(r'<article class="pattern" id="pattern-(\d+)">', text)]
    assert len(set(shown)) == PATTERNS and all(0 <= p < 8 for p in shown)
    lengths = [int(n) for n in re.findall(r'<span class="meta">length (\d+)', text)]
    spec = [length for length, count in checkpoint.model.patterns.spec.items() for _ in range(count)]
    assert lengths == [spec[p] for p in shown]
    importances = [float(x) for x in re.findall(r"importance ([\d.e-]+)</span>", text)]
    assert importances == sorted(importances, reverse=True)  # most important first
    phrase_tables = re.findall(r'<table class="phrases"><thead><tr>(.*?)</tr>', text)
    assert [h.count("<th>") - 1 for h in phrase_tables] == [n - 1 for n in lengths]  # a column per main-path arc


@pytest.mark.slow
def test_report_renders_in_headless_chromium(report: Report, tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh installs it)")
    from PIL import Image

    page = report.page
    flags = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ]  # fmt: skip
    screenshot = tmp_path / "report.png"
    shot = subprocess.run(
        [*flags, f"--user-data-dir={tmp_path / 'profile-shot'}", f"--screenshot={screenshot}",
         "--window-size=1200,2000", page.as_uri()],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shot.returncode == 0 and screenshot.is_file(), shot.stderr[-2000:]
    pixels = np.asarray(Image.open(screenshot).convert("RGB"), dtype=np.int32)
    assert pixels.shape == (2000, 1200, 3)
    assert pixels.std() > 20  # not blank
    # colours quantised to 5 bits a channel, each packed into one integer (np.unique over rows is 70 times slower)
    channels = pixels // 8
    colours = np.unique((channels[..., 0] << 10) | (channels[..., 1] << 5) | channels[..., 2])
    assert len(colours) > 100  # text, diagrams and tables, antialiased
    for name in ("main", "self-loop"):  # the first diagram's arcs are drawn in the palette's colours
        target = np.array([int(PALETTE[name][i : i + 2], 16) for i in (1, 3, 5)])
        assert (np.abs(pixels - target).max(-1) < 24).sum() > 50, f"no {name} arcs on the screenshot"
    dom = subprocess.run(
        [*flags, f"--user-data-dir={tmp_path / 'profile-dom'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    check_elements(dom.stdout)


@pytest.mark.slow
def test_report_of_a_model_without_patterns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = train(tmp_path / "cnn", "cnn", "channels=4")
    page = tmp_path / "cnn.html"
    assert main(["report", str(checkpoint), "-o", str(page), "--no-progress"]) == 0
    output = capsys.readouterr()
    assert f"wrote {page}" in output.out and "CNNClassifier has no patterns" in output.err
    text = page.read_text(encoding="utf-8")
    assert "need a SoPa classifier; this checkpoint holds CNNClassifier" in text
    assert 'id="curves"' in text and text.count("<svg") == 1 and 'class="pattern"' not in text


@pytest.mark.slow
def test_report_errors(report: Report, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = str(report.checkpoint)
    assert main(["report", checkpoint, "--data", "ptb", "-o", str(tmp_path / "x.html"), "--no-progress"]) == 1
    assert "needs a classification data set" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "x.html")]) == 1
    assert "no config.json; not a kleene checkpoint" in capsys.readouterr().err
    with pytest.raises(ReportError, match="hard_threshold"):
        ReportOptions(hard_threshold=1.5)
    with pytest.raises(ReportError, match="phrases"):
        ReportOptions(phrases=0)
    with pytest.raises(ReportError, match="fidelity_documents must be at least 1 or None, got 0"):
        ReportOptions(fidelity_documents=0)
    loaded = load_checkpoint(checkpoint)
    loaded.vocab = None
    with pytest.raises(ReportError, match="no vocabulary"):
        build_report(loaded, options=ReportOptions(progress=False))


@pytest.mark.parametrize(
    ("semiring", "mode", "shared"),
    [("max-plus", "reference", None), ("real", "paper", None), ("max-times", "reference", "global")],
)
@pytest.mark.slow
def test_report_in_other_semirings_and_modes(semiring: str, mode: str, shared: str | None) -> None:
    """An untrained model held in memory: the sections adapt to the semiring (real: the best path's share of each
    span; identity encoder: hard thresholds relative to each arc's best word)."""
    data = load_classification("sst2")
    vocab = Vocabulary.build([[token for example in data.train + data.dev for token in example.tokens]])
    torch.manual_seed(0)
    model = SoPaClassifier(
        len(vocab),
        2,
        embedding_dim=8,
        patterns="3-2_4-2",
        semiring=semiring,
        mode=mode,
        shared_self_loops=shared,  # type: ignore[arg-type]
    )
    checkpoint = Checkpoint(model.eval(), vocab, {"model": "sopa", "metadata": {"data": "sst2"}})
    options = ReportOptions(
        patterns=2, documents=1, corpus="dev", importance_documents=40, fidelity_documents=100, progress=False
    )
    text = build_report(checkpoint, options=options)
    page = Elements(text)
    assert len(page.with_class("pattern")) == 2 and len(page.with_class("explanation")) == 1
    assert f"<tr><th>semiring</th><td>{semiring}</td></tr><tr><th>mode</th><td>{mode}</td></tr>" in text
    assert ("<th>span score</th><th>best path</th>" in text) == (semiring == "real")
    assert ("times the arc's best weight" in text) == (model.patterns.encoder == "identity")
    assert "This checkpoint records no training curve." in text
    assert ("self-loops (shared with the main path, global scale)" in text) == (shared == "global")
