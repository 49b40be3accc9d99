"""The entry points of a generated C++ library, and which of them one build keeps.

A CPU source (a plan's, a bank's, the dense path's) defines ``{prefix}_{kind}_{suffix}`` for each direction
``kind`` in ``ENTRY_KINDS`` and dtype ``suffix`` in ``ENTRY_DTYPES``. Each definition is wrapped in ``guarded``'s
preprocessor test, so that the runtime compiles the one source into one library per entry point or set of them
(compiled with ``entry_defines``), built when they are first called: a use in one dtype, or without gradients, never
compiles the others (each template instantiation is most of a build's time). Compiled without those defines the
source keeps every entry point.
"""

from __future__ import annotations

#: The directions of a kernel.
ENTRY_KINDS = ("forward", "backward")

#: (suffix, C type) of the dtypes a CPU kernel is written for.
ENTRY_DTYPES = (("f32", "float"), ("f64", "double"))


def entry_name(kind: str, suffix: str) -> str:
    """The name of the ``kind`` entry point for dtype ``suffix`` in ``guarded`` and ``entry_defines``."""
    return f"{kind}_{suffix}"


def guarded(kind: str, suffix: str, lines: list[str]) -> list[str]:
    """``lines`` (the definition of the ``kind`` entry point for dtype ``suffix``) kept by a build of every entry
    point or of some that include it (``entry_defines``)."""
    test = f"!defined(KLEENE_ONE_ENTRY) || defined(KLEENE_ENTRY_{entry_name(kind, suffix)})"
    return [f"#if {test}", *lines, "#endif"]


def entry_defines(names: tuple[str, ...]) -> list[str]:
    """The compiler flags of a build that keeps only the entry points ``names`` (``entry_name``s)."""
    return ["-DKLEENE_ONE_ENTRY", *(f"-DKLEENE_ENTRY_{name}" for name in names)]
