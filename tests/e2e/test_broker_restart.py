"""Exactly-once through a broker restart mid-stream, then a hard crash between the sinks.

On the sensors pipeline (pipelines/sensors.yaml), the second shipped shape: the
hard-kill schedule of test_hard_kills.py runs on payments, this proof on sensors,
so both declared shapes go through faults without doubling a kill schedule (issue
24). Its own broker (the test stops and restarts it), in its own module so that
`make test`'s two workers run it beside the kill schedule.
"""

from __future__ import annotations

import time

import pytest

from devkit.driver import IngestProcess
from devkit.pipelines import SENSORS_AGGREGATES, SENSORS_SCHEMA, SENSORS_SCHEMA_BODY, pipeline_file
from onceflow import faults
from onceflow.generate.producer import produce
from onceflow.local.broker import LocalBroker, free_port_pair
from onceflow.spark.ingest import run_ingest
from tests.exactly_once import assert_exactly_once, assert_ledgers_contiguous, next_batch

pytestmark = pytest.mark.e2e

PARTITIONS = 4


def test_broker_restart_mid_stream(jars, spark, tmp_path):
    """The sensors pipeline (pipelines/sensors.yaml: a double with bounds, a nested event time, no
    event id, min/max aggregates) through a broker restart and a hard crash between its sinks: the
    second declared shape under the faults, sharing this test's stack rather than doubling the
    kill schedule above (issue 24)."""
    broker = LocalBroker(home=tmp_path / "broker", port=free_port_pair())
    broker.start(timeout=120)
    try:
        topic = "restarted"
        folder = tmp_path / "pipeline"
        file, pipeline = pipeline_file(
            folder,
            broker.bootstrap,
            topic,
            max_offsets=1500,
            trigger={"processing_time": "500 ms"},
            schema=SENSORS_SCHEMA_BODY,
            aggregates=SENSORS_AGGREGATES,
        )
        before = produce(
            broker.bootstrap,
            topic,
            8000,
            schema=SENSORS_SCHEMA,
            partitions=PARTITIONS,
            seed=5,
            abort_ratio=0.06,
            malformed_ratio=0.015,
        )
        job = IngestProcess(pipeline, file, tmp_path).start()
        job.wait_progress(more_than=0)

        broker.stop()  # mid-stream: the job is running, with a backlog left to read
        time.sleep(3)  # the outage itself (a deliberate 3 s without a broker), not a wait for anything
        broker.start(timeout=120)
        after = produce(
            broker.bootstrap,
            topic,
            8000,
            schema=SENSORS_SCHEMA,
            partitions=PARTITIONS,
            seed=6,
            abort_ratio=0.06,
            malformed_ratio=0.015,
        )
        if job.process.poll() is None:  # the job survived the outage: let it catch up, then stop it cleanly
            seen = job.progress_count()
            job.wait_progress(more_than=seen)
            assert job.terminate() == 0, job.tail()
        # then a hard crash on this shape too, in the window between the sinks' commits (bronze
        # written, quarantine and aggregates not): more data, so the crashing run has a batch to die in
        more = produce(
            broker.bootstrap,
            topic,
            2000,
            schema=SENSORS_SCHEMA,
            partitions=PARTITIONS,
            seed=7,
            abort_ratio=0.06,
            malformed_ratio=0.015,
        )
        (tmp_path / "crash").mkdir()
        crash = IngestProcess(pipeline, file, tmp_path / "crash", mode="available-now")
        crash.start(fault=f"between_sinks@{next_batch(pipeline.checkpoint_path)}")
        assert crash.wait_exit(timeout=600) == faults.EXIT_CODE, crash.tail()
        # the catch-up is killed by nothing: the session's warm driver runs it (issue 19)
        final = run_ingest(pipeline, spark=spark)
        assert final.status == "finished", final

        counts = assert_exactly_once(pipeline, broker.bootstrap, produced=[before, after, more])
        assert counts["committed"] == sum(p.count("committed") for p in (before, after, more))
        assert_ledgers_contiguous(pipeline)
    finally:
        broker.stop()
