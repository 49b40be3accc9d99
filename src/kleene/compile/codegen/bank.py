"""C++, CUDA and Triton source for a bank of plans run in one call: each plan's lanes as one block of a shared row.

A bank is several plans (e.g. SoPa's pattern groups, one template per pattern length), plan ``g`` running
``count_g`` copies. The bank lays every per-step tensor out as one row per (sequence, step) holding each plan's
block in turn, each block padded to ``width_g`` lanes (``bank_width``: a multiple of ``align`` lanes, 16 or 8, so
every lane loop runs whole vectors, without a scalar remainder)::

    slots  (B, T, R)   R  = sum_g S_g * width_g   block g: (S_g, width_g), offset xoff_g
    params (KT,)       KT = sum_g K_g * width_g   block g: (K_g, width_g)
    h0, final_state, checkpoint rows (QT)  QT = sum_g Q_g * width_g
    out    (B, WT)     WT = sum_g width_g         ⊕_t y_t per lane ("sum" plans only)

The library exports, for ``T`` in float (``f32``) and double (``f64``)::

    void kleene_bank_forward_f32(const T* slots, const T* params, const int64_t* lengths, const T* h0,
                                 T* out, T* final_state, T* checkpoints, int64_t B, int64_t T, int64_t chunk,
                                 int threads)
    void kleene_bank_backward_f32(const T* slots, const T* params, const int64_t* lengths, const T* h0,
                                  const T* checkpoints, const T* final_state, const T* out, const T* grad_out,
                                  const T* grad_final, T* grad_slots, T* grad_params, T* grad_h0,
                                  int64_t B, int64_t T, int64_t chunk, int threads)

(``grad_out`` contiguous (B, WT); ``grad_params`` per sequence (B, KT), summed by the caller; ``checkpoints``
(B, ceil(T / chunk), QT) as in ``kleene.compile.codegen.cpp``, which may be null in the forward).

One task per sequence runs every block step by step: each step reads one contiguous row of the slots (all
blocks), so a task streams its sequence's slots front to back, whatever the blocks' widths (a task per block
would stream ``S_g * width_g`` values at a stride of R). Each block's step is its plan's own straight-line code
(``kleene.compile.codegen.cpp``'s ``LaneWriter`` spelling, unchanged): a bank never switches on what its plans are.
Padding lanes compute on whatever the padding holds (the caller fills it with zeros) and are never read back.
The backward is ``cpp``'s: per chunk of steps (last to first), recompute every block's states from the chunk's
checkpoint into a per-thread buffer, then reverse mode one vector of ``backward_lanes`` lanes of one block at a
time with its adjoints in registers. The C++ bank always recomputes from checkpoints (it never stores every state).

On a GPU (``generate_bank_cuda``, ``generate_bank_triton``) the bank is the template kernels' one-lane skeleton
(``kleene.compile.codegen.writer.lane_forward``/``lane_backward``, the contract of ``codegen.cuda`` and
``codegen.triton`` with D the bank's lanes WT), each block's lanes at the block's offsets (``BankLane``): CUDA runs
a thread per (sequence, lane of the bank), Triton a program per (sequence, BLOCK lanes of one block), each running
its block's plan. They store every state (states (B, T, QT)) as the template GPU kernels do. The C++ kernel keeps
its own skeleton (blocks as vectors of lanes, checkpoints, a thread pool over sequences): the one-lane skeleton is
one scalar lane per task, which the CPU would not vectorize.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kleene.compile.codegen.cpp import PREFETCH_LOCALITY, _Code, backward_lanes, cpp_prelude, cpu_helpers
from kleene.compile.codegen.cuda import CudaDialect, assemble_cuda
from kleene.compile.codegen.cuda import lane_values as cuda_lane_values
from kleene.compile.codegen.entries import ENTRY_DTYPES, guarded
from kleene.compile.codegen.triton import BACKWARD_SIGNATURE, FORWARD_SIGNATURE, TritonDialect, assemble_triton
from kleene.compile.codegen.triton import lane_values as triton_lane_values
from kleene.compile.codegen.writer import (
    BACKWARD_ARGS,
    FORWARD_ARGS,
    PARAM_TABLE,
    LaneLayout,
    LaneWriter,
    lane_backward,
    lane_forward,
)
from kleene.compile.template import Plan
from kleene.errors import CompileError

#: Lanes each block is padded to a multiple of: 16 float32 lanes = one 64-byte line = one AVX-512 vector, or 8 (an
#: AVX2 vector; AVX-512 on AMD Zen 4 runs as two of those) where that pads fewer lanes (``choose_align``).
ALIGNS = (16, 8)
ALIGN = ALIGNS[0]
#: How many steps ahead the forward prefetches its slot rows (with ``cpp.PREFETCH_LOCALITY``: ``__builtin_prefetch``'s
#: third argument, 3 = into L1, 2 = L2). Measured on an AMD EPYC (1 thread, SoPa's bench bank at (32, 256, 512),
#: alternated in one process, 2026-11-25): into L1 (3) 33 ms, into L2 (2) 12.5-12.9 ms at 4-16 steps ahead, 15.6 ms
#: with locality 1; a whole row prefetched in one burst per step (instead of per vector) 19 ms.
PREFETCH_STEPS = 8


def bank_width(count: int, align: int = ALIGN) -> int:
    """The lanes block of ``count`` copies occupies: ``count`` rounded up to a multiple of ``align``."""
    return -(-count // align) * align


def choose_align(counts: Sequence[int]) -> int:
    """The lane alignment of a bank of blocks of ``counts`` lanes: of ``ALIGNS``, the one padding the fewest lanes
    (the first, the widest, on a tie)."""
    return min(ALIGNS, key=lambda a: sum(bank_width(c, a) for c in counts))


@dataclass(frozen=True)
class BankLayout:
    """Where each plan's block sits in the bank's rows (see the module docstring); ``align``: the lanes of one
    vector of the lane loops (every width is a multiple of it)."""

    plans: tuple[Plan, ...]
    counts: tuple[int, ...]
    widths: tuple[int, ...]
    align: int

    @staticmethod
    def of(plans: Sequence[Plan], counts: Sequence[int], align: int | None = None) -> BankLayout:
        """The layout of ``plans`` running ``counts`` copies each, blocks padded to multiples of ``align`` (one of
        ``ALIGNS``; default ``choose_align(counts)``).

        Raises:
            CompileError: no plans, a count < 1, a bidirectional plan or one whose output is not "sum".
        """
        if not plans or len(plans) != len(counts):
            raise CompileError(f"a bank needs one count per plan; got {len(plans)} plans and {len(counts)} counts")
        align = choose_align(counts) if align is None else align
        if align not in ALIGNS:
            raise CompileError(f"a bank's lane alignment must be one of {ALIGNS}, not {align!r}")
        for plan, count in zip(plans, counts):
            if count < 1:
                raise CompileError(f"a bank block needs at least one copy; {plan.template.name} has {count}")
            if plan.options.bidirectional or plan.options.output != "sum":
                raise CompileError(
                    f"a bank runs one-directional plans with output='sum'; {plan.template.name} has "
                    f"output={plan.options.output!r}, bidirectional={plan.options.bidirectional}"
                )
        return BankLayout(tuple(plans), tuple(counts), tuple(bank_width(c, align) for c in counts), align)

    def _offsets(self, per_lane: Sequence[int]) -> tuple[int, ...]:
        offsets, total = [], 0
        for n, w in zip(per_lane, self.widths):
            offsets.append(total)
            total += n * w
        return (*offsets, total)

    @functools.cached_property
    def slot_offsets(self) -> tuple[int, ...]:
        """Offset of each block in a slot row, then the row's length R."""
        return self._offsets([p.num_slots for p in self.plans])

    @functools.cached_property
    def param_offsets(self) -> tuple[int, ...]:
        """Offset of each block in the parameter table, then its length KT."""
        return self._offsets([p.num_params for p in self.plans])

    @functools.cached_property
    def state_offsets(self) -> tuple[int, ...]:
        """Offset of each block in a state row, then its length QT."""
        return self._offsets([p.num_states for p in self.plans])

    @functools.cached_property
    def lane_offsets(self) -> tuple[int, ...]:
        """Offset of each block in an output row, then its length WT."""
        return self._offsets([1] * len(self.plans))


