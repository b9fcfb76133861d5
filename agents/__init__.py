"""placegym.agents: learned placement policies, in two wings over one graph encoder.

- :mod:`placegym.agents.doppler`: the DOPPLER dual SEL/PLC policy, its batched episodes,
  scoring, search and learned baselines;
- :mod:`placegym.agents.sb3`: a GNN policy for Stable-Baselines3 (sb3-contrib's
  MaskablePPO);
- :mod:`placegym.agents.nn`: the graph neural network layers and the graph encoder that
  both wings build on (the only code they share: neither wing imports the other).
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """``placegym.agents.pretrained``: :func:`placegym.agents.zoo.pretrained`, imported on
    first use (importing ``placegym.agents`` loads no torch)."""
    if name in ("pretrained", "available"):
        from placegym.agents import zoo

        return getattr(zoo, name)
    raise AttributeError(f"module 'placegym.agents' has no attribute {name!r}")
