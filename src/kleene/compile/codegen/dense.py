"""The dense path: ``c_t = W_t ⊗ c_{t-1} ⊕ o_t`` (a batched semiring matrix-vector product per step) as one kernel.

An automaton whose states all connect (ISAN, a dense extracted automaton) has d² arcs: a template would unroll
them into d² straight-line terms (a build time quadratic in d). Here the step is a loop over rows and columns,
generic in ``d``, run for every step inside the kernel (no Python loop per time step). In the storage semiring,
with ``W`` (B, T, d, d) row-major ``W[i, j]``, offsets ``o`` (B, T, d), lengths (B,) and an initial ``c`` (B, d)::

    c_t[i] = o_t[i] ⊕ ⊕_j W_t[i, j] ⊗ c_{t-1}[j]      for t < length[b]

``h`` (B, T, d) holds ``c_t`` at the consumed steps (the caller pre-fills the rest: 0); the final ``c`` is
``c_{length - 1}`` (``c`` itself for an empty sequence). The backward needs the states ``c_t``, which ``h``
already holds, so it stores nothing and recomputes nothing but the products ``W ⊗ c`` of one step.

⊕, ⊗ and their reverse modes come from the semiring's kernel algebra (``Semiring.kernel_algebra()``) spelled by
a ``kleene.compile.codegen.writer.Dialect``: helper functions ``dense_plus``, ``dense_times``,
``dense_term_grad`` (the gradient reaching one term ``t`` of ``r = ⊕ terms``: ``LaneWriter.output_grad``) and
``dense_times_grads`` (``LaneWriter.factor_grads`` of ``W ⊗ c``). A ⊕ whose rule is ``select`` (max, min) sends
the gradient to the first term equal to the result, in the order (offset, j = 0, 1, ...), as the writer's
``op_grads`` does; the kernels find that term by a min-reduction over j. A ⊕ whose rule is ``softmax`` (its
gradient ``exp(t - r)``: ⊕ is log-sum-exp) reduces a CPU row as ``m + log Σ exp(t - m)`` with ``m`` the largest
term: one log a row instead of an exp and a log1p a term.

Three dialects spell it: C++ (``generate_dense_cpp``, the CPU kernels, a thread pool over the batch, the j loop
vectorized over partial accumulators), CUDA (``generate_dense_cuda``, one block per sequence, the state in shared
memory) and Triton (``generate_dense_triton``, one program per sequence, a (d, d) tile per step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from kleene.automata.semiring import Semiring
from kleene.compile.codegen.cpp import CDialect, c_helpers, cpp_prelude, cpu_helpers
from kleene.compile.codegen.cuda import _PRELUDE as _CUDA_PRELUDE
from kleene.compile.codegen.cuda import CudaDialect
from kleene.compile.codegen.entries import ENTRY_DTYPES, guarded
from kleene.compile.codegen.triton import _PRELUDE as _TRITON_PRELUDE
from kleene.compile.codegen.triton import TritonDialect
from kleene.compile.codegen.writer import Dialect, LaneWriter

if TYPE_CHECKING:
    from kleene.compile.template import Plan

#: Partial accumulators of a CPU row (a multiple of the widest vector: 64 bytes of float32).
CPU_ACCUMULATORS = 16
#: Threads per block of the CUDA kernels (one block per sequence; rows and columns are strided over them).
CUDA_DENSE_THREADS = 256


@dataclass(frozen=True)
class DenseSpec:
    """What a dialect reads of a plan, for the dense path: the storage semiring (``semiring`` and ``storage``)."""

    semiring: Semiring

    @property
    def storage(self) -> Semiring:
        return self.semiring.storage


def _as_plan(semiring: Semiring) -> Plan:
    """``semiring`` in the shape a ``Dialect`` reads (its ``semiring``/``storage`` only).

    Raises:
        CompileError: the semiring has no kernel realisation.
    """
    semiring.kernel_algebra()
    return cast("Plan", DenseSpec(semiring.storage))


def selects(semiring: Semiring) -> bool:
    """Whether ⊕'s reverse mode sends the gradient to one term (rule ``select``: max, min)."""
    return semiring.kernel_algebra().plus.rule == "select"


