"""A schema registry killed (SIGKILL) the moment it acknowledged a registration still knows that id
when it comes back. An id it forgot would be handed out again for another schema, and records
framed with the first would then be decoded with the second: wrong values, silently. With H2's
default write delay (500 ms) Apicurio lost about one registration in three so (CI saw it in the
docker stack's drill); the local registry and the stack's image write at each commit."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request

from onceflow.local.registry import LocalRegistry
from onceflow.local.service import free_port

ROUNDS = 4


def _register(url: str, subject: str, field: str) -> int:
    schema = {"type": "record", "name": "r", "fields": [{"name": field, "type": ["null", "int"], "default": None}]}
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        data=json.dumps({"schema": json.dumps(schema)}).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())["id"]


def _ids(url: str, subject: str) -> list[int]:
    ids = []
    with urllib.request.urlopen(f"{url}/subjects/{subject}/versions", timeout=30) as reply:
        versions = json.loads(reply.read())
    for version in versions:
        with urllib.request.urlopen(f"{url}/subjects/{subject}/versions/{version}", timeout=30) as reply:
            ids.append(json.loads(reply.read())["id"])
    return ids


def test_every_acknowledged_registration_survives_a_kill_right_after_it(jars, tmp_path):
    server = LocalRegistry(home=tmp_path, port=free_port())
    server.start(timeout=120)
    acknowledged: list[int] = []
    try:
        for round_ in range(ROUNDS):
            acknowledged.append(_register(server.url, "durable-value", f"f{round_}"))
            pid = server._pid()
            assert pid is not None
            os.kill(pid, signal.SIGKILL)  # at once: no time for a delayed write
            while server._pid():
                time.sleep(0.05)
            server.start(timeout=120)
            assert _ids(server.url, "durable-value") == acknowledged, f"round {round_}: a registration was lost"
    finally:
        server.stop()
