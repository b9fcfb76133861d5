"""The generalist studies of ``placegym report``: which preset, test splits and budget
each part evaluates (:mod:`placegym.train.experiments.generalist` runs them). Kept apart
from the runner, without its imports, because the command line reads it to name its
flags.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BUDGET",
    "GENERALIST",
    "ONEPASS_MEMORY",
    "PRESET",
    "ROLLOUT_MEMORY",
    "STUDIES",
    "ZERO_SHOT_SPLITS",
    "Study",
]

#: The shipped preset trained (``configs/generalist_rollout.yaml``).
PRESET = "generalist_rollout"
#: ``(suite, split)`` evaluated zero-shot, in order.
ZERO_SHOT_SPLITS = (("generalize-v0", "test"), ("comm-heavy-v0", "test"))
#: Simulator calls of every search placer (agent + search, anneal, random search).
BUDGET = 3000


@dataclass(frozen=True)
class Study:
    """One generalist study: a shipped preset trained per seed, searched zero-shot on
    ``splits`` with ``budget`` simulator calls, beside the baselines at that budget.

    Attributes:
        part: the report part (``placegym report --parts PART``) and its folder.
        preset: the shipped config trained (``configs/PRESET.yaml``).
        splits: ``(suite, split)`` evaluated, in order.
        budget: simulator calls of every search placer; at least the greedy pass's
            ``n * D + 7`` on every instance, so the search runs past it.
        title: the heading of the part's tables.
        memory_mask: the device mask the policy decodes under, in its greedy pass and its
            search (:class:`~placegym.envs.mdp.state.PlacementState`: ``True``, ``"room"``).
    """

    part: str
    preset: str
    splits: tuple[tuple[str, str], ...]
    budget: int
    title: str
    memory_mask: bool | str = True

    @property
    def marks(self) -> tuple[int, ...]:
        """The calls the anytime lines report: 100, 1,000 and the budget."""
        return tuple(sorted({m for m in (100, 1000) if m < self.budget} | {self.budget}))


#: The rollout generalist of ``configs/generalist_rollout.yaml``
#: (:mod:`placegym.train.experiments.generalist`).
GENERALIST = Study("generalist", PRESET, ZERO_SHOT_SPLITS, BUDGET, "The generalist, zero-shot")
#: The rollout generalist trained with memory-tight and published workloads too
#: (``configs/generalist_rollout_memory.yaml``), on both memory test splits; 10,000 calls
#: cover the greedy pass's ``n * D + 7`` on every instance (at most 6,271).
ROLLOUT_MEMORY = Study(
    "generalist_rollout_memory",
    "generalist_rollout_memory",
    (("memory-tight-v0", "test"), ("published-v0", "test")),
    10_000,
    "The rollout generalist trained with memory data, zero-shot",
)
#: The one-pass policy trained on the same data (``configs/generalist_memory.yaml``: one
#: forward a step, one simulator call a greedy placement), on the same splits and budget.
#: It decodes under the ``"room"`` mask: under the resident one its greedy pass reaches
#: dead ends, a node that fits no device, on most memory-tight instances.
ONEPASS_MEMORY = Study(
    "generalist_memory",
    "generalist_memory",
    ROLLOUT_MEMORY.splits,
    ROLLOUT_MEMORY.budget,
    "The one-pass generalist trained with memory data, zero-shot",
    memory_mask="room",
)
#: Every study, by report part.
STUDIES = {s.part: s for s in (GENERALIST, ROLLOUT_MEMORY, ONEPASS_MEMORY)}