def _helper_bodies(dialect: Dialect, indent: str) -> tuple[str, str, str, list[str], tuple[str, str]]:
    """(⊕ of a, b; ⊗ of a, b; the gradient of term t of r = ⊕ terms given g; the statements and the
    (gw, gc) expressions of the gradients of ``prod = w ⊗ c`` given ``g``), spelled in ``dialect``."""
    writer = LaneWriter(dialect.plan, dialect, indent)
    plus, times = dialect.plus("a", "b"), dialect.times("a", "b")
    term = writer.output_grad("t", "r", "g") if dialect.kernel.plus.rule != "select" else dialect.fzero
    gw, gc = writer.factor_grads(["w", "c"], "prod", "g", "tg")
    return plus, times, term, writer.lines, (gw, gc)


# --------------------------------------------------------------------------------------------
# C++ (CPU) and CUDA: shared helpers
# --------------------------------------------------------------------------------------------
def _c_algebra(dialect: CDialect, qualifier: str) -> list[str]:
    plus, times, term, lines, (gw, gc) = _helper_bodies(dialect, "  ")
    select = "true" if dialect.kernel.plus.rule == "select" else "false"
    return [
        f"// the storage semiring {dialect.plan.storage.name}: ⊕ {dialect.kernel.plus.name}, "
        f"⊗ {dialect.kernel.times.name}",
        f"static constexpr bool DENSE_SELECT = {select};  // ⊕'s gradient goes to the first best term",
        f"template <typename T> {qualifier} T dense_zero() {{ return {dialect.zero}; }}",
        f"template <typename T> {qualifier} T dense_plus(T a, T b) {{ return {plus}; }}",
        f"template <typename T> {qualifier} T dense_times(T a, T b) {{ return {times}; }}",
        "// the gradient reaching a term t of r = ⊕ terms from g (rules sum and softmax; select: see DENSE_SELECT)",
        f"template <typename T> {qualifier} T dense_term_grad(T g, T t, T r) {{",
        "  (void)g; (void)t; (void)r;",
        f"  return {term};",
        "}",
        "// the gradients (to w, to c) of prod = w ⊗ c from g",
        f"template <typename T> {qualifier} void dense_times_grads(T g, T w, T c, T prod, T& gw, T& gc) {{",
        "  (void)w; (void)c; (void)prod;",
        *["  " + line for line in lines],
        f"  gw = {gw};",
        f"  gc = {gc};",
        "}",
    ]


