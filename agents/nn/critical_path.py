"""``CriticalPathPool``: embeddings aggregated along each node's critical paths."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn


def critical_path_pointers(
    edges: np.ndarray, down_key: np.ndarray, up_key: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """For each node, the next node on its longest path to a sink (the consumer of
    largest ``down_key``, e.g. b-level) and on its longest path from a source (the
    producer of largest ``up_key``, e.g. t-level + own cost); ``-1`` at sinks / sources.
    Ties go to the smallest id."""
    nxt = np.full(n, -1, dtype=np.int64)
    prv = np.full(n, -1, dtype=np.int64)
    if len(edges):
        u, v = edges[:, 0], edges[:, 1]
        order = np.lexsort((v, -down_key[v], u))  # per u: best consumer first
        first = np.ones(len(order), dtype=bool)
        first[1:] = u[order][1:] != u[order][:-1]
        nxt[u[order][first]] = v[order][first]
        order = np.lexsort((u, -up_key[u], v))  # per v: best producer first
        first = np.ones(len(order), dtype=bool)
        first[1:] = v[order][1:] != v[order][:-1]
        prv[v[order][first]] = u[order][first]
    return nxt, prv


class CriticalPathPool(nn.Module):
    r"""Mean of node embeddings along a pointer path, for every node at once.

    Given ``pointer[v]`` (the next node on v's critical path, -1 at its end), returns
    :math:`\frac{1}{|P_v|}\sum_{u \in P_v} h_u` where :math:`P_v = (v, p(v), p(p(v)),
    \dots)`, computed by pointer doubling in ``ceil(log2 n)`` vectorised rounds (no loop
    over nodes).

    Shapes:
        - input: ``h (n, H)``, ``pointer (n,)`` long
        - output: ``(n, H)``
    """

    def forward(self, h: Tensor, pointer: Tensor) -> Tensor:
        """Mean of ``h`` along each node's pointer chain (see the class docstring)."""
        n = h.shape[0]
        if n == 0:
            return h
        total = h
        count = torch.ones(n, 1, dtype=h.dtype, device=h.device)
        ptr = pointer.clone()
        for _ in range(max(1, int(np.ceil(np.log2(n))))):
            valid = ptr >= 0
            if not bool(valid.any()):
                break
            safe = ptr.clamp(min=0)
            mask = valid.unsqueeze(1).to(h.dtype)
            total = total + total[safe] * mask
            count = count + count[safe] * mask
            ptr = torch.where(valid, ptr[safe], ptr)
        return total / count

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
