"""The registered suites. Changing an instance here means a new suite version.

- ``workloads-v0``: DOPPLER's four workloads (chainmm, ffnn, llama_block, llama_layer) on
  ``p100x4``, ``v100x8`` and ``h100-2x8``. Train: the generators' default sizes; test:
  other block decompositions and sizes of the same workloads.
- ``comm-heavy-v0``: the same graphs with their tensors rescaled to CCR 1, 4 and 10 on
  each of ``p100x4``, ``doppler-unit-4`` and their 8-device variants ``p100x8`` and
  ``doppler-unit-8`` (DOPPLER's regime: transfers dearer than compute). Train and test
  as in ``workloads-v0``.
- ``generalize-v0``: train: ``random_dag`` at 64-160 nodes (seeds 0, 1) and the four
  workloads at default sizes; test: unseen sizes and seeds of ``random_dag`` (256, 320
  nodes; seeds 100, 101), the four workloads' test sizes, the ``moe`` family (seeds 0,
  1) and four real ``torch.nn`` models traced with ``from_fx``
  (:mod:`placegym.envs.suites.models`). Every graph on ``p100x4`` and ``v100x8``.
- ``memory-tight-v0``: generated graphs (``random_dag``, FFNN, Llama, MoE) with
  co-location groups of up to 3 nodes, made memory-tight on ``p100x4``, ``v100x8`` and
  ``h100-2x8`` (:func:`placegym.envs.workloads.memory.tighten`: resident bytes 50-90% of
  the devices' memory, some clusters with devices of two memory sizes; durations
  unchanged). Train and test differ in graphs, shares and memory ratios.
- ``published-v0``: the 24 published workloads of Tarnawski et al. (NeurIPS 2020;
  BERT, GNMT, InceptionV3, ResNet50 layer and operator graphs, 32-2,012 nodes; measured
  node times, resident bytes and co-location groups), each on its own accelerators
  (:mod:`placegym.envs.importers.dnn_partitioning`). Train: the 16 throughput inputs
  (16 GiB accelerators, inference and training); test: the 8 latency inputs, whose
  600 MiB or 2 GiB accelerators make memory bind.
- ``pipedream-v0``: one Adam training step of each of PipeDream's seven published layer
  profiles (alexnet, vgg16, resnet50 and gnmt in train; resnet18, inception_v3 and
  densenet121 in test, so the test models are unseen) on 2, 4 and 8 P100s over PCIe,
  every device's memory 1.05x (and, on 4 devices, 1.25x) the largest simulated peak of
  contiguous stages (:func:`~placegym.envs.workloads.memory.fit_live`), so a placement
  is certified by simulation to fit. On vgg16, the ResNets, inception_v3 and
  densenet121 the stashed activations bind (every weight fits one device); alexnet's and
  gnmt's weights take most of the memory. Recompute variants (``-recompute1.1``), where
  only recomputation fits: vgg16, resnet50, resnet18, inception_v3 and densenet121 on 2
  P100s, resnet50, inception_v3 and densenet121 on 4, densenet121 on 8, every device's
  memory 1.1x the largest simulated peak of contiguous stages checkpointed
  (:func:`~placegym.envs.workloads.memory.fit_recompute`): that placement, recompute set
  included, is certified by simulation to fit, and no placement without recompute can
  (:func:`~placegym.envs.analysis.memory.stash_infeasibility` proves it).
- ``training-v0``: one Adam training step
  (:func:`~placegym.envs.workloads.training.to_training_step`: backward nodes, stash and
  gradient edges, each layer's forward and backward as a co-location group, parameters,
  gradients and two moments resident) of generated graphs and traced models, made
  memory-tight (resident bytes 50-70% of memory, some clusters with devices of two
  memory sizes), some clusters with one send and one receive port per device and level
  (``links: "port"``). Train: random DAG, FFNN, Llama block, ResNet stage on ``p100x4``
  and ``v100x8`` (ports); test: another random DAG, a Llama layer, MoE and a GPT block on
  ``p100x4`` (ports), ``v100x8`` and ``h100-2x8`` (ports).
- ``nest-scale-v0``: 1.5k-9.3k node graphs on NEST's clusters. Train: a 4-layer Llama
  trunk (1,553 nodes) and a 2,000-node ``random_dag`` on ``tpuv4-fattree-64`` and
  ``h100-spineleaf-64``; test: a 24-layer Llama trunk (9,313 nodes) on both 1024-device
  clusters, a 64-expert MoE layer (3,204 nodes) and a 9-matrix chain in 8×8 blocks
  (5,184 nodes) on one each.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from placegym.envs.core.cluster import Links
from placegym.envs.importers.dnn_partitioning import INPUTS
from placegym.envs.suites.spec import GraphRecipe, InstanceSpec, Suite, model, published, workload
from placegym.envs.workloads.memory import live_name, recompute_name, tight_name

Sizes = tuple[tuple[str, str, dict[str, Any]], ...]

#: DOPPLER's workloads: (label, generator, parameters) of the train and test sizes.
TRAIN_WORKLOADS: Sizes = (
    ("chainmm-6x2", "chainmm", {}),
    ("ffnn-3x2x4", "ffnn", {}),
    ("llama_block-1x16", "llama_block", {}),
    ("llama_layer-1x16x16", "llama_layer", {}),
)
TEST_WORKLOADS: Sizes = (
    ("chainmm-4x3", "chainmm", {"matrices": 4, "blocks": 3, "dim": 3072}),
    ("ffnn-2x4x4", "ffnn", {"dims": (2048, 4096, 2048), "batch_blocks": 4, "feature_blocks": 4}),
    ("llama_block-2x8", "llama_block", {"layers": 2, "head_groups": 8}),
    ("llama_layer-1x8x8-s1024", "llama_layer", {"head_groups": 8, "mlp_blocks": 8, "seq": 1024}),
)
CCRS = (1, 4, 10)


def _grid(
    graphs: list[tuple[str, GraphRecipe]], clusters: tuple[str, ...]
) -> tuple[InstanceSpec, ...]:
    return tuple(InstanceSpec(f"{label}@{c}", spec, c) for c in clusters for label, spec in graphs)


def _workloads(sizes: Sizes) -> list[tuple[str, GraphRecipe]]:
    return [(label, workload(name, **params)) for label, name, params in sizes]


def _comm_heavy(sizes: Sizes) -> list[tuple[str, GraphRecipe]]:
    return [
        (f"{label}-ccr{r}", workload(name, ccr=float(r), **params))
        for label, name, params in sizes
        for r in CCRS
    ]


def _random_dags(nodes: tuple[int, ...], seeds: tuple[int, ...]) -> list[tuple[str, GraphRecipe]]:
    return [
        (f"random_dag-{n}-s{s}", workload("random_dag", nodes=n, seed=s))
        for n in nodes
        for s in seeds
    ]


_WORKLOAD_CLUSTERS = ("p100x4", "v100x8", "h100-2x8")
_COMM_CLUSTERS = ("p100x4", "doppler-unit-4", "p100x8", "doppler-unit-8")
_GENERALIZE_CLUSTERS = ("p100x4", "v100x8")

_GENERALIZE_TEST = [
    *_random_dags((256, 320), (100, 101)),
    *_workloads(TEST_WORKLOADS),
    *((f"moe-8x2x4-s{s}", workload("moe", seed=s)) for s in (0, 1)),
    *((name, model(name)) for name in ("gpt_block", "resnet_stage", "unet_block", "moe_layer")),
]

_LLAMA_TRUNK = {"head_groups": 32, "mlp_blocks": 32}

#: memory-tight-v0: (cluster preset, resident share, memory ratios) of each split.
_TIGHT_TRAIN = (("p100x4", 0.7, (1.0, 2.0)), ("v100x8", 0.5, (1.0,)), ("h100-2x8", 0.65, (1.0,)))
_TIGHT_TEST = (("p100x4", 0.9, (1.0,)), ("v100x8", 0.7, (1.0, 2.0)), ("h100-2x8", 0.6, (1.0, 2.0)))


def _tight(
    graphs: list[tuple[str, GraphRecipe]],
    settings: tuple[tuple[str, float, tuple[float, ...]], ...],
) -> tuple[InstanceSpec, ...]:
    """Each graph with groups of up to 3 nodes, on each preset made memory-tight."""
    out = []
    for preset, resident, ratios in settings:
        name = tight_name(preset, resident, ratios)
        for label, spec in graphs:
            tight = dataclasses.replace(spec, groups=3, resident=resident, ratios=ratios)
            out.append(InstanceSpec(f"{label}@{name}", tight, preset))
    return tuple(out)


#: pipedream-v0: the profiles of each split, and the (cluster preset, slack) pairs.
_PIPEDREAM_TRAIN = ("alexnet", "vgg16", "resnet50", "gnmt")
_PIPEDREAM_TEST = ("resnet18", "inception_v3", "densenet121")
_PIPEDREAM_CLUSTERS = (("p100x2", 1.05), ("p100x4", 1.05), ("p100x4", 1.25), ("p100x8", 1.05))
#: pipedream-v0's recompute variants: the profiles on each cluster preset where
#: :func:`~placegym.envs.workloads.memory.fit_recompute` at this slack proves that only
#: recomputation fits (alexnet's and gnmt's weights, and vgg16's and resnet18's first
#: layers on 4 or more devices, leave recomputation too little to win).
_RECOMPUTE_SLACK = 1.1
_PIPEDREAM_RECOMPUTE = (
    ("p100x2", ("vgg16", "resnet50", "resnet18", "inception_v3", "densenet121")),
    ("p100x4", ("resnet50", "inception_v3", "densenet121")),
    ("p100x8", ("densenet121",)),
)


def _pipedream(models: tuple[str, ...]) -> tuple[InstanceSpec, ...]:
    """Each profile as one Adam training step, on each cluster made tight on live
    tensors (:func:`~placegym.envs.workloads.memory.fit_live`); then its recompute
    variants (:func:`~placegym.envs.workloads.memory.fit_recompute`)."""
    live = tuple(
        InstanceSpec(
            f"{model}-train@{live_name(preset, slack)}",
            GraphRecipe("pipedream", model, training="adam", live=slack),
            preset,
        )
        for model in models
        for preset, slack in _PIPEDREAM_CLUSTERS
    )
    slack = _RECOMPUTE_SLACK
    again = tuple(
        InstanceSpec(
            f"{model}-train@{recompute_name(preset, slack)}",
            GraphRecipe("pipedream", model, training="adam", recompute=slack),
            preset,
        )
        for model in models
        for preset, chosen in _PIPEDREAM_RECOMPUTE
        if model in chosen
    )
    return live + again


#: training-v0: (cluster preset, resident share, memory ratios, links) of each split.
_STEP_TRAIN: tuple[tuple[str, float, tuple[float, ...], Links], ...] = (
    ("p100x4", 0.6, (1.0,), "pair"),
    ("v100x8", 0.5, (1.0, 2.0), "port"),
)
_STEP_TEST: tuple[tuple[str, float, tuple[float, ...], Links], ...] = (
    ("p100x4", 0.7, (1.0,), "port"),
    ("v100x8", 0.6, (1.0, 2.0), "pair"),
    ("h100-2x8", 0.5, (1.0,), "port"),
)


def _steps(
    graphs: list[tuple[str, GraphRecipe]],
    settings: tuple[tuple[str, float, tuple[float, ...], Links], ...],
) -> tuple[InstanceSpec, ...]:
    """Each graph as one Adam training step, on each preset made memory-tight, with the
    preset's links."""
    out = []
    for preset, resident, ratios, links in settings:
        name = tight_name(preset, resident, ratios)
        if links != "pair":
            name += f"-{links}"
        for label, spec in graphs:
            step = dataclasses.replace(
                spec, training="adam", resident=resident, ratios=ratios, links=links
            )
            out.append(InstanceSpec(f"{label}-train@{name}", step, preset))
    return tuple(out)


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            "workloads-v0",
            "DOPPLER's four workloads on p100x4, v100x8 and h100-2x8",
            {
                "train": _grid(_workloads(TRAIN_WORKLOADS), _WORKLOAD_CLUSTERS),
                "test": _grid(_workloads(TEST_WORKLOADS), _WORKLOAD_CLUSTERS),
            },
        ),
        Suite(
            "comm-heavy-v0",
            "the four workloads at CCR 1, 4, 10 on p100x4, doppler-unit-4 and 8-device variants",
            {
                "train": _grid(_comm_heavy(TRAIN_WORKLOADS), _COMM_CLUSTERS),
                "test": _grid(_comm_heavy(TEST_WORKLOADS), _COMM_CLUSTERS),
            },
        ),
        Suite(
            "generalize-v0",
            "train on generator families; test on unseen sizes, seeds, moe and traced models",
            {
                "train": _grid(
                    [*_random_dags((64, 96, 128, 160), (0, 1)), *_workloads(TRAIN_WORKLOADS)],
                    _GENERALIZE_CLUSTERS,
                ),
                "test": _grid(_GENERALIZE_TEST, _GENERALIZE_CLUSTERS),
            },
        ),
        Suite(
            "nest-scale-v0",
            "1.5k-9.3k node graphs on NEST's 64- and 1024-device clusters",
            {
                "train": _grid(
                    [
                        ("llama_layer-4x32x32", workload("llama_layer", layers=4, **_LLAMA_TRUNK)),
                        ("random_dag-2000-s0", workload("random_dag", nodes=2000, width=32)),
                    ],
                    ("tpuv4-fattree-64", "h100-spineleaf-64"),
                ),
                "test": (
                    *_grid(
                        [
                            (
                                "llama_layer-24x32x32",
                                workload("llama_layer", layers=24, **_LLAMA_TRUNK),
                            )
                        ],
                        ("tpuv4-fattree-1024", "h100-spineleaf-1024"),
                    ),
                    InstanceSpec(
                        "moe-64x16-s1@tpuv4-fattree-1024",
                        workload("moe", experts=64, expert_blocks=16, seed=1),
                        "tpuv4-fattree-1024",
                    ),
                    InstanceSpec(
                        "chainmm-9x8@h100-spineleaf-1024",
                        workload("chainmm", matrices=9, blocks=8),
                        "h100-spineleaf-1024",
                    ),
                ),
            },
            reference_budget=4000,
            reference_seeds=(1,),
        ),
        Suite(
            "memory-tight-v0",
            "generated graphs with co-location groups; resident bytes fill 50-90% of memory",
            {
                "train": _tight(
                    [
                        *_random_dags((96,), (0,)),
                        *_random_dags((160,), (1,)),
                        ("ffnn-3x2x4", workload("ffnn")),
                        ("llama_block-1x16", workload("llama_block")),
                    ],
                    _TIGHT_TRAIN,
                ),
                "test": _tight(
                    [
                        *_random_dags((256,), (100,)),
                        *_random_dags((128,), (101,)),
                        ("llama_layer-1x16x16", workload("llama_layer")),
                        ("moe-8x2x4-s0", workload("moe", seed=0)),
                    ],
                    _TIGHT_TEST,
                ),
            },
        ),
        Suite(
            "published-v0",
            "Tarnawski et al.'s 24 published workloads on their own accelerators",
            {
                "train": tuple(published(p) for p in INPUTS if p.startswith("throughput")),
                "test": tuple(published(p) for p in INPUTS if p.startswith("latency")),
            },
        ),
        Suite(
            "pipedream-v0",
            "Adam training steps of PipeDream's published layer profiles; memory set where "
            "the stashed activations bind and contiguous stages are certified to fit, or "
            "where only recomputation fits",
            {"train": _pipedream(_PIPEDREAM_TRAIN), "test": _pipedream(_PIPEDREAM_TEST)},
        ),
        Suite(
            "training-v0",
            "Adam training steps of generated graphs and traced models on memory-tight "
            "clusters, some with one send and one receive port per device",
            {
                "train": _steps(
                    [
                        *_random_dags((96,), (0,)),
                        ("ffnn-3x2x4", workload("ffnn")),
                        ("llama_block-1x16", workload("llama_block")),
                        ("resnet_stage", model("resnet_stage")),
                    ],
                    _STEP_TRAIN,
                ),
                "test": _steps(
                    [
                        *_random_dags((128,), (101,)),
                        ("llama_layer-1x16x16", workload("llama_layer")),
                        ("moe-8x2x4-s0", workload("moe", seed=0)),
                        ("gpt_block", model("gpt_block")),
                    ],
                    _STEP_TEST,
                ),
            },
        ),
    )
}
