"""`make demo`: start the broker, produce events (some in aborted transactions,
some malformed), run the exactly-once job, and show what landed where next to
what an independent read_committed consumer counts in Kafka."""

from __future__ import annotations

from deltalake import DeltaTable

from onceflow import config
from onceflow.kafka.admin import require_pipeline_brokers
from onceflow.kafka.broker import LocalBroker
from onceflow.kafka.consume import committed_counts
from onceflow.kafka.producer import produce
from onceflow.ledger import read_ledger


def _per_partition(path: str) -> dict[int, int]:
    table = DeltaTable(path).to_pyarrow_table(columns=["_partition"])
    counts: dict[int, int] = {}
    for p in table.column("_partition").to_pylist():
        counts[p] = counts.get(p, 0) + 1
    return counts


def run_demo(pipeline_file: str, count: int, log=print, out=None) -> dict:
    from rich.table import Table

    from onceflow.spark.ingest import run_ingest, table_paths

    pipeline = config.load_pipeline(pipeline_file)
    broker = LocalBroker()
    if pipeline.source.bootstrap_servers == broker.bootstrap:
        broker.start(log=log)
    require_pipeline_brokers(pipeline)  # another broker: it must answer before the JVM starts
    log(f"producing {count} events to {pipeline.source.topic} (5% of transactions aborted, 1% of records malformed)")
    aggregates = pipeline.sinks.aggregates
    summary = produce(pipeline.source.bootstrap_servers, pipeline.source.topic, count, schema=pipeline.schema,
                      group_by=aggregates.group_by if aggregates else (), abort_ratio=0.05, malformed_ratio=0.01,
                      keep_records=False)
    log(f"committed {summary.count('committed')} ({summary.count('committed_malformed')} malformed), "
        f"aborted {summary.count('aborted')}; running the exactly-once job (available-now)")
    result = run_ingest(pipeline, mode="available-now", log=log)
    log(f"job {result.status}: {result.batches} micro-batches, {result.input_rows} records read")

    paths = table_paths(pipeline)
    kafka = committed_counts(pipeline.source.bootstrap_servers, pipeline.source.topic)
    bronze, quarantine = _per_partition(paths["bronze"]), _per_partition(paths["quarantine"])
    table = Table(title=f"{pipeline.name}: every committed Kafka record, exactly once")
    for col in ("partition", "Kafka committed", "bronze", "quarantine", "bronze + quarantine", "match"):
        table.add_column(col, justify="right")
    ok = True
    for p in sorted(kafka):
        landed = bronze.get(p, 0) + quarantine.get(p, 0)
        ok &= landed == kafka[p]
        table.add_row(str(p), str(kafka[p]), str(bronze.get(p, 0)), str(quarantine.get(p, 0)), str(landed),
                      "yes" if landed == kafka[p] else "NO")
    if out is not None:
        out.print(table)
        for name, path in paths.items():
            ledger = read_ledger(path)
            out.print(f"{name}: {path} — ledger at batch {ledger.last.batch_id if ledger.last else '-'} "
                      f"(generation {ledger.generation}), {'contiguous' if not ledger.problems() else ledger.problems()}")
    return {"match": ok, "kafka": kafka, "bronze": bronze, "quarantine": quarantine}
