"""Exactly-once assertions shared by the ingest tests.

The tables are read with delta-rs (shares no code with Spark) and compared with
what an independent read_committed consumer sees — the shape of Kafka's own
transactions system test: input set == output set, zero duplicates.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import timedelta
from decimal import Decimal

from deltalake import DeltaTable

from onceflow.config import Pipeline, duration_seconds
from onceflow.kafka.producer import VALID
from onceflow.spark.ingest import table_paths
from tests.kafka_helpers import consume_all


def _rows(path: str, columns: list[str]) -> list[dict]:
    """The table's rows, read by delta-rs's query engine, which applies deletion vectors
    (the aggregates table has them; delta-rs's pyarrow reader refuses such tables)."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    select = ", ".join(f'"{c}"' for c in columns)
    return pa.table(QueryBuilder().register("t", DeltaTable(path)).execute(f"SELECT {select} FROM t").read_all()
                    ).to_pylist()


def assert_exactly_once(pipeline: Pipeline, bootstrap: str, produced=None) -> dict:
    """Every committed record is in bronze or quarantine exactly once, nothing else
    is there, and the aggregates equal a recomputation from bronze. `produced`: the
    generator summaries (with records), to check each malformed record's reason."""
    paths = table_paths(pipeline)
    committed = {(p, o) for p, o, _, _ in consume_all(bootstrap, pipeline.source.topic, "read_committed")}
    bronze = _rows(paths["bronze"], ["_partition", "_offset", "event_id", "account_id", "amount", "event_time"])
    quarantine = _rows(paths["quarantine"], ["_partition", "_offset", "reason"])

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
    ids = Counter(r["event_id"] for r in bronze)
    dup_ids = [i for i, n in ids.items() if n > 1]
    assert not dup_ids, f"{len(dup_ids)} event_ids duplicated in bronze, e.g. {dup_ids[:5]}"

    if produced is not None:
        expected = {(r.partition, r.offset): r.kind for s in produced for r in s.records if not r.aborted}
        reasons = {(r["_partition"], r["_offset"]): r["reason"] for r in quarantine}
        wrong = {k: (kind, reasons.get(k)) for k, kind in expected.items()
                 if kind != VALID and reasons.get(k) != kind}
        assert not wrong, f"{len(wrong)} malformed records without their reason, e.g. {list(wrong.items())[:5]}"

    if "aggregates" in paths:
        assert_aggregates_match(pipeline, bronze, paths["aggregates"])
    return {"committed": len(committed), "bronze": len(bronze), "quarantine": len(quarantine)}


def assert_aggregates_match(pipeline: Pipeline, bronze: list[dict], path: str) -> None:
    """The streaming aggregate table equals a batch recomputation from bronze, row for row."""
    width = timedelta(seconds=duration_seconds(pipeline.sinks.aggregates.window))
    expected: dict[tuple, list] = defaultdict(lambda: [0, Decimal("0")])
    for r in bronze:
        t = r["event_time"]
        start = t - timedelta(seconds=(t.timestamp() % width.total_seconds()))
        acc = expected[(r["account_id"], start.replace(microsecond=0))]
        acc[0] += 1
        acc[1] += r["amount"]
    rows = _rows(path, ["account_id", "window_start", "events", "amount_sum"])
    actual = {(r["account_id"], r["window_start"]): [r["events"], r["amount_sum"]] for r in rows}
    assert len(actual) == len(rows), "aggregate keys must be unique"
    diff = {k: (expected.get(k), actual.get(k)) for k in set(expected) | set(actual)
            if expected.get(k) != actual.get(k)}
    assert not diff, f"{len(diff)} aggregate rows differ from the recomputation, e.g. {list(diff.items())[:3]}"
