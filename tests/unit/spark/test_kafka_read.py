"""Spark reads Kafka at read_committed only, failing on data loss."""

from __future__ import annotations

from onceflow.spark.kafka_read import kafka_options


def test_every_read_is_read_committed_and_fails_on_loss():
    options = kafka_options("b:9092", "t", '{"t":{"0":5}}', endingOffsets="latest")
    assert options == {
        "kafka.default.api.timeout.ms": "30000",
        "kafka.bootstrap.servers": "b:9092",
        "subscribe": "t",
        "startingOffsets": '{"t":{"0":5}}',
        "kafka.isolation.level": "read_committed",
        "failOnDataLoss": "true",
        "includeHeaders": "false",
        "groupIdPrefix": "onceflow-spark",
        "endingOffsets": "latest",
    }


def test_a_secured_cluster_is_read_with_its_settings_in_java_names():
    from onceflow.kafka.client import KafkaClient

    client = KafkaClient(
        "b:9093",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "u",
            "sasl.password": "p",
        },
    )
    options = kafka_options(client, "t")
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.jaas.config"].endswith('username="u" password="p";')
    assert options["kafka.isolation.level"] == "read_committed"


def test_the_source_gives_up_on_a_dead_leader_after_30_s_not_kafkas_60_but_never_below_the_request_timeout():
    from onceflow.kafka.client import KafkaClient

    assert kafka_options("b:9092", "t")["kafka.default.api.timeout.ms"] == "30000"
    slow = KafkaClient("b:9092", {"socket.timeout.ms": "45000"})
    options = kafka_options(slow, "t")
    assert options["kafka.request.timeout.ms"] == "45000"
    assert options["kafka.default.api.timeout.ms"] == "45000"
