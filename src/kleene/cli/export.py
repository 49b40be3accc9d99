"""``kleene export CHECKPOINT --format onnx -o model.onnx``: a trained model for onnxruntime (docs/deploy.md).

Writes the ONNX file and, next to it, a JSON sidecar (``model.json``: vocabulary, labels, preprocessing), which is all
a program needs to classify text with onnxruntime and numpy. ``--format torch-export`` writes a ``torch.export``
program (``.pt2``, loaded with ``torch.export.load``) instead.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

FORMATS = ("onnx", "torch-export")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a checkpoint for deployment (ONNX + JSON sidecar, or torch.export)",
        description="Load a checkpoint written by `kleene train` and write it as ONNX (batch and length dynamic; "
        "onnxruntime runs it) with a JSON sidecar holding the vocabulary, the labels and how text becomes token ids, "
        "or as a torch.export program (.pt2). See docs/deploy.md.",
    )
    parser.add_argument("checkpoint", type=Path, help="checkpoint directory")
    parser.add_argument("--format", default="onnx", choices=FORMATS, help="what to write (default: onnx)")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, help="file to write: NAME.onnx (sidecar NAME.json) or NAME.pt2"
    )
    parser.add_argument("--labels", help="comma-separated class names (default: those the checkpoint records)")
    parser.add_argument("--overwrite", action="store_true", help="replace files that exist already")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kleene.cli._shared import check_output_file
    from kleene.errors import ArgumentError, DeployError

    check_output_file(args.output, "-o/--output")  # before the model is read and traced
    targets = [args.output] + ([args.output.with_suffix(".json")] if args.format == "onnx" else [])
    existing = [str(path) for path in targets if path.exists()]
    if existing and not args.overwrite:
        raise ArgumentError(f"-o/--output: {', '.join(existing)} exist(s) already; pass --overwrite to replace")
    from kleene.nn.checkpoint import load_checkpoint
    from kleene.nn.deploy import export_checkpoint, export_program

    labels = [label.strip() for label in args.labels.split(",")] if args.labels else []
    if args.format == "onnx":
        onnx_path, sidecar_path = export_checkpoint(args.checkpoint, args.output, labels=labels)
        written = [str(onnx_path), str(sidecar_path)]
    else:
        if args.output.suffix != ".pt2":
            raise DeployError(f"--output must end in .pt2 for --format torch-export; got {str(args.output)!r}")
        import torch

        torch.export.save(export_program(load_checkpoint(args.checkpoint).model), str(args.output))
        written = [str(args.output)]
    if args.json:
        print(json.dumps({"checkpoint": str(args.checkpoint), "format": args.format, "written": written}))
    else:
        print(f"{args.checkpoint} -> {', '.join(written)}")
    return 0
