"""A short DAgger run for the tests that check what imitation teaches a policy."""

import numpy as np

from placegym.agents.doppler.episodes import play_episodes
from placegym.envs import PlacementEnv


def imitate(policy, graph, cluster, teacher, updates: int = 40, lr: float = 1e-2, episodes=4):
    """``updates`` imitation updates of ``episodes`` episodes each on ``graph``, the
    teacher's roll-in probability decaying from 1 to 0 over the first half (seeded, the
    policy trained in place). Returns each update's imitation loss and the last
    update's records."""
    from placegym.train.imitation import epsilon, imitation_update
    from placegym.train.optim import make_optimizer

    opt, _ = make_optimizer(policy.parameters(), lr, "constant", updates, 1.0)
    envs = [PlacementEnv(graph, cluster) for _ in range(episodes)]
    rng = np.random.default_rng(0)
    losses = []
    for update in range(updates):
        records = play_episodes(
            policy,
            envs,
            list(range(episodes)),
            rng=rng,
            teacher=teacher,
            teacher_prob=epsilon(update, updates, 1.0, 0.0, 0.5),
            record_teacher=True,
        )
        losses.append(imitation_update(policy, opt, records, 1.0)["losses/imitation"])
    return losses, records
