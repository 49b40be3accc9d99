"""``kleene bench [--quick] [--json PATH]``: generated kernels against plain PyTorch, side by side.

The timed closures are built and called within one loop iteration, so they read the
loop's current variables on purpose (ruff B023 is silenced for that reason).

Every ratio in a record is measured in the same run on the same inputs:

- ``kernel_ms``: the compiled module (backend ``cpp``, or ``torch`` where no compiler works);
- ``naive_ms``: the best plain PyTorch loop for that automaton (hand-written updates over
  ``x.unbind(1)`` into a preallocated output; SoPa: all states of a pattern as one tensor);
- ``floor_ms``: the memory-bandwidth floor: the bytes the recurrence must move (forward: read
  every slot, write every output; forward+backward adds reading the slots and the output
  gradient and writing the slot gradients) divided by the bandwidth of a plain elementwise op
  (``torch.add(a, b, out=c)``) measured in the same run on buffers of the same total size;
- ``lstm_ms``/``gru_ms``: ``nn.LSTM``/``nn.GRU`` with hidden size d on (B, T, d) inputs;
- ``gemm_ms`` (layer rows): the layer's own projection ``Linear(d, S·d)``;
- ``sru_ms``: the ``sru`` package's CPU SRU cell, where it imports.
"""

# ruff: noqa: B023
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

Tensor = torch.Tensor
SHAPES_FULL = [(32, 256, 512), (1, 4096, 512), (64, 64, 256)]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark generated recurrence kernels against plain PyTorch, LSTM/GRU and the bandwidth floor",
        description="Time the generated kernels of automata B, C, F and a SoPa bank, and an RRNN(F) layer, "
        "against plain PyTorch loops, nn.LSTM/nn.GRU and a memory-bandwidth floor; print a table.",
    )
    parser.add_argument("--quick", action="store_true", help="only (32, 256, 512) and B at (1, 4096, 512)")
    parser.add_argument("--json", type=Path, default=None, help="also write the records as JSON to PATH")
    parser.add_argument("--backend", default="cpp", help="backend to time (default: %(default)s)")
    parser.set_defaults(handler=run)


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------
def _time_ms(fn: Callable[[], Any], budget_s: float) -> float:
    """Median wall time of ``fn`` in ms, after one warm-up call, within about ``budget_s``."""
    fn()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 25):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _with_backward(make_loss: Callable[[], Tensor]) -> Callable[[], None]:
    def run() -> None:
        make_loss().backward()

    return run


# --------------------------------------------------------------------------------------------
# the automata and their plain PyTorch loops (real semiring; SoPa in max-times log space)
# --------------------------------------------------------------------------------------------
def _naive_b(x: Tensor) -> Tensor:
    mu, phi = x.unbind(2)
    out = torch.empty_like(mu)
    c = torch.zeros_like(mu[:, 0])
    for t, (m, f) in enumerate(zip(mu.unbind(1), phi.unbind(1))):
        c = torch.addcmul(m, c, f)
        out[:, t] = c
    return out


def _naive_c(x: Tensor) -> Tensor:
    mu1, phi1, mu2, phi2 = (s.unbind(1) for s in x.unbind(2))
    out = torch.empty_like(x[:, :, 0])
    c1 = torch.zeros_like(x[:, 0, 0])
    c2 = torch.zeros_like(c1)
    for t in range(x.shape[1]):
        c2 = torch.addcmul(c2 * phi2[t], c1, mu2[t])
        c1 = torch.addcmul(mu1[t], c1, phi1[t])
        out[:, t] = c2
    return out


def _naive_f(x: Tensor, gamma: Tensor, rho1: Tensor, rho2: Tensor) -> Tensor:
    mu1, phi1, mu2, phi2 = (s.unbind(1) for s in x.unbind(2))
    out = torch.empty_like(x[:, :, 0])
    c1 = torch.zeros_like(x[:, 0, 0])
    c2 = torch.zeros_like(c1)
    for t in range(x.shape[1]):
        c2 = torch.addcmul(c2 * phi2[t], c1 + gamma, mu2[t])
        c1 = torch.addcmul(mu1[t], c1, phi1[t])
        out[:, t] = rho1 * c1 + rho2 * c2
    return out


