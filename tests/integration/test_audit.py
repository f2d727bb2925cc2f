"""The audit against a real pipeline run: real broker, Spark, Delta, GX, Chromium.

One pipeline is produced and ingested once per module (`run_ingest`,
available-now); each test audits its own copy of the tables and checkpoint, so
tampering with one copy never leaks into another test.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from devkit.pipelines import PAYMENTS_SCHEMA, aggregates_of, write_pipeline
from onceflow import config
from onceflow.audit.run import run_audit
from onceflow.cli import main
from onceflow.generate.producer import VALID, produce
from onceflow.kafka.admin import watermarks
from onceflow.ledger import read_ledger
from onceflow.spark.ingest import run_ingest
from onceflow.web.datadocs import remote_addresses

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "schemas" / "audit-summary.schema.json").read_text())
PARTITIONS = 3


@pytest.fixture(scope="module")
def ingested(broker, spark, tmp_path_factory):
    """A topic with aborted and malformed records, ingested exactly once by the real job."""
    folder = tmp_path_factory.mktemp("audit-pipeline")
    topic = f"t-audit-{folder.name}"
    produced = produce(
        broker.bootstrap,
        topic,
        2400,
        schema=PAYMENTS_SCHEMA,
        partitions=PARTITIONS,
        seed=11,
        abort_ratio=0.1,
        malformed_ratio=0.05,
        txn_size=50,
    )
    pipeline = config.load(write_pipeline(folder, broker.bootstrap, topic, max_offsets=1500))
    result = run_ingest(pipeline, spark=spark)
    assert result.status == "finished" and result.batches >= 2, result
    # the topic's end offsets as ingested: later tests produce more into the same topic
    ends = {p: high for p, (_low, high) in watermarks(broker.bootstrap, topic).items()}
    return {"folder": folder, "topic": topic, "produced": produced, "bootstrap": broker.bootstrap, "ends": ends}


def copy_of(ingested, dest: Path, max_offsets: int = 1500, **overrides) -> config.Pipeline:
    """The ingested pipeline's tables and checkpoint, copied; a pipeline file pointing at the copy
    (`max_offsets` and `overrides` as in write_pipeline)."""
    shutil.copytree(ingested["folder"], dest, ignore=shutil.ignore_patterns("*.yaml"))
    return config.load(
        write_pipeline(dest, ingested["bootstrap"], ingested["topic"], max_offsets=max_offsets, **overrides)
    )


def audit(pipeline, spark, tmp_path, mode="full"):
    outcome = run_audit(pipeline, mode=mode, report_dir=tmp_path / "reports")
    jsonschema.validate(outcome.summary, SCHEMA)
    on_disk = json.loads((outcome.report_dir / "summary.json").read_text())
    assert on_disk["status"] == outcome.status and on_disk["run_id"] == outcome.run_id
    return outcome, {c["name"]: c for c in outcome.summary["checks"]}


def valid_committed(produced, partition: int) -> list[int]:
    return sorted(r.offset for r in produced.records if r.partition == partition and not r.aborted and r.kind == VALID)


def committed(produced, partition: int) -> list[int]:
    return sorted(r.offset for r in produced.records if r.partition == partition and not r.aborted)


# -- a clean run ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def first_audit(ingested, tmp_path_factory):
    """An untouched copy, audited once through the CLI: `--since-last` with no earlier audit, so
    everything (the same range and checks as `--full`). Two tests read this one audit (issue 19):
    the clean-run test (what its report says) and the since-last test (its first audit; it then
    goes on from this copy's watermark). What the clean-run test reads is kept here as it was
    right after the audit, since the since-last test later audits the same copy again."""
    tmp = tmp_path_factory.mktemp("audit-first")
    pipeline = copy_of(ingested, tmp / "p")
    reports = tmp / "reports"
    code = main(["audit", "--pipeline", pipeline.file, "--since-last", "--report-dir", str(reports)])
    run_dir = (reports / pipeline.name / "latest").resolve()
    return {
        "tmp": tmp,
        "pipeline": pipeline,
        "code": code,
        "run_dir": run_dir,
        "summary": json.loads((run_dir / "summary.json").read_text()),
        "watermark": json.loads((reports / pipeline.name / "watermark.json").read_text()),
        "bronze_end": read_ledger(pipeline.resolve(pipeline.sinks.bronze.path)).committed_offsets(),
    }


def test_clean_run_passes_and_counts_equal_the_generators(ingested, first_audit):
    assert first_audit["code"] == 0
    run_dir, summary = first_audit["run_dir"], first_audit["summary"]
    jsonschema.validate(summary, SCHEMA)
    assert summary["status"] == "passed" and summary["exit_code"] == 0 and summary["failed_checks"] == []
    produced = ingested["produced"]
    per_partition = {r["partition"]: r for r in summary["partitions"]}
    for p in range(PARTITIONS):
        row = per_partition[p]
        assert (row["source_records"], row["source_valid"], row["source_malformed"]) == (
            produced.count("committed", p),
            produced.count("committed_valid", p),
            produced.count("committed_malformed", p),
        ), p
        assert (row["bronze_rows"], row["quarantine_rows"]) == (row["source_valid"], row["source_malformed"])
        assert row["source_checksum"] == row["sink_checksum"]
    assert summary["counts"]["source_records"] == produced.count("committed")
    assert summary["counts"]["aggregate_windows"] > 0
    # the audited ranges end where Kafka (as ingested), the checkpoint and every ledger end
    ends = ingested["ends"]
    assert {r["partition"]: (r["start"], r["end"]) for r in summary["ranges"]} == {p: (0, e) for p, e in ends.items()}
    assert first_audit["bronze_end"] == ends
    # every kind of check ran: reconciliation and GX, each GX suite rendered into Data Docs
    names = {c["name"] for c in summary["checks"]}
    assert {
        "accounting",
        "loss",
        "phantoms",
        "duplicates",
        "duplicate_event_ids",
        "content",
        "aggregates",
        "checkpoint_ledger_agreement",
        "ledger_agreement",
        "ledger_contiguity",
    } <= names
    gx_suites = {n.split(".")[1] for n in names if n.startswith("gx.")}
    assert gx_suites == {"bronze", "quarantine", "aggregates", "reconciliation", "findings"}
    assert (run_dir / summary["data_docs"]["index"]).is_file() and (run_dir / "index.html").is_file()
    for page in summary["data_docs"]["suites"].values():
        assert (run_dir / page).is_file()
    assert first_audit["watermark"]["offsets"] == {str(p): e for p, e in ends.items()}
    # the report's batch charts: the job's committed batches from its status log, each with its lag
    batches = summary["batches"]
    assert batches and all(b["lag"] is not None and b["seconds"] > 0 for b in batches if b["rows"])
    assert (run_dir / "assets" / "chart.umd.min.js").is_file()
    # passing expectations keep what GX observed (BASIC with no samples), here and in Data Docs
    not_null = [c for c in summary["checks"] if c["source"] == "gx" and "not_be_null" in c["name"]]
    assert not_null and all(
        c["status"] == "passed" and c["observed"]["unexpected_count"] == 0 and c["observed"]["element_count"] > 0
        for c in not_null
    )
    assert "100% not null" in (run_dir / summary["data_docs"]["suites"]["bronze"]).read_text()
    # and Data Docs load nothing from the network (the browser proof: tests/e2e/test_airflow_ui_browser.py)
    pages = list((run_dir / "data_docs").rglob("*.html"))
    assert pages and all(remote_addresses(page.read_text()) == [] for page in pages)


# -- tampering: each kind is caught, with its partition and offsets --------------------
@pytest.fixture(scope="module")
def dup_and_phantom(ingested, spark, tmp_path_factory):
    """A copy with one bronze row appended twice and one row at an aborted record's offset."""
    from pyspark.sql import functions as F

    tmp = tmp_path_factory.mktemp("audit-dup")
    pipeline = copy_of(ingested, tmp / "p")
    produced = ingested["produced"]
    bronze = pipeline.resolve(pipeline.sinks.bronze.path)
    dup_at = (0, valid_committed(produced, 0)[10])
    aborted = sorted(r.offset for r in produced.records if r.partition == 1 and r.aborted)
    phantom_at = (1, aborted[3])
    rows = spark.read.format("delta").load(bronze)
    rows.where(f"_partition = {dup_at[0]} AND _offset = {dup_at[1]}").write.format("delta").mode("append").save(bronze)
    (
        rows.where("_partition = 1")
        .limit(1)
        .withColumn("_offset", F.lit(phantom_at[1]).cast("bigint"))
        .withColumn("event_id", F.lit("00000000-0000-4000-8000-00000000beef"))
        .write.format("delta")
        .mode("append")
        .save(bronze)
    )
    outcome, checks = audit(pipeline, spark, tmp)
    return {"outcome": outcome, "checks": checks, "dup_at": dup_at, "phantom_at": phantom_at}


def test_a_duplicate_appended_to_bronze_is_caught_with_its_offset(dup_and_phantom):
    outcome, checks = dup_and_phantom["outcome"], dup_and_phantom["checks"]
    p, o = dup_and_phantom["dup_at"]
    assert outcome.status == "failed" and outcome.exit_code == 1
    dup = checks["duplicates"]
    assert dup["status"] == "failed" and dup["ranges"] == [{"partition": p, "start": o, "end": o + 1, "count": 1}]
    assert [(s["_partition"], s["_offset"]) for s in dup["samples"]] == [(p, o), (p, o)]
    ids = checks["duplicate_event_ids"]
    assert ids["status"] == "failed" and ids["samples"][0]["offsets"] == [{"partition": p, "offset": o}] * 2
    assert checks["gx.bronze.expect_compound_columns_to_be_unique[_topic,_partition,_offset]"]["status"] == "failed"
    assert checks["loss"]["status"] == "passed"


def test_a_phantom_row_is_caught_with_its_offset(dup_and_phantom):
    checks = dup_and_phantom["checks"]
    p, o = dup_and_phantom["phantom_at"]
    phantoms = checks["phantoms"]
    assert phantoms["status"] == "failed" and phantoms["observed"] == 1
    assert phantoms["ranges"] == [{"partition": p, "start": o, "end": o + 1, "count": 1}]
    assert phantoms["samples"][0]["event_id"] == "00000000-0000-4000-8000-00000000beef"
    assert checks["accounting"]["status"] == "failed" and set(checks["accounting"]["partitions"]) == {0, 1}
    assert checks["gx.findings.unexpected_rows_expectation[phantoms]"]["status"] == "failed"
    assert set(checks["content"]["partitions"]) == {0, 1}  # partition 2 untouched: its checksum still equal


def test_the_report_page_opens_in_chromium_and_shows_the_failing_checks(dup_and_phantom, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is not installed. Fix: apt-get install chromium (.ci/run installs it)"
    page = dup_and_phantom["outcome"].report_dir / "index.html"
    shot = tmp_path / "audit-report.png"
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,2000"]
    subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], check=True, timeout=120, capture_output=True)
    assert shot.is_file() and shot.stat().st_size > 20_000, "the screenshot is missing or blank"
    dom = subprocess.run(
        [*common, "--dump-dom", page.as_uri()], check=True, timeout=120, capture_output=True, text=True
    ).stdout
    assert ": FAILED" in dom and "Failing checks" in dom
    for name in ("duplicates", "phantoms", "accounting"):
        assert f'id="check-{name}"' in dom, name
    _p, o = dup_and_phantom["phantom_at"]
    assert f'<td class="num">{o}</td><td class="num">{o + 1}</td>' in dom  # the phantom's offset range
    docs = dup_and_phantom["outcome"].report_dir / dup_and_phantom["outcome"].summary["data_docs"]["index"]
    docs_dom = subprocess.run(
        [*common, "--dump-dom", docs.as_uri()], check=True, timeout=120, capture_output=True, text=True
    ).stdout
    assert "bronze" in docs_dom and "findings" in docs_dom


