"""Pictures of a trained SoPa: arc words against the paper's transition function (eq. 3-4) computed by hand, the
diagram's graph, Table 2 columns from hand-made matches, Table 3 colours from hand-made contributions, curves."""

from __future__ import annotations

import html
import re

import pytest
import torch

from kleene.data.vocab import Vocabulary
from kleene.nn import build_model
from kleene.nn.sopa import PatternGroup, SoPaClassifier
from kleene.viz import (
    END_TOKEN,
    START_TOKEN,
    Explanation,
    InterpretError,
    PatternContribution,
    PatternStep,
    PhraseMatch,
)
from kleene.viz.draw import (
    PALETTE,
    PatternWords,
    contribution_margin,
    explanation_html,
    pattern_dot,
    pattern_svg,
    pattern_words,
    phrase_table_html,
    svg_fragment,
    training_curves_svg,
)

WORDS = ["good", "bad", "movie", "plot", "not", "very", "a&b", "<i>"]
VOCAB = Vocabulary(["<pad>", "<unk>", *WORDS])


def sopa(semiring: str = "max-times", mode: str = "paper", **kwargs: object) -> SoPaClassifier:
    torch.manual_seed(1)
    model = SoPaClassifier(
        len(VOCAB),
        2,
        embedding_dim=5,
        patterns="3-2_4-1",
        semiring=semiring,
        mode=mode,
        mlp_hidden=4,
        **kwargs,  # type: ignore[arg-type]
    )
    return model.double().eval()


def encode(raw: torch.Tensor, encoder: str) -> torch.Tensor:
    """E of eq. 3 as a number the MLP reads."""
    return torch.sigmoid(raw) if encoder == "sigmoid" else raw


def by_hand(model: SoPaClassifier, pattern: int) -> tuple[PatternGroup, int]:
    first = 0
    for group in model.patterns.groups:
        assert isinstance(group, PatternGroup)
        if pattern < first + group.count:
            return group, pattern - first
        first += group.count
    raise AssertionError(pattern)


@pytest.mark.parametrize(
    ("semiring", "mode", "kwargs"),
    [
        ("max-times", "paper", {}),
        ("max-plus", "paper", {"encoder": "identity"}),
        ("real", "paper", {}),
        ("max-times", "reference", {"self_loop_scale": 0.7, "epsilon_scale": 0.4}),
        ("real", "reference", {"shared_self_loops": "per-state", "epsilon_scale": 0.4}),
    ],
)
def test_arc_words_are_the_best_words_of_eq_3(semiring: str, mode: str, kwargs: dict[str, object]) -> None:
    model = sopa(semiring, mode, **kwargs)
    encoder = model.patterns.encoder
    k = 3
    found = pattern_words(model, VOCAB, [0, 1, 2], k=k)
    candidates = [*WORDS, START_TOKEN, END_TOKEN]
    vectors = torch.cat([model.embedding.weight[2:], model.start_vector[None], model.end_vector[None]])
    for pattern, words in found.items():
        group, column = by_hand(model, pattern)
        assert words.pattern == pattern and words.length == group.length
        bias_scale = group.bias_scale
        main = encode(vectors @ group.main_weight[column].T + bias_scale * group.main_bias[column], encoder)
        if group.loop_share is not None:  # shared: the main path's rows (END: its own), times E(learned scale)
            rows = torch.cat([group.main_weight[column], group.end_weight[column]])
            biases = torch.cat([group.main_bias[column], group.end_bias[column]])
            loop = encode(vectors @ rows.T + bias_scale * biases, encoder)
            loop = loop * encode(group.loop_share.raw[column], encoder)
        else:
            loop = encode(vectors @ group.loop_weight[column].T + bias_scale * group.loop_bias[column], encoder)
        if mode == "reference" and "self_loop_scale" in kwargs:  # the authors' fixed scale, encoded like a transition
            loop = loop * torch.sigmoid(torch.tensor(0.7, dtype=torch.float64))
        for arcs, expected in ((words.main, main), (words.self_loops, loop)):
            assert arcs is not None and len(arcs) == expected.shape[1]
            for arc, best in enumerate(arcs):
                ranked = sorted(zip(expected[:, arc].tolist(), candidates), reverse=True)[:k]
                assert [word for word, _ in best] == [word for _, word in ranked]
                assert [weight for _, weight in best] == pytest.approx([weight for weight, _ in ranked], abs=1e-9)
        raw = group.recurrence.parametrizations["constants"].original[:, column]
        epsilons = torch.sigmoid(raw) if encoder == "sigmoid" else raw
        if mode == "reference":
            epsilons = epsilons * torch.sigmoid(torch.tensor(0.4, dtype=torch.float64))
        assert words.epsilons == pytest.approx(epsilons.tolist(), abs=1e-9)


