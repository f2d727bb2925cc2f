"""`onceflow demo` (`make demo`): start the broker, produce events (some in aborted
transactions, some malformed) for each pipeline — payments and sensors, two shapes side by
side on one broker, customers_cdc, a Debezium change stream, and payments_avro, Avro records with a
schema registry (started here) whose schema evolves mid-stream — run the exactly-once job of
each, and show what landed where next to what an independent read_committed consumer counts in
Kafka; for the change stream, also the keyed table next to the table the database ended with."""

from __future__ import annotations

from collections.abc import Sequence

from onceflow import config
from onceflow.cli.console import log, number, out
from onceflow.sink_kinds import SinkName
from onceflow.state.status import IngestMode

DEFAULT_PIPELINES = ("payments", "sensors", "customers_cdc", "payments_avro")


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="the demo: broker, events, exactly-once ingest, summary")
    p.add_argument(
        "--pipeline",
        action="append",
        help="a pipeline name or YAML path; repeat for several (default: payments, sensors, customers_cdc and "
        "payments_avro)",
    )
    p.add_argument(
        "--count",
        type=number("--count", minimum=1, what="the number of events"),
        default=20_000,
        help="events per pipeline",
    )
    p.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    result = run_demo(
        args.pipeline or list(DEFAULT_PIPELINES), count=args.count, log=log, out=out, named=bool(args.pipeline)
    )
    return 0 if result["match"] else 1


def _per_partition(path: str) -> dict[int, int]:
    from deltalake import DeltaTable

    from onceflow.storage.location import Location

    table = DeltaTable(path, storage_options=Location(path).storage_options).to_pyarrow_table(columns=["_partition"])
    counts: dict[int, int] = {}
    for p in table.column("_partition").to_pylist():
        counts[p] = counts.get(p, 0) + 1
    return counts


def run_demo(
    pipelines: str | Sequence[str] = DEFAULT_PIPELINES, count: int = 20_000, log=print, out=None, named: bool = True
) -> dict:
    """Each pipeline in turn on one broker and one Spark session; `match` is True when every
    pipeline holds each committed record exactly once. Unless the pipelines were `named`, one whose
    local schema registry cannot start here (no Java 21+) is left out, saying why and the fix."""
    from onceflow.kafka.preflight import require_pipeline_brokers
    from onceflow.local.broker import LocalBroker

    specs = [pipelines] if isinstance(pipelines, str) else list(pipelines)
    loaded = [config.load_pipeline(spec) for spec in specs]
    broker = LocalBroker()
    if any(p.source.bootstrap_servers == broker.bootstrap for p in loaded):
        broker.start(log=log)
    loaded = _start_registry(loaded, log, required=named)
    for pipeline in loaded:
        require_pipeline_brokers(pipeline)  # another broker: it must answer before the JVM starts
    spark = None
    results = {}
    for pipeline in loaded:
        if spark is None:
            from onceflow.spark.session import build_session

            spark = build_session("onceflow-demo", master=pipeline.spark_master)
        results[pipeline.name] = _one(pipeline, count, spark, log, out)
    return {"match": all(r["match"] for r in results.values()), "pipelines": results}


def _start_registry(loaded: list[config.Pipeline], log, required: bool) -> list[config.Pipeline]:
    """The local schema registry, started when a pipeline's records name it (payments_avro); the
    pipelines to run. When it cannot start and none of them was asked for by name, those that need
    it are left out with the reason (its error says the fix), the others run."""
    from onceflow.errors import RegistryError
    from onceflow.local.registry import LocalRegistry

    registry = LocalRegistry()
    needing = [p for p in loaded if p.schema.registry is not None and p.schema.registry.url == registry.url]
    if not needing:
        return loaded
    try:
        registry.start(log=log)
    except RegistryError as exc:
        if required:
            raise
        log(f"{', '.join(p.name for p in needing)}: left out, the schema registry cannot start here: {exc}")
        return [p for p in loaded if p not in needing]
    return loaded


