"""The transactional Kafka sink vs Spark's built-in (at-least-once) Kafka sink, one run.

    .venv/bin/python benchmarks/kafka_sink_throughput.py [--events 200000] [--json out.json]

Starts its own broker, produces the events (transactional, 1% malformed), and in
one Spark session (local[2]):

1. sink-only throughput: the same cached batch of valid events written by
   (a) Spark's built-in sink (`df.write.format("kafka")`) and (b) `KafkaTxnSink`,
   alternating a/b/a/b…, median of `--repeats` each, after one warm-up each;
2. streaming throughput: the same available-now query (Kafka at read_committed →
   validation → valid events), its foreachBatch writing with (a) or (b);
3. latency of (b) at a 1 s trigger under a steady produce rate: per event, from
   its input Kafka timestamp to its arrival at a read_committed consumer of the
   output, and at a read_uncommitted consumer; the difference is the cost of
   read_committed (records become visible at their task's commit, and behind any
   open transaction on the same output partition).

Rates are valid events per second; quote the ratios (b)/(a), not the absolutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from harness import emit

from devkit.kafka import produce_events, scratch_broker

TASKS = 4


def builtin_write(df, bootstrap: str, topic: str) -> None:
    """Spark's own Kafka sink: key/value columns, at-least-once."""
    from pyspark.sql import functions as F

    (
        df.select(
            F.expr("account_id").cast("binary").alias("key"), F.expr("to_json(struct(*))").cast("binary").alias("value")
        )
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )


def txn_sink(bootstrap: str, name: str, source_topic: str):
    from onceflow.config import KafkaSink
    from onceflow.spark.sinks.kafka_txn import KafkaTxnSink

    return KafkaTxnSink(
        name,
        0,
        KafkaSink(topic=f"{name}-out", ledger_topic=f"{name}-ledger", partitions=TASKS, key="account_id"),
        bootstrap,
        trigger_seconds=1,
        source_topic=source_topic,
    )


def sink_only(spark, bootstrap: str, topic: str, repeats: int) -> dict:
    """The same cached DataFrame through both sinks, alternating, median seconds each."""
    from devkit.pipelines import PAYMENTS_SCHEMA as schema
    from onceflow.kafka.admin import ensure_topic
    from onceflow.spark.kafka_read import read_committed_batch
    from onceflow.spark.parse import bronze_rows, parse_events

    bronze = bronze_rows(parse_events(read_committed_batch(spark, bootstrap, topic), schema), schema, 0, 0).cache()
    rows = bronze.count()
    ends = {
        r["partition"]: r["end"]
        for r in read_committed_batch(spark, bootstrap, topic)
        .groupBy("partition")
        .agg({"offset": "max"})
        .withColumnRenamed("max(offset)", "end")
        .collect()
    }
    times: dict[str, list[float]] = {"builtin": [], "txn": []}
    for i in range(repeats + 1):  # round 0 is the warm-up
        out = f"bench-builtin-{i}"
        ensure_topic(bootstrap, out, TASKS)
        started = time.monotonic()
        builtin_write(bronze, bootstrap, out)
        t_builtin = time.monotonic() - started
        sink = txn_sink(bootstrap, f"bench_txn_{i}", topic)
        sink.prepare()  # topic creation is set-up, as for the built-in sink above
        started = time.monotonic()
        result = sink.write(bronze, 0, {p: 0 for p in ends}, {p: e + 1 for p, e in ends.items()})
        t_txn = time.monotonic() - started
        assert result.rows_written == rows, result.as_dict()
        if i:
            times["builtin"].append(t_builtin)
            times["txn"].append(t_txn)
        print(
            f"  sink-only round {i}{' (warm-up)' if not i else ''}: built-in {t_builtin:.2f}s, "
            f"transactional {t_txn:.2f}s",
            file=sys.stderr,
        )
    bronze.unpersist()
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "rows": rows,
        "repeats": repeats,
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "rate_builtin": round(rows / med["builtin"]),
        "rate_txn": round(rows / med["txn"]),
        "ratio_txn_to_builtin": round(med["builtin"] / med["txn"], 3),
    }


