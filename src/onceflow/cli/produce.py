"""`onceflow produce`: synthetic events of a pipeline's schema, written in transactions; for a
Debezium pipeline, a change stream of its table and the table it must end as (`--expect`)."""

from __future__ import annotations

import json
from pathlib import Path

from onceflow.cli.console import console, number, out
from onceflow.generate.large import RATIO as LARGE_RATIO


def add_parser(sub) -> None:
    p = sub.add_parser(
        "produce", help="write synthetic events of a pipeline's schema in transactions (docs/generator.md)"
    )
    p.add_argument(
        "--pipeline",
        default="payments",
        help="pipeline name or YAML path: its schema, topic and bootstrap (default payments)",
    )
    p.add_argument(
        "--count",
        type=number("--count", minimum=1, what="the number of events"),
        default=10_000,
        help="events to write (1 or more)",
    )
    p.add_argument(
        "--rate",
        type=number("--rate", float, what="the rate in events/s"),
        default=0,
        help="events/s; 0 = as fast as possible",
    )
    p.add_argument(
        "--partitions",
        type=number("--partitions", minimum=1, what="the partition count"),
        default=4,
        help="partitions if the topic is created",
    )
    p.add_argument("--seed", type=int, help="makes the events reproducible")
    p.add_argument(
        "--abort-ratio",
        type=number("--abort-ratio", float, below=1, what="the fraction"),
        default=0.0,
        help="fraction of transactions aborted on purpose, in [0, 1)",
    )
    p.add_argument(
        "--malformed-ratio",
        type=number("--malformed-ratio", float, below=1, what="the fraction"),
        default=0.0,
        help="fraction of records malformed on purpose, each kind as often (see --kinds)",
    )
    p.add_argument(
        "--large-ratio",
        type=number("--large-ratio", float, below=1, what="the fraction"),
        default=LARGE_RATIO,
        help=f"fraction of valid events made large on purpose: long strings, exactly max_bytes, deep or wide "
        f"members, all still valid (default {LARGE_RATIO})",
    )
    p.add_argument(
        "--txn-size",
        type=number("--txn-size", minimum=1, what="the transaction size"),
        default=100,
        help="events per transaction",
    )
    p.add_argument(
        "--duplicate-ratio",
        type=number("--duplicate-ratio", float, below=1, what="the fraction"),
        default=0.05,
        help="change streams (schema.format: debezium): share of the delivered changes that are redeliveries "
        "(default 0.05)",
    )
    p.add_argument(
        "--out-of-order-ratio",
        type=number("--out-of-order-ratio", float, below=0.5, what="the fraction"),
        default=0.05,
        help="change streams: share of the changes delivered after a newer change of their key, in [0, 0.5) "
        "(default 0.05)",
    )
    p.add_argument(
        "--expect",
        metavar="FILE",
        type=Path,
        help="change streams: where to write the table the database holds at the end, as JSON "
        "(default <state dir>/expected/<topic>.json)",
    )
    p.add_argument("--topic", help="instead of the pipeline's topic")
    p.add_argument("--bootstrap", help="instead of the pipeline's bootstrap servers (plaintext)")
    p.add_argument(
        "--kafka-connection",
        metavar="ID",
        help="write with this kafka connection's servers and settings (AIRFLOW_CONN_<ID>) instead of the "
        "pipeline's: a producer principal of its own, when the pipeline's may only read (docs/kafka-security.md)",
    )
    p.add_argument("--kinds", action="store_true", help="print the malformed kinds the pipeline can produce and exit")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_produce)


