"""Baselines registered with the trainer: a one-layer max-pooled CNN and a BiLSTM classifier (SoPa §5), a stacked
unidirectional LSTM classifier (the LSTM of Rational Recurrences §6.3), and an LSTM language model."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from kleene.errors import ModelConfigError
from kleene.nn.embedding import check_token_batch, word_embedding
from kleene.nn.registry import register_model
from kleene.nn.rrnn import RationalClassifier, RationalLayer, last_states

__all__ = [
    "BiLSTMClassifier",
    "CNNClassifier",
    "LSTMClassifier",
    "LSTMLanguageModel",
    "LSTMLayer",
    "length_mask",
    "lstm_scan",
]

Tensor = torch.Tensor


def length_mask(lengths: Tensor, max_length: int) -> Tensor:
    """(B, max_length) bool, True at the positions ``t < lengths[b]``."""
    return torch.arange(max_length, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


def lstm_scan(lstm: nn.LSTM, x: Tensor, lengths: Tensor, h0: Tensor | None = None) -> Tensor:
    """``lstm``'s outputs (B, T, H·directions) on ``x`` (B, T, E) (batch first, eval mode: no dropout between
    layers) with each step as torch's ``scan`` operator: what torch.export and ONNX export keep dynamic in the time
    dimension (torch's own LSTM op fixes it, and packing does not trace). The backward direction reads each
    sequence's valid steps from its end (as a packed sequence does); ``h0`` (B, H) is the first layer's initial
    hidden state (cell state zero).

    Caution: T >= 1; outputs at padded positions are not zeroed."""
    from torch._higher_order_ops.scan import scan

    from kleene.compile.reference import reverse_valid

    def run(inputs: Tensor, suffix: str, layer: int, first: Tensor) -> Tensor:
        w_ih, w_hh = getattr(lstm, f"weight_ih_l{layer}{suffix}"), getattr(lstm, f"weight_hh_l{layer}{suffix}")
        bias = getattr(lstm, f"bias_ih_l{layer}{suffix}") + getattr(lstm, f"bias_hh_l{layer}{suffix}")
        projected = nn.functional.linear(inputs, w_ih, bias)

        def step(carry: tuple[Tensor, Tensor], gates_in: Tensor) -> tuple[tuple[Tensor, Tensor], Tensor]:
            h, c = carry
            i, f, g, o = (gates_in + h @ w_hh.t()).chunk(4, -1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            return (h, c), h.clone()

        _, outputs = scan(step, (first, torch.zeros_like(first)), projected.transpose(0, 1))
        return outputs.transpose(0, 1)

    zeros = x.new_zeros((x.shape[0], lstm.hidden_size))
    for layer in range(lstm.num_layers):
        first = h0 if h0 is not None and layer == 0 else zeros
        forward = run(x, "", layer, first.contiguous().clone())
        if lstm.bidirectional:
            backward = reverse_valid(run(reverse_valid(x, lengths), "_reverse", layer, zeros.clone()), lengths)
            forward = torch.cat([forward, backward], -1)
        x = forward
    return x


def _mlp(inputs: int, hidden: int, outputs: int, dropout: float) -> nn.Sequential:
    """SoPa's two-layer MLP head."""
    return nn.Sequential(nn.Dropout(dropout), nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, outputs))


class CNNClassifier(nn.Module):
    """A one-layer CNN: windows of ``window`` embeddings -> ``channels`` ReLU filters -> max over the windows that
    start inside the sentence -> MLP (Kim, 2014; the CNN baseline of SoPa, which §4 shows is a restricted SoPa).
    Sentences shorter than the window are padded with zero vectors."""

    task = "classification"

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        embedding_dim: int = 50,
        channels: int = 100,
        window: int = 4,
        mlp_hidden: int = 100,
        dropout: float = 0.1,
        freeze_embeddings: bool = False,
    ):
        super().__init__()
        self.embedding = word_embedding(vocab_size, embedding_dim, freeze_embeddings)
        self.window = window
        self.dropout = nn.Dropout(dropout)
        self.convolution = nn.Conv1d(embedding_dim, channels, window)
        self.head = _mlp(channels, mlp_hidden, num_classes, dropout)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """Logits (B, C); an empty document (length 0) pools to zeros.

        Raises:
            LayerError: tokens or lengths that do not fit (see ``check_token_batch``).
        """
        tokens, lengths = check_token_batch(self.embedding, tokens, lengths, type(self).__name__)
        embedded = self.dropout(self.embedding(tokens)) * length_mask(lengths, tokens.shape[1]).unsqueeze(-1)
        # T = 0: one more zero column, so that the convolution has `window` inputs (no window starts there)
        extra = self.window - 1 + (tokens.shape[1] == 0)
        padded = nn.functional.pad(embedded.transpose(1, 2), (0, extra))
        features = torch.relu(self.convolution(padded))  # (B, channels, T): window t covers tokens t..t+window-1
        valid = length_mask(lengths, features.shape[2]).unsqueeze(1)
        pooled = features.masked_fill(~valid, float("-inf")).amax(dim=2)
        pooled = torch.where((lengths > 0)[:, None], pooled, torch.zeros_like(pooled))
        return self.head(pooled)


