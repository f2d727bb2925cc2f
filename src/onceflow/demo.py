"""`make demo`: start the broker, produce events (some aborted, some malformed),
ingest them exactly once, and print what landed where."""

from __future__ import annotations

from onceflow import config
from onceflow.kafka.broker import LocalBroker
from onceflow.kafka.producer import produce


def run_demo(pipeline_file: str, count: int, log=print, out=None) -> dict:
    from rich.table import Table

    pipeline = config.load(pipeline_file)
    broker = LocalBroker()
    if pipeline.source.bootstrap_servers == broker.bootstrap:
        broker.start(log=log)
    log(f"producing {count} events to {pipeline.source.topic} (5% aborted transactions, 1% malformed)")
    summary = produce(pipeline.source.bootstrap_servers, pipeline.source.topic, count,
                      abort_ratio=0.05, malformed_ratio=0.01, keep_records=False)
    log("reading the topic at read_committed with Spark into Delta")
    from onceflow.spark.demo_batch import ingest_batch

    per_partition = ingest_batch(pipeline)
    table = Table(title=f"{pipeline.name}: Kafka (committed) vs Delta rows per partition")
    for col in ("partition", "produced committed (this run)", "aborted (this run)", "rows in Delta"):
        table.add_column(col, justify="right")
    for p in sorted(per_partition):
        c = summary.per_partition.get(p, {})
        table.add_row(str(p), str(c.get("committed", 0)), str(c.get("aborted", 0)), str(per_partition[p]))
    if out is not None:
        out.print(table)
    return per_partition
