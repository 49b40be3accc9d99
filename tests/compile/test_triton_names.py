"""Every generated Triton kernel launches through Triton's own argument binder, on CPU.

On a GPU, ``kernel[grid](...)`` first calls a binder that Triton generates from the kernel's signature
(``triton.runtime.jit.create_function_from_signature``); its own local and global names live in the same scope as
the kernel's arguments, so an argument spelled like one of them is shadowed (Triton 3.6, a kernel argument named
``params``: "TypeError: failed to specialize argument of type: dict"). The interpreter never goes through that
binder, so the interpreter tests cannot see it. Here, for every kind of generated kernel:

* its argument names are checked against the names the binder uses for itself, read from the *installed* Triton
  (the binder's code object, ``JITFunction.run``'s keywords, the CUDA backend's launch options) and against the
  names of Triton 3.6's binder (the version on the GPU machines, read from triton-lang/triton release/3.6.x,
  python/triton/runtime/jit.py);
* the installed Triton's real binder, with its real CUDA backend (no GPU needed), binds the launched kernels to
  CPU tensors of the launch's types.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import random
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from kleene.automata import get_semiring
from kleene.automata.examples import paper_automaton_f
from kleene.compile import Options, Template, dense_template, lower, sopa_pattern
from kleene.compile.chunked import basis_plan
from kleene.compile.codegen.bank import BankLayout, generate_bank_triton
from kleene.compile.codegen.dense import generate_dense_triton
from kleene.compile.codegen.triton import generate_triton

from .oracle import OUTPUT_MAPS, SEMIRINGS, random_template, with_output_map

pytest.importorskip("triton", reason="the optional triton package (pip install 'kleene[gpu]') is not installed")

import triton
from triton.runtime import jit

from kleene.compile.runtime import gpu

#: The names Triton 3.6's binder keeps beside the kernel's arguments: the generated ``dynamic_func``'s locals
#: (``params``, ``specialization``, the ``**options`` catch-all), the globals of its namespace (``specialize_impl``,
#: ``backend``, ``JITCallable``; defaults are ``default_<name>``), and ``JITFunction.run``'s keywords.
TRITON_3_6_RESERVED = frozenset(
    {"params", "specialization", "options", "specialize_impl", "backend", "JITCallable", "dynamic_func", "grid",
     "warmup"}
)
RESERVED_PREFIX = "default_"
#: Integer (non-pointer) arguments of the launched kernels; every other non-constexpr argument is a tensor.
_SIZES = {"Tn", "D", "HALF"}


def _dummy_kernel(first, second, BLOCK):  # type: ignore[no-untyped-def]
    """(Only its signature is used: the binder is generated from it.)"""


def installed_reserved_names() -> frozenset[str]:
    """The names the installed Triton's launch path uses beside a kernel's arguments (see the module docstring)."""
    fn = jit.JITFunction(_dummy_kernel)
    binder = jit.create_function_from_signature(fn.signature, fn.params, None)
    code = binder.__code__
    own = set(code.co_varnames) - set(fn.arg_names)  # locals and the **options catch-all
    own |= set(code.co_names)  # globals it reads (specialize_impl, backend, ...)
    run = inspect.signature(jit.JITFunction.run)
    own |= {name for name, p in run.parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    own |= set(re.findall(r'kwargs\["(\w+)"\]', inspect.getsource(jit.JITFunction.run)))
    from triton.backends.nvidia.compiler import CUDAOptions

    own |= {field.name for field in dataclasses.fields(CUDAOptions)}  # launch options arrive as keywords
    return frozenset(own)


def _cuda_backend() -> Any:
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend

    return CUDABackend(GPUTarget("cuda", 80, 32))


def _sources() -> dict[str, str]:
    """Every kind of generated Triton module, by a readable name."""
    rng = random.Random(22)
    out: dict[str, str] = {}
    f = lower(Template.from_wfsa(paper_automaton_f("real")), "real")
    out["template F"] = generate_triton(f)
    both = Options(bidirectional=True, restart=True, output="sum")
    out["template F bidirectional"] = generate_triton(lower(Template.from_wfsa(paper_automaton_f("log")), "log", both))
    out["template sopa pattern"] = generate_triton(lower(sopa_pattern(4), "max-times"))
    for semiring in SEMIRINGS:
        out[f"template random {semiring}"] = generate_triton(lower(random_template(rng, semiring), semiring))
    for kind in OUTPUT_MAPS:
        out[f"output map {kind}"] = generate_triton(lower(with_output_map(random_template(rng, "real"), kind), "real"))
    out["chunked basis"] = generate_triton(basis_plan(f)[0])
    out["dense template"] = generate_triton(lower(dense_template(3), "log"))
    for semiring in (*SEMIRINGS, "min-plus"):
        out[f"dense path {semiring}"] = generate_dense_triton(get_semiring(semiring))
    bank = [lower(sopa_pattern(n), "max-times", Options(restart=True, output="sum")) for n in (2, 4)]
    out["bank of sopa patterns"] = generate_bank_triton(BankLayout.of(bank, [3, 5]))
    return out


SOURCES = _sources()


def _jit_arguments(source: str) -> dict[str, list[str]]:
    """{function name: argument names} of every ``@triton.jit`` function of a generated module's source."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any(ast.unparse(d) == "triton.jit" for d in node.decorator_list):
            found[node.name] = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
    return found


