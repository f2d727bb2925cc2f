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

# How long Spark's Kafka source lets its admin client ask for offsets before it makes a new one.
# kafka-clients' default (60 s) let a stream stall 60 s asking a SIGKILLed leader for the latest
# offsets after leadership had moved (tests/e2e/test_cluster_failover.py); a new admin client
# reads fresh metadata. Never below the request timeout: the admin client would raise it anyway.
API_TIMEOUT_MS = 30_000


def kafka_options(cluster: Cluster, topic: str, starting: str = "earliest", **extra: str) -> dict[str, str]:
    """Options shared by batch and streaming reads of a topic."""
    client = as_client(cluster).spark_options()
    request_ms = int(client.get("kafka.request.timeout.ms", 0))
    return {
        "kafka.default.api.timeout.ms": str(max(API_TIMEOUT_MS, request_ms)),
        **client,
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