def _naive_sopa(x: Tensor, eps: Tensor) -> Tensor:
    """SoPa's document score (max-times in log space, restart, one epsilon), states as one tensor.

    x: (B, T, 2L-1, d) with slots mu0..mu{L-2}, phi0..phi{L-1} in ``sopa_pattern`` order; eps: (L-1, d).
    """
    b, _, _, d = x.shape
    length = eps.shape[0] + 1
    mu_index = [2 * i for i in range(length - 1)]
    phi_index = [2 * i + 1 for i in range(length - 1)] + [2 * length - 2]
    mu_all, phi_all = x[:, :, mu_index], x[:, :, phi_index]
    neg = torch.full((b, 1, d), -math.inf, dtype=x.dtype)
    start = torch.cat([torch.zeros((b, 1, d), dtype=x.dtype), neg.expand(b, length - 1, d)], 1)
    start = _eps_step(start, eps, neg)
    h = torch.full((b, length, d), -math.inf, dtype=x.dtype)
    best = torch.full((b, d), -math.inf, dtype=x.dtype)
    for mu, phi in zip(mu_all.unbind(1), phi_all.unbind(1)):
        h = torch.maximum(h, start)
        moved = torch.cat([neg, h[:, :-1] + mu], 1)
        h = _eps_step(torch.maximum(h + phi, moved), eps, neg)
        best = torch.maximum(best, h[:, -1])
    return best


def _eps_step(h: Tensor, eps: Tensor, neg: Tensor) -> Tensor:
    return torch.maximum(h, torch.cat([neg, h[:, :-1] + eps], 1))


# --------------------------------------------------------------------------------------------
# records
# --------------------------------------------------------------------------------------------
def _automata() -> dict[str, Any]:
    from kleene.automata.examples import paper_automaton_b, paper_automaton_c, paper_automaton_f
    from kleene.compile import Template

    return {
        "B": Template.from_wfsa(paper_automaton_b()),
        "C": Template.from_wfsa(paper_automaton_c()),
        "F": Template.from_wfsa(paper_automaton_f()),
    }


