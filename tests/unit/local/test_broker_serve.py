"""`onceflow kafka serve` (the docker stack's broker): its listeners, parsed and turned into the
same server.properties as the local broker's, bound on every interface and advertised by name."""

from __future__ import annotations

import pytest

from onceflow.errors import BrokerError
from onceflow.local.broker import Listener, LocalBroker


def test_a_listener_is_port_host_and_advertised_port():
    assert Listener.parse("9092=kafka:9092") == Listener(9092, "kafka", 9092)
    assert Listener.parse("29092=localhost:39092") == Listener(29092, "localhost", 39092)
    for bad in ("9092", "kafka:9092", "x=kafka:9092", "9092=kafka", "9092=:9092", "9092=kafka:p"):
        with pytest.raises(BrokerError, match="PORT=HOST:ADVERTISED_PORT"):
            Listener.parse(bad)


def test_served_listeners_replace_localhost_in_the_plain_broker(tmp_path):
    broker = LocalBroker(home=tmp_path, port=9092)
    local = dict(line.split("=", 1) for line in broker._properties().splitlines())
    assert local["listeners"] == "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093"
    broker.listeners = (Listener(9092, "kafka", 9092), Listener(29092, "localhost", 39092))
    served = dict(line.split("=", 1) for line in broker._properties().splitlines())
    assert served["listeners"] == "PLAINTEXT://0.0.0.0:9092,CLIENT2://0.0.0.0:29092,CONTROLLER://localhost:9093"
    assert served["advertised.listeners"] == "PLAINTEXT://kafka:9092,CLIENT2://localhost:39092"
    assert served["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CLIENT2:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert served["inter.broker.listener.name"] == "PLAINTEXT"
    # everything else is the local broker's
    differ = {"listeners", "advertised.listeners", "listener.security.protocol.map"}
    assert {k: v for k, v in served.items() if k not in differ} == {k: v for k, v in local.items() if k not in differ}


def test_serve_refuses_passwords_other_than_the_ones_it_was_formatted_with(tmp_path):
    broker = LocalBroker(home=tmp_path, port=9092, secure=True)
    broker.listeners = (Listener(9092, "kafka", 9092),)
    broker._make_secure_files({"admin": "a", "onceflow": "o", "producer": "p"})
    (broker.data_dir).mkdir(parents=True)
    (broker.data_dir / "meta.properties").write_text("formatted\n")
    (broker.dir / "ports.json").write_text('{"secure": true}')
    with pytest.raises(BrokerError, match="the passwords of onceflow differ"):
        LocalBroker(home=tmp_path, port=9092, secure=True).serve(
            (Listener(9092, "kafka", 9092),), passwords={"admin": "a", "onceflow": "changed", "producer": "p"}
        )
