"""`onceflow kafka`'s words: a stopped broker is told as stopped, with how to start it."""

from __future__ import annotations

import socket

from onceflow.cli import main


def test_kafka_status_of_a_stopped_broker_says_stopped_and_how_to_start_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["kafka", "status", "--port", str(port)]) == 1
    text = " ".join(capsys.readouterr().out.split())
    assert f"Kafka broker: stopped; bootstrap localhost:{port};" in text
    assert "pid" not in text and "start it with `onceflow kafka start`" in text
