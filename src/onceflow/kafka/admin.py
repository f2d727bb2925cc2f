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
                              f"Fix: use --partitions {have} or a new topic name.")
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


def _quiet_admin(bootstrap: str, timeout: float) -> AdminClient:
    """An AdminClient whose connection errors go to a silent logger, not stderr: callers report them."""
    import logging

    log = logging.getLogger("onceflow.kafka.admin.client")
    if not log.handlers:
        log.addHandler(logging.NullHandler())
        log.propagate = False
    ms = str(int(max(timeout, 1) * 1000))
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": ms,
                        "socket.connection.setup.timeout.ms": ms, "reconnect.backoff.max.ms": "1000"},
                       logger=log)


def list_end_offsets(bootstrap: str, topic: str, timeout: float = 10.0,
                     partitions: list[int] | None = None) -> dict[str, dict[int, int]]:
    """Per partition, the log start and the last stable offset: {"earliest": {p: o}, "latest": {p: o}}.

    `latest` is read at READ_COMMITTED: the last stable offset, the end a
    read_committed reader (and so the Spark query) can reach; an open
    transaction holds it back, and commit/abort markers count in it. BrokerError
    (with the bootstrap and the cause) when the broker cannot be reached in
    `timeout` seconds or the topic does not exist.
    """
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    admin = _quiet_admin(bootstrap, timeout)
    try:
        if partitions is None:
            meta = admin.list_topics(topic, timeout=timeout)
            info = meta.topics.get(topic)
            if info is None or info.error is not None:
                raise BrokerError(f"topic {topic!r} does not exist on {bootstrap} ({info.error if info else 'absent'}). "
                                  "Fix: check the pipeline's source.topic, or produce to it first.")
            partitions = sorted(info.partitions)
        out: dict[str, dict[int, int]] = {}
        for name, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest())):
            futures = admin.list_offsets({TopicPartition(topic, p): spec for p in partitions},
                                         isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout)
            out[name] = {tp.partition: f.result(timeout=timeout + 5).offset for tp, f in futures.items()}
        return {k: dict(sorted(v.items())) for k, v in out.items()}
    except KafkaException as exc:
        raise BrokerError(f"cannot read the offsets of {topic!r} from Kafka at {bootstrap}: {_kafka_error_text(exc)}. "
                          "Fix: start the broker (`onceflow kafka start`) or check source.bootstrap_servers.") from None
    except TimeoutError:
        raise BrokerError(f"Kafka at {bootstrap} did not answer within {timeout:.0f}s while listing the offsets of "
                          f"{topic!r}. Fix: start the broker (`onceflow kafka start`) or check "
                          "source.bootstrap_servers.") from None


def _kafka_error_text(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else exc
    return err.str() if hasattr(err, "str") else str(err)
