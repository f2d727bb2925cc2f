"""The keyed table's MERGE (spark/sinks/delta.py: newest_changes, merge_current) holds what the
reference fold (cdc/fold.py) holds, whatever the arrival order, the cut into batches, the
duplicates and the replays; so does the small groups' MERGE from the driver with delta-rs
(spark/sinks/current_rs.py), alone and taking turns with Spark's on a table with deletion
vectors; and the tombstones past their retention are purged.

Real Spark and Delta; the oracle is the plain-Python fold, not the MERGE."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from onceflow import config, tables
from onceflow.cdc.envelope import Change
from onceflow.cdc.fold import Located, State, fold
from onceflow.cdc.spec import KeyedSpec
from onceflow.deltars import Appender
from onceflow.ledger import MAINTENANCE_KEY
from onceflow.spark.sinks import current_rs
from onceflow.spark.sinks.delta import ensure_table, merge_current, newest_changes, purge_tombstones

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = config.load(ROOT / "pipelines" / "customers_cdc.yaml", env={})
SCHEMA = PIPELINE.schema


def _keyed() -> KeyedSpec:
    keyed = PIPELINE.keyed
    assert keyed is not None  # the shipped customers_cdc declares sinks.current
    return keyed


KEYED = _keyed()
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _row(key: int, n: int) -> dict:
    return {
        "id": key,
        "email": f"c{key}.{n}@example.com",
        "name": None if n % 3 == 0 else f"name {n}",
        "tier": ("free", "pro", "enterprise")[n % 3],
        "balance": Decimal(n) / 4,
        "updated_at": T0 + timedelta(seconds=n),
    }


def database_log(rng: random.Random, changes: int = 60) -> list[Located]:
    """A plausible log of one table: snapshot reads, creates, updates, deletes, primary-key
    changes (delete + create at one lsn) and a key that changes and comes back in one
    transaction; partitions by key, offsets in log order per partition."""
    live: set[int] = set()
    log: list[tuple[Change, int]] = []  # (change, partition)
    lsn = 100

    def emit(op: str, key: int, n: int, at: int) -> None:
        row = None if op == "d" else _row(key, n)
        log.append((Change(op, (key,), row, (at,)), key % 2))
        (live.discard if op == "d" else live.add)(key)

    for key in range(1, 5):
        emit("r", key, 0, lsn)
        lsn += 1
    for n in range(1, changes):
        lsn += rng.choice((1, 1, 2))
        kind = rng.random()
        if kind < 0.15 and live:
            old, new = rng.choice(sorted(live)), rng.randrange(1, 9)
            if new not in live:  # a primary-key change: both at one position
                emit("d", old, n, lsn)
                emit("c", new, n, lsn)
                continue
        if kind < 0.2 and live:  # 1 -> 7 -> 1 in one transaction: d(1) c(7) d(7) c(1)
            k, tmp = rng.choice(sorted(live)), 99
            for op, key in (("d", k), ("c", tmp), ("d", tmp), ("c", k)):
                emit(op, key, n, lsn)
            continue
        key = rng.randrange(1, 9)
        if key in live:
            emit("d" if rng.random() < 0.3 else "u", key, n, lsn)
        else:
            emit("c", key, n, lsn)
    offsets = {0: 0, 1: 0}
    located = []
    for change, p in log:
        located.append((change, p, offsets[p]))
        offsets[p] += 1
    return located


def deliveries(rng: random.Random, log: list[Located]) -> list[list[Located]]:
    """Every change at least once, some twice, in a shuffled order, cut into 2-5 batches."""
    delivered = log + rng.sample(log, len(log) // 5)
    rng.shuffle(delivered)
    cuts = sorted(rng.sample(range(1, len(delivered)), rng.randint(1, 4)))
    return [delivered[a:b] for a, b in zip([0, *cuts], [*cuts, len(delivered)], strict=True)]


def bronze_frame(spark, batch: list[Located], batch_id: int):
    """The batch as bronze holds it (tables.bronze_columns): a delete keeps its key only."""
    names = list(tables.bronze_columns(SCHEMA, KEYED))
    rows = []
    for change, partition, offset in batch:
        values = change.row or {"id": change.key[0]}
        rows.append(
            (
                *[values.get(f.name) for f in SCHEMA.fields],
                change.op,
                (change.sequence[0],),
                "customers_cdc",
                partition,
                offset,
                T0,
                batch_id,
                0,
                T0,
            )
        )
    assert len(names) + 7 == len(rows[0])
    return spark.createDataFrame(rows, tables.bronze_ddl(SCHEMA, KEYED))


def table_state(spark, path: str) -> tuple[dict, dict, dict]:
    """(live rows by key, tombstones by key, winners' (sequence, partition, offset) by key)."""
    rows, tombstones, winners = {}, {}, {}
    fields = SCHEMA.names
    for r in spark.read.format("delta").load(path).collect():
        key = (r["id"],)
        assert key not in winners, f"key {key} twice in the table"
        winners[key] = (tuple(r["_sequence"]), r["_partition"], r["_offset"])
        if r["_deleted"]:
            tombstones[key] = tuple(r["_sequence"])
            assert all(r[f] is None for f in fields if f != "id"), r
        else:
            rows[key] = {f: r[f] for f in fields}
    return rows, tombstones, winners


def expected(state: State) -> tuple[dict, dict, dict]:
    rows = {k: {**row, "updated_at": row["updated_at"].replace(tzinfo=None)} for k, row in state.rows.items() if row}
    winners = {k: (v.change.sequence, v.partition, v.offset) for k, v in state.versions.items()}
    return rows, state.tombstones, winners


def _utc_naive(rows: dict) -> dict:
    return {k: {**r, "updated_at": r["updated_at"].astimezone(UTC).replace(tzinfo=None)} for k, r in rows.items()}


@pytest.mark.parametrize("seed", [1])
def test_the_table_equals_the_fold_in_any_order_cut_and_replay(spark, tmp_path, seed):
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    rng = random.Random(seed)
    log = database_log(rng)
    path = str(tmp_path / "current")
    ensure_table(spark, path, tables.current_ddl(SCHEMA, KEYED), {tables.DELETION_VECTORS: "true"})
    batches = deliveries(rng, log)
    for batch_id, batch in enumerate(batches):
        changes = newest_changes(bronze_frame(spark, batch, batch_id), SCHEMA, KEYED)
        merge_current(spark, path, changes, KEYED, "onceflow:test:current:g0", batch_id, "{}")
    rows, tombstones, winners = table_state(spark, path)
    want_rows, want_tombstones, want_winners = expected(fold(log))
    assert tombstones, "the log deletes keys: some must be tombstones"
    assert (_utc_naive(rows), tombstones, winners) == (want_rows, want_tombstones, want_winners)

    # a replayed group (same txn id and version) is skipped; the same changes merged again under a
    # new version change nothing either: a change only replaces an older one
    versions = len(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect())
    first = newest_changes(bronze_frame(spark, batches[0], 0), SCHEMA, KEYED)
    merge_current(spark, path, first, KEYED, "onceflow:test:current:g0", 0, "{}")
    assert len(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()) == versions
    everything = newest_changes(bronze_frame(spark, log, 99), SCHEMA, KEYED)
    merge_current(spark, path, everything, KEYED, "onceflow:test:current:g1", 0, "{}")
    assert table_state(spark, path)[0] == rows and table_state(spark, path)[1:] == (tombstones, winners)


def files_with_deletion_vectors(appender: Appender) -> int:
    """How many of the table's data files have rows marked deleted in a deletion vector (delta-rs'
    add actions do not say)."""
    import pyarrow as pa

    return pa.table(appender.table().deletion_vectors()).num_rows


def test_tombstones_past_their_retention_are_purged_in_a_maintenance_commit(spark, tmp_path):
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    path = str(tmp_path / "current")
    ensure_table(spark, path, tables.current_ddl(SCHEMA, KEYED))
    log = [(Change("c", (1,), _row(1, 1), (10,)), 1, 0), (Change("d", (1,), None, (11,)), 1, 1)]
    log.append((Change("c", (2,), _row(2, 2), (12,)), 0, 0))
    merge_current(spark, path, newest_changes(bronze_frame(spark, log, 0), SCHEMA, KEYED), KEYED, "a", 0, "{}")
    assert purge_tombstones(spark, path, retention_seconds=3600) == 0  # too young: nothing, not even a commit
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert history[0]["operation"] == "MERGE"
    assert purge_tombstones(spark, path, retention_seconds=0.001) == 1
    rows, tombstones, _ = table_state(spark, path)
    assert set(rows) == {(2,)} and tombstones == {}
    last = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").first()
    assert last is not None and last["operation"] == "DELETE" and MAINTENANCE_KEY in (last["userMetadata"] or "")
    # past the retention the protection is gone: an older change of key 1 brings it back (docs/cdc.md)
    late = [(Change("u", (1,), _row(1, 0), (9,)), 1, 5)]
    merge_current(spark, path, newest_changes(bronze_frame(spark, late, 1), SCHEMA, KEYED), KEYED, "a", 1, "{}")
    assert set(table_state(spark, path)[0]) == {(1,), (2,)}


@pytest.mark.parametrize("seed", [2, 3])
def test_the_drivers_merge_alone_and_taking_turns_with_sparks_equals_the_fold(spark, tmp_path, seed):
    """Seed 2: every group from the driver; seed 3: the groups alternate between delta-rs and
    Spark, and a purge and Spark's MERGEs leave deletion vectors that delta-rs' MERGE must honour."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    rng = random.Random(seed)
    log = database_log(rng, changes=120)
    path = str(tmp_path / "current")
    ensure_table(spark, path, tables.current_ddl(SCHEMA, KEYED), {tables.DELETION_VECTORS: "true"})
    appender = Appender(path)
    app = "onceflow:test:current:g0"
    batches = [b for group in deliveries(rng, log) for b in (group[: len(group) // 2], group[len(group) // 2 :])]
    marked = 0  # delta-rs MERGEs into a table with deletion vectors
    for batch_id, batch in enumerate(batches):
        frame = bronze_frame(spark, batch, batch_id)
        if seed == 3 and batch_id % 2:
            merge_current(spark, path, newest_changes(frame, SCHEMA, KEYED), KEYED, app, batch_id, "{}")
        else:
            marked += files_with_deletion_vectors(appender) > 0
            changes = current_rs.newest_changes(frame.toArrow(), SCHEMA, KEYED)
            assert current_rs.merge_current(appender, changes, KEYED, app, batch_id, f'{{"b": {batch_id}}}')
    assert marked if seed == 3 else not marked
    rows, tombstones, winners = table_state(spark, path)
    want_rows, want_tombstones, want_winners = expected(fold(log))
    assert tombstones, "the log deletes keys: some must be tombstones"
    assert (_utc_naive(rows), tombstones, winners) == (want_rows, want_tombstones, want_winners)
    # a replayed group is skipped (the txn), as Spark's MERGE skips it
    again = current_rs.newest_changes(bronze_frame(spark, batches[0], 0).toArrow(), SCHEMA, KEYED)
    assert current_rs.merge_current(appender, again, KEYED, app, 0, "{}") is None
    assert table_state(spark, path) == (rows, tombstones, winners)
