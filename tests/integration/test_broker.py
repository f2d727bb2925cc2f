"""The embedded broker: a real Kafka process in KRaft mode."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from onceflow.errors import BrokerError
from onceflow.kafka.admin import ensure_topic, partitions_of
from onceflow.local.broker import LocalBroker, free_port_pair

pytestmark = pytest.mark.integration


def test_start_status_idempotent_stop_restart_keeps_data(jars, tmp_path):
    broker = LocalBroker(home=tmp_path, port=free_port_pair())
    first = broker.start(timeout=120)
    try:
        assert first.ready and first.pid
        assert broker.status().ready
        again = broker.start(timeout=30)
        assert again.pid == first.pid, "a second start must reuse the running broker"

        ensure_topic(broker.bootstrap, "kept", 2)
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(10):
            p.produce("kept", value=f"v{i}".encode(), partition=i % 2)
        assert p.flush(30) == 0

        assert broker.stop() is True
        assert not broker.status().running
        assert broker.stop() is False, "stopping a stopped broker is a no-op"

        restarted = broker.start(timeout=120)
        assert restarted.pid != first.pid
        assert partitions_of(broker.bootstrap, "kept") == [0, 1]
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
        highs = [c.get_watermark_offsets(TopicPartition("kept", q), timeout=15)[1] for q in (0, 1)]
        c.close()
        assert highs == [5, 5], "records written before the restart must still be there"
    finally:
        broker.stop()


def test_port_in_use_fails_at_once_naming_port_and_fix(jars, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with pytest.raises(BrokerError, match=rf"port {port} is already in use.*Fix"):
            LocalBroker(home=tmp_path, port=port).start(timeout=10)


def test_missing_java_names_the_fix(jars, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrokerError, match=r"`java` is not on PATH.*Fix"):
        LocalBroker(home=tmp_path, port=free_port_pair()).start(timeout=10)


def test_missing_jars_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_JARS", str(tmp_path / "nojars"))
    with pytest.raises(BrokerError, match=r"no kafka jars.*onceflow setup"):
        LocalBroker(home=tmp_path, port=free_port_pair()).start(timeout=10)
