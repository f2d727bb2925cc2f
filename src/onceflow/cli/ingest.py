"""`onceflow ingest`: run a pipeline's streaming job in this process."""

from __future__ import annotations

import json

from onceflow.cli.console import log, number, out, seconds
from onceflow.config import DEFAULT_PIPELINE, DEFAULT_STOP_TIMEOUT
from onceflow.state.status import IngestMode


def add_parser(sub) -> None:

    p = sub.add_parser("ingest", help="run the exactly-once Kafka → Delta job of a pipeline")
    p.add_argument("--pipeline", default=DEFAULT_PIPELINE, help="a pipeline name or YAML path")
    p.add_argument(
        "--mode",
        choices=[m.value for m in IngestMode],
        default=IngestMode.AVAILABLE_NOW.value,
        help="continuous: run until stopped; available-now: process what is committed, then exit",
    )
    p.add_argument(
        "--until-idle",
        type=number("--until-idle", float, what="the idle time"),
        metavar="SECONDS",
        help="continuous mode: stop at a batch boundary after this long without new data",
    )
    p.add_argument(
        "--max-seconds",
        type=number("--max-seconds", float, what="the window"),
        metavar="SECONDS",
        help="stop at a batch boundary after this long (bounded streaming windows)",
    )
    p.add_argument(
        "--stop-timeout",
        type=seconds,
        metavar="SECONDS",
        default=DEFAULT_STOP_TIMEOUT,
        help="how long a stop (SIGTERM, --max-seconds, --until-idle) may wait for the batch in flight "
        "to commit; past it the run fails, saying so, rather than stop mid-batch "
        f"(default {DEFAULT_STOP_TIMEOUT:g})",
    )
    p.add_argument(
        "--lease",
        action="store_true",
        help="continuous mode: run while the pipeline is wanted (<state>/wanted.json, renewed by the stream "
        "DAG's runs) and stop at a batch boundary once nobody renews it (how Airflow starts the app)",
    )
    p.add_argument(
        "--recovery-run",
        metavar="RUN_ID",
        help="start while this recovery run is in progress (the query it starts); any other start waits for it",
    )
    p.add_argument(
        "--app-log",
        metavar="PATH",
        help="the file its launcher sends this run's output to: recorded in run.json, so whoever adopts "
        "the running app (the next stream DAG run) links the same log",
    )
    p.add_argument(
        "--standby",
        action="store_true",
        help="continuous mode: start the driver now, then wait as the pipeline's warm standby and take "
        "over the moment the running query dies (a batch's outage instead of a cold start; "
        "docs/exactly-once.md#a-warm-standby-driver)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_ingest, needs_kafka=True)


def cmd_ingest(args) -> int:
    from dataclasses import asdict

    from onceflow import config
    from onceflow.spark.ingest import run_ingest

    pipeline = config.load_pipeline(args.pipeline)  # cli.prepare found it and checked its Kafka
    result = run_ingest(
        pipeline,
        mode=args.mode,
        until_idle=args.until_idle,
        max_seconds=args.max_seconds,
        stop_timeout=args.stop_timeout,
        log=log,
        leased=args.lease,
        recovery_run=args.recovery_run,
        app_log=args.app_log,
        standby=args.standby,
    )
    if args.json:
        out.print_json(json.dumps(asdict(result)))
    else:
        out.print(
            f"{result.pipeline}: {result.status} after {result.seconds:.1f}s — {result.batches} batches, "
            f"{result.input_rows} records (generation {result.generation}, run {result.run_id})"
        )
    return 0
