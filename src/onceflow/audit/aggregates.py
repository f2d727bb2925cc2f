"""The streaming aggregate table vs a batch recomputation from bronze, row for row.

The job merges each batch's per-window metrics into the table (late events are
added, never dropped), so at every committed point the table must equal
`GROUP BY <group_by>, window(<event_time>)` over the bronze rows of the batches
the aggregates ledger holds, with the declared metrics computed over all of them
at once (not merged batch by batch, as the job does). A full outer join on
(group_by, window_start) finds windows missing on either side and windows whose
metrics differ.

The recomputation and the join run in DuckDB over the Arrow tables delta-rs reads
(audit/sink_tables.py): no JVM, and no code shared with the Spark job that wrote the table.
Windows are Spark's tumbling windows: aligned to the Unix epoch, in UTC microseconds.

An incremental audit compares only the windows touched by the newly audited
bronze rows, recomputed from every bronze row of those windows.
"""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from onceflow import tables
from onceflow.audit.duck import HeldTable, connect, ident, spilling, sql_type
from onceflow.audit.sink_tables import scan_table
from onceflow.config import Pipeline
from onceflow.reconcile import (
    MAX_RANGES,
    MAX_SAMPLES,
    AuditScope,
    Check,
    CheckGroup,
    CheckStatus,
    CommittedPoint,
    check,
    jsonable,
)
from onceflow.schema.model import Metric
from onceflow.sink_kinds import SinkName

# relative difference allowed between a streamed and a recomputed double metric (exact for the others)
DOUBLE_TOLERANCE = 1e-9
TITLE = "streaming aggregates equal a batch recomputation from bronze, row for row"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _types(pipeline: Pipeline) -> dict[str, str]:
    """The aggregates table's columns in DuckDB's types: Spark's STRING is a VARCHAR, and its
    TIMESTAMP an instant (Delta stores UTC microseconds, delta-rs reads them with tz UTC)."""
    assert pipeline.sinks.aggregates is not None  # called for a pipeline with sinks.aggregates
    columns = tables.aggregate_columns(pipeline.schema, pipeline.sinks.aggregates)
    return {c: sql_type(t) for c, t in columns.items()}


def _metric(m: Metric, sql_type: str) -> str:
    """One metric over a window's rows; a sum adds in the column's own type, as wide as the
    declaration made it (a long's sum would overflow a bigint)."""
    if m.func == "count":
        return f"CAST(count(*) AS {sql_type})"
    arg = ident(m.field or "")
    return f"CAST({m.func}({f'CAST({arg} AS {sql_type})' if m.func == 'sum' else arg}) AS {sql_type})"


def _width(pipeline: Pipeline) -> int:
    """The window's width in microseconds."""
    assert pipeline.sinks.aggregates is not None
    return round(pipeline.sinks.aggregates.window_seconds * 1_000_000)


def _recompute_sql(pipeline: Pipeline, source: str) -> str:
    """`GROUP BY <group_by>, window(<event_time>, <window>)` over the relation `source`, as Spark
    computes it: window_start = ts - (ts mod width), floored (times before 1970 too); a NULL
    event time is in no window."""
    aggs = pipeline.sinks.aggregates
    assert aggs is not None
    types, w = _types(pipeline), _width(pipeline)
    ts = f"epoch_us({ident(pipeline.schema.event_time_column)})"
    columns = [
        *(f"CAST({ident(g)} AS {types[g]}) AS {ident(g)}" for g in aggs.group_by),
        "CAST(make_timestamp(_start) AS TIMESTAMPTZ) AS window_start",
        f"CAST(make_timestamp(_start + {w}) AS TIMESTAMPTZ) AS window_end",
        *(f"{_metric(m, types[m.name])} AS {ident(m.name)}" for m in aggs.parsed_metrics()),
    ]
    return (
        f"SELECT {', '.join(columns)} "
        f"FROM (SELECT *, {ts} - (({ts} % {w}) + {w}) % {w} AS _start FROM {source} WHERE {ts} IS NOT NULL) "
        "GROUP BY ALL"
    )


def recompute(bronze: pa.Table, pipeline: Pipeline) -> pa.Table:
    """Per declared group and event-time window: the declared metrics (the batch truth), columns
    `[*group_by, window_start, window_end, *metrics]` in the aggregates table's types."""
    with connect() as db:
        db.register("bronze", bronze)
        return db.sql(_recompute_sql(pipeline, "bronze")).to_arrow_table()


def aggregated_columns(pipeline: Pipeline) -> list[str]:
    """The bronze columns the recomputation reads."""
    aggs = pipeline.sinks.aggregates
    assert aggs is not None
    fields = [m.field for m in aggs.parsed_metrics() if m.field]
    return list(dict.fromkeys([*aggs.group_by, pipeline.schema.event_time_column, *fields]))


def _touched(source: str, key: list[str], types: dict[str, str]) -> str:
    """The rows of the relation `source` whose key is a touched window's (`agg_touched`), compared
    null-safely."""
    on = " AND ".join(f"CAST(s.{ident(c)} AS {types[c]}) IS NOT DISTINCT FROM agg_touched.{ident(c)}" for c in key)
    return f"SELECT * FROM ({source}) s WHERE EXISTS (SELECT 1 FROM agg_touched WHERE {on})"


