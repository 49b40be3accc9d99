"""The cpp backend builds a kernel's entry points when they are first called, one library each
(``runtime.cpu.NativeKernel``): the compiler is looked for at construction (``backend="auto"`` falls back then), a
failed build is a ``CompileError`` at the call that needed it, and a use in one dtype and direction builds only
that entry point."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch

from kleene.automata.examples import paper_automaton_f
from kleene.compile import Template, compile
from kleene.compile.codegen.entries import ENTRY_DTYPES, ENTRY_KINDS
from kleene.compile.runtime import cpu
from kleene.errors import CompileError

try:
    cpu.compiler()
except CompileError:  # pragma: no cover - machines without a C++ compiler
    pytest.skip("no C++ compiler", allow_module_level=True)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty kernel cache, and no kernel loaded in this process (other tests' would not be built again)."""
    monkeypatch.setenv("KLEENE_CACHE", str(tmp_path))
    monkeypatch.setattr(cpu, "_LOADED", {})
    return tmp_path


def _libraries(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "kernels").glob("kleene_*.so") if "_pool_" not in p.name)


def test_one_dtype_and_direction_builds_one_library(fresh_cache: Path) -> None:
    """A float64 forward without gradients builds the forward in float64 and nothing else; a float32 forward under
    gradients builds the float32 forward and backward in one library, which the backward then uses (and a later
    forward without gradients loads); both compute what the torch backend does."""
    template = Template.from_wfsa(paper_automaton_f())
    module = compile(template, "real", 3, "cpp", output="last")
    reference = compile(template, "real", 3, "torch", output="last")
    reference.load_state_dict(module.state_dict())
    assert _libraries(fresh_cache) == []
    slots = torch.rand(2, 4, module.plan.num_slots, 3, dtype=torch.float64)
    with torch.no_grad():
        out, _ = module(slots)
    (library,) = _libraries(fresh_cache)
    assert library.endswith("_forward_f64.so")
    torch.testing.assert_close(out, reference(slots)[0])
    loaded = ctypes.CDLL(str(fresh_cache / "kernels" / library))
    present = {f"{k}_{s}" for k in ENTRY_KINDS for s, _ in ENTRY_DTYPES if hasattr(loaded, f"kleene_{k}_{s}")}
    assert present == {"forward_f64"}
    grads = []
    for recurrence in (module, reference):
        x = slots.float().requires_grad_()
        recurrence(x)[0].sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1])
    assert _libraries(fresh_cache) == [library.replace("_forward_f64", "_forward_f32_backward_f32"), library]
    cpu._LOADED.clear()  # a new process: a float32 forward loads the library of both directions, builds nothing
    with torch.no_grad():
        out, _ = compile(template, "real", 3, "cpp", output="last")(slots.float())
    torch.testing.assert_close(out, reference(slots.float())[0])
    assert len(_libraries(fresh_cache)) == 2


def test_each_mode_of_a_log_kernel_builds_its_own_instantiations(fresh_cache: Path) -> None:
    """A log plan's kernels store the forward states for the backward where they fit ``state_budget``, else keep
    checkpoints and recompute: each mode is a library of its own (``entries.STORED_KINDS``), so that a training step
    compiles one mode's instantiations and not both; values and gradients equal the torch backend's in each mode."""
    template = Template.from_wfsa(paper_automaton_f())
    stored = compile(template, "log", 3, "cpp", output="last")
    checkpointed = compile(template, "log", 3, "cpp", output="last", state_budget=0)
    reference = compile(template, "log", 3, "torch", output="last")
    for module in (stored, checkpointed):
        module.load_state_dict(reference.state_dict())
    slots = torch.randn(2, 5, stored.plan.num_slots, 3, dtype=torch.float64)

    def gradient(module: torch.nn.Module) -> torch.Tensor:
        x = slots.clone().requires_grad_()
        module(x)[0].sum().backward()
        assert x.grad is not None
        return x.grad

    want = gradient(reference)
    torch.testing.assert_close(gradient(stored), want)
    (library,) = _libraries(fresh_cache)
    assert library.endswith("_stored_forward_f64_stored_backward_f64.so")
    with torch.no_grad():  # saving nothing: the checkpointed forward, a library of its own
        torch.testing.assert_close(stored(slots)[0], reference(slots)[0])
    torch.testing.assert_close(gradient(checkpointed), want)  # its backward joins that forward
    key = library.removesuffix("_stored_forward_f64_stored_backward_f64.so")
    assert _libraries(fresh_cache) == sorted([library, f"{key}_forward_f64.so", f"{key}_backward_f64.so"])


def test_a_failing_compiler_fails_the_first_call(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiler that is found but fails: construction succeeds (nothing is built), the first call raises a
    ``CompileError`` naming the entry point; no compiler at all: ``backend="auto"`` falls back to torch at
    construction, ``backend="cpp"`` refuses there."""
    monkeypatch.setenv("CXX", "false")
    template = Template.from_wfsa(paper_automaton_f())
    module = compile(template, "real", 2, "cpp")
    with pytest.raises(CompileError, match="kleene_forward_f32"):
        module(torch.rand(1, 3, module.plan.num_slots, 2))
    with pytest.raises(CompileError, match="float32 or float64"):
        cpu.load_kernel(module.plan)[1].forward(torch.int64)
    monkeypatch.setenv("CXX", "kleene-no-such-compiler")
    with pytest.warns(RuntimeWarning, match="torch backend"):
        assert compile(template, "real", 2).backend == "torch"
    with pytest.raises(CompileError, match="kleene-no-such-compiler"):
        compile(template, "real", 2, "cpp")
    assert _libraries(fresh_cache) == []


def test_cuda_launchers_are_built_at_their_first_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA kernels' launchers (``runtime.gpu.cuda_launchers_of``) are not built when they are made, only at the
    first launch, where a failed build raises (no GPU needed: the build is replaced by one that fails)."""
    from types import SimpleNamespace

    from kleene.compile import lower
    from kleene.compile.codegen.cuda import generate_cuda
    from kleene.compile.runtime import gpu

    builds: list[str] = []

    def failing_build(source: str, *args: object) -> None:
        builds.append(source)
        raise CompileError("nvcc failed on generated CUDA kernels")

    monkeypatch.setattr(gpu, "cuda_launchers", failing_build)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: SimpleNamespace(cuda_stream=0))
    source = generate_cuda(lower(Template.from_wfsa(paper_automaton_f()), "real"))
    forward, _, _ = gpu.cuda_launchers_of(source, lambda slots: (1, 2, 3))
    assert builds == []
    x = torch.zeros(1, 2, 4, 3)
    with pytest.raises(CompileError, match="nvcc failed"):
        forward(x, x, x, None, x, x, x)
    assert builds == [source]
