"""The recurrence benchmark behind ``kleene bench``: generated kernels against plain PyTorch, side by side.

Every ratio in a record is measured in the same run, on the same inputs, one contender right
after the other:

- ``kernel_ms``: the compiled module (backend ``cpp``; ``torch`` where no compiler works);
- ``naive_ms``: the best plain PyTorch loop for that automaton: hand-written updates over
  ``unbind(1)`` views; forward writes each step with ``out=`` into a preallocated output,
  forward+backward stacks the steps once; SoPa is the layer itself run on the torch backend;
- ``floor_ms``: the memory-bandwidth floor: ``torch.add(a, b, out=c)`` on preallocated float32
  buffers moving exactly the bytes the recurrence must move (``floor_bytes``: forward reads every
  slot and writes every output; forward+backward also reads the slots and the output gradient and
  writes the slot gradients); buffers that fit the last-level cache make it a cache floor;
- ``dram_floor_ms``: the same bytes at the DRAM bandwidth of ``torch.add`` measured on buffers four
  times the last-level cache (read from the OS, ``last_level_cache_bytes``), so they never fit it;
- ``backward``: what the kernel's forward saved for its backward (``stored states`` or ``checkpoints``,
  ``kleene.compile.runtime.cpu.backward_strategy``);
- ``lstm_ms``/``gru_ms``: ``nn.LSTM``/``nn.GRU``, hidden size d, on (B, T, d) inputs;
- ``gemm_ms`` (layer rows, ``layer_vs_gemm``): the layer's own projection alone (its GEMMs, or QRNN's masked
  convolution), on the layer's weights; layer rows cover every recurrent layer of the registry (``layer_cases``),
  ``lstm_ms``/``gru_ms`` there are of the layer's input and hidden sizes, timed right after the layer;
- ``sru_ms`` (SRU rows): ``sru.SRUCell`` of the ``sru`` package, where it imports.

Forward passes run under ``no_grad``; forward+backward passes take ``torch.autograd.grad`` of the
sum of the outputs with respect to the inputs and parameters. Times are the minimum wall time
over repetitions (after one warm-up call): on a machine shared with other work the minimum is the
stable estimate of what a call costs, the median mostly measures the neighbours. Before timing
anything, each kernel's output is checked against its naive loop (a benchmark of two programs
that disagree would mean nothing).

glibc returns large freed blocks to the kernel (``mmap``/trim), so every big allocation would be
page-faulted again on each call; ``tune_malloc`` keeps freed memory in the heap for the whole
process (applied by ``run`` before anything big is allocated), for every contender alike.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from kleene.automata.examples import paper_automaton_b, paper_automaton_c, paper_automaton_f
from kleene.compile.module import CompiledRecurrence, compile
from kleene.compile.runtime.cpu import backward_strategy
from kleene.compile.runtime.op import SAVE_STATES
from kleene.compile.template import Template
from kleene.errors import ArgumentError
from kleene.nn.sopa import PatternGroup, SoftPatterns, raw_constants
from kleene.nn.sru import sru_template

Tensor = torch.Tensor
Record = dict[str, Any]

SHAPES = [(32, 256, 512), (1, 4096, 512), (64, 64, 256)]
AUTOMATA = ["B", "C", "F", "SoPa"]
FORWARD, BOTH = "forward", "forward+backward"
SECTIONS = (None, "layers", "sru", "builds")

# glibc mallopt parameters
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX = -1, -2, -4


def tune_malloc() -> bool:
    """Keep freed memory in glibc's heap (no mmap for big blocks, no trimming); False if not glibc."""
    name = ctypes.util.find_library("c")
    if not sys.platform.startswith("linux") or name is None:
        return False
    libc = ctypes.CDLL(name)
    if not hasattr(libc, "mallopt"):
        return False
    settings = ((_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 2**31 - 1), (_M_TOP_PAD, 64 << 20))
    return all(libc.mallopt(option, value) == 1 for option, value in settings)


#: The clock ``time_ms`` reads: wall time, or the process's CPU time (``run(cpu_time=True)``, one thread only: on a
#: machine whose load average exceeds its cores a descheduled thread's wall time measures the neighbours).
CLOCK: Callable[[], float] = time.perf_counter