def test_arc_words_restricted_to_given_words_and_without_arcs_the_model_lacks() -> None:
    model = sopa(self_loops=False, epsilons=False, boundary_padding=False)
    (words,) = pattern_words(model, VOCAB, [2], k=10, words=["good", "bad"]).values()
    assert words.self_loops is None and words.epsilons is None
    assert all(sorted(w for w, _ in arc) == ["bad", "good"] for arc in words.main)  # k is capped by the candidates


def test_arc_words_errors() -> None:
    model = sopa()
    with pytest.raises(InterpretError, match="not in the bank"):
        pattern_words(model, VOCAB, [3])
    with pytest.raises(InterpretError, match="not in the vocabulary"):
        pattern_words(model, VOCAB, [0], words=["good", "zebra"])
    with pytest.raises(InterpretError, match="k must be"):
        pattern_words(model, VOCAB, [0], k=0)
    cnn = build_model("cnn", vocab_size=len(VOCAB), num_classes=2)
    with pytest.raises(InterpretError, match="SoPaClassifier"):
        pattern_words(cnn, VOCAB, [0])  # type: ignore[arg-type]


HAND_MADE = PatternWords(
    pattern=7,
    length=3,
    main=((("great", 0.91), ("a&b", 0.5)), (("movie", 0.8),)),
    self_loops=((("<i>", 0.1),), (("very", 0.3),), (("!", 0.2),)),
    epsilons=(0.25, 0.125),
)


def test_pattern_diagram_is_the_chain_automaton() -> None:
    dot = pattern_dot(HAND_MADE, title="pattern 7")
    edges = re.findall(r"^\s*(s\d+) -> (s\d+)", dot.source, flags=re.MULTILINE)
    main = [("s0", "s1"), ("s1", "s2")]
    loops = [("s0", "s0"), ("s1", "s1"), ("s2", "s2")]
    assert sorted(edges) == sorted(main + main + loops)  # main arcs, epsilon arcs, self-loops
    assert dot.source.count("style=dashed") == 2 and "ε / 0.25" in dot.source and "ε / 0.12" in dot.source
    assert "doublecircle" in dot.source and "penwidth=2.2" in dot.source


def test_pattern_svg_escapes_words_and_uses_pixels() -> None:
    svg = pattern_svg(HAND_MADE)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>") and "<?xml" not in svg and "<!--" not in svg
    assert re.match(r'<svg width="[\d.]+px" height="[\d.]+px"', svg)
    assert "a&amp;b" in svg and "&lt;i&gt;" in svg and ">great<" in svg and ">0.91<" in svg
    assert PALETTE["main"] in svg and PALETTE["self-loop"] in svg and PALETTE["epsilon"] in svg


def test_svg_fragment() -> None:
    document = '<?xml version="1.0"?>\n<!DOCTYPE svg>\n<!-- made by hand -->\n<svg><!-- x --><g/></svg>\n'
    assert svg_fragment(document) == "<svg><g/></svg>"
    with pytest.raises(ValueError, match="no <svg>"):
        svg_fragment("<html/>")


def step(kind: str, source: int, target: int, position: int | None, token: str | None) -> PatternStep:
    return PatternStep(kind, source, target, position, token, 0.5)  # type: ignore[arg-type]


def cells(table: str) -> list[list[str]]:
    """The text of each cell of each body row (tags removed, subscripts kept as text)."""
    body = table.split("<tbody>")[1]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body)
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)] for row in rows]


def test_phrase_table_columns_follow_the_paths_arcs() -> None:
    # length 4: very (main 0->1), very (self-loop on 1), ε (1->2), good (main 2->3), movie (self-loop on END)
    steps = (
        step("main", 0, 1, 0, "very"),
        step("self-loop", 1, 1, 1, "very"),
        step("epsilon", 1, 2, None, None),
        step("main", 2, 3, 2, "good"),
        step("self-loop", 3, 3, 3, "movie"),
    )
    match = PhraseMatch(4, 0, 0, 4, ("very", "very", "good", "movie"), 0.25, None, steps, 0.25)
    other = PhraseMatch(
        4, 1, -1, 2, (START_TOKEN, "a&b", "bad"), 0.125, None,
        (step("main", 0, 1, -1, START_TOKEN), step("main", 1, 2, 0, "a&b"), step("main", 2, 3, 1, "bad")), 0.125,
    )  # fmt: skip
    table = phrase_table_html([match, other], 4)
    assert cells(table) == [["very", "verySL ε", "good movieSL", "0.25"], ["<START>", "a&b", "bad", "0.125"]]
    assert table.count("<th>") == 4 and 'class="boundary"' in table and "a&amp;b" in table
    real = phrase_table_html([PhraseMatch(4, 0, 0, 4, match.tokens, 0.25, 0.625, steps, 0.4)], 4, "real")
    assert cells(real) == [["very", "verySL ε", "good movieSL", "0.4", "62%"]]
    assert "no phrase" in phrase_table_html([], 4)


