"""Run the audit's Great Expectations suites on Arrow tables and build Data Docs, without Spark.

An ephemeral GX context (nothing is written outside the report) with one pandas
data source; each sink table (bronze, quarantine, aggregates, current: the
pyarrow.Table delta-rs read) is a dataframe asset with its suite, validation
definition and Checkpoint, and all Checkpoints run under one RunIdentifier (the
audit's run id), so the Data Docs site shows the audit as one run. (A GX 1.x
Checkpoint hands the same batch parameters — here: the DataFrame — to every
validation definition it holds, so each dataset gets its own Checkpoint.)

Arrow → pandas (`_to_pandas`) is chosen so each expectation means what it meant on
Spark, and each type check judges the column's type, not its values (so an empty or
all-NULL column is judged too, as Spark judged the schema): integers, booleans and
doubles become pandas' masked dtypes (Int32, Int64, boolean, Float64) — NumPy's would
make an INT column with a NULL float64 and the NULL a NaN — so NULL stays NULL, NaN
stays a value and INT stays distinct from BIGINT; timestamps become
`datetime64[us, UTC]` (zoned, as Spark's TIMESTAMP; microseconds, no overflow past
2262); text becomes `string[pyarrow]`; decimals, dates, bytes and structs keep their
Arrow type (`pd.ArrowDtype`), whose values are Decimal, date, bytes and dict. A
struct's fields are added as `<struct>.<field>` columns, as GX's Spark batches listed
them, so a suite's column-set check still covers them (suites._nested).

Cost: no JVM, no Spark job; every expectation is computed in this process on one
in-memory frame per table, converted just before its suite runs and dropped after
(GX's engine would keep every batch's frame): the Arrow-typed columns (text,
decimals, dates, bytes, structs) stay in Arrow buffers, the numbers and timestamps are
copied into pandas' arrays. A suite runs first with BASIC and `partial_unexpected_count: 0`:
counts and observed values (Data Docs show them for passing expectations instead of
"--"), no samples of unexpected values; only a suite that fails runs
again with SUMMARY, under the same run id, which replaces the stored result: Data
Docs and summary.json then show the counts and samples of what failed.

The two small datasets the audit builds itself (reconciliation: one row per
partition; findings: one row per offending range) are `Rows`: GX validates them as
tables of an SQLite file (Python's sqlite3, through GX's SQL engine), because the
findings' checks are SQL (`UnexpectedRowsExpectation`), which GX's pandas engine
does not run.

Data Docs are made to work offline after GX builds them (onceflow.web.datadocs:
bundled jQuery, Bootstrap, Vega…, never a CDN).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onceflow.reconcile import MAX_SAMPLES, Check, CheckGroup, CheckStatus, jsonable

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from great_expectations import ExpectationSuite

SITE = "onceflow_audit"
_SQLITE_TYPES = {"IntegerType": "INTEGER", "LongType": "INTEGER", "StringType": "TEXT"}
# the first run of every suite: metrics and observed values, no samples (see above)
FIRST_RUN = {"result_format": "BASIC", "partial_unexpected_count": 0}


@dataclass
class Rows:
    """A small table the audit built in Python: column → pyspark type name (suites.ddl_types), rows."""

    columns: dict[str, str]
    rows: list[tuple]

    @classmethod
    def from_dicts(cls, ddl: str, records: list[dict]) -> Rows:
        """The DDL's columns, in order, of each record (a missing key is NULL)."""
        from onceflow.audit.suites import ddl_types

        columns = ddl_types(ddl)
        return cls(columns, [tuple(r.get(c) for c in columns) for r in records])


@dataclass
class GxOutcome:
    checks: list[Check]
    docs_index: str | None  # relative to the report dir
    suite_pages: dict[str, str] = field(default_factory=dict)  # suite → its validation page (relative)
    statistics: dict = field(default_factory=dict)


def _context(docs_dir: Path):
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    for name in list(ctx.variables.data_docs_sites or {}):
        ctx.delete_data_docs_site(name)  # the default site lives in a temp dir: only ours
    ctx.add_data_docs_site(
        site_name=SITE,
        site_config={
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        },
    )
    return ctx


def _kwargs(config) -> dict:
    kw = dict(config.kwargs)
    kw.pop("batch_id", None)
    return kw


def _name(suite: str, config) -> str:
    kw = _kwargs(config)
    target = (
        kw.get("column")
        or ",".join(kw.get("column_list") or [])
        or (f"{kw['column_A']},{kw['column_B']}" if "column_A" in kw else "")
        or (config.meta or {}).get("check", "")
    )
    return f"gx.{suite}.{config.type}" + (f"[{target}]" if target else "")


