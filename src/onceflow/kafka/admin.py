"""Kafka admin look-ups through confluent-kafka's AdminClient and Consumer."""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.errors import BrokerError
from onceflow.kafka.client import Cluster, KafkaClient, as_client


def admin_client(cluster: Cluster) -> AdminClient:
    return AdminClient(as_client(cluster).librdkafka())


def ensure_topic(
    cluster: Cluster, topic: str, partitions: int, config: dict[str, str] | None = None, at_least: bool = True
) -> bool:
    """Create `topic` with `partitions` partitions if missing; True if created. An existing topic
    with fewer partitions fails (a writer that needs that many), unless `at_least` is False (a
    producer: `partitions` applies only when the topic is created)."""
    admin = admin_client(cluster)
    meta = admin.list_topics(timeout=15)
    if topic in meta.topics:
        have = len(meta.topics[topic].partitions)
        if at_least and have < partitions:
            raise BrokerError(
                f"topic {topic!r} exists with {have} partitions, fewer than the {partitions} asked for. "
                f"Fix: use --partitions {have} or a new topic name."
            )
        return False
    futures = admin.create_topics(
        # the cluster's default.replication.factor (KIP-464): 1 on the embedded broker, 3 on a cluster
        [NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=config or {})]
    )
    try:
        futures[topic].result(timeout=30)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise BrokerError(f"could not create topic {topic!r}: {exc}") from exc
        return False
    return True


def partitions_of(cluster: Cluster, topic: str) -> list[int]:
    meta = admin_client(cluster).list_topics(topic, timeout=15)
    info = meta.topics.get(topic)
    if info is None or info.error is not None:
        raise BrokerError(f"topic {topic!r} does not exist on {as_client(cluster).bootstrap}")
    return sorted(info.partitions)


