"""One statement of a cluster's client settings, in librdkafka's names, translated for Spark's Java
client; secrets never shown."""

from __future__ import annotations

import pytest

from onceflow.errors import ConfigError
from onceflow.kafka.client import KafkaClient

SCRAM = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "onceflow",
    "sasl.password": 'pa"ss\\s3kr1t',
    "ssl.ca.location": "/etc/kafka/ca.pem",
    "ssl.endpoint.identification.algorithm": "none",
    "client.id": "onceflow",
    "socket.timeout.ms": "15000",
}


def test_librdkafka_takes_the_settings_as_they_are():
    client = KafkaClient("b:9093", SCRAM)
    assert client.librdkafka(**{"group.id": "g"}) == {
        "bootstrap.servers": "b:9093",
        "log_level": 3,  # librdkafka's errors only, unless the settings say otherwise
        **SCRAM,
        "group.id": "g",
    }
    assert KafkaClient("b:9092").librdkafka() == {"bootstrap.servers": "b:9092", "log_level": 3}
    assert KafkaClient("b:9092", {"log_level": "7"}).librdkafka()["log_level"] == "7"


def test_spark_gets_the_java_names_with_the_kafka_prefix():
    options = KafkaClient("b:9093", SCRAM).spark_options()
    assert options == {
        "kafka.bootstrap.servers": "b:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.client.id": "onceflow",
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="onceflow" password="pa\\"ss\\\\s3kr1t";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/kafka/ca.pem",
        "kafka.request.timeout.ms": "15000",
    }
    assert KafkaClient("b:9092").spark_options() == {"kafka.bootstrap.servers": "b:9092"}


@pytest.mark.parametrize(
    "props, says",
    [
        ({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u"}, "needs sasl.username and sasl.password"),
        ({"sasl.mechanism": "GSSAPI"}, "not supported"),
        ({"ssl.certificate.location": "c.pem", "ssl.key.location": "k.pem"}, "one PEM file"),
        ({"queue.buffering.max.ms": "5"}, "no Java client counterpart for queue.buffering.max.ms"),
        ({"sasl.mechanism": "PLAIN", "sasl.mechanisms": "PLAIN"}, "keep one"),
        ({"bootstrap.servers": "x"}, "goes in bootstrap_servers"),
    ],
)
def test_what_has_no_java_form_is_refused_with_the_fix(props, says):
    with pytest.raises(ConfigError, match=says):
        KafkaClient("b:9093", props).spark_options()


def test_secrets_are_never_shown():
    client = KafkaClient("b:9093", SCRAM)
    for text in (repr(client), client.describe(), client.fingerprint(), str(client)):
        assert "s3kr1t" not in text
    assert client.describe() == "b:9093 (SASL_SSL, SCRAM-SHA-512 as onceflow)"
    assert client.fingerprint() != KafkaClient("b:9093", {**SCRAM, "sasl.password": "other"}).fingerprint()


def test_consumer_settings_of_a_connection_are_left_to_onceflow():
    """A connection's extra often holds a group.id (the provider's form suggests one): every client
    onceflow runs sets its own, and Spark's source takes groupIdPrefix instead."""
    client = KafkaClient("b:9092", {"group.id": "theirs", "auto.offset.reset": "latest"})
    assert client.spark_options() == {"kafka.bootstrap.servers": "b:9092"}
    assert client.librdkafka(**{"group.id": "onceflow-x"})["group.id"] == "onceflow-x"