def test_rows_deleted_from_bronze_are_reported_as_the_exact_offset_ranges(ingested, spark, tmp_path):
    from delta.tables import DeltaTable

    pipeline = copy_of(ingested, tmp_path / "p")
    produced = ingested["produced"]
    valid = valid_committed(produced, 1)
    low, high = valid[20], valid[60]
    DeltaTable.forPath(spark, pipeline.resolve(pipeline.sinks.bronze.path)).delete(
        f"_partition = 1 AND _offset >= {low} AND _offset < {high}"
    )
    outcome, checks = audit(pipeline, spark, tmp_path)

    # expected: runs of lost records, consecutive among the partition's committed records
    records = committed(produced, 1)
    lost = {o for o in valid if low <= o < high}
    expected, run = [], []
    for o in records:
        if o in lost:
            run.append(o)
        elif run:
            expected.append({"partition": 1, "start": run[0], "end": run[-1] + 1, "count": len(run)})
            run = []
    if run:
        expected.append({"partition": 1, "start": run[0], "end": run[-1] + 1, "count": len(run)})
    loss = checks["loss"]
    assert outcome.exit_code == 1 and loss["status"] == "failed" and loss["observed"] == len(lost) == 40
    assert loss["ranges"] == expected
    assert loss["samples"][0]["_offset"] == low and loss["samples"][0]["event_id"]  # the source record itself
    assert checks["phantoms"]["status"] == "passed" and checks["duplicates"]["status"] == "passed"


