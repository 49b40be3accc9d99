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


def stored(kind: str) -> str:
    """The stored-states variant of the direction ``kind`` (in ``STORED_KINDS``)."""
    return f"stored_{kind}"


#: The kinds of a template kernel whose plan stores states (``runtime.op.stores_states``): each direction also in
#: its stored-states variant, built on its own (the same C function, compiled with only that mode's instantiation:
#: a training step in one mode then compiles half the code).
STORED_KINDS = (*ENTRY_KINDS, *(stored(kind) for kind in ENTRY_KINDS))


def mode_kinds(stored_states: bool) -> tuple[str, ...]:
    """The (forward, backward) kinds of one mode: the stored-states variants if ``stored_states``, else the
    directions themselves (the checkpointed mode, and the only one of plans that do not store states)."""
    return tuple(stored(kind) for kind in ENTRY_KINDS) if stored_states else ENTRY_KINDS


def direction(kind: str) -> str:
    """The direction (in ``ENTRY_KINDS``) of ``kind``, a direction or its stored-states variant: its C function."""
    return kind.removeprefix("stored_")


def entry_name(kind: str, suffix: str) -> str:
    """The name of the ``kind`` entry point for dtype ``suffix`` in ``guarded`` and ``entry_defines``."""
    return f"{kind}_{suffix}"


def kept(*names: str) -> str:
    """The preprocessor test of a build that keeps any of the entry points ``names`` (``entry_name``s)."""
    return " || ".join(["!defined(KLEENE_ONE_ENTRY)", *(f"defined(KLEENE_ENTRY_{name})" for name in names)])


def guarded(kind: str, suffix: str, lines: list[str], variants: tuple[str, ...] = ()) -> list[str]:
    """``lines`` (the definition of the ``kind`` entry point for dtype ``suffix``) kept by a build of every entry
    point or of some that include it or one of its ``variants`` (kinds, e.g. ``stored(kind)``; ``entry_defines``)."""
    return [f"#if {kept(*(entry_name(k, suffix) for k in (kind, *variants)))}", *lines, "#endif"]


def entry_defines(names: tuple[str, ...]) -> list[str]:
    """The compiler flags of a build that keeps only the entry points ``names`` (``entry_name``s)."""
    return ["-DKLEENE_ONE_ENTRY", *(f"-DKLEENE_ENTRY_{name}" for name in names)]