def _group_scope(code: _Code, layout: BankLayout, g: int, rows: Sequence[str]) -> None:
    """Open block ``g``'s scope: ``D`` its width, ``P`` its parameters, ``x<k>`` its part of slot row ``rows[k]``."""
    code.open("")
    code(f"constexpr int64_t D = {layout.widths[g]};  // block {g}: {layout.plans[g].template.name}")
    code(f"const T* __restrict__ P = params + {layout.param_offsets[g]};")
    for k, row in enumerate(rows):
        code(f"const T* __restrict__ x{k} = {row} + {layout.slot_offsets[g]};")


def _forward_steps(code: _Code, layout: BankLayout, unroll: int) -> None:
    """A loop advancing ``t`` by ``unroll`` steps per pass over every block's lanes."""
    code.open(f"for (; t + {unroll} <= c_end; t += {unroll})")
    code("const T* __restrict__ row = slots + (b * Tn + t) * R;")
    code(f"const T* ahead = slots + (b * Tn + kleene_std::min(t + {PREFETCH_STEPS}, len - {unroll})) * R;")
    for g, plan in enumerate(layout.plans):
        q = plan.num_states
        block = _Code(plan)
        block.depth = code.depth
        _group_scope(block, layout, g, [f"row + {k} * R" for k in range(unroll)])
        block(f"T* __restrict__ Zg = Z + {layout.state_offsets[g]};")
        block(f"T* __restrict__ A = AGG + {layout.lane_offsets[g]};")
        block(f"const T* ahead_g = ahead + {layout.slot_offsets[g]};")
        block.open(f"for (int64_t i0 = 0; i0 < D; i0 += {layout.align})")
        _prefetch_vector(block, plan.num_slots, unroll, layout.align)
        block("#pragma omp simd")
        block.open(f"for (int64_t i = i0; i < i0 + {layout.align}; ++i)")
        z = [f"Zg[{j} * D + i]" for j in range(q)]
        for k in range(unroll):
            block.slot = functools.partial(_slot_of, row=f"x{k}")
            step = block.step(z, tag=f"_{k}")
            z = step.new
            block(f"A[i] = {block.d.plus('A[i]', block.emit(step.new))};")
        for j in range(q):
            block(f"Zg[{j} * D + i] = {z[j]};")
        block.close()
        block.close()
        block.close()
        code.lines += block.lines
    code.close()