def test_an_altered_payload_fails_the_checksum_of_that_partition_only(ingested, spark, tmp_path):
    from delta.tables import DeltaTable

    pipeline = copy_of(ingested, tmp_path / "p")
    o = valid_committed(ingested["produced"], 2)[5]
    DeltaTable.forPath(spark, pipeline.resolve(pipeline.sinks.bronze.path)).update(
        f"_partition = 2 AND _offset = {o}", {"amount": "amount + 1"}
    )
    outcome, checks = audit(pipeline, spark, tmp_path)
    content = checks["content"]
    assert outcome.exit_code == 1 and content["status"] == "failed" and content["partitions"] == [2]
    assert content["ranges"] == [{"partition": 2, "start": o, "end": o + 1, "count": 1}]
    sample = content["samples"][0]
    from decimal import Decimal

    assert Decimal(sample["sink"]["amount"]) == Decimal(sample["source"]["amount"]) + 1
    per_partition = {r["partition"]: r for r in outcome.summary["partitions"]}
    assert [p for p, r in per_partition.items() if r["source_checksum"] != r["sink_checksum"]] == [2]
    for name in ("accounting", "loss", "phantoms", "duplicates"):
        assert checks[name]["status"] == "passed", name


def test_an_aggregate_changed_by_hand_is_caught(ingested, spark, tmp_path):
    from delta.tables import DeltaTable

    pipeline = copy_of(ingested, tmp_path / "p")
    path = pipeline.resolve(aggregates_of(pipeline).path)
    row = spark.read.format("delta").load(path).orderBy("account_id", "window_start").first()
    from pyspark.sql import functions as F

    # a Column, not SQL text: an account id may hold quotes and line terminators (large valid events)
    DeltaTable.forPath(spark, path).update(
        (F.col("account_id") == row["account_id"]) & (F.col("window_start") == row["window_start"]),
        {"events": "events + 1"},
    )
    outcome, checks = audit(pipeline, spark, tmp_path)
    agg = checks["aggregates"]
    assert outcome.exit_code == 1 and agg["status"] == "failed" and agg["observed"]["differing"] == 1
    sample = agg["samples"][0]
    assert (sample["kind"], sample["account_id"]) == ("differs", row["account_id"])
    assert (sample["exp_events"], sample["obs_events"]) == (row["events"], row["events"] + 1)
    assert checks["gx.findings.unexpected_rows_expectation[aggregates]"]["status"] == "failed"
    failed = set(outcome.summary["failed_checks"])
    assert not failed & {"accounting", "loss", "phantoms", "duplicates", "content"}


