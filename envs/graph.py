"""The old path of :mod:`placegym.envs.core.graph`: the same module object."""

import sys

from placegym.envs.core import graph as _module
from placegym.envs.core.graph import *  # noqa: F403 (the names, for type checkers)

sys.modules[__name__] = _module
