"""Kafka admin look-ups through confluent-kafka's AdminClient and Consumer."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.errors import BrokerError


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def ensure_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> bool:
    """Create `topic` if missing; True if created. Fails if it exists with fewer partitions."""
    admin = admin_client(bootstrap)
    meta = admin.list_topics(timeout=15)
    if topic in meta.topics:
        have = len(meta.topics[topic].partitions)
        if have < partitions:
            raise BrokerError(f"topic {topic!r} exists with {have} partitions, fewer than the {partitions} asked for. "
                              "Fix: use --partitions {have} or a new topic name.")
        return False
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=config or {})])
    try:
        futures[topic].result(timeout=30)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise BrokerError(f"could not create topic {topic!r}: {exc}") from exc
        return False
    return True


def partitions_of(bootstrap: str, topic: str) -> list[int]:
    meta = admin_client(bootstrap).list_topics(topic, timeout=15)
    info = meta.topics.get(topic)
    if info is None or info.error is not None:
        raise BrokerError(f"topic {topic!r} does not exist on {bootstrap}")
    return sorted(info.partitions)


def watermarks(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (low, high)}; high is the log end (includes uncommitted and markers)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "onceflow-admin",
                         "enable.auto.commit": False})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
                for p in partitions_of(bootstrap, topic)}
    finally:
        consumer.close()
