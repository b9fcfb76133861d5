"""``placegym train CONFIG.yaml [key=value ...]``: phase I/II/III training from a YAML config
(a file, or a preset shipped with the package by name: ``placegym train quickstart``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``train`` on the CLI's subparsers."""
    p = sub.add_parser(
        "train",
        help="train a placement agent (imitation, then RL) from a YAML config",
        description=(
            "Run the phases named by CONFIG (see configs/ and placegym.train.config). "
            "Overrides use dotted keys with YAML values, e.g. phase2.updates=50 "
            "phase2.lr=3e-4 data.graphs=[ffnn,chainmm] wandb.mode=disabled. A run resumes "
            "from its folder's latest checkpoint (resume=false starts over)."
        ),
    )
    p.add_argument("config", help="YAML config file, or a shipped preset's name (quickstart)")
    # REMAINDER so that options may also follow the overrides (argparse would stop there)
    p.add_argument(
        "overrides", nargs=argparse.REMAINDER, metavar="KEY=VALUE", help="config overrides"
    )
    p.add_argument(
        "--print-config", action="store_true", help="print the resolved config and exit"
    )
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    """Train (or print the resolved config of) a config file or a shipped preset."""
    from placegym.train.config import load_config, presets_dir

    overrides = []
    for item in args.overrides:
        if item == "--print-config":
            args.print_config = True
        elif item.startswith("-"):
            raise ValueError(f"train: unknown option {item!r} (options: --print-config)")
        else:
            overrides.append(item)
    given, preset = Path(args.config), presets_dir() / f"{args.config}.yaml"
    if not given.exists() and not given.suffix and preset.is_file():
        cfg, base = load_config(preset, overrides), preset.parent  # placegym train quickstart
    else:
        cfg, base = load_config(given, overrides), given.resolve().parent
    if args.print_config:
        print(cfg.to_yaml(), end="")
        return 0
    from placegym.train.restarts import train

    train(cfg, base_dir=base)
    return 0