def clashes(arguments: list[str], reserved: frozenset[str]) -> list[str]:
    return [a for a in arguments if a in reserved or a.startswith(RESERVED_PREFIX)]


@pytest.fixture(scope="module")
def compiled_modules() -> Iterator[dict[str, ModuleType]]:
    """The generated modules imported with ``@triton.jit`` as on a GPU (no interpreter)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TRITON_INTERPRET", raising=False)
        yield {kind: gpu.import_triton_source(source, "kleene_names") for kind, source in SOURCES.items()}


def test_the_installed_binder_names_are_found() -> None:
    names = installed_reserved_names()
    # the 3.6 binder's locals are still there in the installed version (3.9 builds the same function)
    assert {"params", "specialization", "options", "grid", "warmup", "num_warps"} <= names


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_no_kernel_argument_is_a_binder_name(kind: str) -> None:
    reserved = TRITON_3_6_RESERVED | installed_reserved_names()
    functions = _jit_arguments(SOURCES[kind])
    assert functions, f"no @triton.jit function found in the {kind} module"
    bad = {name: clashes(args, reserved) for name, args in functions.items() if clashes(args, reserved)}
    assert not bad, f"{kind}: kernel arguments shadowed by Triton's binder: {bad}"


def _bind(fn: Any, backend: Any) -> list[Any]:
    """The installed binder's specialization of ``fn`` for CPU tensors of the launch's types."""
    binder = jit.create_function_from_signature(fn.signature, fn.params, backend)
    args = []
    for p in fn.params:
        if p.is_constexpr:
            args.append(1)
        elif p.name in _SIZES:
            args.append(7)
        else:
            args.append(torch.zeros(4, dtype=torch.int64 if p.name == "lengths" else torch.float32))
    _, specialization, _ = binder(*args)
    return list(specialization)


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_the_installed_binder_binds_the_launched_kernels(kind: str, compiled_modules: dict[str, ModuleType]) -> None:
    module, backend = compiled_modules[kind], _cuda_backend()
    launched = [getattr(module, n) for n in dir(module) if n.startswith("kleene_")]
    assert launched and all(isinstance(fn, jit.JITFunction) for fn in launched)
    for fn in launched:
        specialization = _bind(fn, backend)
        pointers = [s for s, p in zip(specialization, fn.params) if not p.is_constexpr and p.name not in _SIZES]
        assert all(str(s[0]).startswith("*") for s in pointers), (fn.__name__, specialization)


def test_a_kernel_argument_named_params_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The negative control: the name rule flags ``params`` and the installed binder fails on it as 3.6's does."""
    source = "import triton\n\n\n@triton.jit\ndef kleene_bad(slots, params, D):\n    pass\n"
    reserved = TRITON_3_6_RESERVED | installed_reserved_names()
    assert clashes(_jit_arguments(source)["kleene_bad"], reserved) == ["params"]
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("KLEENE_CACHE", str(tmp_path))
    module = gpu.import_triton_source(source, "kleene_names_bad")
    with pytest.raises(TypeError, match="failed to specialize"):
        _bind(module.kleene_bad, _cuda_backend())
    assert triton.__version__  # (the version the message above came from; docs/gpu.md lists the supported ones)
