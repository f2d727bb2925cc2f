"""The keyed table's small merges, from the driver with delta-rs: no Spark job (docs/cdc.md).

A continuous change stream's follower merges a few hundred changes every few seconds.
Through Spark each MERGE costs seconds of both cores (planning, reading bronze back, two
jobs, the commit), which the one-second batches need too: the keyed table lagged 18 s at
p50 (docs/benchmarks.md). A small batch's bronze rows are on the driver already (the batch
committed them from there, onceflow.deltars), so the follower keeps them and, per key,
picks the newest change here and MERGEs it with delta-rs: milliseconds, one commit with
the same app transaction and ledger entries, under the same rules and in the same columns
as Spark's MERGE (spark/sinks/delta.py `newest_changes`, `merge_current`).

delta-rs rewrites the files a MERGE touches (copy-on-write; Spark marks rows deleted in
deletion vectors), so the follower takes this path only while the table is small
(CurrentMerger, `sinks.current.driver_merge_max_mib`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from onceflow.cdc.spec import KeyedSpec
from onceflow.deltars import FEATURE_FIX, Appender
from onceflow.errors import TableFeatureError
from onceflow.schema import Schema
from onceflow.storage.commit_lock import commit_lock

if TYPE_CHECKING:
    import pyarrow as pa


def _quoted(name: str) -> str:
    """A column for delta-rs' SQL (DataFusion): double-quoted, so its case is kept."""
    return '"' + name.replace('"', '""') + '"'


def _order(rows: pa.Table, keyed: KeyedSpec) -> list[tuple]:
    """Per row, what wins: (sequence, partition, offset). Python orders these tuples as Spark
    orders the struct (no part is null: a record without one is quarantined)."""
    if keyed.debezium:
        names = [p.column for p in keyed.sequence]
        sequences = [tuple(s[n] for n in names) for s in rows.column("_sequence").to_pylist()]
    else:
        columns = [rows.column(p.name).to_pylist() for p in keyed.sequence]
        sequences = list(zip(*columns, strict=True)) if columns else [() for _ in range(rows.num_rows)]
    partitions = rows.column("_partition").to_pylist()
    offsets = rows.column("_offset").to_pylist()
    return [(s, p, o) for s, p, o in zip(sequences, partitions, offsets, strict=True)]


def _deleted(rows: pa.Table, keyed: KeyedSpec) -> list[bool]:
    """Whether each row's change deletes its key: Debezium's op 'd', else `delete_when`."""
    if keyed.debezium:
        return [op == "d" for op in rows.column("_op").to_pylist()]
    marker = keyed.delete_when
    return [marker.matches(v) for v in rows.column(marker.name).to_pylist()]


def above(rows: pa.Table, floor: dict[int, int]) -> pa.Table:
    """The rows at or above the floor (the table holds every row below it): spark/floors.py's
    `above` for rows on the driver."""
    parts, offsets = rows.column("_partition").to_pylist(), rows.column("_offset").to_pylist()
    return rows.take([i for i, (p, o) in enumerate(zip(parts, offsets, strict=True)) if o >= floor.get(p, o)])


def newest_changes(rows: pa.Table, schema: Schema, keyed: KeyedSpec) -> pa.Table:
    """Per key, the change of these bronze rows that wins: the greatest (sequence, partition,
    offset). A delete keeps its key and sequence only. In the keyed table's columns,
    `_changed_at` now."""
    import pyarrow as pa

    keys = list(zip(*[rows.column(k).to_pylist() for k in keyed.key_names], strict=True))
    best: dict[tuple, tuple[tuple, int]] = {}
    for i, (key, order) in enumerate(zip(keys, _order(rows, keyed), strict=True)):
        held = best.get(key)
        if held is None or order > held[0]:
            best[key] = (order, i)
    chosen = rows.take(sorted(i for _, i in best.values()))
    deleted = pa.array(_deleted(chosen, keyed), pa.bool_())
    key_names = set(keyed.key_names)
    columns: dict[str, Any] = {}
    for f in schema.fields:
        column = chosen.column(f.name)
        columns[f.name] = column if f.name in key_names else pa.compute.if_else(deleted, None, column)
    if keyed.debezium:
        columns["_sequence"] = chosen.column("_sequence")
    else:
        columns["_sequence"] = pa.StructArray.from_arrays(
            [chosen.column(p.name).combine_chunks() for p in keyed.sequence], names=[p.column for p in keyed.sequence]
        )
    for name in ("_partition", "_offset"):
        columns[name] = chosen.column(name)
    columns["_deleted"] = deleted
    columns["_batch_id"] = chosen.column("_batch_id")
    columns["_generation"] = chosen.column("_generation")
    now = datetime.now(UTC)
    columns["_changed_at"] = pa.array([now] * chosen.num_rows, pa.timestamp("us", tz="UTC"))
    return pa.table(columns)


def _newer(keyed: KeyedSpec) -> str:
    """The source's change is newer than the table's row: (sequence, partition, offset) compared
    part by part, as Spark compares the structs in merge_current."""
    parts = [f"\"_sequence\"['{p.column}']" for p in keyed.sequence] + ['"_partition"', '"_offset"']
    terms = []
    for i, part in enumerate(parts):
        equal = [f"s.{q} = t.{q}" for q in parts[:i]]
        terms.append("(" + " AND ".join([*equal, f"s.{part} > t.{part}"]) + ")")
    return " OR ".join(terms)


def merge_current(
    appender: Appender, changes: pa.Table, keyed: KeyedSpec, app_id: str, version: int, metadata: str
) -> int | None:
    """Apply `changes` (newest_changes) in one MERGE whose commit holds `metadata` and the
    transaction (`app_id`, `version`): a key's row is replaced only by a newer change, a key
    not in the table is inserted (a delete's as its tombstone). The new table version, or None
    when that transaction is already committed (a replayed group). TableFeatureError when
    delta-rs cannot write the table."""
    import pyarrow as pa
    from deltalake.exceptions import DeltaError
    from deltalake.transaction import CommitProperties, Transaction

    on = " AND ".join(f"t.{_quoted(k)} = s.{_quoted(k)}" for k in keyed.key_names)
    with commit_lock(appender.location):  # Spark's commits to this table wait (storage/commit_lock.py)
        table = appender.table()
        seen = table.transaction_version(app_id)
        if seen is not None and seen >= version:
            return None
        schema = pa.schema(table.schema().to_arrow())
        source = changes.select(schema.names).cast(schema)
        try:
            (
                table.merge(
                    source,
                    on,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=CommitProperties(
                        custom_metadata={"userMetadata": metadata}, app_transactions=[Transaction(app_id, version)]
                    ),
                )
                .when_matched_update_all(predicate=_newer(keyed))
                .when_not_matched_insert_all()
                .execute()
            )
        except DeltaError as exc:  # refused before anything is written: the commit is all or nothing
            if "nsupported" not in str(exc):
                raise
            raise TableFeatureError(appender.path, str(exc), FEATURE_FIX) from exc
        table.update_incremental()
        return table.version()


def driver_mergeable(appender: Appender, max_bytes: int) -> bool:
    """Whether a small group's MERGE goes through delta-rs: while the table's data files hold at
    most `max_bytes` (sinks.current.driver_merge_max_mib), so rewriting what a MERGE touches stays
    cheap in time and in the files it leaves for VACUUM."""
    if max_bytes <= 0:
        return False
    sizes = appender.table().get_add_actions(flatten=True).column("size_bytes").to_pylist()
    return sum(sizes) <= max_bytes
