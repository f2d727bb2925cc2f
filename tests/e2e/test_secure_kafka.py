"""A pipeline on a secured Kafka (SASL_SSL, SCRAM-SHA-512, a CA of its own, ACLs): exactly once through a
hard kill that its warm standby takes over, a recovery and a full audit, read back by an independent
reader that authenticates too; each refusal (a wrong password, an untrusted certificate, a missing ACL)
said by `ingest`, `produce`, `audit` and `checkpoint status` in seconds with the fix; and the password
in no log, status file, report, event log, checkpoint or process list of any of it (issue 40).

One secured broker for the module; the pipeline's secrets come from the environment as the shipped
pipelines take them (`eval "$(onceflow kafka env)"`), never from the file."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from devkit.driver import IngestProcess
from devkit.pipelines import PAYMENTS_SCHEMA, table_sinks, write_pipeline
from onceflow import config
from onceflow.audit.run import run_audit
from onceflow.checkpoint import read_checkpoint
from onceflow.cli import main
from onceflow.generate.producer import produce
from onceflow.health import pipeline_health
from onceflow.kafka.acls import grant_pipeline, revoke, secure_pipeline
from onceflow.kafka.consume import read_records
from onceflow.local.broker import LocalBroker, free_port_pair
from onceflow.local.tls import make_ca
from onceflow.paths import state_dir
from onceflow.recovery import recover
from onceflow.sinks import table_paths
from onceflow.spark.ingest import run_ingest
from onceflow.state.standby import Standby
from onceflow.state.status import RunEvent, RunLock
from tests.conftest import ROOT
from tests.exactly_once import assert_exactly_once, assert_ledgers_contiguous, table_rows
from tests.process_list import Cmdlines

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

TOPIC, OUTPUT = "secured-payments", "secured-payments-out"
REFUSAL_SECONDS = 15
# verdicts on which the watcher would act (start a recovery): none may be seen while the standby takes over
PROBLEMS = {"dead", "down", "failed", "stalled", "unknown", "broken", "poisoned", "not_started", "stopped"}
# the shipped pipeline's client settings, as written: every one a ${VAR} the environment fills
SETTINGS = yaml.safe_load((ROOT / "pipelines" / "payments.yaml").read_text())["source"]["kafka"]


@pytest.fixture(scope="module")
def secured(jars, tmp_path_factory) -> Iterator[SimpleNamespace]:
    work = tmp_path_factory.mktemp("secured")
    broker = LocalBroker(home=work / "broker", port=free_port_pair(), secure=True)
    broker.start(timeout=120)
    try:
        file = write_pipeline(
            work / "pipeline",
            broker.bootstrap,
            TOPIC,
            name="secured_payments",
            source={
                "bootstrap_servers": "${ONCEFLOW_KAFKA_BOOTSTRAP}",
                "topic": TOPIC,
                "max_offsets_per_trigger": 1000,
                "available_now_max_offsets_per_trigger": 20_000,
                "kafka": SETTINGS,
            },
            sinks={**table_sinks(work / "pipeline"), "kafka": {"topic": OUTPUT, "partitions": 2}},
            trigger={"processing_time": "500 ms"},
        )
        env = broker.env("onceflow")  # what `eval "$(onceflow kafka env)"` exports; set per test, never here
        pipeline = config.load(file, env={**os.environ, **env})
        admin = broker.client("admin")
        secure_pipeline(admin, pipeline, "onceflow", "producer", partitions=2)
        yield SimpleNamespace(broker=broker, file=file, pipeline=pipeline, env=env, work=work, admin=admin)
    finally:
        broker.stop()


def _events(secured, seed: int, count: int = 2500):
    """Payments events written as the `producer` principal (the pipeline's may only read its source)."""
    return produce(
        secured.broker.client("producer"),
        TOPIC,
        count,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=seed,
        abort_ratio=0.05,
        malformed_ratio=0.02,
    )


class Looks(threading.Thread):
    """`onceflow checkpoint status` (pipeline_health) every 0.5 s: (when, verdict, first reason)."""

    def __init__(self, pipeline):
        super().__init__(daemon=True)
        self.pipeline, self.seen = pipeline, []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            report = pipeline_health(self.pipeline)
            self.seen.append((time.monotonic(), report.verdict, report.reasons[0]))
            self.done.wait(0.5)

    def stop(self) -> list[tuple[float, str, str]]:
        self.done.set()
        self.join(30)
        return self.seen


def test_killed_taken_over_by_its_standby_recovered_and_audited_exactly_once_with_no_secret_anywhere(
    secured, spark, tmp_path
):
    """The driver's JVM is killed (kill -9 of the pid its run.json names, as Airflow's kills are
    measured) mid-stream, the Kafka sink's transactions open or not, while a warm standby
    (`onceflow ingest --standby`, issue 48) waits on the run lock: it must take the lock and commit
    the next batch with no cold start, and no look of `checkpoint status` from the kill on may say
    `dead`, `down` or `failed` (the watcher would start a recovery that stops the standby as it
    takes over). Then the recovery, a resumed run on the session's driver and the audit, all
    logged in as the pipeline's principal. (The standby's proof was a test of its own on a plain
    broker until issue 50; here one stack proves both.)"""
    pipeline, client = secured.pipeline, secured.broker.client("onceflow")
    assert client.secured and client.props["sasl.password"] not in Path(pipeline.file).read_text()
    produced = [_events(secured, 61)]
    with Cmdlines() as cmdlines:
        job = IngestProcess(pipeline, secured.file, tmp_path, env=secured.env).start()
        job.wait_progress(more_than=0)
        (tmp_path / "standby").mkdir()
        standby = IngestProcess(
            pipeline, secured.file, tmp_path / "standby", extra_args=("--standby",), env=secured.env
        ).start()
        standby.wait_until(lambda: Standby(pipeline.state_path).ready() is not None, "the standby to be ready", 300)
        assert job.process.poll() is None, job.tail()
        assert pipeline_health(pipeline).run.standby is not None, "health reports the ready standby"

        looks = Looks(pipeline)
        looks.start()
        produced.append(_events(secured, 62))  # a backlog at the kill: the standby's first batch has work
        jvm = (RunLock(pipeline.state_path).holder() or {})["jvm_pid"]
        before = set(read_checkpoint(pipeline.checkpoint_path).commits)
        killed = time.monotonic()
        os.kill(int(jvm), signal.SIGKILL)
        standby.wait_until(
            lambda: (
                bool(set(read_checkpoint(pipeline.checkpoint_path).commits) - before) and job.process.poll() is not None
            ),
            "the standby's first commit",
            300,
        )
        kill_to_commit = time.monotonic() - killed
        seen = looks.stop()
        started = [e for e in standby.status.events() if e.get("event") == RunEvent.STARTED]
        assert started[-1]["pid"] == standby.process.pid, "the query that runs now is the standby's"
        assert "took the run lock" in standby.log.read_text(errors="replace"), standby.tail()
        # judged from the kill on: before it, a 0.5 s trigger's `stalled` rule (10 triggers) is the primary's
        false = [(round(t - killed, 1), v, why) for t, v, why in seen if v in PROBLEMS and t >= killed]
        assert not false, f"verdicts that would start a recovery: {false[:5]}"
        after = sum(1 for t, _, _ in seen if t >= killed)
        assert after > 0, "no look after the kill"
        print(f"\nstandby: kill → first commit {kill_to_commit:.1f}s; {after} looks after the kill, 0 false")
        standby.wait_until(lambda: pipeline_health(pipeline).lag.total == 0, "the standby to catch up", 300)
        assert standby.terminate() == 0, standby.tail()

        assert recover(pipeline).outcome in ("done", "nothing_to_do"), "recovery from the last committed offsets"
        produced.append(_events(secured, 63))
        resumed = run_ingest(pipeline, spark=spark)  # available-now, on the session's driver
    assert resumed.status == "finished", resumed

    counts = assert_exactly_once(pipeline, client, produced=produced)  # the reader logs in as onceflow
    assert counts["committed"] == sum(p.count("committed") for p in produced)
    assert_ledgers_contiguous(pipeline)
    # the output topic, read at read_committed by an authenticated consumer of our own: each bronze row once
    provenance = Counter(
        (row["_partition"], row["_offset"])
        for _, _, _, value in read_records(client, OUTPUT)
        for row in [json.loads(value or b"{}")]
    )
    bronze = {
        (r["_partition"], r["_offset"]) for r in table_rows(table_paths(pipeline)["bronze"], ["_partition", "_offset"])
    }
    assert set(provenance) == bronze and max(provenance.values()) == 1

    outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
    failed = [c for c in outcome.summary["checks"] if c["status"] != "passed"]
    assert outcome.status == "passed", json.dumps(failed, default=str)[:3000]

    # the canary: neither principal's password in any file these runs wrote, nor on any process list
    secrets = [secured.broker.client(u).props["sasl.password"] for u in ("onceflow", "producer")]
    places = [tmp_path, secured.work / "pipeline", pipeline.state_path, state_dir() / "spark"]  # the standby's too
    files = [f for place in places for f in Path(place).rglob("*") if f.is_file()]
    assert any("eventlog" in f.name or "events" in str(f) for f in files), "the Spark event logs were searched"
    leaks = [str(f) for f in files for s in secrets if s.encode() in f.read_bytes()] + [
        c[:200] for c in cmdlines.seen for s in secrets if s in c
    ]
    assert not leaks, f"a password was found in: {leaks[:10]}"


def _run(args: list[str]) -> tuple[int, str, float]:
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(args)
    return code, " ".join((out.getvalue() + err.getvalue()).split()), time.monotonic() - started


COMMANDS = {
    "ingest": ["ingest", "--mode", "available-now"],
    "produce": ["produce", "--count", "10"],
    "audit": ["audit"],
    "checkpoint status": ["checkpoint", "status"],
}


@pytest.mark.parametrize("case", ["wrong password", "untrusted certificate", "missing ACL"])
def test_each_refusal_says_what_failed_and_the_fix_in_seconds(secured, case, tmp_path, monkeypatch):
    for key, value in secured.env.items():
        monkeypatch.setenv(key, value)
    expected = {
        "wrong password": "refused the login: SASL authentication failed",
        "untrusted certificate": "the broker's certificate is not signed by a CA this client trusts",
        "missing ACL": f"User:onceflow may not READ topic '{TOPIC}'",
    }[case]
    fix = {
        "wrong password": "Fix: check sasl.username/sasl.password",
        "untrusted certificate": "Fix: set ssl.ca.location to the CA that signed the broker's certificate",
        "missing ACL": f"Fix: grant READ on TOPIC '{TOPIC}' to User:onceflow",
    }[case]
    if case == "wrong password":
        monkeypatch.setenv("ONCEFLOW_KAFKA_PASSWORD", "not-the-password")
    elif case == "untrusted certificate":
        other_ca, _ = make_ca(tmp_path / "other-ca")
        monkeypatch.setenv("ONCEFLOW_KAFKA_CA", str(other_ca))
    else:
        assert revoke(secured.admin, "onceflow", "TOPIC", TOPIC, "READ") == 1
    try:
        said = {}
        for name, args in COMMANDS.items():
            code, text, seconds = _run([*args, "--pipeline", str(secured.file)])
            said[name] = (code, text, round(seconds, 1))
            assert seconds <= REFUSAL_SECONDS, (name, said[name])
            if name == "produce" and case == "missing ACL":  # the pipeline's principal never may write its source
                assert code == 2 and f"User:onceflow may not WRITE topic '{TOPIC}'" in text, said[name]
            elif name == "checkpoint status" and case == "missing ACL":  # offsets need DESCRIBE only: still read
                assert code == 0 and "lag" in text and "may not" not in text, said[name]
            elif name == "checkpoint status":  # a report, not a refusal: Kafka's error is in it
                assert expected in text and fix in text, said[name]
            else:
                assert code == 2 and expected in text and fix in text, said[name]
        print(f"\n{case}: " + "; ".join(f"{n} {s}s" for n, (_, _, s) in said.items()))
    finally:
        if case == "missing ACL":
            pipeline = secured.pipeline
            grant_pipeline(secured.admin, "onceflow", TOPIC, OUTPUT, f"onceflow-ledger.{pipeline.name}")
