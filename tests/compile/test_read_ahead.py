"""The GPU lane kernels read several steps ahead (``writer.prefetch_depth``): the depth rule, and that the generated
CUDA and Triton loops step by it. (Their values and gradients on lengths that are not multiples of the depth are
checked against the torch reference by test_triton.py in the interpreter and test_cuda_source.py on the host.)"""

from __future__ import annotations

import pytest

from kleene.compile import compile
from kleene.compile.codegen import writer
from kleene.compile.codegen.cuda import generate_cuda
from kleene.compile.codegen.triton import generate_triton
from kleene.nn.rrnn import rrnn_template


@pytest.mark.parametrize(("loads", "depth"), [(0, 8), (1, 8), (4, 8), (6, 8), (9, 5), (24, 2), (48, 1), (200, 1)])
def test_depth_is_bounded_by_the_registers(loads: int, depth: int) -> None:
    assert writer.prefetch_depth(loads) == depth  # 8 steps at most, 48 registers of read-ahead a lane


def test_the_generated_loops_step_by_the_depth() -> None:
    plan = compile(rrnn_template("F"), "real", 4, "torch").plan  # 4 slots, 4 states, outputs "steps"
    forward, backward = writer.prefetch_depth(4), writer.prefetch_depth(4 + 4 + 1)
    cuda, triton = generate_cuda(plan), generate_triton(plan)
    for depth in (forward, backward):
        assert f"for (int64_t t0 = 0; t0 < n_steps; t0 += {depth}) {{" in cuda
        assert f"for t0 in range(0, n_steps, {depth}):" in triton
    # every step of a block is read before the first of them runs
    body = cuda[cuda.index("t0 += 8") :]
    assert body.index(f"x3_{forward - 1}") < body.index("if (i0 < n_steps)")