_CPU_KERNELS = r"""
static constexpr int64_t DENSE_V = {accumulators};
static constexpr bool DENSE_SOFTMAX = {softmax};  // ⊕ is log-sum-exp (its gradient exp(t - r))

// o ⊕ ⊕_j w[j] ⊗ c[j]: DENSE_V partial sums (independent lanes: the j loop vectorizes), then the tail and the lanes
template <typename T>
static inline T dense_row(const T* __restrict__ w, const T* __restrict__ c, T o, int64_t D) {{
  if constexpr (DENSE_SOFTMAX) {{
    // ⊕ is log-sum-exp: the largest term m, then m + log Σ exp(t - m) (one log a row, exp of t - m <= 0)
    alignas(64) T top[DENSE_V];
    for (int64_t l = 0; l < DENSE_V; ++l) top[l] = o;
    int64_t j = 0;
    for (; j + DENSE_V <= D; j += DENSE_V) {{
#pragma omp simd
      for (int64_t l = 0; l < DENSE_V; ++l) top[l] = kleene_max(top[l], dense_times(w[j + l], c[j + l]));
    }}
    T m = o;
    for (; j < D; ++j) m = kleene_max(m, dense_times(w[j], c[j]));
    for (int64_t l = 0; l < DENSE_V; ++l) m = kleene_max(m, top[l]);
    if (!(m > T({neg_inf}) && m < T({inf}))) return m;  // every term -inf, a +inf term, or NaN
    alignas(64) T sum[DENSE_V];
    for (int64_t l = 0; l < DENSE_V; ++l) sum[l] = T(0);
    for (j = 0; j + DENSE_V <= D; j += DENSE_V) {{
#pragma omp simd
      for (int64_t l = 0; l < DENSE_V; ++l) sum[l] += {exp_term};
    }}
    T total = {exp_offset};
    for (; j < D; ++j) total += {exp_tail};
    for (int64_t l = 0; l < DENSE_V; ++l) total += sum[l];
    return m + {log_total};
  }}
  alignas(64) T acc[DENSE_V];
  for (int64_t l = 0; l < DENSE_V; ++l) acc[l] = dense_zero<T>();
  int64_t j = 0;
  for (; j + DENSE_V <= D; j += DENSE_V) {{
#pragma omp simd
    for (int64_t l = 0; l < DENSE_V; ++l) acc[l] = dense_plus(acc[l], dense_times(w[j + l], c[j + l]));
  }}
  T r = o;
  for (; j < D; ++j) r = dense_plus(r, dense_times(w[j], c[j]));
  for (int64_t l = 0; l < DENSE_V; ++l) r = dense_plus(r, acc[l]);
  return r;
}}

template <typename T>
static void dense_forward_impl(const T* __restrict__ W, const T* __restrict__ off, const int64_t* __restrict__ lengths,
                               const T* __restrict__ c0, T* __restrict__ h, T* __restrict__ cT, int64_t B, int64_t Tn,
                               int64_t D, int threads) {{
  if (B == 0) return;
  kleene_pool().run(B, threads, [&](int64_t b) {{
    const int64_t len = lengths[b];
    const T* cp = c0 + b * D;
    for (int64_t t = 0; t < len; ++t) {{
      const int64_t bt = b * Tn + t;
      const T* Wt = W + bt * D * D;
      const T* ot = off + bt * D;
      T* ht = h + bt * D;
      for (int64_t i = 0; i < D; ++i) {{
        if (i + 4 < D) __builtin_prefetch(Wt + (i + 4) * D, 0, 0);
        ht[i] = dense_row(Wt + i * D, cp, ot[i], D);
      }}
      cp = ht;
    }}
    for (int64_t i = 0; i < D; ++i) cT[b * D + i] = cp[i];
    for (int64_t t = len; t < Tn; ++t)
      for (int64_t i = 0; i < D; ++i) h[(b * Tn + t) * D + i] = T(0);
  }});
}}

// reverse mode, last step first: g (the gradient of c_t) -> gradients of W_t, o_t and c_{{t-1}} (gp)
template <typename T>
static void dense_backward_impl(const T* __restrict__ W, const T* __restrict__ off,
                                const int64_t* __restrict__ lengths, const T* __restrict__ c0,
                                const T* __restrict__ h, const T* __restrict__ gh, const T* __restrict__ gcT,
                                T* __restrict__ gW, T* __restrict__ goff, T* __restrict__ gc0, int64_t B, int64_t Tn,
                                int64_t D, int threads) {{
  if (B == 0) return;
  kleene_pool().run(B, threads, [&](int64_t b) {{
    thread_local kleene_std::vector<T> buffer;
    if (buffer.size() < static_cast<size_t>(2 * D)) buffer.resize(2 * D);
    T* __restrict__ g = buffer.data();
    T* __restrict__ gp = g + D;
    const int64_t len = lengths[b];
    for (int64_t i = 0; i < D; ++i) g[i] = gcT[b * D + i];
    for (int64_t t = len - 1; t >= 0; --t) {{
      const int64_t bt = b * Tn + t;
      const T* Wt = W + bt * D * D;
      const T* ot = off + bt * D;
      const T* ct = h + bt * D;
      const T* cp = t > 0 ? h + (bt - 1) * D : c0 + b * D;
      T* gWt = gW + bt * D * D;
      for (int64_t i = 0; i < D; ++i) g[i] += gh[bt * D + i];
      for (int64_t j = 0; j < D; ++j) gp[j] = T(0);
      for (int64_t i = 0; i < D; ++i) {{
        const T gi = g[i], r = ct[i], o = ot[i];
        const T* __restrict__ w = Wt + i * D;
        T* __restrict__ gw = gWt + i * D;
        if (i + 2 < D) __builtin_prefetch(Wt + (i + 2) * D, 0, 0);
        if constexpr (DENSE_SELECT) {{
          // the first term equal to the result: the offset (-1), else the least such j (D: none, e.g. NaN)
          int64_t first = D;
          if (o == r) {{
            first = -1;
          }} else {{
#pragma omp simd reduction(min : first)
            for (int64_t j = 0; j < D; ++j) first = kleene_std::min(first, dense_times(w[j], cp[j]) == r ? j : D);
          }}
          goff[bt * D + i] = first == -1 ? gi : T(0);
#pragma omp simd
          for (int64_t j = 0; j < D; ++j) {{
            const T prod = dense_times(w[j], cp[j]);
            T a, c;
            dense_times_grads(j == first ? gi : T(0), w[j], cp[j], prod, a, c);
            gw[j] = a;
            gp[j] += c;
          }}
        }} else {{
          goff[bt * D + i] = dense_term_grad(gi, o, r);
#pragma omp simd
          for (int64_t j = 0; j < D; ++j) {{
            const T prod = dense_times(w[j], cp[j]);
            T a, c;
            dense_times_grads(dense_term_grad(gi, prod, r), w[j], cp[j], prod, a, c);
            gw[j] = a;
            gp[j] += c;
          }}
        }}
      }}
      kleene_std::swap(g, gp);
    }}
    for (int64_t i = 0; i < D; ++i) gc0[b * D + i] = g[i];
    for (int64_t t = kleene_std::max<int64_t>(len, 0); t < Tn; ++t) {{
      std::memset(gW + (b * Tn + t) * D * D, 0, sizeof(T) * D * D);
      std::memset(goff + (b * Tn + t) * D, 0, sizeof(T) * D);
    }}
  }});
}}
"""


