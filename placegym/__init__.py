"""placegym: learned device placement of dataflow graphs on work-conserving multi-GPU systems.

Subpackages: :mod:`placegym.envs` (data model, simulator, Gymnasium environments),
:mod:`placegym.teachers` (heuristic, search and exact placers), :mod:`placegym.agents`
(learned policies) and :mod:`placegym.train` (training, benchmark, the ``placegym`` CLI).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("placegym")
except PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
