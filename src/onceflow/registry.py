"""A schema registry's Confluent-compatible API, and the Confluent wire format it goes with.

A record in the wire format is a magic byte 0, its writer schema's id (4 bytes, big-endian), then
the payload (Avro binary, or a JSON Schema serializer's JSON text). The job (spark/framed.py),
the audit's judges (schema/avro_reference.py, schema/framed.py)
and the generator ask the registry for a schema by id, for the subjects an id is registered under,
and (the generator) register one. A schema never changes once it has an id, so each is fetched once
per process. A registry that does not answer is asked again for up to `wait_seconds`, then an error
with the fix, never an answer: a batch waits, then fails on it, and no record is judged without its
schema (docs/registry.md).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Protocol

from onceflow.connections import airflow_conn_env, fields_of, handed_env
from onceflow.errors import RegistryError

MAGIC = 0
HEADER_BYTES = 5
JSON_SCHEMA_TYPE = "JSON"  # a JSON Schema's `schemaType` (AVRO, the default, and PROTOBUF are the others)
NOT_FOUND_CODES = (40401, 40402, 40403)  # subject, version, schema not found
RETRY_SECONDS = 2.0
_log = logging.getLogger("onceflow.registry")


def frame(schema_id: int, payload: bytes) -> bytes:
    """A payload in the Confluent wire format."""
    return bytes([MAGIC]) + schema_id.to_bytes(4, "big") + payload


def unframe(value: bytes) -> tuple[int, bytes] | None:
    """(schema id, payload) of a record in the wire format; None when it is not one."""
    if len(value) < HEADER_BYTES or value[0] != MAGIC:
        return None
    return int.from_bytes(value[1:HEADER_BYTES], "big"), value[HEADER_BYTES:]


class _NoAnswer(Exception):
    """The registry did not answer, or answered that it cannot now (5xx)."""


class RegistrySettings(Protocol):
    """Where the registry is and how to log in (a pipeline's schema.registry: schema.model.RegistrySpec)."""

    url: str
    username: str | None
    password: str | None
    timeout_seconds: float
    wait_seconds: float  # how long a registry that does not answer is asked again before RegistryError
    ca_location: str | None  # https: the CA to trust (PEM), else the system's
    connection: str | None  # an Airflow connection holding the login, instead of username/password


class Registry:
    """One registry, its answers about ids kept for the life of the process (they never change)."""

    def __init__(self, spec: RegistrySettings):
        self.spec = spec
        self._schemas: dict[int, dict | None] = {}
        self._subjects: dict[int, frozenset[str]] = {}
        self._tls: ssl.SSLContext | None = None
        self._login: tuple[str, str] | None = None
        ca = spec.ca_location
        conn_id = spec.connection
        if conn_id:
            login, password, conn_ca = _connection_login(conn_id)
            self._login = (login, password) if login is not None else None
            ca = ca or conn_ca
        elif spec.username is not None:
            self._login = (spec.username, spec.password or "")
        if ca:
            try:
                self._tls = ssl.create_default_context(cafile=ca)
            except (OSError, ssl.SSLError) as exc:
                raise RegistryError(
                    f"schema.registry.ca_location {ca} is not a readable PEM certificate file ({exc}). Fix: point "
                    "it at the CA that signed the registry's certificate"
                ) from None

    def _request(self, path: str, body: dict | None = None) -> Any:
        """The JSON answer at `path`, None for a 404 (not found). A registry that does not answer (or
        answers 5xx) is asked again every few seconds for up to `wait_seconds`, then RegistryError:
        a batch waits out a registry restart rather than fail, and never judges without a schema."""
        wait = float(self.spec.wait_seconds)
        deadline, told = time.monotonic() + wait, 0.0
        while True:
            try:
                return self._ask(path, body)
            except _NoAnswer as exc:
                now = time.monotonic()
                if now >= deadline:
                    waited = f" for {wait:.0f}s" if wait else ""
                    raise RegistryError(
                        f"the schema registry at {self.spec.url} did not answer{waited} ({exc}). Fix: start it or "
                        "correct schema.registry.url; no record is judged without its schema, so the batch is "
                        "not committed and is read again"
                    ) from None
                if now - told >= 10:
                    _log.warning(
                        "the schema registry at %s does not answer (%s); asking again for up to %.0fs more",
                        self.spec.url,
                        exc,
                        deadline - now,
                    )
                    told = now
                time.sleep(min(RETRY_SECONDS, max(deadline - now, 0.0)))

    def _ask(self, path: str, body: dict | None) -> Any:
        request = urllib.request.Request(self.spec.url + path, method="POST" if body is not None else "GET")
        request.add_header("Accept", "application/vnd.schemaregistry.v1+json, application/json")
        if body is not None:
            request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            request.data = json.dumps(body).encode()
        if self._login is not None:
            token = base64.b64encode(":".join(self._login).encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=self.spec.timeout_seconds, context=self._tls) as reply:
                return json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as exc:
            detail = _error_body(exc)
            if exc.code == 404 and detail.get("error_code", 40400) in (40400, *NOT_FOUND_CODES):
                return None
            if exc.code >= 500:
                raise _NoAnswer(f"{exc.code} {detail.get('message', exc.reason)}") from None
            if exc.code == 409 and body is not None:
                raise RegistryError(
                    f"the schema registry at {self.spec.url} refused the schema at {path} as incompatible with the "
                    f"subject's versions (409: {detail.get('message', exc.reason)}). Fix: make the new version "
                    "compatible (add a field with a default, drop one that had a default), or register it under "
                    "another subject"
                ) from None
            raise RegistryError(
                f"the schema registry at {self.spec.url} answered {exc.code} to {path}: "
                f"{detail.get('message', exc.reason)}. Fix: check schema.registry (url, subject, credentials)"
            ) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLCertVerificationError):  # an answer, from a server not trusted
                raise RegistryError(
                    f"the schema registry at {self.spec.url} is not trusted: {exc.reason.verify_message}. Fix: set "
                    "schema.registry.ca_location to the CA that signed its certificate (docs/registry.md)"
                ) from None
            raise _NoAnswer(str(exc)) from None
        except (OSError, ValueError) as exc:
            raise _NoAnswer(str(exc)) from None

    def _answer(self, schema_id: int) -> dict | None:
        if schema_id not in self._schemas:
            self._schemas[schema_id] = self._request(f"/schemas/ids/{schema_id}")
        return self._schemas[schema_id]

    def schema(self, schema_id: int) -> str | None:
        """The schema (its JSON text) registered with this id, None when the registry knows no such id."""
        found = self._answer(schema_id)
        return None if found is None else found["schema"]

    def schema_type(self, schema_id: int) -> str | None:
        """AVRO, JSON or PROTOBUF (the API leaves out AVRO, its default); None for an unknown id."""
        found = self._answer(schema_id)
        return None if found is None else found.get("schemaType") or "AVRO"

    def subjects(self, schema_id: int) -> frozenset[str]:
        """The subjects the id is registered under (empty for an unknown id); asked again while it is
        not under a subject, which may register it later."""
        if schema_id not in self._subjects:
            found = self._request(f"/schemas/ids/{schema_id}/versions") or []
            subjects = frozenset(v["subject"] for v in found)
            if not subjects:
                return subjects
            self._subjects[schema_id] = subjects
        return self._subjects[schema_id]

    def latest(self, subject: str) -> int | None:
        """The id of the subject's latest version, None when the subject has none."""
        found = self._request(f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest")
        return None if found is None else int(found["id"])

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Register `schema` under `subject` (its id if it is there already); the registry checks its
        compatibility with the subject's versions and refuses an incompatible one."""
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        answer = self._request(f"/subjects/{urllib.parse.quote(subject, safe='')}/versions", body)
        return int(answer["id"])


def connection_env(conn_id: str) -> str:
    """The variable onceflow's Airflow side hands a registry connection's login on in
    (onceflow.airflow.registry): JSON {"login", "password", "ca_location"}."""
    return handed_env("REGISTRY", conn_id)


def _connection_login(conn_id: str) -> tuple[str | None, str, str | None]:
    """(login, password, extra.ca_location) of the Airflow connection `conn_id`: as onceflow's
    Airflow side handed it on, else Airflow's own AIRFLOW_CONN_<ID>. RegistryError with the fix."""
    handed = os.environ.get(connection_env(conn_id))
    if handed:
        found = json.loads(handed)
        return found.get("login"), found.get("password") or "", found.get("ca_location")
    text = os.environ.get(airflow_conn_env(conn_id))
    if not text:
        raise RegistryError(
            f"schema.registry.connection {conn_id!r} is not known here. Fix: under Airflow, create it (Admin -> "
            "Connections, type http, login and password); elsewhere export "
            f'{airflow_conn_env(conn_id)}=\'{{"conn_type": "http", "login": "...", "password": "..."}}\' '
            "(docs/registry.md)"
        )
    try:
        fields = fields_of(text)
    except ValueError as exc:
        raise RegistryError(
            f"the connection {conn_id!r} in ${airflow_conn_env(conn_id)} is not readable ({type(exc).__name__}). "
            'Fix: make it JSON like {"conn_type": "http", "login": "...", "password": "..."}'
        ) from None
    ca = fields["extra"].get("ca_location") if isinstance(fields["extra"], dict) else None
    return fields["login"], fields["password"] or "", ca


def _error_body(exc: urllib.error.HTTPError) -> dict:
    try:
        found = json.loads(exc.read() or b"{}")
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}
