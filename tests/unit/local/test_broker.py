"""The embedded broker's files and ports, and how it reports itself when it is not running; a secure
broker's settings, files and users; a local cluster's nodes and where Kafka keeps a transactional id's state."""

from __future__ import annotations

import json
import shlex
import socket
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from onceflow.errors import BrokerError
from onceflow.kafka.client import KafkaClient
from onceflow.local.broker import (
    LocalBroker,
    LocalCluster,
    _argfile_quote,
    free_port_pair,
    transaction_state_partition,
)


def test_a_free_port_pair_is_free_on_both_ports():
    port = free_port_pair()
    # below the ephemeral range: a client connection never takes it while the broker restarts
    assert port >= 20000 and port + 1 < 32000
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


# -- the secure broker (no JVM: its files and settings) ------------------------------------------
def _secure(tmp_path) -> LocalBroker:
    broker = LocalBroker(home=tmp_path, port=free_port_pair(), secure=True)
    broker._make_secure_files()
    return broker


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_a_secure_node_listens_sasl_ssl_with_scram_and_acls_and_its_controller_takes_plain_on_localhost(tmp_path):
    broker = _secure(tmp_path)
    props = _props(broker._properties())
    port, cport, secure = broker.port, broker.controller_port, broker.secure_dir
    assert props["listeners"] == f"SASL_SSL://localhost:{port},CONTROLLER://localhost:{cport}"
    assert props["advertised.listeners"] == f"SASL_SSL://localhost:{port}"
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT"
    assert props["inter.broker.listener.name"] == "SASL_SSL" and props["controller.listener.names"] == "CONTROLLER"
    assert props["sasl.enabled.mechanisms"] == props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["super.users"] == "User:admin", "no User:ANONYMOUS: nobody unauthenticated is a super user"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["ssl.keystore.type"] == props["ssl.truststore.type"] == "PEM"
    assert props["ssl.keystore.location"] == str(secure / "broker.pem")
    assert props["ssl.truststore.location"] == str(secure / "ca.pem")
    creds = json.loads(broker.credentials_file.read_text())
    jaas = props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    password = creds["admin"]["sasl.password"]
    assert (
        jaas
        == f'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="{password}";'
    )
    assert props["sasl.mechanism.controller.protocol"] == "PLAIN"
    assert props["listener.name.controller.sasl.enabled.mechanisms"] == "PLAIN"
    assert props["listener.name.controller.plain.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{password}" user_admin="{password}";'
    )
    assert creds["onceflow"]["sasl.password"] not in broker._properties(), "only the admin's password is the broker's"
    plain = _props(LocalBroker(home=tmp_path / "plain", port=port)._properties())
    assert plain["listeners"] == f"PLAINTEXT://localhost:{port},CONTROLLER://localhost:{cport}"
    assert "authorizer.class.name" not in plain and "sasl.enabled.mechanisms" not in plain


