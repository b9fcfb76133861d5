"""Per-step inputs of an episode, written into one array as the steps come.

:func:`~placegym.agents.doppler.episodes.play_episodes` records, at every step, arrays of
one shape (a state's mask, device map or device rows) or of a varying number of rows (the
frontier pairs of a SEL state). Appended to a list, each is a small heap block; joined
at the end of the episode, the record's arrays are new blocks beside them, and the heap
seldom returns the freed small blocks: 16 sampled episodes of a 4,859-node graph held
7.5 GB at their end for 3.4 GB of records. :class:`Steps` writes each step's array
into one array per episode instead: fixed shapes into rows allocated for every step
at the first, varying ones into an array grown by doubling and trimmed once, when the
record takes it (:meth:`Steps.joined`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Steps"]


class Steps:
    """The arrays of one per-step input, in step order.

    Args:
        steps: the steps to expect (the rows allocated at the first step; more raise).
        keep: keep every step's array; False keeps the last one only.
        ragged: the steps' arrays differ in their number of rows (``(k_s, ...)``),
            joined by concatenation; else they have one shape, joined by stacking.
        dtype: the type the arrays are kept in (cast as they are written; the values
            must fit); None: the first array's.

    ``len`` is the number of steps kept, ``steps[i]`` the array of kept step ``i``
    (``-1``: the last), a view of the buffer, valid until the next :meth:`append`.
    """

    def __init__(
        self,
        steps: int,
        *,
        keep: bool = True,
        ragged: bool = False,
        dtype: np.dtype | type | None = None,
    ) -> None:
        self.capacity = steps if keep else 1
        self.keep, self.ragged, self.dtype = keep, ragged, dtype
        self._data: np.ndarray | None = None
        self._ends = [0]  # ragged: the end row of each kept step
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> np.ndarray:
        if not -self._count <= i < self._count:
            raise IndexError(f"step {i} of {self._count} kept")
        i %= self._count
        assert self._data is not None
        if self.ragged:
            return self._data[self._ends[i] : self._ends[i + 1]]
        return self._data[i]

    def append(self, x: np.ndarray) -> None:
        """Write the next step's array (a copy: ``x`` may change afterwards)."""
        if not self.keep:  # the last step only
            self._count, self._ends = 0, [0]
        if self._count >= self.capacity:
            raise ValueError(f"steps: all {self.capacity} expected steps are recorded")
        if self.ragged:
            start = self._ends[-1]
            end = start + len(x)
            if self._data is None or end > len(self._data):
                size = max(end, 2 * (0 if self._data is None else len(self._data)), 16)
                grown = np.empty((size, *x.shape[1:]), dtype=self.dtype or x.dtype)
                if self._data is not None:
                    grown[:start] = self._data[:start]
                self._data = grown
            self._data[start:end] = x
            self._ends.append(end)
        else:
            if self._data is None:
                self._data = np.empty((self.capacity, *x.shape), dtype=self.dtype or x.dtype)
            self._data[self._count] = x
        self._count += 1

    def joined(self) -> np.ndarray:
        """The kept steps' arrays as one: stacked, or concatenated when ``ragged``. The
        buffer itself (its unused rows trimmed) where it can be; the steps are then
        released (nothing more is appended to a joined episode).

        Raises:
            ValueError: no step was recorded.
        """
        if self._data is None:
            raise ValueError("steps: need at least one array to join, got none")
        end = self._ends[-1] if self.ragged else self._count
        data = self._data if end == len(self._data) else self._data[:end].copy()
        self._data, self._count, self._ends = None, 0, [0]
        return data