def _to_check(suite: str, result) -> Check:
    config = result.expectation_config
    r = result.result or {}
    kw = _kwargs(config)
    expected = {
        k: v
        for k, v in kw.items()
        if k
        in (
            "value",
            "min_value",
            "max_value",
            "value_set",
            "regex",
            "type_",
            "column_set",
            "column_list",
            "column_A",
            "column_B",
            "unexpected_rows_query",
        )
    }
    observed: Any
    if "unexpected_count" in r:
        observed = {"unexpected_count": r.get("unexpected_count"), "element_count": r.get("element_count")}
    else:
        observed = r.get("observed_value")
    samples = []
    if r.get("partial_unexpected_list"):
        samples = [{"value": v} for v in r["partial_unexpected_list"][:MAX_SAMPLES]]
    elif (r.get("details") or {}).get("unexpected_rows"):
        samples = list(r["details"]["unexpected_rows"][:MAX_SAMPLES])
    status = CheckStatus.PASSED if result.success else CheckStatus.FAILED
    detail = ""
    if result.exception_info and result.exception_info.get("raised_exception"):
        status, detail = CheckStatus.FAILED, f"expectation raised: {result.exception_info.get('exception_message')}"
    return Check(
        name=_name(suite, config),
        title=config.description or config.type.replace("_", " "),
        status=status,
        expected=jsonable(expected),
        observed=jsonable(observed),
        detail=detail,
        source="gx",
        samples=jsonable(samples),
        group=CheckGroup.GX,
    )


def plain_type(t: pa.DataType) -> pa.DataType:
    """`t` with Arrow's view layouts (a delta-rs scan gives string_view, binary_view) as the large
    plain types, which pandas' Arrow dtypes take; in a struct's fields too."""
    import pyarrow as pa

    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(plain_type(t.field(i).type)) for i in range(t.num_fields)])
    return t


# from this many rows on, Great Expectations validates an even sample of a sink table: every row's
# values are the reconciliation's to check, against the judged source (docs/audit.md#great-expectations)
GX_SAMPLE = 20_000


