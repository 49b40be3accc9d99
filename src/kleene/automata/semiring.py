"""Semirings: one definition per semiring serves scalar, batched and symbolic use.

A semiring is a small object of operations (``plus``, ``times``, ``sum``,
``product``, ``matmul``, ``star``, ``zero``, ``one``) that accept Python scalars,
numpy arrays and torch tensors alike, plus a symbolic realisation over sympy
expressions (``sym_plus``, ``sym_times``, ``sym_star``). Every algorithm in
kleene is written once against this interface.

Values are stored in the semiring's own domain:

========== ==================== ============= ============= ===== =====
name       set                  plus          times         zero  one
========== ==================== ============= ============= ===== =====
real       R                    +             *             0     1
log        R u {-inf} (log p)   logaddexp     +             -inf  0
max-plus   R u {-inf}           max           +             -inf  0
min-plus   R u {+inf} (costs)   min           +             +inf  0
max-times  [0, inf)             max           *             0     1
boolean    {False, True}        or            and           False True
========== ==================== ============= ============= ===== =====

``log`` holds log-probabilities (larger is more likely); OpenFst's ``log``
semiring holds their negatives, which the AT&T reader and writer convert.
``min-plus`` is OpenFst's ``tropical``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Callable

import numpy as np
import sympy

from kleene.errors import DivergenceError, SemiringError, WeightError

Array = Any  # numpy.ndarray | torch.Tensor | a Python scalar


def _is_torch(x: object) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "requires_grad")


def _is_scalar(x: object) -> bool:
    return isinstance(x, (bool, int, float, np.generic))


def _reduce(x: Array, axis: int, numpy_fn: Callable[..., Any], torch_name: str) -> Array:
    if _is_torch(x):
        import torch

        return getattr(torch, torch_name)(x, dim=axis)
    return numpy_fn(np.asarray(x), axis=axis)


def _logsumexp(x: Array, axis: int) -> Array:
    """log(sum(exp(x))) along ``axis`` with zero gradient, not NaN, where all are -inf."""
    if _is_torch(x):
        import torch

        peak = torch.amax(x, dim=axis, keepdim=True)
        peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak)).detach()
        total = torch.sum(torch.exp(x - peak), dim=axis)
        positive = total > 0
        safe = torch.where(positive, total, torch.ones_like(total))
        out = torch.log(safe) + peak.squeeze(axis)
        return torch.where(positive, out, torch.full_like(out, -math.inf))
    arr = np.asarray(x, dtype=float)
    if arr.shape[axis] == 0:
        return np.full(np.delete(arr.shape, axis), -np.inf)
    top = np.max(arr, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(arr - top), axis=axis)) + np.squeeze(top, axis=axis)


def _logaddexp(a: Array, b: Array) -> Array:
    if _is_torch(a) or _is_torch(b):
        import torch

        a_t = a if _is_torch(a) else torch.as_tensor(a, dtype=b.dtype)
        b_t = b if _is_torch(b) else torch.as_tensor(b, dtype=a_t.dtype)
        a_t, b_t = a_t.expand_as(a_t + b_t), b_t.expand_as(a_t + b_t)
        return _logsumexp(torch.stack([a_t, b_t]), 0)
    return np.logaddexp(a, b)


def _scalar_result(value: Array, *inputs: Array) -> Array:
    """Give plain Python scalars back for plain scalar inputs."""
    if all(_is_scalar(v) for v in inputs):
        return np.asarray(value).item()
    return value


def _any_true(mask: Array) -> bool:
    """Whether any entry of a boolean scalar/array/tensor is true (False while torch.compile traces)."""
    if _is_torch(mask):
        import torch

        return not torch.compiler.is_compiling() and bool(mask.any())
    return bool(np.any(mask))


def _first_where(x: Array, mask: Array) -> float:
    """The first entry of ``x`` where ``mask`` holds, as a Python float (for error messages)."""
    if _is_torch(x):
        return float(x.detach()[mask].reshape(-1)[0])
    return float(np.broadcast_to(np.asarray(x), np.shape(mask))[np.asarray(mask)].reshape(-1)[0])


def _apply(x: Array, name: str) -> Array:
    """The elementwise function ``name`` (exp, log1p, zeros_like, ones_like) of torch, or of numpy/math for the rest."""
    if _is_torch(x):
        import torch

        return getattr(torch, name)(x)
    if _is_scalar(x) and name in ("exp", "log1p"):
        return getattr(math, name)(float(x))
    return getattr(np, name)(np.asarray(x, dtype=float))


def sympy_constant(value: Any) -> sympy.Expr:
    """A constant as sympy, integral floats as integers (``1.0`` -> ``1``)."""
    if isinstance(value, float) and value.is_integer():
        return sympy.Integer(int(value))
    return sympy.sympify(value)


class Semiring(ABC):
    """A commutative semiring ``<K, plus, times, zero, one>`` (see the module table).

    Note:
        ``plus``/``times`` broadcast; ``sum``/``product`` reduce one axis;
        ``matmul`` is the semiring matrix product over the last two axes.
    """

    name: str = ""
    aliases: tuple[str, ...] = ()
    zero: Any = 0.0
    one: Any = 1.0
    #: ``a ⊕ a = a`` for every a.
    idempotent: bool = False
    #: ``a ⊗ b = b ⊗ a`` (every shipped semiring is commutative; the algorithms assume it).
    commutative: bool = True
    #: ``"max"`` or ``"min"`` when ⊕ selects the larger/smaller of its terms under a total order (it has an argmax:
    #: a best single path exists and ⊕'s derivative routes to it); ``""`` otherwise.
    best: str = ""
    #: The least k with ``a* = one ⊕ a ⊕ ... ⊕ a^k`` wherever the star converges (0 for the selecting semirings on
    #: their convergent values, which is what makes Bellman-Ford-style relaxation terminate); None if there is none.
    k_closed: int | None = None
    #: Every element but zero has a ⊗-inverse (a semifield): weights can be divided (pushing, determinization).
    invertible: bool = True
    #: The semiring whose ``plus`` picks the best single path (Viterbi).
    viterbi_name: str = ""

    # -- scalar and array operations ------------------------------------------------
    @abstractmethod
    def plus(self, a: Array, b: Array) -> Array:
        ...

    @abstractmethod
    def times(self, a: Array, b: Array) -> Array:
        ...

    @abstractmethod
    def sum(self, x: Array, axis: int = -1) -> Array:
        """The plus-reduction of ``x`` along ``axis`` (zero for an empty axis)."""

    @abstractmethod
    def product(self, x: Array, axis: int = -1) -> Array:
        """The times-reduction of ``x`` along ``axis`` (one for an empty axis)."""
        ...

    def matmul(self, a: Array, b: Array) -> Array:
        """Semiring matrix product over the last two axes, broadcasting the rest."""
        return self.sum(self.times(a[..., :, :, None], b[..., None, :, :]), axis=-2)

    #: When the star diverges, in words (for error messages).
    star_diverges_when: str = ""

    def star(self, a: Array) -> Array:
        """``a* = one ⊕ a ⊕ a² ⊕ ...``, elementwise on scalars, numpy arrays and torch tensors (differentiably).

        Raises:
            DivergenceError: where the series does not converge, naming the (first) value; not checked while
                torch.compile traces.
        """
        diverges = self.star_diverges(a)
        if _any_true(diverges):
            value = _first_where(a, diverges)
            raise DivergenceError(f"the {self.name} star of {value!r} diverges ({self.star_diverges_when})")
        return self._star_values(a)

    def star_diverges(self, a: Array) -> Array:
        """Where the elementwise star of ``a`` diverges (a boolean of ``a``'s shape); never, by default."""
        return False

    @abstractmethod
    def _star_values(self, a: Array) -> Array:
        """The star of ``a`` where it converges."""

    def star_converges(self, a: float) -> bool:
        try:
            self.star(a)
        except DivergenceError:
            return False
        return True

    # -- domain ---------------------------------------------------------------------
    def check(self, value: Any, where: str = "weight") -> Any:
        """Return ``value`` as an element of the semiring or raise ``WeightError``."""
        if isinstance(value, (bool, np.bool_)):
            value = float(value)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise WeightError(f"{where}: {value!r} is not a number for the {self.name} semiring") from None
        if math.isnan(number):
            raise WeightError(f"{where}: NaN is not an element of the {self.name} semiring")
        self._check_number(number, where)
        return number

    def _check_number(self, number: float, where: str) -> None:
        if math.isinf(number) and number != self.zero:
            raise WeightError(f"{where}: {number} is not an element of the {self.name} semiring")

    def is_zero(self, value: Any) -> bool:
        return bool(value == self.zero)

    def zeros(self, shape: tuple[int, ...], like: Array | None = None) -> Array:
        return self.full(shape, self.zero, like)

    def ones(self, shape: tuple[int, ...], like: Array | None = None) -> Array:
        return self.full(shape, self.one, like)

    def full(self, shape: tuple[int, ...], value: Any, like: Array | None = None) -> Array:
        if like is not None and _is_torch(like):
            import torch

            return torch.full(shape, value, dtype=like.dtype, device=like.device)
        return np.full(shape, value, dtype=self.numpy_dtype)

    @property
    def numpy_dtype(self) -> type:
        return np.float64

    def identity(self, n: int, like: Array | None = None) -> Array:
        """The n x n semiring identity matrix (one on the diagonal, zero elsewhere)."""
        out = self.zeros((n, n), like)
        if like is not None and _is_torch(like):
            import torch

            eye = torch.eye(n, dtype=torch.bool, device=like.device)
            return torch.where(eye, torch.full_like(out, self.one), out)
        out[np.arange(n), np.arange(n)] = self.one
        return out

    @property
    def viterbi(self) -> Semiring:
        """The idempotent semiring that ranks single paths (max-times for real, ...)."""
        return get_semiring(self.viterbi_name or self.name)

    def better(self, a: Any, b: Any) -> bool:
        """Whether single-path weight ``a`` strictly beats ``b`` (Viterbi order)."""
        v = self.viterbi
        return bool(v.plus(a, b) == a and a != b)

    # -- storage form ------------------------------------------------------------------
    @property
    def storage(self) -> Semiring:
        """The semiring whose arithmetic runs on stored values (kernels, layers, extracted numbers).

        Most semirings store their own elements; max-times stores logarithms and computes in max-plus, which keeps
        long products of probabilities in range. ``to_storage``/``from_storage`` map between the two.
        """
        return self

    def to_storage(self, x: Array) -> Array:
        """An element (scalar, array or tensor) in the storage form (identity unless ``storage`` differs)."""
        return x

    def from_storage(self, x: Array) -> Array:
        """A stored value back as an element of this semiring (the inverse of ``to_storage``)."""
        return x

    @property
    def log_weights(self) -> bool:
        """Whether the elements are log-weights: zero is -inf (log 0), one is 0 (log 1) and ⊗ adds (max-plus, log).

        A multiplicative factor r (a gate, a ratio) enters such a semiring as log r.
        """
        return bool(self.zero == -math.inf and self.one == 0.0)

    # -- symbolic realisation ---------------------------------------------------------
    @abstractmethod
    def sym_plus(self, *terms: sympy.Expr) -> sympy.Expr:
        ...

    @abstractmethod
    def sym_times(self, *factors: sympy.Expr) -> sympy.Expr:
        ...

    @abstractmethod
    def sym_star(self, a: sympy.Expr) -> sympy.Expr:
        ...

    @property
    def sym_zero(self) -> sympy.Expr:
        return sympy_constant(self.zero)

    @property
    def sym_one(self) -> sympy.Expr:
        return sympy_constant(self.one)

    def __repr__(self) -> str:
        return f"<semiring {self.name}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (get_semiring, (self.name,))


class RealSemiring(Semiring):
    """``<R, +, *, 0, 1>``: probabilities, expected counts, linear recurrences."""

    name = "real"
    aliases = ("probability", "plus-times", "sum-product")
    zero, one = 0.0, 1.0
    viterbi_name = "max-times"

    def _check_number(self, number: float, where: str) -> None:
        if math.isinf(number):
            raise WeightError(f"{where}: {number} is not an element of the real semiring")

    def plus(self, a: Array, b: Array) -> Array:
        return _scalar_result(a + b, a, b)

    def times(self, a: Array, b: Array) -> Array:
        return _scalar_result(a * b, a, b)

    def sum(self, x: Array, axis: int = -1) -> Array:
        return _reduce(x, axis, np.sum, "sum")

    def product(self, x: Array, axis: int = -1) -> Array:
        return _reduce(x, axis, np.prod, "prod")

    def matmul(self, a: Array, b: Array) -> Array:
        return a @ b

    star_diverges_when = "|a| >= 1"

    def star_diverges(self, a: Array) -> Array:
        return abs(a) >= 1.0

    def _star_values(self, a: Array) -> Array:
        return 1.0 / (1.0 - a)

    def sym_plus(self, *terms: sympy.Expr) -> sympy.Expr:
        return sympy.Add(*terms)

    def sym_times(self, *factors: sympy.Expr) -> sympy.Expr:
        return sympy.Mul(*factors)

    def sym_star(self, a: sympy.Expr) -> sympy.Expr:
        return 1 / (1 - a)


class LogSemiring(Semiring):
    """``<R u {-inf}, logaddexp, +, -inf, 0>`` over log-probabilities."""

    name = "log"
    aliases = ("log-sum-exp",)
    zero, one = -math.inf, 0.0
    viterbi_name = "max-plus"

    def plus(self, a: Array, b: Array) -> Array:
        return _scalar_result(_logaddexp(a, b), a, b)

    def times(self, a: Array, b: Array) -> Array:
        return _scalar_result(a + b, a, b)

    def sum(self, x: Array, axis: int = -1) -> Array:
        return _logsumexp(x, axis)

    def product(self, x: Array, axis: int = -1) -> Array:
        return _reduce(x, axis, np.sum, "sum")

    star_diverges_when = "exp(a) >= 1"

    def star_diverges(self, a: Array) -> Array:
        return a >= 0.0

    def _star_values(self, a: Array) -> Array:
        return -_apply(-_apply(a, "exp"), "log1p")

    def sym_plus(self, *terms: sympy.Expr) -> sympy.Expr:
        live = [t for t in terms if t != -sympy.oo]
        if not live:
            return -sympy.oo
        if len(live) == 1:
            return live[0]
        return sympy.log(sympy.Add(*(sympy.exp(t) for t in live)))

    def sym_times(self, *factors: sympy.Expr) -> sympy.Expr:
        if any(f == -sympy.oo for f in factors):
            return -sympy.oo
        return sympy.Add(*factors)

    def sym_star(self, a: sympy.Expr) -> sympy.Expr:
        return -sympy.log(1 - sympy.exp(a))


class _MaxPlusLike(Semiring):
    """Shared plumbing of the tropical semirings ``<R, max|min, +>``."""

    idempotent = True
    k_closed = 0
    _pick_numpy: Callable[..., Any] = staticmethod(np.maximum)

    def times(self, a: Array, b: Array) -> Array:
        return _scalar_result(a + b, a, b)

    def product(self, x: Array, axis: int = -1) -> Array:
        return _reduce(x, axis, np.sum, "sum")

    def _star_values(self, a: Array) -> Array:
        return 0.0 if _is_scalar(a) else _apply(a, "zeros_like")

    def sym_times(self, *factors: sympy.Expr) -> sympy.Expr:
        if any(f == self.sym_zero for f in factors):
            return self.sym_zero
        return sympy.Add(*factors)


class MaxPlusSemiring(_MaxPlusLike):
    """``<R u {-inf}, max, +, -inf, 0>``: best-path scores (Viterbi in log space)."""

    name = "max-plus"
    aliases = ("maxplus", "max-sum", "arctic")
    zero, one = -math.inf, 0.0
    best = "max"

    def plus(self, a: Array, b: Array) -> Array:
        if _is_torch(a) or _is_torch(b):
            import torch

            return torch.maximum(torch.as_tensor(a), torch.as_tensor(b))
        return _scalar_result(np.maximum(a, b), a, b)

    def sum(self, x: Array, axis: int = -1) -> Array:
        if not _is_torch(x) and np.asarray(x).shape[axis] == 0:
            return np.full(np.delete(np.asarray(x).shape, axis), -np.inf)
        return _reduce(x, axis, np.max, "amax")

    star_diverges_when = "a positive cycle"

    def star_diverges(self, a: Array) -> Array:
        return a > 0.0

    def sym_plus(self, *terms: sympy.Expr) -> sympy.Expr:
        return sympy.Max(*terms) if terms else self.sym_zero

    def sym_star(self, a: sympy.Expr) -> sympy.Expr:
        return sympy.Piecewise((sympy.S.Zero, a <= 0), (sympy.oo, True))


class MinPlusSemiring(_MaxPlusLike):
    """``<R u {+inf}, min, +, +inf, 0>`` on costs: OpenFst's tropical semiring."""

    name = "min-plus"
    aliases = ("tropical", "minplus", "min-sum")
    zero, one = math.inf, 0.0
    best = "min"

    def plus(self, a: Array, b: Array) -> Array:
        if _is_torch(a) or _is_torch(b):
            import torch

            return torch.minimum(torch.as_tensor(a), torch.as_tensor(b))
        return _scalar_result(np.minimum(a, b), a, b)

    def sum(self, x: Array, axis: int = -1) -> Array:
        if not _is_torch(x) and np.asarray(x).shape[axis] == 0:
            return np.full(np.delete(np.asarray(x).shape, axis), np.inf)
        return _reduce(x, axis, np.min, "amin")

    star_diverges_when = "a negative-cost cycle"

    def star_diverges(self, a: Array) -> Array:
        return a < 0.0

    def sym_plus(self, *terms: sympy.Expr) -> sympy.Expr:
        return sympy.Min(*terms) if terms else self.sym_zero

    def sym_star(self, a: sympy.Expr) -> sympy.Expr:
        return sympy.Piecewise((sympy.S.Zero, a >= 0), (-sympy.oo, True))


class MaxTimesSemiring(Semiring):
    """``<[0, inf), max, *, 0, 1>``: best-path probabilities (SoPa's max-product)."""

    name = "max-times"
    aliases = ("max-product", "viterbi", "maxtimes")
    zero, one = 0.0, 1.0
    idempotent = True
    best = "max"
    k_closed = 0

    @property
    def storage(self) -> Semiring:
        """Max-times values are stored as their logarithms, where the semiring is max-plus."""
        return MAX_PLUS

    def to_storage(self, x: Array) -> Array:
        if _is_torch(x):
            import torch

            return torch.log(x)
        with np.errstate(divide="ignore"):
            return _scalar_result(np.log(x), x)

    def from_storage(self, x: Array) -> Array:
        return _apply(x, "exp")

    def _check_number(self, number: float, where: str) -> None:
        if number < 0 or math.isinf(number):
            raise WeightError(f"{where}: {number} is not an element of the max-times semiring [0, inf)")

    def plus(self, a: Array, b: Array) -> Array:
        if _is_torch(a) or _is_torch(b):
            import torch

            return torch.maximum(torch.as_tensor(a), torch.as_tensor(b))
        return _scalar_result(np.maximum(a, b), a, b)

    def times(self, a: Array, b: Array) -> Array:
        return _scalar_result(a * b, a, b)

    def sum(self, x: Array, axis: int = -1) -> Array:
        if not _is_torch(x) and np.asarray(x).shape[axis] == 0:
            return np.zeros(np.delete(np.asarray(x).shape, axis))
        return _reduce(x, axis, np.max, "amax")

    def product(self, x: Array, axis: int = -1) -> Array:
        return _reduce(x, axis, np.prod, "prod")

    star_diverges_when = "a cycle of weight > 1"

    def star_diverges(self, a: Array) -> Array:
        return a > 1.0

    def _star_values(self, a: Array) -> Array:
        return 1.0 if _is_scalar(a) else _apply(a, "ones_like")

    def sym_plus(self, *terms: sympy.Expr) -> sympy.Expr:
        return sympy.Max(*terms) if terms else self.sym_zero

    def sym_times(self, *factors: sympy.Expr) -> sympy.Expr:
        return sympy.Mul(*factors)

    def sym_star(self, a: sympy.Expr) -> sympy.Expr:
        return sympy.Piecewise((sympy.S.One, a <= 1), (sympy.oo, True))


class BooleanSemiring(Semiring):
    """``<{False, True}, or, and, False, True>``: plain acceptance."""

    name = "boolean"
    aliases = ("bool",)
    zero, one = False, True
    idempotent = True
    best = "max"  # False < True
    k_closed = 0

    @property
    def numpy_dtype(self) -> type:
        return np.bool_

    def check(self, value: Any, where: str = "weight") -> Any:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, (int, float, np.number)) and float(value) in (0.0, 1.0):
            return bool(value)
        raise WeightError(f"{where}: {value!r} is not an element of the boolean semiring (True/False)")

    def plus(self, a: Array, b: Array) -> Array:
        if _is_torch(a) or _is_torch(b):
            import torch

            return torch.logical_or(torch.as_tensor(a), torch.as_tensor(b))
        return _scalar_result(np.logical_or(a, b), a, b)

    def times(self, a: Array, b: Array) -> Array:
        if _is_torch(a) or _is_torch(b):
            import torch

            return torch.logical_and(torch.as_tensor(a), torch.as_tensor(b))
        return _scalar_result(np.logical_and(a, b), a, b)

    def sum(self, x: Array, axis: int = -1) -> Array:
        return _reduce(x, axis, np.any, "any")

    def product(self, x: Array, axis: int = -1) -> Array:
        return _reduce(x, axis, np.all, "all")

    def _star_values(self, a: Array) -> Array:
        if _is_scalar(a):
            return True
        if _is_torch(a):
            import torch

            return torch.ones_like(a, dtype=torch.bool)
        return np.ones(np.shape(a), dtype=bool)

    def sym_plus(self, *terms: sympy.Expr) -> sympy.Expr:
        return sympy.Or(*terms)

    def sym_times(self, *factors: sympy.Expr) -> sympy.Expr:
        return sympy.And(*factors)

    def sym_star(self, a: sympy.Expr) -> sympy.Expr:
        return sympy.true

    @property
    def sym_zero(self) -> sympy.Expr:
        return sympy.false

    @property
    def sym_one(self) -> sympy.Expr:
        return sympy.true


REAL = RealSemiring()
LOG = LogSemiring()
MAX_PLUS = MaxPlusSemiring()
MIN_PLUS = MinPlusSemiring()
MAX_TIMES = MaxTimesSemiring()
BOOLEAN = BooleanSemiring()

SEMIRINGS: tuple[Semiring, ...] = (REAL, LOG, MAX_PLUS, MIN_PLUS, MAX_TIMES, BOOLEAN)

_BY_NAME: dict[str, Semiring] = {}
for _s in SEMIRINGS:
    for _n in (_s.name, *_s.aliases):
        _BY_NAME[_n] = _s
        _BY_NAME[_n.replace("-", "_")] = _s


def get_semiring(semiring: str | Semiring) -> Semiring:
    """Look a semiring up by name ("real", "log", "max-plus", "min-plus"/"tropical", ...)."""
    if isinstance(semiring, Semiring):
        return semiring
    key = str(semiring).strip().lower()
    if key not in _BY_NAME:
        known = ", ".join(s.name for s in SEMIRINGS)
        raise SemiringError(f"unknown semiring {semiring!r}; known: {known} (and 'tropical')")
    return _BY_NAME[key]
