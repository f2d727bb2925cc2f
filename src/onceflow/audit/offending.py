"""Where a row check broke: runs of offending offsets as ranges [start, end) per partition, the
first of them for the report, and the filter that finds the rows at given coordinates (DuckDB SQL
over the audit's joined coordinates)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.reconcile import MAX_RANGES

if TYPE_CHECKING:
    import duckdb


def islands(con: duckdb.DuckDBPyConnection, table: str, flag: str, base: str | None = None) -> tuple[list[dict], int]:
    """Runs of consecutive flagged rows of `table` per partition, as (partition, start, end, count):
    the first MAX_RANGES in (partition, start) order, and how many there are.

    With `base` (a condition), runs are consecutive in the order of the base's rows (records
    between two lost ones that are not records — transaction markers, aborted records — do not
    split a range); without it, in raw offsets.
    """
    order = "OVER (PARTITION BY _partition ORDER BY _offset)"
    if base is not None:
        seq = (
            f"SELECT _partition, _offset, rn - row_number() {order} AS grp FROM "
            f"(SELECT _partition, _offset, ({flag}) AS flagged, row_number() {order} AS rn FROM {table} "
            f"WHERE {base}) WHERE flagged"
        )
    else:
        seq = f"SELECT _partition, _offset, _offset - row_number() {order} AS grp FROM {table} WHERE {flag}"
    runs = (
        "SELECT _partition AS partition, min(_offset) AS start, max(_offset) + 1 AS end, count(*) AS count "
        f"FROM ({seq}) GROUP BY _partition, grp"
    )
    con.execute(f"CREATE OR REPLACE TEMP TABLE _islands AS {runs}")
    (total,) = con.execute("SELECT count(*) FROM _islands").fetchall()[0]
    rows = con.execute(f"SELECT * FROM _islands ORDER BY partition, start LIMIT {MAX_RANGES}").fetchall()
    names = ("partition", "start", "end", "count")
    return [dict(zip(names, (int(v) for v in r), strict=True)) for r in rows], int(total)


def at_keys(keys: list[tuple[int, int]]) -> str:
    """Rows at these (partition, offset) coordinates, as an SQL condition."""
    return " OR ".join(f"(_partition = {int(p)} AND _offset = {int(o)})" for p, o in keys) or "FALSE"


def ranges_text(what: str, ranges: list[dict], total: int) -> str:
    """'lost: partition 0 [5, 9) (4), ...', the first 20 ranges and how many more."""
    if not ranges:
        return ""
    shown = ", ".join(f"partition {r['partition']} [{r['start']}, {r['end']}) ({r['count']})" for r in ranges[:20])
    more = f" … and {total - 20} more ranges" if total > 20 else ""
    return f"{what}: {shown}{more}"