def _prefetch_vector(code: _Code, num_slots: int, rows: int, align: int) -> None:
    """Prefetch the lanes ``i0 .. i0 + align - 1`` of every slot of ``rows`` rows from ``ahead_g``: a vector's lines
    just before computing it, so the prefetches interleave with the work instead of stalling it in a burst."""
    for k in range(rows):
        for s in range(num_slots):
            at = f"ahead_g + {k} * R + {s} * D + i0"
            code(f"__builtin_prefetch({at}, 0, {PREFETCH_LOCALITY});")
            if align > 8:
                code(f"if (sizeof(T) > 4) __builtin_prefetch({at} + {align - 1}, 0, {PREFETCH_LOCALITY});  // 2 lines")


def _slot_of(s: int, row: str) -> str:
    return f"T({row}[{s} * D + i])"


def _initial_states(code: _Code, layout: BankLayout) -> None:
    for g, plan in enumerate(layout.plans):
        off, width = layout.state_offsets[g], layout.widths[g]
        zero = code.d.zero
        for j in range(plan.num_states):
            p = plan.start[j]
            base = zero if (plan.options.restart or p is None) else f"params[{layout.param_offsets[g] + p * width} + i]"
            code(
                f"for (int64_t i = 0; i < {width}; ++i) Z[{off + j * width} + i] = "
                f"h0 ? h0[b * QT + {off + j * width} + i] : {base};"
            )


