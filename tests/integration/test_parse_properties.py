"""The job's validation against the audit's judge over the whole space docs/validation.md defines.

Hypothesis draws declared schemas of every type and rule and, for each, records from every
corner (tests/json_space.py, written from the docs, not from onceflow's generator): valid
events, fields of any JSON shape, numbers written every way, long strings of escapes, records
of exactly max_bytes, deep nesting, wide objects, damaged bytes. Each drawn batch runs
through the job's Spark parse in one job; for every record the job and the judge
(schema/reference.py) must give the same reason and the same typed values, and a record
built to keep every rule must be valid to both. Spark must finish: a record that overflows
an executor's stack fails the test.

`make test` runs a fixed, seeded budget (the `ci` Hypothesis profile, tests/conftest.py);
`make fuzz` runs a long, random one and prints how many records it tried.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow.config import load_pipeline
from onceflow.schema.model import Schema
from onceflow.schema.reference import Judge
from onceflow.spark.parse import parse_events
from tests.json_space import records, schemas, valid_records

pytestmark = [pytest.mark.integration, pytest.mark.spark]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TRIED = {"records": 0, "batches": 0}  # what a run tried, printed by `make fuzz`
_SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@pytest.fixture(scope="module", autouse=True)
def _tally():
    """What the run tried, on the terminal (`make fuzz` runs with -s)."""
    started = time.monotonic()
    yield
    print(
        f"\nparse properties: {TRIED['records']:,} records tried in {TRIED['batches']:,} drawn batches "
        f"(job and judge compared on each), {time.monotonic() - started:.0f} s"
    )


def _comparable(schema: Schema, values: dict) -> dict:
    """Typed values as the job's row shows them: timestamps in UTC microseconds, dates in days."""
    out = {}
    for f in schema.fields:
        v = values[f.name]
        if isinstance(v, datetime):
            v = (v - _EPOCH) // timedelta(microseconds=1)
        elif isinstance(v, date):
            v = (v - date(1970, 1, 1)).days
        out[f.name] = v
    return out


def check_batch(
    spark, schema: Schema, values: list[bytes | None], must_be_valid: set[int], judge=None, readable=None
) -> None:
    """One Spark job over the batch; every record judged alike, every built-valid record valid.
    `judge` (default reference.Judge) and `readable` (what the job does to the Kafka rows before its
    parse, e.g. spark/framed.with_json_payloads): another format's."""
    df = spark.createDataFrame(
        [(None, v, "t", 0, i, datetime(2026, 1, 1), 0) for i, v in enumerate(values)],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int",
    )
    parsed = parse_events(readable(df) if readable else df, schema)
    cols = []
    for f in schema.fields:
        base = f.ftype.base
        c = f"`{f.name}`"
        cols.append(
            f"unix_micros({c}) AS {c}" if base == "timestamp" else f"unix_date({c}) AS {c}" if base == "date" else c
        )
    rows = {r["_offset"]: r for r in parsed.selectExpr("_offset", "reason", "detail", *cols).collect()}
    judge = judge or Judge(schema)
    problems = []
    for i, value in enumerate(values):
        row, verdict = rows[i], judge.judge(value)
        shown = "None" if value is None else repr(value[:160]) + (f"… ({len(value)} bytes)" if len(value) > 160 else "")
        if row["reason"] != verdict.reason:
            problems.append(f"{shown}: job {row['reason']} ({row['detail']}), judge {verdict.reason}")
            continue
        if i in must_be_valid and verdict.reason is not None:
            problems.append(f"{shown}: built valid, but both say {verdict.reason} ({row['detail']})")
        if verdict.reason is None:
            job = {f.name: row[f.name] for f in schema.fields}
            judged = _comparable(schema, verdict.values)
            if job != judged:
                problems.append(f"{shown}: values differ: job {job}, judge {judged}")
        elif not row["detail"]:
            problems.append(f"{shown}: {row['reason']} without a detail")
    TRIED["records"] += len(values)
    TRIED["batches"] += 1
    assert not problems, f"schema {schema.model_dump(exclude_defaults=True)}\n" + "\n".join(problems)


def _batch(data, schema: Schema) -> tuple[list[bytes | None], set[int]]:
    anything = data.draw(st.lists(records(schema), min_size=20, max_size=60), label="records")
    valid = data.draw(st.lists(valid_records(schema), max_size=10), label="valid records")
    fits = {len(anything) + i for i, v in enumerate(valid) if len(v) <= schema.max_bytes}
    return anything + valid, fits


@_SETTINGS
@given(data=st.data())
def test_job_and_judge_agree_on_any_record_of_any_declared_schema(spark, data):
    schema = data.draw(schemas(), label="schema")
    check_batch(spark, schema, *_batch(data, schema))


@pytest.mark.parametrize("name", ["payments", "sensors"])
def test_job_and_judge_agree_on_any_record_of_the_shipped_schemas(spark, name):
    schema = load_pipeline(name).schema

    @_SETTINGS
    @given(data=st.data())
    def agree(data):
        check_batch(spark, schema, *_batch(data, schema))

    agree()
