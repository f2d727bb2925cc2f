"""Great Expectations in the audit, without a JVM (`make test-fast` holds it).

The small datasets (reconciliation, findings) on SQLite: a clean table passes, and a finding or a
lost record fails its expectation with the offending rows as samples, as the Spark engine reported
them. The sink tables as Arrow tables (as delta-rs reads them) on GX's pandas engine: a column of
each declared type passes its type check and one stored with another type fails it; NULLs in
required columns, a Kafka record stored twice and a wrong row count fail; and the suites of the
shipped pipelines (suites.py) pass on clean tables and catch each broken rule."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import great_expectations as gx
import great_expectations.expectations as gxe
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from devkit.pipelines import cdc_pipeline_file, load_pipeline
from onceflow import tables
from onceflow.audit import suites
from onceflow.audit.validate import Rows, run_suites
from onceflow.reconcile import CheckStatus


def _recon_row(partition: int, lost: int = 0) -> dict:
    checksum = "12345678901234567890123"
    return {c: 0 for c in suites.ddl_types(suites.RECONCILIATION_DDL)} | {
        "partition": partition,
        "start": 0,
        "end": 10,
        "source_records": 10,
        "source_valid": 9,
        "source_malformed": 1,
        "bronze_rows": 9 - lost,
        "quarantine_rows": 1,
        "sink_rows": 10 - lost,
        "lost_records": lost,
        "source_checksum": checksum,
        "sink_checksum": checksum if not lost else "-42",
    }


def _datasets(recon_rows: list[dict], findings: list[dict]) -> dict:
    return {
        "reconciliation": (Rows.from_dicts(suites.RECONCILIATION_DDL, recon_rows), suites.reconciliation_suite()),
        "findings": (Rows.from_dicts(suites.FINDINGS_DDL, findings), suites.findings_suite()),
    }


def test_clean_small_tables_pass(tmp_path):
    out = run_suites(_datasets([_recon_row(0), _recon_row(1)], []), tmp_path, "run-clean")
    assert {c.status for c in out.checks} == {CheckStatus.PASSED}
    assert len(out.checks) == len(suites.reconciliation_suite().expectations) + len(suites.FINDING_CHECKS)
    expected = len(suites.reconciliation_suite().expectations)
    assert out.statistics["reconciliation"]["evaluated_expectations"] == expected
    assert (tmp_path / out.docs_index).is_file() and set(out.suite_pages) == {"reconciliation", "findings"}


def test_a_loss_fails_its_expectations_with_the_offending_rows(tmp_path):
    findings = [{"check": "loss", "partition": 1, "start": 4, "end": 6, "count": 2}]
    out = run_suites(_datasets([_recon_row(0), _recon_row(1, lost=2)], findings), tmp_path, "run-loss")
    checks = {c.name: c for c in out.checks}
    loss = checks["gx.findings.unexpected_rows_expectation[loss]"]
    assert loss.status == CheckStatus.FAILED
    assert [(s["check"], s["partition"], s["start"], s["end"], s["count"]) for s in loss.samples] == [
        ("loss", 1, 4, 6, 2)
    ]
    assert checks["gx.findings.unexpected_rows_expectation[phantoms]"].status == CheckStatus.PASSED
    lost = checks["gx.reconciliation.expect_column_values_to_be_between[lost_records]"]
    assert lost.status == CheckStatus.FAILED and lost.observed["unexpected_count"] == 1
    assert (
        checks["gx.reconciliation.expect_column_pair_values_to_be_equal[source_checksum,sink_checksum]"].status
        == CheckStatus.FAILED
    )
    assert (
        checks["gx.reconciliation.expect_column_pair_values_to_be_equal[source_malformed,quarantine_rows]"].status
        == CheckStatus.PASSED
    )


# -- the sink tables: Arrow tables (as delta-rs reads them) through GX's pandas engine -----------
T0 = datetime(2026, 1, 1, tzinfo=UTC)
# one column of each type the tables' DDLs use, then the provenance columns
ALL_TYPES_DDL = (
    "`event_id` STRING, `units` INT, `total` BIGINT, `event_time` TIMESTAMP, `amount` DECIMAL(18,2), "
    "`payload` BINARY, `active` BOOLEAN, `score` DOUBLE, `day` DATE, `_sequence` STRUCT<`source_lsn`: BIGINT>, "
    + tables.PROVENANCE_DDL
)
NESTED = ["_sequence.source_lsn"]  # as suites._nested names the fields of a Debezium pipeline's `_sequence`
_ARROW = {
    "STRING": pa.string(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),  # Delta's TIMESTAMP as delta-rs reads it
    "BINARY": pa.binary(),
    "BOOLEAN": pa.bool_(),
    "DOUBLE": pa.float64(),
    "DATE": pa.date32(),
}


def arrow_type(sql: str) -> pa.DataType:
    """The Arrow type of a tables.py DDL type (as Delta stores it)."""
    if m := re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", sql):
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    if sql.startswith("STRUCT<"):
        inner = sql[len("STRUCT<") : -1].replace(":", " ")
        return pa.struct([(n, arrow_type(t)) for n, t in suites._declared(inner).items()])
    return _ARROW[sql]


def arrow_schema(ddl: str) -> pa.Schema:
    return pa.schema([(n, arrow_type(t)) for n, t in suites._declared(ddl).items()])


def provenance(offset: int, partition: int = 0) -> dict:
    return {
        "_topic": "t",
        "_partition": partition,
        "_offset": offset,
        "_kafka_ts": T0 + timedelta(seconds=offset),
        "_batch_id": 0,
        "_generation": 0,
        "_ingested_at": T0 + timedelta(minutes=1),
    }


def all_types_row(k: int) -> dict:
    """Every declared type, and a NULL in each optional column of the second row."""
    full = k != 1
    return {
        "event_id": f"00000000-0000-4000-8000-{k:012d}",
        "units": k if full else None,
        "total": 2**40 + k if full else None,
        "event_time": T0 + timedelta(seconds=k) if full else None,
        "amount": Decimal("12.30") + k if full else None,
        "payload": f"payload-{k}".encode() if full else None,
        "active": k % 2 == 0 if full else None,
        "score": 0.5 * k if full else None,
        "day": date(2026, 1, 1) + timedelta(days=k) if full else None,
        "_sequence": {"source_lsn": 100 + k},
        **provenance(k),
    }


@pytest.fixture(scope="module")
def all_types(tmp_path_factory) -> pa.Table:
    """Three rows written to a Delta table by delta-rs and read back by its scan, as the audit reads a
    sink (text and bytes come back as string_view and binary_view)."""
    path = str(tmp_path_factory.mktemp("all-types") / "bronze")
    rows = [all_types_row(k) for k in range(3)]
    write_deltalake(path, pa.Table.from_pylist(rows, schema=arrow_schema(ALL_TYPES_DDL)))
    return pa.table(DeltaTable(path).scan().read_all())


def all_types_suite(rows: int) -> gx.ExpectationSuite:
    """Built as bronze's suite is: schema, Kafka coordinates unique, required columns, row count."""
    return gx.ExpectationSuite(
        name="bronze",
        expectations=[
            *suites._schema(ALL_TYPES_DDL, NESTED),
            gxe.ExpectCompoundColumnsToBeUnique(column_list=list(tables.SOURCE_KEY)),
            *suites._not_null("event_id", "_sequence", *tables.SOURCE_KEY, "_batch_id", "_generation"),
            gxe.ExpectTableRowCountToEqual(value=rows),
        ],
    )


