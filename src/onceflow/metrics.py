"""Prometheus metrics of pipelines, read from their health reports each time they are scraped.

One exporter (`onceflow metrics serve`) for a machine's pipelines, not an endpoint in each driver:
the health report (onceflow.health) already joins what the checkpoint, the status log, the sinks'
Delta logs and Kafka say, and it says it of a driver that is dead too, whose own endpoint would have
gone with it; and nothing is pushed, so no pushgateway holds stale values. A scrape costs what
`onceflow checkpoint status` costs per pipeline (no JVM), and the last audit's outcome is read
from its report (onceflow.audit.report.latest_summary).

Names follow Prometheus's conventions: `onceflow_` prefix, base units (`_seconds`), times as Unix
timestamps (`_timestamp_seconds`, the age is `time() - x` in PromQL), Kafka positions in
`_offsets`. Each metric is one row of METRICS; docs/operations.md's table lists the same rows
(tests/unit/test_metrics.py keeps them equal).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from onceflow.verdicts import ALERTS, STATUS_VERDICTS

if TYPE_CHECKING:
    from onceflow.config import Pipeline
    from onceflow.health import HealthReport

# a sample: its labels beyond `pipeline`, and its value
Sample = tuple[dict[str, str], float]


@dataclass(frozen=True)
class Metric:
    """One metric family: its name, help text, labels beyond `pipeline`, and its samples of a report.
    A name ending `_total` is a counter (it only grows, but for a reset: a table's old history
    cleaned up); every other is a gauge."""

    name: str
    help: str
    labels: tuple[str, ...]
    samples: Callable[[HealthReport], Iterable[Sample]]

    @property
    def counter(self) -> bool:
        return self.name.endswith("_total")

    def family(self) -> GaugeMetricFamily | CounterMetricFamily:
        labels = ["pipeline", *self.labels]
        if self.counter:  # the client adds `_total` to a counter's samples
            return CounterMetricFamily(self.name.removesuffix("_total"), self.help, labels=labels)
        return GaugeMetricFamily(self.name, self.help, labels=labels)


def _one(value: float | int | None) -> list[Sample]:
    return [] if value is None else [({}, float(value))]


def _flag(value: bool | None) -> list[Sample]:
    return [] if value is None else [({}, 1.0 if value else 0.0)]


METRICS: tuple[Metric, ...] = (
    Metric(
        "onceflow_pipeline_verdict",
        "1 for the pipeline's verdict (onceflow checkpoint status), 0 for every other verdict",
        ("verdict",),
        lambda r: [({"verdict": str(v)}, 1.0 if v == r.verdict else 0.0) for v in STATUS_VERDICTS],
    ),
    Metric(
        "onceflow_pipeline_alerting",
        "1 when the verdict is an outage or a fault (exit code non-zero, red on the Airflow page)",
        (),
        lambda r: _flag(r.verdict in ALERTS),
    ),
    Metric("onceflow_pipeline_running", "1 when a process holds the run lock", (), lambda r: _flag(r.run.running)),
    Metric(
        "onceflow_pipeline_poisoned",
        "1 when the last runs all failed on the same batch (a restart cannot help)",
        (),
        lambda r: _flag(r.run.poisoned is not None),
    ),
    Metric(
        "onceflow_pipeline_standby_ready",
        "1 when a warm standby waits on the run lock",
        (),
        lambda r: _flag(r.run.standby is not None),
    ),
    Metric(
        "onceflow_kafka_lag_offsets",
        "the last stable offset minus the job's committed offset, per partition",
        ("partition",),
        lambda r: [({"partition": str(p.partition)}, float(p.lag)) for p in r.partitions if p.lag is not None],
    ),
    Metric(
        "onceflow_kafka_committed_offset",
        "the next offset the job reads, per partition (the checkpoint's last committed batch)",
        ("partition",),
        lambda r: [
            ({"partition": str(p.partition)}, float(p.committed)) for p in r.partitions if p.committed is not None
        ],
    ),
    Metric(
        "onceflow_kafka_latest_offset",
        "Kafka's last stable offset (read_committed), per partition",
        ("partition",),
        lambda r: [({"partition": str(p.partition)}, float(p.latest)) for p in r.partitions if p.latest is not None],
    ),
    Metric(
        "onceflow_last_committed_batch",
        "the id of the last batch the checkpoint committed",
        (),
        lambda r: _one(r.checkpoint.last_committed),
    ),
    Metric(
        "onceflow_last_commit_timestamp_seconds",
        "when the checkpoint's last commit was written",
        (),
        lambda r: _one(r.checkpoint.commit_epoch),
    ),
    Metric(
        "onceflow_heartbeat_timestamp_seconds",
        "the running driver's last heartbeat",
        (),
        lambda r: _one(r.run.beat_epoch),
    ),
    Metric(
        "onceflow_batch_duration_seconds",
        "the newest run's last batch, start to commit",
        (),
        lambda r: _one(None if r.run.last_batch_duration_ms is None else r.run.last_batch_duration_ms / 1000),
    ),
    Metric(
        "onceflow_input_rows_per_second",
        "records read per second over the newest run's last batches",
        (),
        lambda r: _one(r.run.input_rows_per_second),
    ),
    Metric(
        "onceflow_sink_last_batch",
        "the last batch each sink's ledger holds",
        ("sink",),
        lambda r: [({"sink": name}, float(s.last_batch)) for name, s in r.sinks.items() if s.last_batch is not None],
    ),
    Metric(
        "onceflow_sink_trailing_batches",
        "batches a following sink (the aggregates, the keyed table) has still to merge",
        ("sink",),
        lambda r: [
            ({"sink": name}, float(s.trails_batches)) for name, s in r.sinks.items() if s.trails_batches is not None
        ],
    ),
    Metric(
        "onceflow_sink_rows_total",
        "rows each Delta sink took, by its ledger's entries",
        ("sink",),
        lambda r: [({"sink": name}, float(s.rows)) for name, s in r.sinks.items() if s.rows is not None],
    ),
    Metric(
        "onceflow_quarantine_rows_total",
        "rows the quarantine took, per reason (`unrecorded`: batches written before reasons were counted)",
        ("reason",),
        lambda r: [
            ({"reason": reason}, float(n)) for s in r.sinks.values() for reason, n in (s.rows_by_reason or {}).items()
        ],
    ),
)
RECOVERY_METRIC = (
    "onceflow_recoveries_total",
    "`onceflow recover` runs of the pipeline (Airflow's recover DAG or by hand), per outcome",
)
AUDIT_METRICS = (
    ("onceflow_audit_passed", "1 when the newest audit passed, 0 when it failed or could not run"),
    ("onceflow_audit_timestamp_seconds", "when the newest audit finished"),
)
READ_METRIC = ("onceflow_health_read_seconds", "how long reading the pipeline's health took at this scrape")


def recoveries(pipeline: Pipeline) -> dict[str, int]:
    """The pipeline's recovery records per outcome (onceflow.recovery.record)."""
    import json

    from onceflow.recovery.record import list_records, read_record

    out: dict[str, int] = {}
    for path in list_records(pipeline.state_path):
        try:
            outcome = str(read_record(path).get("outcome"))
        except (OSError, json.JSONDecodeError):  # one being rewritten right now
            outcome = "unreadable"
        out[outcome] = out.get(outcome, 0) + 1
    return out