def generate_dense_cpp(semiring: Semiring) -> str:
    """The C++ source of the dense path's CPU kernels in ``semiring``'s storage algebra; exports, for ``T`` in
    float (``f32``) and double (``f64``)::

        void kleene_dense_forward_f32(const T* W, const T* off, const int64_t* lengths, const T* c0, T* h, T* cT,
                                      int64_t B, int64_t T, int64_t D, int threads)
        void kleene_dense_backward_f32(const T* W, const T* off, const int64_t* lengths, const T* c0, const T* h,
                                       const T* grad_h, const T* grad_cT, T* grad_W, T* grad_off, T* grad_c0,
                                       int64_t B, int64_t T, int64_t D, int threads)

    on contiguous tensors of the module docstring's shapes (the forward writes every entry of ``h``: 0 past a
    sequence's length; the backward every entry of its gradients).

    Raises:
        CompileError: the semiring has no kernel realisation.
    """
    dialect = CDialect(_as_plan(semiring))
    parts = [
        cpp_prelude([dialect.kernel], "kleene.compile.codegen.dense"),
        cpu_helpers(),
        *_c_algebra(dialect, "static inline"),
        _CPU_KERNELS.format(
            accumulators=CPU_ACCUMULATORS,
            softmax="true" if dialect.kernel.plus.rule == "softmax" else "false",
            inf=dialect.number(math.inf),
            neg_inf=dialect.number(-math.inf),
            exp_term=dialect.exp("dense_times(w[j + l], c[j + l]) - m"),
            exp_offset=dialect.exp("o - m"),
            exp_tail=dialect.exp("dense_times(w[j], c[j]) - m"),
            log_total=dialect.call_forms["log"].format(x="total"),
        ),
    ]
    for suffix, ctype in ENTRY_DTYPES:
        parts += guarded("forward", suffix, [
            f'extern "C" void kleene_dense_forward_{suffix}(const {ctype}* W, const {ctype}* off, '
            f"const int64_t* lengths, const {ctype}* c0, {ctype}* h, {ctype}* cT, int64_t B, int64_t Tn, int64_t D, "
            "int threads) {",
            "  dense_forward_impl(W, off, lengths, c0, h, cT, B, Tn, D, threads);",
            "}",
        ])  # fmt: skip
        parts += guarded("backward", suffix, [
            f'extern "C" void kleene_dense_backward_{suffix}(const {ctype}* W, const {ctype}* off, '
            f"const int64_t* lengths, const {ctype}* c0, const {ctype}* h, const {ctype}* gh, const {ctype}* gcT, "
            f"{ctype}* gW, {ctype}* goff, {ctype}* gc0, int64_t B, int64_t Tn, int64_t D, int threads) {{",
            "  dense_backward_impl(W, off, lengths, c0, h, gh, gcT, gW, goff, gc0, B, Tn, D, threads);",
            "}",
        ])  # fmt: skip
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------------------------
# CUDA
# --------------------------------------------------------------------------------------------
_CUDA_KERNELS = r"""
// one block per sequence b; the state c_{{t-1}} in shared memory; rows (forward) and columns (backward) strided
// over the block's threads
template <typename T>
__device__ void dense_forward_impl(const T* __restrict__ W, const T* __restrict__ off,
                                   const int64_t* __restrict__ lengths, const T* __restrict__ c0, T* h, T* cT,
                                   int64_t B, int64_t Tn, int64_t D) {{
  extern __shared__ unsigned char dense_shared[];
  T* c = reinterpret_cast<T*>(dense_shared);
  const int64_t b = blockIdx.x;
  if (b >= B) return;
  const int64_t len = lengths[b];
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) c[i] = c0[b * D + i];
  __syncthreads();
  for (int64_t t = 0; t < len; ++t) {{
    const int64_t bt = b * Tn + t;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {{
      const T* w = W + (bt * D + i) * D;
      T r = off[bt * D + i];
      for (int64_t j = 0; j < D; ++j) r = dense_plus(r, dense_times(w[j], c[j]));
      h[bt * D + i] = r;
    }}
    __syncthreads();
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) c[i] = h[bt * D + i];
    __syncthreads();
  }}
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) cT[b * D + i] = c[i];
}}

template <typename T>
__device__ void dense_backward_impl(const T* __restrict__ W, const T* __restrict__ off,
                                    const int64_t* __restrict__ lengths, const T* __restrict__ c0,
                                    const T* __restrict__ h, const T* __restrict__ gh, const T* __restrict__ gcT,
                                    T* gW, T* goff, T* gc0, int64_t B, int64_t Tn, int64_t D) {{
  extern __shared__ unsigned char dense_shared[];
  T* g = reinterpret_cast<T*>(dense_shared);  // the gradient of c_t (with the output's)
  T* cp = g + D;                              // c_{{t-1}}
  T* gp = cp + D;                             // the gradient of c_{{t-1}}
  int64_t* first = reinterpret_cast<int64_t*>(gp + D);  // per row: the term receiving a select's gradient
  const int64_t b = blockIdx.x;
  if (b >= B) return;
  const int64_t len = lengths[b];
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) g[i] = gcT[b * D + i];
  __syncthreads();
  for (int64_t t = len - 1; t >= 0; --t) {{
    const int64_t bt = b * Tn + t;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {{
      g[j] += gh[bt * D + j];
      cp[j] = t > 0 ? h[(bt - 1) * D + j] : c0[b * D + j];
    }}
    __syncthreads();
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {{  // rows: the gradients of W_t and o_t
      const T* w = W + (bt * D + i) * D;
      T* gw = gW + (bt * D + i) * D;
      const T gi = g[i], r = h[bt * D + i], o = off[bt * D + i];
      int64_t f = D;
      if (DENSE_SELECT) {{
        if (o == r) f = -1;
        for (int64_t j = D - 1; j >= 0 && f != -1; --j) f = dense_times(w[j], cp[j]) == r ? j : f;
        first[i] = f;
        goff[bt * D + i] = f == -1 ? gi : T(0);
      }} else {{
        goff[bt * D + i] = dense_term_grad(gi, o, r);
      }}
      for (int64_t j = 0; j < D; ++j) {{
        const T prod = dense_times(w[j], cp[j]);
        const T gt = DENSE_SELECT ? (j == f ? gi : T(0)) : dense_term_grad(gi, prod, r);
        T a, c;
        dense_times_grads(gt, w[j], cp[j], prod, a, c);
        gw[j] = a;
      }}
    }}
    __syncthreads();
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {{  // columns: the gradient of c_{{t-1}}
      T acc = T(0);
      for (int64_t i = 0; i < D; ++i) {{
        const T w = W[(bt * D + i) * D + j];
        const T prod = dense_times(w, cp[j]);
        const T r = h[bt * D + i];
        const T gt = DENSE_SELECT ? (first[i] == j ? g[i] : T(0)) : dense_term_grad(g[i], prod, r);
        T a, c;
        dense_times_grads(gt, w, cp[j], prod, a, c);
        acc += c;
      }}
      gp[j] = acc;
    }}
    __syncthreads();
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) g[j] = gp[j];
    __syncthreads();
  }}
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) gc0[b * D + i] = g[i];
}}
"""

