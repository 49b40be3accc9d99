"""The option helpers the subcommands share (``kleene.cli._shared``): one integer type and one ``--threads``."""

from __future__ import annotations

import argparse

import pytest
import torch

from kleene.cli import main
from kleene.cli._shared import integer_at_least, set_threads
from kleene.errors import KleeneError


@pytest.mark.parametrize("minimum", [0, 1, 3])
def test_integer_at_least_takes_integers_from_the_minimum_up(minimum: int) -> None:
    parse = integer_at_least(minimum)
    assert [parse(str(n)) for n in (minimum, minimum + 1, 1000)] == [minimum, minimum + 1, 1000]
    for text in (str(minimum - 1), "-7", "x", "1.5", ""):
        with pytest.raises(argparse.ArgumentTypeError, match=f"expected an integer >= {minimum}, got"):
            parse(text)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--max-tokens", "-1"], "--max-tokens: expected an integer >= 0, got -1"),
        (["--top-k", "0"], "--top-k: expected an integer >= 1, got 0"),
        (["--beam-size", "two"], "--beam-size: expected an integer >= 1, got 'two'"),
    ],
)
def test_generate_refuses_counts_below_their_minimum(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:  # argparse refuses before the checkpoint is looked for
        main(["generate", "nowhere", "--prompt", "a", *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and expected in err and "Traceback" not in err


def test_set_threads_applies_the_count_and_refuses_others() -> None:
    before = torch.get_num_threads()
    try:
        set_threads(None)  # torch's choice: nothing changes
        assert torch.get_num_threads() == before
        set_threads(1)
        assert torch.get_num_threads() == 1
        for bad in (0, -1, True, 1.5):
            with pytest.raises(KleeneError, match="--threads"):
                set_threads(bad)  # type: ignore[arg-type]
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
