"""Exactly-once assertions shared by the ingest tests.

The tables are read with delta-rs (shares no code with Spark) and compared with
what an independent read_committed consumer sees — the shape of Kafka's own
transactions system test: input set == output set, zero duplicates.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from deltalake import DeltaTable

from devkit.kafka import consume_all
from onceflow.checkpoint import read_checkpoint
from onceflow.config import Pipeline, duration_seconds
from onceflow.generate.producer import VALID
from onceflow.kafka.client import Cluster
from onceflow.ledger import read_ledger
from onceflow.sinks import read_ledgers, table_paths
from onceflow.tables import aggregate_key


def table_rows(path: str, columns: list[str]) -> list[dict]:
    """The table's rows, read by delta-rs's query engine, which applies deletion vectors
    (the aggregates table has them; delta-rs's pyarrow reader refuses such tables)."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    select = ", ".join(f'"{c}"' for c in columns)
    return pa.table(
        QueryBuilder().register("t", DeltaTable(path)).execute(f"SELECT {select} FROM t").read_all()
    ).to_pylist()


def assert_exactly_once(pipeline: Pipeline, bootstrap: Cluster, produced=None) -> dict:
    """Every committed record is in bronze or quarantine exactly once, nothing else
    is there, and the aggregates equal a recomputation from bronze. `produced`: the
    generator summaries (with records), to check each malformed record's reason."""
    paths = table_paths(pipeline)
    committed = {(p, o) for p, o, _, _ in consume_all(bootstrap, pipeline.source.topic, "read_committed")}
    bronze = table_rows(paths["bronze"], ["_partition", "_offset", *pipeline.schema.names])
    quarantine = table_rows(paths["quarantine"], ["_partition", "_offset", "reason"])

    bronze_keys = Counter((r["_partition"], r["_offset"]) for r in bronze)
    quarantine_keys = Counter((r["_partition"], r["_offset"]) for r in quarantine)
    dup_b = {k: n for k, n in bronze_keys.items() if n > 1}
    dup_q = {k: n for k, n in quarantine_keys.items() if n > 1}
    assert not dup_b, f"{len(dup_b)} (partition, offset) duplicated in bronze, e.g. {list(dup_b.items())[:5]}"
    assert not dup_q, f"{len(dup_q)} (partition, offset) duplicated in quarantine, e.g. {list(dup_q.items())[:5]}"
    both = set(bronze_keys) & set(quarantine_keys)
    assert not both, f"{len(both)} records in both bronze and quarantine, e.g. {sorted(both)[:5]}"
    landed = set(bronze_keys) | set(quarantine_keys)
    lost, phantom = committed - landed, landed - committed
    assert not lost, f"{len(lost)} committed records lost, e.g. {sorted(lost)[:10]}"
    assert not phantom, f"{len(phantom)} rows with no committed source record (aborted?), e.g. {sorted(phantom)[:10]}"
    if pipeline.schema.event_id:
        ids = Counter(r[pipeline.schema.event_id] for r in bronze)
        dup_ids = [i for i, n in ids.items() if n > 1]
        assert not dup_ids, f"{len(dup_ids)} event ids duplicated in bronze, e.g. {dup_ids[:5]}"

    if produced is not None:
        expected = {(r.partition, r.offset): r.kind for s in produced for r in s.records if not r.aborted}
        reasons = {(r["_partition"], r["_offset"]): r["reason"] for r in quarantine}
        wrong = {k: (kind, reasons.get(k)) for k, kind in expected.items() if kind != VALID and reasons.get(k) != kind}
        assert not wrong, f"{len(wrong)} malformed records without their reason, e.g. {list(wrong.items())[:5]}"

    if "aggregates" in paths:
        assert_aggregates_match(pipeline, bronze, paths["aggregates"])
    return {"committed": len(committed), "bronze": len(bronze), "quarantine": len(quarantine)}


def assert_aggregates_match(pipeline: Pipeline, bronze: list[dict], path: str) -> None:
    """The streaming aggregate table equals a recomputation from bronze in plain Python, row for row."""
    aggs = pipeline.sinks.aggregates
    assert aggs is not None, f"pipeline {pipeline.name} has no sinks.aggregates"
    width = timedelta(seconds=duration_seconds(aggs.window))
    metrics = aggs.parsed_metrics()
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in bronze:
        t = r[pipeline.schema.event_time]
        start = (t - timedelta(seconds=(t.timestamp() % width.total_seconds()))).replace(microsecond=0)
        groups[(*[r[g] for g in aggs.group_by], start)].append(r)
    folds: dict[str, Callable[[list], Any]] = {"sum": sum, "min": min, "max": max}
    expected = {}
    for key, rows in groups.items():
        values = []
        for m in metrics:
            present = [r[m.field] for r in rows if m.field and r[m.field] is not None]
            values.append(len(rows) if m.func == "count" else (folds[m.func](present) if present else None))
        expected[key] = values
    columns = [*aggregate_key(aggs), *[m.name for m in metrics]]
    rows = table_rows(path, columns)
    actual = {tuple(r[c] for c in aggregate_key(aggs)): [r[m.name] for m in metrics] for r in rows}
    assert len(actual) == len(rows), "aggregate keys must be unique"
    diff = {
        k: (expected.get(k), actual.get(k))
        for k in set(expected) | set(actual)
        if not _same(expected.get(k), actual.get(k))
    }
    assert not diff, f"{len(diff)} aggregate rows differ from the recomputation, e.g. {list(diff.items())[:3]}"


def _same(a: list | None, b: list | None) -> bool:
    """Equal, doubles within rounding (a sum of doubles depends on the order it is added in)."""
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(
        x == y or (isinstance(x, float) and isinstance(y, float) and abs(x - y) <= 1e-9 * max(1, abs(x)))
        for x, y in zip(a, b, strict=True)
    )


def assert_ledgers_contiguous(pipeline: Pipeline) -> None:
    """Each Delta sink's ledger: one entry per batch, no gap, no overlap (ledger.problems())."""
    for name, path in table_paths(pipeline).items():
        assert read_ledger(path).problems() == [], f"{name} ledger is not contiguous"


def first_unmerged(pipeline: Pipeline, follower: str) -> int | None:
    """The first batch bronze holds and the `follower` table (aggregates, current) does not: the
    next run's follower merges it in its first cycle, seconds after the driver starts, so a fault
    aimed there fires early in that run."""
    ledgers = read_ledgers(pipeline, kafka=False)
    merged = {(e.generation, e.batch_id) for e in ledgers[follower].entries}
    waiting = [e.batch_id for e in ledgers["bronze"].entries if (e.generation, e.batch_id) not in merged]
    return min(waiting, default=None)


def kill_in_every_job_window(job, pipeline: Pipeline, after_each=lambda: None) -> None:
    """One crash inside each exactly-once window of the job (faults.JOB_POINTS), in the order a batch
    passes them, all in one batch: the first run (`job`, devkit.driver.IngestProcess) plans it and
    dies before any sink commits; each next run replays it from the state the last one left and
    dies one window further on. The aggregates' window is aimed at the first batch bronze holds and
    the aggregates not (first_unmerged): aimed at the next batch, the run would first finish a
    whole merge of the earlier runs' batches. `after_each`: the caller's checks after each crash."""
    from onceflow import faults

    first = next_batch(pipeline.checkpoint_path)
    for point in faults.JOB_POINTS:
        unmerged = first_unmerged(pipeline, "aggregates") if point == "before_aggregates_commit" else None
        target = first if unmerged is None else unmerged
        job.start(fault=f"{point}@{target}")
        code = job.wait_exit(timeout=600)
        assert code == faults.EXIT_CODE, (
            f"expected the injected crash at {point}@{target}, got exit {code}:\n{job.tail()}"
        )
        after_each()


def next_batch(checkpoint: str) -> int:
    """The id of the next batch Spark will plan (a fault aimed there must fire); the checkpoint on
    disk or in an object store."""
    planned = read_checkpoint(checkpoint).latest_planned
    return 0 if planned is None else planned + 1


def assert_current_exactly_once(pipeline: Pipeline, bootstrap: Cluster, stream) -> dict:
    """A CDC pipeline (docs/cdc.md): every committed record but the tombstones (no-ops) is in
    bronze or quarantine exactly once, and the keyed table holds the rows the database ended with
    (`stream`: the generator's ChangeStream, generate/changes.py), one per key, with a tombstone for
    each key deleted and not created again. Read with delta-rs, not the Spark that wrote them."""
    paths = table_paths(pipeline)
    records = consume_all(bootstrap, pipeline.source.topic, "read_committed")
    tombstones = {(p, o) for p, o, _, value in records if value is None}
    committed = {(p, o) for p, o, _, _ in records} - tombstones
    landed = Counter(
        (r["_partition"], r["_offset"])
        for name in ("bronze", "quarantine")
        for r in table_rows(paths[name], ["_partition", "_offset"])
    )
    twice = {k: n for k, n in landed.items() if n > 1}
    assert not twice, f"{len(twice)} records landed more than once, e.g. {list(twice.items())[:5]}"
    assert not tombstones & set(landed), "a tombstone (a no-op) landed in a table"
    lost, phantom = committed - set(landed), set(landed) - committed
    assert not lost and not phantom, f"lost {sorted(lost)[:10]}, phantom {sorted(phantom)[:10]}"

    compared = stream.compare_table(table_rows(paths["current"], [*pipeline.schema.names, "_deleted"]))
    assert not compared.twice, f"keys twice in the keyed table: {compared.twice[:5]}"
    shown = list(compared.differ.items())[:3]
    assert not compared.differ, (
        f"{len(compared.differ)} keys differ from the database's final table (table, expected): {shown}"
    )
    assert not compared.deleted_apart, f"deleted on one side only: {sorted(compared.deleted_apart)[:10]}"
    return {
        "committed": len(committed),
        "tombstones": len(tombstones),
        "rows": compared.rows,
        "deleted": compared.tombstones,
    }
