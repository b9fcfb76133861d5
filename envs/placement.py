"""The old path of :mod:`placegym.envs.core.placement`: the same module object."""

import sys

from placegym.envs.core import placement as _module
from placegym.envs.core.placement import *  # noqa: F403 (the names, for type checkers)

sys.modules[__name__] = _module
