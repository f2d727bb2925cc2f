"""A broker that is down is refused in seconds, naming the address, the cause and the fix."""

from __future__ import annotations

import socket
import time

import pytest

from onceflow.errors import BrokerError
from onceflow.kafka.admin import _addresses, broker_fix, require_broker


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bootstrap_lists_are_read_with_or_without_their_protocol():
    assert _addresses("a:9092, PLAINTEXT://b:9093,[::1]:9094,nonsense") == [("a", 9092), ("b", 9093), ("::1", 9094)]


def test_a_refused_connection_fails_at_once_with_the_fix():
    port = _closed_port()
    began = time.monotonic()
    with pytest.raises(BrokerError) as caught:
        require_broker(f"127.0.0.1:{port}", file="pipelines/p.yaml")
    assert time.monotonic() - began < 5
    assert f"Kafka is not reachable at 127.0.0.1:{port}" in str(caught.value)
    assert str(caught.value).endswith(broker_fix("source.bootstrap_servers", "pipelines/p.yaml"))
    assert "source.bootstrap_servers in pipelines/p.yaml (or ONCEFLOW_KAFKA_BOOTSTRAP)" in broker_fix(
        file="pipelines/p.yaml"
    )
