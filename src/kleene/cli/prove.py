"""``kleene prove``: prove a zoo entry or a user's recurrence rational (exit 0) or refuse it (exit 1).

Examples::

    kleene prove rrnn-f                 # the certificate as text
    kleene prove qrnn --window 3 --json # one JSON object: rational, automata, states, semiring, checked, ...
    kleene prove my_recurrence.py --draw out/   # a file defining `recurrence` (or `build()`)
    kleene prove --all --markdown       # the paper's Table 1, regenerated and extended
    kleene prove stacked-linear --layers 3 --flatten   # the stack, its delayed flattening, and their equality
"""

from __future__ import annotations

import argparse
import inspect
import json
import runpy
import sys
from pathlib import Path
from typing import Any

EXIT_PROVED, EXIT_REFUSED, EXIT_ERROR = 0, 1, 2

#: command-line flag -> the builder parameter names it may fill
_FLAG_PARAMETERS = {
    "window": ("window",),
    "order": ("order",),
    "semiring": ("semiring",),
    "dim": ("d",),
    "layers": ("layers",),
    "length": ("length", "width"),
    "alphabet": ("alphabet",),
    "constant_lambda": ("constant_lambda",),
    "kind": ("kind",),
}


def _zoo_names() -> str:
    from kleene.rational.zoo import ZOO

    return ", ".join(ZOO)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from kleene.cli._shared import filled_help, integer_at_least

    positive = integer_at_least(1)
    parser = subparsers.add_parser(
        "prove",
        formatter_class=filled_help(ZOO_NAMES=_zoo_names),
        help="prove a recurrence rational (build its WFSAs and a checked certificate) or refuse it",
        description="Prove a recurrence rational: build WFSAs whose Forward scores equal it and a certificate checked "
        "by induction, or refuse it naming the offending term. Exit status 0 when proved, 1 when refused, 2 on errors. "
        "Zoo names: ZOO_NAMES.",
    )
    parser.add_argument("target", nargs="?", help="a zoo name or a Python file defining `recurrence` or `build()`")
    parser.add_argument("--all", action="store_true", help="every zoo entry: a table (with --markdown) or JSON list")
    parser.add_argument("--window", type=positive, help="QRNN convolution window K")
    parser.add_argument("--order", type=positive, help="RCNN n-gram order n")
    parser.add_argument(
        "--semiring", help="semiring for entries that take one (sopa, rrnn-semiring, qrnn-semiring, rcnn, isan)"
    )
    parser.add_argument("--kind", choices=("B", "C", "F"), help="RRNN kind of rrnn-semiring")
    parser.add_argument("--dim", type=positive, help="hidden size d for ISAN and the linear Elman network")
    parser.add_argument("--layers", type=positive, help="layers of a stacked entry (stacked-linear, delayed-linear)")
    parser.add_argument(
        "--flatten",
        action="store_true",
        help="with stacked-linear: also prove its flattening delayed-linear and check that it equals the stack "
        "with delay layers-1 (Theorem 1 of the delayed-RNN paper) for every input",
    )
    parser.add_argument("--length", type=positive, help="SoPa pattern length / CNN filter width")
    parser.add_argument("--alphabet", help="comma-separated finite alphabet (history constructions, Hankel ranks)")
    parser.add_argument("--constant-lambda", action="store_true", default=None, help="RCNN with a constant λ")
    parser.add_argument("--json", action="store_true", help="print one JSON object (a list with --all)")
    parser.add_argument("--markdown", action="store_true", help="Markdown with LaTeX equations")
    parser.add_argument("--latex", action="store_true", help="the recurrence as a LaTeX aligned block")
    parser.add_argument("--draw", type=Path, metavar="DIR", help="write the automata as SVG files into DIR")
    parser.add_argument("--hankel", action="store_true", help="add Hankel-rank evidence (real semiring)")
    parser.add_argument("--certificate", type=Path, metavar="PATH", help="write the full certificate JSON to PATH")
    parser.add_argument("--out", type=Path, help="with --all: also write the output to this file")
    parser.add_argument("--no-cross-check", action="store_true", help="skip the numeric cross-check")
    parser.set_defaults(handler=run)


class _UsageError(Exception):
    pass


def _zoo_kwargs(builder: Any, args: argparse.Namespace, name: str) -> dict[str, Any]:
    accepted = inspect.signature(builder).parameters
    kwargs: dict[str, Any] = {}
    for flag, names in _FLAG_PARAMETERS.items():
        value = getattr(args, flag, None)
        if value is None:
            continue
        target = next((n for n in names if n in accepted), None)
        if target is None:
            raise _UsageError(f"--{flag.replace('_', '-')} does not apply to {name}")
        kwargs[target] = value.split(",") if flag == "alphabet" else value
    return kwargs


def load_recurrence(target: str, args: argparse.Namespace) -> Any:
    """A zoo entry by name, or the ``recurrence`` / ``build()`` of a Python file."""
    from kleene.rational.recurrence import Recurrence
    from kleene.rational.zoo import ZOO

    if target in ZOO:
        return ZOO[target](**_zoo_kwargs(ZOO[target], args, target))
    path = Path(target)
    if path.suffix != ".py" or not path.is_file():
        raise _UsageError(f"{target!r} is neither a zoo name ({', '.join(ZOO)}) nor a Python file")
    namespace = runpy.run_path(str(path))
    rec = namespace.get("recurrence")
    if rec is None and callable(namespace.get("build")):
        rec = namespace["build"]()
    if not isinstance(rec, Recurrence):
        raise _UsageError(
            f"{target} must define `recurrence` (a kleene.rational.Recurrence) or `build()` returning one"
        )
    if args.alphabet:
        rec.alphabet = args.alphabet.split(",")
    return rec


