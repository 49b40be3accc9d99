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

Weighted determinization, pushing, reduction and sampling use ``divide`` (residuals), ``zero_sum_free``,
``quantize`` (comparing weights up to a delta) and ``to_real``/``from_real`` (the homomorphism of real and log
onto the reals).

A semiring also owns its storage form (``storage``, ``to_storage``, ``from_storage``), the
sympy node types the prover reads back (``sym_plus_head``/``sym_times_head``) and its kernel
algebra for generated code (``kernel``: ⊕ and ⊗ as ``KernelOp``s, spelled per dialect, with
the rule their reverse mode follows). ``register_semiring`` makes a user-defined one known by
name; docs/semirings.md shows how to write one.

``log`` holds log-probabilities (larger is more likely); OpenFst's ``log``
semiring holds their negatives, which the AT&T reader and writer convert.
``min-plus`` is OpenFst's ``tropical``.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np
import sympy

from kleene.errors import CompileError, DivergenceError, KleeneError, SemiringError, WeightError

Array = Any  # numpy.ndarray | torch.Tensor | a Python scalar
_LN2 = math.log(2.0)


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
        empty = total == 0  # every term -inf (a NaN term makes ``total`` NaN, and the result NaN)
        safe = torch.where(empty, torch.ones_like(total), total)
        out = torch.log(safe) + peak.squeeze(axis)
        return torch.where(empty, torch.full_like(out, -math.inf), out)
    arr = np.asarray(x, dtype=float)
    if arr.shape[axis] == 0:
        return np.full(np.delete(arr.shape, axis), -np.inf)
    top = arr.max(axis=axis, keepdims=True)  # array methods: this runs once per Forward step on small vectors
    top[~np.isfinite(top)] = 0.0
    with np.errstate(divide="ignore"):
        return np.log(np.exp(arr - top).sum(axis=axis)) + top.squeeze(axis=axis)


def _logaddexp(a: Array, b: Array) -> Array:
    if _is_torch(a) or _is_torch(b):
        import torch

        a_t = a if _is_torch(a) else torch.as_tensor(a, dtype=b.dtype, device=b.device)
        b_t = b if _is_torch(b) else torch.as_tensor(b, dtype=a_t.dtype, device=a_t.device)
        # max + log1p(exp(min - max)): elementwise, no stacking; where the max is infinite (both -inf: the zero)
        # the result is the max itself, with zero gradient through the masked difference rather than NaN
        high, low = torch.maximum(a_t, b_t), torch.minimum(a_t, b_t)
        infinite = torch.isinf(high)
        gap = torch.where(infinite, torch.zeros_like(high), low - high)
        return torch.where(infinite, high.detach(), high + torch.log1p(torch.exp(gap)))
    return np.logaddexp(a, b)


def _scalar_result(value: Array, *inputs: Array) -> Array:
    """Give plain Python scalars back for plain scalar inputs."""
    if type(value) is float or type(value) is int or type(value) is bool:  # already one (only scalars give one)
        return value
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


def _traced_tensor(x: object) -> bool:
    """Whether ``x`` is a torch tensor, asked in a way torch.compile traces (layers call the storage maps below
    inside compiled forwards; ``_is_torch`` reads the type's module name, which dynamo does not trace)."""
    return hasattr(x, "requires_grad")


def _log_sigmoid(x: Array) -> Array:
    """log σ(x) elementwise, stable for large |x| (torch's logsigmoid; −logaddexp(0, −x) otherwise)."""
    if _traced_tensor(x):
        import torch

        return torch.nn.functional.logsigmoid(x)
    return _scalar_result(-np.logaddexp(0.0, -np.asarray(x, dtype=float)), x)


def _sigmoid(x: Array) -> Array:
    """σ(x) elementwise (torch's sigmoid; exp of the stable log σ otherwise)."""
    if _traced_tensor(x):
        return x.sigmoid()
    return _scalar_result(np.exp(-np.logaddexp(0.0, -np.asarray(x, dtype=float))), x)


def _exp(x: Array) -> Array:
    """exp(x) elementwise, for tensors in a way torch.compile traces."""
    return x.exp() if _traced_tensor(x) else _apply(x, "exp")


def sympy_constant(value: Any) -> sympy.Expr:
    """A constant as sympy, integral floats as integers (``1.0`` -> ``1``)."""
    if isinstance(value, float) and value.is_integer():
        return sympy.Integer(int(value))
    return sympy.sympify(value)