_CUDA_FORWARD_ARGS = ("W", "off", "lengths", "c0", "h", "cT")
_CUDA_BACKWARD_ARGS = ("W", "off", "lengths", "c0", "h", "gh", "gcT", "gW", "goff", "gc0")
_CUDA_OUTPUTS = {"forward": {"h", "cT"}, "backward": {"gW", "goff", "gc0"}}


def _cuda_launcher(kind: str, args: tuple[str, ...], shared: str) -> tuple[str, list[str]]:
    outputs = _CUDA_OUTPUTS[kind]
    signature = (
        f"void kleene_dense_{kind}_launch(bool f64, "
        + ", ".join(f"int64_t {a}" for a in args)
        + ", int64_t B, int64_t Tn, int64_t D, int64_t stream)"
    )

    def cast(ctype: str, name: str) -> str:
        if name == "lengths":
            return "reinterpret_cast<const int64_t*>(lengths)"
        const = "" if name in outputs else "const "
        return f"reinterpret_cast<{const}{ctype}*>({name})"

    lines = []
    for suffix, ctype in (("f32", "float"), ("f64", "double")):
        params = ", ".join(
            f"{'' if a in outputs else 'const '}{'int64_t' if a == 'lengths' else ctype}* {a}" for a in args
        )
        lines += [
            f'extern "C" __global__ void __launch_bounds__({CUDA_DENSE_THREADS}) kleene_dense_{kind}_{suffix}('
            f"{params}, int64_t B, int64_t Tn, int64_t D) {{",
            f"  dense_{kind}_impl<{ctype}>({', '.join(args)}, B, Tn, D);",
            "}",
        ]
    lines += ["#ifdef __CUDACC__", signature + " {", "  if (B == 0) return;"]
    lines += ["  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);"]
    for f64, ctype, suffix in (("true", "double", "f64"), ("false", "float", "f32")):
        size = shared.format(t=ctype)
        lines += [
            f"  if (f64 == {f64}) kleene_dense_{kind}_{suffix}<<<unsigned(B), {CUDA_DENSE_THREADS}, {size}, s>>>("
            f"{', '.join(cast(ctype, a) for a in args)}, B, Tn, D);"
        ]
    lines += [
        "  const cudaError_t err = cudaGetLastError();",
        "  if (err != cudaSuccess)",
        f'    throw std::runtime_error(std::string("kleene_dense_{kind}: ") + cudaGetErrorString(err));',
        "}",
        "#endif  // __CUDACC__",
    ]
    return signature, lines


