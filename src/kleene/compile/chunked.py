"""The chunked (time-parallel) scan: a plan run as chunks of steps, combined by a short semiring scan.

The recurrence of ``kleene.compile.template`` is linear in the semiring in its state: one step maps ``z`` to
``z ⊗ A_t`` (``A_t`` the Q×Q matrix of moves then closure), or, when the plan restarts, to ``(z ⊕ start) ⊗ A_t``,
which is affine (``z ⊗ A_t ⊕ start ⊗ A_t``). So a run over ``chunk`` steps is ``z ↦ z ⊗ M_c ⊕ a_c`` with

* ``M_c`` (the *transfer matrix*, Q×Q per lane): row q is the state after the chunk run *without restart* from the
  basis vector ``e_q`` (semiring one at q, zero elsewhere);
* ``a_c`` (the chunk's own contribution): the state after the chunk run *with* the plan's restart from the zero
  vector (zero when the plan does not restart).

``ChunkedRunner`` cuts every sequence into N chunks of ``chunk`` steps and, with every chunk of every sequence an
independent sequence of one kernel call (a view of the slots, length 0 where a call has nothing to do),

1. runs the first chunk from the true initial state (restarting: also chunks 1..N-2 from zero, giving ``a_c``);
2. runs chunks 1..N-2 through ``basis_plan``, Q disjoint copies of the automaton started from the Q basis vectors,
   so the slots are read once for the Q rows of ``M_c``;
3. scans the chunks' initial states ``z_{c+1} = z_c ⊗ M_c ⊕ a_c`` in torch with the storage semiring's own
   operations: N - 2 small steps on the CPU, a log-depth prefix of the affine maps elsewhere (on a GPU each small
   operation is a launch);
4. runs every chunk again from its true initial state, producing the outputs ("steps", "sum" or "last") and the
   final state.

Work is about (Q + 2)× the sequential run's, and everything is differentiable: autograd goes through the kernel
calls (their own backward) and the torch scan. Reverse lanes (``bidirectional``) are read forwards over each
sequence's reversed valid steps, so every chunk runs left to right. Padding chunks (past a sequence's length) have
length 0: their transfer is the identity, and the last chunk's final state and "last" output are those of the whole
sequence. Nothing depends on the semiring beyond its storage operations and the backend's runner, so any plan and
any backend runs chunked.

It pays only where the sequential kernel leaves threads idle: ``chunked_speedup`` is the cost model
``choose_scan`` (``scan="auto"`` in ``kleene.compile.module``) uses, from the available threads, the lanes
B·D, Q and T, and the threads a device runs at once (``parallel_tasks``: the CPU's threads, a GPU's resident
threads); see BENCHMARKS.md, "the chunked (time-parallel) scan", and docs/gpu.md for the measurements behind it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch

from kleene.compile.reference import reverse_valid
from kleene.compile.template import Factor, OutputMode, ParamSource, Plan, TemplateArc, lower
from kleene.errors import CompileError

Tensor = torch.Tensor
#: A runner: ``(plan, slots, params, lengths, h0) -> (output, final state)`` (``kleene.compile.module.Runner``).
RunnerFn = Callable[[Plan, Tensor, Tensor, Tensor, "Tensor | None"], tuple[Tensor, Tensor]]
Scan = Literal["auto", "sequential", "chunked"]
SCANS: tuple[str, ...] = ("auto", "sequential", "chunked")

#: Lanes one task of a generated kernel advances together at the least (the C++ kernels' lane blocks are 16-lane
#: multiples): lanes within a block are SIMD, not thread, parallelism.
LANE_BLOCK = 16
#: The fewest steps a chunk of the automatic choice holds (below it the scan's per-chunk cost dominates).
MIN_CHUNK = 64
#: The most chunks the automatic choice considers (the torch scan over them is sequential).
MAX_CHUNKS = 256
#: The predicted speedup (``chunked_speedup``) the automatic choice asks for before it runs chunked: the margin
#: covers what the model leaves out (the torch scan, the calls' fixed costs, the reversal of reverse lanes).
MIN_SPEEDUP = 1.5


def _plan_with(plan: Plan, output: OutputMode, restart: bool) -> Plan:
    """``plan`` forwards only, with ``output`` and ``restart`` (the parameter table's layout does not depend on
    these options)."""
    options = replace(plan.options, bidirectional=False, output=output, restart=restart)
    return replace(plan, options=options)


def basis_plan(plan: Plan) -> tuple[Plan, list[int]]:
    """The plan of Q disjoint copies of ``plan``'s automaton (states ``k·Q + q``), forwards, without restart, output
    "last", and for each of its parameters the row of ``plan``'s table holding it.

    Run from the stacked basis vectors (copy k from ``e_k``) over a chunk, its final state is the chunk's transfer
    matrix, row k in copy k: one kernel call reads each chunk's slots once for all Q rows.
    """
    template, q = plan.template, plan.num_states

    def copies(arcs: tuple[TemplateArc, ...]) -> tuple[TemplateArc, ...]:
        return tuple(TemplateArc(k * q + a.src, k * q + a.dst, a.weight) for k in range(q) for a in arcs)

    def ends(pairs: tuple[tuple[int, Factor], ...]) -> tuple[tuple[int, Factor], ...]:
        return tuple((k * q + s, w) for k in range(q) for s, w in pairs)

    product = replace(
        template,
        states=tuple(f"{k}:{name}" for k in range(q) for name in template.states),
        moves=copies(template.moves),
        epsilons=copies(template.epsilons),
        initial=ends(template.initial),
        final=ends(template.final),
        name=f"{template.name}-basis",
    )
    options = replace(plan.options, bidirectional=False, output="last", restart=False)
    lowered = lower(product, plan.semiring, options)
    rows = {(source.kind, source.index): k for k, source in enumerate(plan.params)}
    moves = len(template.moves)

    def original(source: ParamSource) -> int:
        index = source.index
        if source.kind == "move":
            assert isinstance(index, int)
            return rows[("move", index % moves)]
        if source.kind == "closure":
            assert isinstance(index, tuple)
            return rows[("closure", (index[0] % q, index[1] % q))]
        assert isinstance(index, int)
        return rows[(source.kind, index % q)]

    return lowered, [original(source) for source in lowered.params]


def _rounds(sequences: int, dim: int, threads: int) -> int:
    """Rounds of (sequence, ``LANE_BLOCK`` lanes) tasks a kernel call over ``sequences`` needs on ``threads``."""
    return max(1, math.ceil(sequences * math.ceil(dim / LANE_BLOCK) / threads))


def chunked_cost(num_states: int, restart: bool, batch: int, steps: int, dim: int, threads: int, chunks: int) -> int:
    """The chunked scan's time in the model's units (steps × rounds of lane blocks) with ``chunks`` chunks.

    Its three kernel calls run one after another, each over chunks of ``L = ⌈T / N⌉`` steps: the first chunk from
    z_0 (with restart also the contributions of chunks 1..N-2); the transfer matrices of chunks 1..N-2 (``basis_plan``:
    Q copies of the automaton, Q times a step's work per task); the rerun of all N chunks.
    """
    length = math.ceil(steps / chunks)
    head = length * _rounds(batch * (chunks - 1) if restart else batch, dim, threads)
    basis = length * num_states * _rounds(batch * (chunks - 2), dim, threads) if chunks > 2 else 0
    return head + basis + length * _rounds(batch * chunks, dim, threads)


@functools.lru_cache(maxsize=1024)
def _best(num_states: int, restart: bool, batch: int, steps: int, dim: int, threads: int) -> tuple[int, float]:
    if batch == 0 or steps < 2 * MIN_CHUNK or dim == 0:
        return 1, 0.0
    sequential = steps * _rounds(batch, dim, threads)
    best_chunks, best_cost = 1, math.inf
    chunks = 2
    while chunks <= steps // MIN_CHUNK and chunks <= MAX_CHUNKS:
        cost = chunked_cost(num_states, restart, batch, steps, dim, threads, chunks)
        if cost < best_cost:
            best_chunks, best_cost = chunks, cost
        chunks *= 2
    return best_chunks, sequential / best_cost


def default_chunks(plan: Plan, batch: int, steps: int, dim: int, threads: int) -> int:
    """The number of chunks (a power of two, chunks of at least ``MIN_CHUNK`` steps, at most ``MAX_CHUNKS``)
    with the least ``chunked_cost``; 1 where the sequence is too short to cut."""
    return _best(plan.num_states, plan.options.restart, batch, steps, dim, threads)[0]


def chunked_speedup(plan: Plan, batch: int, steps: int, dim: int, threads: int, chunks: int | None = None) -> float:
    """The predicted time of the sequential kernel over the chunked scan's (> 1: chunked is faster).

    Model: a kernel call's time is its steps times its rounds of parallel tasks, a task being a (sequence,
    ``LANE_BLOCK`` lanes) pair and a round one task per thread: the sequential run takes
    ``T · ⌈B·⌈D/16⌉ / threads⌉``, the chunked scan ``chunked_cost`` (the first chunk, the transfer matrices at Q
    times the work, the rerun; its calls' steps add up). ``chunks``: ``None`` for ``default_chunks``.
    """
    if chunks is None:
        return _best(plan.num_states, plan.options.restart, batch, steps, dim, threads)[1]
    if batch == 0 or steps == 0 or dim == 0 or chunks < 2:
        return 0.0
    sequential = steps * _rounds(batch, dim, threads)
    return sequential / chunked_cost(plan.num_states, plan.options.restart, batch, steps, dim, threads, chunks)


def choose_scan(plan: Plan, batch: int, steps: int, dim: int, threads: int) -> Literal["sequential", "chunked"]:
    """``"chunked"`` where ``chunked_speedup`` predicts at least ``MIN_SPEEDUP``, else ``"sequential"``."""
    if chunked_speedup(plan, batch, steps, dim, threads) >= MIN_SPEEDUP:
        return "chunked"
    return "sequential"


def check_scan(scan: object) -> str:
    """``scan`` itself if it is one of ``SCANS``.

    Raises:
        CompileError: any other value.
    """
    if not isinstance(scan, str) or scan not in SCANS:
        raise CompileError(f"scan must be one of {', '.join(map(repr, SCANS))}; got {scan!r}")
    return scan


def initial_state(plan: Plan, params: Tensor, batch: int, like: Tensor) -> Tensor:
    """The state z_0 (B, Q, D) a plan starts from without ``h0``: zero if it restarts, else the start vector."""
    s = plan.storage
    zero = s.zeros((batch, like.shape[-1]), like=like)
    columns = [zero if plan.options.restart or p is None else params[p].expand(batch, -1) for p in plan.start]
    return torch.stack(columns, 1)


def parallel_tasks(device: torch.device | None = None) -> int:
    """The tasks (a sequence's ``LANE_BLOCK`` lanes) ``device`` runs at once, the cost model's ``threads``: torch's
    CPU threads, or a GPU's resident threads over ``LANE_BLOCK`` (its kernels run one lane per thread)."""
    if device is not None and device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return max(1, props.multi_processor_count * props.max_threads_per_multi_processor // LANE_BLOCK)
    return torch.get_num_threads()


def _sequential_states(s: Any, first: Tensor, transfer: Tensor | None, affine: Tensor | None, m: int) -> Tensor:
    """The initial states (B, m, Q, D) of chunks 2..m+1, z_{c+2} = z_{c+1} ⊗ M_c ⊕ a_c, one chunk after the other."""
    states = [first]
    for c in range(m):
        assert transfer is not None
        z = s.sum(s.times(states[-1][:, :, None, :], transfer[:, c]), axis=1)
        if affine is not None:
            z = s.plus(z, affine[:, c])
        states.append(z)
    return torch.stack(states[1:], 1) if m else first[:, None][:, :0]


def _parallel_states(s: Any, first: Tensor, transfer: Tensor | None, affine: Tensor | None, m: int) -> Tensor:
    """The same states by a log-depth (Hillis-Steele) prefix of the affine maps z ↦ z ⊗ M_c ⊕ a_c: after round r,
    entry c holds the composition of maps c-2^r+1..c (applying f then g: z ⊗ M_f M_g ⊕ (a_f ⊗ M_g ⊕ a_g)).
    ⌈log2 m⌉ rounds of batched semiring products, m·q³ work each: fewer, larger operations than m steps."""
    assert transfer is not None
    mats = transfer  # [b, c, from, to, d]
    offsets = affine[:, :m] if affine is not None else None  # [b, c, to, d]
    shift = 1
    while shift < m:
        earlier, later = mats[:, :-shift], mats[:, shift:]
        product = s.sum(s.times(earlier[:, :, :, :, None, :], later[:, :, None, :, :, :]), axis=3)
        if offsets is not None:
            moved = s.sum(s.times(offsets[:, :-shift, :, None, :], later), axis=2)
            offsets = torch.cat([offsets[:, :shift], s.plus(moved, offsets[:, shift:])], 1)
        mats = torch.cat([mats[:, :shift], product], 1)
        shift *= 2
    z = s.sum(s.times(first[:, None, :, None, :], mats), axis=2)
    return z if offsets is None else s.plus(z, offsets)


@dataclass
class ChunkedRunner:
    """A runner (see ``kleene.compile.module``) running ``plan`` as a chunked scan with ``factory``'s kernels.

    ``chunk``: steps per chunk (``None``: ``⌈T / default_chunks(...)⌉`` on each call). Caution: ``plan`` is the
    plan the runner is called with; the kernels it builds are for the same template and semiring with
    ``bidirectional`` off (the runner reverses the reverse lanes itself), and ``basis_plan``'s.
    """

    plan: Plan
    factory: Callable[[Plan], RunnerFn]
    chunk: int | None = None
    #: The scan of step 3: log-depth (``_parallel_states``) or one chunk after the other; ``None``: log-depth off
    #: the CPU, where every small torch operation is a kernel launch.
    parallel_scan: bool | None = None

    def __post_init__(self) -> None:
        if self.chunk is not None and (
            isinstance(self.chunk, bool) or not isinstance(self.chunk, int) or self.chunk < 1
        ):
            raise CompileError(f"chunk must be None or a number of steps >= 1, not {self.chunk!r}")
        factory = self.factory
        plan = self.plan
        restart = plan.options.restart
        self._rerun_plan = _plan_with(plan, plan.options.output, restart)
        self._head_plan = _plan_with(plan, "last", restart)
        self._basis_plan, rows = basis_plan(plan)
        self._basis_rows = torch.tensor(rows, dtype=torch.int64)
        self._rerun = factory(self._rerun_plan)
        self._head = factory(self._head_plan)
        self._basis = factory(self._basis_plan)

    def chunk_length(self, batch: int, steps: int, dim: int, device: torch.device | None = None) -> int:
        if self.chunk is not None:
            return self.chunk
        threads = 1 if torch.compiler.is_compiling() else parallel_tasks(device)  # (not traceable)
        chunks = default_chunks(self.plan, batch, steps, dim, threads)
        if chunks < 2:  # too short for the automatic chunks: two halves (the scan's results are the same)
            chunks = 2
        return max(1, math.ceil(steps / max(1, chunks)))

    def __call__(
        self, plan: Plan, slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """(output, final state) as the plan's sequential run gives them (``lengths`` already checked)."""
        b, t, _, d = slots.shape
        half = d // 2 if plan.options.bidirectional else d
        if half < d:  # reverse lanes read their valid steps backwards: reverse them once, run forwards
            slots = torch.cat([slots[..., :half], reverse_valid(slots[..., half:], lengths)], -1)
        length = self.chunk_length(b, t, d, slots.device)
        n = math.ceil(t / length) if t else 0
        if n <= 1:
            out, final = self._rerun(self._rerun_plan, slots, params, lengths, h0)
        else:
            out, final = self._chunked(plan, slots, params, lengths, h0, length, n)
        if half < d and plan.options.output == "steps":
            out = torch.cat([out[..., :half], reverse_valid(out[..., half:], lengths)], -1)
        return out, final

    def _chunked(
        self, plan: Plan, slots: Tensor, params: Tensor, lengths: Tensor, h0: Tensor | None, length: int, n: int
    ) -> tuple[Tensor, Tensor]:
        b, t, s_num, d = slots.shape
        q = plan.num_states
        s = plan.storage
        if n * length != t:
            slots = torch.cat([slots, slots.new_zeros((b, n * length - t, s_num, d))], 1)
        chunks = slots.view(b, n, length, s_num, d)
        starts = torch.arange(n, device=lengths.device) * length
        sizes = (lengths[:, None] - starts[None, :]).clamp(0, length)  # (B, N) valid steps per chunk
        z0 = initial_state(plan, params, b, slots) if h0 is None else h0
        # Every call runs all N chunks as sequences (a view of the slots: no copies), with length 0 where it has
        # nothing to do. 1. the first chunk from z0 and, restarting, the contributions a_c of chunks 1..N-2 from zero
        flat = chunks.reshape(b * n, length, s_num, d)
        last_only = sizes.clone()
        if plan.options.restart:
            last_only[:, -1] = 0
        else:
            last_only[:, 1:] = 0
        head_h0 = torch.cat([z0[:, None], s.zeros((b, n - 1, q, d), like=slots)], 1).reshape(b * n, q, d)
        _, head = self._head(self._head_plan, flat, params, last_only.reshape(-1), head_h0)
        head = head.view(b, n, q, d)
        first, affine = head[:, 0], (head[:, 1:] if plan.options.restart else None)
        # 2. the transfer matrices of chunks 1..N-2 (the last chunk's is never needed): Q copies of the automaton,
        #    copy k from the basis vector e_k
        m = n - 2
        if m:
            middle = sizes.clone()
            middle[:, 0] = 0
            middle[:, -1] = 0
            eye = s.identity(q, like=slots).reshape(1, q * q, 1).expand(b * n, q * q, d)
            rows = params[self._basis_rows.to(params.device)] if params.shape[0] else params
            _, transfer = self._basis(self._basis_plan, flat, rows, middle.reshape(-1), eye)
            transfer = transfer.view(b, n, q, q, d)[:, 1 : n - 1]  # [b, c, from, to, d]
        # 3. the scan of the chunks' initial states
        parallel = self.parallel_scan if self.parallel_scan is not None else slots.device.type != "cpu"
        scan = _parallel_states if parallel and m > 1 else _sequential_states
        later = scan(s, first, transfer if m else None, affine, m)
        inits = torch.cat([z0[:, None], first[:, None], later], 1).reshape(b * n, q, d)
        # 4. every chunk again from its true initial state
        out, final = self._rerun(self._rerun_plan, flat, params, sizes.reshape(-1), inits)
        final = final.view(b, n, q, d)[:, -1]
        output = plan.options.output
        if output == "steps":
            return out.view(b, n * length, d)[:, :t], final
        if output == "sum":
            return s.sum(out.view(b, n, d), axis=1), final
        return out.view(b, n, d)[:, -1], final