def _forward(layout: BankLayout) -> list[str]:
    code = _Code(layout.plans[0])
    qt, wt, r = layout.state_offsets[-1], layout.lane_offsets[-1], layout.slot_offsets[-1]
    zero = code.d.zero
    code("template <typename T>")
    code.open(
        "static void bank_forward_impl(const T* __restrict__ slots, const T* __restrict__ params, "
        "const int64_t* __restrict__ lengths, const T* __restrict__ h0, T* __restrict__ out, "
        "T* __restrict__ final_state, T* __restrict__ ckpt, int64_t B, int64_t Tn, int64_t chunk, int threads)"
    )
    code(f"constexpr int64_t R = {r}, QT = {qt}, WT = {wt};")
    code("if (B == 0) return;")
    code("const int64_t NC = (Tn + chunk - 1) / chunk;")
    code.open("kleene_pool().run(B, threads, [&](int64_t b)")
    code("const int64_t len = lengths[b];")
    code("thread_local kleene_std::vector<T> state_buffer;")
    code("if (state_buffer.size() < static_cast<size_t>(QT + WT)) state_buffer.resize(QT + WT);")
    code("T* __restrict__ Z = state_buffer.data();")
    code("T* __restrict__ AGG = Z + QT;")
    _initial_states(code, layout)
    code(f"for (int64_t i = 0; i < WT; ++i) AGG[i] = {zero};")
    code.open("for (int64_t c = 0; c * chunk < len; ++c)")
    code("if (ckpt) std::memcpy(ckpt + (b * NC + c) * QT, Z, QT * sizeof(T));")
    code("const int64_t c_end = kleene_std::min(len, (c + 1) * chunk);")
    code("int64_t t = c * chunk;")
    _forward_steps(code, layout, 2)
    _forward_steps(code, layout, 1)
    code.close()
    code("std::memcpy(final_state + b * QT, Z, QT * sizeof(T));")
    code("std::memcpy(out + b * WT, AGG, WT * sizeof(T));")
    code("if (ckpt) for (int64_t c = (len + chunk - 1) / chunk; c < NC; ++c)")
    code(f"  for (int64_t i = 0; i < QT; ++i) ckpt[(b * NC + c) * QT + i] = {zero};")
    code.close(");")
    code.close()
    return code.lines


def _reverse_block(layout: BankLayout, g: int) -> list[str]:
    """Reverse mode of block ``g`` through the chunk, one vector of lanes at a time (adjoints in registers)."""
    plan = layout.plans[g]
    q, k_params = plan.num_states, plan.num_params
    width = layout.widths[g]
    v = backward_lanes(plan)
    while width % v:
        v //= 2
    code = _Code(plan)
    code.depth = 2
    _group_scope(code, layout, g, [])
    code(f"constexpr int64_t V = {v}, Q = {q}, K = {k_params};")
    code("(void)K;")
    qo, ko, lo = layout.state_offsets[g], layout.param_offsets[g], layout.lane_offsets[g]
    code.open("for (int64_t i0v = 0; i0v < D; i0v += V)")
    code(f"alignas(64) T g[{q}][V];")
    code(f"alignas(64) T gp[{max(k_params, 1)}][V];")
    code(f"for (int64_t j = 0; j < Q; ++j) for (int64_t l = 0; l < V; ++l) g[j][l] = G[{qo} + j * D + i0v + l];")
    code(f"for (int64_t k = 0; k < K; ++k) for (int64_t l = 0; l < V; ++l) gp[k][l] = GP[{ko} + k * D + i0v + l];")
    code.open("for (int64_t t = t1 - 1; t >= t0; --t)")
    code(f"const T* __restrict__ x = slots + (b * Tn + t) * R + {layout.slot_offsets[g]};")
    code(f"T* __restrict__ gx = grad_slots + (b * Tn + t) * R + {layout.slot_offsets[g]};")
    code(f"const T* __restrict__ zp = ZL + (t - t0) * QT + {qo};")
    code("// while this chunk runs from cache, fetch the same lanes of the previous chunk (recomputed next)")
    code("const T* ahead_g = x - (t >= chunk ? chunk : 0) * R;")
    code(f"for (int64_t a = 0; a < V; a += {layout.align}) {{")
    code.depth += 1
    code("const int64_t i0 = i0v + a;")
    _prefetch_vector(code, plan.num_slots, 1, layout.align)
    code.depth -= 1
    code("}")
    code("#pragma omp simd")
    code.open("for (int64_t l = 0; l < V; ++l)")
    code("const int64_t i = i0v + l;")
    code.param_grad = lambda k: f"gp[{k}][l]"
    z_prev = [f"zp{j}" for j in range(q)]
    for j in range(q):
        code(f"const T zp{j} = zp[{j} * D + i];")
    step = code.step(z_prev)
    code(f"const T y = {code.emit(step.new)};")
    code(f"const T agg = out[b * WT + {lo} + i], gagg = GY[{lo} + i];")
    code(f"const T gy = {code.output_grad('y', 'agg', 'gagg')};")
    emitted = code.emit_backward(step.new, "gy", "eo")
    for j in range(q):
        code(f"const T gn{j} = g[{j}][l] + {emitted[j]};")
    gx, g_prev = code.step_backward(step, z_prev, [f"gn{j}" for j in range(q)])
    for s, grad in enumerate(gx):
        code(f"gx[{s} * D + i] = {grad};")
    for j in range(q):
        code(f"g[{j}][l] = {g_prev[j]};")
    code.close()  # lanes
    code.close()  # steps
    code(f"for (int64_t j = 0; j < Q; ++j) for (int64_t l = 0; l < V; ++l) G[{qo} + j * D + i0v + l] = g[j][l];")
    code(f"for (int64_t k = 0; k < K; ++k) for (int64_t l = 0; l < V; ++l) GP[{ko} + k * D + i0v + l] = gp[k][l];")
    code.close()  # vectors
    code.close()  # block scope
    return code.lines


