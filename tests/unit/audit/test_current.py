"""The keyed table (sinks.current) vs an independent replay of its bronze changes (audit/current.py):
the comparison as a pure function, then once on real Delta tables read with delta-rs. No Spark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties

from onceflow import tables
from onceflow.audit import current as cur
from onceflow.cdc.spec import resolve
from onceflow.config import load
from onceflow.ledger import LedgerEntry, group_json, read_ledger
from onceflow.reconcile import CheckStatus, committed_point
from onceflow.schema.model import Schema

SCHEMA = Schema.model_validate(
    {
        "format": "debezium",
        "event_time": "updated_at",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "email", "type": "string"},
            {"name": "updated_at", "type": "timestamp"},
        ],
    }
)
SPEC = resolve(SCHEMA, ["id"], "source.lsn")
NAMES = SCHEMA.names
T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = 86400.0
RETENTION = 7 * DAY


def bronze(op: str, key: int, lsn: int, offset: int, email: str | None = None, ingested: datetime = T0) -> dict:
    """A bronze row of a Debezium change (a delete holds its key only)."""
    live = op != "d"
    return {
        "id": key,
        "email": (email or f"{key}@{lsn}") if live else None,
        "updated_at": T0 + timedelta(seconds=lsn) if live else None,
        "_op": op,
        "_sequence": {"source_lsn": lsn},
        "_partition": 0,
        "_offset": offset,
        "_ingested_at": ingested,
    }


def row_of(b: dict, changed_at: datetime = T0, **changes) -> dict:
    """The keyed table's row for the change of bronze row `b`."""
    deleted = b["_op"] == "d"
    return {
        **{n: b[n] for n in NAMES},
        "_sequence": dict(b["_sequence"]),
        "_partition": b["_partition"],
        "_offset": b["_offset"],
        "_deleted": deleted,
        "_batch_id": 0,
        "_generation": 0,
        "_changed_at": changed_at,
        **changes,
    }


# key 1: created, updated (lsn 20 wins); key 2: created then deleted (a tombstone); key 3: created;
# key 4: an update arriving after a newer one (lsn 8 < 9)
LOG = [
    bronze("c", 1, 10, 0, "a@x"),
    bronze("u", 1, 20, 1, "b@x"),
    bronze("c", 2, 15, 2),
    bronze("d", 2, 30, 3),
    bronze("r", 3, 5, 4),
    bronze("u", 4, 9, 5, "new@x"),
    bronze("u", 4, 8, 6, "late@x"),
]
TABLE = [row_of(LOG[1]), row_of(LOG[3]), row_of(LOG[4]), row_of(LOG[5])]


def run(table: list[dict], log: list[dict] = LOG, as_of: datetime | None = T0 + timedelta(hours=1)):
    result = cur.compare(SPEC, NAMES, log, table, RETENTION, as_of)
    return result, {c.name: c for c in result.checks}


def test_a_table_that_equals_the_fold_passes_every_check():
    result, checks = run(TABLE)
    assert [c.status for c in result.checks] == [CheckStatus.PASSED] * 3
    assert list(checks) == ["current_rows", "current_tombstones", "current_keys_unique"]
    assert (result.live_rows, result.tombstones, result.table_rows, result.purged) == (3, 1, 4, 0)
    assert checks["current_rows"].expected == {"rows": 3, "differing": 0}
    assert checks["current_tombstones"].observed["tombstones"] == 1 and not result.findings


def test_a_row_changed_by_hand_fails_with_both_sides_shown():
    table = [row_of(LOG[1], email="hacked@x"), *TABLE[1:]]
    result, checks = run(table)
    rows = checks["current_rows"]
    assert rows.status == CheckStatus.FAILED and rows.observed["differs"] == 1
    (sample,) = rows.samples
    assert sample["key"] == {"id": 1} and sample["kind"] == cur.Mismatch.DIFFERS
    assert sample["fold"]["email"] == "b@x" and sample["table"]["email"] == "hacked@x"
    assert sample["fold"]["_sequence"] == {"source_lsn": 20}
    assert result.findings == [
        {
            "check": "current",
            "partition": None,
            "start": None,
            "end": None,
            "count": 1,
            "key": "1",
            "kind": "current_rows: differs",
        }
    ]
    assert checks["current_tombstones"].passed and checks["current_keys_unique"].passed


