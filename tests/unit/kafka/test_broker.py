"""The embedded broker's files and ports, and how it reports itself when it is not running."""

from __future__ import annotations

import socket

from onceflow.kafka.broker import LocalBroker, free_port_pair


def test_a_free_port_pair_is_free_on_both_ports():
    port = free_port_pair()
    for p in (port, port + 1):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_a_stopped_broker_says_so_and_stopping_it_is_a_no_op(tmp_path):
    broker = LocalBroker(home=tmp_path, port=free_port_pair())
    status = broker.status()
    assert not status.running and not status.ready and status.pid is None
    assert status.bootstrap == f"localhost:{broker.port}" and status.log_file == str(broker.log_file)
    assert broker.stop() is False and broker.logs() == "(no broker log yet)"
    broker.pid_file.parent.mkdir(parents=True, exist_ok=True)
    broker.pid_file.write_text("999999999")  # a pid file left by a broker that died: not running
    assert broker.status().pid is None and broker.stop() is False and not broker.pid_file.exists()
