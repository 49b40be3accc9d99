"""ISAN, the input-switched affine network (Foerster et al., 2017), as the WFSA of Rational Recurrences §4.3 / C.

    c_t = W_{x_t} c_{t-1} + b_{x_t}

is not elementwise, but rational: one WFSA with a source state q0 (self-loop 1) and states q1..qd, arcs
q0 -b_j(α)-> qj and qi -W_ji(α)-> qj, started in q0, has ``z_t[q_j] = [c_t]_j`` (Appendix C uses one such WFSA per
output dimension with final state q_j; here the d dimensions share one run and are read from the WFSA's state
vector). ``W_x`` and ``b_x`` are affine functions of the symbol's vector (its embedding row), so they depend on
the current symbol only; with a learned embedding this is the per-symbol lookup of the original ISAN.

Every state reaches every state, so the WFSA is dense: its Forward step is a batched semiring matrix-vector
product, which runs inside a generated kernel of the dense path (``kleene.compile.runtime.dense``: every step in
one call, generic in d), not as a template with d² unrolled arcs (``isan_template`` states the same automaton as
a template, for drawing and for comparing with the compiled path). ``backend="torch"`` runs the reference: one
``Semiring.matmul`` of the storage semiring per step (``torch.bmm`` in the real semiring) in a Python loop.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NoReturn

import torch

from kleene.automata.semiring import Semiring
from kleene.compile import Template
from kleene.compile.module import backends, refuse_torchscript
from kleene.compile.runtime.dense import choose_dense_backend, dense_runner, dense_step
from kleene.errors import CompileError, KleeneError, LayerError
from kleene.nn import projection
from kleene.nn.registry import register_model
from kleene.nn.rrnn import (
    RationalClassifier,
    RationalLanguageModel,
    RationalLayer,
    chain_template,
    layer_semiring,
    task_builder,
)

__all__ = ["ISANClassifier", "ISANLanguageModel", "ISANLayer", "isan_template"]

Tensor = torch.Tensor


def isan_template(size: int) -> Template:
    """The ISAN WFSA with ``size`` hidden states plus the source q0 (slots ``b{j}`` and ``w{j}_{i}``)."""
    states = ["q0"] + [f"q{j}" for j in range(1, size + 1)]
    moves: list[tuple[str, str, list[str]]] = [("q0", "q0", [])]
    moves += [("q0", f"q{j}", [f"b{j}"]) for j in range(1, size + 1)]
    moves += [(f"q{i}", f"q{j}", [f"w{j}_{i}"]) for j in range(1, size + 1) for i in range(1, size + 1)]
    return chain_template(f"isan{size}", states, moves, final=[(q, None) for q in states[1:]])


class ISANLayer(RationalLayer):
    """An ISAN layer of ``hidden_size`` units; ``h_t = c_t`` (the network is affine, as in the paper).

    ``semiring`` (default real; any ``layer_semiring``): ``c_i = ⊕_j W_ij ⊗ c_j ⊕ b_i`` with ``W_x``, ``b_x`` stored
    values (the affine maps' outputs as they are; max-times: logarithms); ``h`` holds stored values. The matrix starts
    near a contraction: the element of probability 1/2 on the diagonal, of 1/(100 d) elsewhere, plus small noise.
    The state (``forward``'s second result, ``h0``) is the WFSA's (B, d + 1, 1): the source q0 (one) and c.

    ``backend``: "auto" (the dense path's kernels: "cpp" on the CPU, "triton"/"cuda" first where a GPU is present;
    the torch loop, with a warning, when none builds), one of them by name, or "torch" (the reference loop, one
    batched semiring matrix-vector product per step). ``self.backend`` is the one chosen.

    Caution:
        The kernels run float32 and float64; other dtypes (and tensors on a device the chosen backend does not
        run on) raise ``LayerError``.
    """

    cell_family = "isan"

    @property
    def reads_both_ways(self) -> bool:
        return False

    def __init__(
        self, input_size: int, hidden_size: int, *, semiring: str | Semiring | None = None, backend: str = "auto"
    ):
        super().__init__()
        self.algebra = layer_semiring("real" if semiring is None else semiring)
        self.storage, self.semiring = self.algebra.storage, self.algebra.name
        if backend != "auto" and backend not in backends():
            raise LayerError(f"ISANLayer: unknown backend {backend!r}; available: {', '.join(backends())} and 'auto'")
        try:
            self.backend = choose_dense_backend(self.storage, backend)
            self._dense = None if self.backend == "torch" else dense_runner(self.storage, self.backend)
        except KleeneError as error:
            raise LayerError(f"ISANLayer: backend {backend!r}: {error}") from None
        self.input_size = input_size
        self.size = self.output_size = hidden_size
        # W_x = reshape(A v_x + a), row-major W[i, j]
        self.matrix = projection.Linear(input_size, hidden_size * hidden_size)
        self.offset = projection.Linear(input_size, hidden_size)  # b_x
        d = hidden_size
        diagonal, elsewhere = (self.algebra.stored_probability(p) for p in (0.5, 0.01 / d))
        with torch.no_grad():
            self.matrix.weight.mul_(0.1)
            self.matrix.bias.copy_(torch.where(torch.eye(d, dtype=torch.bool), diagonal, elsewhere).reshape(-1))

    def __prepare_scriptable__(self) -> NoReturn:
        refuse_torchscript("torch.jit.script of a model holding an ISAN layer")

    def cell_states(self, x: Tensor, lengths: Tensor) -> Tensor:
        return self(x, lengths)[0]  # h_t = c_t

    def forward(self, x: Tensor, lengths: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        lengths = self.check(x, lengths)
        b, t, _ = x.shape
        d, s = self.size, self.storage
        if h0 is None:  # the source q0 holds one, the units zero
            h0 = x.new_full((b, d + 1, 1), float(s.zero))
            h0[:, 0] = float(s.one)
        elif h0.shape != (b, d + 1, 1):
            raise LayerError(f"ISANLayer: h0 must have shape {(b, d + 1, 1)}, got {tuple(h0.shape)}")
        source, c = h0[:, :1, 0], h0[:, 1:, 0]
        matrices = self.matrix(x).view(b, t, d, d)
        offsets = s.times(source[:, None, :], self.offset(x))  # q0 ⊗ b_x
        if self._dense is not None:
            try:
                h, c = self._dense(matrices, offsets, lengths, c)
            except CompileError as error:
                raise LayerError(f"ISANLayer: {error}") from None
            return h, torch.cat([source, c], 1)[:, :, None]
        outputs = []
        for step, (matrix, offset) in enumerate(zip(matrices.unbind(1), offsets.unbind(1))):
            c, out = dense_step(s, matrix, offset, c, lengths > step)
            outputs.append(out)
        h = torch.stack(outputs, 1) if outputs else x.new_zeros((b, 0, d))
        return h, torch.cat([source, c], 1)[:, :, None]


class ISANClassifier(RationalClassifier):
    """ISAN text classifier (one layer of 32 units by default); ``options`` as in ``RationalClassifier``."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        *,
        hidden_size: int = 32,
        num_layers: int = 1,
        semiring: str | None = None,
        **options: Any,
    ):
        layer = partial(ISANLayer, semiring=semiring)
        super().__init__(vocab_size, num_classes, layer, hidden_size=hidden_size, num_layers=num_layers, **options)


class ISANLanguageModel(RationalLanguageModel):
    """ISAN language model (one layer of 64 units, 64-d embeddings by default); ``options`` as in the base."""

    def __init__(
        self,
        vocab_size: int,
        *,
        hidden_size: int = 64,
        num_layers: int = 1,
        embedding_dim: int = 64,
        semiring: str | None = None,
        **options: Any,
    ):
        super().__init__(
            vocab_size,
            partial(ISANLayer, semiring=semiring),
            hidden_size=hidden_size,
            num_layers=num_layers,
            embedding_dim=embedding_dim,
            **options,
        )


register_model("isan", task_builder(ISANClassifier, ISANLanguageModel))