def generate_dense_cuda(semiring: Semiring) -> tuple[str, str, list[str]]:
    """(CUDA source, C++ declarations of its launchers, their names) of the dense path in ``semiring``'s storage
    algebra: kernels ``kleene_dense_forward_f32`` / ``_f64`` and ``kleene_dense_backward_*`` (the CPU kernels'
    arguments without ``threads``), launched as one block of ``CUDA_DENSE_THREADS`` threads per sequence by
    ``kleene_dense_forward_launch(bool f64, int64_t W, ..., int64_t B, int64_t Tn, int64_t D, int64_t stream)``
    (raw device pointers as integers) and ``kleene_dense_backward_launch``. The caller pre-fills what the kernels
    do not write: ``h``, ``grad_W`` and ``grad_off`` past a sequence's length (0).

    Raises:
        CompileError: the semiring has no kernel realisation.
    """
    dialect = CudaDialect(_as_plan(semiring))
    forward, forward_lines = _cuda_launcher("forward", _CUDA_FORWARD_ARGS, "size_t(D) * sizeof({t})")
    backward, backward_lines = _cuda_launcher(
        "backward", _CUDA_BACKWARD_ARGS, "size_t(D) * (3 * sizeof({t}) + sizeof(int64_t))"
    )
    parts = [
        _CUDA_PRELUDE.replace("kleene.compile.codegen.cuda", "kleene.compile.codegen.dense"),
        c_helpers("__device__ __forceinline__", ""),
        *_c_algebra(dialect, "__device__ __forceinline__"),
        _CUDA_KERNELS.format(),
        *forward_lines,
        "",
        *backward_lines,
    ]
    names = ["kleene_dense_forward_launch", "kleene_dense_backward_launch"]
    return "\n".join(parts) + "\n", f"{forward};\n{backward};\n", names


