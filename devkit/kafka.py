"""Kafka for tests and benchmarks: a broker of one's own, the benchmarks' events, and reads of
one's own (an independent confluent-kafka consumer, not Spark)."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, TopicPartition

from onceflow.kafka.admin import partitions_of
from onceflow.kafka.client import Cluster, as_client
from onceflow.kafka.consume import read_records as consume_all

if TYPE_CHECKING:
    from onceflow.generate.producer import ProduceSummary
    from onceflow.local.broker import LocalBroker

__all__ = [
    "BackgroundProducer",
    "consume_all",
    "log_ends",
    "produce_events",
    "scratch_broker",
    "value_json",
]  # consume_all: onceflow's reader


def value_json(value: bytes | None) -> Any:
    """A record's value read as JSON (every record of onceflow's sinks has a value)."""
    assert value is not None, "a record without a value"
    return json.loads(value)


def log_ends(cluster: Cluster, topic: str) -> dict[int, int]:
    """Each partition's log end, open transactions included (a read_uncommitted view: onceflow's
    `watermarks` reads committed, so an open transaction ends it at that transaction's start)."""
    consumer = Consumer(
        as_client(cluster).librdkafka(
            **{"group.id": "onceflow-test-reader", "enable.auto.commit": False, "isolation.level": "read_uncommitted"}
        )
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
            for p in partitions_of(cluster, topic)
        }
    finally:
        consumer.close()


@contextmanager
def scratch_broker(prefix: str, timeout: float = 120) -> Iterator[tuple[Path, LocalBroker]]:
    """A fresh temp folder (its `home` is ONCEFLOW_HOME) and a KRaft broker of its own in it,
    stopped at the end; yields (folder, broker)."""
    from onceflow.local.broker import LocalBroker, free_port_pair

    work = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["ONCEFLOW_HOME"] = str(work / "home")
    broker = LocalBroker(home=work, port=free_port_pair())
    broker.start(timeout=timeout)
    try:
        yield work, broker
    finally:
        broker.stop()


def produce_events(
    cluster: Cluster,
    topic: str,
    events: int,
    malformed_ratio: float = 0.01,
    txn_size: int = 1000,
    partitions: int = 4,
    **options: Any,
) -> ProduceSummary:
    """`events` payments events on `partitions` partitions, `malformed_ratio` of them malformed, in transactions
    of `txn_size`, without keeping the records in memory: the benchmarks' input."""
    from devkit.pipelines import PAYMENTS_SCHEMA
    from onceflow.generate.producer import produce

    return produce(
        cluster,
        topic,
        events,
        schema=PAYMENTS_SCHEMA,
        partitions=partitions,
        malformed_ratio=malformed_ratio,
        txn_size=txn_size,
        keep_records=False,
        **options,
    )


class BackgroundProducer(threading.Thread):
    """onceflow's produce() in a thread, beside a running stream: its summary, or its error raised
    by result() in the test, not lost in the thread."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(daemon=True)
        self.args, self.kw = args, kw
        self.summary: ProduceSummary | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        from onceflow.generate.producer import produce

        try:
            self.summary = produce(*self.args, **self.kw)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def result(self, timeout: float = 600) -> ProduceSummary:
        self.join(timeout)
        assert not self.is_alive(), f"the producer did not finish within {timeout}s"
        assert self.error is None, f"the producer failed: {self.error}"
        assert self.summary is not None
        return self.summary
