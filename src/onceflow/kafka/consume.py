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
from onceflow.gc_pause import gc_paused
from onceflow.kafka.admin import partitions_of
from onceflow.kafka.client import BOUNDED_READ, Cluster, as_client
from onceflow.polling import Deadline

if TYPE_CHECKING:
    import pyarrow as pa


def committed_counts(cluster: Cluster, topic: str, timeout: float = 120) -> dict[int, int]:
    """Per partition, how many committed records a read_committed consumer sees now."""
    parts = partitions_of(cluster, topic)
    counts: Counter = Counter({p: 0 for p in parts})
    spans = _from_start(cluster, topic, parts, "read_committed")
    for msgs in _message_batches(cluster, topic, spans, "read_committed", timeout):
        counts.update(msg.partition() for msg in msgs)
    return dict(counts)


def read_records(
    cluster: Cluster, topic: str, isolation: str = "read_committed", timeout: float = 60
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Every record readable at `isolation` up to each partition's end now:
    [(partition, offset, key, value)]. The witness tests and benchmarks compare tables with."""
    spans = _from_start(cluster, topic, partitions_of(cluster, topic), isolation)
    return [
        (*partition_offset(m), m.key(), m.value())
        for msgs in _message_batches(cluster, topic, spans, isolation, timeout)
        for m in msgs
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
    source's names and types). BrokerError if reading them takes over `timeout` s. Read natively
    where the native library is built (kafka/native_read.py), else by the Python consumer here."""
    import pyarrow as pa

    from onceflow.kafka import native_read

    spans = {p: (s, e) for p, (s, e) in ranges.items() if e > s}
    if spans and native_read.usable(cluster):
        yield from native_read.range_batches(cluster, topic, spans, timeout, size)
        return
    names = ["key", "value", "topic", "partition", "offset"]

    def batch(msgs: list[Message]) -> pa.RecordBatch:
        arrays = [
            pa.array([m.key() for m in msgs], pa.binary()),
            pa.array([m.value() for m in msgs], pa.binary()),
            pa.array([topic] * len(msgs), pa.string()),
            pa.array([m.partition() for m in msgs], pa.int32()),
            pa.array([m.offset() for m in msgs], pa.int64()),
        ]
        return pa.RecordBatch.from_arrays(arrays, names=names)

    held: list[Message] = []
    yielded = False
    for msgs in _message_batches(cluster, topic, spans, "read_committed", timeout):
        held += msgs
        if len(held) >= size:
            yielded = True
            with gc_paused():
                made = batch(held)
            held = []
            yield made
    if held or not yielded:  # at least one batch: it gives the columns
        yield batch(held)


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


def _message_batches(
    cluster: Cluster, topic: str, spans: dict[int, tuple[int, int]], isolation: str, timeout: float
) -> Iterator[list[Message]]:
    """Every record of `spans` (partition -> [start, end)) readable at `isolation`, in the batches
    the consumer hands them over (no error event among them); BrokerError if that takes over
    `timeout` s. A range is read when the consumer's position passes its end: at read_committed its
    last offsets may be transaction markers or aborted records."""
    consumer = Consumer(
        as_client(cluster).librdkafka(
            **{
                **BOUNDED_READ,
                "group.id": f"onceflow-read-{uuid.uuid4()}",
                "isolation.level": isolation,
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
            with gc_paused():
                batch = consumer.consume(10_000, timeout=0.2)
            if not batch:
                for p in set(spans) - done:
                    if consumer.position([TopicPartition(topic, p)])[0].offset >= spans[p][1]:
                        done.add(p)
                continue
            # most batches lie inside their ranges: they pass whole, checked per partition, not per record
            last: dict[int, int] = {}
            clean = True
            for msg in batch:
                if msg.error() is not None:
                    clean = False
                    break
                last[msg.partition()] = msg.offset()  # type: ignore[index,assignment]  # no error: it has both
            if clean and all(p not in done and o + 1 < spans[p][1] for p, o in last.items()):
                yield batch
                continue
            kept = []
            for msg in batch:
                if msg.error():
                    continue
                partition, offset = partition_offset(msg)
                if partition in done or offset >= spans[partition][1]:
                    done.add(partition)
                    continue
                kept.append(msg)
                if offset + 1 >= spans[partition][1]:
                    done.add(partition)
            if kept:
                yield kept
    finally:
        consumer.close()