def _bandwidth_gb_s(num_bytes: int, budget: float) -> float:
    """Bytes per second of ``torch.add(a, b, out=c)`` on float32 buffers moving ``num_bytes`` in total."""
    n = max(1, num_bytes // 12)
    a, b, c = torch.rand(n), torch.rand(n), torch.empty(n)
    ms = _time_ms(lambda: torch.add(a, b, out=c), budget)
    return 12 * n / (ms / 1000) / 1e9


def _floor_ms(read: int, written: int, budget: float) -> float:
    """The time a plain elementwise op needs to read ``read`` and write ``written`` float32 values."""
    num_bytes = 4 * (read + written)
    return num_bytes / (_bandwidth_gb_s(num_bytes, budget) * 1e9) * 1000


def _recurrence_records(
    shape: tuple[int, int, int], names: list[str], backend: str, passes: list[str], budget: float, with_rnns: bool
) -> list[dict[str, Any]]:
    from kleene.compile import compile, sopa_bank

    b, t, d = shape
    gen = torch.Generator().manual_seed(0)
    records = []
    rnn_inputs = torch.randn(b, t, d, generator=gen)
    lstm, gru = nn.LSTM(d, d, batch_first=True), nn.GRU(d, d, batch_first=True)
    templates = _automata()
    for name in names:
        if name == "SoPa":
            bank = sopa_bank()
            widths = [d // len(bank) + (1 if i < d % len(bank) else 0) for i in range(len(bank))]
            modules = [compile(p, "max-times", w, backend, restart=True, output="sum") for p, w in zip(bank, widths)]
            slots = [torch.rand(b, t, len(p.slots), w, generator=gen).log() for p, w in zip(bank, widths)]
            out_shape: tuple[int, ...] = (b, d)

            def naive(xs: list[Tensor]) -> list[Tensor]:
                return [_naive_sopa(x, m.constants) for x, m in zip(xs, modules)]
        else:
            module = compile(templates[name], "real", d, backend)
            modules = [module]
            slots = [torch.rand(b, t, len(templates[name].slots), d, generator=gen)]
            out_shape = (b, t, d)
            if name == "B":

                def naive(xs: list[Tensor]) -> list[Tensor]:
                    return [_naive_b(xs[0])]
            elif name == "C":

                def naive(xs: list[Tensor]) -> list[Tensor]:
                    return [_naive_c(xs[0])]
            else:

                def naive(xs: list[Tensor]) -> list[Tensor]:
                    g, r1, r2 = modules[0].constants
                    return [_naive_f(xs[0], g, r1, r2)]

        for pass_name in passes:
            backward = pass_name == "forward+backward"
            leaves = [s.clone().requires_grad_(backward) for s in slots]

            def kernel_outputs() -> list[Tensor]:
                return [m(x)[0] for m, x in zip(modules, leaves)]

            if backward:
                kernel = _with_backward(lambda: sum(o.sum() for o in kernel_outputs()))  # type: ignore[arg-type, return-value]
                baseline = _with_backward(lambda: sum(o.sum() for o in naive(leaves)))  # type: ignore[arg-type, return-value]
                lstm_fn = _with_backward(lambda: lstm(rnn_inputs.requires_grad_())[0].sum())
                gru_fn = _with_backward(lambda: gru(rnn_inputs.requires_grad_())[0].sum())
            else:

                def kernel() -> None:
                    with torch.no_grad():
                        kernel_outputs()

                def baseline() -> None:
                    with torch.no_grad():
                        naive(leaves)

                def lstm_fn() -> None:
                    with torch.no_grad():
                        lstm(rnn_inputs)

                def gru_fn() -> None:
                    with torch.no_grad():
                        gru(rnn_inputs)

            read = sum(x.numel() for x in slots)
            written = b * t * d if out_shape == (b, t, d) else b * d
            # backward: read the slots and the output gradient, write the slot gradients
            moved = (read + written + read, read) if backward else (read, written)
            floor_ms = _floor_ms(moved[0], moved[1] + (written if backward else 0), budget)
            record = {
                "automaton": name,
                "shape": [b, t, d],
                "pass": pass_name,
                "backend": modules[0].backend,
                "kernel_ms": _time_ms(kernel, budget),
                "naive_ms": _time_ms(baseline, budget),
                "floor_ms": floor_ms,
            }
            if with_rnns:
                record["lstm_ms"] = _time_ms(lstm_fn, budget)
                record["gru_ms"] = _time_ms(gru_fn, budget)
            records.append(record)
            print(_row(record), flush=True)
    return records


def _layer_records(shape: tuple[int, int, int], backend: str, passes: list[str], budget: float) -> list[dict[str, Any]]:
    """An RRNN(F)-style layer: projection to 4 slots per dimension (sigmoid gates, eq. 20), then F."""
    from kleene.compile import compile

    b, t, d = shape
    template = _automata()["F"]
    projection = nn.Linear(d, 4 * d)
    recurrence = compile(template, "real", d, backend)
    lstm = nn.LSTM(d, d, batch_first=True)
    x = torch.randn(b, t, d, generator=torch.Generator().manual_seed(1))
    records = []

    def layer() -> Tensor:
        u = projection(x).view(b, t, 4, d)
        f = torch.sigmoid(u[:, :, 1::2])
        g = torch.tanh(u[:, :, 0::2]) * (1 - f)
        slots = torch.stack([g[:, :, 0], f[:, :, 0], g[:, :, 1], f[:, :, 1]], 2)
        return recurrence(slots)[0]

    for pass_name in passes:
        backward = pass_name == "forward+backward"
        x.requires_grad_(backward)
        if backward:
            kernel = _with_backward(lambda: layer().sum())
            gemm = _with_backward(lambda: projection(x).sum())
            lstm_fn = _with_backward(lambda: lstm(x)[0].sum())
        else:

            def kernel() -> None:
                with torch.no_grad():
                    layer()

            def gemm() -> None:
                with torch.no_grad():
                    projection(x)

            def lstm_fn() -> None:
                with torch.no_grad():
                    lstm(x)

        record = {
            "automaton": "layer RRNN(F)",
            "shape": [b, t, d],
            "pass": pass_name,
            "backend": recurrence.backend,
            "kernel_ms": _time_ms(kernel, budget),
            "gemm_ms": _time_ms(gemm, budget),
            "lstm_ms": _time_ms(lstm_fn, budget),
            "naive_ms": None,
            "floor_ms": None,
        }
        records.append(record)
        print(_row(record), flush=True)
    return records


def _sru_records(shape: tuple[int, int, int], backend: str, passes: list[str], budget: float) -> list[dict[str, Any]]:
    """SRU (2017) recurrence c_t = f c_{t-1} + (1-f) x̃ as automaton B, against the sru package's CPU cell."""
    try:
        from sru import SRUCell  # type: ignore[import-not-found]
    except Exception as exc:  # noqa: BLE001 - any import failure means: no sru column
        print(f"# sru column skipped: the sru package is unavailable ({type(exc).__name__}: {exc})", flush=True)
        return []
    b, t, d = shape
    cell = SRUCell(d, d, num_layers=1) if "num_layers" in SRUCell.__init__.__code__.co_varnames else SRUCell(d, d)
    from kleene.compile import compile

    recurrence = compile(_automata()["B"], "real", d, backend)
    x = torch.randn(t, b, d, generator=torch.Generator().manual_seed(2))
    slots = torch.rand(b, t, 2, d)
    records = []
    for pass_name in passes:
        backward = pass_name == "forward+backward"
        xs, ss = x.clone().requires_grad_(backward), slots.clone().requires_grad_(backward)
        if backward:
            kernel = _with_backward(lambda: recurrence(ss)[0].sum())
            sru_fn = _with_backward(lambda: cell(xs)[0].sum())
        else:

            def kernel() -> None:
                with torch.no_grad():
                    recurrence(ss)

            def sru_fn() -> None:
                with torch.no_grad():
                    cell(xs)

        record = {
            "automaton": "SRU (B)",
            "shape": [b, t, d],
            "pass": pass_name,
            "backend": recurrence.backend,
            "kernel_ms": _time_ms(kernel, budget),
            "sru_ms": _time_ms(sru_fn, budget),
            "naive_ms": None,
            "floor_ms": None,
        }
        records.append(record)
        print(_row(record), flush=True)
    return records


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:9.2f}"


def _ratio(a: Any, b: Any) -> str:
    return "-" if a is None or b is None else f"{a / b:6.2f}"


HEADER = (
    f"{'automaton':14} {'shape':16} {'pass':17} {'kernel ms':>9} {'naive/k':>7} {'k/floor':>7} "
    f"{'lstm/k':>7} {'k/gemm':>7} {'sru/k':>7}"
)


def _row(r: dict[str, Any]) -> str:
    shape = "x".join(str(s) for s in r["shape"])
    return (
        f"{r['automaton']:14} {shape:16} {r['pass']:17} {_fmt(r['kernel_ms'])} "
        f"{_ratio(r.get('naive_ms'), r['kernel_ms']):>7} {_ratio(r['kernel_ms'], r.get('floor_ms')):>7} "
        f"{_ratio(r.get('lstm_ms'), r['kernel_ms']):>7} {_ratio(r['kernel_ms'], r.get('gemm_ms')):>7} "
        f"{_ratio(r.get('sru_ms'), r['kernel_ms']):>7}"
    )


def run(args: argparse.Namespace) -> int:
    from kleene.compile import compile as compile_template

    torch.manual_seed(0)
    start = time.perf_counter()
    build_start = time.perf_counter()
    compile_template(_automata()["F"], "real", 8, args.backend)
    print(
        f"# torch {torch.__version__}, {torch.get_num_threads()} threads; first F kernel ready in "
        f"{time.perf_counter() - build_start:.2f} s",
        flush=True,
    )
    print(HEADER, flush=True)
    both = ["forward", "forward+backward"]
    budget = 0.5 if args.quick else 2.0
    records: list[dict[str, Any]] = []
    records += _recurrence_records((32, 256, 512), ["B", "C", "F", "SoPa"], args.backend, both, budget, True)
    records += _recurrence_records((1, 4096, 512), ["B"], args.backend, ["forward+backward"], budget, False)
    records += _layer_records((32, 256, 512), args.backend, both, budget)
    if not args.quick:
        records += _recurrence_records((1, 4096, 512), ["C", "F", "SoPa"], args.backend, both, budget, True)
        records += _recurrence_records((1, 4096, 512), ["B"], args.backend, ["forward"], budget, True)
        records += _recurrence_records((64, 64, 256), ["B", "C", "F", "SoPa"], args.backend, both, budget, True)
        records += _sru_records((32, 256, 512), args.backend, both, budget)
    print(f"# {len(records)} records in {time.perf_counter() - start:.1f} s", flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    register(sub)
    sys.exit(run(parser.parse_args(["bench", *sys.argv[1:]])))
