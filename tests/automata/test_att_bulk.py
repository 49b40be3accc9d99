"""The bulk AT&T readers (the compiled scanner of kleene.automata.native and the numpy one) against the general reader:
the same automaton from the same large text, and the general reader's errors (naming the line) on bad lines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kleene.automata import AlphabetError, FormatError, SymbolTable, WeightError, native
from kleene.automata import att as att_module
from kleene.automata.att import read_att

WEIGHT_TEXTS = ["0", "1", "2.5", ".5", "5.", "-0", "1e-5", "3.25E+2", "inf", "-Infinity", "INF", "0.1",
                "123456789012345678901234.5", "1e400", "4.9e-324", "2.2250738585072014e-308", "0.30000000000000004",
                "9007199254740993", "-7.000001"]


def _text(rng: np.random.Generator, states: int, arcs: int, weights: list[str], sep: str = "\t") -> str:
    src = rng.integers(0, states, arcs)
    dst = rng.integers(0, states, arcs)
    label = rng.integers(100, 130, arcs)  # no weight below is an integer equal to its label (ambiguous lines)
    lines = []
    for k, (s, d, lab) in enumerate(zip(src.tolist(), dst.tolist(), label.tolist())):
        w = weights[k % len(weights)] if k % 7 else None
        lines.append(sep.join([str(s), str(d), str(lab)] + ([w] if w is not None else [])))
    for k, q in enumerate(rng.choice(states, states // 5, replace=False).tolist()):
        lines.append(f"{q}{sep}{weights[k % len(weights)]}" if k % 3 else str(q))
    return "\n".join(lines) + "\n"


def _general(text: str, *args: object, **kwargs: object) -> object:
    saved = att_module._FAST_MIN_CHARS
    att_module._FAST_MIN_CHARS = 1 << 62
    try:
        return read_att(text, *args, **kwargs)  # type: ignore[arg-type]
    finally:
        att_module._FAST_MIN_CHARS = saved


def _same(a: object, b: object) -> None:
    assert a.states == b.states  # type: ignore[attr-defined]
    assert a.initial == b.initial  # type: ignore[attr-defined]
    assert a.final == b.final  # type: ignore[attr-defined]
    assert list(a.alphabet) == list(b.alphabet)  # type: ignore[attr-defined]
    assert [(x.src, x.dst, x.label) for x in a.arcs] == [(x.src, x.dst, x.label) for x in b.arcs]  # type: ignore
    wa = [x.weight for x in a.arcs]  # type: ignore[attr-defined]
    wb = [x.weight for x in b.arcs]  # type: ignore[attr-defined]
    assert wa == wb  # bit-identical: both parse the same decimal text correctly rounded


needs_compiler = pytest.mark.skipif(native.library() is None, reason="no C++ compiler (the bulk path is numpy)")


@needs_compiler
@pytest.mark.parametrize("semiring, arc_type", [("min-plus", None), ("log", "log"), ("real", "log"),
                                                ("max-plus", "tropical"), ("max-times", "tropical")])
@pytest.mark.slow
def test_compiled_reader_equals_general_reader(semiring: str, arc_type: str | None) -> None:
    rng = np.random.default_rng(1)
    weights = [w for w in WEIGHT_TEXTS if "inf" not in w.lower() and w != "1e400"]
    if semiring in ("real", "max-times"):
        weights = [w for w in weights if not w.startswith("-") and float(w) < 700]
    text = _text(rng, 3000, 6000, weights)
    assert len(text) >= att_module._FAST_MIN_CHARS
    scanned = native.scan_att(text, ambiguous4=True)
    assert scanned is not None  # the compiled path reads this file
    fast = read_att(text, semiring, arc_type=arc_type)
    assert fast._arcs is None  # read into the arc store
    _same(fast, _general(text, semiring, arc_type=arc_type))


@needs_compiler
def test_compiled_reader_weights_are_pythons_floats() -> None:
    lines = [f"{k}\t{k + 1}\t1\t{w}" for k, w in enumerate(WEIGHT_TEXTS * 400)]
    scanned = native.scan_att("\n".join(lines) + "\n", ambiguous4=False)
    assert scanned is not None
    expected = [float(w) for w in WEIGHT_TEXTS * 400]
    assert scanned.weight.tolist() == expected
    assert [math.copysign(1, x) for x in scanned.weight.tolist()] == [math.copysign(1, x) for x in expected]


@needs_compiler
def test_compiled_reader_sparse_ids_spaces_crlf_and_a_table() -> None:
    rng = np.random.default_rng(2)
    text = _text(rng, 4000, 8000, ["1.5", "0.25", "3"], sep=" ").replace("\n", "\r\n")
    text = "\n".join(" ".join(str(int(f) * 3 + 5) if (i < 2 and len(line.split()) >= 3) or i == 0 else f
                              for i, f in enumerate(line.split())) for line in text.splitlines()) + "\n"
    table = SymbolTable([f"s{k}" for k in range(1, 130)])
    assert native.scan_att(text, ambiguous4=True) is not None
    _same(read_att(text, "min-plus", symbols=table), _general(text, "min-plus", symbols=table))


@pytest.mark.slow
def test_bulk_readers_fall_back_to_the_general_readers_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    good = _text(rng, 3000, 6000, ["1.5", "2"]).splitlines()
    table = SymbolTable([str(k) for k in range(1, 130)])
    for native_off in ("", "1"):
        monkeypatch.setenv("KLEENE_NO_NATIVE", native_off)
        bad = [*good[:5000], "12 13 4 abc", *good[5000:]]
        with pytest.raises(FormatError, match=r"line 5001 \('12 13 4 abc'\): weight 'abc' is not a number"):
            read_att("\n".join(bad), "min-plus")
        bad = [*good[:4000], "12 x 4 1", *good[4000:]]
        with pytest.raises(FormatError, match=r"line 4001 .*state 'x' is not a non-negative integer"):
            read_att("\n".join(bad), "min-plus")
        bad = [*good[:3000], "12 13 999 1", *good[3000:]]
        with pytest.raises(AlphabetError, match=r"line 3001 .*label id 999 is not in the symbol table"):
            read_att("\n".join(bad), "min-plus", symbols=table)
        bad = [*good[:10], "12 13 4 -1", *good[10:]]
        with pytest.raises(WeightError, match=r"line 11 "):
            read_att("\n".join(bad), "max-times")
        odd = "\n".join([*good[:10], "12 13 104 104", *good[10:]])  # acceptor weight 104 or transducer labels:
        _same(read_att(odd, "min-plus"), _general(odd, "min-plus"))  # the general reader decides (acceptor here)
        bad = [*good[:10], "12\x0b13 4 1", *good[10:]]  # a vertical tab separates nothing in OpenFst
        with pytest.raises(FormatError, match="line 11"):
            read_att("\n".join(bad), "min-plus")


def test_compiled_reader_is_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    text = _text(rng, 3000, 6000, ["1.5", "0.125"])
    monkeypatch.setenv("KLEENE_NO_NATIVE", "1")
    assert native.library() is None and native.scan_att(text, ambiguous4=True) is None
    _same(read_att(text, "min-plus"), _general(text, "min-plus"))
