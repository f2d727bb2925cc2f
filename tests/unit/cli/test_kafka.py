"""`onceflow kafka`'s words: a stopped broker is told as stopped, with how to start it; a secure
broker's exports for a shell, and its mode."""

from __future__ import annotations

import json
import socket
import subprocess

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


def test_secure_and_user_go_with_their_actions_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    assert main(["kafka", "stop", "--secure"]) == 2
    assert main(["kafka", "start", "--secure", "--brokers", "3"]) == 2
    assert main(["kafka", "status", "--user", "admin"]) == 2
    assert main(["kafka", "start", "--pipeline", "payments"]) == 2, "a plain broker grants nothing"
    err = " ".join(capsys.readouterr().err.split())
    assert err.count("--secure goes with start of the single broker") == 2
    assert "--user goes with env. Fix: `onceflow kafka env --user NAME`" in err
    assert "Fix: `onceflow kafka create-topic --pipeline NAME_OR_FILE [--partitions N]` or " in err


def test_env_exports_round_trip_through_a_shell_and_status_says_secure(tmp_path, monkeypatch, capsys):
    from onceflow.local.broker import LocalBroker, free_port_pair

    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    port = free_port_pair()
    assert main(["kafka", "env", "--port", str(port)]) == 0
    assert capsys.readouterr().out == f"export ONCEFLOW_KAFKA_BOOTSTRAP=localhost:{port}\n", "plain: the bootstrap only"

    broker = LocalBroker(port=port, secure=True)
    broker._make_secure_files()
    broker.dir.mkdir(parents=True, exist_ok=True)
    (broker.dir / "ports.json").write_text(json.dumps({"port": port, "controller_port": port + 1, "secure": True}))
    assert main(["kafka", "env", "--user", "producer"]) == 0
    exports = capsys.readouterr().out
    shell = subprocess.run(
        ["bash", "-c", 'eval "$EXPORTS" && env -0'],
        env={"EXPORTS": exports, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    seen = dict(v.split("=", 1) for v in shell.stdout.split("\0") if v.startswith("ONCEFLOW_KAFKA_"))
    assert seen == broker.env("producer") and seen["ONCEFLOW_KAFKA_USERNAME"] == "producer"

    assert main(["kafka", "status"]) == 1
    said = capsys.readouterr()
    assert "secure (SASL_SSL, SCRAM-SHA-512, ACLs)" in " ".join(said.out.split())
    for user in json.loads(broker.credentials_file.read_text()).values():
        assert user["sasl.password"] not in said.out + said.err


def test_a_clusters_status_as_json_is_json_naming_each_node(tmp_path, monkeypatch, capsys):
    """`onceflow kafka status --brokers 3 --json` printed plain text though its help promises JSON (issue 48)."""
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path))
    assert main(["kafka", "status", "--brokers", "3", "--json"]) == 1  # never started: every node stopped
    data = json.loads(capsys.readouterr().out)
    assert data["ready"] is False and [n["node_id"] for n in data["nodes"]] == [1, 2, 3]
    assert all(not n["running"] and n["bootstrap"] in data["bootstrap"] for n in data["nodes"])
    assert main(["kafka", "status", "--brokers", "3"]) == 1
    assert "onceflow kafka start --brokers 3" in " ".join(capsys.readouterr().out.split())
