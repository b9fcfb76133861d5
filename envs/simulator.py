"""The old path of :mod:`placegym.envs.sim.simulator`: the same module object."""

import sys

from placegym.envs.sim import simulator as _module
from placegym.envs.sim.simulator import *  # noqa: F403 (the names, for type checkers)

sys.modules[__name__] = _module
