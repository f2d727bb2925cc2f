"""A second shipped pipeline of a different shape: sensor readings (pipelines/sensors.yaml).

Doubles with bounds, an enum unit, an event time nested at $.meta.ts, an optional
firmware field with a pattern, no event id, aggregates per (site, device) per 10 s
with count/sum/min/max. Every generated malformed kind lands in quarantine with its
reason; the aggregates equal a recomputation; the audit passes (and says the
event-id check was not made); two pipelines of different shapes stream at once on
one broker, each with its own checkpoint, tables, status and lock, and both audit green.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from devkit.driver import IngestProcess
from devkit.pipelines import PAYMENTS_SCHEMA, aggregates_of, pipeline_file, write_pipeline
from onceflow import config
from onceflow.audit.run import run_audit
from onceflow.generate.producer import VALID, produce
from onceflow.generate.records import Generator
from tests.exactly_once import assert_exactly_once

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)

ROOT = Path(__file__).resolve().parents[2]
SENSORS = yaml.safe_load((ROOT / "pipelines" / "sensors.yaml").read_text())
SENSORS_AGGREGATES = {k: v for k, v in SENSORS["sinks"]["aggregates"].items() if k != "path"}


def sensors_file(folder: Path, bootstrap: str, topic: str, **overrides) -> Path:
    return write_pipeline(
        folder, bootstrap, topic, schema=SENSORS["schema"], aggregates=SENSORS_AGGREGATES, **overrides
    )


def test_two_pipelines_of_different_shapes_stream_at_once_and_both_audit_green(broker, spark, tmp_path):
    """Each in its own process (its own Spark app), as two users' streams on one machine; the sensors
    topic carries every malformed kind its schema allows, and each must land with its reason."""
    pay_file, payments = pipeline_file(
        tmp_path / "payments", broker.bootstrap, "t-two-payments", name="two_payments", max_offsets=400
    )
    sen_file = sensors_file(
        tmp_path / "sensors", broker.bootstrap, "t-two-sensors", name="two_sensors", max_offsets=400
    )
    sensors = config.load(sen_file)
    produced = {
        "two_payments": [
            produce(
                broker.bootstrap,
                payments.source.topic,
                800,
                schema=PAYMENTS_SCHEMA,
                partitions=2,
                seed=1,
                malformed_ratio=0.05,
                abort_ratio=0.1,
            )
        ],
        # every malformed kind the sensors schema allows, often enough to see each
        "two_sensors": [
            produce(
                broker.bootstrap,
                sensors.source.topic,
                800,
                schema=sensors.schema,
                partitions=3,
                seed=2,
                malformed_ratio=0.3,
                abort_ratio=0.1,
                group_by=aggregates_of(sensors).group_by,
            )
        ],
    }
    kinds = {r.kind for r in produced["two_sensors"][0].records if r.kind != VALID}
    assert kinds == set(Generator(sensors.schema).kinds())
    # --until-idle ends each job once it has caught up; --max-seconds only bounds a hang (a job that
    # hits it ends cleanly with records left, which the loss check below would then report)
    jobs = [
        IngestProcess(p, f, tmp_path / p.name, extra_args=("--until-idle", "10", "--max-seconds", "900"))
        for p, f in ((payments, pay_file), (sensors, sen_file))
    ]
    for job in jobs:
        job.log_dir.mkdir(parents=True, exist_ok=True)
        job.start()
    for job in jobs:
        job.wait_progress(0, timeout=240)
    # more data while both run
    produced["two_payments"].append(
        produce(broker.bootstrap, payments.source.topic, 300, schema=PAYMENTS_SCHEMA, partitions=2, seed=3)
    )
    produced["two_sensors"].append(
        produce(
            broker.bootstrap,
            sensors.source.topic,
            300,
            schema=sensors.schema,
            partitions=3,
            seed=4,
            malformed_ratio=0.3,
            group_by=aggregates_of(sensors).group_by,
        )
    )
    for job in jobs:
        assert job.wait_exit(960) == 0, job.tail()
    assert payments.state_path != sensors.state_path and payments.checkpoint_path != sensors.checkpoint_path
    for pipeline in (payments, sensors):
        # each record in bronze or quarantine once, each malformed one with its reason, aggregates recomputed
        counts = assert_exactly_once(pipeline, broker.bootstrap, produced=produced[pipeline.name])
        assert counts["committed"] >= 900 and counts["quarantine"] > 0, counts
        outcome = run_audit(pipeline, report_dir=tmp_path / "reports")
        checks = {c["name"]: c for c in outcome.summary["checks"]}
        assert outcome.status == "passed", (pipeline.name, outcome.summary["failed_checks"])
        assert checks["aggregates"]["status"] == "passed" and outcome.summary["counts"]["aggregate_windows"] > 0
    assert (
        checks["duplicate_event_ids"]["status"] == "skipped"
        and "no event_id" in checks["duplicate_event_ids"]["detail"]
    ), "sensors declare no event_id: the audit says the check was not made"
