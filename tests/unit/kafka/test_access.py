"""check_access's refusals that need no broker: a port nobody listens on, a listener that hangs up,
a TLS listener whose certificate is someone else's or names another host, a login refused. Each says
what failed and the fix, in seconds (tests/integration/test_secure_broker.py: the ACLs, on a real one)."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from onceflow.errors import BrokerError
from onceflow.kafka.access import _Probe, _topic_refusal, check_access, login_refusal
from onceflow.kafka.client import KafkaClient
from onceflow.local.tls import make_ca, make_server_cert

SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "onceflow"}
SECRET = "s3cr3t-not-to-be-shown"


@contextmanager
def _listener(tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """A port that accepts connections and hangs up at once (after a TLS handshake, with `tls`)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn, suppress(OSError):
                if tls is not None:
                    conn.settimeout(2)
                    tls.wrap_socket(conn, server_side=True).close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()


def _tls_server(folder: Path, host: str) -> tuple[ssl.SSLContext, Path]:
    ca, key = make_ca(folder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(make_server_cert(ca, key, folder / "server.pem", host=host))
    return context, ca


def _refusal(client: KafkaClient) -> str:
    started = time.monotonic()
    with pytest.raises(BrokerError) as refused:
        check_access(client, topics_read=["t"], timeout=10)
    assert time.monotonic() - started < 10, "refused before the timeout"
    assert SECRET not in str(refused.value)
    return str(refused.value)


def test_nobody_listening_is_said_with_the_fix():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    said = _refusal(KafkaClient(f"127.0.0.1:{port}"))
    assert said.startswith(f"cannot reach Kafka at 127.0.0.1:{port}: ")  # a cluster with no settings: its servers alone
    assert said.endswith("Fix: check the bootstrap servers and security.protocol, and that the broker runs")


def test_a_listener_that_hangs_up_on_plaintext_is_said_to_expect_tls():
    with _listener() as port:
        said = _refusal(KafkaClient(f"127.0.0.1:{port}"))
    assert "(the broker closed the connection at once: its listener may expect TLS, i.e. SSL or SASL_SSL)" in said


def test_a_certificate_of_an_untrusted_ca_is_said_with_the_ca_to_set(tmp_path):
    context, _ = _tls_server(tmp_path / "server", "localhost")
    other, _ = make_ca(tmp_path / "other")
    with _listener(context) as port:
        client = KafkaClient(f"localhost:{port}", {**SCRAM, "sasl.password": SECRET, "ssl.ca.location": str(other)})
        said = _refusal(client)
    assert said.startswith(
        f"the TLS handshake with Kafka at localhost:{port} (SASL_SSL, SCRAM-SHA-512 as onceflow) failed: the broker's "
        f"certificate is not signed by a CA this client trusts (ssl.ca.location is {other}; "
    )
    assert said.endswith("Fix: set ssl.ca.location to the CA that signed the broker's certificate")


def test_a_certificate_for_another_host_is_said_to_name_another_host(tmp_path):
    context, ca = _tls_server(tmp_path, "elsewhere.example")
    with _listener(context) as port:
        client = KafkaClient(f"localhost:{port}", {**SCRAM, "sasl.password": SECRET, "ssl.ca.location": str(ca)})
        said = _refusal(client)
    assert said.startswith(
        f"the TLS handshake with Kafka at localhost:{port} (SASL_SSL, SCRAM-SHA-512 as onceflow) failed: the broker's "
        "certificate does not name the host connected to ("
    )
    assert said.endswith(
        "Fix: connect by a name the certificate holds (its subjectAltName), or give the broker a certificate for "
        "this name"
    )


def test_a_refused_login_and_a_missing_topic_acl_say_their_fix():
    client = KafkaClient("b:9093", {**SCRAM, "sasl.password": SECRET})
    err = KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed")
    assert login_refusal(client, err) == (
        "Kafka at b:9093 (SASL_SSL, SCRAM-SHA-512 as onceflow) refused the login: SASL authentication failed "
        "(SASL authentication error: Authentication failed). "
        "Fix: check sasl.username/sasl.password (or the Airflow kafka connection)"
    )
    assert login_refusal(client, KafkaError(KafkaError._TRANSPORT, "Connection refused")) is None
    refusal = str(_topic_refusal(_Probe(client, 1), "t", ["DESCRIBE", "READ", "WRITE"]))
    assert refusal.startswith(
        "User:onceflow may not DESCRIBE, READ and WRITE topic 't' on b:9093: no TOPIC ACL allows it. "
        "Fix: grant DESCRIBE, READ and WRITE on TOPIC 't' to User:onceflow ("
    )
