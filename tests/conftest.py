"""Test-suite settings.

Hypothesis runs derandomized by default, so that the suite's examples are the same on every machine and in CI
(a run is reproducible); `pytest --hypothesis-profile=explore` draws fresh random examples (and keeps a database)
for hunting new counterexamples.
"""

from hypothesis import settings

settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("deterministic")
