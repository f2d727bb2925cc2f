"""`onceflow backfill --pipeline P --start-offsets JSON --end-offsets JSON` (spark_apps/backfill.py)."""

from __future__ import annotations

import json


def add_parser(sub) -> None:
    p = sub.add_parser("backfill", help="re-read a committed offset range and re-write what the tables lack, exactly once")
    p.add_argument("--pipeline", default="pipelines/payments.yaml", help="the pipeline YAML")
    p.add_argument("--start-offsets", required=True, help='first offset per partition: {"0": 100}')
    p.add_argument("--end-offsets", required=True, help='offset after the last: {"0": 200}')
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_backfill)


def cmd_backfill(args) -> int:
    from onceflow import config
    from onceflow.cli import _log, out
    from onceflow.kafka.admin import require_pipeline_brokers
    from onceflow.ranges import offset_range

    # the same check as the <pipeline>_backfill DAG's: a backwards range is refused, never "0 re-written"
    start, end = offset_range(args.start_offsets, args.end_offsets, "--start-offsets", "--end-offsets")
    pipeline = config.load(args.pipeline)
    require_pipeline_brokers(pipeline)  # before the JVM starts

    from onceflow.spark.backfill import run_backfill

    result = run_backfill(pipeline, start, end, log=_log)
    if args.json:
        out.print_json(json.dumps(result.as_dict()))
    else:
        out.print(f"{result.pipeline}: {result.records} committed records in the range, {result.present} already "
                  f"in the tables, {result.added} re-written "
                  f"({', '.join(f'{s} {n}' for s, n in result.added_by_sink.items()) or 'none'})")
        for p, (s, e) in result.left_to_stream.items():
            out.print(f"partition {p}: offsets [{s}, {e}) are past the stream's committed end; the stream "
                      "ingests them, so the backfill left them")
    return 0
