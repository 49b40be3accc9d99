"""The GPU check (``scripts/gpu_check.sh``, ``python -m kleene.gpu_check``): correctness, training and speed of the
generated kernels on one GPU, in one short run; on a machine without a GPU, its CPU parts.

1. **Correctness**: every backend (``torch``, ``triton``, ``cuda`` on a GPU; ``cpp``, and ``triton`` in its interpreter
   on a tiny case, on CPU) × every kernel kind -- a template (automaton F), an output map (RRNN(F)'s gated template),
   the chunked scan, the dense path (ISAN), SoPa's pattern bank (which must run as one kernel call per direction) --
   against the ``torch`` backend on the same device,
   float32 and float64, values and the gradients of a random projection, ragged lengths including 0, and an empty
   batch. The ``torch`` backend itself is compared with its float64 run on the CPU. Relative errors are the largest
   absolute difference over the largest magnitude; the limits are ``TOLERANCE``.
2. **Training**: one Adam step of every registry model (tiny sizes) on the device: finite loss, finite gradients,
   parameters that change; on a GPU also a 50-step ``kleene train rrnn-f --data sst2 --device cuda`` run.
3. **Speed** (GPU only; CUDA-event medians): template kernels B, C, F at (64, 1024, 1024) forward and
   forward+backward against the device-copy floor of their bytes; (1, 16384, 512) and (4, 16384, 512) sequential
   against chunked; the RRNN(F) layer against its projection GEMM and cuDNN ``nn.LSTM`` at (32, 256, 512),
   (64, 1024, 1024), (8, 2048, 1024); SoPa's bank (one kernel call per direction) against the same bank run one call
   per pattern length and against a cuDNN BiLSTM of (about) equal parameter count; each
   backend's first build (compile and first call) per template, and of SoPa's six-length bank.

Everything is printed and written as JSON (``gpu_check.json`` under ``--out``, default ``$OUT`` when set) with the
device's name, driver, torch and Triton versions, and what was skipped and why. The exit code is 1 when a
correctness row or a training step fails.
"""

# ruff: noqa: B023 -- every timing lambda below is called at once, inside the loop iteration that made it

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

Tensor = torch.Tensor
#: The largest relative error a correctness row may show, by dtype (float64: the issue's bound; float32: its
#: rounding over the longest sequences checked).
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-4}
#: Tiny model sizes per registry model (the rest take ``RATIONAL_SIZES``), as the test suite's.
RATIONAL_SIZES: dict[str, Any] = {"hidden_size": 4, "num_layers": 2, "embedding_dim": 8, "mlp_hidden": 4}
TINY_SIZES: dict[str, dict[str, Any]] = {
    "cnn": {"embedding_dim": 8, "channels": 4, "mlp_hidden": 4, "window": 2},
    "bilstm": {"embedding_dim": 8, "hidden_size": 4, "mlp_hidden": 4},
    "sopa": {"embedding_dim": 8, "patterns": "2-2_3-2", "mlp_hidden": 4},
    "lstm-lm": {"embedding_dim": 8, "hidden_size": 8},
    "regex": {"embedding_dim": 8, "rules": {"1": ["w2 .", "w3 w4*"], "2": ["[^w5] w6"]}},
}
VOCAB = 12
#: SoPa's pattern lengths in the check (those of the tiny registry model: their kernels are built once).
SOPA_PATTERNS = {2: 3, 3: 5}
#: The speed table's shapes (B, T, D): template kernels, long sequences, RRNN(F) layers, SoPa (B, T, E) and its
#: patterns (the lengths of ``SOPA_PATTERNS``: no further builds).
TEMPLATE_SHAPE = (64, 1024, 1024)
LONG_SHAPES = ((1, 16384, 512), (4, 16384, 512))
LAYER_SHAPES = ((32, 256, 512), (64, 1024, 1024), (8, 2048, 1024))
SOPA_SHAPE = (64, 256, 300)
SOPA_SPEED_PATTERNS = {2: 100, 3: 100}
#: The bank whose first build is timed: SoPa's default pattern lengths (the builds grow with the lengths, not the
#: counts).
SOPA_BUILD_PATTERNS = "2-4_3-4_4-4_5-4_6-4_7-4"


@dataclass
class CheckReport:
    device: str
    environment: dict[str, Any]
    correctness: list[dict[str, Any]] = field(default_factory=list)
    training: list[dict[str, Any]] = field(default_factory=list)
    speed: list[dict[str, Any]] = field(default_factory=list)
    builds: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def skip(self, what: str) -> None:
        self.skipped.append(what)
        print(f"skipped: {what}", flush=True)

    def fail(self, what: str) -> None:
        self.failures.append(what)
        print(f"FAILED: {what}", flush=True)


