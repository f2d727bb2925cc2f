"""Reading what Kafka holds, with a plain consumer (no Spark): counts and records.

An independent witness for demos and summaries: aborted transactions and
transaction markers take offsets, so counts differ from offset spans.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, Message, TopicPartition

from onceflow.errors import BrokerError
from onceflow.kafka.admin import partitions_of
from onceflow.kafka.client import Cluster, as_client
from onceflow.polling import Deadline

if TYPE_CHECKING:
    import pyarrow as pa


def committed_counts(cluster: Cluster, topic: str, timeout: float = 120) -> dict[int, int]:
    """Per partition, how many committed records a read_committed consumer sees now."""
    parts = partitions_of(cluster, topic)
    counts: Counter = Counter({p: 0 for p in parts})
    spans = _from_start(cluster, topic, parts, "read_committed")
    counts.update(msg.partition() for msg in _messages(cluster, topic, spans, "read_committed", timeout))
    return dict(counts)


def read_records(
    cluster: Cluster, topic: str, isolation: str = "read_committed", timeout: float = 60
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record readable at `isolation` up to each partition's end now:
    [(partition, offset, key, value)]. The witness tests and benchmarks compare tables with."""
    return [
        (*partition_offset(m), m.key(), m.value())
        for m in _messages(
            cluster, topic, _from_start(cluster, topic, partitions_of(cluster, topic), isolation), isolation, timeout
        )
    ]


def partition_offset(msg: Message) -> tuple[int, int]:
    """(partition, offset) of a record: a message that is no error event has both."""
    partition, offset = msg.partition(), msg.offset()
    assert partition is not None and offset is not None, msg.error()
    return partition, offset


def range_batches(
    cluster: Cluster, topic: str, ranges: dict[int, tuple[int, int]], timeout: float = 300, size: int = 20_000
) -> Iterator[pa.RecordBatch]:
    """The records of `ranges` (per partition [start, end)) that a read_committed consumer sees, as
    Arrow batches of at most `size` rows: key, value, topic, partition, offset (Spark's Kafka
    source's names and types). BrokerError if reading them takes over `timeout` s."""
    import pyarrow as pa

    cols: dict[str, list] = {"key": [], "value": [], "partition": [], "offset": []}

    def batch() -> pa.RecordBatch:
        arrays = [
            pa.array(cols["key"], pa.binary()),
            pa.array(cols["value"], pa.binary()),
            pa.array([topic] * len(cols["offset"]), pa.string()),
            pa.array(cols["partition"], pa.int32()),
            pa.array(cols["offset"], pa.int64()),
        ]
        for v in cols.values():
            v.clear()
        return pa.RecordBatch.from_arrays(arrays, names=["key", "value", "topic", "partition", "offset"])

    spans = {p: (s, e) for p, (s, e) in ranges.items() if e > s}
    yielded = False
    for msg in _messages(cluster, topic, spans, "read_committed", timeout):
        partition, offset = partition_offset(msg)
        cols["key"].append(msg.key())
        cols["value"].append(msg.value())
        cols["partition"].append(partition)
        cols["offset"].append(offset)
        if len(cols["offset"]) >= size:
            yielded = True
            yield batch()
    if cols["offset"] or not yielded:  # at least one batch: it gives the columns
        yield batch()


def topic_batches(cluster: Cluster, topic: str, timeout: float = 300) -> Iterator[pa.RecordBatch]:
    """Every record of `topic` a read_committed consumer sees up to each partition's end now, as
    range_batches gives them."""
    spans = _from_start(cluster, topic, partitions_of(cluster, topic), "read_committed")
    return range_batches(cluster, topic, spans, timeout)


def _from_start(cluster: Cluster, topic: str, parts: list[int], isolation: str) -> dict[int, tuple[int, int]]:
    """Each partition from offset 0 to its end now (the last stable offset at read_committed)."""
    settings = {"group.id": f"onceflow-read-{uuid.uuid4()}", "isolation.level": isolation}
    consumer = Consumer(as_client(cluster).librdkafka(**settings))
    try:
        return {p: (0, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]) for p in parts}
    finally:
        consumer.close()


def _messages(
    cluster: Cluster, topic: str, spans: dict[int, tuple[int, int]], isolation: str, timeout: float
) -> Iterator[Message]:
    """Every record of `spans` (partition -> [start, end)) readable at `isolation`; BrokerError if
    that takes over `timeout` s. A range is read when the consumer's position passes its end: at
    read_committed its last offsets may be transaction markers or aborted records."""
    consumer = Consumer(
        as_client(cluster).librdkafka(
            **{
                "group.id": f"onceflow-read-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "auto.offset.reset": "earliest",
                # a bounded read: at a partition's end the broker answers a fetch at once rather than
                # holding it 500 ms for more records, so the position past the last markers shows soon
                "fetch.wait.max.ms": 50,
            }
        )
    )
    try:
        done = {p for p, (s, e) in spans.items() if e <= s}
        consumer.assign([TopicPartition(topic, p, s) for p, (s, e) in spans.items() if p not in done])
        deadline = Deadline(timeout)
        while len(done) < len(spans):
            if deadline.passed:
                raise BrokerError(
                    f"reading {topic} at {isolation} did not reach the end offsets "
                    f"{ {p: e for p, (_, e) in spans.items()} } within {timeout:.0f}s (done: {sorted(done)})"
                )
            batch = consumer.consume(10_000, timeout=0.2)
            if not batch:
                for p in set(spans) - done:
                    if consumer.position([TopicPartition(topic, p)])[0].offset >= spans[p][1]:
                        done.add(p)
                continue
            for msg in batch:
                if msg.error():
                    continue
                partition, offset = partition_offset(msg)
                if partition in done or offset >= spans[partition][1]:
                    done.add(partition)
                    continue
                yield msg
                if offset + 1 >= spans[partition][1]:
                    done.add(partition)
    finally:
        consumer.close()
