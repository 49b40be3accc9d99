"""Where dataset files come from: the vendored copies inside the package, else a data root.

The data root is ``$KLEENE_DATA`` when set; otherwise ``../shared/data`` next to the repository, then
``/work/shared/data``. Text is decoded with the encoding each dataset's README states and split on ``"\\n"`` only:
MR and SUBJ are Windows-1252, where byte 0x85 is an ellipsis; ``str.splitlines()`` would also break lines there.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from kleene.errors import DatasetNotFoundError

__all__ = ["VENDOR_DIR", "DatasetNotFoundError", "data_roots", "find_file", "read_lines", "read_text"]

#: The vendored files shipped with the package.
VENDOR_DIR = Path(__file__).resolve().parent / "vendor"
_REPOSITORY = Path(__file__).resolve().parents[3]


def data_roots() -> list[Path]:
    """The data roots searched for non-vendored datasets, in order.

    Caution:
        ``$KLEENE_DATA``, when set, is the only root; the roots are not checked to exist.
    """
    configured = os.environ.get("KLEENE_DATA")
    if configured:
        return [Path(configured).expanduser()]
    return [(_REPOSITORY.parent / "shared" / "data").resolve(), Path("/work/shared/data")]


def find_file(dataset: str, relative: str, *, vendored: str | None = None) -> Path:
    """The path of ``relative`` (e.g. ``"subj/subj.all"``) for ``dataset``: the vendored copy ``vendored`` (a path under
    ``VENDOR_DIR``) when it exists, else the first data root holding it.

    Raises:
        DatasetNotFoundError: no candidate exists; the message names the dataset and every path tried.
    """
    candidates = [VENDOR_DIR / vendored] if vendored else []
    candidates += [root / relative for root in data_roots()]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = ", ".join(str(path) for path in candidates)
    raise DatasetNotFoundError(
        f"dataset {dataset!r}: {relative} not found (tried {tried}); set KLEENE_DATA to the folder holding it"
    )


def read_text(path: Path, encoding: str) -> str:
    """The whole file decoded with ``encoding`` (transparently gunzipped when the name ends in ``.gz``)."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode(encoding)


def read_lines(path: Path, encoding: str) -> list[str]:
    """The file's lines, split on ``"\\n"`` only (a final newline gives no empty last line; ``"\\r"`` is stripped)."""
    text = read_text(path, encoding)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