# -- environment ---------------------------------------------------------------------------------------------------
def environment(device: torch.device) -> dict[str, Any]:
    """Versions and the device's name and driver."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": None,
        "device": str(device),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if importlib.util.find_spec("triton") is not None:
        import triton

        env["triton"] = triton.__version__
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(gpu=props.name, multiprocessors=props.multi_processor_count, memory_gib=props.total_memory / 2**30)
        env["capability"] = f"{props.major}.{props.minor}"
        if shutil.which("nvidia-smi"):
            query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
            result = subprocess.run(query, capture_output=True, text=True, check=False)
            env["driver"] = result.stdout.strip().splitlines()[0] if result.returncode == 0 else None
    else:
        env["cpu"] = platform.processor() or platform.machine()
        env["threads"] = torch.get_num_threads()
    return env


# -- correctness ---------------------------------------------------------------------------------------------------
def relative_error(got: Tensor, want: Tensor) -> float:
    """max |got - want| / max |want| over the finite entries of ``want`` (inf where the finite pattern differs)."""
    if got.shape != want.shape:
        return float("inf")
    got, want = got.detach().cpu(), want.detach().cpu()  # the torch backend's reference is the CPU's float64 run
    finite = torch.isfinite(want)
    if not torch.equal(torch.isfinite(got), finite):
        return float("inf")
    if not bool(finite.any()):
        return 0.0
    g, w = got[finite].double(), want[finite].double()
    scale = float(w.abs().max())
    return float((g - w).abs().max()) / (scale if scale > 0 else 1.0)


#: What a kernel kind's run gives: its outputs and the gradients of a fixed projection of them.
Results = tuple[list[Tensor], list[Tensor]]


@dataclass(frozen=True)
class Kind:
    """A kernel kind: ``make(backend)`` builds its module, ``inputs(batch, device, dtype)`` draws inputs and
    ``run(module, inputs)`` gives its ``Results``."""

    name: str
    make: Callable[[str], nn.Module]
    inputs: Callable[[int, torch.device, torch.dtype], Tensor]
    run: Callable[[nn.Module, Tensor], Results]
    #: The reference module (default: ``make("torch")``).
    reference: Callable[[], nn.Module] | None = None


def _lengths(batch: int, steps: int) -> Tensor:
    """Ragged lengths: steps, 0, 1, steps // 2, ... (0 included from two sequences on)."""
    pattern = [steps, 0, 1, steps // 2]
    return torch.tensor([pattern[i % len(pattern)] for i in range(batch)], dtype=torch.int64)


def _projected(outputs: Sequence[Tensor], wrt: Sequence[Tensor]) -> Results:
    """The outputs and the gradients of a fixed random projection of them with respect to ``wrt``."""
    gen = torch.Generator().manual_seed(5)
    loss = outputs[0].new_zeros(())
    for out in outputs:
        weights = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out.device, out.dtype)
        loss = loss + (torch.where(torch.isfinite(out), out, torch.zeros_like(out)) * weights).sum()
    wanted = [w for w in wrt if w.requires_grad]
    values = [o.detach() for o in outputs]
    if not wanted or not loss.requires_grad:
        return values, []
    grads = torch.autograd.grad(loss, wanted, allow_unused=True, materialize_grads=True)
    return values, [g.detach() for g in grads]


def _run(module: nn.Module, x: Tensor) -> Results:
    """``module(x, lengths)`` (ragged lengths) and its gradients with respect to x and the parameters."""
    x = x.detach().requires_grad_()
    out = module(x, _lengths(x.shape[0], x.shape[1]).to(x.device))
    outputs = list(out) if isinstance(out, tuple) else [out]
    return _projected(outputs, [x, *module.parameters()])