def test_another_winner_with_the_same_values_fails():
    """The late older change (lsn 8) kept instead of the newer one: a MERGE that ignored the order."""
    _, checks = run([*TABLE[:3], row_of(LOG[6], email="new@x")])
    assert checks["current_rows"].status == CheckStatus.FAILED
    _, checks = run([*TABLE[:3], row_of(LOG[5], _offset=99)])  # the right values, the wrong position
    assert checks["current_rows"].status == CheckStatus.FAILED


def test_a_missing_row_fails():
    _, checks = run([t for t in TABLE if t["id"] != 3])
    rows = checks["current_rows"]
    assert rows.status == CheckStatus.FAILED and rows.observed["missing_in_table"] == 1
    assert rows.samples[0]["table"] is None and rows.samples[0]["fold"]["id"] == 3


def test_an_extra_row_fails():
    extra = row_of(bronze("c", 9, 1, 99))
    _, checks = run([*TABLE, extra])
    assert checks["current_rows"].status == CheckStatus.FAILED and checks["current_rows"].observed["not_in_bronze"] == 1
    _, checks = run([*TABLE, row_of(bronze("d", 9, 1, 99))])  # an extra tombstone
    assert checks["current_tombstones"].status == CheckStatus.FAILED


def test_a_resurrected_key_fails():
    # key 2's row of lsn 15 although its delete at lsn 30 is newer, taken now: its tombstone is young
    table = [row_of(LOG[1]), row_of(LOG[2]), *TABLE[2:]]
    _, checks = run(table)
    rows = checks["current_rows"]
    assert rows.status == CheckStatus.FAILED and rows.observed["resurrected"] == 1
    assert rows.samples[0]["fold"]["_deleted"] is True and rows.samples[0]["table"]["_deleted"] is False


def test_a_key_deleted_in_the_table_only_fails():
    _, checks = run([row_of(LOG[1], _deleted=True, email=None, updated_at=None), *TABLE[1:]])
    assert checks["current_rows"].status == CheckStatus.FAILED
    assert checks["current_rows"].observed["deleted_in_table"] == 1


def test_a_tombstone_with_another_winner_or_its_fields_set_fails():
    _, checks = run([TABLE[0], row_of(LOG[3], _offset=42), *TABLE[2:]])
    assert checks["current_tombstones"].status == CheckStatus.FAILED
    _, checks = run([TABLE[0], row_of(LOG[3], email="left@x"), *TABLE[2:]])
    assert checks["current_tombstones"].status == CheckStatus.FAILED and checks["current_rows"].passed


def test_a_tombstone_purged_past_the_retention_is_informational_a_young_one_missing_fails():
    without = [t for t in TABLE if t["id"] != 2]
    result, checks = run(without, as_of=T0 + timedelta(days=8))
    assert all(c.passed for c in result.checks) and result.purged == 1
    assert checks["current_tombstones"].observed["purged"] == 1 and "purged" in checks["current_tombstones"].detail
    result, checks = run(without, as_of=T0 + timedelta(days=1))  # a day old: not purgeable yet
    assert checks["current_tombstones"].status == CheckStatus.FAILED and result.purged == 0
    assert checks["current_tombstones"].observed["missing_in_table"] == 1


def test_a_key_revived_by_a_late_older_change_after_the_purge_is_informational():
    """docs/cdc.md#tombstones-and-retention: once the tombstone is gone, an older change that
    arrives later is applied as if the key had never been deleted."""
    old = [*LOG[:2], bronze("c", 2, 15, 2, ingested=T0 + timedelta(days=9)), bronze("d", 2, 30, 3), *LOG[4:]]
    revived = row_of(old[2], changed_at=T0 + timedelta(days=9))
    result, checks = run([TABLE[0], revived, *TABLE[2:]], log=old, as_of=T0 + timedelta(days=9))
    assert all(c.passed for c in result.checks) and result.revived == 1
    # the same row taken a day after the delete: its tombstone was still there
    early = row_of(old[2], changed_at=T0 + timedelta(days=1))
    _, checks = run([TABLE[0], early, *TABLE[2:]], log=old)
    assert checks["current_rows"].observed["resurrected"] == 1
    # a row the bronze change does not hold is no revival
    forged = row_of(old[2], changed_at=T0 + timedelta(days=9), email="forged@x")
    _, checks = run([TABLE[0], forged, *TABLE[2:]], log=old)
    assert checks["current_rows"].status == CheckStatus.FAILED