# -- incremental audits ------------------------------------------------------------------
def test_since_last_audits_only_what_was_committed_since_the_last_passed_audit(ingested, first_audit, broker, spark):
    pipeline, tmp_path = first_audit["pipeline"], first_audit["tmp"]  # audits write to tmp_path / "reports"
    first = first_audit["summary"]  # the first since-last audit: no watermark yet, so everything
    assert first["mode"] == "since-last"
    assert first["status"] == "passed" and any("no passed audit" in n for n in first["notes"])
    before = {r["partition"]: r["end"] for r in first["ranges"]}

    more = produce(
        broker.bootstrap,
        ingested["topic"],
        600,
        schema=PAYMENTS_SCHEMA,
        partitions=PARTITIONS,
        seed=12,
        abort_ratio=0.1,
        malformed_ratio=0.05,
        txn_size=50,
    )
    run_ingest(pipeline, spark=spark)
    second, _checks = audit(pipeline, spark, tmp_path, mode="since-last")
    assert second.status == "passed", second.summary["failed_checks"]
    ranges = {r["partition"]: (r["start"], r["end"]) for r in second.summary["ranges"]}
    assert {p: s for p, (s, _e) in ranges.items()} == {p: before[p] for p in ranges}
    assert second.summary["counts"]["source_records"] == more.count("committed")
    assert second.summary["counts"]["source_malformed"] == more.count("committed_malformed")

    third, _ = audit(pipeline, spark, tmp_path, mode="since-last")  # nothing new
    assert third.status == "passed", third.summary["reason"]
    assert third.summary["ranges"] == [] and third.summary["counts"]["source_records"] == 0


