"""Vocabularies: token <-> id, with padding (id 0) and unknown (id 1) tokens; JSON-serializable for checkpoints."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from kleene.errors import FormatError

__all__ = ["PAD", "UNK", "Vocabulary"]

PAD = "<pad>"
UNK = "<unk>"


class Vocabulary:
    """An ordered list of distinct tokens; ``tokens[0]`` is the padding token and ``tokens[1]`` the unknown token.

    Raises:
        FormatError: duplicate tokens, or a list that does not start with the padding and unknown tokens.
    """

    def __init__(self, tokens: Sequence[str]):
        tokens = list(tokens)
        if tokens[:2] != [PAD, UNK]:
            raise FormatError(f"vocabulary: must start with {PAD!r}, {UNK!r}, got {tokens[:2]!r}")
        self.tokens = tokens
        self._ids = {token: i for i, token in enumerate(tokens)}
        if len(self._ids) != len(tokens):
            duplicates = sorted(token for token, count in Counter(tokens).items() if count > 1)
            raise FormatError(f"vocabulary: duplicate tokens {duplicates[:5]!r}")

    pad_id = 0
    unk_id = 1

    @classmethod
    def build(
        cls, sequences: Iterable[Iterable[str]], *, min_count: int = 1, max_size: int | None = None
    ) -> Vocabulary:
        """Tokens seen at least ``min_count`` times, most frequent first (ties in first-seen order), at most
        ``max_size`` of them besides the two special tokens."""
        counts: Counter[str] = Counter()
        for sequence in sequences:
            counts.update(sequence)
        frequent = [token for token, count in counts.most_common() if count >= min_count and token not in (PAD, UNK)]
        return cls([PAD, UNK, *frequent[:max_size]])

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: object) -> bool:
        return token in self._ids

    def index(self, token: str) -> int:
        """The id of ``token``, the unknown id when absent."""
        return self._ids.get(token, self.unk_id)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        return [self._ids.get(token, self.unk_id) for token in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    def to_json(self) -> list[str]:
        return list(self.tokens)

    @classmethod
    def from_json(cls, data: object) -> Vocabulary:
        """Raises FormatError unless ``data`` is a list of strings as written by ``to_json``."""
        if not isinstance(data, list) or not all(isinstance(token, str) for token in data):
            raise FormatError("vocabulary: expected a JSON list of token strings")
        return cls(data)
