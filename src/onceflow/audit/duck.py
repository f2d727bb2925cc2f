"""The audit's DuckDB: one in-memory database per comparison, over Arrow tables, no JVM. What every
comparison shares: the session in UTC, column names quoted, the declared SQL types in DuckDB's."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# a declared (Spark SQL) type -> DuckDB's where the names differ: a STRING is a VARCHAR, a TIMESTAMP
# an instant (Delta stores UTC microseconds; delta-rs and the judge give them with tz UTC)
_TYPES = {"STRING": "VARCHAR", "TIMESTAMP": "TIMESTAMPTZ"}


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory database for one audit's comparison, its session in UTC."""
    import duckdb

    db = duckdb.connect()
    db.execute("SET TimeZone = 'UTC'")  # TIMESTAMP -> TIMESTAMPTZ and Arrow's tz read as UTC
    return db


# the memory the row reconciliation's database may hold before it spills to disk, in MB (default: a
# quarter of the memory free when it starts, at least 512 MB and at most 2 GB)
MEMORY_ENV = "ONCEFLOW_AUDIT_MEMORY_MB"


def memory_limit_mb(available: int) -> int:
    """The database's memory limit: MEMORY_ENV's, or a quarter of `available` bytes within [512, 2048] MB."""
    import os

    mb = os.environ.get(MEMORY_ENV, "").strip()
    if mb:
        try:
            return max(64, int(mb))
        except ValueError:
            raise ValueError(f"{MEMORY_ENV}={mb!r}: a number of megabytes, e.g. 1024") from None
    return max(512, min(2048, available // 4 // 2**20))


def spilling(temp_directory: str) -> duckdb.DuckDBPyConnection:
    """connect(), bounded: past its memory limit DuckDB writes what it holds to `temp_directory`
    (its tables, joins and groupings all spill), so an audit's memory does not grow with its data."""

    import psutil

    limit = memory_limit_mb(psutil.virtual_memory().available)
    db = connect()
    db.execute(f"SET memory_limit = '{limit}MB'")
    db.execute(f"SET temp_directory = '{temp_directory}'")
    return db


def ident(column: str) -> str:
    """A column's name quoted for SQL (DuckDB's and delta-rs's alike)."""
    return '"' + column.replace('"', '""') + '"'


def sql_type(declared: str) -> str:
    """A declared column type (tables.py's DDL: STRING, INT, BIGINT, DOUBLE, BOOLEAN, DATE,
    TIMESTAMP, DECIMAL(p,s)) in DuckDB's names."""
    return _TYPES.get(declared.upper(), declared)


class HeldTable:
    """A sink's audited rows as the reconciliation's database holds them (spilled to disk past its
    memory limit): what Great Expectations and the aggregates read of them, in delta-rs's types."""

    def __init__(self, con: duckdb.DuckDBPyConnection, name: str, schema: pa.Schema):
        self.con, self.name, self.schema = con, name, schema
        self.num_rows = int(con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0])

    def read(self, columns: list[str] | None = None, every: int = 1) -> pa.Table:
        """Its rows in the order they were read (every `every`-th of them), the `columns` asked (None: all)."""
        import pyarrow as pa

        names = self.schema.names if columns is None else columns
        where = f"WHERE rowid % {int(every)} = 0 " if every > 1 else ""
        table = self.con.sql(f"SELECT {', '.join(ident(c) for c in names)} FROM {self.name} {where}ORDER BY rowid")
        return table.to_arrow_table().cast(pa.schema([self.schema.field(c) for c in names]))
