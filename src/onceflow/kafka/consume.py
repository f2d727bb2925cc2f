"""Counting what Kafka holds at read_committed, with a plain consumer (no Spark).

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
