"""Reading Kafka from Spark, always at read_committed.

Aborted producer transactions never enter: that is the first of the three
exactly-once promises (docs/exactly-once.md).
"""

from __future__ import annotations


def kafka_options(bootstrap: str, topic: str, starting: str = "earliest", **extra: str) -> dict[str, str]:
    """Options shared by batch and streaming reads of a topic."""
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": starting,
        "kafka.isolation.level": "read_committed",
        "failOnDataLoss": "true",
        "includeHeaders": "false",
        **extra,
    }


def read_committed_batch(spark, bootstrap: str, topic: str, starting: str = "earliest", ending: str = "latest"):
    """A batch DataFrame of the committed records in [starting, ending)."""
    return spark.read.format("kafka").options(**kafka_options(bootstrap, topic, starting, endingOffsets=ending)).load()
