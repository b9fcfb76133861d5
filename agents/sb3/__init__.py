"""The Stable-Baselines3 wing: a GNN policy for sb3-contrib's MaskablePPO.

- :mod:`~placegym.agents.sb3.policy`: the features extractor, the SEL/PLC heads, the
  anchored MaskablePPO and :func:`make_maskable_ppo` with tuned defaults;
- :mod:`~placegym.agents.sb3.bc`: behaviour cloning of a teacher's tie sets
  (:func:`pretrain`) and greedy evaluation (:func:`greedy_makespans`);
- :mod:`~placegym.agents.sb3.callbacks`: per-phase PPO diagnostics
  (:class:`PhaseDiagnostics`);
- :mod:`~placegym.agents.sb3.placer`: a saved model as a placer (:class:`Sb3Placer`),
  read weights only where it can be (:func:`load_policy`): a zip's pickles run code.

This wing shares only the graph encoder (:mod:`placegym.agents.nn`) with the DOPPLER wing
(:mod:`placegym.agents.doppler`); neither imports the other.
"""

from placegym.agents.sb3.bc import greedy_makespans, pretrain
from placegym.agents.sb3.callbacks import PhaseDiagnostics
from placegym.agents.sb3.placer import Sb3Placer, UnpicklingWarning, load_policy
from placegym.agents.sb3.policy import (
    NEG_LOGIT,
    PPO_DEFAULTS,
    AnchoredMaskablePPO,
    GnnMaskablePolicy,
    GraphEncoding,
    GraphFeaturesExtractor,
    PlacementHeads,
    batch_graph_inputs,
    critical_path_pointers_torch,
    make_maskable_ppo,
)

__all__ = [
    "NEG_LOGIT",
    "PPO_DEFAULTS",
    "AnchoredMaskablePPO",
    "GnnMaskablePolicy",
    "GraphEncoding",
    "GraphFeaturesExtractor",
    "PhaseDiagnostics",
    "PlacementHeads",
    "Sb3Placer",
    "UnpicklingWarning",
    "batch_graph_inputs",
    "critical_path_pointers_torch",
    "greedy_makespans",
    "load_policy",
    "make_maskable_ppo",
    "pretrain",
]