def streaming(
    spark, bootstrap: str, topic: str, max_offsets: int, folder: Path, which: str, round_: int
) -> tuple[float, int]:
    """An available-now query over the whole topic with one of the sinks; (seconds, valid rows written)."""
    from devkit.pipelines import PAYMENTS_SCHEMA as schema
    from onceflow.checkpoint import batch_offset_range
    from onceflow.kafka.admin import ensure_topic, watermarks
    from onceflow.spark.kafka_read import kafka_options
    from onceflow.spark.parse import bronze_rows, parse_events

    checkpoint = str(folder / f"checkpoint-{which}-{round_}")
    out = f"bench-stream-{which}-{round_}"
    ensure_topic(bootstrap, out, TASKS)
    sink = txn_sink(bootstrap, f"bench_stream_txn_{round_}", topic) if which == "txn" else None
    if sink:
        sink.prepare()
    rows = [0]

    def write(batch_df, batch_id):
        bronze = bronze_rows(parse_events(batch_df, schema), schema, batch_id, 0)
        if sink is None:
            builtin_write(bronze, bootstrap, out)
        else:
            start, end = batch_offset_range(checkpoint, batch_id, topic)
            rows[0] += sink.write(bronze, batch_id, start, end).rows_written

    stream = (
        spark.readStream.format("kafka")
        .options(**kafka_options(bootstrap, topic, "earliest", maxOffsetsPerTrigger=str(max_offsets)))
        .load()
    )
    started = time.monotonic()
    (
        stream.writeStream.foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )
    seconds = time.monotonic() - started
    if sink is None:  # a non-transactional topic: its log end is its record count
        rows[0] = sum(high for _, high in watermarks(bootstrap, out).values())
    return seconds, rows[0]


def _arrivals(bootstrap: str, topic: str, isolation: str, stop: threading.Event, seen: dict) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(TASKS)])
    while not stop.is_set():
        for msg in consumer.consume(1000, 0.1):
            value = msg.value()
            if msg.error() is None and value is not None:  # the sink's records all have a value
                now = time.time()
                event = json.loads(value)
                ts = datetime.fromisoformat(event["_kafka_ts"].replace("Z", "+00:00")).timestamp()
                seen.setdefault(event["event_id"], now - ts)
    consumer.close()