# -- OpenFst weight conventions: maps between a file's numbers and a semiring's values ---------------------------------
def _openfst_identity(x: Any) -> float:
    return float(x)


def _openfst_negate(x: Any) -> float:
    return -float(x)


def _openfst_probability(cost: float) -> float:
    return math.exp(-cost)


def _openfst_cost_of_probability(p: Any) -> float:
    p = float(p)
    if p < 0:
        raise WeightError(f"{p!r} has no OpenFst weight -log(p): it is negative")
    return math.inf if p == 0 else -math.log(p)


def _openfst_support(cost: float) -> bool:
    return cost != math.inf


def _openfst_cost_of_support(value: Any) -> float:
    return 0.0 if value else math.inf


#: (decode a file number into a value, encode a value as a file number)
OpenFstCodec = tuple[Callable[[float], Any], Callable[[Any], float]]
_OPENFST_IDENTITY: OpenFstCodec = (_openfst_identity, _openfst_identity)
_OPENFST_NEGATION: OpenFstCodec = (_openfst_negate, _openfst_negate)
_OPENFST_PROBABILITY: OpenFstCodec = (_openfst_probability, _openfst_cost_of_probability)
_OPENFST_SUPPORT: OpenFstCodec = (_openfst_support, _openfst_cost_of_support)


def _array_probability(costs: np.ndarray) -> np.ndarray:
    """``math.exp(-c)`` per entry, bit for bit (numpy's exp may differ from libm's in the last place), computed
    once per distinct cost; overflow gives inf."""
    unique, inverse = np.unique(costs, return_inverse=True)

    def exp(c: float) -> float:
        try:
            return math.exp(-c)
        except OverflowError:
            return math.inf

    values = np.array([exp(c) for c in unique.tolist()], dtype=np.float64)
    out: np.ndarray = values[inverse.reshape(-1)] if unique.size else np.zeros(costs.shape)
    return out


#: The decoders above on float64 arrays (the same values elementwise, bit for bit; exp overflows to inf instead of
#: raising).
_OPENFST_ARRAY_DECODERS: dict[Callable[[float], Any], Callable[[np.ndarray], np.ndarray]] = {
    _openfst_identity: lambda c: c,
    _openfst_negate: np.negative,
    _openfst_probability: _array_probability,
    _openfst_support: lambda c: c != math.inf,
}


def openfst_decode_array(decode: Callable[[float], Any], numbers: np.ndarray) -> np.ndarray:
    """``decode`` (the first of an ``OpenFstCodec``) applied to each entry of the float64 array ``numbers``."""
    vectorised = _OPENFST_ARRAY_DECODERS.get(decode)
    if vectorised is not None:
        out: np.ndarray = vectorised(numbers)
        return out
    elementwise: np.ndarray = np.frompyfunc(decode, 1, 1)(numbers).astype(float)
    return elementwise

# ------------------------------------------------------------------------------------------------
# Kernel algebra: how a semiring's operations are spelled in generated code
# ------------------------------------------------------------------------------------------------
#: The code-generation dialects: C++ (the CPU kernels and CUDA) and Triton.
DIALECTS: tuple[str, ...] = ("c", "triton")


@dataclass(frozen=True)
class KernelOp:
    """A binary operation of generated kernels: its spelling per dialect and its reverse mode.

    ``spellings[dialect]`` is an expression with the operands ``{a}`` and ``{b}``. ``rule`` says how the
    gradient of ``a ∘ b ∘ ...`` reaches each operand: ``"sum"`` (all of it, to every operand: ``+``),
    ``"product"`` (times the product of the other operands: ``*``), ``"softmax"`` (times ``exp(operand -
    result)``: logaddexp) or ``"select"`` (all of it to the first operand equal to the result, none to the
    rest: max and min, whose derivative is the argmax route). Every spelling must propagate NaN from
    either operand (the kernels' ``kleene_max``/``kleene_min`` do; ``std::max`` does not). ``transcendental``:
    the operation evaluates exp/log (tens of cycles a lane, not one), which makes recomputing a kernel's states
    cost more than storing them. ``c_headers``: the C++ headers the ``"c"`` spelling needs in CPU kernels (by
    default <cmath>, so a spelling may call ``std::exp`` and the like; the shipped operations call only the
    kernels' own helpers and need none, which saves each build the headers' compile time).
    """

    name: str
    spellings: Mapping[str, str]
    rule: Literal["sum", "product", "softmax", "select"]
    transcendental: bool = False
    c_headers: tuple[str, ...] = ("<cmath>",)

    def spell(self, dialect: str, a: str, b: str) -> str:
        """``a ∘ b`` in ``dialect``.

        Raises:
            CompileError: the operation has no spelling in ``dialect``.
        """
        if dialect not in self.spellings:
            raise CompileError(f"the kernel operation {self.name!r} has no spelling in the {dialect!r} dialect")
        return self.spellings[dialect].format(a=a, b=b)


