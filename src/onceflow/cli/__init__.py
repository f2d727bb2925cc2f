"""The `onceflow` command, one module per command group (setup, kafka, produce, demo,
checkpoint, ingest, recover, audit, backfill); shared printing in onceflow.cli.console.

    onceflow = onceflow.cli:main   (pyproject.toml)
"""

from onceflow.cli.app import build_parser, main, prepare

__all__ = ["build_parser", "main", "prepare"]
