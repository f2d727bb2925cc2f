"""The aggregate table vs a batch recomputation from bronze (audit/aggregates.py), on DuckDB: bronze
as Arrow tables (and a real Delta table where the audit reads it), the aggregate table a real Delta
table read with delta-rs; the recomputation checked against a plain Python one. No Spark."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from devkit.pipelines import aggregates_of, write_pipeline
from onceflow import config, tables
from onceflow.audit import aggregates as agg
from onceflow.reconcile import AuditScope, CheckStatus, CommittedPoint, SinkView
from onceflow.sink_kinds import SinkName

SCHEMA = {
    "format": "json",
    "event_time": "event_time",
    "fields": [
        {"name": "site", "type": "string", "required": False},
        {"name": "device", "type": "string"},
        {"name": "reading", "type": "double", "required": False},
        {"name": "amount", "type": "decimal(18,2)", "required": False},
        {"name": "seq", "type": "long", "required": False},
        {"name": "level", "type": "int", "required": False},
        {"name": "event_time", "type": "timestamp"},
    ],
}
METRICS = {
    "events": "count",
    "reading_sum": "sum(reading)",
    "reading_max": "max(reading)",
    "amount_sum": "sum(amount)",
    "seq_sum": "sum(seq)",
    "level_sum": "sum(level)",
    "level_min": "min(level)",
    "first_seen": "min(event_time)",
}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = 60_000_000  # the window, in microseconds
ARROW = {
    "STRING": pa.string(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
}


def arrow_type(sql: str) -> pa.DataType:
    """A declared SQL type as delta-rs reads it."""
    if sql.startswith("DECIMAL("):
        p, s = sql[8:-1].split(",")
        return pa.decimal128(int(p), int(s))
    return ARROW[sql]


def load(folder: Path) -> config.Pipeline:
    """A pipeline of SCHEMA grouping by (site, device) per minute, its tables under `folder`."""
    aggregates = {"group_by": ["site", "device"], "metrics": METRICS}
    return config.load(write_pipeline(folder, "localhost:9092", "t", schema=SCHEMA, aggregates=aggregates))


@pytest.fixture
def pipeline(tmp_path: Path) -> config.Pipeline:
    return load(tmp_path)


# -- bronze, the aggregate table, the committed point ------------------------------------------
def row(at: datetime | None, site: str | None = "lyon", device: str = "d1", offset: int = 0, **values) -> dict:
    """A bronze row at event time `at` (its metric fields 1 unless `values` say)."""
    fields = {"reading": 1.5, "amount": Decimal("1.25"), "seq": 1, "level": 1} | values
    return {"site": site, "device": device, **fields, "event_time": at, "_partition": 0, "_offset": offset}


def bronze(rows: list[dict], pipeline: config.Pipeline) -> pa.Table:
    """The rows as delta-rs reads bronze: declared fields typed, then the provenance columns used here."""
    cols = tables.bronze_columns(pipeline.schema)
    schema = pa.schema(
        [*((n, arrow_type(t)) for n, t in cols.items()), ("_partition", pa.int32()), ("_offset", pa.int64())]
    )
    return pa.Table.from_pylist(rows, schema)


def numbered(rows: list[dict], start: int = 0) -> list[dict]:
    return [{**r, "_offset": start + i} for i, r in enumerate(rows)]


def micros(at: datetime) -> int:
    return (at - EPOCH) // timedelta(microseconds=1)


def oracle(rows: list[dict], pipeline: config.Pipeline) -> dict[tuple, dict]:
    """The aggregates recomputed in plain Python: per (group_by..., window_start), window_end and
    the metrics; a window starts at the event time floored to the width (before 1970 too)."""
    aggs = aggregates_of(pipeline)
    windows: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["event_time"] is not None:
            start = micros(r["event_time"]) // MINUTE * MINUTE
            windows.setdefault((*(r[g] for g in aggs.group_by), start), []).append(r)
    out = {}
    for (*groups, start), members in windows.items():
        metrics: dict = {"window_end": EPOCH + timedelta(microseconds=start + MINUTE)}
        for m in aggs.parsed_metrics():
            seen = [r[m.field] for r in members if r[m.field] is not None] if m.field else []
            if m.func == "count":
                metrics[m.name] = len(members)
            else:
                folds: dict[str, Callable[[list], Any]] = {"sum": sum, "min": min, "max": max}
                metrics[m.name] = folds[m.func](seen) if seen else None
        out[(*groups, EPOCH + timedelta(microseconds=start))] = metrics
    return out


def write_aggregates(path: str, pipeline: config.Pipeline, windows: dict[tuple, dict]) -> None:
    """The aggregate table holding `windows` (as `oracle` gives them), typed as the job writes it."""
    types = tables.aggregate_columns(pipeline.schema, aggregates_of(pipeline))
    schema = pa.schema([(c, arrow_type(t)) for c, t in types.items()])
    key = tables.aggregate_key(aggregates_of(pipeline))
    rows = []
    for k, values in windows.items():
        r = {**dict(zip(key, k, strict=True)), **values, "first_batch_id": 0, "last_batch_id": 1}
        rows.append(
            {c: Decimal(v) if isinstance(v, int) and types[c].startswith("DECIMAL") else v for c, v in r.items()}
        )
    write_deltalake(path, pa.Table.from_pylist(rows, schema), mode="overwrite")


def view(name: SinkName, path: str, end: dict[int, int], exists: bool = True) -> SinkView:
    return SinkView(name, path, exists, None, 1, 0, 0, end, end, 0, [])


def point(
    pipeline: config.Pipeline,
    end: int,
    start: int = 0,
    aggregates_end: int | None = None,
    mode: AuditScope = AuditScope.FULL,
) -> CommittedPoint:
    """The committed point of partition 0 audited over [start, end), the aggregates' ledger ending
    at `aggregates_end` (default: `end`); since-last with a watermark when `mode` says."""
    sinks: dict[str, SinkView] = {
        SinkName.BRONZE: view(SinkName.BRONZE, pipeline.resolve(pipeline.sinks.bronze.path), {0: end}),
        SinkName.AGGREGATES: view(
            SinkName.AGGREGATES, pipeline.resolve(aggregates_of(pipeline).path), {0: aggregates_end or end}
        ),
    }
    watermark = {"topic": "t", "end": {"0": start}} if mode == AuditScope.SINCE_LAST else None
    return CommittedPoint("t", mode, {}, sinks, {0: 0}, {0: start}, {0: end}, {}, [], {}, watermark=watermark)


def audit(pipeline: config.Pipeline, rows: list[dict], windows: dict[tuple, dict]) -> agg.AggregateReconciliation:
    """A full audit of a stopped job whose bronze holds `rows` and whose aggregate table `windows`."""
    rows = numbered(rows)
    write_aggregates(pipeline.resolve(aggregates_of(pipeline).path), pipeline, windows)
    return agg.reconcile_aggregates(pipeline, point(pipeline, len(rows)), bronze(rows, pipeline))


ROWS = [
    row(T0),
    row(T0 + timedelta(seconds=59, microseconds=999_999), reading=2.25, amount=Decimal("3.10")),
    row(T0 + timedelta(seconds=60)),  # the next window's first instant
    row(T0, site=None, level=None, reading=None),  # an optional group-by field, optional metrics
    row(T0, device="d2", seq=2**62),
    row(T0 + timedelta(seconds=5), device="d2", seq=2**62),  # a long's sum beyond a bigint
    row(EPOCH - timedelta(microseconds=1), site="oslo"),  # before 1970: [-60 s, 0)
]


# -- a table equal to the recomputation, and each way it can differ ----------------------------
def test_a_table_equal_to_the_recomputation_passes(pipeline):
    windows = oracle(ROWS, pipeline)
    result = audit(pipeline, ROWS, windows)
    assert result.check.status == CheckStatus.PASSED, result.check.detail
    assert result.check.expected == {"windows": 5, "differing": 0}
    assert result.check.observed == {"windows": 5, "differing": 0}
    assert (result.recomputed_rows, result.findings, result.check.samples) == (5, [], [])
    assert isinstance(result.table, pa.Table) and result.table.num_rows == 5
    assert result.table.column_names == ["site", "device", "window_start", "window_end", *METRICS]


def test_a_window_missing_in_the_table_fails(pipeline):
    windows = oracle(ROWS, pipeline)
    del windows[("lyon", "d1", T0 + timedelta(seconds=60))]
    result = audit(pipeline, ROWS, windows)
    assert result.check.status == CheckStatus.FAILED
    assert result.check.observed == {"windows": 4, "differing": 1}
    [sample] = result.check.samples
    assert sample["kind"] == "missing_in_table"
    assert (sample["site"], sample["device"], sample["window_start"]) == ("lyon", "d1", "2026-01-01T00:01:00+00:00")
    assert (sample["exp_events"], sample["obs_events"]) == (1, None)
    assert sample["exp_amount_sum"] == "1.25"  # a decimal, as text
    [finding] = result.findings
    assert finding["key"] == "lyon / d1 @ 2026-01-01T00:01:00+00:00"
    assert finding["kind"] == "missing_in_table" and finding["check"] == "aggregates"
    assert result.check.detail.startswith("1 window(s) differ: missing_in_table lyon / d1 2026-01-01T00:01:00+00:00:")
    assert "events 1 expected, None in table" in result.check.detail


def test_a_window_not_in_bronze_fails(pipeline):
    windows = oracle(ROWS, pipeline)
    extra = dict(windows[("lyon", "d1", T0)])
    windows[("porto", "d9", T0)] = extra
    result = audit(pipeline, ROWS, windows)
    assert result.check.status == CheckStatus.FAILED
    assert result.check.expected == {"windows": 5, "differing": 0}
    assert result.check.observed == {"windows": 6, "differing": 1}
    [sample] = result.check.samples
    assert (sample["kind"], sample["site"], sample["device"]) == ("not_in_bronze", "porto", "d9")
    assert (sample["exp_events"], sample["obs_events"]) == (None, 2)
    assert result.findings[0]["kind"] == "not_in_bronze"


@pytest.mark.parametrize(
    ("metric", "value"),
    [
        ("events", 3),
        ("amount_sum", Decimal("4.36")),  # one cent more
        ("seq_sum", 2**63 + 1),
        ("level_min", 0),
        ("first_seen", T0 + timedelta(microseconds=1)),
        ("reading_max", None),  # NULL in the table, a value in bronze
    ],
)
def test_a_changed_metric_differs(pipeline, metric, value):
    windows = oracle(ROWS, pipeline)
    at = ("lyon", "d1", T0) if metric != "seq_sum" else ("lyon", "d2", T0)
    windows[at] = {**windows[at], metric: value}
    result = audit(pipeline, ROWS, windows)
    assert result.check.status == CheckStatus.FAILED
    assert result.check.observed == {"windows": 5, "differing": 1}
    [sample] = result.check.samples
    assert (sample["kind"], sample["site"], sample["device"]) == ("differs", *at[:2])
    assert sample[f"obs_{metric}"] != sample[f"exp_{metric}"]
    assert result.findings[0]["key"] == f"{at[0]} / {at[1]} @ 2026-01-01T00:00:00+00:00"


@pytest.mark.parametrize(
    ("shift", "passes"),
    [(0.5e-9, True), (-0.9e-9, True), (2e-9, False)],
)
def test_a_double_metric_is_compared_with_a_relative_tolerance(pipeline, shift, passes):
    rows = [row(T0, reading=1e6), row(T0, reading=0.125)]
    windows = oracle(rows, pipeline)
    [at] = windows
    expected = windows[at]["reading_sum"]
    windows[at] = {**windows[at], "reading_sum": expected + abs(expected) * shift}
    result = audit(pipeline, rows, windows)
    assert result.check.passed is passes, result.check.detail


def test_a_small_double_is_compared_with_an_absolute_tolerance(pipeline):
    """Relative to max(1, |expected|): a sum near 0 may differ by 1e-9 at most."""
    rows = [row(T0, reading=1e-12)]
    windows = oracle(rows, pipeline)
    [at] = windows
    windows[at] = {**windows[at], "reading_sum": 5e-10}
    assert audit(pipeline, rows, windows).check.passed
    windows[at] = {**windows[at], "reading_sum": 2e-9}
    assert not audit(pipeline, rows, windows).check.passed


def test_a_null_group_by_value_matches_null_safely(pipeline):
    rows = [row(T0, site=None), row(T0 + timedelta(seconds=1), site=None), row(T0)]
    windows = oracle(rows, pipeline)
    result = audit(pipeline, rows, windows)
    assert result.check.status == CheckStatus.PASSED, result.check.detail
    assert result.check.expected == {"windows": 2, "differing": 0}
    windows[(None, "d1", T0)] = {**windows[(None, "d1", T0)], "events": 5}
    result = audit(pipeline, rows, windows)
    [sample] = result.check.samples  # one window that differs, not one missing and one not in bronze
    assert (sample["kind"], sample["site"], sample["exp_events"], sample["obs_events"]) == ("differs", None, 2, 5)
    assert result.findings[0]["key"] == "None / d1 @ 2026-01-01T00:00:00+00:00"


def test_samples_come_in_key_order_nulls_first_and_are_capped(pipeline):
    rows = [row(T0 + timedelta(minutes=i), site=None if i == 3 else "lyon") for i in range(8)]
    result = audit(pipeline, rows, {})
    assert result.check.observed == {"windows": 0, "differing": 8}
    assert len(result.findings) == 8 and len(result.check.samples) == agg.MAX_SAMPLES
    assert [s["site"] for s in result.check.samples] == [None, "lyon", "lyon", "lyon", "lyon"]
    assert [s["window_start"][11:16] for s in result.check.samples[1:]] == ["00:00", "00:01", "00:02", "00:04"]


# -- windows: aligned to the epoch, floored, half-open --------------------------------------------
def test_windows_before_1970_and_at_exact_boundaries(pipeline):
    at = [
        EPOCH - timedelta(minutes=1),  # a boundary before 1970: its own window's start
        EPOCH - timedelta(microseconds=1),  # the last instant of [-60 s, 0)
        EPOCH,  # the first of [0, 60 s)
        EPOCH + timedelta(seconds=59, microseconds=999_999),
        EPOCH + timedelta(minutes=1),
        EPOCH - timedelta(days=365 * 30, microseconds=1),  # far before 1970
        None,  # no event time: no window (Spark drops the row)
    ]
    rows = [row(t) for t in at]
    got = agg.recompute(bronze(rows, pipeline), pipeline)
    windows = sorted((r["window_start"], r["window_end"], r["events"]) for r in got.to_pylist())
    minute = timedelta(minutes=1)
    far = EPOCH - timedelta(days=365 * 30) - minute
    assert windows == [
        (far, far + minute, 1),
        (EPOCH - minute, EPOCH, 2),
        (EPOCH, EPOCH + minute, 2),
        (EPOCH + minute, EPOCH + 2 * minute, 1),
    ]
    assert got.schema.field("window_start").type == pa.timestamp("us", tz="UTC")
    assert audit(pipeline, rows, oracle(rows, pipeline)).check.passed


def test_the_recomputation_holds_the_aggregate_tables_types(pipeline):
    got = agg.recompute(bronze(ROWS, pipeline), pipeline)
    types = tables.aggregate_columns(pipeline.schema, aggregates_of(pipeline))
    assert {f.name: f.type for f in got.schema} == {
        c: arrow_type(t) for c, t in types.items() if c not in tables.BATCH_COLUMNS
    }


# -- which bronze rows: below the aggregates ledger's end; incremental: the touched windows ------
def write_bronze(pipeline: config.Pipeline, rows: list[dict]) -> None:
    write_deltalake(pipeline.resolve(pipeline.sinks.bronze.path), bronze(rows, pipeline), mode="overwrite")


def test_trailing_aggregates_are_judged_over_the_bronze_rows_their_ledger_holds(pipeline):
    rows = numbered([row(T0), row(T0), row(T0 + timedelta(minutes=1))])
    write_bronze(pipeline, rows)
    write_aggregates(pipeline.resolve(aggregates_of(pipeline).path), pipeline, oracle(rows[:2], pipeline))
    result = agg.reconcile_aggregates(pipeline, point(pipeline, 3, aggregates_end=2), bronze(rows, pipeline))
    assert result.check.status == CheckStatus.PASSED, result.check.detail
    assert result.recomputed_rows == 1


def test_an_incremental_audit_compares_only_the_touched_windows(pipeline):
    old = [row(T0 - timedelta(days=1)), row(T0), row(T0 + timedelta(minutes=5), device="d2")]
    new = [row(T0 + timedelta(seconds=30)), row(T0 + timedelta(seconds=31), site=None)]
    rows = numbered(old + new)
    write_bronze(pipeline, rows)
    windows = oracle(rows, pipeline)  # the touched windows hold every bronze row of theirs, old ones too
    windows[("lyon", "d1", T0 - timedelta(days=1))]["events"] = 7  # untouched: not compared
    del windows[("lyon", "d2", T0 + timedelta(minutes=5))]
    write_aggregates(pipeline.resolve(aggregates_of(pipeline).path), pipeline, windows)
    since = point(pipeline, 5, start=3, mode=AuditScope.SINCE_LAST)
    result = agg.reconcile_aggregates(pipeline, since, bronze(rows[3:], pipeline))
    assert result.check.status == CheckStatus.PASSED, result.check.detail
    assert result.check.expected == {"windows": 2, "differing": 0}
    assert result.recomputed_rows == 2
    assert isinstance(result.table, pa.Table)
    by_site = dict(zip(result.table.column("site").to_pylist(), result.table.column("events").to_pylist(), strict=True))
    assert by_site == {"lyon": 2, None: 1}  # lyon/d1 at T0: an old row and a new one

    windows[("lyon", "d1", T0)]["events"] = 1  # a touched window that lost its old row
    write_aggregates(pipeline.resolve(aggregates_of(pipeline).path), pipeline, windows)
    result = agg.reconcile_aggregates(pipeline, since, bronze(rows[3:], pipeline))
    assert result.check.observed == {"windows": 2, "differing": 1}
    assert (result.check.samples[0]["exp_events"], result.check.samples[0]["obs_events"]) == (2, 1)

    full = agg.reconcile_aggregates(pipeline, point(pipeline, 5), bronze(rows, pipeline))
    assert full.check.observed == {"windows": 3, "differing": 3}  # the full audit sees all three


def test_an_incremental_audit_without_new_rows_compares_nothing(pipeline):
    rows = numbered([row(T0)])
    write_bronze(pipeline, rows)
    write_aggregates(pipeline.resolve(aggregates_of(pipeline).path), pipeline, oracle(rows, pipeline))
    since = point(pipeline, 1, start=1, mode=AuditScope.SINCE_LAST)
    result = agg.reconcile_aggregates(pipeline, since, bronze([], pipeline))
    assert result.check.status == CheckStatus.PASSED
    assert result.check.detail == "no new bronze rows: no window to compare"
    assert result.table is not None and result.table.num_rows == 0 and result.recomputed_rows == 0


def test_no_aggregate_table_is_skipped(pipeline):
    p = point(pipeline, 1)
    p.sinks[SinkName.AGGREGATES].exists = False
    result = agg.reconcile_aggregates(pipeline, p, bronze([], pipeline))
    assert result.check.status == CheckStatus.SKIPPED
    assert (result.table, result.recomputed_rows, result.findings) == (None, 0, [])


# -- the recomputation vs a plain Python one, for any bronze ----------------------------------------
def _cases() -> st.SearchStrategy[list[dict]]:
    instants = st.one_of(
        st.integers(-(10**15), 10**15),  # ±31 years around 1970
        st.integers(-1000, 1000).map(lambda k: k * MINUTE),  # a window's first instant
        st.integers(-1000, 1000).map(lambda k: k * MINUTE - 1),  # a window's last
    )
    rows = st.fixed_dictionaries(
        {
            "site": st.sampled_from(["lyon", "oslo", None]),
            "device": st.sampled_from(["d1", "d2"]),
            "reading": st.none() | st.floats(-1e6, 1e6, allow_nan=False),
            "amount": st.none() | st.decimals(Decimal("-1e14"), Decimal("1e14"), places=2),
            "seq": st.none() | st.integers(-(2**63), 2**63 - 1),
            "level": st.none() | st.integers(-(2**31), 2**31 - 1),
            "event_time": st.none() | instants.map(lambda us: EPOCH + timedelta(microseconds=us)),
        }
    )
    return st.lists(rows, max_size=40)


@pytest.fixture(scope="module")
def shared_pipeline(tmp_path_factory) -> config.Pipeline:
    """One pipeline for every example (the recomputation reads no table)."""
    return load(tmp_path_factory.mktemp("p"))


@settings(max_examples=50, deadline=None)
@given(rows=_cases())
def test_the_recomputation_equals_a_plain_python_one(shared_pipeline, rows):
    pipeline = shared_pipeline
    rows = [{**r, "_partition": 0, "_offset": i} for i, r in enumerate(rows)]
    got = agg.recompute(bronze(rows, pipeline), pipeline).to_pylist()
    by_key = {(r.pop("site"), r.pop("device"), r.pop("window_start")): r for r in got}
    want = oracle(rows, pipeline)
    assert by_key.keys() == want.keys()
    for k, expected in want.items():
        observed = by_key[k]
        for c, v in expected.items():
            if c == "reading_sum" and v is not None:  # a double: its sum depends on the order it is added in
                size = sum(abs(r["reading"]) for r in rows if r["reading"] is not None)
                assert abs(observed[c] - v) <= max(1.0, size) * 1e-12, (k, c)
            else:
                assert observed[c] == v, (k, c)