def _recompute_block(layout: BankLayout, g: int) -> list[str]:
    """Block ``g``'s state after step ``t`` of the chunk into ``ZL`` (from its state before it)."""
    plan = layout.plans[g]
    code = _Code(plan)
    code.depth = 3
    _group_scope(code, layout, g, ["row"])
    qo = layout.state_offsets[g]
    code(f"const T* __restrict__ zp = ZL + (t - t0) * QT + {qo};")
    code(f"T* __restrict__ zn = ZL + (t + 1 - t0) * QT + {qo};")
    code(f"const T* ahead_g = ahead + {layout.slot_offsets[g]};")
    code.open(f"for (int64_t i0 = 0; i0 < D; i0 += {layout.align})")
    _prefetch_vector(code, plan.num_slots, 1, layout.align)
    code("#pragma omp simd")
    code.open(f"for (int64_t i = i0; i < i0 + {layout.align}; ++i)")
    code.slot = functools.partial(_slot_of, row="x0")
    for j in range(plan.num_states):
        code(f"const T zp{j} = zp[{j} * D + i];")
    step = code.step([f"zp{j}" for j in range(plan.num_states)])
    for j in range(plan.num_states):
        code(f"zn[{j} * D + i] = {step.new[j]};")
    code.close()
    code.close()
    code.close()
    return code.lines


