"""placegym.agents: learned placement policies, in two wings over one graph encoder.

- :mod:`placegym.agents.doppler`: the DOPPLER dual SEL/PLC policy, its batched episodes,
  scoring, search and learned baselines;
- :mod:`placegym.agents.sb3`: a GNN policy for Stable-Baselines3 (sb3-contrib's
  MaskablePPO);
- :mod:`placegym.agents.nn`: the graph neural network layers and the graph encoder that
  both wings build on (the only code they share: neither wing imports the other).
"""
