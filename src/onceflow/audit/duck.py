"""The audit's DuckDB: one in-memory database per comparison, over Arrow tables, no JVM. What every
comparison shares: the session in UTC, column names quoted, the declared SQL types in DuckDB's."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

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
# quarter of the memory free when it starts, at least 512 MB and at most 3 GB)
MEMORY_ENV = "ONCEFLOW_AUDIT_MEMORY_MB"


def spilling(temp_directory: str) -> duckdb.DuckDBPyConnection:
    """connect(), bounded: past its memory limit DuckDB writes what it holds to `temp_directory`
    (its tables, joins and groupings all spill), so an audit's memory does not grow with its data."""
    import os

    import psutil

    mb = os.environ.get(MEMORY_ENV, "").strip()
    limit = int(mb) if mb else max(512, min(3072, psutil.virtual_memory().available // 4 // 2**20))
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
