"""The entry points of a generated C++ library, and which of them one build keeps.

A CPU source (a plan's, a bank's, the dense path's) defines ``{prefix}_{kind}_{suffix}`` for each direction
``kind`` in ``ENTRY_KINDS`` and dtype ``suffix`` in ``ENTRY_DTYPES``. Each definition is wrapped in ``guarded``'s
preprocessor test, so that the runtime compiles the one source into one library per entry point (compiled with
``entry_defines``), built when that entry point is first called: a use in one dtype, or without gradients, never
compiles the others (each template instantiation is most of a build's time). Compiled without those defines the
source keeps every entry point.
"""

from __future__ import annotations

#: The directions of a kernel.
ENTRY_KINDS = ("forward", "backward")

#: (suffix, C type) of the dtypes a CPU kernel is written for.
ENTRY_DTYPES = (("f32", "float"), ("f64", "double"))


def guarded(kind: str, suffix: str, lines: list[str]) -> list[str]:
    """``lines`` (the definition of the ``kind`` entry point for dtype ``suffix``) kept by a build of every entry
    point or of that one (``entry_defines``)."""
    return [f"#if !defined(KLEENE_ONE_ENTRY) || defined(KLEENE_ENTRY_{kind}_{suffix})", *lines, "#endif"]


def entry_defines(kind: str, suffix: str) -> list[str]:
    """The compiler flags of a build that keeps only the ``kind`` entry point for dtype ``suffix``."""
    return ["-DKLEENE_ONE_ENTRY", f"-DKLEENE_ENTRY_{kind}_{suffix}"]
