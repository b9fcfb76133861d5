"""Summary statistics shared by training, the benchmark harness and the reports."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["geomean"]


def geomean(xs: Sequence[float]) -> float:
    """Geometric mean of positive values (nan for no values)."""
    return float(math.exp(np.mean(np.log(xs)))) if len(xs) else float("nan")
