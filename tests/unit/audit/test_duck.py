"""The audit's DuckDB session: UTC, quoted names, the declared types in DuckDB's names."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from onceflow.audit.duck import connect, ident, sql_type


def test_a_declared_timestamp_is_an_instant_read_and_shown_in_utc():
    db = connect()
    db.register("t", pa.table({"ts": pa.array([datetime(2026, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))}))
    cast = f"CAST('2026-01-01 00:00:00' AS {sql_type('TIMESTAMP')})"
    assert db.execute(f"SELECT ts = {cast}, CAST(ts AS VARCHAR) FROM t").fetchone() == (
        True,
        "2026-01-01 00:00:00+00",
    )


def test_odd_column_names_are_quoted_and_types_keep_their_precision():
    db = connect()
    name = 'a "b" c'
    db.register("t", pa.table({name: [1]}))
    assert db.execute(f"SELECT {ident(name)} FROM t").fetchone() == (1,)
    assert sql_type("STRING") == "VARCHAR" and sql_type("DECIMAL(18,2)") == "DECIMAL(18,2)" and sql_type("INT") == "INT"
