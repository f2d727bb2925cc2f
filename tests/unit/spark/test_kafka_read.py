"""Spark reads Kafka at read_committed only, failing on data loss."""

from __future__ import annotations

from onceflow.spark.kafka_read import kafka_options


def test_every_read_is_read_committed_and_fails_on_loss():
    options = kafka_options("b:9092", "t", '{"t":{"0":5}}', endingOffsets="latest")
    assert options == {
        "kafka.bootstrap.servers": "b:9092",
        "subscribe": "t",
        "startingOffsets": '{"t":{"0":5}}',
        "kafka.isolation.level": "read_committed",
        "failOnDataLoss": "true",
        "includeHeaders": "false",
        "endingOffsets": "latest",
    }
