"""Test-side Kafka reads: an independent confluent-kafka consumer (not Spark)."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from onceflow.kafka.admin import partitions_of
from onceflow.kafka.consume import read_records as consume_all

__all__ = ["consume_all", "log_ends", "value_json"]  # consume_all: onceflow's reader under the tests' name


def value_json(value: bytes | None) -> Any:
    """A record's value read as JSON (every record of onceflow's sinks has a value)."""
    assert value is not None, "a record without a value"
    return json.loads(value)


def log_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's log end, open transactions included (a read_uncommitted view: onceflow's
    `watermarks` reads committed, so an open transaction ends it at that transaction's start)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "onceflow-test-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
            for p in partitions_of(bootstrap, topic)
        }
    finally:
        consumer.close()
