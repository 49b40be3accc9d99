"""``python -m kleene.cli`` runs the ``kleene`` console script."""

from kleene.cli import run

run()
