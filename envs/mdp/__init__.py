"""The placement MDP: the Gymnasium environments and what they are made of.

- :mod:`~placegym.envs.mdp.state`: the partial placement and its masks;
  :mod:`~placegym.envs.mdp.observation`: what the agent sees;
  :mod:`~placegym.envs.mdp.reward`: the rewards and their reference placers.
- :mod:`~placegym.envs.mdp.env`: :class:`~placegym.envs.mdp.env.PlacementEnv`;
  :mod:`~placegym.envs.mdp.vector`: the native vector environment;
  :mod:`~placegym.envs.mdp.pettingzoo`: the two-agent AEC view;
  :mod:`~placegym.envs.mdp.render`: rendering.
- :mod:`~placegym.envs.mdp.sources`: where an episode's graph comes from;
  :mod:`~placegym.envs.mdp.backends`: simulated or real execution of a placement;
  :mod:`~placegym.envs.mdp.registration`: the ``gym.make`` ids.

The top band: it may use every other one.
"""
