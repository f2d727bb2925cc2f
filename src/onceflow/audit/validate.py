"""Run the audit's Great Expectations suites on Spark DataFrames and build Data Docs.

An ephemeral GX context (nothing is written outside the report) with one Spark
data source; each dataset is a DataFrame asset with its suite, validation
definition and Checkpoint, and all Checkpoints run under one RunIdentifier (the
audit's run id), so the Data Docs site shows the audit as one run. (A GX 1.x
Checkpoint hands the same batch parameters — here: the DataFrame — to every
validation definition it holds, so each dataset gets its own Checkpoint.)

Cost: with a detailed result format GX runs one more Spark job per expectation
to fetch sample unexpected values — a full scan each when there are none. So a
suite runs first with BASIC and `partial_unexpected_count: 0` (the aggregate
metrics bundled into few jobs, as BOOLEAN_ONLY: the sample query becomes a
`LIMIT 0` that Spark answers without a job; unlike BOOLEAN_ONLY, the computed
counts and observed values are kept, so Data Docs show them for passing
expectations instead of "--"); only a suite that fails runs again with SUMMARY,
under the same run id, which replaces the stored result: Data Docs and
summary.json then show the counts and samples of what failed.

The two small datasets the audit builds itself (reconciliation: one row per
partition; findings: one row per offending range) are not Spark DataFrames: GX
validates them as tables of an SQLite file (Python's sqlite3, through GX's SQL
engine), so their 13 expectations cost no Spark job: on Spark they were about half of a
small audit's jobs (docs/benchmarks.md, "Audit of a small stack").

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
from typing import Any

from onceflow.reconcile import MAX_SAMPLES, Check, CheckGroup, CheckStatus, jsonable

SITE = "onceflow_audit"
_SQLITE_TYPES = {"IntegerType": "INTEGER", "LongType": "INTEGER", "StringType": "TEXT"}
# the first run of every suite: metrics and observed values, no sample query (see above)
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


def _write_sqlite(db: Path, tables: dict[str, Rows]) -> None:
    with sqlite3.connect(db) as con:
        for name, t in tables.items():
            cols = ", ".join(f'"{c}" {_SQLITE_TYPES[k]}' for c, k in t.columns.items())
            con.execute(f'CREATE TABLE "{name}" ({cols})')
            con.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(t.columns))})', t.rows)
    con.close()


def run_suites(datasets: dict[str, tuple], report_dir: Path, run_name: str) -> GxOutcome:
    """datasets: name → (Spark DataFrame or Rows, ExpectationSuite), validated in order."""
    with tempfile.TemporaryDirectory(prefix="onceflow-audit-") as tmp:
        return _run_suites(datasets, report_dir, run_name, Path(tmp) / "small.sqlite")


def _run_suites(datasets: dict[str, tuple], report_dir: Path, run_name: str, db: Path) -> GxOutcome:
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    docs_dir = report_dir / "data_docs"
    ctx = _context(docs_dir)
    small = {name: data for name, (data, _) in datasets.items() if isinstance(data, Rows)}
    if small:
        _write_sqlite(db, small)
        sql_source = ctx.data_sources.add_sqlite("onceflow_audit_tables", connection_string=f"sqlite:///{db}")
    if len(small) < len(datasets):  # (GX's Spark source gets or starts a Spark session)
        spark_source = ctx.data_sources.add_spark("onceflow")
    run_id = RunIdentifier(run_name=run_name, run_time=datetime.now(UTC))
    checks: list[Check] = []
    stats = {}
    for name, (data, suite) in datasets.items():
        if isinstance(data, Rows):
            batch = sql_source.add_table_asset(name, table_name=name).add_batch_definition_whole_table(name)
            params = {}
        else:
            batch = spark_source.add_dataframe_asset(name).add_batch_definition_whole_dataframe(name)
            params = {"dataframe": data}
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