def _judged_sql(expected: str, observed: str, key: list[str], values: list[str], types: dict[str, str]) -> str:
    """Both sides in the table's types, fully outer joined on the key (null-safely: an optional
    group-by field may be NULL), each window with its `kind` of difference (NULL: none)."""

    def side(relation: str, prefix: str, flag: str) -> str:
        cols = [f"CAST({ident(c)} AS {types[c]}) AS {ident(c)}" for c in key]
        cols += [f"CAST({ident(c)} AS {types[c]}) AS {ident(prefix + c)}" for c in values]
        return f"SELECT {', '.join(cols)}, TRUE AS {flag} FROM ({relation})"

    def same(c: str) -> str:
        exp, obs = ident(f"exp_{c}"), ident(f"obs_{c}")
        if types[c] == "DOUBLE":  # a sum of doubles depends on the order it was added in: batch by batch
            near = f"abs({exp} - {obs}) <= greatest(1.0, abs({exp})) * {DOUBLE_TOLERANCE!r}"
            return f"({exp} IS NOT DISTINCT FROM {obs} OR coalesce({near}, FALSE))"
        return f"({exp} IS NOT DISTINCT FROM {obs})"

    keys = [f"coalesce(e.{ident(c)}, t.{ident(c)}) AS {ident(c)}" for c in key]
    sides = [ident(f"{p}_{c}") for c in values for p in ("exp", "obs")]
    on = " AND ".join(f"e.{ident(c)} IS NOT DISTINCT FROM t.{ident(c)}" for c in key)
    differs = " OR ".join(f"NOT {same(c)}" for c in values)
    return (
        f"WITH e AS ({side(expected, 'exp_', '_e')}), t AS ({side(observed, 'obs_', '_t')}) "
        f"SELECT {', '.join([*keys, *sides])}, _e, _t, "
        "CASE WHEN _t IS NULL THEN 'missing_in_table' WHEN _e IS NULL THEN 'not_in_bronze' "
        f"WHEN {differs} THEN 'differs' END AS kind "
        f"FROM e FULL OUTER JOIN t ON {on}"
    )


@dataclass
class AggregateReconciliation:
    check: Check
    table: pa.Table | HeldTable | None  # the aggregate rows in scope (validated by the GX aggregates suite)
    recomputed_rows: int
    findings: list[dict]


def reconcile_aggregates(
    pipeline: Pipeline, point: CommittedPoint, audited_bronze: pa.Table | HeldTable | None
) -> AggregateReconciliation:
    """Compare the aggregate table (pinned version) with bronze recomputed up to the
    aggregates ledger's end; `audited_bronze` (the audited range) selects the windows
    an incremental audit looks at. Given the rows the row reconciliation holds (HeldTable), it runs
    in that database, which spills to disk, and the aggregate rows in scope stay there (`table`: a
    HeldTable); given an Arrow table, in a database of its own (`table`: Arrow)."""
    sink = pipeline.sinks.aggregates
    view = point.sinks.get(SinkName.AGGREGATES)
    if sink is None or view is None or not view.exists or audited_bronze is None:
        skipped = Check(
            "aggregates",
            TITLE,
            CheckStatus.SKIPPED,
            detail="the pipeline has no aggregates sink",
            group=CheckGroup.AGGREGATES,
        )
        return AggregateReconciliation(skipped, None, 0, [])
    with ExitStack() as stack:
        if isinstance(audited_bronze, HeldTable):
            db = stack.enter_context(audited_bronze.con.cursor())
            cols = ", ".join(ident(c) for c in aggregated_columns(pipeline))
            db.execute(f"CREATE OR REPLACE TEMP VIEW agg_audited AS SELECT {cols} FROM {audited_bronze.name}")
        else:
            spill = stack.enter_context(tempfile.TemporaryDirectory(prefix="onceflow-audit-"))
            db = stack.enter_context(spilling(spill))
            db.register("agg_audited", audited_bronze)
        holder = audited_bronze.con if isinstance(audited_bronze, HeldTable) else None
        return _compare(pipeline, point, db, holder)


