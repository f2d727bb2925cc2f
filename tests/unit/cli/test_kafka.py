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


def test_create_topic_takes_a_pipeline_and_only_it_does(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    assert main(["kafka", "create-topic"]) == 2
    assert main(["kafka", "status", "--pipeline", "payments"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.count("--pipeline goes with create-topic") == 2
    assert "Fix: `onceflow kafka create-topic --pipeline NAME_OR_FILE [--partitions N]`" in err


def test_create_topic_refuses_a_broker_that_is_down_naming_the_pipeline_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("ONCEFLOW_KAFKA_BOOTSTRAP", f"127.0.0.1:{port}")
    assert main(["kafka", "create-topic", "--pipeline", "payments", "--partitions", "3"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"127.0.0.1:{port}" in err and "payments.yaml" in err