def kernel_kinds(dim: int, steps: int = 9, chunked_steps: int = 300) -> list[Kind]:
    """The kernel kinds of the check (see the module docstring) at hidden size ``dim``; the chunked scan runs
    ``chunked_steps`` (several chunks of at least 64 steps)."""
    from kleene.automata.examples import paper_automaton_f
    from kleene.compile import Template, compile
    from kleene.nn.isan import ISANLayer
    from kleene.nn.rrnn import RRNNLayer
    from kleene.nn.sopa import SoftPatterns

    f = Template.from_wfsa(paper_automaton_f("real"))
    f_slots = compile(f, "real", dim, "torch").plan.num_slots

    def slots(count: int) -> Callable[[int, torch.device, torch.dtype], Tensor]:
        return lambda b, device, dtype: (
            torch.rand(b, count, f_slots, dim, dtype=torch.float64).mul(0.6).to(device, dtype)
        )

    def features(b: int, device: torch.device, dtype: torch.dtype) -> Tensor:
        return torch.randn(b, steps, dim, dtype=torch.float64).to(device, dtype)

    return [
        Kind("template F", lambda b: compile(f, "real", dim, b, scan="sequential"), slots(steps), _run),
        Kind("output map (RRNN(F) layer)", lambda b: RRNNLayer(dim, dim, "F", backend=b), features, _run),
        Kind(
            "chunked scan F",
            lambda b: compile(f, "real", dim, b, scan="chunked"),
            slots(chunked_steps),
            _run,
            reference=lambda: compile(f, "real", dim, "torch", scan="sequential"),  # the sequential recurrence
        ),
        Kind("dense (ISAN layer)", lambda b: ISANLayer(dim, 6, backend=b), features, _run),
        Kind("bank (SoPa patterns)", lambda b: SoftPatterns(dim, SOPA_PATTERNS, backend=b), features, _run_bank),
    ]


def _run_bank(module: nn.Module, x: Tensor) -> Results:
    """``_run`` of a SoPa bank, which must have run as one kernel call per direction (``CompiledBank``) unless its
    groups run on the torch backend.

    Raises:
        RuntimeError: the bank ran one kernel per pattern length instead.
    """
    results = _run(module, x)
    backends = {group.recurrence.backend for group in module.groups}  # type: ignore[union-attr]
    if backends != {"torch"} and not module.runs_one_call(x):  # type: ignore[operator]
        raise RuntimeError(f"the SoPa bank on {sorted(backends)} ran one kernel per pattern length, not one call")
    return results


def check_kind(
    report: CheckReport, kind: Kind, backend: str, device: torch.device, dtype: torch.dtype, batch: int
) -> None:
    """One correctness row: ``backend`` against the torch backend on ``device`` (the torch backend: against its
    float64 run on the CPU), and an empty batch."""
    torch.manual_seed(11)
    started = time.perf_counter()
    row: dict[str, Any] = {"kind": kind.name, "backend": backend, "dtype": str(dtype).removeprefix("torch.")}
    try:
        module = kind.make(backend).to(device, dtype)
        reference = kind.make("torch") if kind.reference is None else kind.reference()
        reference.load_state_dict(module.state_dict())
        ref_device, ref_dtype = (torch.device("cpu"), torch.float64) if backend == "torch" else (device, dtype)
        reference = reference.to(ref_device, ref_dtype)
        x = kind.inputs(batch, device, dtype)
        (values, grads), (want_values, want_grads) = (
            kind.run(module, x),
            kind.run(reference, x.to(ref_device, ref_dtype)),
        )
        _synchronize(device)
        if len(values) != len(want_values) or len(grads) != len(want_grads) or not grads:
            raise RuntimeError(
                f"{len(values)}+{len(grads)} results against the reference's {len(want_values)}+{len(want_grads)}"
            )
        row["value_error"] = max(relative_error(g, w) for g, w in zip(values, want_values))
        row["grad_error"] = max(relative_error(g, w) for g, w in zip(grads, want_grads))
        empty, _ = kind.run(module, kind.inputs(0, device, dtype))
        row["empty_batch"] = all(t.shape[0] == 0 for t in empty)
        row["seconds"] = time.perf_counter() - started
        limit = TOLERANCE[dtype]
        row["passed"] = bool(row["empty_batch"] and row["value_error"] <= limit and row["grad_error"] <= limit)
    except Exception as error:  # noqa: BLE001 - a row that cannot run is a failed row, reported with its reason
        row.update(passed=False, error=f"{type(error).__name__}: {error}"[:400], seconds=time.perf_counter() - started)
    report.correctness.append(row)
    status = "ok  " if row["passed"] else "FAIL"
    detail = row.get("error") or f"values {row['value_error']:.2e}  grads {row['grad_error']:.2e}"
    print(f"{status} {row['kind']:28s} {backend:7s} {row['dtype']:8s} {detail}  ({row['seconds']:.1f} s)", flush=True)
    if not row["passed"]:
        report.fail(f"correctness: {row['kind']} on {backend} in {row['dtype']}")


# -- training ------------------------------------------------------------------------------------------------------
def tiny_model(name: str) -> nn.Module:
    """A small model of each registered name (tiny sizes; the regex model with rules over ``VOCAB`` words)."""
    from kleene.nn import build_model

    kwargs: dict[str, Any] = {"vocab_size": VOCAB, **TINY_SIZES.get(name, RATIONAL_SIZES)}
    if name == "regex":
        kwargs["vocab"] = ["<pad>", "<unk>", *(f"w{i}" for i in range(2, VOCAB))]
    if not name.endswith("-lm"):
        kwargs["num_classes"] = 3
    return build_model(name, **kwargs)