ADD = KernelOp("add", {"c": "({a} + {b})", "triton": "({a} + {b})"}, "sum", c_headers=())
MUL = KernelOp("mul", {"c": "({a} * {b})", "triton": "({a} * {b})"}, "product", c_headers=())
MAX = KernelOp("max", {"c": "kleene_max({a}, {b})", "triton": "_kleene_max({a}, {b})"}, "select", c_headers=())
MIN = KernelOp("min", {"c": "kleene_min({a}, {b})", "triton": "_kleene_min({a}, {b})"}, "select", c_headers=())
LOGADDEXP = KernelOp(
    "logaddexp", {"c": "kleene_logaddexp({a}, {b})", "triton": "_kleene_logaddexp({a}, {b})"}, "softmax", True,
    c_headers=(),
)


@dataclass(frozen=True)
class KernelAlgebra:
    """A (storage) semiring as generated kernels compute it: ⊕ and ⊗ as kernel operations.

    Zero and one are the semiring's own numbers (each dialect spells a number); how the reverse mode of
    ⊕/⊗ is formed follows from the operations' ``rule``.
    """

    plus: KernelOp
    times: KernelOp



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
    #: Only zero and one exist (boolean): weights carry no information, so drawings and listings omit them.
    weightless: bool = False
    #: The semiring is itself the real field (additive inverses exist): ranks and solves apply to its values directly.
    is_field: bool = False
    #: ``to_real``/``from_real`` map the semiring homomorphically into the real field (+, ×): Tzeng equivalence,
    #: Hankel ranks, the linear-algebra reduction and sampling work on that image.
    has_real_image: bool = False
    #: Every image under ``to_real`` is >= 0 (log: exp(x)), so no cancellation can occur in the field.
    real_image_nonnegative: bool = False
    #: The semiring whose ``plus`` picks the best single path (Viterbi).
    viterbi_name: str = ""
    #: OpenFst arc type -> the homomorphism between that arc type's weights and this semiring's values.
    openfst_codecs: tuple[tuple[str, OpenFstCodec], ...] = ()
    #: The arc type whose weights ARE this semiring's values up to OpenFst's sign convention (tropical for min-plus,
    #: log for log); AT&T text without an arc type is read in it. None: files hold kleene's own numbers.
    openfst_native: str | None = None

    #: How generated kernels compute in this semiring (``None``: it has no kernel realisation). Only the
    #: storage semiring's algebra is used (see ``kernel_algebra``).
    kernel: KernelAlgebra | None = None
    #: The sympy node types of ``sym_plus``/``sym_times`` results (read back by ``sym_plus_args``/``sym_times_args``).
    sym_plus_head: type[sympy.Basic] | None = None
    sym_times_head: type[sympy.Basic] | None = None

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

    def sym_to_storage(self, e: sympy.Expr) -> sympy.Expr:
        """``to_storage`` of a symbolic element ``e`` (a weight function's value), as a sympy expression."""
        return e

    def sym_from_storage(self, e: sympy.Expr) -> sympy.Expr:
        """``from_storage`` of a symbolic stored value."""
        return e

    @property
    def log_weights(self) -> bool:
        """Whether the elements are log-weights: zero is -inf (log 0), one is 0 (log 1) and ⊗ adds (max-plus, log).

        A multiplicative factor r (a gate, a ratio) enters such a semiring as log r.
        """
        return bool(self.zero == -math.inf and self.one == 0.0)

    def random_element(self, rng: np.random.Generator, scale: float = 1.0) -> Any:
        """A random element in the semiring's usual range, finite and away from overflow (for numeric cross-checks
        of symbolic identities); signed values lie in ±``scale``."""
        return float(rng.uniform(-2.0, 1.0))

    # -- OpenFst interchange ------------------------------------------------------------
    @property
    def openfst_arc_type(self) -> str | None:
        """The OpenFst arc type that represents this semiring's values (None: no homomorphic image)."""
        return self.openfst_codecs[0][0] if self.openfst_codecs else None

    def openfst_codec(self, arc_type: str | None) -> OpenFstCodec:
        """(decode, encode) between the numbers of an AT&T file of ``arc_type`` and this semiring's values;
        ``arc_type=None``: the native convention (``openfst_native``), or kleene's own numbers.

        Raises:
            SemiringError: the arc type's weights do not map onto this semiring.
        """
        codecs = dict(self.openfst_codecs)
        if arc_type is None:
            return codecs[self.openfst_native] if self.openfst_native else _OPENFST_IDENTITY
        if arc_type not in codecs:
            fits = sorted(s.name for s in SEMIRINGS if arc_type in dict(s.openfst_codecs))
            raise SemiringError(
                f"OpenFst {arc_type} weights do not map onto the {self.name} semiring; they map onto {', '.join(fits)}"
            )
        return codecs[arc_type]

    # -- division and the reals (determinize, push, reduce, sampling) -----------------
    #: Whether a sum of non-zero weights is never zero (weighted determinization needs it: real weights cancel).
    zero_sum_free: bool = True

    def divide(self, a: Any, b: Any) -> Any:
        """The weight ``c`` with ``b ⊗ c = a`` (the residual of weight pushing and determinization).

        Raises:
            WeightError: ``b`` is the semiring zero.
            SemiringError: the semiring has no division.
        """
        if self.is_zero(b):
            raise WeightError(f"the {self.name} semiring cannot divide {a!r} by its zero {b!r}")
        return self._divide(a, b)

    def _divide(self, a: Any, b: Any) -> Any:
        raise SemiringError(f"the {self.name} semiring has no division")

    def quantize(self, value: Any, delta: float) -> Any:
        """A key equal for weights in the same cell of a ``delta`` grid (OpenFst's ``Quantize``), so that
        rounding does not tell equal weights apart; infinities are their own keys.

        Additive weights (log, tropical) are quantised as they are; multiplicative ones (real, max-times) on the
        scale of their logarithm, so that the grid is relative and small weights are not collapsed to zero.
        """
        number = float(value)
        if math.isinf(number):
            return number
        return round(number / delta)

    def to_real(self, value: Array) -> Array:
        """``value`` (a scalar, array or tensor) as real numbers under the homomorphism onto ``<R, +, *>`` (real:
        itself, log: exp); see ``has_real_image``.

        Raises:
            SemiringError: the semiring's ⊕ is not an image of + (idempotent semirings pick one path).
        """
        raise SemiringError(self._no_real_image())

    def _no_real_image(self) -> str:
        return f"the {self.name} semiring has no homomorphism onto the real numbers (its ⊕ does not add weights)"

    def from_real(self, value: float) -> Any:
        """The inverse of ``to_real``.

        Raises:
            SemiringError: as ``to_real``.
            WeightError: a real number outside the image (a negative one for log).
        """
        raise SemiringError(self._no_real_image())

    def from_probability(self, p: float) -> Any:
        """The element standing for probability ``p`` in (0, 1] (default: ``p`` itself)."""
        return p

    def stored_probability(self, p: float) -> float:
        """The element of probability ``p`` (``from_probability``) in the storage form, as a float."""
        return float(self.to_storage(self.from_probability(p)))

    # -- what layers store: probabilities, gates, factors, encoded scores ------------------
    @property
    def stores_logarithms(self) -> bool:
        """Whether the storage holds the logarithms of the elements (max-times, stored in max-plus): a layer then
        computes log E(x) directly (log σ without underflow) rather than ``to_storage(E(x))``."""
        return self.storage.log_weights and not self.log_weights

    @functools.cached_property
    def probability_storage(self) -> Literal["linear", "logarithm"] | None:
        """How the storage holds the element of a probability p (``stored_probability``; a gate σ(z)): ``"linear"``
        (as p: real, max-min), ``"logarithm"`` (as log p: log, max-plus, max-times), or None when it is neither
        (min-plus stores costs −log p, boolean forgets p): such a semiring cannot carry a gate."""
        try:
            half, quarter = self.stored_probability(0.5), self.stored_probability(0.25)
        except (KleeneError, TypeError, ValueError):
            return None
        forms: tuple[tuple[Literal["linear", "logarithm"], float, float], ...] = (
            ("linear", 0.5, 0.25),
            ("logarithm", math.log(0.5), math.log(0.25)),
        )
        for form, h, q in forms:
            if math.isclose(half, h, rel_tol=1e-12) and math.isclose(quarter, q, rel_tol=1e-12):
                return form
        return None

    @functools.cached_property
    def carries_factors(self) -> bool:
        """Whether a positive real factor r enters as an element that ⊗ multiplies by (``stored_factor``: exp(0) is
        ``one`` and exp(a) ⊗ exp(b) = exp(a + b)), as a learned residual or ratio needs: real, log, max-plus,
        max-times; not min-plus or boolean (no probability storage) nor max-min (⊗ takes the minimum)."""
        if self.probability_storage is None:
            return False
        storage = self.storage
        try:
            one = float(self.stored_factor(0.0))
            product = float(storage.times(self.stored_factor(math.log(2.0)), self.stored_factor(math.log(3.0))))
        except (KleeneError, TypeError, ValueError):
            return False
        return one == float(storage.one) and math.isclose(product, float(self.stored_factor(math.log(6.0))))

    def _probability_form(self) -> Literal["linear", "logarithm"]:
        form = self.probability_storage
        if form is None:
            raise SemiringError(
                f"the {self.name} semiring stores a probability p as {self.stored_probability(0.5)!r} for p = 0.5, "
                "neither p nor log p: it carries no gates or factors"
            )
        return form

    def stored_probabilities(self, p: Array) -> Array:
        """Probabilities ``p`` (a scalar, array or tensor in (0, 1]) as stored elements: log p or p
        (``probability_storage``).

        Raises:
            SemiringError: the semiring carries no probabilities (``probability_storage`` is None).
        """
        if self._probability_form() == "linear":
            return p
        if _traced_tensor(p):
            return p.log()
        with np.errstate(divide="ignore"):
            return _scalar_result(np.log(np.asarray(p, dtype=float)), p)

    def sym_probability(self, p: sympy.Expr) -> sympy.Expr:
        """The element of a symbolic probability ``p``: ``sym_from_storage`` of its stored form (log p or p).

        Raises:
            SemiringError: as ``stored_probabilities``.
        """
        return self.sym_from_storage(sympy.log(p) if self._probability_form() == "logarithm" else p)

    def stored_gate(self, pre_activation: Array) -> Array:
        """The gate σ(z) of pre-activations ``z`` as stored elements: log σ(z) (computed stably) where the storage
        holds logs of probabilities, σ(z) otherwise. The complement 1 − σ(z) is the gate of −z.

        Raises:
            SemiringError: as ``stored_probabilities``.
        """
        if self._probability_form() == "logarithm":
            return _log_sigmoid(pre_activation)
        return _sigmoid(pre_activation)

    def stored_factor(self, log_factor: Array) -> Array:
        """The multiplicative factor exp(r) of ``r`` = ``log_factor`` as stored elements (exp(0) is ``one``): r where
        the storage holds logs of probabilities, exp(r) otherwise.

        Raises:
            SemiringError: as ``stored_probabilities``.
        """
        return log_factor if self._probability_form() == "logarithm" else _exp(log_factor)

    def stored_sigmoid(self, scores: Array) -> Array:
        """The *element* σ(x) of ``scores`` (a number in (0, 1) taken as an element, as SoPa's sigmoid encoder gives)
        in storage form: ``to_storage(σ(x))``, computed as log σ(x) directly where the storage holds logarithms."""
        return _log_sigmoid(scores) if self.stores_logarithms else self.to_storage(_sigmoid(scores))

    def kernel_algebra(self) -> KernelAlgebra:
        """The kernel realisation of this semiring: its storage semiring's ``kernel``.

        Raises:
            CompileError: the semiring has no kernel realisation (e.g. boolean), naming it.
        """
        algebra = self.storage.kernel
        if algebra is None:
            raise CompileError(
                f"the {self.name} semiring has no kernel realisation (its storage semiring {self.storage.name} "
                "defines no `kernel`), so it cannot be compiled"
            )
        return algebra
    # -- sparse engine support (numpy arrays) ------------------------------------------
    @property
    def log_domain(self) -> bool:
        """The elements are natural logarithms of their real image (log-weights with a real image: log): cycle sums
        are linear solves of the image in scaled space (``is_field`` semirings solve their values directly)."""
        return self.log_weights and self.has_real_image

    #: The numpy ufunc of ``plus`` (used by ``scatter_plus``), for semirings whose plus is one.
    _plus_ufunc: np.ufunc | None = None

    def scatter_plus(self, out: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
        """In place, ``out[index[i]] = out[index[i]] ⊕ values[i]`` for every i (repeated indices accumulate)."""
        if self._plus_ufunc is not None:
            self._plus_ufunc.at(out, index, values)
            return
        for k, v in zip(index.tolist(), values.tolist()):  # generic and slow: one plus per value
            out[k] = self.plus(out[k], v)

    def segment_sum(self, values: np.ndarray, index: np.ndarray, size: int) -> np.ndarray:
        """``out[k] = ⊕ {values[i] : index[i] == k}`` for ``k < size`` (zero where nothing lands)."""
        out: np.ndarray = self.zeros((size,))
        self.scatter_plus(out, index, values)
        return out

    def repeated_sum(self, values: np.ndarray, count: int) -> np.ndarray:
        """``values ⊕ values ⊕ ... (count times)`` elementwise (zero for count 0), by doubling."""
        result: np.ndarray = self.zeros(np.shape(values))
        power = np.asarray(values)
        while count:
            if count & 1:
                result = self.plus(result, power)
            power = self.plus(power, power)
            count >>= 1
        return result

    # -- symbolic realisation ---------------------------------------------------------
    def sym_plus_args(self, e: sympy.Basic) -> tuple[sympy.Basic, ...] | None:
        """The terms of ``e`` when it is a ``sym_plus`` node, else ``None``."""
        head = self.sym_plus_head
        return tuple(e.args) if head is not None and isinstance(e, head) else None

    def sym_times_args(self, e: sympy.Basic) -> tuple[sympy.Basic, ...] | None:
        """The factors of ``e`` when it is a ``sym_times`` node (``x**k`` read as k factors for Mul), else ``None``."""
        head = self.sym_times_head
        if head is None:
            return None
        if isinstance(e, head):
            return tuple(e.args)
        if head is sympy.Mul and isinstance(e, sympy.Pow):
            base, exponent = e.args
            if exponent.is_Integer and int(exponent) >= 2:
                return (base,) * int(exponent)
        return None

    def sym_to_real(self, e: sympy.Expr) -> sympy.Expr | None:
        """``e`` mapped by an injective homomorphism into the real field (where sympy decides equality), or
        ``None`` when the semiring has none (then equality is decided on formal polynomials)."""
        return None

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


class _Multiplicative(Semiring):
    """Weights that multiply (real, max-times): division is ``/`` and weights are quantised on the scale of their
    logarithm, so that the grid is relative and small weights are not collapsed to zero."""

    def quantize(self, value: Any, delta: float) -> Any:
        number = float(value)
        if number == 0.0 or math.isinf(number):
            return number
        return (number > 0, round(math.log(abs(number)) / delta))

    def _divide(self, a: Any, b: Any) -> Any:
        return a / b


class RealSemiring(_Multiplicative):
    """``<R, +, *, 0, 1>``: probabilities, expected counts, linear recurrences."""

    name = "real"
    aliases = ("probability", "plus-times", "sum-product")
    zero, one = 0.0, 1.0
    viterbi_name = "max-times"
    is_field = True
    has_real_image = True
    openfst_codecs = (("log", _OPENFST_PROBABILITY),)


    def random_element(self, rng: np.random.Generator, scale: float = 1.0) -> Any:
        return float(rng.uniform(-scale, scale))

    kernel = KernelAlgebra(ADD, MUL)
    sym_plus_head, sym_times_head = sympy.Add, sympy.Mul

    def sym_to_real(self, e: sympy.Expr) -> sympy.Expr | None:
        return e
    _plus_ufunc = np.add

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

    zero_sum_free = False


    def to_real(self, value: Array) -> Array:
        return float(value) if _is_scalar(value) else value

    def from_real(self, value: float) -> Any:
        return float(value)

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
    has_real_image = True
    real_image_nonnegative = True
    openfst_codecs = (("log", _OPENFST_NEGATION),)
    openfst_native = "log"

    kernel = KernelAlgebra(LOGADDEXP, ADD)
    sym_times_head = sympy.Add

    def from_probability(self, p: float) -> Any:
        return math.log(p)

    def sym_plus_args(self, e: sympy.Basic) -> tuple[sympy.Basic, ...] | None:
        """``log(k1 exp(a1) + k2 exp(a2) + ...)`` as a1 (k1 times), a2 (k2 times), ...; sympy merges equal
        terms (``log(exp(c) + exp(c))`` is ``log(2 exp(c))``), so small integer counts are read back."""
        if not isinstance(e, sympy.log):
            return None
        out: list[sympy.Basic] = []
        for part in sympy.Add.make_args(e.args[0]):
            count, rest = part.as_coeff_Mul()
            if not isinstance(rest, sympy.exp) or not count.is_Integer or not 1 <= int(count) <= 64:
                return None
            out.extend([rest.args[0]] * int(count))
        return tuple(out)

    def sym_to_real(self, e: sympy.Expr) -> sympy.Expr | None:
        return sympy.exp(e)  # exp maps the log semiring isomorphically onto (R>=0, +, *)
    _plus_ufunc = np.logaddexp

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
        # -log(1 - e^a) to a few ulps for every a < 0: log(-expm1(a)) near 0 (where 1 - e^a loses digits),
        # log1p(-exp(a)) below -log 2 (where log(1 - tiny) would round to 0)
        if _is_torch(a):
            import torch

            near = a > -_LN2
            return -torch.where(near, torch.log(-torch.expm1(a)), torch.log1p(-torch.exp(a)))
        if _is_scalar(a):
            v = float(a)
            return -(math.log(-math.expm1(v)) if v > -_LN2 else math.log1p(-math.exp(v)))
        x = np.asarray(a, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return -np.where(x > -_LN2, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))

    def _divide(self, a: Any, b: Any) -> Any:
        return a - b

    def to_real(self, value: Array) -> Array:
        return _apply(value, "exp")

    def from_real(self, value: float) -> Any:
        if value < 0:
            raise WeightError(f"{value!r} is negative: it has no logarithm in the log semiring")
        return math.log(value) if value > 0 else -math.inf

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


class _Selective(Semiring):
    """Semirings whose plus picks one operand, the larger or the smaller (max-plus, min-plus, max-times): ``plus``
    and ``sum`` by the numpy ufunc of the pick, ``_plus_ufunc`` (``np.maximum`` where ``best`` is "max",
    ``np.minimum`` where it is "min"), and torch's functions of the same names."""

    _plus_ufunc: np.ufunc = np.maximum

    def plus(self, a: Array, b: Array) -> Array:
        if _is_torch(a) or _is_torch(b):
            import torch

            return getattr(torch, self._plus_ufunc.__name__)(torch.as_tensor(a), torch.as_tensor(b))
        return _scalar_result(self._plus_ufunc(a, b), a, b)

    def sum(self, x: Array, axis: int = -1) -> Array:
        if not _is_torch(x) and np.asarray(x).shape[axis] == 0:
            return np.full(np.delete(np.asarray(x).shape, axis), self.zero)
        return _reduce(x, axis, self._plus_ufunc.reduce, "a" + self.best)  # torch.amax or torch.amin


class _MaxPlusLike(_Selective):
    """Shared plumbing of the tropical semirings ``<R, max|min, +>``."""

    idempotent = True
    k_closed = 0
    sym_times_head = sympy.Add

    def _divide(self, a: Any, b: Any) -> Any:
        return a - b

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
    openfst_codecs = (("tropical", _OPENFST_NEGATION),)

    kernel = KernelAlgebra(MAX, ADD)
    sym_plus_head = sympy.Max

    def from_probability(self, p: float) -> Any:
        return math.log(p)
    _plus_ufunc = np.maximum

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
    openfst_codecs = (("tropical", _OPENFST_IDENTITY),)
    openfst_native = "tropical"

    kernel = KernelAlgebra(MIN, ADD)
    sym_plus_head = sympy.Min

    def from_probability(self, p: float) -> Any:
        return -math.log(p)
    _plus_ufunc = np.minimum

    star_diverges_when = "a negative-cost cycle"

    def star_diverges(self, a: Array) -> Array:
        return a < 0.0

    def sym_plus(self, *terms: sympy.Expr) -> sympy.Expr:
        return sympy.Min(*terms) if terms else self.sym_zero

    def sym_star(self, a: sympy.Expr) -> sympy.Expr:
        return sympy.Piecewise((sympy.S.Zero, a >= 0), (-sympy.oo, True))


class MaxTimesSemiring(_Selective, _Multiplicative):
    """``<[0, inf), max, *, 0, 1>``: best-path probabilities (SoPa's max-product)."""

    name = "max-times"
    aliases = ("max-product", "viterbi", "maxtimes")
    zero, one = 0.0, 1.0
    idempotent = True
    best = "max"
    k_closed = 0
    openfst_codecs = (("tropical", _OPENFST_PROBABILITY),)

    sym_plus_head, sym_times_head = sympy.Max, sympy.Mul

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

    def sym_to_storage(self, e: sympy.Expr) -> sympy.Expr:
        return sympy.log(e)

    def sym_from_storage(self, e: sympy.Expr) -> sympy.Expr:
        return sympy.exp(e)

    def random_element(self, rng: np.random.Generator, scale: float = 1.0) -> Any:
        return float(rng.uniform(0.0, 1.0))
    _plus_ufunc = np.maximum

    def _check_number(self, number: float, where: str) -> None:
        if number < 0 or math.isinf(number):
            raise WeightError(f"{where}: {number} is not an element of the max-times semiring [0, inf)")

    def times(self, a: Array, b: Array) -> Array:
        return _scalar_result(a * b, a, b)

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
    weightless = True
    openfst_codecs = (("tropical", _OPENFST_SUPPORT), ("log", _OPENFST_SUPPORT))

    def random_element(self, rng: np.random.Generator, scale: float = 1.0) -> Any:
        return bool(rng.integers(0, 2))

    sym_plus_head, sym_times_head = sympy.Or, sympy.And

    def from_probability(self, p: float) -> Any:
        return p > 0
    _plus_ufunc = np.logical_or

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

    def _divide(self, a: Any, b: Any) -> Any:
        return a

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
_REGISTERED: list[Semiring] = []


def _keys(semiring: Semiring) -> list[str]:
    names = [semiring.name, *semiring.aliases]
    return [k for n in names for k in dict.fromkeys((n.strip().lower(), n.strip().lower().replace("-", "_")))]


def register_semiring(semiring: Semiring) -> Semiring:
    """Make ``get_semiring`` (and so every API taking a semiring name) find ``semiring`` by its name and aliases.

    Registering the same object again is a no-op; returns ``semiring``.

    Raises:
        SemiringError: ``semiring`` is not a ``Semiring``, has no name, or a name or alias already names another
            semiring.
    """
    if not isinstance(semiring, Semiring):
        raise SemiringError(f"register_semiring expects a Semiring instance, got {semiring!r}")
    if not semiring.name:
        raise SemiringError(f"{semiring!r}: a semiring needs a non-empty `name` to be registered")
    for key in _keys(semiring):
        if key in _BY_NAME and _BY_NAME[key] is not semiring:
            raise SemiringError(f"the name {key!r} already names the {_BY_NAME[key].name} semiring")
    for key in _keys(semiring):
        _BY_NAME[key] = semiring
    if semiring not in _REGISTERED:
        _REGISTERED.append(semiring)
    # answered now, in eager Python: layers ask them inside traced forwards (torch.compile, torch.export)
    _ = semiring.probability_storage, semiring.carries_factors
    return semiring


for _s in SEMIRINGS:
    register_semiring(_s)


def get_semiring(semiring: str | Semiring) -> Semiring:
    """Look a semiring up by name ("real", "log", "max-plus", "min-plus"/"tropical", ...); a ``Semiring`` is
    returned as it is.

    Raises:
        SemiringError: no semiring of that name is registered (the message lists the known ones).
    """
    if isinstance(semiring, Semiring):
        return semiring
    key = str(semiring).strip().lower()
    if key not in _BY_NAME:
        known = ", ".join(s.name for s in _REGISTERED)
        raise SemiringError(f"unknown semiring {semiring!r}; known: {known} (and 'tropical')")
    return _BY_NAME[key]
