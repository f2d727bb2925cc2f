"""Commands that need Kafka refuse a broker that is down in seconds, before any JVM starts,
naming the address and the fix (the real CLI in a subprocess; no broker needed)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from onceflow.errors import BrokerError
from onceflow.kafka.admin import require_broker
from onceflow.local.service import free_port

ROOT = Path(__file__).resolve().parents[3]
FIX = (
    "Fix: start the embedded broker with `onceflow kafka start`, or point source.bootstrap_servers in "
    "{file} (or ONCEFLOW_KAFKA_BOOTSTRAP) at a running broker."
)


def onceflow(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> tuple[subprocess.CompletedProcess, float]:
    """The real `onceflow` command in a subprocess; (result, seconds it took)."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "onceflow.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd or ROOT,
        timeout=timeout,
    )
    return proc, time.monotonic() - started


@pytest.mark.parametrize(
    "command",
    [
        ["ingest"],
        ["ingest", "--mode", "continuous"],
        ["audit", "--full"],
        ["backfill", "--start-offsets", '{"0": 0}', "--end-offsets", '{"0": 10}'],
        ["produce", "--count", "10"],
    ],
)
def test_a_broker_that_is_down_is_refused_in_seconds_with_the_address_and_the_fix(command, tmp_path):
    address = f"localhost:{free_port()}"
    proc, seconds = onceflow(*command, env={"ONCEFLOW_KAFKA_BOOTSTRAP": address, "ONCEFLOW_HOME": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert seconds < 15, seconds
    message = " ".join(proc.stderr.split())  # rich wraps long lines
    assert f"Kafka is not reachable at {address}" in message and "Connection refused" in message
    assert FIX.format(file=ROOT / "pipelines" / "payments.yaml") in message
    assert "Traceback" not in proc.stderr and "WARN" not in proc.stderr
    assert not (tmp_path / "spark-warehouse").exists() and not any(tmp_path.glob("**/checkpoints"))


def test_produce_to_an_explicit_bootstrap_names_that_flag_in_the_fix():
    address = f"127.0.0.1:{free_port()}"
    proc, _ = onceflow("produce", "--bootstrap", address, "--count", "5")
    assert proc.returncode == 2
    assert (
        "Fix: start the embedded broker with `onceflow kafka start`, or point --bootstrap "
        "(or ONCEFLOW_KAFKA_BOOTSTRAP) at a running broker."
    ) in " ".join(proc.stderr.split())


def test_an_open_port_that_does_not_speak_kafka_is_refused_within_the_timeout():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        stop = threading.Event()

        def swallow():  # accepts connections and never answers: a hung broker or another service
            server.settimeout(0.2)
            held = []
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    held.append(server.accept()[0])
            for conn in held:
                conn.close()

        thread = threading.Thread(target=swallow, daemon=True)
        thread.start()
        started = time.monotonic()
        try:
            with pytest.raises(BrokerError) as caught:
                require_broker(f"127.0.0.1:{port}", timeout=3, file="p.yaml")
        finally:
            stop.set()
            thread.join()
    assert time.monotonic() - started < 8
    message = str(caught.value)
    assert f"Kafka is not reachable at 127.0.0.1:{port}: no answer to a metadata request within 3s" in message
    assert message.endswith(FIX.format(file="p.yaml"))


def test_an_unknown_host_is_refused_at_once():
    with pytest.raises(BrokerError, match=r"Kafka is not reachable at nosuch\.invalid:9092 \(nosuch\.invalid:9092: "):
        require_broker("nosuch.invalid:9092", timeout=5)


def test_each_command_declares_whether_its_pipeline_kafka_must_answer_first():
    from onceflow.cli.app import COMMANDS, build_parser

    def needs(*argv: str) -> bool:
        return bool(getattr(build_parser(list(argv)).parse_args(list(argv)), "needs_kafka", False))

    assert needs("ingest") and needs("audit") and needs("backfill", "--start-offsets", "{}", "--end-offsets", "{}")
    assert not needs("checkpoint", "status") and not needs("recover") and not needs("setup")
    assert "audit" in COMMANDS