def _checks(table: pa.Table, tmp_path, rows: int = 3) -> dict:
    out = run_suites({"bronze": (table, all_types_suite(rows))}, tmp_path, "run-types")
    return {c.name: c for c in out.checks}


def _failed(checks: dict) -> set[str]:
    return {name for name, c in checks.items() if c.status == CheckStatus.FAILED}


def _type_check(column: str) -> str:
    return f"gx.bronze.expect_column_values_to_be_of_type[{column}]"


def test_an_arrow_table_of_every_declared_type_passes_its_schema_checks(all_types, tmp_path):
    assert pa.types.is_string_view(all_types.schema.field("event_id").type)  # as the audit gets it
    out = run_suites({"bronze": (all_types, all_types_suite(3))}, tmp_path, "run-types")
    checks = {c.name: c for c in out.checks}
    assert _failed(checks) == set()
    declared = suites.ddl_types(ALL_TYPES_DDL)
    typed = {n for n in checks if "expect_column_values_to_be_of_type" in n}
    assert typed == {_type_check(c) for c in declared}  # one type check per declared column
    # each judged by the column's dtype (as Spark judged the schema), not value by value
    assert {c: checks[_type_check(c)].observed for c in ("event_id", "units", "amount", "_sequence")} == {
        "event_id": "str",
        "units": "int32",
        "amount": "Decimal",
        "_sequence": "dict",
    }
    assert checks[_type_check("amount")].expected == {"type_": "Decimal"}
    assert sorted(checks["gx.bronze.expect_table_columns_to_match_set"].observed) == sorted([*declared, *NESTED])
    assert out.statistics["bronze"]["evaluated_expectations"] == len(all_types_suite(3).expectations)
    assert set(out.suite_pages) == {"bronze"} and (tmp_path / out.suite_pages["bronze"]).is_file()