# -- an audit that cannot run ------------------------------------------------------------
def test_an_audit_that_cannot_run_exits_2_with_the_reason(broker, tmp_path, capsys):
    yaml = write_pipeline(tmp_path / "empty", broker.bootstrap, "t-audit-never-ingested", name="never_ingested")
    reports = tmp_path / "reports"
    assert main(["audit", "--pipeline", str(yaml), "--report-dir", str(reports)]) == 2
    assert "nothing to audit" in capsys.readouterr().err
    latest = reports / "never_ingested" / "latest"
    summary = json.loads((latest / "summary.json").read_text())
    jsonschema.validate(summary, SCHEMA)
    assert summary["status"] == "error" and "onceflow ingest" in summary["reason"]
    assert summary["checks"] == [] and not (reports / "never_ingested" / "watermark.json").exists()
    assert "could not run" in (latest / "index.html").read_text()


def test_the_spark_submit_entry_point_passes_the_exit_code_through(broker, tmp_path):
    """spark_apps/audit.py under spark-submit: the same command, its exit code seen by the caller (Airflow)."""
    import os
    import sys

    yaml = write_pipeline(tmp_path / "empty", broker.bootstrap, "t-audit-submit-never", name="submit_never")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master",
            "local[1]",
            str(ROOT / "spark_apps" / "audit.py"),
            "--pipeline",
            str(yaml),
            "--since-last",
            "--report-dir",
            str(tmp_path / "reports"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr  # spark-submit's PythonRunner merges the app's stderr into stdout
    assert done.returncode == 2, output[-2000:]
    assert "nothing to audit" in output and "Traceback" not in output
    summary = json.loads((tmp_path / "reports" / "submit_never" / "latest" / "summary.json").read_text())
    assert summary["mode"] == "since-last" and summary["exit_code"] == 2


# -- backfill: the repair the audit proves ----------------------------------------------
def test_a_backfill_rewrites_deleted_rows_exactly_once_and_the_audit_passes_again(ingested, spark, tmp_path):
    """Rows deleted from bronze and quarantine are re-written by `run_backfill`, each
    table in one commit with a BACKFILL ledger entry; a second backfill adds nothing;
    offsets past the stream's committed end are left to the stream."""
    from delta.tables import DeltaTable

    from onceflow.spark.backfill import run_backfill

    pipeline = copy_of(ingested, tmp_path / "p")
    bronze_path = pipeline.resolve(pipeline.sinks.bronze.path)
    quarantine_path = pipeline.resolve(pipeline.sinks.quarantine.path)
    valid = valid_committed(ingested["produced"], 1)
    low, high = valid[20], valid[60]
    DeltaTable.forPath(spark, bronze_path).delete(f"_partition = 1 AND _offset >= {low} AND _offset < {high}")
    quarantined = spark.read.format("delta").load(quarantine_path).where("_partition = 2")
    lost_quarantine = sorted(r["_offset"] for r in quarantined.select("_offset").collect())
    assert lost_quarantine, "the generator put malformed records in partition 2"
    DeltaTable.forPath(spark, quarantine_path).delete("_partition = 2")

    committed_end = read_ledger(bronze_path).committed_offsets()
    log_end = {p: hi for p, (_, hi) in watermarks(ingested["bootstrap"], ingested["topic"]).items()}
    messages: list[str] = []
    result = run_backfill(pipeline, {p: 0 for p in log_end}, log_end, spark=spark, log=messages.append)
    print("\n".join(messages))  # what `onceflow backfill` logs (docs/runbooks/rows-missing-from-a-table.md)
    assert result.added_by_sink == {"bronze": 40, "quarantine": len(lost_quarantine)}, result
    assert result.added == result.records - result.present == 40 + len(lost_quarantine)
    assert result.end == {str(p): o for p, o in committed_end.items()}
    assert result.left_to_stream == {
        str(p): [committed_end[p], hi] for p, hi in log_end.items() if hi > committed_end[p]
    }

    bronze = read_ledger(bronze_path)
    assert [(b.rows, b.extra["written"]) for b in bronze.backfills] == [
        (40, [{"_partition": 1, "first": low, "last": valid[59], "rows": 40}])
    ]
    assert not bronze.problems() and read_ledger(quarantine_path).backfills[0].rows == len(lost_quarantine)
    restored = (
        spark.read.format("delta").load(bronze_path).where(f"_partition = 1 AND _offset >= {low} AND _offset < {high}")
    )
    assert sorted(r["_offset"] for r in restored.collect()) == valid[20:60]
    assert {r["_batch_id"] for r in restored.collect()} == {-1}

    outcome, _checks = audit(pipeline, spark, tmp_path)
    assert outcome.status == "passed", outcome.summary["failed_checks"]
    assert any("backfill commit(s) re-wrote 40 row(s)" in n for n in outcome.summary["notes"])

    versions = {
        path: DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]
        for path in (bronze_path, quarantine_path)
    }
    again = run_backfill(pipeline, {p: 0 for p in log_end}, log_end, spark=spark)
    assert again.added == 0 and again.present == again.records == result.records
    assert versions == {
        path: DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]
        for path in (bronze_path, quarantine_path)
    }  # not one commit


