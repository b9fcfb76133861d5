"""The ``ccr=`` option every workload generator takes (see :mod:`placegym.envs.analysis.ccr`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from placegym.envs.core.graph import Graph

#: The cluster a generator's ``ccr=`` is measured on unless ``ccr_cluster`` says otherwise
#: (DOPPLER's setting).
DEFAULT_CCR_CLUSTER = "p100x4"

_DOC = """
    Keyword Args:
        ccr: when given, every ``out_bytes`` is scaled by one factor so that the graph's
            communication-to-computation ratio on ``ccr_cluster`` is exactly ``ccr``
            (:func:`placegym.envs.analysis.ccr.scale_to_ccr`; the name gets ``-ccr<value>``).
            None (default) keeps the generated sizes.
        ccr_cluster: preset name or cluster JSON the CCR is measured on.
"""


def ccr_option(fn: Callable[..., Graph]) -> Callable[..., Graph]:
    """Add the keyword-only ``ccr`` and ``ccr_cluster`` parameters to a generator."""
    sig = inspect.signature(fn)
    extra = [
        inspect.Parameter("ccr", inspect.Parameter.KEYWORD_ONLY, default=None),
        inspect.Parameter(
            "ccr_cluster", inspect.Parameter.KEYWORD_ONLY, default=DEFAULT_CCR_CLUSTER
        ),
    ]

    @functools.wraps(fn)
    def generate(*args, ccr=None, ccr_cluster=DEFAULT_CCR_CLUSTER, **kwargs) -> Graph:
        graph = fn(*args, **kwargs)
        if ccr is None:
            return graph
        from placegym.envs.analysis.ccr import scale_to_ccr
        from placegym.envs.core.presets import load_cluster

        return scale_to_ccr(graph, load_cluster(ccr_cluster), ccr)

    generate.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *extra])  # type: ignore[attr-defined]
    generate.__doc__ = (fn.__doc__ or "").rstrip() + "\n" + _DOC
    return generate