def test_a_key_held_twice_fails():
    result, checks = run([*TABLE, row_of(LOG[4])])
    unique = checks["current_keys_unique"]
    assert unique.status == CheckStatus.FAILED and unique.observed == {"keys": 1, "extra_rows": 1}
    assert unique.samples[0]["key"] == {"id": 3} and len(unique.samples[0]["table"]) == 2
    assert {"check": "current", "kind": "current_keys_unique: duplicate_key"}.items() <= result.findings[0].items()


def test_a_bronze_row_without_its_sequence_fails():
    broken = {**bronze("u", 3, 6, 7), "_sequence": {"source_lsn": None}}
    _, checks = run(TABLE, log=[*LOG, broken])
    rows = checks["current_rows"]
    assert rows.status == CheckStatus.FAILED and rows.observed["unusable_bronze_row"] == 1
    assert "at partition 0 offset 7" in rows.detail


def test_plain_events_with_a_delete_marker_are_folded_too():
    schema = Schema.model_validate(
        {
            "event_time": "ts",
            "fields": [
                {"name": "id", "type": "string"},
                {"name": "version", "type": "long"},
                {"name": "gone", "type": "boolean"},
                {"name": "ts", "type": "timestamp"},
            ],
        }
    )
    spec = resolve(schema, ["id"], "version", "gone")
    rows = [
        {"id": "a", "version": 1, "gone": False, "ts": T0, "_partition": 0, "_offset": 0},
        {"id": "a", "version": 2, "gone": True, "ts": T0, "_partition": 0, "_offset": 1},
        {"id": "b", "version": 1, "gone": False, "ts": T0, "_partition": 0, "_offset": 2},
    ]
    own = {"_batch_id": 0, "_generation": 0, "_changed_at": T0}
    table = [
        {**rows[2], "_sequence": {"version": 1}, "_deleted": False, **own},
        {"id": "a", "version": None, "gone": None, "ts": None, "_sequence": {"version": 2}, "_partition": 0}
        | {"_offset": 1, "_deleted": True, **own},
    ]
    result = cur.compare(spec, schema.names, rows, table, RETENTION, T0)
    assert all(c.passed for c in result.checks) and (result.live_rows, result.tombstones) == (1, 1)


# -- on Delta tables, read with delta-rs ---------------------------------------------------------
def _arrow(columns: dict[str, str]) -> pa.Schema:
    types = {
        "BIGINT": pa.int64(),
        "INT": pa.int32(),
        "STRING": pa.string(),
        "BOOLEAN": pa.bool_(),
        "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    }
    struct = pa.struct([pa.field("source_lsn", pa.int64())])
    return pa.schema([(n, struct if t.startswith("STRUCT") else types[t]) for n, t in columns.items()])


BRONZE_COLUMNS = {**tables.bronze_columns(SCHEMA, SPEC), "_partition": "INT", "_offset": "BIGINT"}
BRONZE_COLUMNS |= {"_batch_id": "BIGINT", "_generation": "INT", "_ingested_at": "TIMESTAMP"}


def _entry(sink: str, batch: int, start: int, end: int) -> LedgerEntry:
    return LedgerEntry("customers", sink, 0, batch, "customers_cdc", {0: start}, {0: end}, rows=end - start)


def _commit(path: str, rows: list[dict], columns: dict[str, str], metadata: str, mode: str = "append") -> None:
    schema = _arrow(columns)
    data = pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in rows], schema=schema)
    props = CommitProperties(custom_metadata={"userMetadata": metadata})
    write_deltalake(path, data, mode=mode, commit_properties=props)  # type: ignore[call-overload]


