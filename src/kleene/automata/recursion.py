"""The Forward recursion of kleene.automata, written once for every element type.

``run_forward`` is the recursion ``alpha_0 = start()``, ``alpha_t = step(alpha_{t-1}, x_t, t)``, score
``finish(alpha_n)``, with an optional ``[B]`` lengths mask (a batch of padded strings: steps past a string's length
leave its vector unchanged and its prefix score zero). A stepper supplies ``start``, ``step`` and ``finish``:

- ``MatrixStepper``: ``step = close(alpha ⊗ M_x)`` on dense matrices through the semiring's array operations, for
  numpy numbers, torch tensors (batched over leading axes, differentiable) and sympy expressions (numpy object
  arrays under ``SymbolicArrays``, the semiring's ``sym_*`` operations as array operations);
- ``kleene.automata.algorithms.SparseStepper``: the arc store's gathers and segment sums;
- ``kleene.compile.reference``: a plan's moves and closure entries with per-step, per-dimension weights.

The epsilon closure of the dense stepper is ``kleene.automata.star.closure_matrix`` for every element type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

import numpy as np
import sympy

from kleene.automata.semiring import Array, Semiring
from kleene.automata.star import is_torch


class Stepper(Protocol):
    """What ``run_forward`` needs: the start vector, one step, and the score of a vector."""

    def start(self) -> Any: ...

    def step(self, vector: Any, symbol: Any, position: int) -> Any: ...

    def finish(self, vector: Any) -> Any: ...


def vecmat(semiring: Semiring, vector: Any, matrix: Any) -> Any:
    """``vector ⊗ matrix`` over the last axis of ``vector`` (..., Q) and the last two of ``matrix`` (..., Q, Q),
    broadcasting the leading axes."""
    return semiring.matmul(vector[..., None, :], matrix)[..., 0, :]


def where(mask: Any, chosen: Any, other: Any) -> Any:
    """``mask ? chosen : other`` elementwise, ``mask`` (B,) broadcast over the trailing axes of the values."""
    shape = tuple(mask.shape) + (1,) * (len(chosen.shape) - len(mask.shape))
    if is_torch(chosen):
        import torch

        return torch.where(mask.reshape(shape), chosen, other)
    return np.where(np.reshape(mask, shape), chosen, other)


def masked_step(
    stepper: Stepper, semiring: Semiring, vector: Any, symbol: Any, position: Any, lengths: Any = None,
    score: bool = True,
) -> tuple[Any, Any]:
    """One step of the recursion and, with ``score``, its prefix score: ``(alpha_t, finish(alpha_t) or None)``;
    with ``lengths`` (B,), the strings no longer than ``position`` (an int, or a 0-d tensor inside a traced scan)
    keep ``vector`` and score zero."""
    moved = stepper.step(vector, symbol, position)
    live = None if lengths is None else lengths > position
    if live is not None:
        moved = where(live, moved, vector)
    if not score:
        return moved, None
    prefix = stepper.finish(moved)
    if live is not None:
        prefix = where(live, prefix, semiring.zeros(tuple(prefix.shape), like=prefix))
    return moved, prefix


def run_forward(
    stepper: Stepper, semiring: Semiring, symbols: Iterable[Any], lengths: Any = None, per_step: bool = False
) -> tuple[Any, list[Any]]:
    """The Forward recursion: the last vector and, with ``per_step``, every prefix score (else ``[]``).

    Caution:
        ``lengths`` (a (B,) integer array or tensor) must lie in ``[0, len(symbols)]``; each symbol is then one
        step of the whole batch (the stepper's vectors have a leading batch axis of B).
    """
    vector = stepper.start()
    outputs: list[Any] = []
    for position, symbol in enumerate(symbols):
        vector, prefix = masked_step(stepper, semiring, vector, symbol, position, lengths, per_step)
        if per_step:
            outputs.append(prefix)
    return vector, outputs


class MatrixStepper:
    """Forward's steps on dense matrices: ``start = close(initial)``, ``step = close(alpha ⊗ matrix(x, t))``,
    ``finish = ⊕_q alpha_q ⊗ final_q``, in whatever element type ``semiring``'s array operations take.

    Caution:
        ``closure`` (Q, Q) or None is the epsilon closure already computed (``closure_matrix``); ``matrix(x, t)``
        returns the (..., Q, Q) step matrix of symbol ``x`` at position ``t`` (after checking ``x``).
    """

    def __init__(
        self, semiring: Semiring, initial: Any, final: Any, closure: Any, matrix: Callable[[Any, int], Any]
    ):
        self.semiring, self.initial, self.final, self.closure, self.matrix = semiring, initial, final, closure, matrix

    def close(self, vector: Any) -> Any:
        return vector if self.closure is None else vecmat(self.semiring, vector, self.closure)

    def start(self) -> Any:
        return self.close(self.initial)

    def step(self, vector: Any, symbol: Any, position: int) -> Any:
        return self.close(vecmat(self.semiring, vector, self.matrix(symbol, position)))

    def finish(self, vector: Any) -> Any:
        s = self.semiring
        return s.sum(s.times(vector, self.final), axis=-1)


class SymbolicArrays(Semiring):
    """``semiring`` over numpy object arrays of sympy expressions: its ``sym_plus``, ``sym_times`` and ``sym_star``
    as the array operations, so ``closure_matrix`` and ``MatrixStepper`` compute symbolic scores.

    Zero terms are dropped from sums and zero factors annihilate products (semiring laws), so no ``oo`` enters an
    expression where no path exists; the star of zero is one.

    Caution:
        No divergence check: a cycle's star is ``sym_star`` whatever values are substituted later.
    """

    def __init__(self, semiring: Semiring):
        self.base = semiring
        self.name = f"{semiring.name} (sympy)"
        self.zero = semiring.sym_zero
        self.one = semiring.sym_one
        self.idempotent = semiring.idempotent

    @property
    def numpy_dtype(self) -> type:
        return object

    def sym_plus(self, *terms: sympy.Expr) -> sympy.Expr:
        live = [t for t in terms if t != self.zero]
        return self.base.sym_plus(*live) if len(live) > 1 else (live[0] if live else self.zero)

    def sym_times(self, *factors: sympy.Expr) -> sympy.Expr:
        if any(f == self.zero for f in factors):
            return self.zero
        return self.base.sym_times(*factors)

    def sym_star(self, a: sympy.Expr) -> sympy.Expr:
        return self.one if a == self.zero else self.base.sym_star(a)

    def plus(self, a: Array, b: Array) -> Array:
        return _elementwise(self.sym_plus, a, b)

    def times(self, a: Array, b: Array) -> Array:
        return _elementwise(self.sym_times, a, b)

    def sum(self, x: Array, axis: int = -1) -> Array:
        return _reduce_objects(self.sym_plus, x, axis)

    def product(self, x: Array, axis: int = -1) -> Array:
        return _reduce_objects(self.sym_times, x, axis)

    def _star_values(self, a: Array) -> Array:
        return np.frompyfunc(self.sym_star, 1, 1)(a)

    def full(self, shape: tuple[int, ...], value: Any, like: Array | None = None) -> Array:
        out = np.empty(shape, dtype=object)
        out.fill(value)
        return out

    @property
    def sym_zero(self) -> sympy.Expr:
        return self.zero

    @property
    def sym_one(self) -> sympy.Expr:
        return self.one

    def __reduce__(self) -> tuple[Any, ...]:
        return (SymbolicArrays, (self.base,))


def _elementwise(operation: Callable[[Any, Any], Any], a: Array, b: Array) -> Array:
    return np.frompyfunc(operation, 2, 1)(a, b)


def _reduce_objects(operation: Callable[..., Any], x: Array, axis: int) -> Array:
    """``operation(*terms)`` over ``axis`` of an object array, flat (one n-ary node per result)."""
    moved = np.moveaxis(np.asarray(x, dtype=object), axis, -1)
    out = np.empty(moved.shape[:-1], dtype=object)
    for index in np.ndindex(out.shape):
        out[index] = operation(*moved[index])
    return out[()] if out.ndim == 0 else out


