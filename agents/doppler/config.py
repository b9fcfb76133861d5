"""The dual policy's configuration (:class:`PolicyConfig`) and the sizes of its inputs.

The widths of the optional inputs are declared with them, in
:mod:`placegym.agents.doppler.inputs`; this module holds the constants that the feature
functions (:mod:`placegym.agents.doppler.features`) share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AFFINITY_FEATURES",
    "INSERTION_FEATURES",
    "LEARN",
    "LINK_FEATURES",
    "PLC_RULES",
    "PRICE_FEATURES",
    "QUALITY_FEATURES",
    "RENAMED_FIELDS",
    "RULE_RTOL",
    "SEL_CONTEXT",
    "SEL_PICK",
    "SEL_RULES",
    "SUCCESSOR_FEATURES",
    "TOPOLOGY_CHANNELS",
    "TOPOLOGY_ROUNDS",
    "PolicyConfig",
]

#: Values of :attr:`PolicyConfig.learn`.
LEARN = ("both", "select", "place")
#: Number of :func:`~placegym.agents.doppler.features.sel_context` features.
SEL_CONTEXT = 3
#: Number of :func:`~placegym.agents.doppler.features.sel_rules` and of
#: :func:`~placegym.agents.doppler.features.plc_rules` features (``PolicyConfig.rules``).
SEL_RULES, PLC_RULES = 2, 1
#: Relative tolerance of the rule features' "is the best" tests: well above float32
#: rounding of the observation, well below any difference a teacher would act on.
RULE_RTOL = 1e-5
#: Features per ordered device pair of :func:`~placegym.agents.doppler.features.
#: cluster_links`, message channels per pair and rounds of
#: :meth:`~placegym.agents.doppler.policy.DopplerPolicy.device_topology`
#: (``PolicyConfig.topology``).
LINK_FEATURES, TOPOLOGY_CHANNELS, TOPOLOGY_ROUNDS = 2, 2, 2
#: Device columns of :func:`~placegym.agents.doppler.features.insertion_features`
#: (``PolicyConfig.insertion``).
INSERTION_FEATURES = 3
#: Device columns of :func:`~placegym.agents.doppler.features.successor_features`
#: (``PolicyConfig.successors``).
SUCCESSOR_FEATURES = 2
#: Device columns of :func:`~placegym.agents.doppler.features.price_features`
#: (``PolicyConfig.prices``).
PRICE_FEATURES = 2
#: SEL features of :func:`~placegym.agents.doppler.features.sel_pick`
#: (``PolicyConfig.prices``).
SEL_PICK = 1
#: Features per hint of :attr:`PolicyConfig.hint_quality`.
QUALITY_FEATURES = 2
#: Features per device of :func:`~placegym.agents.doppler.features.device_affinity`.
AFFINITY_FEATURES = 2
#: Fields of earlier versions that were renamed: old name -> new name (checkpoints store
#: the config as a dict; :meth:`PolicyConfig.from_dict` reads the old names).
RENAMED_FIELDS: dict[str, str] = {"rollout": "prices", "rollout_starts": "price_starts"}


@dataclass(frozen=True)
class PolicyConfig:
    """Sizes of the dual policy (also the ``policy`` section of ``placegym train`` configs).

    Attributes:
        hidden: embedding width ``H`` of both encoders and heads.
        layers: message-passing rounds per encoder.
        learn: phases the policy decides: ``both`` (the dual policy); ``select`` (every
            PLC action is the critical-path teacher's) or ``place`` (every SEL action
            is), as the wrappers :class:`~placegym.teachers.wrappers.SelectOnly` /
            ``PlaceOnly`` do (DOPPLER's ablations).
        siblings: give PLC the share of the node's siblings' bytes on each device
            (:func:`~placegym.agents.doppler.features.sibling_share`); False feeds zeros
            (the ablation). It is what lets PLC clone a plan's device map: behaviour
            cloning of anneal's chainmm map (300 updates) ends at a PLC loss of 0.29 with
            it and 0.64 without (greedy 0.80 vs 0.88 of critical_path).
        hints: teachers whose placements PLC sees as hints (e.g. ``("nest", "metis")``;
            :mod:`placegym.agents.doppler.hints`), computed once per graph and cluster.
        positions: the encoders also read each node's depth and position within its
            depth level (:func:`~placegym.agents.nn.encoder.node_positions`).
        affinity: PLC also sees, per device, the largest and the mean learned affinity
            (a scaled dot product of query and key projections of the PLC embeddings)
            between the node and the nodes already there
            (:func:`~placegym.agents.doppler.features.device_affinity`): a learned "put
            me with these nodes" that can express any grouping.
        rules: both heads read the critical-path teacher's rule as features
            (:func:`~placegym.agents.doppler.features.sel_rules`,
            :func:`~placegym.agents.doppler.features.plc_rules`).
        hint_quality: PLC also sees, per hint, how good that hint's placement is on the
            graph (:func:`~placegym.agents.doppler.hints.hint_quality`: log of its
            simulated makespan over the best hint's, and whether it is the best, the same
            on every device) and the best hint's
            :func:`~placegym.agents.doppler.hints.hint_share` features again, so that it
            can learn to follow whichever hint is best on the graph (requires ``hints``;
            the ``best_list`` teacher with the hints as candidates labels exactly that).
        topology: PLC also reads a per-device embedding from
            :data:`TOPOLOGY_ROUNDS` rounds of message passing over the cluster's links
            (:meth:`~placegym.agents.doppler.policy.DopplerPolicy.device_topology`),
            started from each device's features and the mean embedding of its nodes.
            Without it PLC sees the network only through the selected node's estimated
            start on each device, so two empty devices equally far from the devices in
            use look alike even where the rest of the network tells them apart (on
            ``v100x8`` no two devices are interchangeable once one is in use), and a plan
            that chose one of them cannot be cloned. Permutation-equivariant: it works on
            any cluster.
        insertion: PLC also reads HEFT's rule per device: the selected node's
            insertion-based estimated start there (it may start in an idle gap of the
            device, :meth:`~placegym.envs.mdp.state.PlacementState.insertion_start`), its
            finish's lead over the earliest one and whether it is the earliest
            (:func:`~placegym.agents.doppler.features.insertion_features`, added to the
            device rows per state), beside the list-schedule estimate of the observation
            that the critical-path rule reads.
        successors: PLC also reads the one-step lookahead of HEFT's lookahead variant
            per device: how late the selected node's successor paths would finish if it
            went there (:func:`~placegym.teachers.heft.successor_finish`, each successor
            on its best device, plus the rest of its path to a sink), as its lead over
            the least one and whether it is the least
            (:func:`~placegym.agents.doppler.features.successor_features`, added to the
            device rows per state; the ``heft_lookahead`` teacher's rule). Computed from
            the state alone: no simulator call, ``O(successors * D * min(D, 16))`` a step.
            Needs ``insertion`` (it extends that schedule).
        prices: PLC also reads, per device, what the rest of the placement would cost
            there: the simulated makespan of ``heft_rule``'s completion of the state
            with the selected node on the device, as its lead over the least one and
            whether it is the least (:func:`~placegym.agents.doppler.features.
            price_features`, the ``lookahead`` teacher's prices). Decoding then costs one
            simulator call per legal device per node (``n * D`` a placement, compiled
            completions), which :func:`~placegym.agents.doppler.search.policy_search`
            counts in its budget (the heuristic starts, its greedy pass, then annealing
            moves only). SEL also reads which node the completions select next
            (:func:`~placegym.agents.doppler.features.sel_pick`): a policy that selects it
            and places on a device of least price never ends slower than the least price
            it has seen, hence never slower than ``heft_rule`` (the lookahead's
            cost-improvement property).
        price_starts: with ``prices``, the prices are the *fortified* lookahead's
            (:class:`~placegym.teachers.lookahead.LookaheadTeacher` with these
            ``starts``, e.g. ``("critical_path", "heft", "nest", "metis",
            "round_robin", "single_device")``): per device the lesser of ``heft_rule``'s
            completion and the incumbent's (the best placement known that extends the
            state; first the fastest of ``heft_rule``'s and those teachers' device maps
            in ``heft_rule``'s selection order). A policy that selects the pick and
            places on a device of least price is then never slower than any of them.
            Empty: the plain lookahead's prices.
        price_follow: with ``price_starts``, the fortified lookahead follows its
            incumbent (``LookaheadTeacher(follow=True)``): the starts keep their own
            selection orders, and SEL's pick is the node the pricer selects next (the
            incumbent's, or ``heft_rule``'s where one of its completions is faster). A
            policy that selects the pick and places on a device of least price is then
            never slower than any of the starts as they are, priorities included.

    Raises:
        ValueError: a size out of range, an unknown ``learn`` or a hint that is not a
            single-pass teacher, naming the field.
    """

    hidden: int = 64
    layers: int = 3
    learn: str = "both"
    siblings: bool = True
    hints: tuple[str, ...] = ()
    positions: bool = False
    affinity: bool = False
    rules: bool = False
    hint_quality: bool = False
    topology: bool = False
    insertion: bool = False
    successors: bool = False
    prices: bool = False
    price_starts: tuple[str, ...] = ()
    price_follow: bool = False

    def __post_init__(self) -> None:
        if self.hidden < 1:
            raise ValueError(f"hidden: must be >= 1, got {self.hidden!r}")
        if self.layers < 0:
            raise ValueError(f"layers: must be >= 0, got {self.layers!r}")
        if self.learn not in LEARN:
            raise ValueError(f"learn: expected one of {', '.join(LEARN)}, got {self.learn!r}")
        object.__setattr__(self, "hints", tuple(self.hints))
        if (
            "anneal" in self.hints
            or "optimal" in self.hints
            or len(set(self.hints)) != len(self.hints)
        ):
            raise ValueError(
                f"hints: expected distinct single-pass teachers, got {list(self.hints)}"
            )
        if self.successors and not self.insertion:
            raise ValueError("successors: needs insertion, got insertion=False")
        if self.hint_quality and not self.hints:
            raise ValueError("hint_quality: needs hints, got none")
        starts = self.price_starts
        starts = (starts,) if isinstance(starts, str) else tuple(starts)
        object.__setattr__(self, "price_starts", starts)
        if self.price_starts:
            from placegym.teachers import list_teachers, teacher_class
            from placegym.teachers.lookahead import LookaheadTeacher

            if not self.prices:
                raise ValueError("price_starts: needs prices, got prices=False")
            bad = [
                t
                for t in self.price_starts
                if t not in list_teachers() or issubclass(teacher_class(t), LookaheadTeacher)
            ]
            if bad or len(set(self.price_starts)) != len(self.price_starts):
                raise ValueError(
                    f"price_starts: expected distinct registered teachers other than a "
                    f"lookahead, got {list(self.price_starts)}"
                )
        if self.price_follow and not self.price_starts:
            raise ValueError("price_follow: needs price_starts, got none")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> PolicyConfig:
        """The config of a dict of its fields (a checkpoint's ``policy_config``), old field
        names (:data:`RENAMED_FIELDS`) read as their new ones.

        Raises:
            ValueError: a field given under both its old and its new name.
        """
        kwargs = dict(raw)
        for old, new in RENAMED_FIELDS.items():
            if old in kwargs:
                if new in kwargs:
                    raise ValueError(f"{old}: renamed {new}, got both")
                kwargs[new] = kwargs.pop(old)
        return cls(**kwargs)
