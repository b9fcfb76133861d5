"""The DOPPLER wing: the dual SEL/PLC policy, its episodes, learning signal and search.

- :mod:`~placegym.agents.doppler.config`: :class:`PolicyConfig` (the ``policy`` section of
  training configs) and the sizes of the inputs;
- :mod:`~placegym.agents.doppler.features`: the per-state feature functions (readiness,
  rule features, sibling and hint shares, affinities, HEFT's insertion rule, the
  lookahead's prices and their pricers);
- :mod:`~placegym.agents.doppler.inputs`: which inputs each head reads, one entry per
  optional input (its flag, width, columns and per-graph data), and the per-graph inputs
  (:func:`graph_inputs`) and per-state device rows (:func:`plc_devices`) derived from it;
- :mod:`~placegym.agents.doppler.encoding`: the policy's per-graph :class:`Encoding` and
  what its PLC inputs read of it (:class:`~placegym.agents.doppler.encoding.PlcPolicy`);
- :mod:`~placegym.agents.doppler.policy`: :class:`DopplerPolicy`;
- :mod:`~placegym.agents.doppler.episodes`: the batched episode player
  (:func:`play_episodes`), :class:`EpisodeRecord` and the greedy / sampled choice;
- :mod:`~placegym.agents.doppler.scoring`: log-probabilities and entropies of recorded
  episodes with gradients (:func:`score`, :class:`Scores`);
- :mod:`~placegym.agents.doppler.decoder`: the decoder of placements without
  environments (:class:`Decoder`, :func:`sample_placements`, :func:`best_of_samples`);
- :mod:`~placegym.agents.doppler.onepass`: the greedy decode in one pass, without a
  simulator call, its features updated per step (:class:`~placegym.agents.doppler.
  onepass.OnePassDecoder`, :func:`~placegym.agents.doppler.onepass.one_pass_greedy`);
- :mod:`~placegym.agents.doppler.selector`: the choice, without a simulator call, between
  the one-pass placement, its hints' placements and rule rollouts in its memory room
  (:class:`~placegym.agents.doppler.selector.ProposalSelector`);
- :mod:`~placegym.agents.doppler.summaries`: what the selector reads, summaries of a
  placement (list-schedule estimates, with and without contention) and of an instance;
- :mod:`~placegym.agents.doppler.search`: inference-time search under a budget of
  simulator calls (:func:`policy_search`, :class:`SearchConfig`, :class:`PolicySearch`);
- :mod:`~placegym.agents.doppler.hints`: heuristic placements as PLC hints;
- :mod:`~placegym.agents.doppler.baselines`: Placeto and GDP behind the same interface;
- :mod:`~placegym.agents.doppler._kernels`: the compiled kernels of the per-state inputs.

This wing shares only the graph encoder (:mod:`placegym.agents.nn`) with the
Stable-Baselines3 wing (:mod:`placegym.agents.sb3`); neither imports the other.
"""

from placegym.agents.doppler.baselines import (
    BASELINES,
    BaselineConfig,
    GdpPolicy,
    PlacetoPolicy,
    make_baseline,
)
from placegym.agents.doppler.config import PolicyConfig
from placegym.agents.doppler.decoder import (
    Decoder,
    best_of_samples,
    decodes_like_episodes,
    sample_placements,
)
from placegym.agents.doppler.encoding import Encoding
from placegym.agents.doppler.episodes import EpisodeRecord, play_episodes
from placegym.agents.doppler.features import cluster_links
from placegym.agents.doppler.inputs import graph_inputs, plc_devices
from placegym.agents.doppler.policy import DopplerPolicy
from placegym.agents.doppler.scoring import Scores, score
from placegym.agents.doppler.search import (
    PolicySearch,
    SearchConfig,
    SearchResult,
    check_budget,
    policy_search,
)

__all__ = [
    "BASELINES",
    "BaselineConfig",
    "Decoder",
    "DopplerPolicy",
    "Encoding",
    "EpisodeRecord",
    "GdpPolicy",
    "PlacetoPolicy",
    "PolicyConfig",
    "PolicySearch",
    "Scores",
    "SearchConfig",
    "SearchResult",
    "best_of_samples",
    "check_budget",
    "cluster_links",
    "decodes_like_episodes",
    "graph_inputs",
    "make_baseline",
    "play_episodes",
    "plc_devices",
    "policy_search",
    "sample_placements",
    "score",
]
