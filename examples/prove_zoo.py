"""Prove recurrences rational with kleene: a user-defined one first, then the whole zoo.

Run:  python examples/prove_zoo.py [OUT_DIR]     (drawings go to OUT_DIR, default out/prove)
"""

from __future__ import annotations

import sys
from pathlib import Path

import sympy

from kleene.rational import Certificate, Recurrence, prove, zoo


def my_recurrence() -> Recurrence:
    """A gated bigram detector in the max-plus semiring, written like a paper's equations:

    a_t = max(a_{t-1} + f(x_t), u(x_t))          best unigram match so far, decayed by f
    b_t = max(b_{t-1} + g(x_t), a_{t-1} + v(x_t)) best "u then v" match, decayed by g
    y_t = max(a_t + p, b_t)                       output: unigram (weighted by p) or bigram
    """
    rec = Recurrence("my-bigram", semiring="max-plus", doc="a user-defined gated bigram detector")
    a, b = rec.states("a b")  # initial values default to the semiring's zero (-inf here)
    f, u, g, v = rec.inputs("f u g v")  # functions of the current input x_t
    p = rec.constant("p")
    rec.update(a, sympy.Max(a + f, u))
    rec.update(b, sympy.Max(b + g, a + v))
    rec.output("y", sympy.Max(a + p, b))
    return rec


def main(out: Path) -> None:
    cert = prove(my_recurrence())
    assert isinstance(cert, Certificate)
    print(cert.render_text())  # the equations, the automaton, its weight functions, the induction proof
    print("re-checked from stored data:", cert.check())
    print("numeric cross-check against WFSA.score:", cert.cross_check(), cert.numeric)
    wfsa = cert.automata[0].wfsa  # a kleene.automata.WFSA with symbolic weights
    print("its weight functions:", {k: str(v) for k, v in cert.automata[0].parameterisation.items()})
    print("drawn to", [str(p) for p in cert.draw(out)])
    print("score of 'ab' as a formula:", wfsa.score_symbolic(sympy.symbols("x1 x2")))

    print("\nThe zoo:")
    for name, build in zoo.ZOO.items():
        result = prove(build())
        if isinstance(result, Certificate):
            result.cross_check(trials=1)
            states = result.summary()["states"]
            print(f"  {name:15} proved, checked={result.checked}, states={states}, numeric ok={result.numeric['ok']}")
        else:
            print(f"  {name:15} refused: {result.reason}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("out/prove"))