# -- an audit of a running stream ----------------------------------------------------------
def test_an_audit_of_a_running_stream_judges_the_point_read_at_its_start(ingested, broker, spark, tmp_path):
    """Records keep arriving and batches keep committing during the audit; the audit
    must pass and judge exactly the checkpoint's committed offsets read at its start."""
    import threading
    import time

    from onceflow.state.status import StatusLog

    pipeline = copy_of(ingested, tmp_path / "p", max_offsets=400, trigger={"processing_time": "1 second"})
    errors: list[BaseException] = []

    def background(fn, **kw):
        def run():
            try:
                fn(**kw)
            except BaseException as exc:  # surfaced by the test below
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    status = StatusLog(pipeline.state_path, pipeline.name)
    runs_before = sum(e.get("event") == "started" for e in status.events())  # the copied state has runs

    def this_run() -> list[dict]:
        started = sum(e.get("event") == "started" for e in status.events())
        return status.last_run() if started > runs_before else []

    producer = background(
        produce,
        cluster=ingested["bootstrap"],
        topic=ingested["topic"],
        count=900,
        schema=PAYMENTS_SCHEMA,
        partitions=PARTITIONS,
        seed=13,
        abort_ratio=0.1,
        malformed_ratio=0.05,
        txn_size=25,
        rate=60,
        keep_records=False,
    )
    # idle = no batch with data for 15 s. The producer runs about 15 s and commits a transaction every
    # 0.4 s, so every 1 s trigger has data until it ends; the audit (40 s and more) outlasts it, so
    # batches commit during the audit, and the stream stops at a batch boundary (spark/stop.py)
    # about 15 s after the last record, while the audit still runs or soon after
    job = background(run_ingest, pipeline=pipeline, mode="continuous", until_idle=15, max_seconds=900, spark=spark)
    deadline = time.monotonic() + 180
    while not any(e.get("event") == "progress" and e.get("input_rows") for e in this_run()):
        assert not errors, errors
        assert time.monotonic() < deadline, (
            f"the continuous job committed no batch with rows within 180s: {status.last_run()[-3:]}"
        )
        time.sleep(1)

    outcome, _checks = audit(pipeline, spark, tmp_path)
    point = outcome.summary["committed_point"]
    assert outcome.status == "passed", outcome.summary["failed_checks"]
    assert point["running"] is True
    audited = {str(r["partition"]): r["end"] for r in outcome.summary["ranges"]}
    assert audited == point["checkpoint"]["offsets"]  # exactly the checkpoint's point read at the start

    producer.join(timeout=300)
    job.join(timeout=900)
    assert not producer.is_alive() and not job.is_alive(), "the producer or the continuous job did not finish"
    assert not errors, errors
    final = read_ledger(pipeline.resolve(pipeline.sinks.bronze.path)).committed_offsets()
    assert any(final[int(p)] > end for p, end in audited.items()), "no batch committed after the audit's point"
    after, _ = audit(pipeline, spark, tmp_path, mode="since-last")  # the rest, once the stream stopped
    assert after.status == "passed", after.summary["failed_checks"]
    assert {r["partition"]: r["end"] for r in after.summary["ranges"]} == {
        p: e for p, e in final.items() if e > audited[str(p)]
    }
