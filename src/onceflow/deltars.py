"""Delta commits made from Python with delta-rs, no JVM: small appends that carry a ledger entry.

A Delta-Spark commit costs about half a second of driver work on 2 cores whatever it
holds (snapshot state, commit protocol, post-commit hooks; docs/benchmarks.md), and a
continuous stream's micro-batch holds a few thousand records. delta-rs commits them in
milliseconds. The streaming job appends a small batch's bronze and quarantine here (a
large batch's quarantine too, when it is small; an aggregates merge that holds no
rows), recovery its LOSS entries. Both writers speak the same Delta protocol, and the
same `txn` action makes a commit idempotent for either: Delta-Spark skips an
(app id, version) it has already seen, and so does `Appender.append`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.errors import TableFeatureError
from onceflow.storage.commit_lock import commit_lock
from onceflow.storage.location import Location

if TYPE_CHECKING:
    from deltalake import DeltaTable

# Spark's writer supports every Delta table feature; delta-rs some (liquid clustering, row
# tracking and identity columns need ones it lacks: domainMetadata, rowTracking, ...)
FEATURE_FIX = (
    "drop the feature from the table (ALTER TABLE ... DROP FEATURE), or, for bronze and quarantine, "
    "set source.driver_commit_max_offsets: 0 in the pipeline file so that Spark's Delta writer "
    "commits every batch (a running stream switches to it by itself; docs/pipeline-config.md)"
)


def table_schema_json(path: str) -> str:
    """The table's schema as its log states it: the JSON of Spark's StructType (Delta's protocol)."""
    from deltalake import DeltaTable

    return DeltaTable(path, storage_options=Location(path).storage_options).schema().to_json()


class Appender:
    """Idempotent appends to one Delta table, its log read once and then incrementally."""

    def __init__(self, path: str, storage_options: dict[str, str] | None = None):
        self.path = path
        self.location = Location(path)
        self.storage_options = storage_options if storage_options is not None else self.location.storage_options
        self._table: DeltaTable | None = None

    def table(self):
        """The table's delta-rs handle, brought up to its newest version."""
        from deltalake import DeltaTable

        if self._table is None:
            self._table = DeltaTable(self.path, storage_options=self.storage_options)
        else:
            self._table.update_incremental()
        return self._table

    def append(self, data, metadata: str, app_id: str, version: int) -> int | None:
        """Append `data` (a pyarrow Table, or anything `pa.table` takes; None: no rows)
        in one commit holding `metadata` as its userMetadata and the transaction
        (`app_id`, `version`). Returns the new table version, or None when a commit with
        that app id at this version or later is already there (a replayed batch)."""
        with commit_lock(self.location):  # Spark's commits to this table wait (storage/commit_lock.py)
            return self._append_locked(data, metadata, app_id, version)

    def _append_locked(self, data, metadata: str, app_id: str, version: int) -> int | None:
        import pyarrow as pa
        from deltalake import write_deltalake
        from deltalake.exceptions import DeltaError
        from deltalake.transaction import CommitProperties, Transaction

        try:
            table = self.table()
            seen = table.transaction_version(app_id)
            if seen is not None and seen >= version:
                return None
            schema = pa.schema(table.schema().to_arrow())
            rows = schema.empty_table() if data is None else data if isinstance(data, pa.Table) else pa.table(data)
            rows = rows.select(schema.names).cast(schema) if rows.num_rows else schema.empty_table()
            write_deltalake(
                table,
                rows,
                mode="append",
                storage_options=self.storage_options,
                commit_properties=CommitProperties(
                    custom_metadata={"userMetadata": metadata}, app_transactions=[Transaction(app_id, version)]
                ),
            )
        except DeltaError as exc:  # refused before anything is written: the commit is all or nothing
            if "nsupported" not in str(exc):  # "Unsupported table features required: [DomainMetadata]"
                raise
            raise TableFeatureError(self.path, str(exc), FEATURE_FIX) from exc
        table.update_incremental()
        return table.version()

    def small_files(self, below_bytes: int) -> int:
        """How many of the table's data files are smaller than `below_bytes`."""
        sizes = self.table().get_add_actions(flatten=True).column("size_bytes").to_pylist()
        return sum(1 for size in sizes if size < below_bytes)