# --------------------------------------------------------------------------------------------
# Triton
# --------------------------------------------------------------------------------------------
_TRITON_KERNELS = '''

# (tl.sum and tl.min are jit functions, which the interpreter cannot call from a generated module: reductions are
# spelled with tl.reduce and these combiners)
@triton.jit
def _dense_add(a, b):
    return a + b


@triton.jit
def _dense_least(a, b):
    return tl.minimum(a, b)


@triton.jit
def kleene_dense_forward(W, off, lengths, c0, h, cT, Tn, D, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    inside = tl.where(rows[:, None] < D, cols[None, :], D) < D  # (no `&` of masks: the 3.9 interpreter mistypes it)
    n = tl.load(lengths + b)
    c = tl.load(c0 + b * D + cols, mask=cols < D, other=0.0)
    for t in range(0, n):
        bt = b * Tn + t
        w = tl.load(W + bt * D * D + rows[:, None] * D + cols[None, :], mask=inside, other=0.0)
        prod = tl.where(inside, _dense_times(w, c[None, :]), {zero})
        o = tl.load(off + bt * D + rows, mask=rows < D, other=0.0)
        new = _dense_plus(o, tl.reduce(prod, 1, _dense_plus))
        tl.store(h + bt * D + rows, new, mask=rows < D)
        c = new
    tl.store(cT + b * D + cols, c, mask=cols < D)


@triton.jit
def kleene_dense_backward(W, off, lengths, c0, h, gh, gcT, gW, goff, gc0, Tn, D, SELECT: tl.constexpr,
                          BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    inside = tl.where(rows[:, None] < D, cols[None, :], D) < D
    n = tl.load(lengths + b)
    g = tl.load(gcT + b * D + rows, mask=rows < D, other=0.0)
    for back in range(0, n):
        t = n - 1 - back
        bt = b * Tn + t
        g = g + tl.load(gh + bt * D + rows, mask=rows < D, other=0.0)
        r = tl.load(h + bt * D + rows, mask=rows < D, other=0.0)
        o = tl.load(off + bt * D + rows, mask=rows < D, other=0.0)
        before = tl.load(h + (bt - 1) * D + cols, mask=cols < D * (t > 0).to(tl.int32), other=0.0)
        cp = tl.where(t > 0, before, tl.load(c0 + b * D + cols, mask=cols < D, other=0.0))
        w = tl.load(W + bt * D * D + rows[:, None] * D + cols[None, :], mask=inside, other=0.0)
        prod = _dense_times(w, cp[None, :])
        if SELECT:  # the first term equal to the result: the offset (-1), else the least such column
            hit = tl.where(inside, tl.where(prod == r[:, None], cols[None, :], BLOCK), BLOCK)
            first = tl.where(o == r, -1, tl.reduce(hit, 1, _dense_least))
            gt = tl.where(cols[None, :] == first[:, None], g[:, None], 0.0)
            go = tl.where(first == -1, g, 0.0)
        else:
            gt = _dense_term_grad(g[:, None], prod, r[:, None])
            go = _dense_term_grad(g, o, r)
        gt = tl.where(inside, gt, 0.0)
        gw, gc = _dense_times_grads(gt, w, cp[None, :], prod)
        tl.store(gW + bt * D * D + rows[:, None] * D + cols[None, :], gw, mask=inside)
        tl.store(goff + bt * D + rows, go, mask=rows < D)
        g = tl.reduce(tl.where(inside, gc, 0.0), 0, _dense_add)
    tl.store(gc0 + b * D + rows, g, mask=rows < D)
'''


