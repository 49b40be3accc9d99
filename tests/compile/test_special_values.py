"""Special values decided once: every backend gives the same outputs on inputs with NaN and ±inf planted.

NaN in a slot or a constant propagates to every output that depends on it (in every semiring: max and min
included, where ``std::max`` would drop it), and the storage semiring's zero (-inf in log space, +inf for
costs) annihilates as the semiring says. The backends -- the torch reference, the generated C++ and Triton
(interpreted, when installed) -- must agree exactly on where the NaNs are and closely on the values.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from kleene.automata import get_semiring
from kleene.automata.examples import paper_automaton_f
from kleene.compile import Template, compile

from .test_user_semiring import MAX_MIN

SEMIRINGS = ("real", "log", "max-plus", "min-plus", "max-times", MAX_MIN.name)
D = 4


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    names = ["torch"]
    try:
        from kleene.compile.runtime.cpu import compiler

        compiler()
        names.append("cpp")
    except Exception:  # noqa: BLE001 - no compiler: the cpp backend is not compared here
        pass
    try:
        import triton  # noqa: F401

        names.append("triton")
    except ImportError:
        pass
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        yield names


def _inputs(semiring: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Slots (2, 4, 4, D) and constants (3, D) in storage form, with NaN and the storage zero planted."""
    s = get_semiring(semiring)
    gen = torch.Generator().manual_seed(21)
    p = torch.rand((2, 4, 4, D), generator=gen, dtype=torch.float64) * 0.8 + 0.1
    slots = torch.tensor([[[[float(s.to_storage(s.from_probability(float(v)))) for v in row] for row in step]
                           for step in seq] for seq in p.tolist()], dtype=torch.float64)
    constants = torch.tensor([[float(s.to_storage(s.from_probability(0.3 + 0.1 * i))) for _ in range(D)]
                              for i in range(3)], dtype=torch.float64)
    zero = float(s.storage.zero)
    slots[0, 1, 0, 0] = float("nan")  # sequence 0, step 1, slot mu1, dimension 0
    slots[1, 2, 1, 1] = zero  # the semiring's zero on one arc
    slots[1, 0, 2, 0] = float("nan") if semiring != "real" else zero
    constants[0, 3] = float("nan")  # gamma of dimension 3 (read backwards: bidirectional)
    return slots, constants


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_every_backend_agrees_on_nan_and_inf(semiring: str, backends: list[str]) -> None:
    template = Template.from_wfsa(paper_automaton_f(semiring))
    slots, constants = _inputs(semiring)
    lengths = torch.tensor([4, 3])
    results = {}
    for backend in backends:
        module = compile(template, semiring, D, backend, restart=True, bidirectional=True).double()
        with torch.no_grad():
            module.constants.copy_(constants)
        assert module.backend == backend
        results[backend] = module(slots, lengths)
    out, final = results["torch"]
    # NaN reached every later output of its lane, and every output of the lane whose constant is NaN
    assert bool(out[0, 1:, 0].isnan().all()) and not bool(out[0, 0, 0].isnan())
    assert bool(out[:, :, 3].isnan().any())
    for backend, (got_out, got_final) in results.items():
        for got, expected in ((got_out, out), (got_final, final)):
            assert torch.equal(got.isnan(), expected.isnan()), backend
            assert torch.equal(torch.isinf(got), torch.isinf(expected)), backend
            torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12, equal_nan=True, msg=backend)
