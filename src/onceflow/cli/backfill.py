"""`onceflow backfill --pipeline P --start-offsets JSON --end-offsets JSON` (spark_apps/backfill.py)."""

from __future__ import annotations

import json

from onceflow.cli.console import log, out
from onceflow.config import DEFAULT_PIPELINE


def add_parser(sub) -> None:
    p = sub.add_parser(
        "backfill", help="re-read a committed offset range and re-write what the tables lack, exactly once"
    )
    p.add_argument("--pipeline", default=DEFAULT_PIPELINE, help="a pipeline name or YAML path")
    p.add_argument("--start-offsets", required=True, help='first offset per partition: {"0": 100}')
    p.add_argument("--end-offsets", required=True, help='offset after the last: {"0": 200}')
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_backfill, check=check_range, needs_kafka=True)


def check_range(args) -> None:
    """The same check as the <pipeline>_backfill DAG's (onceflow.ranges): a backwards range is
    refused with the fix, never answered with "0 re-written"; runs before Kafka is asked."""
    from onceflow.ranges import offset_range

    args.start_offsets, args.end_offsets = offset_range(
        args.start_offsets, args.end_offsets, "--start-offsets", "--end-offsets"
    )


def cmd_backfill(args) -> int:
    from onceflow import config
    from onceflow.spark.backfill import run_backfill

    pipeline = config.load_pipeline(args.pipeline)  # cli.prepare found it and checked its Kafka
    result = run_backfill(pipeline, args.start_offsets, args.end_offsets, log=log)
    if args.json:
        out.print_json(json.dumps(result.as_dict()))
    else:
        out.print(
            f"{result.pipeline}: {result.records} committed records in the range, {result.present} already "
            f"in the tables, {result.added} re-written "
            f"({', '.join(f'{s} {n}' for s, n in result.added_by_sink.items()) or 'none'})"
        )
        for p, (s, e) in result.left_to_stream.items():
            out.print(
                f"partition {p}: offsets [{s}, {e}) are past the stream's committed end; the stream "
                "ingests them, so the backfill left them"
            )
    return 0