def test_contribution_margin() -> None:
    delta = torch.tensor([[0.5, 2.0], [1.0, -1.0]])
    assert contribution_margin(delta, 1).tolist() == [1.5, -2.0]  # binary: the change of the log-odds
    three = torch.tensor([1.0, 4.0, -2.0])
    assert float(contribution_margin(three, 1)) == pytest.approx(4.0 - (1.0 - 2.0) / 2)
    per_row = contribution_margin(torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]), torch.tensor([0, 1]))
    assert per_row.tolist() == [1.0, -0.5]


def contribution(
    pattern: int, delta: tuple[float, ...], start: int, end: int, tokens: tuple[str, ...]
) -> PatternContribution:
    steps = tuple(step("main", i, i + 1, start + i, t) for i, t in enumerate(tokens[start:end]))
    return PatternContribution(pattern, delta, PhraseMatch(pattern, 0, start, end, tokens[start:end], 0.5, None, steps))


def highlighted(page: str) -> dict[str, str]:
    """token -> its class (tok, tok pos, tok neg) in the explained document."""
    document = re.search(r'<p class="document">(.*?)</p>', page)
    assert document is not None
    return {
        text: kind for kind, text in re.findall(r'<span class="(tok(?: pos| neg)?)"[^>]*>([^<]*)</span>', document[1])
    }


def test_explanation_colours_spans_by_their_contribution() -> None:
    tokens = ("it", "is", "not", "a", "good", "movie", "at", "all")
    explanation = Explanation(
        tokens, 0, 1, (0.3, 0.7),
        (
            contribution(1, (-0.5, 0.5), 4, 6, tokens),  # toward positive: +1.0
            contribution(2, (0.4, -0.4), 2, 3, tokens),  # against: -0.8
            contribution(3, (0.0, 0.1), 0, 1, tokens),  # +0.1, beyond top=1
            PatternContribution(4, (9.0, -9.0), None),  # no span: not shown
        ),
    )  # fmt: skip
    page = explanation_html(explanation, top=1, class_names=("negative", "positive"), title="doc")
    classes = highlighted(page)
    assert classes == dict.fromkeys(tokens, "tok") | {"good": "tok pos", "movie": "tok pos", "not": "tok neg"}
    assert "pattern 1: +1.000 toward positive" in page and "pattern 2: -0.800 toward positive" in page
    assert "predicted <b>positive</b> (0.70)" in page and '<span class="wrong">wrong</span>' in page
    assert page.count("<tr class=") == 2 and "<h3>doc</h3>" in page
    # toward the other class the colours swap
    swapped = highlighted(explanation_html(explanation, toward=0, top=1))
    assert swapped["good"] == "tok neg" and swapped["not"] == "tok pos"


def test_explanation_of_a_real_model_keeps_every_token() -> None:
    from kleene.viz import explain

    model = sopa()
    tokens = ["not", "a", "good", "movie"]
    page = explanation_html(explain(model, VOCAB, tokens, label=1), top=2)
    assert list(highlighted(page)) == tokens
    assert "gold <b>class 1</b>" in page


CURVE = [
    {"step": 10, "train_loss": 0.7, "dev_loss": 0.69, "train_accuracy": 0.5, "dev_accuracy": 0.52},
    {"step": 20, "train_loss": 0.6, "dev_loss": "nan", "train_accuracy": 0.6, "dev_accuracy": 0.58},
    {"step": 30, "train_loss": 0.5, "dev_loss": 0.62, "train_accuracy": 0.7, "dev_accuracy": 0.61},
]


def test_training_curves() -> None:
    svg = training_curves_svg(CURVE, best_step=30)
    assert svg is not None and svg.startswith("<svg") and "<?xml" not in svg
    width = float(re.match(r'<svg[^>]*width="([\d.]+)pt"', svg)[1])  # type: ignore[index]
    assert width == pytest.approx(2 * 4.2 * 72)  # two panels
    assert PALETTE["train"] in svg and PALETTE["dev"] in svg
    loss_only = training_curves_svg([{k: v for k, v in p.items() if "accuracy" not in k} for p in CURVE])
    assert loss_only is not None
    assert float(re.match(r'<svg[^>]*width="([\d.]+)pt"', loss_only)[1]) == pytest.approx(4.2 * 72)  # type: ignore[index]
    assert training_curves_svg([]) is None and training_curves_svg([{"step": 1, "lr": 0.1}]) is None


def test_svg_fragment_refuses_a_document_without_an_svg_element():
    from kleene.errors import ReportError

    with pytest.raises(ReportError, match="not an SVG document"):
        svg_fragment("<html>no drawing</html>")