def watermarks(cluster: Cluster, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (low, high)}; high is the last stable offset (read_committed, librdkafka's default):
    the log end, markers included, unless a transaction is still open, then that transaction's first
    offset. What a committed reader can reach, so a range past it is refused."""
    consumer = Consumer(as_client(cluster).librdkafka(**{"group.id": "onceflow-admin", "enable.auto.commit": False}))
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
            for p in partitions_of(cluster, topic)
        }
    finally:
        consumer.close()


def _quiet_admin(client: KafkaClient, timeout: float) -> AdminClient:
    """An AdminClient whose connection errors go to a silent logger, not stderr: callers report them."""
    import logging

    log = logging.getLogger("onceflow.kafka.admin.client")
    if not log.handlers:
        log.addHandler(logging.NullHandler())
        log.propagate = False
    ms = str(int(max(timeout, 1) * 1000))
    return AdminClient(
        client.librdkafka(
            **{
                "socket.timeout.ms": ms,
                "socket.connection.setup.timeout.ms": ms,
                "reconnect.backoff.max.ms": "1000",
            }
        ),
        logger=log,
    )


def list_end_offsets(
    cluster: Cluster, topic: str, timeout: float = 10.0, partitions: list[int] | None = None
) -> dict[str, dict[int, int]]:
    """Per partition, the log start and the last stable offset: {"earliest": {p: o}, "latest": {p: o}}.

    `latest` is read at READ_COMMITTED: the last stable offset, the end a
    read_committed reader (and so the Spark query) can reach; an open
    transaction holds it back, and commit/abort markers count in it. BrokerError
    (with the bootstrap and the cause) when the broker cannot be reached in
    `timeout` seconds or the topic does not exist.
    """
    # a broker that is down refuses the connection at once: say so now, not after `timeout` s of
    # librdkafka reconnecting (`onceflow checkpoint status`, the health sensors and the onceflow
    # page answer in milliseconds for a stopped broker, not in seconds per pipeline)
    client = as_client(cluster)
    bootstrap = client.bootstrap
    refused = _tcp_refusal(bootstrap, timeout=min(1.0, timeout), definite=True)
    if refused:
        raise BrokerError(f"Kafka is not reachable at {bootstrap} ({refused}). {broker_fix()}")
    try:
        return _end_offsets(_quiet_admin(client, timeout), client, topic, timeout, partitions)
    except (BrokerError, KafkaException, TimeoutError):
        if client.secured:  # a refused login, certificate or ACL said as such (kafka.access)
            from onceflow.kafka.access import check_access

            check_access(client, topics_read=[topic], timeout=min(timeout, 5.0))
        raise


def _end_offsets(
    admin: AdminClient, client: KafkaClient, topic: str, timeout: float, partitions: list[int] | None
) -> dict[str, dict[int, int]]:
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    bootstrap = client.bootstrap
    try:
        if partitions is None:
            meta = admin.list_topics(topic, timeout=timeout)
            info = meta.topics.get(topic)
            if info is None or info.error is not None:
                raise BrokerError(
                    f"topic {topic!r} does not exist on {bootstrap} ({info.error if info else 'absent'}). "
                    "Fix: check the pipeline's source.topic, or produce to it first."
                )
            partitions = sorted(info.partitions)
        out: dict[str, dict[int, int]] = {}
        for name, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest())):
            futures = admin.list_offsets(
                {TopicPartition(topic, p): spec for p in partitions},
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=timeout,
            )
            out[name] = {tp.partition: f.result(timeout=timeout + 5).offset for tp, f in futures.items()}
        return {k: dict(sorted(v.items())) for k, v in out.items()}
    except KafkaException as exc:
        raise BrokerError(
            f"cannot read the offsets of {topic!r} from Kafka at {bootstrap}: {_kafka_error_text(exc)}. {broker_fix()}"
        ) from None
    except TimeoutError:
        raise BrokerError(
            f"Kafka at {bootstrap} did not answer within {timeout:.0f}s while listing the offsets of "
            f"{topic!r}. {broker_fix()}"
        ) from None


def _kafka_error_text(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else exc
    return err.str() if hasattr(err, "str") else str(err)


# -- is the broker there? ----------------------------------------------------------------
# seconds a command waits for Kafka before refusing to start: a broker that is down is told in
# seconds, not after minutes of Spark retrying
REACH_TIMEOUT = 10.0


def broker_fix(field: str = "source.bootstrap_servers", file: str | None = None) -> str:
    """The one fix every "Kafka is not reachable" message gives."""
    where = f"{field} in {file}" if file else field
    return (
        "Fix: start the embedded broker with `onceflow kafka start`, or point "
        f"{where} (or ONCEFLOW_KAFKA_BOOTSTRAP) at a running broker."
    )


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    """host:port pairs of a bootstrap list ("a:9092,PLAINTEXT://b:9093,[::1]:9094")."""
    out = []
    for item in bootstrap.split(","):
        item = item.strip().split("://", 1)[-1]
        host, _, port = item.rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def _tcp_refusal(bootstrap: str, timeout: float, definite: bool = False) -> str | None:
    """Why no bootstrap address accepts a TCP connection, or None if one does (or cannot be told).
    `definite`: only a refused connection or an unknown host counts; a timeout or any other error
    is "cannot be told" (None), so a slow network is left to Kafka's own timeout."""
    reasons = []
    for host, port in _addresses(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return None
        except OSError as exc:
            if definite and not isinstance(exc, (ConnectionRefusedError, socket.gaierror)):
                return None  # a timeout, or another error: cannot be told
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    return "; ".join(reasons) or None


def require_broker(
    cluster: Cluster,
    *,
    timeout: float = REACH_TIMEOUT,
    field: str = "source.bootstrap_servers",
    file: str | None = None,
    access: Mapping[str, Any] | None = None,
) -> None:
    """Raise BrokerError (the address, the cause and the fix) unless Kafka answers at `bootstrap`
    within `timeout` seconds; on a secured cluster, unless it also grants `access` (check_access's
    arguments: what the caller will do), asked in the same login. Called before any JVM starts, so
    a broker that is down costs seconds, not minutes of Spark retrying.

    A refused TCP connection fails at once; an open port must also answer a Kafka metadata
    request (a port held by something else, or a broker that hangs, is caught too)."""
    started = time.monotonic()
    client = as_client(cluster)
    bootstrap = client.bootstrap
    refused = _tcp_refusal(bootstrap, timeout=min(3.0, timeout))
    if refused:
        raise BrokerError(f"Kafka is not reachable at {bootstrap} ({refused}). {broker_fix(field, file)}")
    left = max(1.0, timeout - (time.monotonic() - started))
    if client.secured:  # a login, TLS or ACL failure said as such, in seconds (kafka.access)
        from onceflow.kafka.access import check_access

        check_access(client, timeout=left, **(access or {}))
        return
    try:
        _quiet_admin(client, left).list_topics(timeout=left)
    except KafkaException as exc:
        raise BrokerError(
            f"Kafka is not reachable at {bootstrap}: no answer to a metadata request within "
            f"{timeout:.0f}s ({_kafka_error_text(exc)}). {broker_fix(field, file)}"
        ) from None