@pytest.fixture
def cdc_pipeline(tmp_path):
    """A Debezium pipeline whose bronze holds LOG in two batches and whose keyed table holds their
    fold, each commit with its ledger entry, as the job writes them."""
    (tmp_path / "customers.yaml").write_text(
        f"""
name: customers
source: {{bootstrap_servers: localhost:9092, topic: customers_cdc}}
schema:
  format: debezium
  event_time: updated_at
  fields:
    - {{name: id, type: long}}
    - {{name: email, type: string}}
    - {{name: updated_at, type: timestamp}}
sinks:
  bronze: {{path: {tmp_path}/bronze}}
  quarantine: {{path: {tmp_path}/quarantine}}
  current: {{path: {tmp_path}/current, keys: [id], sequence_by: source.lsn}}
checkpoint: {tmp_path}/checkpoint
"""
    )
    pipeline = load(tmp_path / "customers.yaml")
    b, c = str(tmp_path / "bronze"), str(tmp_path / "current")
    current_columns = tables.current_columns(SCHEMA, SPEC)
    _commit(b, [], BRONZE_COLUMNS, "{}", mode="error")  # CREATE TABLE: no entry
    _commit(c, [], current_columns, "{}", mode="error")
    _commit(b, LOG[:4], BRONZE_COLUMNS, _entry("bronze", 0, 0, 4).to_json())
    _commit(b, LOG[4:], BRONZE_COLUMNS, _entry("bronze", 1, 4, 7).to_json())
    _commit(c, TABLE, current_columns, group_json([_entry("current", 0, 0, 4), _entry("current", 1, 4, 7)]))
    return pipeline


def _point(pipeline):
    ledgers = {
        "bronze": read_ledger(pipeline.resolve(pipeline.sinks.bronze.path)),
        "current": read_ledger(pipeline.resolve(pipeline.sinks.current.path)),
    }
    return committed_point(pipeline.source.topic, None, ledgers)


def test_on_delta_tables_a_faithful_table_passes_and_one_edited_by_hand_fails(cdc_pipeline):
    point = _point(cdc_pipeline)
    assert point.sinks["current"].end == {0: 7}
    result = cur.reconcile_current(cdc_pipeline, point)
    assert [c.status for c in result.checks] == [CheckStatus.PASSED] * 3, [c.detail for c in result.checks]
    assert (result.live_rows, result.tombstones, result.table_rows) == (3, 1, 4)

    path = cdc_pipeline.resolve(cdc_pipeline.sinks.current.path)
    DeltaTable(path).update(updates={"email": "'hacked@x'"}, predicate="id = 1")  # a commit with no ledger entry
    edited = _point(cdc_pipeline)
    assert edited.sinks["current"].foreign_commits  # the audit reads the version the edit made
    checks = {c.name: c for c in cur.reconcile_current(cdc_pipeline, edited).checks}
    assert checks["current_rows"].status == CheckStatus.FAILED
    assert checks["current_rows"].samples[0]["table"]["email"] == "hacked@x"
    # pinned: the point read before the edit still judges the table as it was
    assert all(c.passed for c in cur.reconcile_current(cdc_pipeline, point).checks)


def test_on_delta_tables_only_the_bronze_rows_below_the_keyed_tables_end_are_folded(cdc_pipeline):
    """The keyed table trails bronze: bronze's newer batch is not expected in it yet."""
    b = cdc_pipeline.resolve(cdc_pipeline.sinks.bronze.path)
    _commit(b, [bronze("u", 3, 50, 7, "later@x")], BRONZE_COLUMNS, _entry("bronze", 2, 7, 8).to_json())
    point = _point(cdc_pipeline)
    assert point.sinks["current"].end == {0: 7} and point.sinks["bronze"].end == {0: 8}
    assert all(c.passed for c in cur.reconcile_current(cdc_pipeline, point).checks)


def test_without_a_keyed_table_the_check_is_skipped(cdc_pipeline):
    point = _point(cdc_pipeline)
    del point.sinks["current"]
    (only,) = cur.reconcile_current(cdc_pipeline, point).checks
    assert only.status == CheckStatus.SKIPPED
