"""``placegym train CONFIG.yaml [key=value ...]``: phase I/II/III training from a YAML config
(a file, or a preset shipped with the package by name: ``placegym train quickstart``).

Ctrl-C prints one line (the update reached and the checkpoint that the same command
resumes from) and exits with 130; a resume with a changed config, or a second run into
a folder that another one holds, is one line with exit code 2
(:func:`placegym.train.cli.main.main`)."""

from __future__ import annotations

import argparse
from pathlib import Path

#: The ``--help`` epilog: the overrides people look for first.
TRAIN_EPILOG = """\
useful overrides:
  out=DIR              the run folder (default runs/<name>); one run at a time in it
  progress=false       no progress at all (default auto: a bar when stderr is a
                       terminal, else a line every few seconds, update k/N and elapsed,
                       so a log shows the run is alive; true forces the bar)
  wandb.mode=disabled  no Weights & Biases files (default auto: online with an API key,
                       else offline)
  resume=false         start the run folder over instead of resuming it
  seed=1 restarts=3    another seed; three runs, the best one kept

Ctrl-C stops a run (exit code 130); the same command resumes it from
checkpoints/latest.pt. Running a finished run again prints its results, trains
nothing."""


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``train`` on the CLI's subparsers."""
    p = sub.add_parser(
        "train",
        help="train a placement agent (imitation, then RL) from a YAML config",
        description=(  # kept as written (the raw formatter, for the epilog's table)
            "Run the phases named by CONFIG (see configs/ and placegym.train.config).\n"
            "Overrides use dotted keys with YAML values, e.g. phase2.updates=50\n"
            "phase2.lr=3e-4 data.graphs=[ffnn,chainmm] wandb.mode=disabled. A run resumes\n"
            "from its folder's latest checkpoint (resume=false starts over), with the\n"
            "same config only: a changed key is refused (out=DIR trains a new run)."
        ),
        epilog=TRAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    from placegym.train.checkpoint import Interrupted
    from placegym.train.restarts import train

    try:
        train(cfg, base_dir=base)
    except Interrupted:
        raise
    except KeyboardInterrupt:  # before the trainer ran (loading graphs, starting Ray)
        raise Interrupted() from None
    return 0
