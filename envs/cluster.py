"""The old path of :mod:`placegym.envs.core.cluster`: the same module object."""

import sys

from placegym.envs.core import cluster as _module
from placegym.envs.core.cluster import *  # noqa: F403 (the names, for type checkers)

sys.modules[__name__] = _module
