"""The exactly-once streaming job against a real broker, Spark and Delta."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
from deltalake import DeltaTable

from devkit.delta_history import merge_metrics, write_engines
from devkit.pipelines import PAYMENTS_AGGREGATES, PAYMENTS_SCHEMA, load_pipeline
from onceflow.deltars import Appender
from onceflow.errors import RecoveryError, TableFeatureError
from onceflow.generate.producer import VALID, produce
from onceflow.generate.records import Generator
from onceflow.kafka.admin import watermarks
from onceflow.ledger import read_ledger, rows_by_reason
from onceflow.sinks import read_ledgers, table_paths
from onceflow.spark.ingest import run_ingest
from onceflow.spark.session import COMPACT_MIN_FILE_BYTES
from onceflow.spark.table_specs import table_property_hints
from onceflow.state.status import StatusLog
from tests.exactly_once import assert_exactly_once

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)


def test_available_now_lands_every_committed_record_once(broker, spark, topic, tmp_path):
    pipeline = load_pipeline(tmp_path, broker.bootstrap, topic)
    first = produce(
        broker.bootstrap,
        topic,
        6000,
        schema=PAYMENTS_SCHEMA,
        partitions=4,
        seed=7,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    result = run_ingest(pipeline, spark=spark)
    assert result.status == "finished" and result.batches >= 3, result  # 2000 offsets per trigger
    second = produce(
        broker.bootstrap,
        topic,
        3000,
        schema=PAYMENTS_SCHEMA,
        partitions=4,
        seed=8,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    # an available-now run takes its own, larger batch size: the second backlog in one batch. The
    # first run's small batches were committed from the driver (delta-rs); this one is over the
    # driver's limit, so Spark's Delta writer commits its bronze, with the same txn and entry
    larger = pipeline.model_copy(
        update={
            "source": pipeline.source.model_copy(
                update={"available_now_max_offsets_per_trigger": 10_000, "driver_commit_max_offsets": 1000}
            )
        }
    )
    lines: list[str] = []
    assert run_ingest(larger, spark=spark, log=lines.append).batches == 1
    batch_lines = _wait_for(lambda: [x for x in lines if x.startswith("batch ")])
    # one readable line for the batch: the committed records it read, its seconds, lag and verdict
    assert len(batch_lines) == 1, lines
    assert re.fullmatch(
        rf"batch \d+: {second.count('committed'):,} rows in \d+\.\d s; lag 0 \(healthy\)", batch_lines[0]
    ), lines
    counts = assert_exactly_once(pipeline, broker.bootstrap, produced=[first, second])
    assert counts["quarantine"] == first.count("committed_malformed") + second.count("committed_malformed")

    # bronze's batches were committed by both writers: the small ones by delta-rs, the large one by Spark
    engines = write_engines(table_paths(pipeline)["bronze"])
    assert engines.count("delta-rs") >= 3, engines
    assert engines.count("Apache-Spark") == 1, engines

    # each sink's ledger is contiguous and ends at the topic's end
    for name, path in table_paths(pipeline).items():
        ledger = read_ledger(path)
        assert ledger.problems() == [], name
        assert [e.batch_id for e in ledger.entries] == list(range(len(ledger.entries))), name
        assert (
            sum(e.rows for e in ledger.entries)
            == {"bronze": counts["bronze"], "quarantine": counts["quarantine"], "aggregates": counts["bronze"]}[name]
        )
    ends = {p: high for p, (low, high) in watermarks(broker.bootstrap, topic).items()}
    assert read_ledger(table_paths(pipeline)["bronze"]).committed_offsets() == ends

    events_ = [e["event"] for e in StatusLog(pipeline.state_path, pipeline.name).last_run()]
    assert events_[0] == "started" and events_[-1] == "final" and "progress" in events_


def _wait_for(get, timeout: float = 10.0):
    """The listener's last line may follow the run's return by a moment (Spark's listener bus)."""
    import time

    deadline = time.monotonic() + timeout
    while not (found := get()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def test_replaying_a_committed_batch_adds_nothing(broker, spark, topic, tmp_path):
    pipeline = load_pipeline(tmp_path, broker.bootstrap, topic)
    produce(
        broker.bootstrap,
        topic,
        5000,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=3,
        abort_ratio=0.05,
        malformed_ratio=0.02,
    )
    run_ingest(pipeline, spark=spark)
    paths = table_paths(pipeline)
    before = {n: DeltaTable(p).version() for n, p in paths.items()}
    commits = sorted(Path(pipeline.checkpoint_path, "commits").glob("[0-9]*"), key=lambda f: int(f.name))
    commits[-1].unlink()  # Spark now believes the last batch never committed, and re-runs it
    Path(commits[-1].parent, f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run_ingest(pipeline, spark=spark)
    assert_exactly_once(pipeline, broker.bootstrap)
    after = {n: DeltaTable(p).version() for n, p in paths.items()}
    # Delta skipped every replayed write: no table got a new version
    assert after == before, f"a replayed batch must not commit again: {before} -> {after}"


def test_a_table_feature_delta_rs_cannot_write_sends_the_run_to_sparks_writer_exactly_once(
    broker, spark, topic, tmp_path
):
    """A user turns on a Delta feature delta-rs cannot write (domainMetadata, which liquid clustering
    and row tracking bring) on quarantine. The next small batch commits bronze from the driver, is
    refused at quarantine, and goes to Spark's writer: bronze's commit is skipped through the same
    txn, quarantine is written; every later batch of the run is Spark's. Exactly once throughout."""
    pipeline = load_pipeline(tmp_path, broker.bootstrap, topic)  # 2,000 offsets per trigger
    first = produce(
        broker.bootstrap,
        topic,
        1000,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=41,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    assert run_ingest(pipeline, spark=spark).batches == 1
    paths = table_paths(pipeline)
    spark.sql(
        f"ALTER TABLE delta.`{paths['quarantine']}` SET TBLPROPERTIES ('delta.feature.domainMetadata' = 'supported')"
    )
    assert "domainMetadata" in (DeltaTable(paths["quarantine"]).protocol().writer_features or [])
    second = produce(
        broker.bootstrap,
        topic,
        2500,
        schema=PAYMENTS_SCHEMA,
        partitions=2,
        seed=42,
        abort_ratio=0.1,
        malformed_ratio=0.05,
    )
    lines: list[str] = []
    result = run_ingest(pipeline, spark=spark, log=lines.append)
    assert result.status == "finished" and result.batches == 2, result
    switched = [x for x in lines if "delta-rs cannot commit to" in x]
    assert len(switched) == 1 and paths["quarantine"] in switched[0] and "DomainMetadata" in switched[0], lines
    assert "driver_commit_max_offsets: 0" in switched[0]

    assert_exactly_once(pipeline, broker.bootstrap, produced=[first, second])
    writes = {name: write_engines(paths[name]) for name in ("bronze", "quarantine")}
    # bronze: run 1, then the refused batch (committed before quarantine refused), then Spark's batch
    assert writes == {
        "bronze": ["delta-rs", "delta-rs", "Apache-Spark"],
        "quarantine": ["delta-rs", "Apache-Spark", "Apache-Spark"],
    }, writes
    for name, path in paths.items():
        ledger = read_ledger(path)
        assert ledger.problems() == [] and [e.batch_id for e in ledger.entries] == [0, 1, 2], (name, ledger.entries)
    # each quarantine entry counted its rows per reason, from the driver's rows and Spark's alike
    # (the metrics' onceflow_quarantine_rows_total): as the table holds them, read by delta-rs
    held = Counter(DeltaTable(paths["quarantine"]).to_pyarrow_table(columns=["reason"]).column("reason").to_pylist())
    entries = read_ledger(paths["quarantine"]).entries
    assert all(isinstance(e.extra.get("reasons"), dict) for e in entries), entries
    assert rows_by_reason(entries) == dict(sorted(held.items())) and len(held) > 1, held
    # where no writer can take over (the follower's empty merges, recovery's LOSS entries), the
    # refusal is an error that names the table, the feature and the fix
    with pytest.raises(TableFeatureError) as refused:
        Appender(paths["quarantine"]).append(None, "{}", "a-new-writer", 0)
    message = str(refused.value)
    assert paths["quarantine"] in message and "DomainMetadata" in message and "DROP FEATURE" in message
    assert "Fix:" in message and "driver_commit_max_offsets: 0" in message


def test_every_malformed_kind_lands_in_quarantine_with_its_reason(broker, spark, topic, tmp_path):
    pipeline = load_pipeline(tmp_path, broker.bootstrap, topic)
    summary = produce(broker.bootstrap, topic, 2000, schema=PAYMENTS_SCHEMA, partitions=2, seed=13, malformed_ratio=0.3)
    run_ingest(pipeline, spark=spark)
    assert_exactly_once(pipeline, broker.bootstrap, produced=[summary])
    reasons = {
        r["reason"]
        for r in DeltaTable(table_paths(pipeline)["quarantine"]).to_pyarrow_table(columns=["reason"]).to_pylist()
    }
    made = {r.kind for r in summary.records if r.kind != VALID and not r.aborted}
    assert made == set(Generator(PAYMENTS_SCHEMA).kinds()), "every kind payments can produce was produced"
    assert made <= reasons, f"generated {sorted(made)}, quarantined {sorted(reasons)}"


def test_missing_checkpoint_beside_written_sinks_is_refused(broker, spark, topic, tmp_path):
    pipeline = load_pipeline(tmp_path, broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 500, schema=PAYMENTS_SCHEMA, partitions=1, seed=1)
    run_ingest(pipeline, spark=spark)
    shutil.rmtree(pipeline.checkpoint_path)
    with pytest.raises(RecoveryError, match=r"checkpoint .* is missing, but the sinks already hold batches.*recover"):
        run_ingest(pipeline, spark=spark)


def test_the_aggregates_merge_writes_only_the_rows_it_changes(broker, spark, topic, tmp_path):
    """With deletion vectors (the default) a MERGE copies no unchanged row; without them Delta
    rewrites every file holding a matched row, so each MERGE copies the table. An available-now
    run merges once, at its end: two runs over events of the same windows (the seeded generator
    starts every seed at the same moment) make a second MERGE that adds to the first one's windows."""
    pipelines = {}
    for dv in (True, False):
        folder = tmp_path / ("dv" if dv else "plain")
        sinks = {
            "bronze": {"path": str(folder / "bronze")},
            "quarantine": {"path": str(folder / "quarantine")},
            "aggregates": {"path": str(folder / "aggregates"), "deletion_vectors": dv, **PAYMENTS_AGGREGATES},
        }
        pipelines[dv] = load_pipeline(
            folder, broker.bootstrap, topic, name=f"p_merge_{'dv' if dv else 'plain'}", sinks=sinks
        )
    copied, updated = {}, {}
    for seed in (21, 22):
        produce(broker.bootstrap, topic, 4000, schema=PAYMENTS_SCHEMA, partitions=2, seed=seed, malformed_ratio=0.01)
        for pipeline in pipelines.values():
            assert run_ingest(pipeline, spark=spark).batches >= 2  # 2000 offsets per trigger
    for dv, pipeline in pipelines.items():
        assert_exactly_once(pipeline, broker.bootstrap)
        table = DeltaTable(table_paths(pipeline)["aggregates"])
        assert ("deletionVectors" in (table.protocol().reader_features or [])) is dv
        merges = merge_metrics(table_paths(pipeline)["aggregates"])
        assert len(merges) == 2, merges  # one per run
        copied[dv] = sum(int(m["numTargetRowsCopied"]) for m in merges)
        updated[dv] = sum(int(m["numTargetRowsUpdated"]) for m in merges)
        assert table_property_hints(pipeline, read_ledgers(pipeline)) == []
    assert updated[True] == updated[False] > 0  # the second run did add to windows of the first
    assert copied[True] == 0 and copied[False] > 0, copied

    # a table made without them, under a pipeline that wants them: the job says how to switch them on
    wants = load_pipeline(
        tmp_path / "plain",
        broker.bootstrap,
        topic,
        name="p_merge_plain",
        sinks={**sinks, "aggregates": {"path": sinks["aggregates"]["path"], **PAYMENTS_AGGREGATES}},
    )
    hints = table_property_hints(wants, read_ledgers(wants))
    assert len(hints) == 1 and "SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)" in hints[0], hints


@contextmanager
def _spark_conf(spark, key: str, value: str):
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _compacting_after(spark, files: int):
    """Delta compacts once `files` small files have gathered; its default, 50, is more than a test makes.
    The test sets 2, the fewest that still asks for a merge: any table that writes a file per batch is
    then compacted within two batches, so the test needs two batches per run, not five (issue 19)."""
    return _spark_conf(spark, "spark.databricks.delta.autoCompact.minNumFiles", str(files))


COMPACT_AFTER, MAX_OFFSETS = 2, 1000


def test_auto_compaction_merges_small_files_and_leaves_the_ledgers_alone(broker, spark, topic, tmp_path):
    """Every batch adds small files; the follower compacts a table (auto compaction, on by default)
    once the session's `autoCompact.minNumFiles` small files have gathered, between batches
    (spark/compaction.py; Delta's own per-commit check is off). Its OPTIMIZE commits change no row,
    carry no ledger entry, and the ledger counts them as maintenance, never as a step."""
    # 2 x 1,000 events (and 20 transaction markers each) at 1,000 offsets per trigger, in two runs:
    # bronze and quarantine get a file per batch (written by delta-rs from the driver), aggregates
    # one per run (an available-now run merges once, at its end)
    pipeline = load_pipeline(tmp_path, broker.bootstrap, topic, max_offsets=MAX_OFFSETS)
    for seed in (23, 24):
        produce(broker.bootstrap, topic, 1000, schema=PAYMENTS_SCHEMA, partitions=2, seed=seed, malformed_ratio=0.02)
        with _compacting_after(spark, files=COMPACT_AFTER):
            assert run_ingest(pipeline, spark=spark).batches >= 1
    assert_exactly_once(pipeline, broker.bootstrap)
    for name, path in table_paths(pipeline).items():
        ledger, table = read_ledger(path), DeltaTable(path)
        compactions = [c for c in table.history() if c.get("operation") == "OPTIMIZE"]
        assert compactions, name
        assert [c["version"] for c in ledger.maintenance] == sorted(c["version"] for c in compactions), name
        assert ledger.problems() == [] and ledger.foreign_commits == [], name
        assert [e.batch_id for e in ledger.entries] == list(range(len(ledger.entries))), name
        if name == "bronze":  # each batch wrote a file; fewer are left
            assert len(table.file_uris()) < len(ledger.entries), len(table.file_uris())
        assert not any("onceflow_ledger" in (c.get("userMetadata") or "") for c in compactions), name
    assert table_property_hints(pipeline, read_ledgers(pipeline)) == []

    # a pipeline that declines it gets tables without it, and no compaction
    off = load_pipeline(
        tmp_path / "off",
        broker.bootstrap,
        topic,
        name="p_no_compact",
        max_offsets=MAX_OFFSETS,
        sinks={
            s: {
                "path": str(tmp_path / "off" / s),
                "auto_compact": False,
                **(PAYMENTS_AGGREGATES if s == "aggregates" else {}),
            }
            for s in ("bronze", "quarantine", "aggregates")
        },
    )
    with _compacting_after(spark, files=COMPACT_AFTER):
        assert run_ingest(off, spark=spark).batches >= 2  # enough files that a compaction would have run
    for name, path in table_paths(off).items():
        assert "OPTIMIZE" not in [c.get("operation") for c in DeltaTable(path).history()], name
    assert table_property_hints(off, read_ledgers(off)) == []

    # files of at least the session's minimum size are left as they are: a large batch's fresh files
    # are not rewritten (onceflow's sessions set it; the test's batches are small, so it is lowered here)
    key = "spark.databricks.delta.autoCompact.minFileSize"
    assert spark.conf.get(key) == str(COMPACT_MIN_FILE_BYTES)
    large = load_pipeline(tmp_path / "large", broker.bootstrap, topic, name="p_large_files", max_offsets=MAX_OFFSETS)
    with _compacting_after(spark, files=COMPACT_AFTER), _spark_conf(spark, key, "1024"):
        run_ingest(large, spark=spark)
    bronze = DeltaTable(table_paths(large)["bronze"])
    assert min(Path(uri.removeprefix("file://")).stat().st_size for uri in bronze.file_uris()) > 1024
    assert "OPTIMIZE" not in [c.get("operation") for c in bronze.history()]
