"""The `onceflow` command: builds the parser from one module per command group, prepares
the arguments every command shares (the pipeline, its Kafka), runs the command, and turns
an OnceflowError into its message and exit code 2."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from onceflow.cli.console import console
from onceflow.errors import OnceflowError

# in the order `onceflow --help` lists them; each is a module of onceflow.cli with `add_parser(sub)`,
# which adds its subcommand(s) with set_defaults(func=...) and says there what it needs: `check=` (its
# input checks and defaults, run first) and `needs_kafka=True` (its pipeline's Kafka must answer first).
# A command's module is named as the command, and is the only one imported when it runs: a poll of
# `onceflow checkpoint status` pays for no other command's imports
COMMANDS = (
    "setup",
    "kafka",
    "s3",
    "registry",
    "produce",
    "demo",
    "checkpoint",
    "metrics",
    "ingest",
    "recover",
    "quarantine",
    "audit",
    "backfill",
)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; of only the one `argv` names first, when it names one."""
    parser = argparse.ArgumentParser(prog="onceflow", description="Kafka into Delta exactly once, provably.")
    sub = parser.add_subparsers(dest="command", required=True)
    named = [c for c in COMMANDS if argv and argv[0] == c]
    for command in named or COMMANDS:
        importlib.import_module(f"onceflow.cli.{command}").add_parser(sub)
    return parser


def prepare(args) -> None:
    """What every command gets before it runs, in this order: its own input checks (a command
    may set `check`), --pipeline resolved from a name or a path (config.find_pipeline, the
    same from any directory), the pipeline's Kafka checked for a command that sets `needs_kafka`
    (before any JVM starts)."""
    check = getattr(args, "check", None)
    if check is not None:
        check(args)
    if getattr(args, "pipeline", None) is not None:
        from onceflow import config

        if isinstance(args.pipeline, list):  # a command that takes several (demo)
            args.pipeline = [str(config.find_pipeline(p)) for p in args.pipeline]
        else:
            args.pipeline = str(config.find_pipeline(args.pipeline))
    if getattr(args, "needs_kafka", False):
        from onceflow import config
        from onceflow.kafka.preflight import require_pipeline_brokers

        for spec in args.pipeline if isinstance(args.pipeline, list) else [args.pipeline]:
            pipeline = config.load_pipeline(spec)
            require_pipeline_brokers(pipeline)


def main(argv: list[str] | None = None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    try:
        prepare(args)
        return args.func(args)
    except OnceflowError as exc:
        console.print(f"[bold red]error:[/bold red] {exc}", markup=True, highlight=False)
        return 2
    except KeyboardInterrupt:
        console.print("interrupted")
        return 130