def sampled(table, suite, most: int = GX_SAMPLE) -> tuple:
    """(table, suite) as Great Expectations validates them (`table`: an Arrow table, or a sink's rows
    as the row reconciliation holds them): a table of more than `most` rows cut to
    an even sample of at most `most` (every k-th row), and its suite without the expectations on the
    whole table's row count (the reconciliation's accounting checks those); the suite says so."""
    import great_expectations.expectations as gxe
    import pyarrow as pa

    n = table.num_rows
    if n <= most:
        return (table if isinstance(table, pa.Table) else table.read()), suite
    step = -(-n // most)
    plain = pa.schema([f.with_type(plain_type(f.type)) for f in table.schema])  # no take of a view type
    if isinstance(table, pa.Table):
        sample = table.cast(plain).take(list(range(0, n, step)))
    else:  # a table the row reconciliation holds (audit/rows.HeldTable)
        sample = table.read(every=step).cast(plain)
    suite.expectations = [
        e
        for e in suite.expectations
        if not isinstance(e, gxe.ExpectTableRowCountToEqual | gxe.ExpectTableRowCountToBeBetween)
    ]
    suite.meta = {**(suite.meta or {}), "sample": {"rows": sample.num_rows, "of": n, "every": step}}
    return sample, suite


def _dtype(t: pa.DataType):
    """The pandas dtype an Arrow column becomes (module docstring); None: pyarrow's default."""
    import pandas as pd
    import pyarrow as pa

    masked = {
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.bool_(): pd.BooleanDtype(),
        pa.float32(): pd.Float32Dtype(),
        pa.float64(): pd.Float64Dtype(),
    }
    if t in masked:  # NumPy's would make an INT column with a NULL float64, the NULL a NaN
        return masked[t]
    if pa.types.is_timestamp(t):  # datetime64[unit, zone]: its .type is pandas' Timestamp when zoned
        return None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pd.StringDtype("pyarrow")
    return pd.ArrowDtype(t)  # decimal, binary, date, struct: typed by Arrow, never a bare object column


def _struct_fields(name: str, column: pa.ChunkedArray) -> dict[str, pa.ChunkedArray]:
    """`<name>.<field>` → that field's values, for each field of a struct column (and of the structs
    nested in it): the names GX's Spark batches listed among the columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = {}
    if pa.types.is_struct(column.type):
        for i in range(column.type.num_fields):
            path = f"{name}.{column.type.field(i).name}"
            child = pc.struct_field(column, [i])
            out[path] = child
            out |= _struct_fields(path, child)
    return out


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    """The frame GX validates: the table's columns, then its structs' fields (module docstring)."""
    import pyarrow as pa

    plain = pa.schema([f.with_type(plain_type(f.type)) for f in table.schema])
    if plain != table.schema:
        table = table.cast(plain)
    for name in list(table.column_names):
        for path, values in _struct_fields(name, table.column(name)).items():
            table = table.append_column(path, values)
    return table.to_pandas(types_mapper=_dtype, coerce_temporal_nanoseconds=False)  # µs: no overflow past 2262


def _write_sqlite(db: Path, tables: dict[str, Rows]) -> None:
    with sqlite3.connect(db) as con:
        for name, t in tables.items():
            cols = ", ".join(f'"{c}" {_SQLITE_TYPES[k]}' for c, k in t.columns.items())
            con.execute(f'CREATE TABLE "{name}" ({cols})')
            con.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(t.columns))})', t.rows)
    con.close()


def run_suites(
    datasets: dict[str, tuple[pa.Table | Rows, ExpectationSuite]], report_dir: Path, run_name: str
) -> GxOutcome:
    """datasets: name → (pyarrow.Table or Rows, ExpectationSuite), validated in order; the tables
    through GX's pandas engine, one frame at a time, the Rows through SQLite. No Spark."""
    import pyarrow as pa

    wrong = {n: type(d).__name__ for n, (d, _) in datasets.items() if not isinstance(d, pa.Table | Rows)}
    if wrong:
        raise TypeError(f"run_suites validates pyarrow.Table or Rows datasets, not {wrong}")
    with tempfile.TemporaryDirectory(prefix="onceflow-audit-") as tmp:
        return _run_suites(datasets, report_dir, run_name, Path(tmp) / "small.sqlite")


def _run_suites(
    datasets: dict[str, tuple[pa.Table | Rows, ExpectationSuite]], report_dir: Path, run_name: str, db: Path
) -> GxOutcome:
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    docs_dir = report_dir / "data_docs"
    ctx = _context(docs_dir)
    small = {name: data for name, (data, _) in datasets.items() if isinstance(data, Rows)}
    if small:
        _write_sqlite(db, small)
        sql_source = ctx.data_sources.add_sqlite("onceflow_audit_tables", connection_string=f"sqlite:///{db}")
    if len(small) < len(datasets):
        pandas_source = ctx.data_sources.add_pandas("onceflow")
    run_id = RunIdentifier(run_name=run_name, run_time=datetime.now(UTC))
    checks: list[Check] = []
    stats = {}
    for name, (data, suite) in datasets.items():
        if isinstance(data, Rows):
            batch = sql_source.add_table_asset(name, table_name=name).add_batch_definition_whole_table(name)
            params = {}
        else:
            batch = pandas_source.add_dataframe_asset(name).add_batch_definition_whole_dataframe(name)
            params = {"dataframe": _to_pandas(data)}
        suite = ctx.suites.add(suite)
        vd = ctx.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch, suite=suite))
        cp = ctx.checkpoints.add(
            gx.Checkpoint(name=f"audit-{name}", validation_definitions=[vd], actions=[], result_format=dict(FIRST_RUN))
        )
        outcome = cp.run(batch_parameters=params, run_id=run_id)
        if not outcome.success:  # the small tables (reconciliation, findings) can afford the complete rows
            detail = "COMPLETE" if isinstance(data, Rows) else "SUMMARY"
            cp.result_format = {"result_format": detail, "partial_unexpected_count": MAX_SAMPLES}
            cp.save()
            outcome = cp.run(batch_parameters=params, run_id=run_id)
        for validation in outcome.run_results.values():
            stats[name] = dict(validation.statistics)
            checks += [_to_check(name, r) for r in validation.results]
        if not isinstance(data, Rows):  # GX's engine keeps every batch's frame: one alive at a time
            manager = pandas_source.get_execution_engine().batch_manager
            manager.batch_data_cache.clear()
            manager.reset_batch_cache()
            params.clear()
    ctx.build_data_docs(site_names=[SITE])
    from onceflow.web.datadocs import make_offline

    make_offline(docs_dir)
    pages = {}
    for name in datasets:
        found = sorted((docs_dir / "validations" / name).rglob("*.html"))
        if found:
            pages[name] = os.path.relpath(found[-1], report_dir)
    index = docs_dir / "index.html"
    return GxOutcome(
        checks=checks,
        docs_index=os.path.relpath(index, report_dir) if index.exists() else None,
        suite_pages=pages,
        statistics=jsonable(stats),
    )
