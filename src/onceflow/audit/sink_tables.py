"""The sink tables as the audit reads them: at the Delta version pinned by the committed point,
restricted to the audited ranges, by delta-rs (no JVM).

delta-rs's scan applies deletion vectors (a keyed table's MERGEs and a DELETE by hand write
them) and skips files by their statistics on `_partition` and `_offset`. A table comes back as a
stream of batches (`scan_table`: the row reconciliation streams them into its database, never
holding a sink whole) or as one Arrow table (`read_table`, for what is small).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from onceflow.errors import OnceflowError

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable


def open_table(path: str, version: int | None) -> DeltaTable:
    """delta-rs's handle of the table at `version` (None: the newest), with the store's settings."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from onceflow.storage.location import Location

    loc = Location(path)
    try:
        if version is None:
            return DeltaTable(loc.object_uri, storage_options=loc.storage_options)
        return DeltaTable(loc.object_uri, version=version, storage_options=loc.storage_options)
    except TableNotFoundError as exc:
        raise OnceflowError(f"the Delta table {path} does not exist (version {version}): {exc}") from exc


def ranges_predicate(ranges: dict[int, tuple[int, int]]) -> str:
    """delta-rs's SQL predicate for rows whose (_partition, _offset) lie in the ranges."""
    return " OR ".join(
        f'("_partition" = {int(p)} AND "_offset" >= {int(s)} AND "_offset" < {int(e)})'
        for p, (s, e) in sorted(ranges.items())
    )


def scan_table(
    path: str,
    version: int | None,
    ranges: dict[int, tuple[int, int]] | None,
    columns: Sequence[str] | None = None,
    predicate: str | None = None,
) -> pa.RecordBatchReader:
    """read_table's rows as a stream of batches, read as they are consumed (so never held whole)."""
    import pyarrow as pa

    table = open_table(path, version)
    names = list(columns) if columns is not None else None
    if ranges is not None and not ranges:
        schema = pa.schema(table.schema().to_arrow())
        schema = schema if names is None else pa.schema([schema.field(n) for n in names])
        return pa.RecordBatchReader.from_batches(schema, [])
    where = [f"({p})" for p in (ranges_predicate(ranges) if ranges is not None else None, predicate) if p]
    return pa.RecordBatchReader.from_stream(table.scan(columns=names, predicate=" AND ".join(where) if where else None))


def read_table(
    path: str,
    version: int | None,
    ranges: dict[int, tuple[int, int]] | None,
    columns: Sequence[str] | None = None,
    predicate: str | None = None,
) -> pa.Table:
    """A sink table at the pinned version: its rows in `ranges` (None: all of them), the
    `columns` asked (None: all), and those that also meet `predicate` (delta-rs SQL)."""
    return scan_table(path, version, ranges, columns, predicate).read_all()