def training_step(report: CheckReport, name: str, device: torch.device) -> None:
    """One Adam step of registry model ``name`` on ``device``: finite loss and gradients, parameters that change."""
    torch.manual_seed(3)
    started = time.perf_counter()
    row: dict[str, Any] = {"model": name, "device": str(device)}
    try:
        model = tiny_model(name).to(device).train()
        tokens = torch.randint(2, VOCAB, (4, 7), device=device)
        lengths = torch.tensor([7, 3, 1, 5], device=device)
        before = {k: p.detach().clone() for k, p in model.named_parameters() if p.requires_grad}
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        logits = model(tokens, lengths)
        if getattr(model, "task", None) == "language_model":
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens.roll(-1, 1).reshape(-1))
        else:
            loss = nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2, 1], device=device))
        optimizer.zero_grad()
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        optimizer.step()
        changed = [k for k, p in model.named_parameters() if k in before and not torch.equal(before[k], p.detach())]
        row.update(
            loss=float(loss.detach()),
            finite_loss=bool(torch.isfinite(loss)),
            finite_grads=bool(grads) and all(bool(torch.isfinite(g).all()) for g in grads),
            changed=f"{len(changed)}/{len(before)}",
            seconds=time.perf_counter() - started,
        )
        row["passed"] = row["finite_loss"] and row["finite_grads"] and bool(changed)
    except Exception as error:  # noqa: BLE001 - reported as a failed step with its reason
        row.update(passed=False, error=f"{type(error).__name__}: {error}"[:400], seconds=time.perf_counter() - started)
    report.training.append(row)
    detail = row.get("error") or f"loss {row['loss']:.4f}, parameters changed {row['changed']}"
    print(f"{'ok  ' if row['passed'] else 'FAIL'} train step {name:15s} {detail}  ({row['seconds']:.1f} s)", flush=True)
    if not row["passed"]:
        report.fail(f"training step: {name}")


def cli_training_run(report: CheckReport, device: torch.device, steps: int, out: Path) -> None:
    """``kleene train rrnn-f --data sst2 --max-steps STEPS --device DEVICE`` in a child process."""
    command = [sys.executable, "-m", "kleene.cli", "train", "rrnn-f", "--data", "sst2", "--max-steps", str(steps)]
    command += ["--device", str(device), "--pretrained", "none", "--no-progress", "--json", "--out", str(out)]
    command += ["--set", "hidden_size=64", "--eval-every", str(steps)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    row: dict[str, Any] = {"model": f"kleene train rrnn-f ({steps} steps)", "device": str(device)}
    row["seconds"] = time.perf_counter() - started
    row["passed"] = result.returncode == 0
    if result.returncode == 0:
        metrics = json.loads(result.stdout.strip().splitlines()[-1])
        row.update({k: metrics[k] for k in ("steps", "dev_accuracy", "train_tokens_per_s") if k in metrics})
    else:
        row["error"] = (result.stderr.strip().splitlines() or ["(no output)"])[-1][:400]
    report.training.append(row)
    print(f"{'ok  ' if row['passed'] else 'FAIL'} {row['model']}: {row.get('error') or row}", flush=True)
    if not row["passed"]:
        report.fail(row["model"])


# -- speed ---------------------------------------------------------------------------------------------------------
def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_time(fn: Callable[[], object], device: torch.device, repeats: int = 10) -> float:
    """The median of ``repeats`` timings of ``fn`` in milliseconds after one warm-up call: CUDA events on a GPU,
    the wall clock on the CPU."""
    fn()
    _synchronize(device)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            fn()
            times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times)


