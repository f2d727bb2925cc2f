"""One audit run, start to finish: fix the committed point, reconcile, validate
with Great Expectations, write the report. Never writes to a table, and starts no
JVM: Kafka is read by a plain consumer, the tables by delta-rs, the comparisons run
in DuckDB and GX on pandas, so an audit costs what its data costs, not a Spark driver.

Exit codes: 0 every check passed, 1 a data problem was found, 2 the audit could
not run (the summary's `reason` says why).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from onceflow.audit import report
from onceflow.config import Pipeline
from onceflow.errors import OnceflowError
from onceflow.facts import read_committed_point
from onceflow.reconcile import AuditScope, AuditStatus, CheckStatus, CommittedPoint, agreement_checks
from onceflow.sink_kinds import DELTA, SinkName

MODES = tuple(s.value for s in AuditScope)


@dataclass
class AuditOutcome:
    status: AuditStatus
    exit_code: int
    run_id: str
    report_dir: Path
    summary: dict


def _notes(point: CommittedPoint, mode: AuditScope, watermark: dict | None) -> list[str]:
    notes = []
    if mode == AuditScope.SINCE_LAST:
        if point.watermark:
            notes.append(
                f"since-last: auditing from the end of the last passed audit {point.watermark.get('run_id')} "
                f"({point.watermark.get('time')})"
            )
        else:
            notes.append("since-last: no passed audit of this topic yet, so everything committed was audited")
    if point.running:
        notes.append("the pipeline's job was running: the audit judged the committed point read at its start")
    for p, (s, e) in sorted(point.not_retained.items()):
        notes.append(
            f"partition {p}: offsets [{s}, {e}) are committed but no longer held by Kafka (retention); "
            "they could not be verified and were left out"
        )
    for loss in point.accepted_loss:
        notes.append(
            f"partition {loss['partition']}: offsets [{loss['start']}, {loss['end']}) were accepted as "
            f"lost by recovery ({loss['sink']} ledger)"
        )
    for name, sink in point.sinks.items():
        if sink.foreign_commits:
            ops = ", ".join(f"v{c.get('version')} {c.get('operation')}" for c in sink.foreign_commits[:10])
            notes.append(
                f"{name}: {len(sink.foreign_commits)} commit(s) without a ledger entry (not written by the "
                f"streaming job): {ops}"
            )
        if sink.backfills:
            rows = sum(b["rows"] for b in sink.backfills)
            versions = ", ".join(f"v{b['version']}" for b in sink.backfills[:10])
            notes.append(
                f"{name}: {len(sink.backfills)} backfill commit(s) re-wrote {rows} row(s) inside the "
                f"committed range (versions {versions})"
            )
        if not sink.exists:
            notes.append(f"{name}: the table {sink.path} does not exist")
    return notes


def _cdc_notes(rows, current) -> list[str]:
    """What a change stream's audit saw that is no failure: Debezium's tombstones, tombstones
    purged past their retention, keys a late older change brought back after that."""
    notes = []
    if rows.tombstones:
        notes.append(
            f"{rows.tombstones} Debezium tombstone(s) (the null-value record after a delete) in the audited "
            "ranges: no-ops, expected in neither bronze nor quarantine"
        )
    if current is not None and current.purged:
        notes.append(f"current: {current.purged} tombstone(s) of the fold were purged past tombstone_retention")
    if current is not None and current.revived:
        notes.append(
            f"current: {current.revived} deleted key(s) came back through a change older than their delete that "
            "arrived after the tombstone was purged (docs/cdc.md#tombstones-and-retention)"
        )
    return notes


def _datasets(pipeline: Pipeline, rows, aggs, bronze, quarantine, current=None, current_table=None) -> dict:
    """Each dataset Great Expectations validates, with its suite: the sinks' audited rows (Arrow
    tables) and the two small tables the reconciliation built (per partition; per finding)."""
    from onceflow.audit import suites, validate
    from onceflow.audit.validate import Rows

    recon = Rows.from_dicts(suites.RECONCILIATION_DDL, rows.partitions)
    found = rows.findings + aggs.findings + (current.findings if current is not None else [])
    findings = Rows.from_dicts(suites.FINDINGS_DDL, found)
    tables = {  # each Delta sink's audited table and its suite, when the audit read one
        SinkName.BRONZE: (bronze, suites.bronze_suite(pipeline, rows.totals["source_valid"])),
        SinkName.QUARANTINE: (quarantine, suites.quarantine_suite(rows.totals["source_malformed"], pipeline)),
    }
    if aggs.table is not None:
        tables[SinkName.AGGREGATES] = (aggs.table, suites.aggregates_suite(pipeline, aggs.recomputed_rows))
    if current is not None and current_table is not None:
        tables[SinkName.CURRENT] = (
            current_table,
            suites.current_suite(pipeline, current.live_rows, current.tombstones),
        )
    out: dict[str, tuple] = {
        name: validate.sampled(*tables[name]) for name in DELTA if name in tables
    }  # in write order
    out["reconciliation"] = (recon, suites.reconciliation_suite())
    out["findings"] = (findings, suites.findings_suite())
    return out


# what an audit holds at its peak whatever its size, beside its database's memory limit
# (duck.spilling): the chunks being read and judged, the reference judge's shares, the consumer's
# prefetch (RSS 1.9 GB at 5 M offsets with a 512 MB limit, 2026-12-01; docs/audit.md#cost)
WORKING_SET = 1_400 * 2**20
# what the database writes to disk per audited offset past its memory limit (3.4 GB at 5 M)
SPILL_BYTES_PER_OFFSET = 700


def fits_here(name: str, span: int, available: int | None = None, disk: int | None = None) -> None:
    """Refuse, before reading a record, an audit this machine has not the room for (`available`:
    psutil's free memory, `disk`: free bytes where the database spills; in bytes), said with the
    fix, instead of a kill mid-audit. Its memory does not grow with the offsets; its spill does."""
    import shutil
    import tempfile

    import psutil

    from onceflow.audit.duck import MEMORY_ENV, memory_limit_mb

    gb = 1024**3
    free = psutil.virtual_memory().available if available is None else available
    limit = memory_limit_mb(free) * 2**20
    if WORKING_SET + limit > free:
        raise OnceflowError(
            f"{name}: an audit needs about {(WORKING_SET + limit) / gb:.1f} GB of memory whatever its size "
            f"({WORKING_SET / gb:.1f} GB to read and judge, {limit / gb:.1f} GB for its database, which spills to "
            f"disk past that) and {free / gb:.1f} GB is free. Fix: run it where more memory is free, or set "
            f"{MEMORY_ENV} lower (at least 512) (docs/audit.md#cost)"
        )
    spill = max(0, span * SPILL_BYTES_PER_OFFSET - limit)
    room = shutil.disk_usage(tempfile.gettempdir()).free if disk is None else disk
    if spill > room:
        raise OnceflowError(
            f"{name}: auditing {span:,} offsets spills about {spill / gb:.1f} GB to {tempfile.gettempdir()} "
            f"(about {SPILL_BYTES_PER_OFFSET:,} bytes an offset past its {limit / gb:.1f} GB of memory) and "
            f"{room / gb:.1f} GB is free there. Fix: point TMPDIR at a disk with room, or audit with --since-last "
            "more often (schedule the audit DAG hourly, or after each batch run), so that each audit holds less "
            "(docs/audit.md#cost)"
        )


def _warm_great_expectations() -> None:
    """Import Great Expectations (about 2.5 s of a fresh process) in a thread while the rows are read
    and compared, which spend their time in librdkafka, DuckDB and delta-rs rather than holding the
    GIL; its first use waits for the import to finish, as any import would."""
    import contextlib
    import threading

    def warm() -> None:
        with contextlib.suppress(Exception):  # the audit's own import of it reports a failure
            import onceflow.audit.suites  # noqa: F401 -- great_expectations and its expectations

    threading.Thread(target=warm, name="gx-import", daemon=True).start()


def run_audit(
    pipeline: Pipeline,
    mode: str = AuditScope.FULL,
    report_dir: str | Path | None = None,
    log: Callable[[str], None] = lambda msg: None,
) -> AuditOutcome:
    """Audit `pipeline`; always writes a report (even when the audit could not run)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    scope = AuditScope(mode)
    root = report.report_root(report_dir)
    run_id = report.new_run_id()
    directory = report.run_dir(root, pipeline.name, run_id)
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    summary: dict = {
        "schema_version": report.SCHEMA_VERSION,
        "pipeline": pipeline.name,
        "run_id": run_id,
        "status": AuditStatus.ERROR,
        "exit_code": 2,
        "mode": mode,
        "reason": None,
        "topic": pipeline.source.topic,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "finished_at": None,
        "report_dir": str(directory),
        "committed_point": None,
        "ranges": [],
        "counts": {},
        "partitions": [],
        "checks": [],
        "failed_checks": [],
        "timings": timings,
        "throughput_rows_per_second": None,
        "data_docs": {},
        "notes": [],
    }

    def lap(name: str, since: float) -> float:
        now = time.monotonic()
        timings[name] = round(now - since, 3)
        return now

    reconciler = None
    try:
        watermark = report.read_watermark(root, pipeline.name) if scope == AuditScope.SINCE_LAST else None
        if watermark and watermark.get("topic") != pipeline.source.topic:
            summary["notes"].append(
                f"the last watermark is for topic {watermark.get('topic')!r}, not {pipeline.source.topic!r}: ignored"
            )
            watermark = None
        log(f"{pipeline.name}: reading the committed point (checkpoint, ledgers, Kafka)")
        point = read_committed_point(pipeline, scope, watermark)
        t = lap("committed_point", t0)
        summary["committed_point"] = point.as_dict()
        summary["ranges"] = [{"partition": p, "start": s, "end": e} for p, (s, e) in point.ranges().items()]
        summary["notes"] += _notes(point, scope, watermark)
        span = sum(e - s for s, e in point.ranges().values())
        log(f"{pipeline.name}: auditing {len(summary['ranges'])} partition range(s), {span} offsets")
        fits_here(pipeline.name, span)

        from onceflow.audit.aggregates import reconcile_aggregates
        from onceflow.audit.rows import RowReconciler
        from onceflow.audit.validate import run_suites

        _warm_great_expectations()

        reconciler = RowReconciler.read(pipeline, point)  # the audited rows of the sinks, read once
        rows = reconciler.run()
        t = lap("reconcile_rows", t)
        log(f"{pipeline.name}: rows reconciled ({rows.totals['source_records']} committed records)")
        aggs = reconcile_aggregates(pipeline, point, reconciler.bronze)
        t = lap("reconcile_aggregates", t)
        checks = [*agreement_checks(point), *rows.checks, aggs.check]
        current, current_table = None, None
        if pipeline.sinks.current is not None:  # the keyed table vs the fold of its bronze changes (docs/cdc.md)
            from onceflow.audit.current import reconcile_current
            from onceflow.audit.sink_tables import read_table

            current = reconcile_current(pipeline, point)
            checks += current.checks
            view = point.sinks.get(SinkName.CURRENT)
            if view is not None and view.exists:
                current_table = read_table(pipeline.resolve(pipeline.sinks.current.path), view.version, None)
            t = lap("reconcile_current", t)
            log(f"{pipeline.name}: keyed table compared ({current.live_rows} rows, {current.tombstones} tombstones)")
        summary["notes"] += _cdc_notes(rows, current)
        if pipeline.sinks.kafka is not None:  # the Kafka output topic, at read_committed (docs/kafka-sink.md)
            from onceflow.audit.kafka_output import output_checks

            checks += output_checks(pipeline)
            t = lap("kafka_output", t)
        datasets = _datasets(pipeline, rows, aggs, reconciler.bronze, reconciler.quarantine, current, current_table)
        summary["notes"] += [
            f"Great Expectations validated an even sample of {name}: {cut['rows']:,} of its {cut['of']:,} rows "
            f"(every {cut['every']}th); the row reconciliation checked every row's values against the source"
            for name, (_, suite) in datasets.items()
            if (cut := (suite.meta or {}).get("sample"))
        ]
        log(f"{pipeline.name}: running Great Expectations ({', '.join(datasets)})")
        gx = run_suites(datasets, directory, run_id)
        t = lap("great_expectations", t)
        checks += gx.checks
        failed = [c.name for c in checks if c.status == CheckStatus.FAILED]
        summary.update(
            status=AuditStatus.FAILED if failed else AuditStatus.PASSED,
            exit_code=1 if failed else 0,
            checks=[c.as_dict() for c in checks],
            failed_checks=failed,
            partitions=rows.partitions,
            counts={
                **rows.totals,
                "offsets_audited": span,
                "partitions_audited": len(summary["ranges"]),
                "aggregate_windows": aggs.recomputed_rows,
                "judged_columnar": rows.judged_columnar,
            },
            data_docs={"index": gx.docs_index, "suites": gx.suite_pages, "statistics": gx.statistics},
        )
        if not failed:
            summary["watermark"] = report.write_watermark(root, pipeline.name, run_id, point.topic, point.end)
    except OnceflowError as exc:
        summary["reason"] = str(exc)
    except Exception as exc:  # Spark/Kafka/GX failures: reported, with the trace kept beside the report
        (directory / "error.txt").write_text(traceback.format_exc())
        summary["reason"] = (
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:2000] if str(exc) else ''} "
            f"(full trace: {directory / 'error.txt'})"
        )
    finally:
        if reconciler is not None:
            reconciler.release()
    return _finish(root, directory, pipeline, run_id, summary, t0, timings)


def _finish(
    root: Path, directory: Path, pipeline: Pipeline, run_id: str, summary: dict, t0: float, timings: dict
) -> AuditOutcome:
    from onceflow.audit.html import write_page

    t = time.monotonic()
    summary["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    timings["total"] = round(t - t0, 3)
    records = (summary.get("counts") or {}).get("source_records")
    if records is not None and timings["total"] > 0:
        summary["throughput_rows_per_second"] = round(records / timings["total"], 1)
    summary["batches"] = report.recent_batches(pipeline.state_path, pipeline.name)
    # through its model (report.AuditSummary): a summary that breaks its contract fails here, not in a reader
    typed = report.AuditSummary.model_validate(summary)
    report.write_summary(directory, typed.as_json())
    write_page(directory, typed.as_json())
    report.point_latest(root, pipeline.name, run_id)
    timings["report"] = round(time.monotonic() - t, 3)
    summary = report.AuditSummary.model_validate({**summary, "timings": timings}).as_json()
    report.write_summary(directory, summary)
    return AuditOutcome(AuditStatus(summary["status"]), summary["exit_code"], run_id, directory, summary)
