"""The `onceflow` command. Thin: parses arguments, calls the library, prints."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console

from onceflow.errors import ConfigError, OnceflowError

console = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


def _log(msg: str) -> None:
    console.print(f"[dim]onceflow:[/dim] {msg}")


# -- setup -------------------------------------------------------------------
def cmd_setup(args) -> int:
    from onceflow import jvm

    jvm.check_versions()
    jvm.resolve(force=args.force, log=_log)
    return 0


# -- kafka -------------------------------------------------------------------
def _broker(args):
    from onceflow.kafka.broker import LocalBroker

    return LocalBroker(port=getattr(args, "port", None))


def cmd_kafka(args) -> int:
    broker = _broker(args)
    if args.action == "start":
        status = broker.start(timeout=args.timeout, log=_log)
        out.print(f"Kafka broker ready on {status.bootstrap} (pid {status.pid}); data in {status.data_dir}")
    elif args.action == "stop":
        was = broker.stop(log=_log)
        out.print("Kafka broker stopped" if was else "Kafka broker was not running")
    elif args.action == "status":
        status = broker.status()
        if args.json:
            out.print_json(json.dumps(status.__dict__))
        else:
            state = ("ready" if status.ready else "running, not answering") + f" (pid {status.pid})" \
                if status.running else "stopped"
            out.print(f"Kafka broker: {state}; bootstrap {status.bootstrap}; log {status.log_file}")
            if not status.running:
                out.print("start it with `onceflow kafka start`")
        return 0 if status.ready else 1
    elif args.action == "logs":
        out.print(broker.logs(args.lines), markup=False)
    return 0


# -- argument checks -----------------------------------------------------------
def number(flag: str, kind: type = int, minimum: float = 0, below: float | None = None, what: str = "the value"):
    """An argparse `type` that refuses values out of [minimum, below), naming the flag and the fix."""
    bound = f">= {minimum:g}" + (f" and < {below:g}" if below is not None else "")
    fix = f"Fix: pass {flag} N with N {bound}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if kind is int else 'a number'}. {fix}") from None
        if not (minimum <= value < (below if below is not None else float("inf"))):  # NaN fails too
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} must be {bound}. {fix}")
        return value
    return parse


# -- produce -----------------------------------------------------------------
def cmd_produce(args) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from onceflow.kafka.admin import require_broker
    from onceflow.kafka.producer import produce

    pipeline, group_by, kinds = _produce_plan(args.pipeline)
    if args.kinds:
        out.print("\n".join(kinds), markup=False)
        return 0
    bootstrap = args.bootstrap or pipeline.source.bootstrap_servers
    topic = args.topic or pipeline.source.topic
    field, file = ("--bootstrap", None) if args.bootstrap else ("source.bootstrap_servers", pipeline.file)
    require_broker(bootstrap, field=field, file=file)
    with Progress(TextColumn("producing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("produce", total=args.count)
        summary = produce(bootstrap, topic, args.count, schema=pipeline.schema, group_by=group_by,
                          partitions=args.partitions, rate=args.rate, seed=args.seed, abort_ratio=args.abort_ratio,
                          malformed_ratio=args.malformed_ratio, txn_size=args.txn_size, keep_records=False,
                          progress=lambda n: bar.advance(task, n))
    if args.json:
        out.print_json(json.dumps(summary.as_dict()))
    else:
        _print_produce_summary(summary)
    return 0


def _produce_plan(spec: str):
    """The pipeline, its group_by fields and the malformed kinds its schema can produce;
    a schema the generator cannot make events for is refused naming the file."""
    from onceflow import config
    from onceflow.schema.generate import Generator

    pipeline = config.load_pipeline(spec)
    group_by = pipeline.sinks.aggregates.group_by if pipeline.sinks.aggregates else ()
    try:
        kinds = Generator(pipeline.schema, group_by=group_by).kinds()
    except ConfigError as exc:
        raise ConfigError(f"{pipeline.file}: {exc}") from None
    return pipeline, group_by, kinds


def _print_produce_summary(summary) -> None:
    from rich.table import Table

    table = Table(title=f"produced to {summary.topic} in {summary.seconds:.1f}s "
                        f"({summary.transactions} transactions, {summary.aborted_transactions} aborted)")
    for col in ("partition", "committed", "valid", "malformed", "aborted"):
        table.add_column(col, justify="right")
    for p, c in sorted(summary.per_partition.items()):
        table.add_row(str(p), str(c["committed"]), str(c["committed_valid"]), str(c["committed_malformed"]),
                      str(c["aborted"]))
    table.add_row("all", *(str(summary.count(k)) for k in ("committed", "committed_valid",
                                                           "committed_malformed", "aborted")), style="bold")
    out.print(table)


# -- demo --------------------------------------------------------------------
def cmd_demo(args) -> int:
    from onceflow.demo import DEFAULT_PIPELINES, run_demo

    result = run_demo(args.pipeline or list(DEFAULT_PIPELINES), count=args.count, log=_log, out=out)
    return 0 if result["match"] else 1


# -- parser ------------------------------------------------------------------
# Modules that add their own subcommands (kept apart so each stays small).
COMMAND_MODULES: tuple[str, ...] = (
    "onceflow.checkpoint_cli",
    "onceflow.ingest_cli",
    "onceflow.recovery_cli",
    "onceflow.audit.cli",
    "onceflow.backfill_cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onceflow", description="Kafka into Delta exactly once, provably.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("setup", help="resolve the JVM jars (broker, Spark connectors) once")
    p.add_argument("--force", action="store_true", help="resolve again even if up to date")
    p.set_defaults(func=cmd_setup)

    p = sub.add_parser("kafka", help="the embedded Kafka broker (KRaft, one node)")
    p.add_argument("action", choices=["start", "stop", "status", "logs"])
    p.add_argument("--port", type=int, help="client port (default 9092 or ONCEFLOW_KAFKA_PORT)")
    p.add_argument("--timeout", type=float, default=90, help="seconds to wait for start-up")
    p.add_argument("--lines", type=int, default=50, help="log lines to show (logs)")
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.set_defaults(func=cmd_kafka)

    p = sub.add_parser("produce", help="write synthetic events of a pipeline's schema in transactions "
                                        "(docs/generator.md)")
    p.add_argument("--pipeline", default="payments",
                   help="pipeline name or YAML path: its schema, topic and bootstrap (default payments)")
    p.add_argument("--count", type=number("--count", minimum=1, what="the number of events"),
                   default=10_000, help="events to write (1 or more)")
    p.add_argument("--rate", type=number("--rate", float, what="the rate in events/s"), default=0,
                   help="events/s; 0 = as fast as possible")
    p.add_argument("--partitions", type=number("--partitions", minimum=1, what="the partition count"),
                   default=4, help="partitions if the topic is created")
    p.add_argument("--seed", type=int, help="makes the events reproducible")
    p.add_argument("--abort-ratio", type=number("--abort-ratio", float, below=1, what="the fraction"), default=0.0,
                   help="fraction of transactions aborted on purpose, in [0, 1)")
    p.add_argument("--malformed-ratio", type=number("--malformed-ratio", float, below=1, what="the fraction"),
                   default=0.0, help="fraction of records malformed on purpose, each kind as often (see --kinds)")
    p.add_argument("--txn-size", type=number("--txn-size", minimum=1, what="the transaction size"),
                   default=100, help="events per transaction")
    p.add_argument("--topic", help="instead of the pipeline's topic")
    p.add_argument("--bootstrap", help="instead of the pipeline's bootstrap servers")
    p.add_argument("--kinds", action="store_true", help="print the malformed kinds the pipeline can produce and exit")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_produce)

    p = sub.add_parser("demo", help="the demo: broker, events, exactly-once ingest, summary")
    p.add_argument("--pipeline", action="append",
                   help="a pipeline name or YAML path; repeat for several (default: payments and sensors)")
    p.add_argument("--count", type=number("--count", minimum=1, what="the number of events"),
                   default=20_000, help="events per pipeline")
    p.set_defaults(func=cmd_demo)

    # command groups that live beside the code they drive: each module has
    # `add_parser(sub)`, which adds its subcommand(s) with set_defaults(func=...)
    import importlib

    for module in COMMAND_MODULES:
        importlib.import_module(module).add_parser(sub)
    return parser


# commands whose pipeline's Kafka must answer before they start (and before any JVM does)
NEEDS_KAFKA: tuple[str, ...] = ("ingest", "audit", "backfill")


def prepare(args) -> None:
    """What every command gets before it runs, in this order: its own input checks (a command
    may set `check`), --pipeline resolved from a name or a path (config.find_pipeline, the
    same from any directory), the audit's report dir, the pipeline's Kafka checked for the
    commands that need it."""
    check = getattr(args, "check", None)
    if check is not None:
        check(args)
    if getattr(args, "pipeline", None) is not None:
        from onceflow import config

        if isinstance(args.pipeline, list):  # a command that takes several (demo)
            args.pipeline = [str(config.find_pipeline(p)) for p in args.pipeline]
        else:
            args.pipeline = str(config.find_pipeline(args.pipeline))
    if args.command == "audit" and not args.report_dir:
        from onceflow.paths import reports_dir

        args.report_dir = str(reports_dir())  # <state>/reports unless ONCEFLOW_REPORTS says otherwise
    if args.command in NEEDS_KAFKA:
        from onceflow import config
        from onceflow.kafka.admin import require_pipeline_brokers

        for spec in args.pipeline if isinstance(args.pipeline, list) else [args.pipeline]:
            require_pipeline_brokers(config.load(spec))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        prepare(args)
        return args.func(args)
    except OnceflowError as exc:
        console.print(f"[bold red]error:[/bold red] {exc}", markup=True, highlight=False)
        return 2
    except KeyboardInterrupt:
        console.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
