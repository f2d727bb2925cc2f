"""Reading what Kafka holds, with a plain consumer (no Spark): counts and records.

An independent witness for demos and summaries: aborted transactions and
transaction markers take offsets, so counts differ from offset spans.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

from confluent_kafka import Consumer, Message, TopicPartition

from onceflow.errors import BrokerError
from onceflow.kafka.admin import partitions_of
from onceflow.kafka.client import Cluster, as_client
from onceflow.polling import Deadline


def committed_counts(cluster: Cluster, topic: str, timeout: float = 120) -> dict[int, int]:
    """Per partition, how many committed records a read_committed consumer sees now."""
    parts = partitions_of(cluster, topic)
    counts: Counter = Counter({p: 0 for p in parts})
    counts.update(msg.partition() for msg in _messages(cluster, topic, parts, "read_committed", timeout))
    return dict(counts)


def read_records(
    cluster: Cluster, topic: str, isolation: str = "read_committed", timeout: float = 60
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record readable at `isolation` up to each partition's end now:
    [(partition, offset, key, value)]. The witness tests and benchmarks compare tables with."""
    return [
        (*partition_offset(m), m.key(), m.value())
        for m in _messages(cluster, topic, partitions_of(cluster, topic), isolation, timeout)
    ]


def partition_offset(msg: Message) -> tuple[int, int]:
    """(partition, offset) of a record: a message that is no error event has both."""
    partition, offset = msg.partition(), msg.offset()
    assert partition is not None and offset is not None, msg.error()
    return partition, offset


def _messages(cluster: Cluster, topic: str, parts: list[int], isolation: str, timeout: float) -> Iterator[Message]:
    """Every record of `topic`'s `parts` from the start up to each one's end when reading began
    (the last stable offset at read_committed); BrokerError if that takes over `timeout` s."""
    consumer = Consumer(
        as_client(cluster).librdkafka(
            **{
                "group.id": f"onceflow-read-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "auto.offset.reset": "earliest",
            }
        )
    )
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        done = {p for p in parts if ends[p] == 0}
        deadline = Deadline(timeout)
        while len(done) < len(parts):
            if deadline.passed:
                raise BrokerError(
                    f"reading {topic} at {isolation} did not reach the end offsets {ends} "
                    f"within {timeout:.0f}s (done: {sorted(done)})"
                )
            batch = consumer.consume(10_000, timeout=1.0)
            if not batch:
                # at read_committed the last records may be control markers: check the position
                for p in set(parts) - done:
                    if consumer.position([TopicPartition(topic, p)])[0].offset >= ends[p]:
                        done.add(p)
                continue
            for msg in batch:
                if msg.error():
                    continue
                yield msg
                partition, offset = partition_offset(msg)
                if offset + 1 >= ends[partition]:
                    done.add(partition)
    finally:
        consumer.close()
