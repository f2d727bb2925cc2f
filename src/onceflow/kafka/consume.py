"""Reading what Kafka holds, with a plain consumer (no Spark): counts and records.

An independent witness for demos and summaries: aborted transactions and
transaction markers take offsets, so counts differ from offset spans.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

from confluent_kafka import Consumer, KafkaError, TopicPartition

from onceflow.errors import BrokerError
from onceflow.kafka.admin import partitions_of


def committed_counts(bootstrap: str, topic: str, timeout: float = 120) -> dict[int, int]:
    """Per partition, how many committed records a read_committed consumer sees now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"onceflow-count-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        parts = partitions_of(bootstrap, topic)
        counts: Counter = Counter({p: 0 for p in parts})
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        done: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(done) < len(parts):
            if time.monotonic() > deadline:
                raise BrokerError(f"counting {topic} at read_committed did not reach the end of partitions "
                                  f"{sorted(set(parts) - done)} within {timeout:.0f}s")
            for msg in consumer.consume(10_000, timeout=1.0):
                err = msg.error()
                if err is None:
                    counts[msg.partition()] += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    done.add(msg.partition())
        return dict(counts)
    finally:
        consumer.close()


def read_records(bootstrap: str, topic: str, isolation: str = "read_committed",
                 timeout: float = 60) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record readable at `isolation` up to each partition's end now:
    [(partition, offset, key, value)]. The witness tests and benchmarks compare tables with."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"onceflow-read-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "auto.offset.reset": "earliest"})
    try:
        parts = partitions_of(bootstrap, topic)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out, done = [], {p for p in parts if ends[p] == 0}
        deadline = time.monotonic() + timeout
        while len(done) < len(parts):
            if time.monotonic() > deadline:
                raise BrokerError(f"reading {topic} at {isolation} did not reach the end offsets {ends} "
                                  f"within {timeout:.0f}s (done: {sorted(done)})")
            msg = consumer.poll(1.0)
            if msg is None:
                # at read_committed the last records may be control markers: check the position
                for p in parts:
                    if consumer.position([TopicPartition(topic, p)])[0].offset >= ends[p]:
                        done.add(p)
                continue
            if msg.error():
                continue
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return out
    finally:
        consumer.close()