@pytest.mark.parametrize(
    ("column", "stored"),
    [
        pytest.param("event_id", pa.array([1, 2, 3], pa.int64()), id="STRING-holding-ints"),
        pytest.param("units", pa.array([1, 2, 3], pa.int64()), id="INT-stored-as-BIGINT"),
        pytest.param("total", pa.array(["1", "2", "3"]), id="BIGINT-as-text"),
        pytest.param("event_time", pa.array([datetime(2026, 1, 1)] * 3, pa.timestamp("us")), id="TIMESTAMP-NTZ"),
        pytest.param("event_time", pa.array(["2026-01-01T00:00:00Z"] * 3), id="TIMESTAMP-as-text"),
        pytest.param("amount", pa.array([12.3, 1.0, 2.0]), id="DECIMAL-as-DOUBLE"),
        pytest.param("payload", pa.array(["a", "b", "c"]), id="BINARY-as-text"),
        pytest.param("active", pa.array([1, 0, 1], pa.int8()), id="BOOLEAN-as-number"),
        pytest.param("score", pa.array([Decimal("0.5")] * 3, pa.decimal128(4, 1)), id="DOUBLE-as-DECIMAL"),
        pytest.param("day", pa.array([T0] * 3, pa.timestamp("us", tz="UTC")), id="DATE-as-TIMESTAMP"),
        # all NULL: judged by the column's type all the same, as Spark judged the schema
        pytest.param("amount", pa.array([None, None, None], pa.string()), id="DECIMAL-as-all-NULL-text"),
    ],
)
def test_a_column_stored_with_another_type_fails_its_type_check(all_types, tmp_path, column, stored):
    wrong = all_types.set_column(all_types.schema.get_field_index(column), column, stored)
    checks = _checks(wrong, tmp_path)
    assert _failed(checks) == {_type_check(column)}


def test_a_struct_that_is_not_one_fails_its_type_check_and_the_column_set(all_types, tmp_path):
    wrong = all_types.set_column(
        all_types.schema.get_field_index("_sequence"), "_sequence", pa.array(['{"source_lsn": 1}'] * 3)
    )
    checks = _checks(wrong, tmp_path)
    assert _failed(checks) == {_type_check("_sequence"), "gx.bronze.expect_table_columns_to_match_set"}
    renamed = pa.array([{"lsn": 1}] * 3, pa.struct([("lsn", pa.int64())]))  # a struct without its field
    checks = _checks(
        all_types.set_column(all_types.schema.get_field_index("_sequence"), "_sequence", renamed), tmp_path
    )
    assert _failed(checks) == {"gx.bronze.expect_table_columns_to_match_set"}


def test_an_empty_table_is_judged_by_its_column_types(all_types, tmp_path):
    assert _failed(_checks(all_types.slice(0, 0), tmp_path, rows=0)) == set()
    wrong = all_types.slice(0, 0).set_column(all_types.schema.get_field_index("day"), "day", pa.array([], pa.string()))
    assert _failed(_checks(wrong, tmp_path, rows=0)) == {_type_check("day")}


