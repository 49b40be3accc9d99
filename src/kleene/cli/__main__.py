"""``python -m kleene.cli`` runs the ``kleene`` console script."""

import sys

from kleene.cli import main

sys.exit(main())