def generate_dense_triton(semiring: Semiring) -> str:
    """The Python source of the dense path's Triton kernels in ``semiring``'s storage algebra (one program per
    sequence, BLOCK >= d a power of two)::

        kleene_dense_forward(W, off, lengths, c0, h, cT, Tn, D, BLOCK: constexpr)
        kleene_dense_backward(W, off, lengths, c0, h, grad_h, grad_cT, grad_W, grad_off, grad_c0, Tn, D,
                              SELECT: constexpr, BLOCK: constexpr)

    ``SELECT`` must be ``selects(semiring)``. The caller pre-fills what the kernels do not write: ``h``,
    ``grad_W`` and ``grad_off`` past a sequence's length (0).

    Caution:
        A step is one (BLOCK, BLOCK) tile in registers: right for small d; at d = 256 it spills (correct, slow).

    Raises:
        CompileError: the semiring has no kernel realisation.
    """
    dialect = TritonDialect(_as_plan(semiring))
    plus, times, term, lines, (gw, gc) = _helper_bodies(dialect, "    ")
    helpers = [
        f"# the storage semiring {semiring.storage.name}: ⊕ {dialect.kernel.plus.name}, ⊗ {dialect.kernel.times.name}",
        "",
        "",
        "@triton.jit",
        "def _dense_plus(a, b):",
        f"    return {plus}",
        "",
        "",
        "@triton.jit",
        "def _dense_times(a, b):",
        f"    return {times}",
        "",
        "",
        "@triton.jit",
        "def _dense_term_grad(g, t, r):",
        "    FZERO = 0.0",
        f"    return {term}",
        "",
        "",
        "@triton.jit",
        "def _dense_times_grads(g, w, c, prod):",
        "    FZERO = 0.0",
        *["    " + line for line in lines],
        f"    return {gw}, {gc}",
    ]
    kernels = _TRITON_KERNELS.format(zero=dialect.number(float(semiring.storage.zero)))
    prelude = _TRITON_PRELUDE.replace("kleene.compile.codegen.triton", "kleene.compile.codegen.dense")
    return "\n".join([prelude, *helpers, kernels])