def _prove(rec: Any, args: argparse.Namespace) -> Any:
    from kleene.rational.certificate import Certificate
    from kleene.rational.prover import prove

    result = prove(rec, hankel=False)
    if isinstance(result, Certificate) and not args.no_cross_check:
        result.cross_check()
    if args.hankel and rec.ring.is_field:
        from kleene.rational.hankel import hankel_evidence

        result.hankel = hankel_evidence(rec, rec.alphabet)
    return result


def run(args: argparse.Namespace) -> int:
    from kleene.cli._shared import check_output_dir, check_output_file, require_dot
    from kleene.errors import KleeneError

    try:
        check_output_dir(args.draw, "--draw")
        check_output_file(args.certificate, "--certificate")
        check_output_file(args.out, "--out", create_folder=True)
        if args.draw is not None:
            require_dot("--draw")
        if args.all:
            return _run_all(args)
        if not args.target:
            raise _UsageError("give a zoo name or a file, or --all")
        result = _prove(load_recurrence(args.target, args), args)
    except (_UsageError, KleeneError) as exc:
        print(f"kleene prove: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.flatten and args.json:  # one JSON object holding both certificates and the delay check
        return _flatten(result, args)
    if args.json:
        print(json.dumps(result.summary(), ensure_ascii=False, indent=2))
    elif args.markdown:
        print(result.render_markdown())
    elif args.latex:
        print(result.render_latex())
    else:
        print(result.render_text())
    if args.certificate:
        args.certificate.write_text(result.to_json(), encoding="utf-8")
    if args.draw and result.rational:
        for path in result.draw(args.draw):
            print(f"wrote {path}", file=sys.stderr)
    if args.flatten and not args.json:
        return _flatten(result, args)
    if result.rational:
        return EXIT_PROVED if result.checked else EXIT_REFUSED
    return EXIT_REFUSED


def _flatten(stacked: Any, args: argparse.Namespace) -> int:
    """Prove the delayed flattening of a proved ``stacked-linear`` and check the delay identity.

    With ``--json`` the output is one JSON object ``{"stacked": ..., "flattened": ..., "delay_check": ...}`` (the
    stacked certificate's summary is not printed before it).
    """
    from dataclasses import asdict

    from kleene.rational.flatten import check_delay
    from kleene.rational.zoo import delayed_linear

    if args.target != "stacked-linear":
        print("kleene prove: error: --flatten applies to stacked-linear only", file=sys.stderr)
        return EXIT_ERROR
    if not (stacked.rational and stacked.checked):
        if args.json:
            print(json.dumps({"stacked": stacked.summary(), "flattened": None, "delay_check": None}, indent=2))
        return EXIT_REFUSED
    layers = args.layers or 2
    delayed = _prove(delayed_linear(layers, args.dim or 1), args)
    check = check_delay(stacked, delayed, layers - 1)
    if args.json:
        counterexample = None if check.counterexample is None else str(check.counterexample)
        verdict = {**asdict(check), "counterexample": counterexample}
        document = {"stacked": stacked.summary(), "flattened": delayed.summary(), "delay_check": verdict}
        print(json.dumps(document, ensure_ascii=False, indent=2, default=str))
    else:
        print(delayed.render_markdown() if args.markdown else delayed.render_text())
        print(f"\n{check}")
    return EXIT_PROVED if delayed.checked and check.holds else EXIT_REFUSED


def _run_all(args: argparse.Namespace) -> int:
    from kleene.rational.zoo import ZOO

    results = [_prove(ZOO[name](), args) for name in ZOO]
    if args.json:
        text = json.dumps([r.summary() for r in results], ensure_ascii=False, indent=2)
    else:
        text = markdown_table(results, list(ZOO))
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    ok = all(r.checked for r in results if r.rational)
    return EXIT_PROVED if ok else EXIT_REFUSED


def _inline_latex(rec: Any) -> str:
    rows = [f"{rec.latex(lhs)} = {rec.latex(rhs)}" for kind, lhs, rhs in rec.equations() if kind == "update"]
    return "$" + r" \\; ".join(rows).replace("|", r"\vert ") + "$"


def markdown_table(results: list[Any], names: list[str]) -> str:
    """Table 1 of the paper, regenerated from proofs, extended with every zoo entry."""
    from kleene.rational.zoo import PAPER_AUTOMATON

    rows = [
        "| Model | Recurrence (one hidden unit) | WFSA (paper) | Semiring | States | Result | Reason / evidence |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in zip(names, results):
        summary = r.summary()
        states = ", ".join(map(str, summary["states"])) or "–"
        if r.rational:
            verdict = "proved, checked" if r.checked else "construction built, check FAILED"
            notes = f"{summary['automata']} automata; {summary['identities']} identities, residuals 0"
            if r.numeric is not None:
                notes += f"; numeric max error {r.numeric['max_error']:.1e}"
        else:
            verdict = "refused"
            notes = r.reason.replace("|", r"\|")
        if r.hankel is not None:
            notes += f"; Hankel ranks {r.hankel.ranks} of sizes {r.hankel.sizes}"
        rows.append(
            f"| {name} | {_inline_latex(r.recurrence)} | {PAPER_AUTOMATON.get(name, '–')} | {summary['semiring']} "
            f"| {states} | {verdict} | {notes} |"
        )
    return "\n".join(rows)
