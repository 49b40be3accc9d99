"""The kleene tour: the toolkit shown on the rational-recurrences paper's automata, one small section at a time.

``run_tour(out)`` runs the sections of ``SECTIONS`` in order. A section is a function of the shared
``TourContext``: it prints what it shows and records what it computed in ``context.results`` (where later sections
and the tests read it) and the files it wrote in ``context.files``. Add one with the ``@section("title")`` decorator.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import graphviz
import sympy
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kleene.automata import WFSA, KleeneError
from kleene.automata.draw import arc_label, format_state_name, format_weight, state_weight_label
from kleene.automata.examples import (
    DEFAULT_ALPHABET,
    paper_automaton_b,
    paper_automaton_c,
    paper_automaton_f,
    paper_equation_4,
    paper_recurrence_b,
    paper_recurrence_c,
    paper_recurrence_f,
)

if TYPE_CHECKING:
    from kleene.viz import ReportOptions

#: The sentence the tour scores.
SENTENCE: tuple[str, ...] = ("the", "movie", "was", "great")

#: The figure of the paper that draws each automaton.
FIGURES = {"B": "Figure 1", "C": "Figure 2", "F": "Figure 4"}

#: The paper's recurrence for each automaton's real-semiring score.
RECURRENCES: dict[str, Callable[[Sequence[Hashable], Any], float]] = {
    "B": paper_recurrence_b,
    "C": paper_recurrence_c,
    "F": paper_recurrence_f,
}


@dataclass
class TourContext:
    """What the sections share: where to write, where to print, the seed, and what earlier sections found."""

    out: Path
    console: Console
    seed: int = 0
    #: Fewer training steps, fewer verified sentences and a smaller SoPa report (for tests): the sections run the same
    #: code on a smaller budget, set by the three methods below (the quick tour's sizes are theirs alone).
    quick: bool = False
    sentence: tuple[str, ...] = SENTENCE
    results: dict[str, Any] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def steps(self, full: int) -> int:
        """A training budget: ``full`` steps, or a tenth of them (at least 50) in a quick tour."""
        return max(full // 10, 50) if self.quick else full

    def sentences(self, full: int) -> int:
        """How many sentences an extraction is verified on: ``full``, or 8 in a quick tour."""
        return min(full, 8) if self.quick else full

    def report_options(self) -> ReportOptions:
        """The SoPa report's options: the defaults, or in a quick tour a page of 4 patterns with 3 phrases each, read
        in the dev split (872 documents instead of the train split's 6,920), 2 explained documents, the patterns
        ranked on 50 dev documents and the hard patterns' fidelity measured on 100."""
        from kleene.viz import ReportOptions

        if not self.quick:
            return ReportOptions()
        return ReportOptions(
            patterns=4, phrases=3, documents=2, corpus="dev", importance_documents=50, fidelity_documents=100
        )

    def automaton(self, name: str) -> WFSA:
        """One of the automata built by the first section."""
        automata: dict[str, WFSA] = self.results["automata"]
        return automata[name]


Section = Callable[[TourContext], None]

#: The tour's sections, in order: (title, function).
SECTIONS: list[tuple[str, Section]] = []


def section(title: str) -> Callable[[Section], Section]:
    """Register a function as the next section of the tour."""

    def register(function: Section) -> Section:
        SECTIONS.append((title, function))
        return function

    return register


def run_tour(
    out: Path | str = "out/tour", console: Console | None = None, seed: int = 0, quick: bool = False
) -> TourContext:
    """Run every section; return the context with the results and the files written under ``out``.

    ``quick`` trains for a tenth of the steps (the accuracies are then near chance), verifies the extracted automata
    on fewer sentences and writes a smaller SoPa report (``TourContext.steps``, ``sentences``, ``report_options``).
    """
    context = TourContext(Path(out), console or Console(highlight=False), seed, quick)
    context.out.mkdir(parents=True, exist_ok=True)
    for number, (title, function) in enumerate(SECTIONS, start=1):
        context.console.rule(Text(f"{number}. {title}", style="bold"))
        function(context)
        context.console.print()
    context.console.print(Text(f"Files written to {context.out.resolve()}:", style="bold"))
    for path in context.files:
        context.console.print(Text(f"  {path}"))
    return context


def _say(context: TourContext, text: str, style: str = "") -> None:
    """Print ``text`` as it is (no rich markup: symbols may contain brackets)."""
    context.console.print(Text(text, style=style))


def _state_list(wfsa: WFSA, weights: dict[int, Any]) -> str:
    """``q₀, q₁ (ρ₁)``: state names with their initial or final weights where these are not one."""
    parts = []
    for q, w in weights.items():
        name, shown = format_state_name(wfsa.state_name(q)), state_weight_label(wfsa, w)
        parts.append(name if shown is None else f"{name} ({shown})")
    return ", ".join(parts)


@section("The paper's automata B, C and F")
def show_automata(context: TourContext) -> None:
    automata = {"B": paper_automaton_b(), "C": paper_automaton_c(), "F": paper_automaton_f()}
    context.results["automata"] = automata
    _say(context, f"Symbolic WFSAs over the real semiring and the alphabet {{{', '.join(DEFAULT_ALPHABET)}}}.")
    _say(context, "∀α marks a self-loop taking any symbol; α on a main arc is any symbol, read by its weight.")
    for name, wfsa in automata.items():
        table = Table(title=Text(f"{name} ({FIGURES[name]}): {wfsa.num_states} states, {len(wfsa.arcs)} arcs"))
        for column in ("arc", "from", "to", "label / weight", "kind"):
            table.add_column(column)
        for index, arc in enumerate(wfsa.arcs):
            table.add_row(
                str(index),
                Text(format_state_name(wfsa.state_name(arc.src))),
                Text(format_state_name(wfsa.state_name(arc.dst))),
                Text(arc_label(wfsa, index)),
                arc.kind,
            )
        table.caption = Text(f"initial: {_state_list(wfsa, wfsa.initial)}; final: {_state_list(wfsa, wfsa.final)}")
        context.console.print(table)


@section("Symbolic scores: the paper's Eq. 4")
def symbolic_scores(context: TourContext) -> None:
    words = list(context.sentence[:3])
    b_score = context.automaton("B").score_symbolic(words)
    equation_4 = paper_equation_4(words)
    matches = sympy.expand(b_score - equation_4) == 0
    context.results["symbolic"] = {"B": b_score, "equation_4": equation_4, "B_matches_equation_4": matches}
    _say(context, f"B[{' '.join(words)}] = {format_weight(b_score)}")
    _say(context, f"Eq. 4 gives      {format_weight(equation_4)}")
    _say(context, "equal after expansion ✓" if matches else "they DIFFER ✗", style="green" if matches else "bold red")
    pair = list(context.sentence[:2])
    f_score = context.automaton("F").score_symbolic(pair)
    context.results["symbolic"]["F"] = f_score
    _say(context, f"F[{' '.join(pair)}] = {format_weight(f_score)}")
    _say(context, "(the γ terms are the paths through the ε shortcut q₀ → q₃ that skip the bigram's first word)")


def random_environment(seed: int, alphabet: Sequence[Hashable] = DEFAULT_ALPHABET) -> dict[str, Any]:
    """Weight functions with values in (0, 1) for every symbol, and the constants γ, ρ₁, ρ₂."""
    rng = random.Random(seed)
    env: dict[str, Any] = {
        name: {symbol: round(rng.uniform(0.05, 0.95), 3) for symbol in alphabet}
        for name in ("mu", "phi", "mu1", "phi1", "mu2", "phi2")
    }
    env.update({name: round(rng.uniform(0.05, 0.95), 3) for name in ("gamma", "rho1", "rho2")})
    return env


@section("Numeric scores: the Forward algorithm against the paper's recurrences")
def numeric_scores(context: TourContext) -> None:
    env = random_environment(context.seed)
    context.results["env"] = env
    weights = Table(title=Text(f"a random environment (seed {context.seed})"))
    weights.add_column("symbol")
    functions = [name for name, value in env.items() if isinstance(value, dict)]
    for name in functions:
        weights.add_column(format_weight(sympy.Symbol(name)))
    for symbol in DEFAULT_ALPHABET:
        weights.add_row(Text(str(symbol)), *(f"{env[name][symbol]:.3f}" for name in functions))
    context.console.print(weights)
    constants = [f"{format_weight(sympy.Symbol(n))} = {v}" for n, v in env.items() if not isinstance(v, dict)]
    _say(context, ", ".join(constants))

    words = list(context.sentence)
    scores = Table(title=Text(f'scores of "{" ".join(words)}"'))
    for column in ("automaton", "Forward", "paper's recurrence", "|difference|"):
        scores.add_column(column)
    numeric: dict[str, tuple[float, float]] = {}
    for name, recurrence in RECURRENCES.items():
        forward, paper = float(context.automaton(name).score(words, env)), recurrence(words, env)
        numeric[name] = (forward, paper)
        scores.add_row(name, f"{forward:.6f}", f"{paper:.6f}", f"{abs(forward - paper):.1e}")
    context.console.print(scores)
    context.results["numeric"] = numeric

    prefixes = [float(context.automaton("B").score(words[:t], env)) for t in range(1, len(words) + 1)]
    states = [paper_recurrence_b(words[:t], env) for t in range(1, len(words) + 1)]
    context.results["proposition_7"] = (prefixes, states)
    _say(context, "Proposition 7: the RNN of Eq. 5 with μ = u and φ = f has hidden state c_t = B[x_:t]:")
    for t, (prefix, state) in enumerate(zip(prefixes, states), start=1):
        _say(context, f"  t={t}  c_t = {state:.6f}   B[{' '.join(words[:t])}] = {prefix:.6f}")


@section("Viterbi: the best single path")
def best_path(context: TourContext) -> None:
    words = list(context.sentence)
    path = context.automaton("C").viterbi(words, context.results["env"])
    context.results["viterbi"] = path
    _say(context, f'In C, under the max-times order, the best path deriving "{" ".join(words)}":')
    _say(context, str(path))


@section("Drawings in the style of the paper's figures")
def drawings(context: TourContext) -> None:
    for name in ("B", "C", "F"):
        path = context.out / f"{name}.svg"
        dot = context.automaton(name).to_dot(title=f"{FIGURES[name]}: {name}")
        try:
            path.write_bytes(dot.pipe(format="svg"))
        except graphviz.ExecutableNotFound:
            raise KleeneError("graphviz's `dot` program is not installed: run `bash scripts/setup.sh`") from None
        context.files.append(path)
        _say(context, f"{name}: {path}")


@section("The algebra: regular expressions, determinize, minimize, n-best, reduction, sampling")
def algebra(context: TourContext) -> None:
    from kleene.automata import (
        bind,
        determinize,
        equivalent,
        minimize,
        random_paths,
        reduce,
        regex,
        shortest_paths,
        to_regex,
    )

    text = "the (very<-0.25>)* good<-0.5> movie | a [great fine] film<-1> | . boring<-3> film"
    words = ["the", "a", "very", "good", "great", "fine", "boring", "movie", "film", "plot"]
    rules = regex(text, semiring="max-plus", alphabet=words)
    _say(context, f"regex({text!r}, semiring='max-plus'): {rules.num_states} states, {len(rules.arcs)} arcs")
    best = shortest_paths(minimize(determinize(rules)), 3)
    _say(context, "minimize(determinize(...)), the 3 best strings (max-plus: highest first):")
    for symbols, weight in best:
        _say(context, f"  {' '.join(map(str, symbols))!r}: {weight:g}")
    _say(context, f"to_regex gives it back: {to_regex(rules)}")
    f = context.automaton("F")
    env = random_environment(context.seed)
    numeric = bind(f, env)
    reduced = reduce(numeric)
    same = equivalent(numeric, reduced).equivalent
    _say(context, f"automaton F reduced (Schützenberger): {numeric.num_states} -> {reduced.num_states} states, "
         f"equivalent: {same}")
    probabilities = regex("(a<0.5> | b<0.25>)* c<0.25>", semiring="real", unit="char")
    samples = random_paths(probabilities, 5, seed=context.seed)
    _say(context, "random_paths of (a<0.5> | b<0.25>)* c<0.25>: " + ", ".join("".join(map(str, s)) for s in samples))
    context.results["algebra"] = {"best": best, "reduced": (numeric.num_states, reduced.num_states, same)}
    _algebra_at_scale(context)


def epsilon_cycle_text(states: int, symbols: int, seed: int) -> str:
    """OpenFst AT&T text (log arcs: costs -ln p) of a random automaton whose epsilon arcs form cycles: each state
    spreads probability 0.9 over three symbol arcs and one epsilon arc to random states; every state is final."""
    import numpy as np

    rng = np.random.default_rng(seed)
    src = np.repeat(np.arange(states), 4)
    dst = rng.integers(0, states, src.size)
    label = rng.integers(1, symbols + 1, src.size)
    label[3::4] = 0  # OpenFst's epsilon
    share = rng.dirichlet(np.ones(4), states).reshape(-1) * 0.9
    arcs = [f"{p} {q} {x} {-np.log(w):.6f}" for p, q, x, w in zip(src.tolist(), dst.tolist(), label.tolist(), share)]
    return "\n".join(arcs + [f"{q} {-np.log(0.1):.6f}" for q in range(states)]) + "\n"


def _algebra_at_scale(context: TourContext) -> None:
    import time

    import numpy as np

    from kleene.automata import pathsum, read_att, remove_epsilon, score_batch

    states = 5_000
    text = epsilon_cycle_text(states, 20, context.seed)
    start = time.perf_counter()
    machine = read_att(text, semiring="log", arc_type="log")
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    free = remove_epsilon(machine)
    removal_s = time.perf_counter() - start
    rng = np.random.default_rng(context.seed)
    strings = [rng.integers(1, 21, int(rng.integers(0, 6))).tolist() for _ in range(20)]
    before = [machine.score(s) for s in strings]
    after = score_batch(free, strings)
    gap = max(abs(a - b) for a, b in zip(before, after))
    sums = (float(pathsum(free)), float(pathsum(machine)))
    _say(context, f"At scale: a {states:,}-state log automaton with epsilon cycles ({machine.num_arcs:,} arcs, AT&T "
         f"text) read in {read_s:.2f} s; remove_epsilon (sparse closure) in {removal_s:.2f} s: {free.num_arcs:,} "
         f"arcs; pathsum (log of the total probability) {sums[0]:.6f} = {sums[1]:.6f}; 20 random strings score "
         f"the same (max |difference| of log scores {gap:.1e})")
    context.results["algebra_scale"] = {
        "states": states, "epsilons_left": free.has_epsilons, "gap": gap, "pathsums": sums,
    }


@section("Proving rationality: recurrences in, automata and certificates out")
def proofs(context: TourContext) -> None:
    from kleene.automata import equivalent
    from kleene.rational import Certificate, Refutation, prove, zoo

    alphabet = list(DEFAULT_ALPHABET)
    cert = prove(zoo.rrnn_f(), alphabet=alphabet)
    assert isinstance(cert, Certificate)
    _say(context, "RRNN(F), Eq. 19 of the paper, written as a recurrence with sympy:")
    for line in cert.render_text().splitlines()[:8]:
        _say(context, "  " + line)
    checked = cert.check()
    _say(context, f"certificate re-checked from its stored data: {checked}", style="green" if checked else "bold red")
    # the proved automaton against the hand-drawn Figure 4, by Schützenberger-Tzeng equivalence
    rename = {
        "mu_c1": "mu1",
        "phi_c1": "phi1",
        "mu_c2": "mu2",
        "phi_c2": "phi2",
        "r": "gamma",
        "p1": "rho1",
        "p2": "rho2",
    }
    import numpy as np

    _, (env,) = cert.environments(np.random.default_rng(context.seed), alphabet)
    env = {**env, **{rename[k]: v for k, v in env.items() if k in rename}}
    same = equivalent(cert.automata[0].wfsa, paper_automaton_f(), env=env)
    _say(context, f"equivalent to the hand-drawn F under a random instantiation: {bool(same)}")
    path = context.out / "rrnn-f-proved.svg"
    path.write_bytes(cert.automata[0].wfsa.to_dot(title="RRNN(F), constructed by the prover").pipe(format="svg"))
    context.files.append(path)
    refusal = prove(zoo.lstm())
    assert isinstance(refusal, Refutation)
    _say(context, f"LSTM refused: {refusal.reason}")
    context.results["proofs"] = {
        "rrnn_f_checked": checked,
        "equivalent_to_figure_4": bool(same),
        "lstm_refused": not refusal.rational,
    }


@section("Stacks and delays: two linear layers flattened into one, proved equal")
def flattening(context: TourContext) -> None:
    from kleene.rational import Certificate, Refutation, prove, zoo
    from kleene.rational.flatten import check_delay

    stacked, delayed = prove(zoo.stacked_linear(2)), prove(zoo.delayed_linear(2))
    assert isinstance(stacked, Certificate) and isinstance(delayed, Certificate)
    _say(context, "two stacked linear Elman layers (layer 2 reads layer 1's current state: an epsilon arc):")
    _say(context, f"  proved, {stacked.automata[0].wfsa.num_states} states, checked: {stacked.checked}")
    _say(context, "flattened into one layer with block-bidiagonal weights and delay 1 (Theorem 1, Lemma 1's h0):")
    _say(context, f"  proved, {delayed.automata[0].wfsa.num_states} states, checked: {delayed.checked}")
    check = check_delay(stacked, delayed, 1)
    _say(context, str(check), style="green" if check.holds else "bold red")
    gated = prove(zoo.stacked_gated_linear())
    assert isinstance(gated, Refutation)
    _say(context, f"a stack whose upper gate reads the lower state is refused: {gated.reason}")
    context.results["flatten"] = {"holds": check.holds, "gated_refused": not gated.rational}


@section("Compiling F into a PyTorch module with a generated kernel")
def compiled_module(context: TourContext) -> None:
    import time

    import torch

    from kleene.compile import Template
    from kleene.compile import compile as compile_template

    torch.manual_seed(context.seed)
    template = Template.from_wfsa(paper_automaton_f())
    batch, steps, dim = 16, 64, 128
    module = compile_template(template, "real", dim, backend="auto")
    reference = compile_template(template, "real", dim, backend="torch")
    reference.load_state_dict(module.state_dict())
    slots = torch.rand(
        batch,
        steps,
        len(template.slots),
        dim,
        dtype=torch.float64,
    )
    lengths = torch.randint(1, steps + 1, (batch,))
    # with autograd on (the constants are parameters): this call builds the float64 forward and backward in one
    # library, which the timing below reuses (a forward alone would be a second library, float32 a third)
    out, expected = module(slots, lengths)[0].detach(), reference(slots, lengths)[0].detach()
    error = float((out - expected).abs().max())
    _say(context, f"template slots {template.slots}, constants {template.constants}; backend: {module.backend}")
    _say(context, f"kernel vs torch reference on ({batch}, {steps}, {dim}), float64: max |difference| {error:.1e}")
    # one dimension of one sequence, against the automaton's own Forward algorithm
    n = int(lengths[0])
    symbols = list(range(n))  # each step is its own symbol, whose weights are that step's slots
    f = paper_automaton_f(alphabet=symbols)
    env: dict[str, Any] = {
        name: {t: float(slots[0, t, s, 0]) for t in symbols} for s, name in enumerate(template.slots)
    }
    unit0 = module.constants[:, 0].detach().tolist()
    env.update({name: float(value) for name, value in zip(template.constants, unit0)})
    forward, produced = float(f.score(symbols, env)), float(out[0, n - 1, 0])
    _say(context, f"WFSA.score of sequence 0, unit 0: {forward:.6f}; the module's output: {produced:.6f}")
    for name, m in (("generated kernel", module), ("torch reference", reference)):
        start = time.perf_counter()
        y, _ = m(slots.detach().requires_grad_(True), lengths)
        y.sum().backward()
        _say(context, f"forward+backward, float64, {name}: {1000 * (time.perf_counter() - start):.1f} ms")
    context.results["compiled"] = {"max_error": error, "forward": forward, "module": produced}


def _extraction_line(extraction: Any) -> str:
    summary = extraction.summary()
    return (
        f"{summary['automata']} automata over {summary['vocabulary']} words, verified on "
        f"{summary['checked_tokens']} tokens: max |automaton - model| = {summary['max_abs_error']:.3g}"
    )


@section("Training RRNN(B) on the bundled SST-2, then extracting its automata")
def train_and_extract(context: TourContext) -> None:
    from kleene.extract.checkpoint import extract_checkpoint
    from kleene.nn.training import TrainConfig, train

    checkpoint = context.out / "rrnn-b-sst2"
    steps = context.steps(1000)
    _say(context, f"kleene train rrnn-b --data sst2 --max-steps {steps} (the recurrence runs in the generated kernel)")
    result = train("rrnn-b", "sst2", config=TrainConfig(max_steps=steps, seed=context.seed), out_dir=checkpoint)
    metrics = result.metrics
    _say(
        context,
        f"dev accuracy {metrics['dev_accuracy']:.3f}, test accuracy {metrics['test_accuracy']:.3f} "
        f"after {metrics['steps']} steps ({metrics['train_tokens_per_s']:,.0f} tokens/s)",
    )
    _say(context, "kleene extract: one WFSA per hidden unit over the vocabulary, checked against the layer's states")
    extracted = extract_checkpoint(checkpoint, sentences=context.sentences(50)).extraction
    _say(context, f"{extracted.model}: {_extraction_line(extracted)}")
    context.results["trained"] = {"metrics": metrics, "extraction": extracted.summary()}


@section("SoPa on SST-2: learned patterns, their automata, and a report")
def sopa_report(context: TourContext) -> None:
    from collections import Counter

    from kleene.data import load_classification
    from kleene.extract.checkpoint import extract_checkpoint
    from kleene.nn import load_checkpoint
    from kleene.nn.training import TrainConfig, train
    from kleene.viz import explain, hard_patterns, write_report

    checkpoint = context.out / "sopa-sst2"
    steps = context.steps(400)
    _say(context, f"kleene train sopa --data sst2 --max-steps {steps} (200 soft patterns of lengths 3-6, max-product)")
    result = train("sopa", "sst2", config=TrainConfig(max_steps=steps, seed=context.seed), out_dir=checkpoint)
    metrics = result.metrics
    _say(context, f"dev accuracy {metrics['dev_accuracy']:.3f}, test accuracy {metrics['test_accuracy']:.3f}")
    _say(context, "kleene extract: one WFSA per pattern scoring whole documents, checked against the model")
    extracted = extract_checkpoint(checkpoint, sentences=context.sentences(30)).extraction
    _say(context, f"{extracted.model}: {_extraction_line(extracted)}")
    loaded = load_checkpoint(checkpoint)
    assert loaded.vocab is not None  # a classifier's checkpoint keeps its vocabulary
    sentence = ["a", "gorgeous", ",", "witty", ",", "seductive", "movie"]
    explanation = explain(loaded.model, loaded.vocab, sentence, top=3)
    _say(context, f"explain {' '.join(sentence)!r}: predicted class {explanation.predicted}, the patterns that matter:")
    for contribution in explanation.contributions:
        best = contribution.best
        span = " ".join(best.tokens) if best is not None else "(no match)"
        effect = contribution.delta[explanation.predicted]
        _say(context, f"  pattern {contribution.pattern}: logit {effect:+.3f}, best span {span!r}")
    frequent = [w for w, n in Counter(t for e in load_classification("sst2").train for t in e.tokens).items() if n >= 3]
    hard = {h.pattern: h for h in hard_patterns(loaded.model, loaded.vocab, 0.7, words=frequent)}
    for contribution in explanation.contributions[:2]:
        described = hard[contribution.pattern].describe()
        _say(context, f"  pattern {contribution.pattern}, hard (frequent words): {described}")
    report = context.out / "sopa-report.html"
    options = context.report_options()
    _say(context, f"kleene report {checkpoint} -o {report}{_report_flags(options)}")
    write_report(report, loaded, source=checkpoint, options=options)
    context.files.append(report)
    context.results["sopa"] = {
        "metrics": metrics,
        "extraction": extracted.summary(),
        "explanation": explanation,
    }


def _report_flags(options: ReportOptions) -> str:
    """The ``kleene report`` flags that set ``options`` where they differ from the defaults: ``--field-name VALUE``
    per field, ``--no-field-name`` for a switch turned off."""
    flags = []
    for option in fields(options):
        value, flag = getattr(options, option.name), option.name.replace("_", "-")
        if value != option.default:
            flags.append(f" --no-{flag}" if value is False else f" --{flag} {value}")
    return "".join(flags)


@section("A character language model: RRNN(F) on tiny-shakespeare, then generating")
def language_model(context: TourContext) -> None:
    from kleene.nn import generate, load_checkpoint
    from kleene.nn.training import TrainConfig, train

    checkpoint = context.out / "rrnn-f-shakespeare"
    steps = context.steps(600)
    settings = {"embedding_dim": 64, "hidden_size": 128}
    _say(context, f"kleene train rrnn-f --data tinyshakespeare --max-steps {steps} (2 layers of 128 units, characters)")
    config = TrainConfig(max_steps=steps, seed=context.seed, lr=2e-3, batch_size=32, window=64)
    result = train("rrnn-f", "tinyshakespeare", config=config, out_dir=checkpoint, model_kwargs=settings)
    metrics = result.metrics
    _say(context, f"dev {metrics['dev_bits_per_token']:.3f} bits per character after {metrics['steps']} steps")
    loaded = load_checkpoint(checkpoint)
    vocab = loaded.vocab
    assert vocab is not None  # a language model's checkpoint keeps its vocabulary
    prompt = vocab.encode(list("ROMEO:"))
    samples = {}
    for strategy in ("greedy", "sample", "beam"):
        generated = generate(loaded.model, prompt, 120, strategy=strategy, temperature=0.7, top_k=10, seed=context.seed)
        samples[strategy] = "".join(vocab.decode(generated.tokens))
        _say(context, f"kleene generate {checkpoint} --prompt 'ROMEO:' --strategy {strategy}:")
        _say(context, "  " + ("ROMEO:" + samples[strategy]).replace("\n", "\n  "))
    context.results["language_model"] = {"metrics": metrics, "samples": samples}


@section("Rules to a network and back: TREC questions")
def rules_round_trip(context: TourContext) -> None:
    from kleene.data import ClassificationData, load
    from kleene.extract import read_back
    from kleene.nn import RulesPredictor, parse_rules
    from kleene.nn.training import TrainConfig, Trainer, prepare

    rules = parse_rules(
        {
            "default": "ENTY",
            "rules": {
                "ABBR": ["stand for", "[abbreviation acronym]"],
                "NUM": ["how [many much long old far]", "when", "what year"],
                "HUM": ["who", "what [actor president author]"],
                "LOC": ["where", "what [country city state]"],
                "DESC": ["why | how [do does can]", "what [is are] [a an]? . \"?\""],
            },
        }
    )
    data = load("trec")
    assert isinstance(data, ClassificationData)
    alone = RulesPredictor(rules)
    hits = sum(data.labels.index(alone.predict(e.tokens)) == e.label for e in data.test)
    rate = hits / len(data.test)
    _say(context, f"{len(rules.flat())} rules alone (kleene.nn.RulesPredictor): test accuracy {rate:.3f}")
    settings = {"rules": rules.to_json(), "leak": 1e-3}
    model, prepared, vocab, kwargs = prepare("regex", "trec", model_kwargs=settings, seed=context.seed)
    steps = context.steps(300)
    config = TrainConfig(max_steps=steps, lr=1e-2, eval_every=max(steps // 3, 1), seed=context.seed, progress=False)
    trainer = Trainer(model, prepared, vocab, config, model_name="regex", model_kwargs=kwargs)
    before = trainer.evaluate("test")["accuracy"]
    _say(context, f"RegexClassifier.from_rules: one compiled automaton per rule, untrained test accuracy {before:.3f}")
    metrics = trainer.fit().metrics
    _say(context, f"kleene train regex --data trec: test accuracy {metrics['test_accuracy']:.3f} after {steps} steps")
    readback = read_back(model, [list(e.tokens) for e in data.dev[:200]])
    _say(context, "read back as hard rules (to_regex), the rules whose words changed least but changed:")
    changed = sorted((r for r in readback if r.lost or r.gained), key=lambda r: len(r.lost) + len(r.gained))[:3]
    for r in changed:
        after = r.regex if len(r.regex) < 150 else r.regex[:150] + " …"
        _say(context, f"  {r.label}: {r.original}  ->  {after}  (+{len(r.gained)} / -{len(r.lost)} words, fidelity "
             f"{r.fidelity or 0:.2f})")
    context.results["rules"] = {"rules_alone": rate, "zero_shot": before, "metrics": metrics, "readback": readback}


@section("One layer, any semiring: RRNN(F) trained in the log semiring and extracted")
def layer_in_a_semiring(context: TourContext) -> None:
    from kleene.extract.checkpoint import extract_checkpoint
    from kleene.nn.training import TrainConfig, train

    checkpoint = context.out / "rrnn-f-log-sst2"
    steps = context.steps(300)
    settings = {"semiring": "log", "hidden_size": 16, "num_layers": 1}
    _say(context, f"kleene train rrnn-f --data sst2 --set semiring=log --max-steps {steps}: the gates enter as log σ, "
         "the input as log σ(−z) + W v, ⊕ is logaddexp")  # fmt: skip
    config = TrainConfig(max_steps=steps, seed=context.seed, progress=False)
    result = train("rrnn-f", "sst2", config=config, out_dir=checkpoint, model_kwargs=settings)
    _say(context, f"dev accuracy {result.metrics['dev_accuracy']:.3f} after {result.metrics['steps']} steps")
    extracted = extract_checkpoint(checkpoint, sentences=context.sentences(20)).extraction
    _say(context, f"{extracted.model} over {extracted.semiring.name}: {_extraction_line(extracted)}")
    _say(context, "every layer × semiring pair: docs/layer-semirings.md (python examples/layer_semirings.py)")
    context.results["semiring_layer"] = {"metrics": result.metrics, "extraction": extracted.summary()}


@section("Deploying the trained RRNN(B): torch.export and onnxruntime")
def deploy(context: TourContext) -> None:
    import json

    import numpy as np
    import torch

    from kleene.data import load_classification
    from kleene.data.batching import pad_sequences
    from kleene.nn import load_checkpoint
    from kleene.nn.deploy import export_checkpoint, export_program

    checkpoint = context.out / "rrnn-b-sst2"
    loaded = load_checkpoint(checkpoint)
    assert loaded.vocab is not None  # a classifier's checkpoint keeps its vocabulary
    model = loaded.model.eval()
    documents = [list(e.tokens) for e in load_classification("sst2").test[:64] if e.tokens]
    tokens, lengths = pad_sequences([loaded.vocab.encode(d) for d in documents])
    with torch.no_grad():
        eager = model(tokens, lengths)
        program = export_program(model)  # batch and time dynamic: exported on a (2, 8) example
        exported = program.module()(tokens, lengths)
    scale = float(eager.abs().max())
    exported_error = float((exported - eager).abs().max()) / scale
    _say(context, f"torch.export (dynamic batch and length) on {len(documents)} SST-2 test reviews of up to "
         f"{int(lengths.max())} words: largest difference {exported_error:.1e} of the logits' scale")  # fmt: skip
    onnx_file = context.out / "rrnn-b-sst2.onnx"
    _say(context, f"kleene export {checkpoint} --format onnx -o {onnx_file} (the recurrence as an ONNX Scan)")
    onnx_file, sidecar = export_checkpoint(checkpoint, onnx_file)
    context.files += [onnx_file, sidecar]
    try:
        import onnxruntime
    except ImportError:
        _say(context, "onnxruntime is not installed (pip install 'kleene[onnx]'): the ONNX file is not run here")
        return
    session = onnxruntime.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    (logits,) = session.run(["logits"], {"tokens": tokens.numpy(), "lengths": lengths.numpy()})
    labels = json.loads(sidecar.read_text(encoding="utf-8"))["labels"]
    agree = int((np.argmax(logits, -1) == eager.argmax(-1).numpy()).sum())
    onnx_error = float(np.abs(logits - eager.numpy()).max()) / scale
    _say(context, f"onnxruntime: largest difference {onnx_error:.1e} of the logits' scale; the same label "
         f"({' / '.join(labels)}) for {agree} of {len(documents)} reviews")  # fmt: skip
    context.results["deploy"] = {
        "exported_error": exported_error,
        "onnx_error": onnx_error,
        "agree": agree,
        "documents": len(documents),
    }
