"""``python -m placegym.train.cli``: the ``placegym`` console script."""

import sys

from placegym.train.cli.main import main

sys.exit(main())
