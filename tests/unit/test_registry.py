"""The registry client's refusals: a registry that does not answer is an error naming the fix, never
an answer (no record is judged without its schema)."""

from __future__ import annotations

import pytest

from onceflow.errors import RegistryError
from onceflow.local.service import free_port
from onceflow.registry import Registry
from onceflow.schema.model import RegistrySpec


def test_a_registry_that_does_not_answer_is_an_error_with_the_fix():
    url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    client = Registry(RegistrySpec(url=url, timeout_seconds=2, wait_seconds=0))
    with pytest.raises(RegistryError, match=r"did not answer \(.*Fix: start it or correct schema.registry.url"):
        client.schema(1)
    patient = Registry(RegistrySpec(url=url, timeout_seconds=1, wait_seconds=1))
    with pytest.raises(RegistryError, match=r"did not answer for 1s"):
        patient.schema(1)


def _not_found_server(port: int, tls=None, seen: list | None = None):
    """A server that answers every GET as a registry does an unknown id (404, 40403); `seen` collects
    the Authorization headers it was sent."""
    import http.server
    import json

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if seen is not None:
                seen.append(self.headers.get("Authorization"))
            body = json.dumps({"error_code": 40403, "message": "Schema not found"}).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", port), NotFound)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    return server


def test_an_https_registry_with_a_ca_of_its_own_is_trusted_only_through_ca_location(tmp_path):
    """As the Kafka client's ssl.ca.location: a certificate the system does not trust is refused at
    once, naming the setting (not waited on as if the registry were down); with its CA, it answers."""
    import ssl
    import threading

    from onceflow.local.tls import make_ca, make_server_cert

    ca_pem, ca_key = make_ca(tmp_path / "ca")
    served = make_server_cert(ca_pem, ca_key, tmp_path / "server.pem", "localhost")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(served)
    port = free_port()
    server = _not_found_server(port, tls)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://localhost:{port}/apis/ccompat/v7"
    try:
        untrusted = Registry(RegistrySpec(url=url, timeout_seconds=5))  # waits 300 s for a registry that is down
        with pytest.raises(RegistryError, match=r"is not trusted: .*Fix: set schema.registry.ca_location"):
            untrusted.schema(1)
        assert Registry(RegistrySpec(url=url, timeout_seconds=5, ca_location=str(ca_pem))).schema(1) is None
    finally:
        server.shutdown()
    with pytest.raises(RegistryError, match=r"ca_location .* is not a readable PEM certificate file"):
        Registry(RegistrySpec(url=url, ca_location=str(tmp_path / "nope.pem")))
    with pytest.raises(ValueError, match=r"ca_location is for an https registry"):
        RegistrySpec(url="http://localhost:1/apis/ccompat/v7", ca_location=str(ca_pem))


def test_a_registry_that_answers_within_the_wait_is_waited_for(caplog):
    """A registry back after a restart: the request is asked again and gets its answer (here, the
    registry's 404 for an unknown id: None), the wait logged once."""
    import threading

    port = free_port()
    server = _not_found_server(port)
    later = threading.Timer(1.5, server.serve_forever)
    later.start()
    try:
        client = Registry(RegistrySpec(url=f"http://127.0.0.1:{port}/apis/ccompat/v7", timeout_seconds=1))
        with caplog.at_level("WARNING", logger="onceflow.registry"):
            assert client.schema(1) is None
        assert "does not answer" in caplog.text
    finally:
        server.shutdown()
        later.cancel()


def test_a_written_registry_password_is_refused_and_one_from_the_environment_is_never_dumped(tmp_path):
    from devkit.pipelines import PAYMENTS_SCHEMA_BODY, write_pipeline
    from onceflow.config import load
    from onceflow.errors import ConfigError

    def pipeline(password: str):
        schema = {
            **PAYMENTS_SCHEMA_BODY,
            "format": "avro",
            "registry": {"url": "http://127.0.0.1:1/apis/ccompat/v7", "username": "u", "password": password},
        }
        return write_pipeline(tmp_path, "localhost:9092", "t", schema=schema)

    with pytest.raises(ConfigError, match=r"schema.registry.password is a secret written in the file"):
        load(pipeline("hunter2"))
    loaded = load(pipeline("${REGISTRY_PASSWORD}"), env={"REGISTRY_PASSWORD": "s3cret-canary"})
    assert loaded.schema.registry is not None and loaded.schema.registry.password == "s3cret-canary"
    assert "s3cret-canary" not in loaded.schema.model_dump_json() and "s3cret-canary" not in repr(loaded.schema)


def test_the_registry_formats_need_a_registry_and_only_they_take_one():
    from devkit.pipelines import PAYMENTS_SCHEMA_BODY
    from onceflow.schema.model import Schema

    for fmt in ("avro", "json_schema"):
        with pytest.raises(ValueError, match=f"format {fmt} needs `registry`"):
            Schema.model_validate({**PAYMENTS_SCHEMA_BODY, "format": fmt})
        assert Schema.model_validate({**PAYMENTS_SCHEMA_BODY, "format": fmt, "registry": {"url": "http://x"}})
    with pytest.raises(
        ValueError,
        match="`registry` is read with format: avro, json_schema or protobuf, or debezium with converter: avro or "
        "json_schema, only",
    ):
        Schema.model_validate({**PAYMENTS_SCHEMA_BODY, "registry": {"url": "http://x"}})
    with pytest.raises(ValueError, match="not an http"):
        Schema.model_validate({**PAYMENTS_SCHEMA_BODY, "format": "avro", "registry": {"url": "x"}})


def test_the_login_can_come_from_an_airflow_connection_and_never_from_the_file(monkeypatch):
    """schema.registry.connection: the login of an Airflow connection (AIRFLOW_CONN_<ID>, JSON or URI
    form; or as onceflow's Airflow side hands it on), sent as HTTP basic auth; not both it and a
    username; a connection that is not there is an error with the fix."""
    import base64
    import json
    import threading

    port = free_port()
    seen: list = []
    server = _not_found_server(port, seen=seen)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{port}/apis/ccompat/v7"
    basic = "Basic " + base64.b64encode(b"reader:s3cret/canary").decode()
    login = {"login": "reader", "password": "s3cret/canary"}
    try:
        monkeypatch.setenv("AIRFLOW_CONN_SR_URI", "http://reader:s3cret%2Fcanary@sr.example")
        monkeypatch.setenv("AIRFLOW_CONN_SR_JSON", json.dumps({"conn_type": "http", **login}))
        monkeypatch.setenv("ONCEFLOW_REGISTRY_CONN_SR_HANDED", json.dumps(login))
        for conn in ("sr_uri", "sr_json", "sr_handed"):
            assert Registry(RegistrySpec(url=url, connection=conn, wait_seconds=0)).schema(1) is None
        assert seen == [basic] * 3
        with pytest.raises(RegistryError, match=r"connection 'nope' is not known here. Fix: .*AIRFLOW_CONN_NOPE="):
            Registry(RegistrySpec(url=url, connection="nope"))
    finally:
        server.shutdown()
    with pytest.raises(ValueError, match=r"connection and username/password both name a login"):
        RegistrySpec(url=url, connection="sr_json", username="u", password="p")
