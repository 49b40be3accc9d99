"""Every registry model under torch.export, torch.compile and ONNX (onnxruntime), against eager PyTorch on shapes
the export never saw (other batch sizes and lengths, ragged; for the exports also empty batches and empty texts);
TorchScript is refused with one clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

from kleene.errors import DeployError
from kleene.nn.deploy import export_onnx, export_program
from tests.deploy.zoo import EMPTY, UNSEEN, WORDS, assert_close, batch, empty_batch, model_names, small_model

ort = pytest.importorskip("onnxruntime")

@pytest.mark.parametrize("name", model_names())
@pytest.mark.slow
def test_torch_export_matches_eager_on_unseen_shapes(name: str) -> None:
    model = small_model(name)
    program = export_program(model).module()
    inputs = [batch(*shape) for shape in UNSEEN] + [empty_batch(*shape) for shape in EMPTY]
    for tokens, lengths in inputs:
        with torch.no_grad():
            assert_close(program(tokens, lengths), model(tokens, lengths), 1e-6)


#: Two unseen shapes without a size of 1, which one dynamic graph serves (dynamo specializes sizes 0 and 1).
DYNAMIC = [(5, 11, 1), (3, 6, 4)]
#: One model per kind of native kernel op: the template's (rrnn-b: bidirectional, with an output map), the bank's
#: (sopa) and the dense path's (isan).
KERNEL_KINDS = ["rrnn-b", "sopa", "isan"]


def compiled_model(name: str, backend: str) -> tuple[torch.nn.Module, Any, bool]:
    """The small ``name``, compiled with ``backend`` (dynamic shapes), and whether it compiles as one full graph."""
    torch._dynamo.reset()  # the models share forward methods: start each from no cached graphs and no recompiles
    counters.clear()
    model = small_model(name)
    # dynamo does not trace torch's own RNN modules (the LSTM baselines): they compile with graph breaks there
    fullgraph = not any(isinstance(module, torch.nn.RNNBase) for module in model.modules())
    return model, torch.compile(model, fullgraph=fullgraph, dynamic=True, backend=backend), fullgraph


def check_graphs(model: torch.nn.Module, compiled: Any, shapes: list[tuple[int, int, int]]) -> int:
    """Check ``compiled`` against eager ``model`` on ``shapes``; returns how many graphs dynamo has compiled."""
    for size, steps, seed in shapes:
        tokens, lengths = batch(size, steps, seed)
        with torch.no_grad():
            assert_close(compiled(tokens, lengths), model(tokens, lengths), 1e-6)
    return int(counters["stats"]["unique_graphs"])


@pytest.mark.parametrize("name", model_names())
@pytest.mark.slow
def test_torch_compile_traces_every_model_in_one_graph(name: str) -> None:
    """Dynamo and AOT autograd (the kernels' fake implementations), without inductor's code generation: one graph
    for both shapes, with no graph break and no recompile. (The small sopa has 5 patterns, the first shape's batch
    size: a tensor of 5 lane indices once made dynamo give both one size symbol and specialize the batch.)

    For one model per kind of kernel op (``KERNEL_KINDS``), then the shapes with a batch or a length of 1, which
    dynamo specializes (a graph each): the ops' fake implementations and the models' code see static sizes of 1."""
    model, compiled, fullgraph = compiled_model(name, "aot_eager")
    graphs = check_graphs(model, compiled, DYNAMIC)
    assert graphs == 1 or not fullgraph
    if name in KERNEL_KINDS:
        size_one = [shape for shape in UNSEEN if 1 in shape[:2]]
        assert check_graphs(model, compiled, size_one) == graphs + len(size_one)


@pytest.mark.slow
@pytest.mark.parametrize("name", KERNEL_KINDS)
def test_torch_compile_inductor(name: str) -> None:
    """The default backend (inductor generates and builds C++ around the kernels: tens of seconds cold), on two unseen
    shapes that one dynamic graph serves. The shapes with a size of 1 are checked under aot_eager above: the same
    graphs, the same custom ops."""
    model, compiled, _ = compiled_model(name, "inductor")
    assert check_graphs(model, compiled, DYNAMIC) == 1


@pytest.mark.parametrize("name", model_names())
@pytest.mark.slow
def test_onnx_matches_eager_on_unseen_shapes(name: str, tmp_path: Path) -> None:
    model = small_model(name)
    path = export_onnx(model, tmp_path / f"{name}.onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["tokens", "lengths"]
    inputs = [batch(*shape) for shape in UNSEEN] + [empty_batch(*shape) for shape in EMPTY]
    for tokens, lengths in inputs:
        (logits,) = session.run(None, {"tokens": tokens.numpy(), "lengths": lengths.numpy()})
        with torch.no_grad():
            assert_close(torch.from_numpy(np.asarray(logits)), model(tokens, lengths), 1e-5)


@pytest.mark.parametrize("name", ["rrnn-b", "isan", "sopa"])
def test_torchscript_raises_one_clear_error(name: str) -> None:
    model = small_model(name)
    tokens, lengths = batch(2, 4, 0)
    with pytest.raises(DeployError, match=r"torch\.jit\.script .*torch\.export\.export.*ONNX"):
        torch.jit.script(model)
    with pytest.raises(DeployError, match=r"torch\.jit\.trace .*torch\.export\.export.*ONNX"):
        torch.jit.trace(model, (tokens, lengths))


def test_export_refuses_bad_arguments(tmp_path: Path) -> None:
    model = small_model("cnn")
    with pytest.raises(DeployError, match=r"must end in \.onnx"):
        export_onnx(model, tmp_path / "model.bin")
    with pytest.raises(DeployError, match="does not exist"):
        export_onnx(model, tmp_path / "missing" / "model.onnx")
    with pytest.raises(DeployError, match=r"torch\.nn\.Module"):
        export_onnx("model", tmp_path / "model.onnx")  # type: ignore[arg-type]
    with pytest.raises(DeployError, match="vocab has 3 tokens"):
        export_onnx(model, tmp_path / "model.onnx", vocab=["<pad>", "<unk>", "a"])
    with pytest.raises(DeployError, match="labels must name the model's 3 classes"):
        export_onnx(model, tmp_path / "model.onnx", vocab=WORDS, labels=["x"])



def test_the_packed_gemm_steps_aside_under_export_without_any_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """kleene.nn.projection's oneDNN path (eager mode) is absent from exported graphs, KLEENE_PLAIN_GEMM unset."""
    from kleene.nn.projection import Linear

    monkeypatch.delenv("KLEENE_PLAIN_GEMM", raising=False)
    layer = Linear(5, 7)
    x = torch.randn(3, 4, 5)
    program = torch.export.export(layer, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    targets = {str(node.target) for node in program.graph.nodes}
    assert not any("mkldnn" in target for target in targets) and "aten.linear.default" in targets
    unseen = torch.randn(6, 4, 5)
    with torch.no_grad():
        assert_close(program.module()(unseen), layer(unseen), 1e-6)
