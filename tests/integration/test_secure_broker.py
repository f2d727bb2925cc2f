"""The secure embedded broker (issue 40): SASL_SSL with SCRAM-SHA-512, a CA of its own, ACLs.

One broker for the module, started the way a person does (`onceflow kafka start --secure
--pipeline P`), while every process's command line is sampled: no password may show there. Then
the granted users produce and consume transactionally, a denied operation is refused, and
`check_access` names each failure (login, CA, hostname, each missing ACL) and its fix, in seconds; the
controller port takes no unauthenticated admin.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import stat
import subprocess
import time
import uuid
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from onceflow.cli import main
from onceflow.errors import BrokerError
from onceflow.jvm import classpath_jars
from onceflow.kafka.access import check_access
from onceflow.kafka.acls import grant_pipeline, revoke
from onceflow.kafka.client import KafkaClient
from onceflow.local.broker import LocalBroker, free_port_pair
from onceflow.local.tls import make_ca
from tests.conftest import ROOT
from tests.process_list import Cmdlines

pytestmark = pytest.mark.integration

SRC, OUT, LEDGER = "secured-src", "secured-out", "onceflow-ledger.secured"
GRANTS = "`onceflow kafka start --secure --pipeline P` grants a pipeline's ACLs; docs/kafka-security.md"


@pytest.fixture(scope="module")
def secure(jars, tmp_path_factory):
    home = tmp_path_factory.mktemp("secure-home")
    spec = yaml.safe_load((ROOT / "pipelines" / "payments.yaml").read_text())
    spec.update(name="secured", source={**spec["source"], "topic": SRC})
    spec["sinks"]["kafka"] = {"topic": OUT, "partitions": 2}
    pipeline = home / "secured.yaml"
    pipeline.write_text(yaml.safe_dump(spec))
    port = free_port_pair()
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    try:
        with pytest.MonkeyPatch.context() as env, Cmdlines() as cmdlines, redirect_stdout(out), redirect_stderr(err):
            env.setenv("ONCEFLOW_HOME", str(home))
            code = main(
                ["kafka", "start", "--secure", "--port", str(port), "--pipeline", str(pipeline), "--partitions", "2"]
            )
        assert code == 0, out.getvalue() + err.getvalue()
        broker = LocalBroker(home=home)
        yield SimpleNamespace(
            broker=broker,
            home=home,
            cmdlines=cmdlines.seen,
            said=out.getvalue() + err.getvalue(),
            start_seconds=time.monotonic() - started,
            passwords=[u["sasl.password"] for u in json.loads(broker.credentials_file.read_text()).values()],
        )
    finally:
        LocalBroker(home=home).stop()


def test_start_makes_the_topics_grants_and_keeps_passwords_off_every_process_list(secure):
    broker = secure.broker
    assert broker.secure and broker.status().ready and secure.start_seconds < 60
    said = " ".join(secure.said.split())
    assert f"Kafka broker ready on localhost:{broker.port} (SASL_SSL, SCRAM-SHA-512, ACLs; pid" in said
    assert f"pipeline secured: topics {SRC}, {OUT}, {LEDGER}; ACLs granted to User:onceflow" in said
    assert str(broker.credentials_file) in said
    assert any("format.args" in c for c in secure.cmdlines), "the format ran while /proc was sampled"
    assert any("kafka.Kafka" in c for c in secure.cmdlines), "the broker ran while /proc was sampled"
    broker_cmdline = Path(f"/proc/{broker.status().pid}/cmdline").read_bytes().decode()
    for password in secure.passwords:
        assert password not in said
        assert not [c for c in secure.cmdlines if password in c], "a password on the process list"
        assert password not in broker_cmdline
    for path in (broker.credentials_file, broker.dir / "server.properties", broker.secure_dir / "ca.key"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert not list(broker.secure_dir.glob("*.args")), "the format's argfile is removed"


# a Java Admin client on the controller port (`bootstrap.controllers`, KIP-919): what librdkafka cannot
# reach, and where a PLAINTEXT controller listener would take anyone as a super user (User:ANONYMOUS)
CONTROLLER_PROBE = """
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.resource.*;
public class Probe {
  public static void main(String[] args) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.controllers", args[0]);
    p.put("default.api.timeout.ms", "4000");
    p.put("request.timeout.ms", "2000");
    try (Admin admin = Admin.create(p)) {
      admin.createAcls(List.of(new AclBinding(new ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL),
          new AccessControlEntry("User:mallory", "*", AclOperation.ALL, AclPermissionType.ALLOW)))).all().get();
      System.out.println("CREATED");
    } catch (Exception e) {
      System.out.println("REFUSED " + e);
    }
  }
}
"""


@pytest.mark.skipif(not shutil.which("javac"), reason="a Java source file runs only with a JDK's compiler")
def test_the_controller_port_takes_no_unauthenticated_admin(secure, tmp_path):
    source = tmp_path / "Probe.java"
    source.write_text(CONTROLLER_PROBE)
    classpath = os.pathsep.join(str(j) for j in classpath_jars("kafka"))
    probe = subprocess.run(
        ["java", "-cp", classpath, str(source), f"localhost:{secure.broker.controller_port}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "REFUSED" in probe.stdout and "CREATED" not in probe.stdout, probe.stdout + probe.stderr[-2000:]
    assert revoke(secure.broker.client("admin"), "User:mallory") == 0, "no ACL was made"


def _read(client: KafkaClient, topic: str, count: int, group: str = "onceflow-test-read") -> list[bytes]:
    consumer = Consumer(
        client.librdkafka(
            **{"group.id": group, "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 3}
        )
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value() or b"")
        consumer.commit(asynchronous=False)  # offsets of a group of its own: GROUP READ on prefix onceflow-
        return values
    finally:
        consumer.close()


def _transaction(
    client: KafkaClient, txn_id: str, writes: list[tuple[str, bytes]], abort: bool = False, failed: list | None = None
) -> None:
    """One transaction of `writes`; the delivery errors go to `failed`."""
    producer = Producer(client.librdkafka(**{"transactional.id": txn_id, "log_level": 0}))
    producer.init_transactions(30)
    producer.begin_transaction()
    errors = failed if failed is not None else []
    for topic, value in writes:
        producer.produce(topic, value=value, on_delivery=lambda err, msg: errors.append(err) if err else None)
    if abort:
        producer.abort_transaction(30)
    else:
        producer.commit_transaction(30)


def test_the_granted_users_produce_and_consume_transactionally(secure):
    producer, onceflow = secure.broker.client("producer"), secure.broker.client("onceflow")
    _transaction(producer, f"onceflow-produce-{uuid.uuid4()}", [(SRC, f"e{i}".encode()) for i in range(10)])
    _transaction(producer, f"onceflow-produce-{uuid.uuid4()}", [(SRC, b"aborted")], abort=True)
    read = _read(onceflow, SRC, 10)
    assert sorted(read) == sorted(f"e{i}".encode() for i in range(10)), "committed once, the aborted never"
    _transaction(onceflow, "onceflow.secured.g0.p0", [(OUT, v) for v in read] + [(LEDGER, b"{}")])
    assert sorted(_read(onceflow, OUT, 10, group="onceflow-audit")) == sorted(read)


def test_a_denied_operation_is_refused_naming_it(secure):
    producer = secure.broker.client("producer")
    failed: list = []
    with pytest.raises(KafkaException, match=r"failed delivery"):
        _transaction(producer, f"onceflow-produce-{uuid.uuid4()}", [(OUT, b"not mine")], failed=failed)
    assert [err.name() for err in failed] == ["TOPIC_AUTHORIZATION_FAILED"]
    with pytest.raises(BrokerError) as refused:
        check_access(producer, topics_read=[SRC], timeout=10)
    assert str(refused.value) == (
        f"User:producer may not READ topic '{SRC}' on {producer.bootstrap}: no TOPIC ACL allows it. "
        f"Fix: grant READ on TOPIC '{SRC}' to User:producer ({GRANTS})"
    )


def _refusal(check: Callable[[], None]) -> str:
    """The refusal of `check` (each call within 15 s), asked until it comes: an ACL revoked reaches
    the authorizer a moment after delete_acls returns."""
    deadline = time.monotonic() + 15
    while True:
        started = time.monotonic()
        try:
            check()
        except BrokerError as exc:
            assert time.monotonic() - started <= 15
            return str(exc)
        assert time.monotonic() - started <= 15
        assert time.monotonic() < deadline, "never refused"
        time.sleep(0.2)


def _passes(check: Callable[[], None]) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            return check()
        except BrokerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.parametrize(
    ("resource", "name", "operation", "expected"),
    [
        ("TOPIC", SRC, "READ", f"may not READ topic '{SRC}' on {{b}}: no TOPIC ACL allows it. Fix: grant READ on "
         f"TOPIC '{SRC}' to User:onceflow ({GRANTS})"),
        ("TOPIC", OUT, "WRITE", f"may not WRITE topic '{OUT}' on {{b}}: no TOPIC ACL allows it. Fix: grant WRITE "
         f"on TOPIC '{OUT}' to User:onceflow ({GRANTS})"),
        ("TOPIC", LEDGER, None, f"may not DESCRIBE, READ and WRITE topic '{LEDGER}' on {{b}}: no TOPIC ACL allows "
         f"it. Fix: grant DESCRIBE, READ and WRITE on TOPIC '{LEDGER}' to User:onceflow ({GRANTS})"),
        ("GROUP", "onceflow-", "READ", "may not READ consumer group 'onceflow-preflight-secured' on {b}: no GROUP "
         "ACL allows it. Fix: grant READ on GROUP 'onceflow-preflight-secured' to User:onceflow (onceflow's groups "
         f"all start with 'onceflow-': one PREFIXED ACL on 'onceflow-' covers them; {GRANTS})"),
        ("TRANSACTIONAL_ID", "onceflow", "WRITE", "may not use transactional id 'onceflow.preflight.secured' on "
         "{b}: no TRANSACTIONAL_ID ACL allows WRITE on it. Fix: grant WRITE and DESCRIBE on TRANSACTIONAL_ID "
         "'onceflow.preflight.secured' to User:onceflow (a PREFIXED ACL on 'onceflow' covers a pipeline's Kafka "
         f"sink, one on 'onceflow-produce-' `onceflow produce`; {GRANTS})"),
    ],
)  # fmt: skip
def test_each_missing_acl_is_named_with_its_fix(secure, resource, name, operation, expected):
    admin, onceflow = secure.broker.client("admin"), secure.broker.client("onceflow")

    def check() -> None:
        check_access(
            onceflow,
            topics_read=[SRC, OUT, LEDGER],
            topics_write=[OUT, LEDGER],
            group="onceflow-preflight-secured",
            transactional_id="onceflow.preflight.secured",
            timeout=10,
        )

    _passes(check)
    assert revoke(admin, "onceflow", resource, name, operation) >= 1
    try:
        assert _refusal(check) == "User:onceflow " + expected.format(b=onceflow.bootstrap)
    finally:
        grant_pipeline(admin, "onceflow", SRC, OUT, LEDGER)
    _passes(check)


def test_a_wrong_password_an_unknown_ca_and_another_hostname_are_refused_in_seconds(secure, tmp_path):
    good = secure.broker.client("onceflow")
    other_ca, _ = make_ca(tmp_path / "other", name="someone else's CA")
    bad = {
        "password": KafkaClient(good.bootstrap, {**good.props, "sasl.password": "not-the-password"}),
        "ca": KafkaClient(good.bootstrap, {**good.props, "ssl.ca.location": str(other_ca)}),
    }
    host = socket.gethostname()
    if host != "localhost" and socket.gethostbyname(host) == "127.0.0.1":  # a name the certificate does not hold
        bad["hostname"] = KafkaClient(good.bootstrap.replace("localhost", host), good.props)
    said = {}
    for what, client in bad.items():
        started = time.monotonic()
        with pytest.raises(BrokerError) as refused:
            check_access(client, topics_read=[SRC], timeout=10)
        assert time.monotonic() - started <= 15, what
        said[what] = str(refused.value)
        for password in [*secure.passwords, "not-the-password"]:
            assert password not in said[what]
    where = f"{good.bootstrap} (SASL_SSL, SCRAM-SHA-512 as onceflow)"
    assert said["password"].startswith(f"Kafka at {where} refused the login: SASL authentication failed (")
    assert said["password"].endswith("Fix: check sasl.username/sasl.password (or the Airflow kafka connection)")
    assert said["ca"].startswith(
        f"the TLS handshake with Kafka at {where} failed: the broker's certificate is not signed by a CA this client "
        f"trusts (ssl.ca.location is {other_ca}; "
    )
    assert said["ca"].endswith("Fix: set ssl.ca.location to the CA that signed the broker's certificate")
    if "hostname" in said:
        assert said["hostname"].startswith(
            f"the TLS handshake with Kafka at {host}:{secure.broker.port} (SASL_SSL, SCRAM-SHA-512 as onceflow) "
            "failed: the broker's certificate does not name the host connected to ("
        )


def test_kafka_env_round_trips_and_status_says_secure(secure, monkeypatch, capsys):
    monkeypatch.setenv("ONCEFLOW_HOME", str(secure.home))
    assert main(["kafka", "env"]) == 0
    exports = capsys.readouterr().out
    shell = subprocess.run(
        ["bash", "-c", 'eval "$EXPORTS" && env -0'],
        env={"EXPORTS": exports, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    )
    env = dict(v.split("=", 1) for v in shell.stdout.split("\0") if v.startswith("ONCEFLOW_KAFKA_"))
    assert env == secure.broker.env("onceflow")
    client = KafkaClient(
        env["ONCEFLOW_KAFKA_BOOTSTRAP"],
        {
            "security.protocol": env["ONCEFLOW_KAFKA_SECURITY_PROTOCOL"],
            "sasl.mechanism": env["ONCEFLOW_KAFKA_SASL_MECHANISM"],
            "sasl.username": env["ONCEFLOW_KAFKA_USERNAME"],
            "sasl.password": env["ONCEFLOW_KAFKA_PASSWORD"],
            "ssl.ca.location": env["ONCEFLOW_KAFKA_CA"],
        },
    )
    check_access(client, topics_read=[SRC], timeout=10)
    assert main(["kafka", "status"]) == 0
    status = capsys.readouterr()
    assert "ready" in status.out and "secure (SASL_SSL, SCRAM-SHA-512, ACLs)" in " ".join(status.out.split())
    for password in secure.passwords:
        assert password not in status.out + status.err