def test_a_null_in_a_required_column_fails_with_its_count(all_types, tmp_path):
    ids = all_types.column("event_id").to_pylist()
    wrong = all_types.set_column(0, "event_id", pa.array([ids[0], None, ids[2]], pa.string()))
    checks = _checks(wrong, tmp_path)
    assert _failed(checks) == {"gx.bronze.expect_column_values_to_not_be_null[event_id]"}
    assert checks["gx.bronze.expect_column_values_to_not_be_null[event_id]"].observed == {
        "unexpected_count": 1,
        "element_count": 3,
    }


def test_a_kafka_record_stored_twice_fails_the_compound_uniqueness(all_types, tmp_path):
    twice = pa.concat_tables([all_types, all_types.slice(2, 1)])
    checks = _checks(twice, tmp_path, rows=4)
    name = "gx.bronze.expect_compound_columns_to_be_unique[_topic,_partition,_offset]"
    assert _failed(checks) == {name}
    assert checks[name].observed == {"unexpected_count": 2, "element_count": 4}
    # the rerun with SUMMARY gives the offending coordinates as samples
    assert [s["value"] for s in checks[name].samples] == [{"_topic": "t", "_partition": 0, "_offset": 2}] * 2


def test_the_row_count_fails_on_a_wrong_count(all_types, tmp_path):
    checks = _checks(all_types, tmp_path, rows=4)
    assert _failed(checks) == {"gx.bronze.expect_table_row_count_to_equal"}
    assert checks["gx.bronze.expect_table_row_count_to_equal"].observed == 3


# -- the sink suites themselves (suites.py), on tables of the shipped pipelines' shapes ----------
def table_of(ddl: str, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=arrow_schema(ddl))


def payments_tables(pipeline, broken: bool = False) -> dict[str, pa.Table]:
    """Bronze, quarantine and aggregates of the payments example; `broken`: one row breaks each rule."""
    bronze = [
        {
            "event_id": f"00000000-0000-4000-8000-{k:012d}",
            "account_id": f"acct-{k % 2}",
            "amount": Decimal("10.25") + k,
            "currency": "EUR",
            "event_time": T0 + timedelta(seconds=k),
            **provenance(k),
        }
        for k in range(5)
    ]
    quarantine = [{"_key": None, "_value": b"{not json", "reason": "invalid_json", "detail": "at 1", **provenance(5)}]
    aggs = [
        {
            "account_id": f"acct-{a}",
            "window_start": T0,
            "window_end": T0 + timedelta(minutes=1),
            "events": 3 - a,
            "amount_sum": Decimal("40.75"),
            "first_batch_id": 0,
            "last_batch_id": 0,
        }
        for a in range(2)
    ]
    if broken:
        bronze[1]["currency"] = "XXX"
        bronze[2]["amount"] = Decimal("-1.00")
        bronze[3]["event_id"] = "not-a-uuid"
        bronze[4]["event_id"] = bronze[0]["event_id"]
        quarantine[0]["reason"] = "bogus"
        aggs[1] |= {"window_end": T0, "events": 0}
    return {
        "bronze": table_of(tables.bronze_ddl(pipeline.schema), bronze),
        "quarantine": table_of(tables.QUARANTINE_DDL, quarantine),
        "aggregates": table_of(tables.aggregates_ddl(pipeline.schema, pipeline.sinks.aggregates), aggs),
    }