class BiLSTMClassifier(nn.Module):
    """A one-layer BiLSTM whose hidden states, averaged over the sentence, feed an MLP (SoPa's BiLSTM baseline)."""

    task = "classification"

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        embedding_dim: int = 50,
        hidden_size: int = 100,
        mlp_hidden: int = 100,
        dropout: float = 0.1,
        freeze_embeddings: bool = False,
    ):
        super().__init__()
        self.embedding = word_embedding(vocab_size, embedding_dim, freeze_embeddings)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, batch_first=True, bidirectional=True)
        self.head = _mlp(2 * hidden_size, mlp_hidden, num_classes, dropout)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """Logits (B, C); an empty document (length 0) averages to zeros.

        Raises:
            LayerError: tokens or lengths that do not fit (see ``check_token_batch``).
        """
        tokens, lengths = check_token_batch(self.embedding, tokens, lengths, type(self).__name__)
        steps = tokens.shape[1]
        if tokens.shape[0] == 0:
            return self.head(self.embedding.weight.new_zeros((0, 2 * self.lstm.hidden_size)))
        # packing needs one step per row: empty rows read one padding step, whose states are masked out below
        embedded = nn.functional.pad(self.dropout(self.embedding(tokens)), (0, 0, 0, 1 if steps == 0 else 0))
        if torch.compiler.is_exporting():  # export cannot trace packing: the same LSTM as one traced step
            padded = lstm_scan(self.lstm, embedded, lengths)
        else:
            packed = nn.utils.rnn.pack_padded_sequence(
                embedded, lengths.clamp_min(1).cpu(), batch_first=True, enforce_sorted=False
            )
            states, _ = self.lstm(packed)
            padded, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=embedded.shape[1])
        padded = padded * length_mask(lengths, embedded.shape[1]).unsqueeze(-1).to(padded.dtype)
        average = padded.sum(dim=1) / lengths.clamp_min(1).unsqueeze(1).to(padded.dtype)
        return self.head(average)


class LSTMLayer(RationalLayer):
    """One unidirectional ``torch.nn.LSTM`` layer behind the ``RationalLayer`` interface, so that an LSTM stack gets
    exactly the RRNNs' dropouts (``RationalStack``) and classifier head (``RationalClassifier``). Not rational: the
    gates read ``h_{t-1}``.

    Note:
        Padding sits at the end of each row, so the outputs at valid positions do not depend on it; padded positions
        of the output are zero and the final state is ``h`` at each sequence's last valid step.
    """

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.input_size, self.output_size = input_size, hidden_size
        self.lstm = nn.LSTM(input_size, hidden_size, batch_first=True)

    def forward(self, x: Tensor, lengths: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
        lengths = self.check(x, lengths)
        if x.shape[0] == 0 or x.shape[1] == 0:  # torch's LSTM refuses empty batches and sequences
            states = x.new_zeros((x.shape[0], x.shape[1], self.output_size))
            return states, x.new_zeros((x.shape[0], self.output_size)) if h0 is None else h0
        if torch.compiler.is_exporting():  # torch's LSTM op would fix the time dimension of an exported program
            states = lstm_scan(self.lstm, x, lengths, h0)
        else:
            initial = None if h0 is None else (h0.unsqueeze(0), torch.zeros_like(h0).unsqueeze(0))
            states, _ = self.lstm(x, initial)
        states = states * length_mask(lengths, x.shape[1]).unsqueeze(-1).to(states.dtype)
        return states, last_states(states, lengths, bidirectional=False)


class LSTMClassifier(RationalClassifier):
    """A stacked unidirectional LSTM classifier built like ``RRNNClassifier`` (Rational Recurrences §6.3): frozen
    embeddings (+ dropout), ``num_layers`` LSTM layers with vertical and variational recurrent dropout on each layer's
    input, the last valid hidden state, a 2-layer tanh MLP."""

    def __init__(self, vocab_size: int, num_classes: int, **options: Any):
        """``options`` as in ``RationalClassifier`` (hidden_size, num_layers, dropouts, ...); no backend option."""
        super().__init__(vocab_size, num_classes, LSTMLayer, **options)


class LSTMLanguageModel(nn.Module):
    """Embedding -> ``num_layers`` LSTM layers -> dropout -> softmax layer (weights tied to the embedding when the
    sizes agree and ``tie_weights``)."""

    task = "language_model"

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 128,
        hidden_size: int = 256,
        num_layers: int = 1,
        dropout: float = 0.1,
        tie_weights: bool = False,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, num_layers, batch_first=True)
        self.output = nn.Linear(hidden_size, vocab_size)
        if tie_weights:
            if hidden_size != embedding_dim:
                raise ModelConfigError(
                    f"tie_weights needs hidden_size == embedding_dim, got {hidden_size}, {embedding_dim}"
                )
            self.output.weight = self.embedding.weight

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """Next-token logits (B, T, V) (``lengths`` is checked; the logits at padded positions are not masked).

        Raises:
            LayerError: tokens or lengths that do not fit (see ``check_token_batch``).
        """
        tokens, lengths = check_token_batch(self.embedding, tokens, lengths, type(self).__name__)
        if tokens.shape[0] == 0 or tokens.shape[1] == 0:  # torch's LSTM refuses empty batches and sequences
            return self.output.weight.new_zeros((*tokens.shape, self.output.out_features))
        embedded = self.dropout(self.embedding(tokens))
        if torch.compiler.is_exporting():  # torch's LSTM op would fix the time dimension of an exported program
            states = lstm_scan(self.lstm, embedded, lengths)
        else:
            states, _ = self.lstm(embedded)
        return self.output(self.dropout(states))


register_model("cnn", CNNClassifier)
register_model("bilstm", BiLSTMClassifier)
register_model("lstm", LSTMClassifier)
register_model("lstm-lm", LSTMLanguageModel)