def time_ms(fn: Callable[[], Any], budget_s: float, max_reps: int = 30, min_reps: int = 3) -> float:
    """Minimum time (``CLOCK``) of ``fn`` in ms over ``min_reps`` or more calls (after a warm-up) within about
    ``budget_s`` of that clock."""
    fn()
    best = math.inf
    deadline = CLOCK() + budget_s
    reps = 0
    while reps < min_reps or (reps < max_reps and CLOCK() < deadline):
        start = CLOCK()
        fn()
        best = min(best, (CLOCK() - start) * 1000)
        reps += 1
    return best


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _size_bytes(text: str) -> int:
    """A sysfs cache size ("32768K", "1M") in bytes."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def last_level_cache_bytes() -> int | None:
    """Total bytes of the last-level cache: every distinct instance of the highest cache level in sysfs
    (one per group of CPUs sharing it); None where sysfs does not say."""
    instances: dict[str, int] = {}
    level_seen = 0
    for index in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index[0-9]*"):
        try:
            level = int((index / "level").read_text())
            if (index / "type").read_text().strip() == "Instruction":
                continue
            size = _size_bytes((index / "size").read_text())
            shared = (index / "shared_cpu_list").read_text().strip()
        except (OSError, ValueError):
            continue
        if level > level_seen:
            instances, level_seen = {}, level
        if level == level_seen:
            instances[shared] = size
    return sum(instances.values()) or None


#: Bytes the DRAM floor's buffers span where the OS does not report the last-level cache.
_FALLBACK_LLC = 256 << 20


def dram_bandwidth(budget_s: float) -> float:
    """Bytes per ms of ``torch.add(a, b, out=c)`` on float32 buffers spanning four times the last-level cache
    (at least 256 MiB), so every byte comes from DRAM."""
    span = max(4 * (last_level_cache_bytes() or _FALLBACK_LLC), 256 << 20)
    n = span // 12
    a, b, c = torch.rand(n), torch.rand(n), torch.empty(n)
    ms = time_ms(lambda: torch.add(a, b, out=c), budget_s, max_reps=10)
    return 12 * n / ms


def floor_ms(num_bytes: int, budget_s: float) -> float:
    """Time of ``torch.add(a, b, out=c)`` on float32 buffers moving ``num_bytes`` (read a, b; write c)."""
    n = max(1, num_bytes // 12)
    a, b, c = torch.rand(n), torch.rand(n), torch.empty(n)
    return time_ms(lambda: torch.add(a, b, out=c), budget_s)


# --------------------------------------------------------------------------------------------
# The plain PyTorch loops (real semiring; SoPa is its layer on the torch backend). ``out`` given: forward
# into that preallocated (B, T, d) buffer; ``out`` None: differentiable, steps stacked once.
# --------------------------------------------------------------------------------------------
def _collect(out: Tensor | None, steps: list[Tensor]) -> Tensor:
    return out if out is not None else torch.stack(steps, 1)


def _rows(out: Tensor | None, t: int) -> Sequence[Tensor | None]:
    return out.unbind(1) if out is not None else [None] * t


def naive_b(x: Tensor, out: Tensor | None = None) -> Tensor:
    """Automaton B (eq. 23c): ``c_t = φ_t c_{t-1} + μ_t`` with slots (μ, φ)."""
    mu, phi = x.unbind(2)
    c = x.new_zeros(x.shape[0], x.shape[3])
    steps = []
    for m, f, o in zip(mu.unbind(1), phi.unbind(1), _rows(out, x.shape[1])):
        c = torch.addcmul(m, c, f, out=o) if o is not None else torch.addcmul(m, c, f)
        steps.append(c)
    return _collect(out, steps)


def naive_c(x: Tensor, out: Tensor | None = None) -> Tensor:
    """Automaton C (eq. 25c-d): ``c1 = φ1 c1 + μ1``, ``c2 = φ2 c2 + μ2 c1_{t-1}``; output c2."""
    mu1, phi1, mu2, phi2 = (s.unbind(1) for s in x.unbind(2))
    c1 = x.new_zeros(x.shape[0], x.shape[3])
    c2 = torch.zeros_like(c1)
    steps = []
    for t, o in enumerate(_rows(out, x.shape[1])):
        if o is not None:
            c2 = torch.addcmul(torch.mul(c2, phi2[t], out=o), c1, mu2[t], out=o)
        else:
            c2 = torch.addcmul(c2 * phi2[t], c1, mu2[t])
        c1 = torch.addcmul(mu1[t], c1, phi1[t])
        steps.append(c2)
    return _collect(out, steps)


def naive_f(x: Tensor, gamma: Tensor, rho1: Tensor, rho2: Tensor, out: Tensor | None = None) -> Tensor:
    """Automaton F (eq. 26e-g): C plus the shortcut γ into c2 and output ``ρ1 c1 + ρ2 c2``."""
    mu1, phi1, mu2, phi2 = (s.unbind(1) for s in x.unbind(2))
    c1 = x.new_zeros(x.shape[0], x.shape[3])
    c2 = torch.zeros_like(c1)
    steps = []
    for t, o in enumerate(_rows(out, x.shape[1])):
        c2 = torch.addcmul(c2 * phi2[t], c1 + gamma, mu2[t])
        c1 = torch.addcmul(mu1[t], c1, phi1[t])
        if o is not None:
            torch.addcmul(torch.mul(c1, rho1, out=o), c2, rho2, out=o)
        else:
            steps.append(torch.addcmul(c1 * rho1, c2, rho2))
    return _collect(out, steps)


# --------------------------------------------------------------------------------------------
# Contenders
# --------------------------------------------------------------------------------------------
@dataclass
class Contender:
    """One automaton at one shape: the kernel modules, their inputs, and the naive loop."""

    name: str
    modules: list[CompiledRecurrence]
    slots: list[Tensor]
    #: naive(slots, out): out is a preallocated output (forward) or None (differentiable)
    naive: Callable[[list[Tensor], Tensor | None], list[Tensor]]
    per_step_output: bool

    #: kernel(slots) when the modules are not simply run one per slot tensor (SoPa: the layer's groups)
    kernel_fn: Callable[[list[Tensor]], list[Tensor]] | None = None
    #: the slot values the recurrence needs (default: every value of ``slots``; SoPa's bank rows hold padding)
    slot_values: int | None = None

    def kernel(self, slots: list[Tensor]) -> list[Tensor]:
        if self.kernel_fn is not None:
            return self.kernel_fn(slots)
        return [m(x)[0] for m, x in zip(self.modules, slots)]

    def parameters(self) -> list[Tensor]:
        """The learned leaves (a parametrized module's raw constants)."""
        return [p for m in self.modules for p in m.parameters()]


def paper_templates() -> dict[str, Template]:
    return {
        "B": Template.from_wfsa(paper_automaton_b()),
        "C": Template.from_wfsa(paper_automaton_c()),
        "F": Template.from_wfsa(paper_automaton_f()),
    }


def make_contender(name: str, shape: tuple[int, int, int], backend: str, gen: torch.Generator) -> Contender:
    """Automaton ``name`` (B, C, F: real semiring; SoPa: a bank of patterns 2-7 in max-times) at ``shape``.

    SoPa is the layer itself: the kernel is the bank on ``backend`` (on cpp: one call, ``SoftPatterns.bank_scores``
    on the bank's rows, whose padding lanes are not counted in ``slot_values``; else ``PatternGroup.score`` per
    group), the plain PyTorch contender the same bank (same weights) on the torch backend.
    """
    b, t, d = shape
    if name == "SoPa":
        lengths = (2, 3, 4, 5, 6, 7)
        widths = [d // len(lengths) + (1 if i < d % len(lengths) else 0) for i in range(len(lengths))]
        spec = dict(zip(lengths, widths))
        bank = SoftPatterns(1, spec, semiring="max-times", epsilon_cap=1, backend=backend)
        groups = [g for g in bank.groups if isinstance(g, PatternGroup)]
        with torch.no_grad():
            for group in groups:
                raw_constants(group.recurrence).copy_(torch.randn(group.length - 1, group.count, generator=gen))
        reference = SoftPatterns(1, spec, semiring="max-times", epsilon_cap=1, backend="torch")
        reference.load_state_dict(bank.state_dict())
        plain = [g for g in reference.groups if isinstance(g, PatternGroup)]
        slots = [torch.rand(b, t, len(g.template.slots), g.count, generator=gen).log() for g in groups]
        full = torch.full((b,), t, dtype=torch.long)
        values = sum(x.numel() for x in slots)

        def scores(layer: list[PatternGroup], xs: list[Tensor]) -> list[Tensor]:
            return [torch.cat([g.score(x, full) for g, x in zip(layer, xs)], 1)]

        if backend != "cpp":
            return Contender(
                name,
                [g.recurrence for g in groups + plain],
                slots,
                lambda xs, out: scores(plain, xs),
                per_step_output=False,
                kernel_fn=lambda xs: scores(groups, xs),
            )
        layout = bank.one_call_layout()
        rows = layout.pad_lanes(slots)  # (B, T, R): every group's slots, lanes padded to whole vectors

        def blocks(xs: list[Tensor]) -> list[Tensor]:
            """The groups' slots (B, T, S, count) as views of the bank's rows."""
            offsets, widths = layout.layout.slot_offsets, layout.layout.widths
            return [
                xs[0][..., offsets[k] : offsets[k + 1]].unflatten(-1, (-1, widths[k]))[..., : g.count]
                for k, g in enumerate(plain)
            ]

        return Contender(
            name,
            [g.recurrence for g in groups + plain],
            [rows],
            lambda xs, out: scores(plain, blocks(xs)),
            per_step_output=False,
            kernel_fn=lambda xs: [bank.bank_scores(xs[0], full)],
            slot_values=values,
        )
    template = paper_templates()[name]
    module = compile(template, "real", d, backend)
    with torch.no_grad():
        module.constants.copy_(torch.rand(module.constants.shape, generator=gen) * 0.5)
    slots = [torch.rand(b, t, len(template.slots), d, generator=gen)]
    constants = dict(zip(template.constants, module.constants))

    def naive_one(xs: list[Tensor], out: Tensor | None) -> list[Tensor]:
        if name == "B":
            return [naive_b(xs[0], out)]
        if name == "C":
            return [naive_c(xs[0], out)]
        return [naive_f(xs[0], constants["gamma"], constants["rho1"], constants["rho2"], out)]

    return Contender(name, [module], slots, naive_one, per_step_output=True)


def check_agreement(contender: Contender) -> float:
    """The largest difference between kernel and naive outputs (raises if they disagree)."""
    with torch.no_grad():
        got = contender.kernel(contender.slots)
        expected = contender.naive(contender.slots, None)
    worst = 0.0
    for g, e in zip(got, expected):
        if not torch.allclose(g, e, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"{contender.name}: the kernel and the naive loop disagree; refusing to time them")
        worst = max(worst, float((g - e).abs().max()))
    return worst


def _grad_of_sum(outputs: Callable[[], list[Tensor]], wrt: list[Tensor]) -> Callable[[], None]:
    def run() -> None:
        loss = torch.stack([o.sum() for o in outputs()]).sum()
        torch.autograd.grad(loss, wrt, allow_unused=True)

    return run


def _outputs(module: Callable[[Tensor], Any], x: Tensor) -> Callable[[], list[Tensor]]:
    """``module(x)`` as a one-element list (the first element when it returns a tuple, as RNNs do)."""

    def call() -> list[Tensor]:
        y = module(x)
        return [y[0] if isinstance(y, tuple) else y]

    return call


def _no_grad(fn: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        with torch.no_grad():
            fn()

    return run


def _rnn_times(
    shape: tuple[int, int, int], pass_name: str, budget: float, with_gru: bool, hidden: int | None = None
) -> dict[str, float]:
    """nn.LSTM (and nn.GRU) of input size d and ``hidden`` (default d) on (B, T, d) inputs."""
    b, t, d = shape
    x = torch.randn(b, t, d, generator=torch.Generator().manual_seed(3))
    times = {}
    for key, cls in (("lstm_ms", nn.LSTM), ("gru_ms", nn.GRU))[: 2 if with_gru else 1]:
        rnn = cls(d, d if hidden is None else hidden, batch_first=True)
        if pass_name == FORWARD:
            fn = _no_grad(_outputs(rnn, x))
        else:
            xs = x.clone().requires_grad_()
            fn = _grad_of_sum(_outputs(rnn, xs), [xs, *rnn.parameters()])
        times[key] = time_ms(fn, budget, max_reps=5, min_reps=2)
    return times


def _backward_kind(module: CompiledRecurrence, shape: tuple[int, int, int]) -> str | None:
    """What ``module``'s forward saves for its backward at ``shape`` (float32), or None off the cpp backend."""
    if module.backend != "cpp":
        return None
    b, t, d = shape
    saved = backward_strategy(module.plan, b, t, d, 4)
    return "stored states" if saved == SAVE_STATES else "checkpoints"


def recurrence_records(
    shape: tuple[int, int, int],
    names: list[str],
    passes: list[str],
    backend: str,
    budget: float,
    rnns: str,
    bandwidth: float | None = None,
) -> list[Record]:
    """Records for automata ``names`` at ``shape``; ``rnns``: "" (none), "lstm" or "lstm+gru"; ``bandwidth``:
    the DRAM bandwidth in bytes/ms (``dram_bandwidth``) for ``dram_floor_ms``."""
    gen = torch.Generator().manual_seed(0)
    b, t, d = shape
    records = []
    for pass_name in passes:
        rnn_times = _rnn_times(shape, pass_name, budget, "gru" in rnns) if rnns else {}
        for name in names:
            contender = make_contender(name, shape, backend, gen)
            difference = check_agreement(contender)
            slot_values = contender.slot_values or sum(x.numel() for x in contender.slots)
            out_values = b * t * d if contender.per_step_output else b * d
            if pass_name == FORWARD:
                out = torch.empty(b, t, d) if contender.per_step_output else None
                kernel = _no_grad(partial(contender.kernel, contender.slots))
                naive = _no_grad(partial(contender.naive, contender.slots, out))
                moved = 4 * (slot_values + out_values)
            else:
                leaves = [x.clone().requires_grad_() for x in contender.slots]
                wrt = leaves + contender.parameters()
                kernel = _grad_of_sum(partial(contender.kernel, leaves), wrt)
                naive = _grad_of_sum(partial(contender.naive, leaves, None), wrt)
                moved = 4 * (3 * slot_values + 2 * out_values)
            record: Record = {
                "automaton": name,
                "shape": [b, t, d],
                "pass": pass_name,
                "backend": contender.modules[0].backend,
                "kernel_ms": time_ms(kernel, budget),
                "naive_ms": time_ms(naive, budget, max_reps=10),
                "floor_ms": floor_ms(moved, budget),
                "floor_bytes": moved,
                "dram_floor_ms": moved / bandwidth if bandwidth else None,
                "backward": _backward_kind(contender.modules[0], (b, t, d)) if pass_name == BOTH else None,
                "max_abs_difference": difference,
                **rnn_times,
            }
            records.append(record)
            print(format_row(record), flush=True)
    return records


class LayerCase(NamedTuple):
    """A layer row: ``build(input_size, hidden_size, backend=...)`` makes the layer, ``gemm(layer, x)`` runs its
    projection alone; ``hidden``: its hidden size (None: the input size), ``batch``: its batch (None: the run's)."""

    label: str
    build: Callable[..., nn.Module]
    gemm: Callable[[Any, Tensor], list[Tensor]]
    hidden: int | None = None
    batch: int | None = None


def _qrnn_gemm(layer: Any, x: Tensor) -> list[Tensor]:
    """A QRNN layer's masked convolution alone (``QRNNLayer.convolve``, one GEMM), on x after its K-1 zero steps."""
    return [layer.convolve(layer.previous_inputs(x, None))]


def layer_cases() -> list[LayerCase]:
    """The registry's recurrent layers, each with the projection it runs (its GEMMs or convolution): RRNN B/C/F,
    SRU, QRNN (f/fo/ifo, windows 1 and 2), RCNN (bigram) and ISAN. SoPa's bank has its own rows (its projection is
    the embedding's)."""
    from kleene.nn.isan import ISANLayer
    from kleene.nn.qrnn import QRNNLayer
    from kleene.nn.rcnn import RCNNLayer
    from kleene.nn.rrnn import RRNNLayer
    from kleene.nn.sru import SRULayer

    cases: list[LayerCase] = [
        LayerCase(f"RRNN({kind})", partial(RRNNLayer, kind=kind), lambda layer, x: [layer.slots(x)[0]])
        for kind in "BCF"
    ]
    cases.append(LayerCase("SRU", SRULayer, lambda layer, x: [layer.transform(x), layer.gates(x)]))
    for pooling in ("f", "fo", "ifo"):
        for window in (1, 2):
            build = partial(QRNNLayer, pooling=pooling, window=window)
            cases.append(LayerCase(f"QRNN {pooling} K{window}", build, _qrnn_gemm))
    cases.append(LayerCase("RCNN", RCNNLayer, lambda layer, x: [layer.inputs(x), layer.decay(x)]))
    # ISAN's projection has d² + d outputs (hidden 512 would be a 1.1 TFLOP GEMM); at hidden 256 its matrices are
    # B·T·d² values (2 GB at batch 32): a batch of 4
    isan_gemm = lambda layer, x: [layer.matrix(x), layer.offset(x)]  # noqa: E731
    cases.append(LayerCase("ISAN", ISANLayer, isan_gemm, hidden=32))
    cases.append(LayerCase("ISAN d256", ISANLayer, isan_gemm, hidden=256, batch=4))
    return cases


def layer_vs_gemm(
    label: str,
    layer: nn.Module,
    gemm: Callable[[Tensor], list[Tensor]],
    x: Tensor,
    passes: list[str],
    budget: float,
    rnn_times: Callable[[str], dict[str, float]],
) -> list[Record]:
    """Records of ``layer(x, lengths)`` against ``gemm(x)`` (its own projection, timed alone, the same weights)
    and ``rnn_times(pass)`` (nn.LSTM/nn.GRU of the same input and hidden sizes), forward and forward+backward
    (gradients of the input and every parameter the call reads)."""
    b, t, _ = x.shape
    lengths = torch.full((b,), t, dtype=torch.long)

    def run_layer(v: Tensor) -> list[Tensor]:
        return [layer(v, lengths)[0]]

    records = []
    for pass_name in passes:
        if pass_name == FORWARD:
            kernel = _no_grad(partial(run_layer, x))
            projection = _no_grad(partial(gemm, x))
        else:
            xs = x.clone().requires_grad_()
            kernel = _grad_of_sum(partial(run_layer, xs), [xs, *layer.parameters()])
            projection = _grad_of_sum(partial(gemm, xs), [xs, *layer.parameters()])
        record: Record = {
            "automaton": f"layer {label}",
            "shape": [b, t, int(getattr(layer, "output_size", 0))],
            "input_size": int(x.shape[2]),
            "pass": pass_name,
            "backend": getattr(getattr(layer, "recurrence", layer), "backend", "torch"),
            "kernel_ms": time_ms(kernel, budget, max_reps=8, min_reps=2),
            "gemm_ms": time_ms(projection, budget, max_reps=8, min_reps=2),
            "naive_ms": None,
            "floor_ms": None,
            **rnn_times(pass_name),
        }
        records.append(record)
        print(format_row(record), flush=True)
    return records


def layer_records(
    shape: tuple[int, int, int],
    passes: list[str],
    backend: str,
    budget: float,
    only: Sequence[str] | None = None,
    rnns: str = "lstm+gru",
) -> list[Record]:
    """Every ``layer_cases`` layer (``only``: those labels) at ``shape`` = (B, T, input size; the case's hidden size,
    else the input size, and its batch, else B) against its projection GEMM and nn.LSTM/nn.GRU (``rnns``) of the
    same sizes."""
    b, t, d = shape
    x = torch.randn(b, t, d, generator=torch.Generator().manual_seed(1))

    def rnn_times(batch: int, hidden: int, pass_name: str) -> dict[str, float]:  # timed again for each row
        return _rnn_times((batch, t, d), pass_name, budget, "gru" in rnns, hidden) if rnns else {}

    records = []
    for case in layer_cases():
        if only is not None and case.label not in only:
            continue
        hidden = d if case.hidden is None else case.hidden
        batch = b if case.batch is None else min(b, case.batch)
        torch.manual_seed(0)
        layer = case.build(d, hidden, backend=backend)
        records += layer_vs_gemm(
            case.label, layer, partial(case.gemm, layer), x[:batch], passes, budget, partial(rnn_times, batch, hidden)
        )
    return records


class SRURecurrence(nn.Module):
    """SRU's recurrence as analysed in 2017, from the projection in the layout ``SRULayer``'s GEMM writes: slots
    (B, T, 4, d) = (W_f x + b_f, W x, W_r x + b_r, x). The gates, ``c_t = f ⊙ c_{t-1} + (1 - f) ⊙ W x`` and the
    highway ``h = r ⊙ tanh(c) + (1 - r) ⊙ x`` run inside the kernel (``sru_template``'s output map, as in the
    layer)."""

    def __init__(self, d: int, backend: str):
        super().__init__()
        self.recurrence = compile(sru_template("real"), "real", d, backend)

    def forward(self, slots: Tensor) -> Tensor:
        return self.recurrence(slots)[0]


def sru_records(shape: tuple[int, int, int], passes: list[str], backend: str, budget: float) -> list[Record]:
    """kleene's SRU recurrence against the ``sru`` package's on the same projection: forward against its C++
    CPU operator (``elementwise_recurrence_inference``), forward+backward against its CPU training path (a
    Python loop, ``elementwise_recurrence_naive``). Its v2 gates also read ``v ⊙ c_{t-1}``, a little more work."""
    try:
        import sru  # type: ignore[import-not-found, import-untyped, unused-ignore]
        from sru.ops import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
            elementwise_recurrence_inference,
            elementwise_recurrence_naive,
        )
    except Exception as exc:  # noqa: BLE001 - any import failure means: no sru rows
        print(f"# sru rows skipped: the sru package is unavailable ({type(exc).__name__}: {exc})", flush=True)
        return []
    b, t, d = shape
    cell = sru.SRUCell(d, d)
    ours = SRURecurrence(d, backend)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(b, t, d, generator=gen)
    slots = torch.cat([torch.randn(b, t, 3, d, generator=gen), x[:, :, None]], 2)  # (zf, wu, zr, skip = x)
    x_time_major = x.transpose(0, 1).contiguous()
    c0 = torch.zeros(b, d)
    with torch.no_grad():
        u_theirs, v_theirs = cell.compute_UV(x_time_major, c0, None)
    args = (cell.activation_type, cell.hidden_size, cell.bidirectional, cell.has_skip_term, None, None, None)
    records = []
    for pass_name in passes:
        if pass_name == FORWARD:
            kernel = _no_grad(partial(ours, slots))
            theirs = _no_grad(
                partial(elementwise_recurrence_inference, u_theirs, x_time_major, v_theirs, cell.bias, c0, *args)
            )
        else:
            leaves = [slots.clone().requires_grad_()]
            ut, xt = u_theirs.clone().requires_grad_(), x_time_major.clone().requires_grad_()

            def our_outputs(leaves: list[Tensor] = leaves) -> list[Tensor]:
                return [ours(*leaves)]

            def their_outputs(ut: Tensor = ut, xt: Tensor = xt) -> list[Tensor]:
                return [elementwise_recurrence_naive(ut, xt, v_theirs, cell.bias, c0, *args)[0]]

            kernel = _grad_of_sum(our_outputs, leaves)
            theirs = _grad_of_sum(their_outputs, [ut, xt, cell.bias])
        record: Record = {
            "automaton": "SRU recurrence",
            "shape": [b, t, d],
            "pass": pass_name,
            "backend": ours.recurrence.backend,
            "kernel_ms": time_ms(kernel, budget),
            "sru_ms": time_ms(theirs, budget, max_reps=8, min_reps=2),
            "naive_ms": None,
            "floor_ms": None,
        }
        records.append(record)
        print(format_row(record), flush=True)
    return records


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------
HEADER = (
    f"{'automaton':18} {'shape':12} {'pass':16} {'kernel ms':>9} {'naive/k':>7} {'k/floor':>7} "
    f"{'dram ms':>7} {'k/dram':>7} {'lstm/k':>7} {'gru/k':>7} {'k/gemm':>7} {'sru/k':>7}  backward"
)


def _ratio(a: Any, b: Any) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}"


def format_row(r: Record) -> str:
    shape = "x".join(str(s) for s in r["shape"])
    dram = r.get("dram_floor_ms")
    ratios = [
        _ratio(r.get("naive_ms"), r["kernel_ms"]),
        _ratio(r["kernel_ms"], r.get("floor_ms")),
        "-" if dram is None else f"{dram:.2f}",
        _ratio(r["kernel_ms"], dram),
        _ratio(r.get("lstm_ms"), r["kernel_ms"]),
        _ratio(r.get("gru_ms"), r["kernel_ms"]),
        _ratio(r["kernel_ms"], r.get("gemm_ms")),
        _ratio(r.get("sru_ms"), r["kernel_ms"]),
    ]
    row = f"{r['automaton']:18} {shape:12} {r['pass']:16} {r['kernel_ms']:9.2f} " + " ".join(f"{x:>7}" for x in ratios)
    return row + (f"  {r['backward']}" if r.get("backward") else "")


def build_seconds() -> tuple[float, float]:
    """(first build of automaton F's float32 forward+backward library, what a first training step builds, into an
    empty cache; cached load of it), in seconds.

    Raises:
        CompileError: no C++ compiler.
    """
    import os
    import tempfile

    from kleene.compile.codegen.entries import ENTRY_KINDS, entry_name
    from kleene.compile.runtime.cpu import build, cpp_source
    from kleene.compile.template import lower

    source = cpp_source(lower(paper_templates()["F"], "real"))
    entries = tuple(entry_name(kind, "f32") for kind in ENTRY_KINDS)
    saved = os.environ.get("KLEENE_CACHE")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["KLEENE_CACHE"] = cache
        try:
            start = time.perf_counter()
            build(source, entries)
            first = time.perf_counter() - start
            start = time.perf_counter()
            path, built = build(source, entries)
            ctypes.CDLL(str(path))
            cached = time.perf_counter() - start
        finally:
            if saved is None:
                del os.environ["KLEENE_CACHE"]
            else:
                os.environ["KLEENE_CACHE"] = saved
    assert not built
    return first, cached


#: Vocabulary and classes of the models whose kernels ``registry_build_records`` builds (the sizes of the other
#: arguments are each builder's defaults).
BUILD_VOCAB, BUILD_CLASSES = 1000, 2


def model_build_seconds(name: str) -> tuple[float, float]:
    """(seconds to build registry model ``name`` at its defaults and run one forward on a (2, 5) batch, the part of
    them spent making its kernels ready: ``load_kernel``'s, ``load_dense_cpu``'s and ``load_bank_kernel``'s source
    generation, each entry point's compilation or cache lookup and loading at its first call
    (``NativeKernel.entries``), and ``build_many``'s concurrent builds). Torch and kleene
    are imported before the clock starts. Classifiers get ``BUILD_CLASSES`` classes, language models (builders
    without ``num_classes``) none.

    Raises:
        KleeneError: the model cannot be built from a vocabulary alone (``regex`` needs rules: a ``RuleError``).
    """
    import inspect

    from kleene.compile.runtime import bank, cpu, dense
    from kleene.nn.registry import build_model, model_builder

    loading = 0.0
    # the loaders of the template kernels, of the dense path's and of a SoPa bank's, the builds of their entry points
    # at first call, and the concurrent builds done ahead of them (their callers look the names up at call time, so
    # replacing the attributes times them all)
    loaders: list[tuple[Any, str]] = [
        (cpu, "load_kernel"), (dense, "load_dense_cpu"), (bank, "load_bank_kernel"), (cpu.NativeKernel, "entries"),
        (cpu, "build_many"),
    ]  # fmt: skip
    originals = [getattr(module, attribute) for module, attribute in loaders]

    def timed(load: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            nonlocal loading
            start = time.perf_counter()
            try:
                return load(*args)
            finally:
                loading += time.perf_counter() - start

        return run

    for (module, attribute), load in zip(loaders, originals):
        setattr(module, attribute, timed(load))
    try:
        parameters = inspect.signature(model_builder(name)).parameters
        classes = {"num_classes": BUILD_CLASSES} if "num_classes" in parameters else {}
        start = time.perf_counter()
        model = build_model(name, vocab_size=BUILD_VOCAB, **classes)
        tokens = torch.randint(1, BUILD_VOCAB, (2, 5), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            model(tokens, torch.tensor([5, 3]))
        return time.perf_counter() - start, loading
    finally:
        for (module, attribute), load in zip(loaders, originals):
            setattr(module, attribute, load)


def registry_build_records(names: Sequence[str] | None = None) -> list[Record]:
    """First build and cached load of every registry model (``names``: those) at its defaults, each in a fresh
    ``$KLEENE_CACHE`` and a fresh process (``model_build_seconds``: the whole build and first forward, and the
    kernels' share; the second process reuses the cache the first filled). A model that cannot be built at its
    defaults gets the error instead of times."""
    import os
    import subprocess
    import tempfile

    from kleene.nn.registry import registered_models

    records = []
    print(f"{'model':14} {'first build s':>13} {'(kernels)':>9} {'cached load s':>13} {'(kernels)':>9} "
          f"{'kernels':>7}", flush=True)  # fmt: skip
    for name in names or registered_models():
        record: Record = {"model": name}
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "KLEENE_CACHE": cache}
            code = f"from kleene.bench import model_build_seconds; print(*model_build_seconds({name!r}))"
            for key in ("first_build", "cached_load"):
                done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    record["error"] = (done.stderr.strip().splitlines() or ["?"])[-1]
                    break
                total, kernels = (float(v) for v in done.stdout.split()[-2:])
                record[f"{key}_s"], record[f"{key}_kernels_s"] = total, kernels
            record["kernels"] = len(list(Path(cache).glob("kernels/*.so")))
        records.append(record)
        if "error" in record:
            print(f"{name:14} {record['error']}", flush=True)
        else:
            keys = ("first_build_s", "first_build_kernels_s", "cached_load_s", "cached_load_kernels_s")
            times = [record[k] for k in keys]
            print(f"{name:14} {times[0]:13.2f} {times[1]:9.2f} {times[2]:13.3f} {times[3]:9.3f} {record['kernels']:7}",
                  flush=True)  # fmt: skip
    return records


def run(
    quick: bool = False,
    json_path: Path | None = None,
    backend: str = "cpp",
    threads: int | None = None,
    section: str | None = None,
    cpu_time: bool = False,
    layers: Sequence[str] | None = None,
) -> list[Record]:
    """Run the benchmark (``quick``: the (32, 256, 512) rows and B at (1, 4096, 512)); print the table.

    ``threads``: torch's (and so the kernels') thread count; default: torch's default (the core count).
    ``section``: None (everything but the registry's build times), ``"layers"`` (only the layer rows), ``"sru"`` (the
    SRU and RRNN(F) layer rows and ``sru_records``) or ``"builds"`` (only ``registry_build_records``).

    ``cpu_time``: time with the process's CPU time instead of wall time (``CLOCK``; needs ``threads=1``).
    ``layers``: only these ``layer_cases`` labels in the layer rows (default: every one).

    Raises:
        ArgumentError: an unknown ``section`` or layer label, or ``cpu_time`` without ``threads=1``.
    """
    global CLOCK
    if section not in SECTIONS:
        raise ArgumentError(f"bench section {section!r} is not one of {SECTIONS}")
    if cpu_time and threads != 1:
        raise ArgumentError(f"cpu_time measures one thread's CPU time; it needs threads=1, not {threads}")
    labels = [case.label for case in layer_cases()]
    unknown = [label for label in layers or () if label not in labels]
    if unknown:
        raise ArgumentError(f"bench layers {unknown} are not layer rows; the rows are {labels}")
    CLOCK = time.process_time if cpu_time else time.perf_counter
    if section == "builds":
        print(f"# {cpu_model()}, torch {torch.__version__}; each model in a fresh cache and process", flush=True)
        return _saved(registry_build_records(), json_path)
    tuned = tune_malloc()
    if threads is not None:
        torch.set_num_threads(threads)
    started = time.perf_counter()
    build = "F kernel: no C++ compiler"
    if backend == "cpp":
        first, cached = build_seconds()
        build = f"F kernel: first build {first:.2f} s, cached load {cached:.3f} s"
    budget = 0.4 if quick else 1.5
    llc = last_level_cache_bytes()
    bandwidth = dram_bandwidth(budget)
    print(
        f"# {cpu_model()}, last-level cache {'unknown' if llc is None else f'{llc >> 20} MiB'}, "
        f"DRAM add bandwidth {bandwidth / 1e6:.1f} GB/s",
        flush=True,
    )
    print(
        f"# torch {torch.__version__}, {torch.get_num_threads()} threads, malloc tuned: {tuned}; {build}; "
        f"times ({'process CPU' if cpu_time else 'wall'}) are minima over repetitions",
        flush=True,
    )
    print(HEADER, flush=True)
    both = [FORWARD, BOTH]
    big, long, small = SHAPES
    records: list[Record] = []
    if section == "layers":
        records += layer_records(big, both, backend, budget, layers, rnns="lstm" if quick else "lstm+gru")
    elif section == "sru":
        records += layer_records(big, both, backend, budget, layers or ["SRU", "RRNN(F)"], rnns="lstm")
        records += sru_records(big, both, backend, budget)
    else:
        records += recurrence_records(big, AUTOMATA, both, backend, budget, "lstm" if quick else "lstm+gru", bandwidth)
        records += recurrence_records(long, ["B"], [BOTH], backend, budget, "" if quick else "lstm+gru", bandwidth)
        records += layer_records(big, both, backend, budget, layers, rnns="lstm" if quick else "lstm+gru")
    if not quick and section is None:
        records += recurrence_records(long, ["C", "F", "SoPa"], [BOTH], backend, budget, "", bandwidth)
        records += recurrence_records(long, AUTOMATA, [FORWARD], backend, budget, "lstm+gru", bandwidth)
        records += recurrence_records(small, AUTOMATA, both, backend, budget, "lstm+gru", bandwidth)
        records += sru_records(big, both, backend, budget)
    elapsed = time.perf_counter() - started
    print(f"# {len(records)} records in {elapsed:.1f} s", flush=True)
    return _saved(records, json_path)


def _saved(records: list[Record], json_path: Path | None) -> list[Record]:
    """``records``, also written as JSON to ``json_path`` (if given)."""
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    return records