def cmd_produce(args) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from onceflow.generate.framing import registry_framing
    from onceflow.generate.producer import produce
    from onceflow.kafka.admin import require_broker
    from onceflow.kafka.client import KafkaClient, connection_client, source_client

    pipeline, group_by, kinds = produce_plan(args.pipeline)
    if args.kinds:
        out.print("\n".join(kinds), markup=False)
        return 0
    topic = args.topic or pipeline.source.topic
    field, file = "source.bootstrap_servers", pipeline.file
    if args.bootstrap:
        cluster, field, file = KafkaClient(args.bootstrap), "--bootstrap", None
    elif args.kafka_connection:
        cluster, field, file = connection_client(args.kafka_connection), "--kafka-connection", None
    else:
        cluster = source_client(pipeline)
    # on a secured cluster a missing WRITE or transactional-id ACL is named now, not at the first transaction
    access = {"topics_write": [topic], "creatable": [topic], "transactional_id": "onceflow-produce-preflight"}
    require_broker(cluster, field=field, file=file, access=access)
    framing = registry_framing(pipeline, malformed=args.malformed_ratio > 0)
    with Progress(
        TextColumn("producing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task("produce", total=args.count)
        summary = produce(
            cluster,
            topic,
            args.count,
            schema=pipeline.schema,
            group_by=group_by,
            partitions=args.partitions,
            rate=args.rate,
            seed=args.seed,
            abort_ratio=args.abort_ratio,
            malformed_ratio=args.malformed_ratio,
            large_ratio=args.large_ratio,
            txn_size=args.txn_size,
            keep_records=False,
            progress=lambda n: bar.advance(task, n),
            keyed=pipeline.keyed,
            duplicate_ratio=args.duplicate_ratio,
            out_of_order_ratio=args.out_of_order_ratio,
            **framing,
        )
    expect = write_expected(summary, args.expect)
    if args.json:
        data = summary.as_dict()
        if expect is not None:
            data["expected"] = str(expect)
        out.print_json(json.dumps(data))
    else:
        print_summary(summary, expect)
    return 0


def write_expected(summary, path: Path | None) -> Path | None:
    """A change stream's expected table written as JSON (generate/changes.py, expected_document):
    the rows the database holds at the end, which the keyed table must equal once the job has
    read every committed record. None for plain events."""
    if summary.changes is None:
        return None
    from onceflow.paths import state_dir

    path = path or state_dir() / "expected" / f"{summary.topic}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"topic": summary.topic, **summary.changes.expected_document()}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def produce_plan(spec: str):
    """The pipeline, its group_by fields and the malformed kinds its schema can produce (of its
    change events, for a Debezium pipeline); a schema the generator cannot make events for is
    refused naming the file."""
    from onceflow import config
    from onceflow.errors import ConfigError
    from onceflow.generate.avro_events import framed_kinds
    from onceflow.generate.changes import ChangeStream
    from onceflow.generate.debezium_avro import avro_change_kinds
    from onceflow.generate.records import Generator
    from onceflow.schema import reasons
    from onceflow.schema.model import AVRO, PROTOBUF

    pipeline = config.load_pipeline(spec)
    group_by = pipeline.sinks.aggregates.group_by if pipeline.sinks.aggregates else ()
    keyed = pipeline.keyed
    try:
        if keyed is not None and keyed.debezium:
            stream = ChangeStream(pipeline.schema, keyed, count=0)
            kinds = avro_change_kinds(stream) if pipeline.schema.framing == AVRO else stream.kinds()
        elif pipeline.schema.format in (AVRO, PROTOBUF):
            framing = reasons.FRAMED_REASONS[pipeline.schema.format]
            kinds = framed_kinds(Generator(pipeline.schema, group_by=group_by), reasons=framing)
        else:
            kinds = Generator(pipeline.schema, group_by=group_by).kinds()
    except ConfigError as exc:
        raise ConfigError(f"{pipeline.file}: {exc}") from None
    return pipeline, group_by, kinds


def print_summary(summary, expect: Path | None = None) -> None:
    from rich.table import Table

    table = Table(
        title=f"produced to {summary.topic} in {summary.seconds:.1f}s "
        f"({summary.transactions} transactions, {summary.aborted_transactions} aborted)"
    )
    what = ("committed", "committed_valid", "committed_large", "committed_malformed", "aborted")
    for col in ("partition", "committed", "valid", "of them large", "malformed", "aborted"):
        table.add_column(col, justify="right")
    for p, c in sorted(summary.per_partition.items()):
        table.add_row(str(p), *(str(c[k]) for k in what))
    table.add_row(
        "all",
        *(str(summary.count(k)) for k in what),
        style="bold",
    )
    out.print(table)
    if summary.changes is not None:
        print_changes(summary.changes, expect)


def print_changes(stream, expect: Path | None) -> None:
    """What the change stream holds, and where the table it must fold to was written."""
    counts = stream.summary()
    parts = ", ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in counts if counts[k] and ":" not in k)
    out.print(f"change stream: {parts}", markup=False)
    if expect is not None:
        rows, gone = len(stream.rows), len(stream.deleted)
        out.print(f"expected final table ({rows} rows, {gone} deleted keys) written to {expect}", markup=False)