def last_audit(reports: Path, pipeline: str) -> tuple[bool, float] | None:
    """(passed, finished at) of the pipeline's newest audit report, None when there is none."""
    from onceflow.audit.report import latest_summary
    from onceflow.health import iso_epoch

    summary = latest_summary(reports / pipeline)
    finished = iso_epoch(summary.get("finished_at")) if summary else None
    return None if summary is None or finished is None else (summary.get("status") == "passed", finished)


class HealthCollector(Collector):
    """Collects METRICS from a fresh health report of each pipeline at every scrape."""

    def __init__(self, pipelines: Callable[[], list[Pipeline]], reports: Path):
        self.pipelines = pipelines
        self.reports = reports

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        from onceflow.health import pipeline_health

        families = [m.family() for m in METRICS]
        recovered = CounterMetricFamily(
            RECOVERY_METRIC[0].removesuffix("_total"), RECOVERY_METRIC[1], labels=["pipeline", "outcome"]
        )
        audit = [GaugeMetricFamily(name, text, labels=["pipeline"]) for name, text in AUDIT_METRICS]
        read = GaugeMetricFamily(*READ_METRIC, labels=["pipeline"])
        for pipeline in self.pipelines():
            started = time.monotonic()
            report = pipeline_health(pipeline)
            read.add_metric([pipeline.name], time.monotonic() - started)
            for metric, family in zip(METRICS, families, strict=True):
                for labels, value in metric.samples(report):
                    family.add_metric([pipeline.name, *(labels[k] for k in metric.labels)], value)
            for outcome, n in recoveries(pipeline).items():
                recovered.add_metric([pipeline.name, outcome], n)
            found = last_audit(self.reports, pipeline.name)
            if found is not None:
                audit[0].add_metric([pipeline.name], 1.0 if found[0] else 0.0)
                audit[1].add_metric([pipeline.name], found[1])
        yield from (*families, recovered, *audit, read)


def registry_of(pipelines: Callable[[], list[Pipeline]], reports: Path) -> CollectorRegistry:
    """A registry holding only onceflow's metrics (no process or Python metrics of the exporter)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HealthCollector(pipelines, reports))
    return registry