def cdc_tables(pipeline, broken: bool = False) -> dict[str, pa.Table]:
    """Bronze and the keyed table of the customers_cdc example (`_sequence` a struct)."""
    keyed = pipeline.keyed
    changes = [
        {
            "id": k,
            "email": f"{k}@example.com",
            "name": None,
            "tier": "pro",
            "balance": Decimal("1.50"),
            "updated_at": T0 + timedelta(seconds=k),
            "_op": "c",
            "_sequence": {"source_lsn": 100 + k},
            **provenance(k),
        }
        for k in range(3)
    ]
    current = [
        {
            **{f.name: c[f.name] for f in pipeline.schema.fields},
            "_sequence": c["_sequence"],
            "_partition": c["_partition"],
            "_offset": c["_offset"],
            "_deleted": False,
            "_batch_id": 0,
            "_generation": 0,
            "_changed_at": T0 + timedelta(minutes=1),
        }
        for c in changes
    ]
    if broken:
        changes[1]["email"] = "x" * 321 + "@example.com"
        changes[2]["tier"] = "gold"
        current[2]["id"] = current[0]["id"]
    return {
        "bronze": table_of(tables.bronze_ddl(pipeline.schema, keyed), changes),
        "current": table_of(tables.current_ddl(pipeline.schema, keyed), current),
    }


def _sink_datasets(pipeline, data: dict[str, pa.Table]) -> dict:
    build = {
        "bronze": lambda t: suites.bronze_suite(pipeline, t.num_rows),
        "quarantine": lambda t: suites.quarantine_suite(t.num_rows, pipeline),
        "aggregates": lambda t: suites.aggregates_suite(pipeline, t.num_rows),
        "current": lambda t: suites.current_suite(pipeline, t.num_rows, 0),
    }
    return {name: (t, build[name](t)) for name, t in data.items()}


@pytest.fixture
def payments(tmp_path):
    return load_pipeline(tmp_path / "payments", "localhost:1", "t")


@pytest.fixture
def customers_cdc(tmp_path):
    return cdc_pipeline_file(tmp_path / "cdc", "localhost:1", "t")[1]


def test_the_sink_suites_pass_on_clean_tables(payments, customers_cdc, tmp_path):
    for name, pipeline, data in [
        ("payments", payments, payments_tables(payments)),
        ("cdc", customers_cdc, cdc_tables(customers_cdc)),
    ]:
        out = run_suites(_sink_datasets(pipeline, data), tmp_path / name, f"run-{name}")
        assert _failed({c.name: c for c in out.checks}) == set(), name
        assert set(out.suite_pages) == set(data)
    set_check = {c.name: c for c in out.checks}["gx.bronze.expect_table_columns_to_match_set"]
    assert "_sequence.source_lsn" in set_check.observed  # the Debezium `_sequence` struct's field


def test_the_sink_suites_catch_each_broken_rule(payments, customers_cdc, tmp_path):
    out = run_suites(_sink_datasets(payments, payments_tables(payments, broken=True)), tmp_path / "p", "run-p")
    checks = {c.name: c for c in out.checks}
    assert _failed(checks) == {
        "gx.bronze.expect_column_values_to_be_in_set[currency]",
        "gx.bronze.expect_column_values_to_be_between[amount]",
        "gx.bronze.expect_column_values_to_match_regex[event_id]",
        "gx.bronze.expect_column_values_to_be_unique[event_id]",
        "gx.quarantine.expect_column_values_to_be_in_set[reason]",
        "gx.aggregates.expect_column_pair_values_a_to_be_greater_than_b[window_end,window_start]",
        "gx.aggregates.expect_column_values_to_be_between[events]",
    }
    assert checks["gx.bronze.expect_column_values_to_be_between[amount]"].samples == [{"value": "-1.00"}]
    assert checks["gx.bronze.expect_column_values_to_be_in_set[currency]"].samples == [{"value": "XXX"}]
    out = run_suites(_sink_datasets(customers_cdc, cdc_tables(customers_cdc, broken=True)), tmp_path / "c", "run-c")
    assert _failed({c.name: c for c in out.checks}) == {
        "gx.bronze.expect_column_value_lengths_to_be_between[email]",
        "gx.bronze.expect_column_values_to_be_in_set[tier]",
        "gx.current.expect_column_values_to_be_unique[id]",
    }


def test_a_dataset_that_is_neither_an_arrow_table_nor_rows_is_refused(all_types, tmp_path):
    with pytest.raises(TypeError, match=r"pyarrow.Table or Rows datasets, not \{'bronze': 'DataFrame'\}"):
        run_suites({"bronze": (all_types.to_pandas(), all_types_suite(3))}, tmp_path, "run-wrong")
    assert not (tmp_path / "data_docs").exists()
