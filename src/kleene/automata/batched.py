"""Batched, differentiable Forward over padded torch batches.

torch is used here only as an array backend: the recursion and the dense step are those of ``algorithms.score``
(``kleene.automata.recursion``), applied to a batch of strings given as per-step transition matrices, with a lengths
mask. Gradients flow to every weight tensor.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kleene.automata.closure import check_epsilon_cap
from kleene.automata.labels import SymbolTable
from kleene.automata.recursion import MatrixStepper, run_forward
from kleene.automata.semiring import Semiring, get_semiring
from kleene.automata.sparse import useful_states
from kleene.automata.star import closure_on_useful
from kleene.automata.weights import Env
from kleene.errors import AlphabetError, ArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from kleene.automata.wfsa import WFSA


def batched_forward(
    transitions: torch.Tensor,
    lengths: torch.Tensor,
    initial: torch.Tensor,
    final: torch.Tensor,
    semiring: str | Semiring,
    epsilon: torch.Tensor | None = None,
    epsilon_cap: int | None = None,
    per_step: bool = False,
) -> torch.Tensor:
    """Forward scores of a padded batch: ``recursion.run_forward`` with the dense stepper on tensors.

    Args:
        transitions: ``[B, T, Q, Q]`` semiring values; step t of string b.
        lengths: ``[B]`` true lengths (``0 <= lengths <= T``); steps past a string's length are ignored, so
            padding never changes a result.
        initial, final: ``[Q]`` or ``[B, Q]`` initial and final weights.
        epsilon: optional ``[Q, Q]`` epsilon weights, closed exactly (``epsilon_cap=None``) or with at most
            ``epsilon_cap`` in a row.
        per_step: return ``[B, T]`` prefix scores (semiring zero past the length) instead of ``[B]`` whole-string
            scores.

    Raises:
        ArgumentError: inconsistent shapes or lengths, or an epsilon cap that is not None or an integer >= 0,
            named.
        DivergenceError: a divergent exact epsilon closure on a successful path of some string.
    """
    import torch

    s = get_semiring(semiring)
    check_epsilon_cap(epsilon_cap, "batched_forward")
    if transitions.dim() != 4 or transitions.shape[-1] != transitions.shape[-2]:
        raise ArgumentError(
            f"batched_forward: transitions must be [B, T, Q, Q]; got shape {tuple(transitions.shape)}"
        )
    batch, steps, q, _ = transitions.shape
    if tuple(lengths.shape) != (batch,):
        raise ArgumentError(f"batched_forward: lengths must be [B] = [{batch}]; got shape {tuple(lengths.shape)}")
    if batch and (int(lengths.min()) < 0 or int(lengths.max()) > steps):
        raise ArgumentError(
            f"batched_forward: lengths must lie in [0, T={steps}]; got min {int(lengths.min())}, "
            f"max {int(lengths.max())}"
        )
    for name, vec in (("initial", initial), ("final", final)):
        if vec.dim() not in (1, 2) or vec.shape[-1] != q or (vec.dim() == 2 and vec.shape[0] != batch):
            raise ArgumentError(
                f"batched_forward: {name} must be [Q] or [B, Q] with B={batch}, Q={q}; got shape {tuple(vec.shape)}"
            )
    if epsilon is not None and tuple(epsilon.shape) != (q, q):
        raise ArgumentError(f"batched_forward: epsilon must be [Q, Q] with Q={q}; got shape {tuple(epsilon.shape)}")
    closure = None if epsilon is None else _useful_closure(transitions, initial, final, epsilon, s, epsilon_cap)
    stepper = MatrixStepper(s, initial.expand(batch, q), final.expand(batch, q), closure, lambda step, t: step)
    vector, prefixes = run_forward(stepper, s, transitions.unbind(1), lengths, per_step)
    if per_step:
        return torch.stack(prefixes, dim=1) if prefixes else s.zeros((batch, 0), like=transitions)
    total: torch.Tensor = stepper.finish(vector)
    return total


def _useful_closure(
    transitions: torch.Tensor, initial: torch.Tensor, final: torch.Tensor, epsilon: torch.Tensor, s: Semiring,
    epsilon_cap: int | None,
) -> torch.Tensor:
    """The epsilon closure (``closure_on_useful``); when the exact star diverges, the closure over the states
    accessible and co-accessible along the non-zero weights of the batch (any step of any string, and the epsilon
    arcs): the others' cycles serve no score.

    Caution:
        The states are those of the batch's union graph, which contains every string's successful paths but may
        contain more (an arc of step 1 of one string followed by an arc of step 3 of another): a divergent cycle
        there raises where ``score`` of each string alone would not.
    """

    def useful() -> np.ndarray:
        moves = (transitions.detach() != s.zero).flatten(0, 1).any(0).cpu().numpy()
        moves |= (epsilon.detach() != s.zero).cpu().numpy()
        src, dst = np.nonzero(moves)
        starts = (initial.detach() != s.zero).reshape(-1, moves.shape[0]).any(0).cpu().numpy()
        ends = (final.detach() != s.zero).reshape(-1, moves.shape[0]).any(0).cpu().numpy()
        live: np.ndarray = useful_states(src, dst, moves.shape[0], starts, ends)
        return live

    closure: torch.Tensor = closure_on_useful(epsilon, s, epsilon_cap, None, useful)
    return closure


@dataclass
class DenseWFSA:
    """A WFSA's weights as tensors over a symbol table: ``emissions[id]`` is symbol id's Q x Q matrix.

    Row 0 (the epsilon id) of ``emissions`` is semiring zero and serves as padding.
    Set ``requires_grad`` on any tensor to differentiate scores with respect to it.
    """

    emissions: torch.Tensor
    epsilon: torch.Tensor | None
    initial: torch.Tensor
    final: torch.Tensor
    semiring: Semiring
    symbols: SymbolTable

    @classmethod
    def from_wfsa(
        cls, wfsa: WFSA, symbols: SymbolTable | None = None, env: Env | None = None, dtype: Any = None
    ) -> DenseWFSA:
        """Tabulate ``wfsa`` (symbolic weights bound by ``env``) over ``symbols`` (default: its alphabet)."""
        import torch

        table = symbols if symbols is not None else wfsa.alphabet
        if table is None:
            raise AlphabetError("DenseWFSA needs a symbol table: the automaton declares no alphabet")
        s = wfsa.semiring
        dtype = dtype or torch.from_numpy(np.zeros(0, dtype=s.numpy_dtype)).dtype
        q = wfsa.num_states
        rows = [s.zeros((q, q))] + [wfsa.transition_matrix(x, env) for x in table]

        def tensor(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(np.asarray(a), dtype=dtype)

        return cls(
            emissions=tensor(np.stack(rows)),
            epsilon=tensor(wfsa.epsilon_matrix(env)) if wfsa.has_epsilons else None,
            initial=tensor(wfsa.vector(wfsa.initial, env)),
            final=tensor(wfsa.vector(wfsa.final, env)),
            semiring=s,
            symbols=table,
        )

    def encode(self, strings: Sequence[Sequence[Hashable]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded ``[B, T]`` symbol ids (0 = padding) and ``[B]`` lengths."""
        import torch

        longest = max((len(x) for x in strings), default=0)
        ids = torch.zeros((len(strings), longest), dtype=torch.long)
        for b, x in enumerate(strings):
            for t, symbol in enumerate(x):
                ids[b, t] = self.symbols.id(symbol)
        return ids, torch.tensor([len(x) for x in strings], dtype=torch.long)

    def score_batch(
        self, ids: torch.Tensor, lengths: torch.Tensor, epsilon_cap: int | None = None, per_step: bool = False
    ) -> torch.Tensor:
        """Forward scores of padded id sequences ``[B, T]`` with ``[B]`` lengths."""
        return batched_forward(
            self.emissions[ids], lengths, self.initial, self.final, self.semiring,
            self.epsilon, epsilon_cap, per_step,
        )

    def score_strings(self, strings: Sequence[Sequence[Hashable]], epsilon_cap: int | None = None) -> torch.Tensor:
        ids, lengths = self.encode(strings)
        return self.score_batch(ids, lengths, epsilon_cap)
