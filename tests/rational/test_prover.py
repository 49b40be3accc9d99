"""The rationality prover: every zoo entry proved by the general construction, refusals named,
and recurrences written only for these tests (including non-real semirings)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.automata import ANY, EPSILON, MAX_PLUS
from kleene.automata.labels import AnySymbol, Epsilon
from kleene.rational import ONE_NOW, Recurrence, RecurrenceError, prove, sigmoid, zoo
from kleene.rational.certificate import Certificate, Refutation

PROVED = {
    # name: (builder kwargs, states of each distinct automaton)
    "example-6": ({}, [2]),
    "sru": ({}, [2]),
    "t-rnn": ({}, [2]),
    "scrn": ({}, [2]),
    "rrnn-b": ({}, [2]),
    "rrnn-b-maxplus": ({}, [2]),
    "rrnn-c": ({}, [3]),
    "rrnn-f": ({}, [4]),
    "rcnn": ({"order": 3}, [4]),
    "isan": ({"d": 3}, [4]),
    "elman-linear": ({"d": 2}, [3]),
    "qrnn": ({"window": 2}, [7]),
    "t-lstm": ({}, [7]),
    "t-gru": ({}, [7]),
    "sopa": ({"length": 3}, [5]),
    "cnn": ({"width": 3}, [5]),
}


@pytest.fixture(scope="module")
def certificates() -> dict[str, Certificate]:
    out = {}
    for name, (kwargs, _) in PROVED.items():
        result = prove(zoo.ZOO[name](**kwargs))
        assert isinstance(result, Certificate), f"{name}: {getattr(result, 'reason', '')}"
        out[name] = result
    return out


@pytest.mark.parametrize("name", sorted(PROVED))
def test_zoo_entry_is_proved_checked_and_agrees_numerically(name: str, certificates: dict[str, Certificate]) -> None:
    cert = certificates[name]
    assert cert.rational and cert.checked, cert.failure
    assert cert.identities and all(i.ok for i in cert.identities)
    assert cert.summary()["states"] == PROVED[name][1]
    assert cert.cross_check(trials=2, strings=5, max_length=5, seed=1), cert.numeric
    assert cert.numeric is not None and cert.numeric["comparisons"] > 0


def test_automaton_b_has_the_papers_shape(certificates: dict[str, Certificate]) -> None:
    w = certificates["example-6"].automata[0].wfsa
    assert w.num_states == 2 and w.initial == {0: 1.0} and set(w.final) == {1}
    loops = {(a.src, a.dst): a for a in w.arcs}
    assert loops[(0, 0)].weight == 1.0 and isinstance(loops[(0, 0)].label, AnySymbol)
    assert str(loops[(0, 1)].weight) == "mu_c(alpha)" and str(loops[(1, 1)].weight) == "phi_c(alpha)"
    params = certificates["example-6"].automata[0].parameterisation
    assert str(params["phi_c"]) == "f(x_t)"
    assert (
        sympy.expand(
            params["mu_c"] - (1 - sympy.Function("f")(sympy.Symbol("x_t"))) * sympy.Function("g")(sympy.Symbol("x_t"))
        )
        == 0
    )


def test_automaton_b_score_is_equation_4() -> None:
    """Symbolic Forward score of the constructed B (the lead's score_symbolic) equals Eq. 4."""
    w = prove(zoo.example6()).automata[0].wfsa
    xs = sympy.symbols("x1:5")
    mu, phi = sympy.Function("mu_c"), sympy.Function("phi_c")
    n = len(xs)
    eq4 = sum(mu(xs[i]) * sympy.prod([phi(xs[j]) for j in range(i + 1, n)]) for i in range(n - 1)) + mu(xs[-1])
    assert sympy.expand(w.score_symbolic(list(xs)) - eq4) == 0


def test_rrnn_f_gets_its_epsilon_arc_and_final_weights(certificates: dict[str, Certificate]) -> None:
    proof = certificates["rrnn-f"].automata[0]
    w = proof.wfsa
    eps = [a for a in w.arcs if isinstance(a.label, Epsilon)]
    assert len(eps) == 1 and eps[0].src == 0 and str(eps[0].weight) == "r"
    aux = eps[0].dst
    into_q2 = [a for a in w.arcs if w.states[a.dst] == "q2" and a.src != a.dst]
    assert {str(a.weight) for a in into_q2} == {"mu_c2(alpha)"}  # one shared weight function, as in Fig. 4
    assert {w.states[a.src] for a in into_q2} == {"q1", w.states[aux]}
    assert {w.states[q]: str(v) for q, v in w.final.items()} == {"q1": "p1", "q2": "p2"}


def test_rcnn_has_n_plus_one_states_with_constant_or_input_lambda() -> None:
    for order in (1, 2, 4):
        for constant in (False, True):
            cert = prove(zoo.rcnn(order, constant_lambda=constant))
            assert isinstance(cert, Certificate) and cert.checked
            assert cert.summary()["states"] == [order + 1]
    loops = [a for a in prove(zoo.rcnn(2, True)).automata[0].wfsa.arcs if a.src == a.dst and a.src != 0]
    assert all(str(a.weight) == "lam" for a in loops)


def test_isan_is_one_automaton_graph_with_one_final_state_per_dimension() -> None:
    cert = prove(zoo.isan(2))
    assert isinstance(cert, Certificate)
    assert len(cert.automata) == 2 and len(cert.distinct_automata()) == 1
    finals = [{cert.automata[i].wfsa.states[q] for q in cert.automata[i].wfsa.final} for i in range(2)]
    assert finals == [{"q1"}, {"q2"}]
    names = set(cert.automata[0].parameterisation)
    assert names == {"phi_c1", "phi_c2", "mu_c1_c2", "mu_c2_c1", "eta_c1", "eta_c2"}  # W_x (Eq. 18) and b_x


@pytest.mark.parametrize("window,alphabet,states", [(2, "ab", 5), (2, "abcd", 9), (3, "ab", 13)])
def test_qrnn_history_construction_state_counts(window: int, alphabet: str, states: int) -> None:
    """K=2 gives Appendix A's 2|Σ|+1 states; K=3: 1 + 2·(1 + |Σ| + |Σ|²) − 2 trimmed."""
    cert = prove(zoo.qrnn(window, alphabet=list(alphabet)))
    assert isinstance(cert, Certificate) and cert.checked, getattr(cert, "failure", None)
    assert cert.summary()["states"] == [states]
    comparison = cert.summary()["history_states"]
    assert "Proposition 11" in comparison
    if window == 2:
        assert f"Appendix A's construction has 2|Σ|+1 = {2 * len(alphabet) + 1}" in comparison
    assert cert.cross_check(trials=1, strings=6, seed=3)


def test_history_weight_functions_are_specialised_per_previous_symbol() -> None:
    proof = prove(zoo.t_gru(alphabet=["a", "b"])).automata[0]
    assert {"phi_h__a", "phi_h__b", "mu_h__bos", "mu_h__a"} <= set(proof.parameterisation)
    assert "phi_h__bos" not in proof.parameterisation  # the state (h, <s>) has weight 0 and is trimmed
    assert str(proof.parameterisation["phi_h__a"]) == "f('a', x_t)"


@pytest.mark.parametrize("semiring", ["max-times", "max-plus", "real"])
@pytest.mark.parametrize("length", [1, 2, 4])
def test_sopa_patterns_with_self_loops_and_epsilons(semiring: str, length: int) -> None:
    cert = prove(zoo.sopa(length, semiring))
    assert isinstance(cert, Certificate) and cert.checked, getattr(cert, "failure", None)
    w = cert.automata[0].wfsa
    assert sum(isinstance(a.label, Epsilon) for a in w.arcs) == length + 1  # one per pattern step + the END→doc
    assert cert.cross_check(trials=1, strings=5, seed=length)


# -- refusals -------------------------------------------------------------------------------------

REFUSALS = {
    "lstm": "h_{t-1} appears inside sigmoid(",
    "gru": "h_{t-1} appears inside sigmoid(",
    "elman": "h_{t-1} appears inside tanh(",
    "sru-v2": "c_{t-1} appears inside sigmoid(",
    "rcnn-gated": "c2_{t-1} appears inside sigmoid(",
    "stacked-gated-linear": "c1_t ⊗ c2_{t-1} in the update of c2: a product of two state values",
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_refusals_name_the_offending_term(name: str) -> None:
    result = prove(zoo.ZOO[name]())
    assert isinstance(result, Refutation) and not result.rational
    assert REFUSALS[name] in result.reason
    assert "not affine" in result.reason
    assert result.summary()["reason"] == result.reason


def test_refused_names_list_matches_zoo() -> None:
    assert set(zoo.REFUSED) == set(REFUSALS)


# -- recurrences written only for these tests ------------------------------------------------------


def coupled_real() -> Recurrence:
    """Two coupled components, a constant self-loop, a constant bias and an affine output with an offset."""
    rec = Recurrence("test-coupled", "real")
    c1, c2 = rec.states("c1 c2", init=1)
    g, h, k = rec.inputs("g h k")
    a, b = rec.constants("a b")
    rec.update(c1, a * c1 + g - 2 * c2 * k)
    rec.update(c2, c2 * h + c1 * k + b)
    rec.output("y", 3 * c1 + c2 + 1)
    return rec


def tropical_two_step() -> Recurrence:
    """A min-plus (OpenFst tropical) recurrence: cheapest way to have seen m1 then m2, with skips."""
    rec = Recurrence("test-tropical", "min-plus")
    d1, d2 = rec.states("d1 d2")
    s1, m1, s2, m2 = rec.inputs("s1 m1 s2 m2")
    p = rec.constant("p")
    rec.update(d1, sympy.Min(d1 + s1, m1))
    rec.update(d2, sympy.Min(d2 + s2, d1 + m2))
    rec.output("cost", sympy.Min(d1 + p, d2))
    return rec


def log_semiring_unit() -> Recurrence:
    """Example 6 in the log semiring, written with the semiring's own operations."""
    rec = Recurrence("test-log", "log")
    c = rec.state("c")
    f, u = rec.inputs("f u")
    rec.update(c, rec.plus(rec.times(f, c), u))
    rec.output("c", c)
    return rec


def test_coupled_real_recurrence_is_proved() -> None:
    cert = prove(coupled_real())
    assert isinstance(cert, Certificate) and cert.checked, getattr(cert, "failure", None)
    w = cert.automata[0].wfsa
    assert w.num_states == 3
    assert {w.states[q]: float(v) for q, v in w.final.items()} == {"q0": 1.0, "q1": 3.0, "q2": 1.0}
    assert cert.cross_check(trials=3, seed=5)


def test_tropical_recurrence_is_proved_in_min_plus() -> None:
    cert = prove(tropical_two_step())
    assert isinstance(cert, Certificate) and cert.checked, getattr(cert, "failure", None)
    assert cert.automata[0].wfsa.semiring.name == "min-plus"
    assert cert.cross_check(trials=3, seed=6)


def test_log_semiring_recurrence_is_proved() -> None:
    cert = prove(log_semiring_unit())
    assert isinstance(cert, Certificate) and cert.checked, getattr(cert, "failure", None)
    assert cert.cross_check(trials=2, seed=7)


def test_log_semiring_repeated_terms_merge_into_log_2() -> None:
    """sympy turns c ⊕ c into log(2·exp(c)); the reader counts it as two terms, the checker uses exp."""
    rec = Recurrence("test-log-twice", "log")
    c = rec.state("c")
    u = rec.input("u")
    rec.update(c, rec.plus(c, c, u))
    rec.output("c", c)
    cert = prove(rec)
    assert isinstance(cert, Certificate) and cert.checked, getattr(cert, "failure", None)
    loop = next(a for a in cert.automata[0].wfsa.arcs if a.src == a.dst == 1)
    assert loop.weight == pytest.approx(np.log(2.0))
    assert cert.cross_check(trials=2, seed=8)


def test_real_product_inside_max_plus_is_refused() -> None:
    rec = Recurrence("test-maxplus-bad", "max-plus")
    c = rec.state("c")
    f, u = rec.inputs("f u")
    rec.update(c, sympy.Max(f * c, u))
    rec.output("c", c)
    result = prove(rec)
    assert isinstance(result, Refutation)
    assert "c_{t-1} appears inside c_{t-1}*f(x_t)" in result.reason and "max-plus" in result.reason


def test_product_of_two_states_is_refused() -> None:
    rec = Recurrence("test-bilinear", "real")
    c1, c2 = rec.states("c1 c2")
    u = rec.input("u")
    rec.update(c1, c1 * c2 + u)
    rec.update(c2, c2 + u)
    rec.output("y", c1)
    result = prove(rec)
    assert isinstance(result, Refutation)
    assert "c1_{t-1} ⊗ c2_{t-1}" in result.reason and "product of two state values" in result.reason


def test_current_step_reference_needs_a_constant_coefficient() -> None:
    rec = Recurrence("test-eps-input", "real")
    c1, c2 = rec.states("c1 c2")
    u = rec.input("u")
    rec.update(c1, c1 + u)
    rec.update(c2, rec.now(c1) * u)
    rec.output("y", c2)
    result = prove(rec)
    assert isinstance(result, Refutation) and "epsilon arc" in result.reason


def test_input_dependent_output_is_refused() -> None:
    rec = Recurrence("test-output-gate", "real")
    c = rec.state("c")
    f, o = rec.inputs("f o")
    rec.update(c, f * c + 1)
    rec.output("h", o * c)
    result = prove(rec)
    assert isinstance(result, Refutation) and "final weights must be constants" in result.reason


def test_malformed_recurrences_raise_naming_the_problem() -> None:
    rec = Recurrence("bad", "real")
    c = rec.state("c")
    with pytest.raises(RecurrenceError, match="undeclared symbol"):
        rec.update(c, c * sympy.Symbol("zeta"))
    with pytest.raises(RecurrenceError, match="declared twice"):
        rec.input("c")
    with pytest.raises(RecurrenceError, match="reserved"):
        rec.constant("alpha")
    with pytest.raises(RecurrenceError, match="has no update"):
        prove(rec)
    lagged = Recurrence("lagged", "real")
    d = lagged.state("d")
    lagged.update(d, lagged.input("f", lags=1) * d)
    lagged.output("d", d)
    with pytest.raises(RecurrenceError, match="supply a finite alphabet"):
        prove(lagged)


def test_current_step_cycle_is_refused() -> None:
    rec = Recurrence("cycle", "max-plus")
    a, b = rec.states("a b")
    rec.update(a, rec.now(b))
    rec.update(b, rec.now(a))
    rec.output("a", a)
    result = prove(rec)
    assert isinstance(result, Refutation) and "cycle" in result.reason


def test_cnn_scores_are_max_pooled_filter_responses() -> None:
    """Independent oracle: SoPa Eq. 9-10, the max over windows of the summed per-position scores."""
    width = 3
    cert = prove(zoo.cnn(width))
    assert isinstance(cert, Certificate)
    rng = np.random.default_rng(0)
    alphabet = ["a", "b", "c"]
    tables = {f"m{j}": {a: float(rng.normal()) for a in alphabet} for j in range(1, width + 1)}
    wenv = {name: tables[str(p.func)] for name, p in cert.automata[0].parameterisation.items()}
    for xs in itertools.product(alphabet, repeat=5):
        windows = [sum(tables[f"m{j + 1}"][xs[i + j]] for j in range(width)) for i in range(len(xs) - width + 1)]
        assert cert.automata[0].wfsa.score(list(xs), env=wenv) == pytest.approx(max(windows))
    assert cert.automata[0].wfsa.score(["a", "b"], env=wenv) == MAX_PLUS.zero


def test_one_now_gives_an_epsilon_from_the_start_state() -> None:
    rec = Recurrence("eps-start", "real")
    z = rec.state("z")
    u = rec.input("u")
    gamma = rec.constant("gamma")
    rec.update(z, z * u + ONE_NOW * gamma)
    rec.output("z", z)
    cert = prove(rec)
    assert isinstance(cert, Certificate) and cert.checked
    w = cert.automata[0].wfsa
    assert [(w.states[a.src], w.states[a.dst], str(a.weight)) for a in w.arcs if a.label == EPSILON] == [
        ("q0", "q1", "gamma")
    ]
    assert any(a.label == ANY for a in w.arcs)
    assert cert.cross_check(trials=2, seed=2)


def test_sigmoid_in_a_constant_is_fine_but_around_a_state_is_refused() -> None:
    rec = Recurrence("gate-const", "real")
    c = rec.state("c")
    u = rec.input("u")
    b = rec.constant("b")
    rec.update(c, sigmoid(b) * c + u)
    rec.output("c", c)
    cert = prove(rec)
    assert isinstance(cert, Certificate) and cert.checked and cert.cross_check(trials=1, seed=4)


@pytest.mark.parametrize(
    "name,paper,rename",
    [
        ("rrnn-b", "b", {"mu_c": "mu", "phi_c": "phi"}),
        ("rrnn-c", "c", {"mu_c1": "mu1", "phi_c1": "phi1", "mu_c2": "mu2", "phi_c2": "phi2"}),
        (
            "rrnn-f",
            "f",
            {
                "mu_c1": "mu1",
                "phi_c1": "phi1",
                "mu_c2": "mu2",
                "phi_c2": "phi2",
                "r": "gamma",
                "p1": "rho1",
                "p2": "rho2",
            },
        ),
    ],
)
def test_constructed_automata_are_equivalent_to_the_papers_hand_drawn_ones(
    name: str, paper: str, rename: dict[str, str]
) -> None:
    """Independent oracle: Tzeng's equivalence test against the tour's hand-built B, C, F (Figs. 1, 2, 4)."""
    from kleene.automata import equivalent, examples

    alphabet = list(examples.DEFAULT_ALPHABET)
    cert = prove(zoo.ZOO[name](), alphabet=alphabet)
    assert isinstance(cert, Certificate)
    reference = getattr(examples, f"paper_automaton_{paper}")()
    for seed in range(3):
        _, (wenv,) = cert.environments(np.random.default_rng(seed), alphabet)
        env = {**wenv, **{rename[k]: v for k, v in wenv.items() if k in rename}}
        result = equivalent(cert.automata[0].wfsa, reference, env=env)
        assert result, str(result)
    wrong = {**env, "mu2" if paper != "b" else "mu": dict.fromkeys(alphabet, 0.5)}
    assert not equivalent(cert.automata[0].wfsa, reference, env=wrong)


# -- random affine recurrences: the construction is general, not a lookup table ---------------------

SEMIRINGS = ["real", "max-plus", "min-plus", "max-times", "log"]


@st.composite
def affine_recurrences(draw: st.DrawFn) -> Recurrence:
    semiring = draw(st.sampled_from(SEMIRINGS))
    rec = Recurrence("random", semiring)
    n = draw(st.integers(1, 3))
    states = rec.states(" ".join(f"c{i}" for i in range(1, n + 1)))
    inputs = rec.inputs("f g h")
    constants = rec.constants("k1 k2")
    for i, c in enumerate(states):
        terms = []
        for _ in range(draw(st.integers(1, 3))):
            factors = []
            source = draw(st.sampled_from([None, *states]))
            if source is not None:
                factors.append(source)
            if draw(st.booleans()):
                factors.append(draw(st.sampled_from(constants)))
            if draw(st.booleans()) or not factors:
                factors.append(draw(st.sampled_from(inputs)))
            terms.append(rec.times(*factors))
        if i > 0 and draw(st.booleans()):  # an epsilon from an earlier component's current value
            terms.append(rec.times(rec.now(states[draw(st.integers(0, i - 1))]), draw(st.sampled_from(constants))))
        rec.update(c, rec.plus(*terms))
    outputs = [
        rec.times(c, draw(st.sampled_from([rec.ring.sym_one, *constants]))) for c in states if draw(st.booleans())
    ]
    rec.output("y", rec.plus(*(outputs or [states[-1]])))
    return rec


@settings(max_examples=25, deadline=None)
@given(affine_recurrences())
def test_random_affine_recurrences_are_proved_and_agree_numerically(rec: Recurrence) -> None:
    cert = prove(rec)
    assert isinstance(cert, Certificate), getattr(cert, "reason", "")
    assert cert.checked, cert.failure
    assert cert.cross_check(trials=2, strings=4, max_length=4, seed=0), cert.numeric
