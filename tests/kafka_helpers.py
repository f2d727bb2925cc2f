"""Test-side Kafka reads: an independent confluent-kafka consumer (not Spark)."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from onceflow.kafka.admin import partitions_of


def consume_all(bootstrap: str, topic: str, isolation: str = "read_committed", timeout: float = 60):
    """Every record currently readable at `isolation`: [(partition, offset, key, value)]."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "onceflow-test-reader",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "auto.offset.reset": "earliest"})
    parts = partitions_of(bootstrap, topic)
    ends = {}
    for p in parts:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
        ends[p] = high
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    out, done = [], {p for p in parts if ends[p] == 0}
    import time

    deadline = time.monotonic() + timeout
    while len(done) < len(parts):
        if time.monotonic() > deadline:
            raise AssertionError(f"consuming {topic} at {isolation} did not reach the end offsets {ends} "
                                 f"within {timeout}s (done: {sorted(done)})")
        msg = consumer.poll(1.0)
        if msg is None:
            # at read_committed the last records may be control markers: check position
            for p in parts:
                pos = consumer.position([TopicPartition(topic, p)])[0].offset
                if pos >= ends[p]:
                    done.add(p)
            continue
        if msg.error():
            continue
        out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
        if msg.offset() + 1 >= ends[msg.partition()]:
            done.add(msg.partition())
    consumer.close()
    return out


def log_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's log end, open transactions included (a read_uncommitted view: onceflow's
    `watermarks` reads committed, so an open transaction ends it at that transaction's start)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "onceflow-test-reader",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
                for p in partitions_of(bootstrap, topic)}
    finally:
        consumer.close()
