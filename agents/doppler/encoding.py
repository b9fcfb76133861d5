"""The per-graph encoding of the dual policy and what its PLC inputs read of the policy.

:class:`Encoding` holds the encoders' outputs that :class:`~placegym.agents.doppler.
policy.DopplerPolicy` computes once per graph; :class:`PlcPolicy` is the part of the
policy that the optional PLC inputs of :mod:`~placegym.agents.doppler.inputs` and the
feature functions of :mod:`~placegym.agents.doppler.features` read (its config and the
learned layers those inputs own). Both sit here, below the policy and its inputs, so
that neither module imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from torch import Tensor, nn

from placegym.agents.doppler.config import PolicyConfig
from placegym.agents.nn.encoder import GraphInputs

__all__ = ["Encoding", "PlcPolicy"]


@dataclass
class Encoding:
    """Per-graph encoder outputs: SEL ``h (n, H)``, ``cp (n, 2H)`` and their projection
    into the SEL head ``sel_static (n, H)``; PLC ``h (n, H)`` and, with affinities, its
    ``query`` and ``key`` projections ``(n, H)``."""

    sel_h: Tensor
    sel_cp: Tensor
    sel_static: Tensor
    plc_h: Tensor
    graph: GraphInputs | None = None
    query: Tensor | None = None
    key: Tensor | None = None


class PlcPolicy(Protocol):
    """What the optional PLC inputs read of the policy: its config, the layers of the
    affinity input (``plc_query``, ``plc_key``) and the topology encoder
    (:meth:`device_topology`); :class:`~placegym.agents.doppler.policy.DopplerPolicy`
    is one."""

    config: PolicyConfig
    plc_query: nn.Linear
    plc_key: nn.Linear

    def device_topology(
        self, links: Tensor | None, dev: Tensor, count: Tensor, agg: Tensor
    ) -> Tensor:
        """``(S, D, T)`` per-device embeddings from message passing over the links."""
        ...