def _backward(layout: BankLayout) -> list[str]:
    code = _Code(layout.plans[0])
    qt, wt, r = layout.state_offsets[-1], layout.lane_offsets[-1], layout.slot_offsets[-1]
    kt = layout.param_offsets[-1]
    code("template <typename T>")
    code.open(
        "static void bank_backward_impl(const T* __restrict__ slots, const T* __restrict__ params, "
        "const int64_t* __restrict__ lengths, const T* __restrict__ h0, const T* __restrict__ ckpt, "
        "const T* __restrict__ final_state, const T* __restrict__ out, const T* __restrict__ grad_out, "
        "const T* __restrict__ grad_final, T* __restrict__ grad_slots, T* __restrict__ grad_params, "
        "T* __restrict__ grad_h0, int64_t B, int64_t Tn, int64_t chunk, int threads)"
    )
    code(f"constexpr int64_t R = {r}, QT = {qt}, WT = {wt}, KT = {kt};")
    code("(void)h0; (void)final_state;")
    code("if (B == 0) return;")
    code("const int64_t NC = (Tn + chunk - 1) / chunk;")
    code.open("kleene_pool().run(B, threads, [&](int64_t b)")
    code("thread_local kleene_std::vector<T> buffer;")
    code("const int64_t need = chunk * QT + QT + KT + WT;")
    code("if (buffer.size() < static_cast<size_t>(need)) buffer.resize(need);")
    code("T* __restrict__ ZL = buffer.data();  // ZL[k * QT + ...]: the states before step k of the chunk")
    code("T* __restrict__ G = ZL + chunk * QT;  // the adjoints of the states")
    code("T* __restrict__ GP = G + QT;  // of the parameters")
    code("T* __restrict__ GY = GP + KT;  // of the outputs")
    code("const int64_t len = lengths[b];")
    code("std::memcpy(G, grad_final + b * QT, QT * sizeof(T));")
    code("std::memset(GP, 0, KT * sizeof(T));")
    code("std::memcpy(GY, grad_out + b * WT, WT * sizeof(T));")
    code.open("for (int64_t c = (len + chunk - 1) / chunk - 1; c >= 0; --c)")
    code("const int64_t t0 = c * chunk, t1 = kleene_std::min(len, t0 + chunk);")
    code("std::memcpy(ZL, ckpt + (b * NC + c) * QT, QT * sizeof(T));")
    code.open("for (int64_t t = t0; t + 1 < t1; ++t)")
    code("const T* __restrict__ row = slots + (b * Tn + t) * R;")
    code(f"const T* ahead = slots + (b * Tn + kleene_std::min(t + {PREFETCH_STEPS}, t1 - 1)) * R;")
    for g in range(len(layout.plans)):
        code.lines += _recompute_block(layout, g)
    code.close()
    for g in range(len(layout.plans)):
        code.lines += _reverse_block(layout, g)
    code.close()  # chunks
    code("if (grad_h0) std::memcpy(grad_h0 + b * QT, G, QT * sizeof(T));")
    for g, plan in enumerate(layout.plans):
        width = layout.widths[g]
        for j, p in enumerate(plan.start):
            if not plan.options.restart and p is not None:  # the initial state is the start parameter
                target, source = layout.param_offsets[g] + p * width, layout.state_offsets[g] + j * width
                code(f"if (!h0) for (int64_t i = 0; i < {width}; ++i) GP[{target} + i] += G[{source} + i];")
    code("for (int64_t t = len; t < Tn; ++t) std::memset(grad_slots + (b * Tn + t) * R, 0, R * sizeof(T));")
    code("std::memcpy(grad_params + b * KT, GP, KT * sizeof(T));")
    code.close(");")
    code.close()
    return code.lines


def generate_bank_cpp(layout: BankLayout) -> str:
    """The C++ source of ``layout``'s bank forward and backward kernels (see the module docstring)."""
    prelude = cpp_prelude((plan.semiring.kernel_algebra() for plan in layout.plans), "kleene.compile.codegen.bank")
    parts = [prelude, cpu_helpers(), *_forward(layout), "", *_backward(layout), ""]
    for suffix, ctype in ENTRY_DTYPES:
        parts += guarded("forward", suffix, [
            f'extern "C" void kleene_bank_forward_{suffix}(const {ctype}* slots, const {ctype}* params, '
            f"const int64_t* lengths, const {ctype}* h0, {ctype}* out, {ctype}* final_state, {ctype}* ckpt, "
            "int64_t B, int64_t Tn, int64_t chunk, int threads) {",
            f"  bank_forward_impl<{ctype}>(slots, params, lengths, h0, out, final_state, ckpt, B, Tn, chunk, threads);",
            "}",
        ])  # fmt: skip
        parts += guarded("backward", suffix, [
            f'extern "C" void kleene_bank_backward_{suffix}(const {ctype}* slots, const {ctype}* params, '
            f"const int64_t* lengths, const {ctype}* h0, const {ctype}* ckpt, const {ctype}* final_state, "
            f"const {ctype}* out, const {ctype}* grad_out, const {ctype}* grad_final, {ctype}* grad_slots, "
            f"{ctype}* grad_params, {ctype}* grad_h0, int64_t B, int64_t Tn, int64_t chunk, int threads) {{",
            f"  bank_backward_impl<{ctype}>(slots, params, lengths, h0, ckpt, final_state, out, grad_out, "
            "grad_final, grad_slots, grad_params, grad_h0, B, Tn, chunk, threads);",
            "}",
        ])  # fmt: skip
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------------------------
# The GPU dialects: CUDA and Triton, one lane per thread, the template kernels' skeleton
# --------------------------------------------------------------------------------------------
class BankLane(LaneLayout):
    """Block ``g`` of a bank's rows (the module docstring's layout) as the lane kernels' ``LaneLayout``: the lane
    ``d`` counts from the block's first, so every block runs the one-lane skeleton of ``codegen.writer``
    unchanged. Every offset is a number but for the sequence ``b`` and the position."""

    def __init__(self, layout: BankLayout, g: int):
        super().__init__(layout.plans[g])
        self.layout, self.g, self.width = layout, g, layout.widths[g]

    def param(self, k: int) -> str:
        return str(self.layout.param_offsets[self.g] + k * self.width)

    def slot(self, s: int, position: str = "tt") -> str:
        r, at = self.layout.slot_offsets[-1], self.layout.slot_offsets[self.g] + s * self.width
        return f"(b * Tn + {position}) * {r} + {at}"

    def state(self, j: int, position: str) -> str:
        qt, at = self.layout.state_offsets[-1], self.layout.state_offsets[self.g] + j * self.width
        return f"(b * Tn + {position}) * {qt} + {at}"

    def row(self, j: int) -> str:
        return f"b * {self.layout.state_offsets[-1]} + {self.layout.state_offsets[self.g] + j * self.width}"

    def out(self, position: str | None = None) -> str:
        if position is not None:
            raise CompileError("a bank's blocks have output='sum': one output per sequence")
        return f"b * {self.layout.lane_offsets[-1]} + {self.layout.lane_offsets[self.g]}"

    def grad_param(self, k: int) -> str:
        return f"b * {self.layout.param_offsets[-1]} + {self.layout.param_offsets[self.g] + k * self.width}"


