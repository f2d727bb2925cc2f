"""Exactly-once under hard kills and a broker restart (issue 3's proof).

The shape of Kafka's transactions system test: seed known records (with aborted
transactions and malformed records) while the stream runs, kill the driver hard
— at random moments and once in each fault-injection window — restart from the
same checkpoint each time, then assert the tables hold every committed record
exactly once, nothing from an aborted transaction, every malformed record in
quarantine with its reason, and aggregates equal to a recomputation from bronze.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from onceflow import faults
from onceflow.kafka.broker import LocalBroker
from onceflow.kafka.producer import produce
from onceflow.ledger import read_ledger
from onceflow.sinks import table_paths
from onceflow.kafka.broker import free_port_pair
from tests.exactly_once import assert_exactly_once
from tests.ingest_process import IngestProcess
from tests.pipeline_helpers import PAYMENTS_SCHEMA, pipeline_file

pytestmark = pytest.mark.e2e

EVENTS, PARTITIONS = 52_000, 4
SEED = 20261122


def _next_batch(checkpoint: str) -> int:
    """The id of the next batch Spark will plan (a fault aimed there must fire)."""
    planned = [int(f.name) for f in Path(checkpoint, "offsets").glob("[0-9]*")]
    return max(planned, default=-1) + 1


class Producer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, count: int, rate: float, seed: int):
        super().__init__(daemon=True)
        self.args = (bootstrap, topic, count)
        self.kw = dict(schema=PAYMENTS_SCHEMA, partitions=PARTITIONS, rate=rate, seed=seed, abort_ratio=0.06,
                       malformed_ratio=0.015)
        self.summary = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.summary = produce(*self.args, **self.kw)
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc

    def result(self, timeout: float = 600):
        self.join(timeout)
        assert not self.is_alive(), f"the producer did not finish within {timeout}s"
        assert self.error is None, f"the producer failed: {self.error}"
        return self.summary


def _assert_ledgers_contiguous(pipeline) -> None:
    for name, path in table_paths(pipeline).items():
        assert read_ledger(path).problems() == [], f"{name} ledger is not contiguous"


def test_hard_kills_in_every_window_and_at_random(broker, topic, tmp_path):
    rng = random.Random(SEED)
    folder = tmp_path / "pipeline"
    file, pipeline = pipeline_file(folder, broker.bootstrap, topic,
                                   # the final catch-up (available-now) takes the backlog in large batches
                                   max_offsets=2500, available_now_max_offsets=60000,
                                   trigger={"processing_time": "500 ms"})
    producer = Producer(broker.bootstrap, topic, EVENTS, rate=700, seed=SEED)
    producer.start()
    job = IngestProcess(pipeline, file, tmp_path)

    # one crash inside each exactly-once window, aimed at the next batch to be planned
    for point in faults.POINTS:
        target = _next_batch(pipeline.checkpoint_path)
        job.start(fault=f"{point}@{target}")
        code = job.wait_exit(timeout=600)
        assert code == faults.EXIT_CODE, f"expected the injected crash at {point}@{target}, got exit {code}:\n{job.tail()}"

    # then kill -9 at random moments, each after the run has committed something
    for _ in range(3):
        seen = job.progress_count()
        job.start()
        job.wait_progress(more_than=seen)
        time.sleep(rng.uniform(0.0, 2.5))
        job.kill9()

    summary = producer.result()
    assert summary.count("aborted") >= 0.04 * EVENTS and summary.count("committed_malformed") >= 0.01 * EVENTS * 0.9
    final = IngestProcess(pipeline, file, tmp_path, mode="available-now")
    final.start()
    assert final.wait_exit(timeout=600) == 0, final.tail()

    counts = assert_exactly_once(pipeline, broker.bootstrap, produced=[summary])
    assert counts["committed"] == summary.count("committed")
    _assert_ledgers_contiguous(pipeline)
    assert job.runs == len(faults.POINTS) + 3


def test_broker_restart_mid_stream(jars, tmp_path):
    broker = LocalBroker(home=tmp_path / "broker", port=free_port_pair())
    broker.start(timeout=120)
    try:
        topic = "restarted"
        folder = tmp_path / "pipeline"
        file, pipeline = pipeline_file(folder, broker.bootstrap, topic, max_offsets=1500,
                                       trigger={"processing_time": "500 ms"})
        before = produce(broker.bootstrap, topic, 8000, schema=PAYMENTS_SCHEMA, partitions=PARTITIONS, seed=5,
                         abort_ratio=0.06, malformed_ratio=0.015)
        job = IngestProcess(pipeline, file, tmp_path).start()
        job.wait_progress(more_than=0)

        broker.stop()  # mid-stream: the job is running, with a backlog left to read
        time.sleep(3)
        broker.start(timeout=120)
        after = produce(broker.bootstrap, topic, 8000, schema=PAYMENTS_SCHEMA, partitions=PARTITIONS, seed=6,
                        abort_ratio=0.06, malformed_ratio=0.015)
        if job.proc.poll() is None:  # the job survived the outage: let it catch up, then stop it cleanly
            seen = job.progress_count()
            job.wait_progress(more_than=seen)
            assert job.terminate() == 0, job.tail()
        final = IngestProcess(pipeline, file, tmp_path, mode="available-now").start()
        assert final.wait_exit(timeout=600) == 0, final.tail()

        counts = assert_exactly_once(pipeline, broker.bootstrap, produced=[before, after])
        assert counts["committed"] == before.count("committed") + after.count("committed")
        _assert_ledgers_contiguous(pipeline)
    finally:
        broker.stop()