def _one(pipeline: config.Pipeline, count: int, spark, log, out) -> dict:
    from rich.table import Table

    from onceflow.generate.producer import produce
    from onceflow.kafka.client import source_client
    from onceflow.kafka.consume import committed_counts
    from onceflow.ledger import read_ledger
    from onceflow.sinks import table_paths
    from onceflow.spark.ingest import run_ingest

    what = "changes of a table (5% delivered twice, 5% out of order)" if pipeline.keyed else "events"
    if pipeline.schema.format == "avro":
        what = "Avro events (the schema's second version from the middle on)"
    log(f"producing {count} {what} to {pipeline.source.topic} (5% of transactions aborted, 1% of records malformed)")
    from onceflow.generate.framing import registry_framing

    aggregates = pipeline.sinks.aggregates
    summary = produce(
        source_client(pipeline),
        pipeline.source.topic,
        count,
        schema=pipeline.schema,
        group_by=aggregates.group_by if aggregates else (),
        keyed=pipeline.keyed,
        abort_ratio=0.05,
        malformed_ratio=0.01,
        keep_records=False,
        **registry_framing(pipeline, malformed=True),
    )
    log(
        f"committed {summary.count('committed')} ({summary.count('committed_malformed')} malformed), "
        f"aborted {summary.count('aborted')}; running the exactly-once job (available-now)"
    )
    result = run_ingest(pipeline, mode=IngestMode.AVAILABLE_NOW, log=log, spark=spark)
    log(f"job {result.status}: {result.batches} micro-batches, {result.input_rows} records read")

    paths = table_paths(pipeline)
    kafka = committed_counts(source_client(pipeline), pipeline.source.topic)
    bronze, quarantine = _per_partition(paths[SinkName.BRONZE]), _per_partition(paths[SinkName.QUARANTINE])
    # a change stream's tombstones (the null value after a delete) are no-ops: in no table
    tombstones = {p: summary.count("change:tombstone", p) for p in kafka}
    table = Table(title=f"{pipeline.name}: every committed Kafka record, exactly once")
    columns = ["partition", "Kafka committed", "bronze", "quarantine", "bronze + quarantine", "match"]
    if pipeline.keyed is not None:
        columns[4:4] = ["tombstones (no-ops)"]
    for col in columns:
        table.add_column(col, justify="right")
    ok = True
    for p in sorted(kafka):
        landed = bronze.get(p, 0) + quarantine.get(p, 0)
        ok &= landed + tombstones[p] == kafka[p]
        row = [str(p), str(kafka[p]), str(bronze.get(p, 0)), str(quarantine.get(p, 0)), str(landed)]
        if pipeline.keyed is not None:
            row[4:4] = [str(tombstones[p])]
        table.add_row(*row, "yes" if landed + tombstones[p] == kafka[p] else "NO")
    current = (
        _current_table(pipeline, summary.changes, paths[SinkName.CURRENT]) if summary.changes is not None else None
    )
    if current is not None:
        ok &= current.pop("match")
    if out is not None:
        out.print(table)
        if current is not None:
            keyed_table = Table(title=f"{pipeline.name}: the keyed table against the table the database ended with")
            for col in ("", "the database", "the keyed table"):
                keyed_table.add_column(col, justify="right")
            keyed_table.add_row("rows", str(current["expected_rows"]), str(current["rows"]))
            keyed_table.add_row("deleted keys", str(current["expected_deleted"]), str(current["tombstones"]))
            keyed_table.add_row("rows that differ", "", str(current["differ"]))
            out.print(keyed_table)
        for name, path in paths.items():
            ledger = read_ledger(path)
            out.print(
                f"{name}: {path} — ledger at batch {ledger.last.batch_id if ledger.last else '-'} "
                f"(generation {ledger.generation}), {'contiguous' if not ledger.problems() else ledger.problems()}"
            )
    return {"match": ok, "kafka": kafka, "bronze": bronze, "quarantine": quarantine, "current": current}


def _current_table(pipeline: config.Pipeline, stream, path: str) -> dict:
    """The keyed table, read with delta-rs, against the generator's final table of the database
    (the comparison the e2e proof asserts, ChangeStream.compare_table)."""
    from onceflow.audit.current import read_current

    compared = stream.compare_table(read_current(path, None, [*pipeline.schema.names, "_deleted"]))
    return {
        "match": compared.match,
        "rows": compared.rows,
        "expected_rows": compared.expected_rows,
        "tombstones": compared.tombstones,
        "expected_deleted": compared.expected_deleted,
        "differ": len(compared.differ),
    }