def _header(layout: BankLayout, comment: str) -> str:
    blocks = ", ".join(f"{p.template.name} x{c} (width {w})" for p, c, w in zip(layout.plans, layout.counts,
                                                                                 layout.widths))
    return f"{comment} bank of {len(layout.plans)} plans, semiring {layout.plans[0].semiring.name}: {blocks}"


_CUDA_GROUP_PARAMS = {
    "forward": "const T* __restrict__ slots, const T* __restrict__ {table}, const int64_t* __restrict__ lengths, "
    "const T* h0, T* out, T* final_state, T* states",
    "backward": "const T* __restrict__ slots, const T* __restrict__ {table}, const int64_t* __restrict__ lengths, "
    "const T* h0, const T* states, const T* out, const T* grad_out, const T* grad_final, T* grad_slots, "
    "T* grad_params, T* grad_h0",
}


def _cuda_direction(layout: BankLayout, kind: str, body: Callable[[LaneWriter, LaneLayout], None]) -> list[str]:
    """``{kind}_impl``: thread -> (sequence b, bank lane), then the lane's block's device function ``{kind}_g<g>``
    (its plan's one-lane skeleton at the block's offsets)."""
    params = _CUDA_GROUP_PARAMS[kind].format(table=PARAM_TABLE)
    args = ", ".join(FORWARD_ARGS if kind == "forward" else BACKWARD_ARGS)
    lines: list[str] = []
    for g, plan in enumerate(layout.plans):
        w = LaneWriter(plan, CudaDialect(plan), "  ")
        at = BankLane(layout, g)
        w("template <typename T>")
        w.open(f"__device__ __forceinline__ void {kind}_g{g}({params}, int64_t b, int64_t d, int64_t Tn) {{")
        w("const int64_t rev = 0;  // (a bank's plans run forwards)")
        cuda_lane_values(w, at)
        body(w, at)
        w.close()
        lines += [*w.lines, ""]
    lines += [
        "template <typename T>",
        f"__device__ __forceinline__ void {kind}_impl({params}, int64_t B, int64_t Tn, int64_t D) {{",
        "  // D: the bank's lanes WT (every block's, padding included)",
        "  const int64_t task = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;",
        "  if (task >= B * D) return;",
        "  const int64_t b = task / D, lane = task % D;",
    ]
    ends = layout.lane_offsets
    for g in range(len(layout.plans)):
        test = "" if g == len(layout.plans) - 1 else f"if (lane < {ends[g + 1]}) "
        lines.append(f"  {'else ' if g else ''}{test}{kind}_g{g}<T>({args}, b, lane - {ends[g]}, Tn);")
    lines.append("}")
    return lines