def copy_bandwidth(device: torch.device, elements: int = 2**28) -> float:
    """Bytes per millisecond of a device-to-device copy of ``elements`` float32 (1 GiB), counting bytes read and
    written."""
    src = torch.empty(elements, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    ms = device_time(lambda: dst.copy_(src), device)
    return 2 * src.numel() * 4 / ms


def _forward_backward(fn: Callable[[Tensor], Tensor], inputs: Tensor, module: nn.Module) -> Callable[[], object]:
    """A call of ``fn`` on ``inputs`` and the gradients of its sum with respect to them and ``module``'s parameters."""
    x = inputs.detach().requires_grad_()
    wrt = [x, *[p for p in module.parameters() if p.requires_grad]]
    return lambda: torch.autograd.grad(fn(x).sum(), wrt, allow_unused=True)


def speed_templates(report: CheckReport, device: torch.device, backends: list[str], bandwidth: float) -> None:
    """Template kernels B, C, F at (64, 1024, 1024), forward and forward+backward, against the copy floor."""
    from kleene.compile import compile
    from kleene.nn.rrnn import rrnn_template

    b, t, d = TEMPLATE_SHAPE
    for kind in "BCF":
        for backend in backends:
            started = time.perf_counter()
            module = compile(rrnn_template(kind), "real", d, backend, scan="sequential").to(device)
            s = module.plan.num_slots
            slots = torch.rand(b, t, s, d, device=device) * 0.6
            with torch.no_grad():
                module(slots)
            _synchronize(device)
            build = time.perf_counter() - started
            report.builds.append({"template": kind, "backend": backend, "first_call_s": build})
            with torch.no_grad():
                fwd = device_time(lambda: module(slots), device)
            x = slots.detach().requires_grad_()
            both = device_time(lambda: torch.autograd.grad(module(x)[0].sum(), [x]), device)
            slot_bytes, out_bytes = slots.numel() * 4, b * t * d * 4
            floor_fwd = (slot_bytes + out_bytes) / bandwidth
            floor_both = (2 * slot_bytes + 2 * out_bytes + slot_bytes) / bandwidth  # + grad_out read, grad_slots write
            row = {
                "table": "template (64,1024,1024)",
                "template": kind,
                "backend": backend,
                "forward_ms": fwd,
                "forward_floor_ratio": fwd / floor_fwd,
                "forward_backward_ms": both,
                "forward_backward_floor_ratio": both / floor_both,
            }
            report.speed.append(row)
            print(
                f"speed {kind} {backend:6s} fwd {fwd:8.2f} ms ({row['forward_floor_ratio']:.2f}x floor)  "
                f"fwd+bwd {both:8.2f} ms ({row['forward_backward_floor_ratio']:.2f}x floor)  first call {build:.1f} s",
                flush=True,
            )
            if device.type == "cuda":
                torch.cuda.empty_cache()


def speed_long(report: CheckReport, device: torch.device, backends: list[str]) -> None:
    """Automaton F at ``LONG_SHAPES`` ((1, 16384, 512) and (4, 16384, 512)): the sequential kernel against the
    chunked scan, forward and forward+backward."""
    from kleene.compile import compile
    from kleene.nn.rrnn import rrnn_template

    for b, t, d in LONG_SHAPES:
        for backend in backends:
            times = {}
            for scan in ("sequential", "chunked"):
                module = compile(rrnn_template("F"), "real", d, backend, scan=scan).to(device)  # type: ignore[arg-type]
                slots = torch.rand(b, t, module.plan.num_slots, d, device=device) * 0.6
                with torch.no_grad():
                    times[scan] = device_time(lambda: module(slots), device, repeats=5)
                x = slots.detach().requires_grad_()
                times[f"{scan}_fwd_bwd"] = device_time(
                    lambda: torch.autograd.grad(module(x)[0].sum(), [x]), device, repeats=5
                )
            row = {
                "table": "long sequences",
                "shape": [b, t, d],
                "backend": backend,
                **{f"{k}_ms": v for k, v in times.items()},
            }
            row["chunked_speedup"] = times["sequential"] / times["chunked"]
            row["chunked_fwd_bwd_speedup"] = times["sequential_fwd_bwd"] / times["chunked_fwd_bwd"]
            report.speed.append(row)
            print(
                f"speed F {(b, t, d)} {backend:6s} sequential {times['sequential']:.2f} ms, chunked "
                f"{times['chunked']:.2f} ms ({row['chunked_speedup']:.2f}x); forward+backward "
                f"{row['chunked_fwd_bwd_speedup']:.2f}x",
                flush=True,
            )


def speed_layers(report: CheckReport, device: torch.device, backends: list[str]) -> None:
    """RRNN(F) layers against their projection GEMM and cuDNN nn.LSTM, forward+backward; SoPa against a BiLSTM."""
    from kleene.nn.rrnn import RRNNLayer
    from kleene.nn.sopa import SoftPatterns

    for b, t, d in LAYER_SHAPES:
        x = torch.randn(b, t, d, device=device)
        lengths = torch.full((b,), t, dtype=torch.int64, device=device)
        lstm = nn.LSTM(d, d, batch_first=True).to(device)
        lstm_ms = device_time(_forward_backward(lambda v: lstm(v)[0], x, lstm), device, repeats=5)
        for backend in backends:
            layer = RRNNLayer(d, d, "F", backend=backend).to(device)
            layer_ms = device_time(_forward_backward(lambda v: layer(v, lengths)[0], x, layer), device, repeats=5)
            gemm_ms = device_time(_forward_backward(lambda v: layer.slots(v)[0], x, layer), device, repeats=5)
            row = {
                "table": "RRNN(F) layer",
                "shape": [b, t, d],
                "backend": backend,
                "layer_ms": layer_ms,
                "gemm_ms": gemm_ms,
                "lstm_ms": lstm_ms,
                "layer_over_gemm": layer_ms / gemm_ms,
                "lstm_over_layer": lstm_ms / layer_ms,
            }
            report.speed.append(row)
            print(
                f"speed RRNN(F) {(b, t, d)} {backend:6s} {layer_ms:.2f} ms = {row['layer_over_gemm']:.2f}x its GEMM; "
                f"LSTM {lstm_ms:.2f} ms ({row['lstm_over_layer']:.2f}x slower)",
                flush=True,
            )
    b, t, e = SOPA_SHAPE
    x = torch.randn(b, t, e, device=device)
    lengths = torch.full((b,), t, dtype=torch.int64, device=device)
    for backend in backends:
        bank = SoftPatterns(e, SOPA_SPEED_PATTERNS, backend=backend).to(device)
        count = sum(p.numel() for p in bank.parameters())
        hidden = _bilstm_hidden(e, count)
        bilstm = nn.LSTM(e, hidden, batch_first=True, bidirectional=True).to(device)
        sopa_ms = device_time(_forward_backward(lambda v: bank(v, lengths), x, bank), device, repeats=5)
        one_call = bank._bank is not None  # the whole bank in one kernel call per direction (CompiledBank)
        bank.one_call = False  # the same bank, one kernel call per pattern length
        per_length_ms = device_time(_forward_backward(lambda v: bank(v, lengths), x, bank), device, repeats=5)
        bank.one_call = True
        lstm_ms = device_time(_forward_backward(lambda v: bilstm(v)[0], x, bilstm), device, repeats=5)
        row = {
            "table": "SoPa vs BiLSTM",
            "shape": [b, t, e],
            "backend": backend,
            "sopa_ms": sopa_ms,
            "one_call": one_call,
            "per_length_ms": per_length_ms,
            "one_call_speedup": per_length_ms / sopa_ms,
            "bilstm_ms": lstm_ms,
            "sopa_parameters": count,
            "bilstm_hidden": hidden,
            "bilstm_parameters": sum(p.numel() for p in bilstm.parameters()),
        }
        report.speed.append(row)
        print(
            f"speed SoPa {backend:6s} {sopa_ms:.2f} ms ({'one call' if one_call else 'NOT one call'}; a call per "
            f"pattern length {per_length_ms:.2f} ms, {row['one_call_speedup']:.2f}x) against BiLSTM({hidden}) "
            f"{lstm_ms:.2f} ms",
            flush=True,
        )


def build_times(report: CheckReport, device: torch.device) -> None:
    """First builds of one template (RRNN(C) in log space, used nowhere else here) into an empty kernel cache: the
    cuda backend through nvcc (``build_cuda_library``) and through a torch extension (``load_inline``), and Triton's
    compile at the first launch."""
    from kleene.compile import compile
    from kleene.compile.codegen.cuda import generate_cuda, generate_cuda_bindings
    from kleene.compile.runtime import gpu
    from kleene.nn.rrnn import rrnn_template

    template = rrnn_template("C")
    previous = os.environ.get("KLEENE_CACHE")
    os.environ["KLEENE_CACHE"] = tempfile.mkdtemp(prefix="kleene-build-times-")
    try:
        module = compile(template, "log", 64, "torch")
        source = generate_cuda(module.plan)
        declarations, functions = generate_cuda_bindings()
        ways: list[tuple[str, Callable[[], object]]] = []
        arch = gpu.device_arch() if device.type == "cuda" else "sm_80"
        if gpu.find_nvcc() is not None:
            ways.append(("cuda (nvcc library)", lambda: gpu.build_cuda_library(source, declarations, arch)))
        if "cuda" in gpu_backends() and device.type == "cuda":
            name = f"kleene_cuda_timing_{os.getpid()}"
            os.environ["KLEENE_CUDA_BUILD"] = "torch"
            ways.append(("cuda (torch extension)", lambda: gpu.cuda_launchers(source, declarations, functions, name)))
        if "triton" in gpu_backends() and device.type == "cuda":
            slots = torch.rand(2, 8, module.plan.num_slots, 64, device=device)
            ways.append(("triton (first launch)", lambda: compile(template, "log", 64, "triton").to(device)(slots)))
        for label, build in ways:
            started = time.perf_counter()
            build()
            _synchronize(device)
            seconds = time.perf_counter() - started
            report.builds.append({"template": "RRNN(C) log", "way": label, "first_build_s": seconds})
            print(f"build RRNN(C) log: {label} {seconds:.1f} s", flush=True)
    except Exception as error:  # noqa: BLE001 - a timing that cannot run is reported, the check goes on
        report.fail(f"build times: {type(error).__name__}: {error}"[:400])
    finally:
        os.environ.pop("KLEENE_CUDA_BUILD", None)
        if previous is None:
            os.environ.pop("KLEENE_CACHE", None)
        else:
            os.environ["KLEENE_CACHE"] = previous


def bank_build_times(report: CheckReport, device: torch.device, backends: list[str]) -> None:
    """The first forward+backward of SoPa's default bank (six pattern lengths, ``SOPA_BUILD_PATTERNS``) on each GPU
    backend into an empty kernel cache: the builds it needs (the bank's kernel, at its first launch: nvcc for cuda,
    Triton's compile for triton) and the call."""
    from kleene.nn.sopa import SoftPatterns

    previous = os.environ.get("KLEENE_CACHE")
    os.environ["KLEENE_CACHE"] = tempfile.mkdtemp(prefix="kleene-bank-build-times-")
    try:
        x = torch.randn(2, 8, 8, device=device)
        lengths = torch.tensor([8, 3], device=device)
        for backend in backends:
            started = time.perf_counter()
            bank = SoftPatterns(8, SOPA_BUILD_PATTERNS, backend=backend).to(device)
            _forward_backward(lambda v: bank(v, lengths), x, bank)()
            _synchronize(device)
            seconds = time.perf_counter() - started
            row = {"template": f"SoPa bank {SOPA_BUILD_PATTERNS}", "way": f"{backend} (construction, first call)",
                   "first_build_s": seconds, "one_call": bank._bank is not None}
            report.builds.append(row)
            print(f"build SoPa bank: {backend} {seconds:.1f} s (one call: {row['one_call']})", flush=True)
    except Exception as error:  # noqa: BLE001 - a timing that cannot run is reported, the check goes on
        report.fail(f"bank build times: {type(error).__name__}: {error}"[:400])
    finally:
        if previous is None:
            os.environ.pop("KLEENE_CACHE", None)
        else:
            os.environ["KLEENE_CACHE"] = previous


def auto_verdict(report: CheckReport) -> dict[str, Any] | None:
    """What the measurements say about ``backend="auto"`` trying triton before cuda (docs/gpu.md): the geometric
    mean over the template rows of triton's forward+backward time over cuda's, and both first builds."""
    rows = [r for r in report.speed if r.get("table") == "template (64,1024,1024)"]
    times = {(r["template"], r["backend"]): r["forward_backward_ms"] for r in rows}
    pairs = [
        (times[(k, "triton")], times[(k, "cuda")]) for k in "BCF" if (k, "triton") in times and (k, "cuda") in times
    ]
    if not pairs:
        return None
    ratio = statistics.geometric_mean(t / c for t, c in pairs)
    builds = {b["way"]: b["first_build_s"] for b in report.builds if "way" in b}
    verdict = {"triton_over_cuda_forward_backward": ratio, "first_builds_s": builds}
    verdict["rule_holds"] = ratio <= 1.1  # triton first: as fast (within 10%) and cheaper to build
    report.environment["auto_verdict"] = verdict
    print(
        f"auto: triton/cuda forward+backward {ratio:.2f} (geometric mean over B, C, F); first builds {builds}; "
        f"triton-first {'holds' if verdict['rule_holds'] else 'does NOT hold: revisit AUTO_ORDER'}",
        flush=True,
    )
    return verdict


def _bilstm_hidden(inputs: int, parameters: int) -> int:
    """The hidden size h whose bidirectional nn.LSTM has about ``parameters`` parameters: 8h(inputs + h + 2)."""
    h = 1
    while 8 * (h + 1) * (inputs + h + 3) <= parameters:
        h += 1
    return h


# -- the check -----------------------------------------------------------------------------------------------------
def gpu_backends() -> list[str]:
    """The GPU backends registered here (triton when installed, cuda with a CUDA build of torch)."""
    from kleene.compile.module import backends

    return [b for b in ("triton", "cuda") if b in backends()]


def _write(report: CheckReport, out_dir: Path) -> Path:
    """Write ``out_dir / "gpu_check.json"`` (after every part, so a run stopped early still leaves its rows)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "gpu_check.json"
    payload = {
        k: getattr(report, k)
        for k in ("device", "environment", "correctness", "training", "speed", "builds", "skipped", "failures")
    }
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")
    return path


def _speed_part(report: CheckReport, name: str, part: Callable[[], object], deadline: float) -> None:
    """Run one part of the speed table unless the time budget is spent; an error is reported, the check goes on."""
    if time.perf_counter() > deadline:
        report.skip(f"speed: {name} (the --budget-s time budget was spent)")
        return
    try:
        part()
    except Exception as error:  # noqa: BLE001 - a speed part that breaks is a failure with its reason, not a stop
        report.fail(f"speed: {name}: {type(error).__name__}: {error}"[:400])


def run_check(
    out_dir: Path, *, speed: bool = True, train_steps: int = 50, interpreter: bool = True, budget_s: float = 420.0
) -> CheckReport:
    """Run the check (see the module docstring) and write ``out_dir / "gpu_check.json"``; a speed part that would
    start after ``budget_s`` seconds is skipped (and said so)."""
    deadline = time.perf_counter() + budget_s
    gpu = torch.cuda.is_available()
    device = torch.device("cuda" if gpu else "cpu")
    report = CheckReport(str(device), environment(device))
    print(json.dumps(report.environment), flush=True)
    kinds = kernel_kinds(dim=5)
    if gpu:
        backends = ["torch", *gpu_backends()]
        for missing in sorted({"triton", "cuda"} - set(backends)):
            report.skip(f"the {missing} backend: not available in this torch/Python ({report.environment})")
    else:
        backends = ["torch", "cpp"]
        report.skip("the cuda backend and every GPU row: no GPU here")
    for kind in kinds:
        for backend in backends:
            for dtype in (torch.float64, torch.float32):
                check_kind(report, kind, backend, device, dtype, batch=4)
    if not gpu:
        if interpreter and importlib.util.find_spec("triton") is not None and os.environ.get("TRITON_INTERPRET") == "1":
            check_kind(report, kinds[0], "triton", device, torch.float64, batch=2)  # the interpreter: one tiny case
        else:
            report.skip("triton in its interpreter (run with TRITON_INTERPRET=1 and triton installed)")
    _write(report, out_dir)
    from kleene.nn import registered_models

    report.environment["models"] = registered_models()
    for name in registered_models():
        training_step(report, name, device)
    if gpu and train_steps:
        cli_training_run(report, device, train_steps, Path(tempfile.mkdtemp(prefix="kleene-gpu-check-")))
    elif not gpu:
        report.skip(f"the {train_steps}-step `kleene train --device cuda` run: no GPU")
    _write(report, out_dir)
    if gpu and speed:
        gpu_list = gpu_backends()
        bandwidth = copy_bandwidth(device)
        report.environment["copy_bandwidth_tb_s"] = bandwidth * 1e3 / 1e12
        parts: list[tuple[str, Callable[[], object]]] = [
            ("first builds", lambda: build_times(report, device)),
            ("template kernels", lambda: speed_templates(report, device, gpu_list, bandwidth)),
            ("long sequences", lambda: speed_long(report, device, gpu_list)),
            ("layers", lambda: speed_layers(report, device, gpu_list)),
            ("SoPa bank first builds", lambda: bank_build_times(report, device, gpu_list)),
        ]
        for name, part in parts:
            _speed_part(report, name, part, deadline)
            _write(report, out_dir)
        auto_verdict(report)  # (from the template rows: no GPU time)
    elif not gpu:
        report.skip("the speed table: no GPU")
    path = _write(report, out_dir)
    passed = sum(r["passed"] for r in report.correctness) + sum(r["passed"] for r in report.training)
    total = len(report.correctness) + len(report.training)
    print(f"gpu check on {device}: {passed}/{total} rows passed, {len(report.skipped)} parts skipped; wrote {path}")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kleene.gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-check"))
    parser.add_argument("--no-speed", action="store_true", help="skip the speed table")
    parser.add_argument("--train-steps", type=int, default=50, help="steps of the `kleene train --device cuda` run")
    parser.add_argument(
        "--budget-s", type=float, default=420.0, help="skip the speed parts that would start after this many seconds"
    )
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() and "TRITON_INTERPRET" not in os.environ:
        os.environ["TRITON_INTERPRET"] = "1"  # (before any generated Triton module loads): one tiny interpreted case
    report = run_check(args.out, speed=not args.no_speed, train_steps=args.train_steps, budget_s=args.budget_s)
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
