"""Reading Kafka from Spark, always at read_committed.

Aborted producer transactions never enter: that is the first of the three
exactly-once promises (docs/exactly-once.md). The cluster's client settings (security,
timeouts) come translated from kafka.client, set per read: never a Spark setting.
"""

from __future__ import annotations

from onceflow.kafka.client import Cluster, as_client

# Spark's consumer group ids start with this: a cluster with ACLs grants READ on the prefix
# `onceflow-` to the pipelines' principal (docs/kafka-security.md)
GROUP_ID_PREFIX = "onceflow-spark"


def kafka_options(cluster: Cluster, topic: str, starting: str = "earliest", **extra: str) -> dict[str, str]:
    """Options shared by batch and streaming reads of a topic."""
    return {
        **as_client(cluster).spark_options(),
        "subscribe": topic,
        "startingOffsets": starting,
        "kafka.isolation.level": "read_committed",
        "failOnDataLoss": "true",
        "includeHeaders": "false",
        "groupIdPrefix": GROUP_ID_PREFIX,
        **extra,
    }


def read_committed_batch(spark, cluster: Cluster, topic: str, starting: str = "earliest", ending: str = "latest"):
    """A batch DataFrame of the committed records in [starting, ending)."""
    return spark.read.format("kafka").options(**kafka_options(cluster, topic, starting, endingOffsets=ending)).load()