def test_the_secure_files_are_private_and_the_users_settings_are_librdkafkas(tmp_path):
    broker = _secure(tmp_path)
    secure = broker.secure_dir
    for name in ("ca.key", "broker.pem", "credentials.json"):
        assert stat.S_IMODE((secure / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE(secure.stat().st_mode) == 0o700
    assert (secure / "broker.pem").read_text().startswith("-----BEGIN PRIVATE KEY-----")
    users = json.loads(broker.credentials_file.read_text())
    assert sorted(users) == ["admin", "onceflow", "producer"]
    assert len({u["sasl.password"] for u in users.values()}) == 3
    assert users["producer"] == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "producer",
        "sasl.password": users["producer"]["sasl.password"],
        "ssl.ca.location": str(secure / "ca.pem"),
    }
    before = broker.credentials_file.read_text()
    broker._make_secure_files()
    assert broker.credentials_file.read_text() == before, "made once: a formatted broker's users keep their passwords"


def test_a_client_and_the_env_of_a_user_plain_and_secure(tmp_path):
    broker = _secure(tmp_path)
    users = json.loads(broker.credentials_file.read_text())
    client = broker.client()
    assert client.bootstrap == broker.bootstrap and dict(client.props) == users["onceflow"]
    assert broker.client("admin").props["sasl.username"] == "admin"
    with pytest.raises(BrokerError, match=r"has no user 'nobody'. Fix: use one of admin, onceflow, producer"):
        broker.client("nobody")
    assert broker.env("producer") == {
        "ONCEFLOW_KAFKA_BOOTSTRAP": broker.bootstrap,
        "ONCEFLOW_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "ONCEFLOW_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "ONCEFLOW_KAFKA_USERNAME": "producer",
        "ONCEFLOW_KAFKA_PASSWORD": users["producer"]["sasl.password"],
        "ONCEFLOW_KAFKA_CA": str(broker.ca_file),
    }
    plain = LocalBroker(home=tmp_path / "plain", port=free_port_pair())
    assert plain.client("admin") == KafkaClient(plain.bootstrap)
    assert plain.env() == {"ONCEFLOW_KAFKA_BOOTSTRAP": plain.bootstrap}


def test_format_passes_the_passwords_in_a_private_argfile_it_removes(tmp_path, monkeypatch):
    broker = _secure(tmp_path)
    (broker.dir / "server.properties").write_text(broker._properties())
    users = json.loads(broker.credentials_file.read_text())
    monkeypatch.setattr(broker, "_java_cmd", lambda *args: ["java", *args])
    seen: dict[str, Any] = {}

    def run(cmd, **kwargs):
        argfile = Path(cmd[-1].removeprefix("@"))
        seen.update(cmd=cmd, mode=stat.S_IMODE(argfile.stat().st_mode), args=shlex.split(argfile.read_text()))
        password = users["admin"]["sasl.password"]
        return subprocess.CompletedProcess(cmd, 1, "", f"Invalid --add-scram password={password}")

    monkeypatch.setattr(subprocess, "run", run)
    with pytest.raises(BrokerError, match=r"formatting KRaft storage") as failed:
        broker._format_storage()
    assert "password=***" in str(failed.value) and users["admin"]["sasl.password"] not in str(failed.value)
    assert len(seen["cmd"]) == 2 and seen["cmd"][1].startswith("@"), "only the @argfile on the command line"
    assert seen["mode"] == 0o600 and not list(broker.secure_dir.glob("*.args")), "the argfile is removed"
    assert seen["args"][:3] == ["kafka.tools.StorageTool", "format", "-t"], "the main class is in the argfile"
    scram = [seen["args"][i + 1] for i, a in enumerate(seen["args"]) if a == "--add-scram"]
    assert scram == [
        f"SCRAM-SHA-512=[name={u},password={users[u]['sasl.password']}]" for u in ("admin", "onceflow", "producer")
    ]
    assert _argfile_quote('a "b" c\\d') == '"a \\"b\\" c\\\\d"'


def test_data_made_in_one_mode_is_refused_in_the_other_with_the_fix(tmp_path):
    broker = LocalBroker(home=tmp_path, port=free_port_pair())
    broker.data_dir.mkdir(parents=True)
    (broker.data_dir / "meta.properties").write_text("node.id=1\n")
    (broker.dir / "ports.json").write_text(json.dumps({"port": broker.port, "controller_port": broker.port + 1}))
    with pytest.raises(BrokerError) as refused:
        LocalBroker(home=tmp_path, secure=True).start(timeout=5)
    assert str(refused.value) == (
        f"the broker in {broker.dir} was made plain (PLAINTEXT); it cannot start secure (SASL_SSL, SCRAM-SHA-512, "
        f"ACLs). Fix: start it as it was (`onceflow kafka start`), or stop it and remove {broker.dir} to start a "
        "new secure broker (its topics and data go with it)"
    )
    saved = {"port": broker.port, "controller_port": broker.port + 1, "secure": True}
    (broker.dir / "ports.json").write_text(json.dumps(saved))
    with pytest.raises(BrokerError, match=r"was made secure .*`onceflow kafka start --secure`"):
        LocalBroker(home=tmp_path, secure=False).start(timeout=5)
    again = LocalBroker(home=tmp_path)
    assert again.secure and again.status(probe=False).secure, "no mode asked: the broker as it was made"


def test_a_transactional_id_maps_to_its_transaction_state_partition_as_kafka_maps_it():
    # Java's String.hashCode, then Kafka's Utils.abs (Integer.MIN_VALUE -> 0), modulo the partitions
    assert transaction_state_partition("a", 50) == 97 % 50
    assert transaction_state_partition("onceflow.p_cf.g1.p3", 4) == 2  # hashCode 601762634 (jshell)
    assert transaction_state_partition("polygenelubricants", 50) == 0  # hashCode Integer.MIN_VALUE
    assert transaction_state_partition("", 4) == 0


def test_a_cluster_names_its_nodes_by_node_id_and_refuses_to_kill_one_that_is_not_running(tmp_path):
    cluster = LocalCluster(home=tmp_path)
    assert cluster.node(1) is cluster.nodes[0] and cluster.node(3) is cluster.nodes[2]
    for wrong in (0, 4):
        with pytest.raises(BrokerError, match="no node"):
            cluster.node(wrong)
    with pytest.raises(BrokerError, match="node 2 is not running"):
        cluster.kill_node(2)