def _pcts(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    q = statistics.quantiles(values, n=100)
    return {
        "n": len(values),
        "p50_ms": round(q[49] * 1000),
        "p95_ms": round(q[94] * 1000),
        "p99_ms": round(q[98] * 1000),
    }


def latency(spark, bootstrap: str, folder: Path, rate: float, seconds: float) -> dict:
    """The transactional sink in a 1 s processing-time query under a steady produce rate."""
    from devkit.pipelines import PAYMENTS_SCHEMA as schema
    from onceflow.checkpoint import batch_offset_range
    from onceflow.generate.producer import produce
    from onceflow.kafka.admin import ensure_topic
    from onceflow.spark.kafka_read import kafka_options
    from onceflow.spark.parse import bronze_rows, parse_events

    topic, checkpoint = "bench-latency", str(folder / "checkpoint-latency")
    ensure_topic(bootstrap, topic, TASKS)
    sink = txn_sink(bootstrap, "bench_latency", topic)
    sink.prepare()

    def write(batch_df, batch_id):
        start, end = batch_offset_range(checkpoint, batch_id, topic)
        sink.write(bronze_rows(parse_events(batch_df, schema), schema, batch_id, 0), batch_id, start, end)

    stop = threading.Event()
    seen: dict[str, dict[str, float]] = {"read_committed": {}, "read_uncommitted": {}}
    readers = [
        threading.Thread(target=_arrivals, args=(bootstrap, sink.output_topic, iso, stop, seen[iso]), daemon=True)
        for iso in seen
    ]
    for t in readers:
        t.start()
    stream = spark.readStream.format("kafka").options(**kafka_options(bootstrap, topic, "latest")).load()
    query = (
        stream.writeStream.foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        time.sleep(15)  # the query is running and has planned its first batches
        produce(
            bootstrap,
            topic,
            int(rate * seconds),
            schema=schema,
            partitions=TASKS,
            rate=rate,
            txn_size=50,
            keep_records=False,
        )
        deadline = time.monotonic() + 120
        while len(seen["read_committed"]) < int(rate * seconds) * 0.97 and time.monotonic() < deadline:
            time.sleep(1)
        time.sleep(5)
    finally:
        query.stop()
        stop.set()
        for t in readers:
            t.join(30)
    both = set(seen["read_committed"]) & set(seen["read_uncommitted"])
    rc = [seen["read_committed"][i] for i in both]
    ru = [seen["read_uncommitted"][i] for i in both]
    cost = [a - b for a, b in zip(rc, ru, strict=True)]
    return {
        "trigger": "1 second",
        "rate": rate,
        "seconds": seconds,
        "events_seen": len(both),
        "read_committed": _pcts(rc),
        "read_uncommitted": _pcts(ru),
        "read_committed_cost": _pcts(cost),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--max-offsets", type=int, default=100_000, help="per trigger (the pipeline default)")
    ap.add_argument("--repeats", type=int, default=3, help="sink-only rounds per sink (after a warm-up)")
    ap.add_argument("--stream-repeats", type=int, default=2, help="streaming runs per sink, alternating")
    ap.add_argument("--latency-rate", type=float, default=1000)
    ap.add_argument("--latency-seconds", type=float, default=60)
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    from onceflow.spark.session import build_session

    with scratch_broker("onceflow-bench-kafka-sink-", timeout=180) as (work, broker):
        spark = None
        try:
            print(f"producing {args.events} events …", file=sys.stderr)
            produce_events(broker.bootstrap, "bench", args.events, txn_size=500, partitions=TASKS)
            spark = build_session("onceflow-bench-kafka-sink", master="local[2]")
            figures = {"events": args.events, "machine": {"cpus": os.cpu_count()}}
            print("sink-only throughput …", file=sys.stderr)
            figures["sink_only"] = sink_only(spark, broker.bootstrap, "bench", args.repeats)
            print("streaming throughput …", file=sys.stderr)
            runs: dict[str, list[float]] = {"builtin": [], "txn": []}
            rows = set()
            for round_ in range(args.stream_repeats):  # alternating, so neither sink gets the warmer JVM
                for which in ("builtin", "txn"):
                    seconds, written = streaming(
                        spark, broker.bootstrap, "bench", args.max_offsets, work, which, round_
                    )
                    runs[which].append(seconds)
                    rows.add(written)
                    print(f"  streaming round {round_}: {which} {seconds:.1f}s ({written} rows)", file=sys.stderr)
            assert len(rows) == 1, f"both sinks must write the same valid events: {rows}"
            n = rows.pop()
            t_a, t_b = statistics.median(runs["builtin"]), statistics.median(runs["txn"])
            figures["streaming"] = {
                "rows": n,
                "max_offsets_per_trigger": args.max_offsets,
                "seconds": {k: [round(x, 2) for x in v] for k, v in runs.items()},
                "rate_builtin": round(n / t_a),
                "rate_txn": round(n / t_b),
                "ratio_txn_to_builtin": round(t_a / t_b, 3),
            }
            if not args.skip_latency:
                print("latency at a 1 s trigger …", file=sys.stderr)
                figures["latency"] = latency(spark, broker.bootstrap, work, args.latency_rate, args.latency_seconds)
        finally:
            if spark is not None:
                spark.stop()
    emit(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