def generate_bank_cuda(layout: BankLayout) -> str:
    """The CUDA source of ``layout``'s bank kernels: the template kernels' contract (``kleene.compile.codegen.cuda``:
    the same kernels, launchers and arguments) with D the bank's lanes WT, slots (B, T, R), param_table (KT,),
    h0 / final_state / grad_h0 (B, QT), states (B, T, QT), out / grad_out (B, WT), grad_params (B, KT). One thread
    per (sequence, lane), each running its block's plan; every state is stored (no checkpoints)."""
    forward = _cuda_direction(layout, "forward", lane_forward)
    backward = _cuda_direction(layout, "backward", lane_backward)
    return assemble_cuda(_header(layout, "//"), forward, backward)


def _triton_direction(
    layout: BankLayout, kind: str, body: Callable[[LaneWriter, LaneLayout], None]
) -> tuple[list[str], list[str]]:
    """(helpers, kernel): the jit function of each block (``_bank_{kind}_<g>``: its plan's one-lane skeleton at the
    block's offsets, over BLOCK lanes from the block's program ``blk``), then the kernel choosing one by its program
    id."""
    args = list(FORWARD_ARGS if kind == "forward" else BACKWARD_ARGS)
    flags = ["HAS_H0", "SAVE_STATES"] if kind == "forward" else ["HAS_H0"]
    lines: list[str] = []
    for g, plan in enumerate(layout.plans):
        w = LaneWriter(plan, TritonDialect(plan), "    ")
        at = BankLane(layout, g)
        constexprs = ", ".join(f"{f}: tl.constexpr" for f in [*flags, "BLOCK"])
        w("@triton.jit")
        w(f"def _bank_{kind}_{g}({', '.join(args)}, Tn, b, blk, {constexprs}):")
        w.depth += 1
        w(f"d = blk * BLOCK + tl.arange(0, BLOCK)  # block {g}: {plan.template.name}")
        w(f"end = {layout.widths[g]}")
        w("mask = d < end")
        w("rev = 0  # (a bank's plans run forwards)")
        triton_lane_values(w, at)
        body(w, at)
        lines += [*w.lines, "", ""]
    signature = FORWARD_SIGNATURE if kind == "forward" else BACKWARD_SIGNATURE
    kernel = ["@triton.jit", *signature]
    kernel += ["    # (D, HALF unused: the templates' contract) a program per (sequence, BLOCK lanes of a block)"]
    kernel += ["    b = tl.program_id(0).to(tl.int64)", "    blk = tl.program_id(1)"]
    first = "0"
    for g, width in enumerate(layout.widths):
        end = f"{first} + ({width} + BLOCK - 1) // BLOCK" if g else f"({width} + BLOCK - 1) // BLOCK"
        test = "else:" if g == len(layout.widths) - 1 else f"{'elif' if g else 'if'} blk < {end}:"
        kernel.append(f"    {test}")
        call = ", ".join([*args, "Tn", "b", f"blk - ({first})", *flags, "BLOCK"])
        kernel.append(f"        _bank_{kind}_{g}({call})")
        first = end
    return lines, kernel


def bank_blocks(layout: BankLayout, block: int) -> int:
    """Programs per sequence of the Triton bank kernels with ``block`` lanes a program."""
    return sum(-(-width // block) for width in layout.widths)


def generate_bank_triton(layout: BankLayout) -> str:
    """The Python source of ``layout``'s Triton bank kernels: the template kernels' contract
    (``kleene.compile.codegen.triton``) with D = HALF = WT and the shapes of ``generate_bank_cuda``; the grid is
    (B, ``bank_blocks(layout, BLOCK)``), a program holding BLOCK lanes of one block."""
    helpers, forward = _triton_direction(layout, "forward", lane_forward)
    more, backward = _triton_direction(layout, "backward", lane_backward)
    return assemble_triton(_header(layout, "#"), forward, backward, helpers + more)