def _compare(pipeline: Pipeline, point: CommittedPoint, db, holder) -> AggregateReconciliation:
    """reconcile_aggregates in database `db`, where `agg_audited` holds the audited bronze rows;
    the rows in scope left there for `holder` (a connection that outlives `db`), or read out."""
    sink, view = pipeline.sinks.aggregates, point.sinks[SinkName.AGGREGATES]
    assert sink is not None
    key = list(tables.aggregate_key(sink))
    metrics = [m.name for m in sink.parsed_metrics()]
    values = ["window_end", *metrics]
    types = _types(pipeline)
    # the aggregate table streamed in by delta-rs (its rows: about one per audited event at most)
    scan = scan_table(pipeline.resolve(sink.path), view.version, None, [*key, *values])
    schema = scan.schema
    db.register("agg_scan", scan)
    db.execute("CREATE OR REPLACE TABLE agg_table AS SELECT * FROM agg_scan")
    db.unregister("agg_scan")

    def scope(name: str) -> pa.Table | HeldTable:
        return HeldTable(holder, name, schema) if holder is not None else HeldTable(db, name, schema).read()

    incremental = bool(point.mode == AuditScope.SINCE_LAST and point.watermark)
    predicate = None
    if incremental:
        keys = ", ".join(ident(c) for c in key)
        windows = _recompute_sql(pipeline, "agg_audited")
        db.execute(f"CREATE OR REPLACE TEMP TABLE agg_touched AS SELECT DISTINCT {keys} FROM ({windows})")
        [(touched, first, last)] = db.sql(
            "SELECT count(*), epoch_us(min(window_start)), epoch_us(max(window_start)) FROM agg_touched"
        ).fetchall()
        if not touched:
            nothing = check(
                "aggregates",
                TITLE,
                True,
                expected=0,
                observed=0,
                detail="no new bronze rows: no window to compare",
                group=CheckGroup.AGGREGATES,
            )
            db.execute("CREATE OR REPLACE TABLE agg_scope AS SELECT * FROM agg_table LIMIT 0")
            return AggregateReconciliation(nothing, scope("agg_scope"), 0, [])
        lo, hi = (EPOCH + timedelta(microseconds=us) for us in (first, last + _width(pipeline)))
        # only bronze rows that can fall into the touched windows (delta-rs skips files by event_time stats)
        ts = ident(pipeline.schema.event_time_column)
        predicate = f"{ts} >= '{lo.isoformat()}' AND {ts} < '{hi.isoformat()}'"

    # bronze as the aggregates saw it: every offset below the aggregates ledger's end
    covered = {p: (point.first.get(p, 0), e) for p, e in view.end.items() if point.first.get(p, 0) < e}
    if covered == point.ranges():  # a full audit of a stopped job: the audited rows are exactly these
        db.execute("CREATE OR REPLACE TEMP VIEW agg_bronze AS SELECT * FROM agg_audited")
    else:
        bronze_path = pipeline.resolve(pipeline.sinks.bronze.path)
        db.register(
            "agg_bronze_scan",
            scan_table(
                bronze_path, point.sinks[SinkName.BRONZE].version, covered, aggregated_columns(pipeline), predicate
            ),
        )
        db.execute("CREATE OR REPLACE TABLE agg_bronze AS SELECT * FROM agg_bronze_scan")
        db.unregister("agg_bronze_scan")
    expected, observed = _recompute_sql(pipeline, "agg_bronze"), "SELECT * FROM agg_table"
    if incremental:
        expected, observed = _touched(expected, key, types), _touched(observed, key, types)
    if incremental:
        db.execute(f"CREATE OR REPLACE TABLE agg_scope AS {observed}")
        table = scope("agg_scope")
    else:  # every row of the table is in scope: no copy of it (millions of rows at one an event)
        table = scope("agg_table")
    # counted without holding the joined windows (as many rows as the table); listed again only if any differs
    judged = _judged_sql(expected, observed, key, values, types)
    [(n_expected, n_observed, bad)] = db.sql(f"SELECT count(_e), count(_t), count(kind) FROM ({judged})").fetchall()
    samples: list[dict] = []
    findings: list[dict] = []
    detail = ""
    if bad:
        shown = ", ".join(ident(f"{side}_{m}") for m in metrics for side in ("exp", "obs"))
        order = ", ".join(f"{ident(c)} ASC NULLS FIRST" for c in key)  # Spark's ascending order
        rows_sql = (
            f"SELECT kind, {', '.join(ident(c) for c in key)}, {shown} FROM ({judged}) "
            f"WHERE kind IS NOT NULL ORDER BY {order} LIMIT {MAX_RANGES}"
        )
        wrong = db.sql(rows_sql).to_arrow_table().to_pylist()
        findings = [
            {
                "check": "aggregates",
                "partition": None,
                "start": None,
                "end": None,
                "count": 1,
                "key": " / ".join(str(r[c]) for c in sink.group_by)
                + f" @ {r['window_start'].isoformat() if r['window_start'] else None}",
                "kind": r["kind"],
            }
            for r in wrong
        ]
        samples = [jsonable(r) for r in wrong[:MAX_SAMPLES]]
        detail = f"{bad} window(s) differ: " + "; ".join(
            f"{s['kind']} {' / '.join(str(s[c]) for c in sink.group_by)} {s['window_start']}: "
            + ", ".join(f"{m} {s[f'exp_{m}']} expected, {s[f'obs_{m}']} in table" for m in metrics)
            for s in samples
        )
    result = check(
        "aggregates",
        TITLE,
        not bad,
        expected={"windows": n_expected, "differing": 0},
        observed={"windows": n_observed, "differing": bad},
        samples=samples,
        detail=detail,
        group=CheckGroup.AGGREGATES,
    )
    return AggregateReconciliation(result, table, n_expected, findings)
