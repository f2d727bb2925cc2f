"""The job's Spark parse of Debezium change events against the audit's reference, record by record.

spark/parse.py reads a Debezium topic (`schema.format: debezium`) in Spark SQL; cdc/envelope.py
reads it again in plain Python for the audit. For every record both must agree: a tombstone (a
null value, a schemas-enabled record whose payload is null) is no row at all; a malformed record
has the same reason (the first failing check, docs/cdc.md); a change has the same `_op`, the same
`_sequence` and the same values of the declared fields (a delete's: its key and sequence fields
only). First hand-written edges, each with the outcome docs/cdc.md gives it; then envelopes that
Hypothesis draws for drawn schemas, keys and sequences (tests/json_space.py), a batch per Spark job.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow import tables
from onceflow.cdc.envelope import TOMBSTONE, Change, Envelope, Malformed
from onceflow.cdc.spec import DIGITS, LOGICAL_TYPES, LONG, PLACEHOLDER, PLAIN_TYPES, POSITIONS, KeyedSpec, resolve
from onceflow.schema import reasons as R
from onceflow.schema.model import ENCODINGS_FOR, EVENT_TIME_POSITIONS, Encoding, Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import read_date, read_timestamp
from onceflow.spark.parse import bronze_rows, parse_events, sink_rows
from onceflow.state.unprocessable import Declared, Unprocessable
from tests.json_space import Raw, any_json, dumps, events, field_values, hard_strings, records, schemas

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ABSENT = object()
CHANGE, GONE = "change", "tombstone"  # the outcomes besides a reason
PLAIN_TAIL = ["_topic", "_partition", "_offset", "_kafka_ts", "_batch_id", "_generation", "_ingested_at"]

CUSTOMERS = Schema.model_validate(
    {
        "format": "debezium",
        "max_bytes": 16384,
        "event_time": "updated_at",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "email", "type": "string", "max_length": 320},
            {"name": "name", "type": "string", "required": False},
            {"name": "tier", "type": "string", "allowed": ["free", "pro", "enterprise"]},
            {"name": "balance", "type": "decimal(18,2)", "encoding": "string", "required": False},
            {"name": "updated_at", "type": "timestamp"},
        ],
    }
)
# Oracle-like: the sequence is the commit time, then the SCN (digits, compared as a number)
ORACLE = CUSTOMERS
# MySQL-like: a composite key with a nested field, a field of the row then binlog positions
ORDERS = Schema.model_validate(
    {
        "format": "debezium",
        "max_bytes": 4000,
        "event_time": "at",
        "fields": [
            {"name": "region", "type": "string", "path": "$.loc.region"},
            {"name": "id", "type": "int"},
            {"name": "version", "type": "long", "min": 0},
            {"name": "day", "type": "date", "required": False},
            {"name": "score", "type": "double", "required": False},
            {"name": "paid", "type": "boolean", "required": False},
            {"name": "at", "type": "timestamp"},
        ],
    }
)
SPECS = {
    "customers": (CUSTOMERS, ["id"], "source.lsn"),
    "oracle": (ORACLE, ["id"], ["source.ts_ms", "source.scn"]),
    "orders": (ORDERS, ["region", "id"], ["version", "source.file", "source.pos"]),
}


def _micros(v: Any) -> Any:
    """A typed value as the job's row shows it once converted: timestamps in UTC microseconds, dates in days."""
    if isinstance(v, datetime):
        return (v - _EPOCH) // timedelta(microseconds=1)
    if isinstance(v, date):
        return (v - date(1970, 1, 1)).days
    return v


def _sql(column: str, base: str) -> str:
    return f"unix_micros({column})" if base == "timestamp" else f"unix_date({column})" if base == "date" else column


def _bronze_values(change: Change, schema: Schema, keyed: KeyedSpec) -> dict:
    """What bronze holds for a change: the row (a delete's key and sequence fields), `_op`, `_sequence`."""
    if change.row is not None:
        values = {f.name: change.row[f.name] for f in schema.fields}
    else:
        values = {f.name: None for f in schema.fields}
        values |= dict(zip(keyed.key_names, change.key, strict=True))
        values |= {p.field.name: v for p, v in zip(keyed.sequence, change.sequence, strict=True) if p.field}
    out = {n: _micros(v) for n, v in values.items()}
    out["_op"] = change.op
    out |= {f"_seq_{p.column}": _micros(v) for p, v in zip(keyed.sequence, change.sequence, strict=True)}
    if schema.event_time_position is not None:
        out["_event_time"] = _micros(change.event_time)
    return out


def outcome(parsed: Any) -> str:
    return GONE if parsed is TOMBSTONE else parsed.reason if isinstance(parsed, Malformed) else CHANGE


def check_batch(
    spark, schema: Schema, keys: Sequence[str], sequence_by: str | Sequence[str], values: list
) -> dict[int, str]:
    """One Spark job over the batch; every record's outcome and values alike in the job and the
    reference. Returns each record's outcome (by index)."""
    keyed = resolve(schema, keys, sequence_by)
    reference = Envelope(schema, keys, sequence_by)
    df = spark.createDataFrame(
        [(None, v, "t", 0, i, datetime(2026, 1, 1)) for i, v in enumerate(values)],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp",
    )
    parsed = parse_events(df, schema, keyed=keyed)
    cols = [f"{_sql(f'`{f.name}`', f.ftype.base)} AS `{f.name}`" for f in schema.fields]
    for p in keyed.sequence:
        base = p.field.ftype.base if p.field is not None else "position"
        cols.append(f"{_sql(f'_sequence.`{p.column}`', base)} AS `_seq_{p.column}`")
    if schema.event_time_position is not None:
        cols.append("unix_micros(_event_time) AS _event_time")
    rows = {r["_offset"]: r for r in parsed.selectExpr("_offset", "reason", "detail", "_op", *cols).collect()}
    problems, outcomes = [], {}
    for i, value in enumerate(values):
        expected = reference.parse(None, value)
        outcomes[i] = outcome(expected)
        row = rows.get(i)
        shown = "None" if value is None else repr(value[:200]) + (f"… ({len(value)} bytes)" if len(value) > 200 else "")
        job = "absent (a tombstone)" if row is None else f"{row['reason']} ({row['detail']})"
        if expected is TOMBSTONE or row is None:
            if not (expected is TOMBSTONE and row is None):
                problems.append(f"{shown}: job {job}, reference {expected!r}")
            continue
        if isinstance(expected, Malformed):
            if row["reason"] != expected.reason:
                problems.append(f"{shown}: job {job}, reference {expected.reason} ({expected.detail})")
            elif not row["detail"]:
                problems.append(f"{shown}: {row['reason']} without a detail")
            continue
        if row["reason"] is not None:
            problems.append(f"{shown}: job {job}, reference a change {expected}")
            continue
        assert isinstance(expected, Change)  # neither malformed nor a tombstone here
        want = _bronze_values(expected, schema, keyed)
        got = {k: row[k] for k in want}
        if got != want:
            problems.append(f"{shown}: values differ: job {got}, reference {want}")
    dump = schema.model_dump(exclude_defaults=True)
    assert not problems, f"schema {dump}, keys {keys}, sequence_by {sequence_by}\n" + "\n".join(problems)
    return outcomes


# -- hand-written edges ------------------------------------------------------------------------
def j(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def row(**over: Any) -> dict:
    body = {"id": 7, "email": "a@example.com", "tier": "pro", "updated_at": "2026-01-01T00:05:00Z"}
    return {k: v for k, v in (body | over).items() if v is not _ABSENT}


def env(op: Any = "c", after: Any = None, before: Any = None, lsn: Any = 24023128, **more: Any) -> dict:
    out: dict[str, Any] = {} if op is _ABSENT else {"op": op}
    if before is not _ABSENT:
        out["before"] = before
    if after is not _ABSENT:
        out["after"] = row() if after is None and op != "d" else after
    out["source"] = {"connector": "postgresql", "ts_ms": 1767225900120} | ({} if lsn is _ABSENT else {"lsn": lsn})
    out["ts_ms"] = 1767225900123
    return out | more


def raw(text: str) -> bytes:
    return text.encode()


CUSTOMER_EDGES: list[tuple[bytes | None, str]] = [
    # tombstones and the schemas-enabled form
    (None, GONE),
    (j({"schema": {"type": "struct"}, "payload": None}), GONE),
    (raw('{"payload": null, "schema": {}}  \n'), GONE),
    (raw('{"schema": {}, "payload": null} x'), Reason.TRAILING_CONTENT),
    (raw('{"schema": {}, "payload": null, "schema": 1}'), Reason.DUPLICATE_KEY),
    (j({"schema": {}, "payload": 5}), Reason.NOT_AN_OBJECT),
    (j({"schema": {}, "payload": [env()]}), Reason.NOT_AN_OBJECT),
    (j({"schema": {}, "payload": "x"}), Reason.NOT_AN_OBJECT),
    (j({"schema": {"type": "struct"}, "payload": env()}), CHANGE),
    (j({"schema": None, "payload": env("d", before=row(), after=None)}), CHANGE),
    (j({"schema": {}, "payload": env(), "extra": 1}), Reason.CDC_MISSING_OP),  # not the wrapper: no op at the top
    (j({"payload": None}), Reason.CDC_MISSING_OP),
    (j({"schema": {}, "payload": {"schema": {}, "payload": None}}), Reason.CDC_MISSING_OP),  # unwrapped once only
    # the whole-record checks come first
    (raw("not json"), Reason.INVALID_JSON),
    (raw("[1]"), Reason.NOT_AN_OBJECT),
    (raw("null"), Reason.NOT_AN_OBJECT),
    (b"\xff" + j(env()), Reason.INVALID_UTF8),
    (raw('{"op": "c", "op": "d"}'), Reason.DUPLICATE_KEY),
    (j(env(padding="p" * 17000)), Reason.OVERSIZED),
    (raw(json.dumps(env())[:-1] + ', "bad": "\\ud800"}'), Reason.LONE_SURROGATE),
    # op
    (j(env(_ABSENT)), Reason.CDC_MISSING_OP),
    (j(env(None)), Reason.CDC_MISSING_OP),
    (j(env(_ABSENT, after=_ABSENT, lsn=_ABSENT)), Reason.CDC_MISSING_OP),
    (j(env("t")), Reason.CDC_UNKNOWN_OP),
    (j(env("m", after=_ABSENT)), Reason.CDC_UNKNOWN_OP),
    (j(env("C")), Reason.CDC_UNKNOWN_OP),
    (j(env("")), Reason.CDC_UNKNOWN_OP),
    (j(env(1)), Reason.CDC_UNKNOWN_OP),
    (j(env(True)), Reason.CDC_UNKNOWN_OP),
    (j(env(["c"])), Reason.CDC_UNKNOWN_OP),
    (j(env({"op": "c"})), Reason.CDC_UNKNOWN_OP),
    # each op, and the row it needs
    (j(env("c")), CHANGE),
    (j(env("u", before=row(email="old@example.com"))), CHANGE),
    (j(env("r")), CHANGE),
    (j(env("d", before=row(), after=None)), CHANGE),
    (j(env("d", before={"id": 7}, after=None)), CHANGE),  # a delete with its key alone
    (j(env("d", before={"id": 7, "tier": "gold", "email": 5}, after=None)), CHANGE),  # its row is not judged
    (j(env("c", after=_ABSENT)), Reason.CDC_MISSING_AFTER),
    (j(env("c", after={})), Reason.CDC_MISSING_KEY),
    (j({"op": "c", "after": None, "source": {"lsn": 1}}), Reason.CDC_MISSING_AFTER),
    (j(env("u", after=[row()])), Reason.CDC_MISSING_AFTER),
    (j(env("r", after="row")), Reason.CDC_MISSING_AFTER),
    (j(env("c", after=_ABSENT, before=row())), Reason.CDC_MISSING_AFTER),
    (j(env("d", after=row())), Reason.CDC_MISSING_BEFORE),
    (j(env("d", before=_ABSENT, after=row())), Reason.CDC_MISSING_BEFORE),
    (j(env("d", before=7, after=None)), Reason.CDC_MISSING_BEFORE),
    # the key
    (j(env("c", after=row(id=_ABSENT))), Reason.CDC_MISSING_KEY),
    (j(env("c", after=row(id=None))), Reason.CDC_MISSING_KEY),
    (j(env("d", before={"email": "a@example.com"}, after=None)), Reason.CDC_MISSING_KEY),
    (j(env("c", after=row(id=_ABSENT), lsn=_ABSENT)), Reason.CDC_MISSING_KEY),  # the key before the sequence
    (j(env("c", after=row(id="7"))), Reason.CDC_INVALID_KEY),
    (raw(json.dumps(env("c", after=row(id=0))).replace('"id": 0', '"id": 1.5')), Reason.CDC_INVALID_KEY),
    (j(env("c", after=row(id=2**63))), Reason.CDC_INVALID_KEY),
    (j(env("c", after=row(id=True))), Reason.CDC_INVALID_KEY),
    (j(env("d", before={"id": {"v": 7}}, after=None)), Reason.CDC_INVALID_KEY),
    (raw(json.dumps(env("c", after=row(id=0))).replace('"id": 0', '"id": 7.00')), CHANGE),
    (j(env("c", after=row(id=-(2**63)))), CHANGE),
    # the sequence: source.lsn, a LONG position
    (j(env(lsn=_ABSENT)), Reason.CDC_MISSING_SEQUENCE),
    (j(env(lsn=None)), Reason.CDC_MISSING_SEQUENCE),
    (j({**env(), "source": "x"}), Reason.CDC_MISSING_SEQUENCE),
    (j({**env(), "source": [{"lsn": 1}]}), Reason.CDC_MISSING_SEQUENCE),
    (j({**env(), "source": None}), Reason.CDC_MISSING_SEQUENCE),
    (j(env("d", before={"id": 7}, after=None, lsn=_ABSENT)), Reason.CDC_MISSING_SEQUENCE),
    (j(env(lsn="24023128")), Reason.CDC_INVALID_SEQUENCE),
    (j(env(lsn=9.5)), Reason.CDC_INVALID_SEQUENCE),
    (j(env(lsn=True)), Reason.CDC_INVALID_SEQUENCE),
    (j(env(lsn=2**63)), Reason.CDC_INVALID_SEQUENCE),
    (j(env(lsn=-(2**63) - 1)), Reason.CDC_INVALID_SEQUENCE),
    (j(env(lsn={"v": 1})), Reason.CDC_INVALID_SEQUENCE),
    (raw(json.dumps(env(lsn=0)).replace('"lsn": 0', '"lsn": 1e3')), Reason.CDC_INVALID_SEQUENCE),
    (raw(json.dumps(env(lsn=0)).replace('"lsn": 0', '"lsn": 1.0')), CHANGE),
    (raw(json.dumps(env(lsn=0)).replace('"lsn": 0', '"lsn": 9223372036854775807.000')), CHANGE),
    (raw(json.dumps(env(lsn=0)).replace('"lsn": 0', '"lsn": 9223372036854775808.0')), Reason.CDC_INVALID_SEQUENCE),
    (raw(json.dumps(env(lsn=0)).replace('"lsn": 0', '"lsn": -0')), CHANGE),
    (j(env(lsn=-1)), CHANGE),
    (j(env(lsn=2**63 - 1)), CHANGE),
    (j(env("d", before={"id": 7}, after=None, lsn="x")), Reason.CDC_INVALID_SEQUENCE),
    # then, for c/u/r, the row's fields as an event's
    (j(env("c", after=row(email=_ABSENT))), Reason.MISSING_FIELD),
    (j(env("u", after=row(updated_at=None))), Reason.MISSING_FIELD),
    (j(env("c", after=row(email=5))), Reason.WRONG_TYPE),
    (j(env("r", after=row(balance="12.345"))), Reason.INVALID_VALUE),
    (j(env("c", after=row(updated_at="2026-01-01T00:05:00"))), Reason.INVALID_VALUE),
    (j(env("c", after=row(tier="gold"))), Reason.NOT_ALLOWED),
    (j(env("c", after=row(email="e" * 321))), Reason.TOO_LONG),
    (j(env("c", after=row(name="n" * 2000, balance="-12.5", extra={"x": [1, 2]}))), CHANGE),
    (j(env("c", after=row(name=None, balance=12.25))), Reason.WRONG_TYPE),  # decimal.handling.mode=string writes text
    (j(env("u", after=row(tier="gold"), before=row(tier="gold"))), Reason.NOT_ALLOWED),
]
ORACLE_EDGES: list[tuple[bytes | None, str]] = [
    (j(env(source={"ts_ms": 5, "scn": "12345678901234567890123456789012345678"})), CHANGE),
    (j(env(source={"ts_ms": 5, "scn": "0"})), CHANGE),
    (j(env(source={"ts_ms": 5, "scn": "007"})), CHANGE),
    (j(env("d", before={"id": 7}, after=None, source={"ts_ms": 5, "scn": "42"})), CHANGE),
    (j(env(source={"ts_ms": 5, "scn": "1" * 39})), Reason.CDC_INVALID_SEQUENCE),
    (j(env(source={"ts_ms": 5, "scn": ""})), Reason.CDC_INVALID_SEQUENCE),
    (j(env(source={"ts_ms": 5, "scn": 42})), Reason.CDC_INVALID_SEQUENCE),
    (j(env(source={"ts_ms": 5, "scn": " 42"})), Reason.CDC_INVALID_SEQUENCE),
    (j(env(source={"ts_ms": 5, "scn": "42\n"})), Reason.CDC_INVALID_SEQUENCE),
    (j(env(source={"ts_ms": 5, "scn": "-42"})), Reason.CDC_INVALID_SEQUENCE),
    (j(env(source={"ts_ms": 5, "scn": "4.2"})), Reason.CDC_INVALID_SEQUENCE),
    (j(env(source={"ts_ms": 5, "scn": "\u0664\u0662"})), Reason.CDC_INVALID_SEQUENCE),
    (j(env(source={"ts_ms": 5, "scn": "\uff14\uff12"})), Reason.CDC_INVALID_SEQUENCE),
    (j(env(source={"ts_ms": 5})), Reason.CDC_MISSING_SEQUENCE),
    (j(env(source={"ts_ms": "5", "scn": None})), Reason.CDC_MISSING_SEQUENCE),  # any part missing first
    (j(env(source={"scn": "42"})), Reason.CDC_MISSING_SEQUENCE),
    (j(env(source={"ts_ms": "5", "scn": "42"})), Reason.CDC_INVALID_SEQUENCE),
]
ORDERS_ROW = {"loc": {"region": "eu"}, "id": 3, "version": 5, "at": "2026-01-01T00:00:00+01:00"}
MYSQL = {"file": "mysql-bin.000003", "pos": 154, "row": 0}


def order(op: str = "c", image: Any = None, source: Any = None, **over: Any) -> bytes:
    body = {k: v for k, v in (ORDERS_ROW | over).items() if v is not _ABSENT} if image is None else image
    side = "before" if op == "d" else "after"
    return j({"op": op, side: body, "source": MYSQL if source is None else source})


ORDERS_EDGES: list[tuple[bytes | None, str]] = [
    (order(), CHANGE),
    (order(day="2024-02-29", score=1.5, paid=False), CHANGE),
    (order("d", {"loc": {"region": "eu"}, "id": 3, "version": 9}), CHANGE),
    (order("d", {"loc": {"region": "eu"}, "id": 3, "version": -1}), CHANGE),  # no rule judged on a delete
    (order("d", {"loc": {"region": "eu"}, "id": 3}), Reason.CDC_MISSING_SEQUENCE),
    (order("d", {"loc": {"region": "eu"}, "id": 3, "version": "9"}), Reason.CDC_INVALID_SEQUENCE),
    (order("d", {"loc": "eu", "id": 3, "version": 9}), Reason.CDC_MISSING_KEY),
    (order(id=2**31), Reason.CDC_INVALID_KEY),
    (order(id=-(2**31)), CHANGE),
    (order(loc={"region": None}), Reason.CDC_MISSING_KEY),
    (order(loc={"region": 1}, id=_ABSENT), Reason.CDC_MISSING_KEY),
    (order(loc={"region": 1}), Reason.CDC_INVALID_KEY),
    (order(source={**MYSQL, "file": 3}), Reason.CDC_INVALID_SEQUENCE),
    (order(source={**MYSQL, "file": ""}), CHANGE),
    (order(source={**MYSQL, "pos": None}), Reason.CDC_MISSING_SEQUENCE),
    (order(version=-1), Reason.BELOW_MIN),
    (order(version=1.5), Reason.CDC_INVALID_SEQUENCE),
    (order(day="2026-02-29"), Reason.INVALID_VALUE),
]
# Debezium's defaults (issue 48): PostgreSQL `numeric(12,2)` with decimal.handling.mode=precise,
# `numeric` without a scale (VariableScaleDecimal), `date` (epoch days), `timestamp(6)`
# (MicroTimestamp), `timestamptz` (ZonedTimestamp), a TOASTable `text`; no timestamp column is the
# event time: the envelope's source.ts_ms is. Each record as the JSON converter writes it, with and
# without the schema wrapper.
DEFAULTS = Schema.model_validate(
    {
        "format": "debezium",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "balance", "type": "decimal(12,2)", "encoding": "precise", "required": False},
            {"name": "ratio", "type": "decimal(20,6)", "encoding": "precise", "required": False},
            {"name": "born", "type": "date", "encoding": "epoch_days", "required": False},
            {"name": "seen", "type": "timestamp", "encoding": "epoch_micros", "required": False},
            {"name": "paid", "type": "timestamp", "required": False},
            {"name": "bio", "type": "string", "required": False},
        ],
    }
)


def b64(unscaled: int) -> str:
    """A Connect Decimal's bytes as the JSON converter writes them: BigInteger.toByteArray, base64."""
    size = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


def _column(field: str, kind: str, name: str | None = None, **params: str) -> dict:
    out: dict[str, Any] = {"type": kind, "optional": field != "id", "field": field}
    if name:
        out |= {"name": name, "version": 1}
    if params:
        out["parameters"] = params
    return out


VALUE_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "optional": True,
    "name": "shop.public.customers.Value",
    "fields": [
        _column("id", "int64"),
        _column(
            "balance",
            "bytes",
            "org.apache.kafka.connect.data.Decimal",
            **{"scale": "2", "connect.decimal.precision": "12"},
        ),
        _column("ratio", "struct", "io.debezium.data.VariableScaleDecimal"),
        _column("born", "int32", "io.debezium.time.Date"),
        _column("seen", "int64", "io.debezium.time.MicroTimestamp"),
        _column("paid", "string", "io.debezium.time.ZonedTimestamp"),
        _column("bio", "string"),
    ],
}
ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "optional": False,
    "name": "shop.public.customers.Envelope",
    "version": 2,
    "fields": [
        {**VALUE_SCHEMA, "field": "before"},
        {**VALUE_SCHEMA, "field": "after"},
        {
            "type": "struct",
            "optional": False,
            "name": "io.debezium.connector.postgresql.Source",
            "field": "source",
            "fields": [_column("ts_ms", "int64"), _column("lsn", "int64")],
        },
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
}


def pg(after: Any, op: str = "u", before: Any = None, wrapped: bool = False, schema: Any = None) -> bytes:
    """A PostgreSQL connector's change event of DEFAULTS' table (REPLICA IDENTITY DEFAULT: no `before`)."""
    payload = {
        "before": before,
        "after": after,
        "source": {
            "version": "2.7.3.Final",
            "connector": "postgresql",
            "name": "shop",
            "ts_ms": 1767225900120,
            "snapshot": "false",
            "db": "shop",
            "schema": "public",
            "table": "customers",
            "lsn": 24023128,
        },
        "op": op,
        "ts_ms": 1767225900123,
    }
    return j({"schema": schema or ENVELOPE_SCHEMA, "payload": payload} if wrapped else payload)


def _with(column: dict, **member: Any) -> dict:
    """ENVELOPE_SCHEMA with one column's schema replaced."""
    value = {**VALUE_SCHEMA, "fields": [member.get(c["field"], c) for c in VALUE_SCHEMA["fields"]]}
    del column
    return {
        **ENVELOPE_SCHEMA,
        "fields": [{**value, "field": "before"}, {**value, "field": "after"}, *ENVELOPE_SCHEMA["fields"][2:]],
    }


SCALE4 = _with({}, balance=_column("balance", "bytes", "org.apache.kafka.connect.data.Decimal", scale="4"))
AS_TEXT = _with({}, balance=_column("balance", "string"))  # decimal.handling.mode=string
MILLIS = _with({}, seen=_column("seen", "int64", "io.debezium.time.Timestamp"))
NANOS = _with({}, seen=_column("seen", "int64", "io.debezium.time.NanoTimestamp"))
CONNECT_DATE = _with({}, born=_column("born", "int32", "org.apache.kafka.connect.data.Date"))
TIME_OF_DAY = _with({}, seen=_column("seen", "int64", "io.debezium.time.MicroTime"))
ROW = {
    "id": 7,
    "balance": b64(-2662984),
    "ratio": {"scale": 3, "value": b64(12345)},
    "born": 20454,
    "seen": 1767225900123456,
    "paid": "2026-01-01T00:05:00.123456Z",
    "bio": "x" * 6000,
}
TOAST = "__debezium_unavailable_value"
assert TOAST == PLACEHOLDER
DEFAULT_EDGES: list[tuple[bytes | None, str]] = [
    (pg(ROW), CHANGE),
    (pg(ROW, wrapped=True), CHANGE),
    (pg(ROW, "r", wrapped=True), CHANGE),
    # the trap: base64 of -26,629.84 is all digits; it is base64, with the wrapper or without
    (pg({"id": 1, "balance": "1124"}), CHANGE),
    (pg({"id": 1, "balance": "1124"}, wrapped=True), CHANGE),
    (pg({"id": 1, "balance": "1124"}, wrapped=True, schema=AS_TEXT), CHANGE),  # mode=string: 1124.00
    (pg({"id": 1, "balance": "1124.5"}, wrapped=True, schema=AS_TEXT), CHANGE),
    (pg({"id": 1, "balance": "1124.5"}), Reason.INVALID_VALUE),  # text where base64 is declared
    (pg({"id": 1, "balance": 1124.5}), Reason.WRONG_TYPE),  # mode=double where precise is declared
    *[(pg({"id": 1, "balance": b64(u)}), CHANGE) for u in (0, 1, -1, 127, 128, -128, -129, 10**12 - 1, -(10**12 - 1))],
    (pg({"id": 1, "balance": b64(10**12)}), Reason.INVALID_VALUE),  # 13 digits: past decimal(12,2)
    (pg({"id": 1, "balance": "AB=="}), Reason.INVALID_VALUE),  # unused bits set: not the one writing
    (pg({"id": 1, "balance": "AA="}), Reason.INVALID_VALUE),
    (pg({"id": 1, "balance": "A" * 23 + "="}), Reason.INVALID_VALUE),  # 17 bytes
    (pg({"id": 1, "balance": ""}), Reason.INVALID_VALUE),
    (pg({"id": 1, "balance": b64(1234500)}, wrapped=True, schema=SCALE4), CHANGE),  # 123.4500
    (pg({"id": 1, "balance": b64(1234567)}, wrapped=True, schema=SCALE4), Reason.INVALID_VALUE),  # 123.4567: rounds
    (
        pg(
            {"id": 1, "balance": b64(5)},
            wrapped=True,
            schema=_with({}, balance=_column("balance", "bytes", "org.apache.kafka.connect.data.Decimal", scale="x")),
        ),
        Reason.WRONG_TYPE,
    ),
    (pg({"id": 1, "ratio": {"scale": 6, "value": b64(-(10**20) + 1)}}), CHANGE),
    (pg({"id": 1, "ratio": {"scale": 0, "value": b64(10**13)}}, wrapped=True), CHANGE),
    (pg({"id": 1, "ratio": {"scale": 0, "value": b64(10**14)}}), Reason.INVALID_VALUE),  # 15 digits
    (pg({"id": 1, "ratio": {"scale": 7, "value": b64(1)}}), Reason.INVALID_VALUE),
    (pg({"id": 1, "ratio": {"scale": "1", "value": b64(1)}}), Reason.INVALID_VALUE),
    (pg({"id": 1, "ratio": {"scale": 39, "value": b64(1)}}), Reason.INVALID_VALUE),
    (pg({"id": 1, "ratio": {"value": b64(1)}}), Reason.INVALID_VALUE),
    # dates and timestamps in their default encodings
    (pg({"id": 1, "born": -719162, "seen": -62135596800000000}), CHANGE),
    (pg({"id": 1, "born": 2932896, "seen": 253402300799999999}, wrapped=True), CHANGE),
    (pg({"id": 1, "born": 2932897}), Reason.INVALID_VALUE),
    (pg({"id": 1, "seen": 253402300800000000}), Reason.INVALID_VALUE),
    (pg({"id": 1, "born": "2026-01-01"}), Reason.WRONG_TYPE),
    (pg({"id": 1, "born": 20454.5}), Reason.WRONG_TYPE),
    (pg({"id": 1, "born": 20454}, wrapped=True, schema=CONNECT_DATE), CHANGE),
    (pg({"id": 1, "seen": 1767225900123}, wrapped=True, schema=MILLIS), CHANGE),
    (pg({"id": 1, "seen": 253402300800000}, wrapped=True, schema=MILLIS), Reason.INVALID_VALUE),
    (pg({"id": 1, "seen": 2**62}, wrapped=True, schema=MILLIS), Reason.INVALID_VALUE),  # overflows no ANSI check
    (pg({"id": 1, "seen": 1767225900123456000}, wrapped=True, schema=NANOS), CHANGE),
    (pg({"id": 1, "seen": 1767225900123456789}, wrapped=True, schema=NANOS), Reason.INVALID_VALUE),  # never rounded
    (pg({"id": 1, "seen": -1000}, wrapped=True, schema=NANOS), CHANGE),
    (pg({"id": 1, "seen": 5}, wrapped=True, schema=TIME_OF_DAY), Reason.WRONG_TYPE),
    (pg({"id": 1, "paid": "2026-01-01T01:05:00+01:00"}, wrapped=True), CHANGE),
    (pg({"id": 1, "paid": 1767225900123456}, wrapped=True), Reason.WRONG_TYPE),
    # an unchanged TOASTed column: the old row's value, or refused; never the placeholder stored
    (pg({"id": 1, "bio": TOAST}), Reason.CDC_UNAVAILABLE_VALUE),
    (pg({"id": 1, "bio": TOAST}, wrapped=True), Reason.CDC_UNAVAILABLE_VALUE),
    (pg({"id": 1, "bio": TOAST}, before={"id": 1}), Reason.CDC_UNAVAILABLE_VALUE),
    (pg({"id": 1, "bio": TOAST}, before={"id": 1, "bio": TOAST}), Reason.CDC_UNAVAILABLE_VALUE),
    (pg({"id": 1, "bio": TOAST}, before={"id": 1, "bio": "y" * 6000}), CHANGE),  # REPLICA IDENTITY FULL
    (pg({"id": 1, "bio": TOAST}, before={"id": 1, "bio": None}, wrapped=True), CHANGE),
    (pg({"id": 1, "born": TOAST}, before={"id": 1, "born": 20454}), CHANGE),
    (pg({"id": 1, "bio": TOAST, "born": "x"}), Reason.CDC_UNAVAILABLE_VALUE),  # before the row's checks
    (pg(None, "d", before={"id": 1, "bio": TOAST}), CHANGE),  # a delete's row is not judged
    # the event time: source.ts_ms
    (j({"op": "c", "after": {"id": 1}, "source": {"lsn": 1}}), Reason.CDC_INVALID_EVENT_TIME),
    (j({"op": "d", "before": {"id": 1}, "source": {"lsn": 1, "ts_ms": "5"}}), Reason.CDC_INVALID_EVENT_TIME),
    (j({"op": "c", "after": {"id": 1}, "source": {"lsn": 1, "ts_ms": 253402300800000}}), Reason.CDC_INVALID_EVENT_TIME),
    (j({"op": "c", "after": {"id": 1}, "source": {"lsn": 1, "ts_ms": -62135596800000}}), CHANGE),
]
SPECS["defaults"] = (DEFAULTS, ["id"], "source.lsn")
EDGES = {"customers": CUSTOMER_EDGES, "oracle": ORACLE_EDGES, "orders": ORDERS_EDGES, "defaults": DEFAULT_EDGES}


def test_the_issue_s_values_land_exactly(spark):
    """Issue 48's values through the job: -26,629.84 written as "1124" lands as -26,629.84 (not
    1124.00), the TOASTed column keeps the old row's 6,000 characters, bronze's event time is
    source.ts_ms."""
    keyed = resolve(DEFAULTS, ["id"], "source.lsn")
    values = [pg({"id": 1, "balance": "1124"}, wrapped=True), pg(ROW), pg({"id": 2, "bio": TOAST}, before=ROW)]
    df = spark.createDataFrame(
        [(None, v, "t", 0, i, datetime(2026, 1, 1)) for i, v in enumerate(values)],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp",
    )
    rows = {
        r["_offset"]: r for r in bronze_rows(parse_events(df, DEFAULTS, keyed=keyed), DEFAULTS, 0, 1, keyed).collect()
    }
    assert rows[0]["balance"] == Decimal("-26629.84")
    assert rows[1]["ratio"] == Decimal("12.345") and rows[1]["born"] == date(2026, 1, 1)
    assert rows[2]["bio"] == "x" * 6000
    assert rows[0]["_event_time"] == datetime(2026, 1, 1, 0, 5, 0, 120000)


def test_every_reason_and_op_on_written_edges_as_the_reference(spark):
    """Each edge gets the outcome written beside it, from the reference and from the job alike,
    and every CDC reason and every op is among them."""
    seen: set[str] = set()
    ops: set[str] = set()
    for name, edges in EDGES.items():
        schema, keys, sequence_by = SPECS[name]
        outcomes = check_batch(spark, schema, keys, sequence_by, [v for v, _ in edges])
        reference = Envelope(schema, keys, sequence_by)
        wrong = [
            f"{v!r:.200}: reference {outcomes[i]}, written {o}" for i, (v, o) in enumerate(edges) if outcomes[i] != o
        ]
        assert not wrong, "\n".join(wrong)
        seen |= set(outcomes.values())
        ops |= {p.op for v, _ in edges if isinstance(p := reference.parse(None, v), Change)}
    assert set(R.CDC_REASONS) | {GONE, CHANGE, Reason.NOT_AN_OBJECT, Reason.WRONG_TYPE, Reason.INVALID_VALUE} <= seen
    assert ops == {"c", "u", "d", "r"}


def test_bronze_rows_carry_op_and_the_typed_sequence(spark):
    """bronze_rows and sink_rows take `_op` and `_sequence` in bronze's types (tables.bronze_ddl);
    a delete keeps its key and sequence fields; a tombstone is in neither sink."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType, _parse_datatype_string

    schema, keys, sequence_by = SPECS["orders"]
    keyed = resolve(schema, keys, sequence_by)
    values = [order(), order("d", {"loc": {"region": "eu"}, "id": 3, "version": 9}), None, order(id="x")]
    df = spark.createDataFrame(
        [(None, v, "t", 0, i, datetime(2026, 1, 1)) for i, v in enumerate(values)],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp",
    )
    parsed = parse_events(df, schema, keyed=keyed)
    bronze = bronze_rows(parsed, schema, 3, 1, keyed)
    declared = _parse_datatype_string(tables.bronze_ddl(schema, keyed))
    assert isinstance(declared, StructType)
    assert [(c.name, c.dataType.simpleString()) for c in bronze.schema] == [
        (c.name, c.dataType.simpleString()) for c in declared
    ]
    got = {r["_offset"]: r.asDict(recursive=True) for r in bronze.collect()}
    assert sorted(got) == [0, 1]
    assert got[0]["_op"] == "c"
    assert got[0]["_sequence"] == {"version": 5, "source_file": "mysql-bin.000003", "source_pos": 154}
    assert got[1]["_op"] == "d" and got[1]["_sequence"]["version"] == 9
    assert {k: got[1][k] for k in ("region", "id", "version", "at")} == {
        "region": "eu",
        "id": 3,
        "version": 9,
        "at": None,
    }
    sinks = sink_rows(parsed, schema, 3, 1, F.lit(True), F.lit(True), keyed).collect()
    assert sorted((r["_offset"], r["_to_bronze"], r["reason"]) for r in sinks) == [
        (0, True, None),
        (1, True, None),
        (3, False, Reason.CDC_INVALID_KEY),
    ]
    # offsets an operator moved to quarantine by hand are quarantined as such, a tombstone among them too
    moved = Unprocessable(Path("unused"), [Declared("t", {0: (1, 3)})])
    held = parse_events(df, schema, unprocessable=moved, keyed=keyed).select("_offset", "reason").collect()
    assert sorted(tuple(r) for r in held) == [
        (0, None),
        (1, Reason.UNPROCESSABLE),
        (2, Reason.UNPROCESSABLE),
        (3, Reason.CDC_INVALID_KEY),
    ]
    # a plain JSON pipeline's bronze is as it was: no envelope columns
    plain = Schema.model_validate({**schema.model_dump(exclude_defaults=True), "format": "json"})
    assert bronze_rows(parse_events(df, plain), plain, 0, 1).columns == [*tables.bronze_columns(plain), *PLAIN_TAIL]


# -- drawn envelopes ---------------------------------------------------------------------------
_LONG_EDGES = ["1.0", "1.50", "1e3", "-0", "9223372036854775807.0", "9223372036854775808", "-9223372036854775809"]


@st.composite
def keyed_schemas(draw) -> tuple[Schema, list[str], list[str]]:
    """A drawn schema (tests/json_space.py) read as Debezium's rows, with drawn keys (required
    fields, no double) and a drawn sequence (required non-boolean fields and positions)."""
    base = draw(schemas())
    dumped = base.model_dump(exclude_defaults=True)
    # each decimal, date and timestamp written in one of Debezium's encodings (a decimal must say which)
    for f in dumped["fields"]:
        options = ENCODINGS_FOR.get(str(f["type"]).split("(")[0])
        if options and (f["type"].startswith("decimal") or draw(st.booleans())):
            f["encoding"] = draw(st.sampled_from(options)).value
    event_time = draw(st.sampled_from([dumped["event_time"], None, *EVENT_TIME_POSITIONS]))
    schema = Schema.model_validate({**dumped, "format": "debezium", "event_time": event_time})
    keyable = [f.name for f in schema.fields if f.required and f.ftype.base != "double"]
    keys = draw(st.lists(st.sampled_from(keyable), min_size=1, max_size=2, unique=True))
    orderable = [f.name for f in schema.fields if f.required and f.ftype.base != "boolean"]
    names = st.sampled_from(sorted(POSITIONS) + orderable)
    sequence = draw(st.lists(names, min_size=1, max_size=3, unique_by=lambda n: n.replace(".", "_")))
    return schema, keys, sequence


def _position(kind: str) -> st.SearchStrategy[Any]:
    loose = st.one_of(st.none(), any_json(3, valid=True))
    if kind == LONG:
        exact = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**64), 2**64))
        return st.one_of(exact, st.sampled_from(_LONG_EDGES).map(Raw), exact.map(str), loose)
    if kind == DIGITS:
        digits = st.text(alphabet="0123456789", min_size=1, max_size=40)
        odd = st.sampled_from(["", " 1", "1 ", "-1", "1.0", "\u0661\u0662", "\uff11", "1e3", "0x1"])
        return st.one_of(digits, odd, st.integers(0, 2**70), loose)
    return st.one_of(hard_strings(12, surrogates=False), st.integers(), loose)


def _put(obj: dict, path: tuple[str, ...], value: Any) -> None:
    node = obj
    for key in path[:-1]:
        nxt = node.get(key)
        if not isinstance(nxt, dict):
            nxt = node[key] = {}
        node = nxt
    node[path[-1]] = value


def _encoded(f: Any, value: Any) -> Any:
    """A valid value as drawn (decimal, date or timestamp text, or a number literal) as the field's
    encoding writes it."""
    enc = f.read_as
    if enc is None or enc == Encoding.ISO or value is None:
        return value
    if f.ftype.base == "decimal":
        text = value.text if isinstance(value, Raw) else str(value)
        try:
            if not Decimal(text).is_finite():
                return value
        except ArithmeticError:
            return value
        if enc == Encoding.STRING:
            return text
        if enc == Encoding.DOUBLE:
            return Raw(format(Decimal(text), "f"))
        with localcontext() as ctx:
            ctx.prec = 100
            return b64(int(Decimal(text).scaleb(f.ftype.scale)))
    if not isinstance(value, str):
        return value
    if f.ftype.base == "date":
        day = read_date(value)
        return value if day is None else (day - date(1970, 1, 1)).days
    at = read_timestamp(value)
    if at is None:
        return value
    micros = (at - _EPOCH) // timedelta(microseconds=1)
    return {Encoding.EPOCH_MILLIS: micros // 1000, Encoding.EPOCH_MICROS: micros, Encoding.EPOCH_NANOS: micros * 1000}[
        enc
    ]


def _encoding_space(f: Any) -> st.SearchStrategy[Any]:
    """Values of a field's encodings, valid or not: base64 of up to 18 bytes (its last bits set too),
    variable-scale structs, epoch counts of any size, texts."""
    b64s = st.binary(max_size=18).map(lambda b: base64.b64encode(b).decode())
    ints = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(10**6), 10**6), st.integers(-(2**64), 2**64))
    return st.one_of(
        b64s,
        b64s.map(lambda t: t[:-1] + "B" if t.endswith("=") else t),
        st.fixed_dictionaries({"scale": st.one_of(st.integers(-2, 40), st.just("2")), "value": b64s}),
        ints,
        st.just(PLACEHOLDER),
        st.sampled_from(["1124", "12.50", "2026-01-01", "2026-01-01T00:00:00Z", ""]),
    )


@st.composite
def images(draw, schema: Schema, keyed: KeyedSpec) -> Any:
    """A row image, its Debezium-encoded fields as each one's encoding writes them, now and then
    one of them any value of an encoding, or the placeholder of an unchanged TOASTed column."""
    image = draw(_images(schema, keyed))
    if not isinstance(image, dict):
        return image
    for f in schema.fields:
        raw: Any = image
        for key in f.keys[:-1]:
            raw = raw.get(key) if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or f.keys[-1] not in raw:
            continue
        roll = draw(st.integers(0, 9))
        if roll == 0:
            raw[f.keys[-1]] = PLACEHOLDER
        elif roll == 1 and f.ftype.base in LOGICAL_TYPES:
            raw[f.keys[-1]] = draw(_encoding_space(f))
        elif roll > 2:
            raw[f.keys[-1]] = _encoded(f, raw[f.keys[-1]])
    return image


@st.composite
def _images(draw, schema: Schema, keyed: KeyedSpec) -> Any:
    """A row image: a valid row, a row with one key or sequence field of any shape, a row of any
    shape, the key and sequence fields alone (a delete's `before`), or no object at all."""
    how = draw(st.integers(0, 6))
    names = [f.name for f in schema.fields]
    if how <= 1:
        return draw(events(schema, valid_only=True))
    if how == 2:
        targets = list(keyed.key_names) + [p.field.name for p in keyed.sequence if p.field is not None]
        return draw(events(schema, off=names.index(draw(st.sampled_from(targets)))))
    if how == 3:
        return draw(events(schema))
    if how == 4:
        alone: dict = {}
        wanted = set(keyed.key_names) | {p.field.name for p in keyed.sequence if p.field is not None}
        for f in schema.fields:
            if f.name in wanted:
                _put(alone, f.keys, draw(field_values(f, valid_only=draw(st.integers(0, 3)) > 0)))
        return alone
    if how == 5:
        return draw(st.one_of(st.none(), st.just(_ABSENT)))
    return draw(any_json(4, valid=True))


@st.composite
def envelopes(draw, schema: Schema, keyed: KeyedSpec) -> dict:
    op = draw(
        st.one_of(
            st.sampled_from(["c", "u", "d", "r"]),
            st.sampled_from(["t", "m", "C", "", "d ", _ABSENT, None]),
            any_json(2, valid=True),
        )
    )
    obj: dict[str, Any] = {}
    if op is not _ABSENT:
        obj["op"] = op
    needed = "before" if op == "d" else "after"
    for side in ("before", "after"):  # the other side, which is not read, only now and then
        image = draw(images(schema, keyed)) if side == needed or draw(st.integers(0, 3)) == 0 else _ABSENT
        if image is not _ABSENT:
            obj[side] = image
    if draw(st.integers(0, 9)) == 0:
        obj["source"] = draw(any_json(3, valid=True))
    else:
        obj["source"] = {"connector": "postgresql"}
        for part in keyed.sequence:
            if part.field is None and draw(st.integers(0, 9)) > 0:
                _put(obj, part.path, draw(_position(part.position or LONG)))
        position = schema.event_time_position
        if position is not None and position not in [p.name for p in keyed.sequence] and draw(st.integers(0, 9)) > 0:
            ms = st.one_of(st.integers(-62135596800000, 253402300799999), _position(LONG))
            _put(obj, tuple(position.split(".")), draw(ms))
    order = draw(st.permutations(list(obj)))
    return {k: obj[k] for k in order}


@st.composite
def change_records(draw, schema: Schema, keyed: KeyedSpec) -> bytes | None:
    """A record of a Debezium topic: mostly envelopes, plain or schemas-enabled (with a null or
    non-object payload too), and any record of the JSON space (damaged, any JSON, a null value)."""
    kind = draw(st.integers(0, 9))
    if kind == 9:
        return draw(records(schema))
    envelope: Any = draw(envelopes(schema, keyed))
    if kind == 8:
        envelope = {"schema": draw(any_json(3, valid=True)), "payload": draw(st.one_of(st.none(), any_json(3)))}
    elif kind >= 6:
        envelope = {"schema": draw(wrappers(schema)), "payload": envelope}
        if kind == 7 and draw(st.booleans()):
            envelope["more"] = 1
    return dumps(envelope, draw).encode("utf-8", "surrogatepass")


@st.composite
def wrappers(draw, schema: Schema) -> Any:
    """The JSON converter's schema of an envelope: its row's struct (nested for nested paths) naming
    each decimal, date and timestamp column's logical type, or its plain type, or something else;
    or a schema that describes nothing."""
    if draw(st.integers(0, 3)) == 0:
        return draw(st.one_of(st.just({"type": "struct"}), any_json(3, valid=True)))
    row: dict = {"type": "struct", "fields": []}
    for f in schema.fields:
        base = f.ftype.base
        if base not in LOGICAL_TYPES or draw(st.integers(0, 4)) == 0:
            continue
        names = [*sorted(LOGICAL_TYPES[base]), "io.debezium.time.MicroTime", "io.debezium.data.Json"]
        column: dict[str, Any] = {"field": f.keys[-1], "optional": True}
        how = draw(st.integers(0, 3))
        if how <= 1:
            column |= {"type": "bytes", "name": draw(st.sampled_from(names))}
            if column["name"] == "org.apache.kafka.connect.data.Decimal":
                scale = st.one_of(
                    st.integers(0, 40).map(str), st.sampled_from(["", "x", " 2", "2\n", "٢"]), st.integers(0, 3)
                )
                column["parameters"] = {"scale": draw(scale)}
        elif how == 2:
            column["type"] = draw(st.sampled_from([*sorted(PLAIN_TYPES[base]), "bytes", "boolean"]))
        else:
            column |= {"type": draw(st.sampled_from(["string", 5])), "name": draw(st.sampled_from([5, None]))}
        node = row
        for key in f.keys[:-1]:
            inner = next((c for c in node["fields"] if c.get("field") == key), None)
            if inner is None:
                inner = {"type": "struct", "field": key, "fields": []}
                node["fields"].append(inner)
            node = inner
        node["fields"].append(column)
    sides = [{**row, "field": "before"}, {**row, "field": "after"}]
    return {"type": "struct", "fields": draw(st.permutations([*sides, {"type": "string", "field": "op"}]))}


_SETTINGS = settings(
    max_examples=settings().max_examples,  # `ci`: 12; `make fuzz` (HYPOTHESIS_PROFILE=fuzz): 400
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)


@_SETTINGS
@given(data=st.data())
def test_job_and_reference_agree_on_drawn_envelopes(spark, data):
    if data.draw(st.integers(0, 3), label="fixed spec") == 0:
        schema, keys, sequence_by = SPECS[data.draw(st.sampled_from(sorted(SPECS)), label="spec")]
    else:
        schema, keys, sequence_by = data.draw(keyed_schemas(), label="schema, keys, sequence_by")
    keyed = resolve(schema, keys, sequence_by)
    values = data.draw(st.lists(change_records(schema, keyed), min_size=20, max_size=40), label="records")
    check_batch(spark, schema, keys, sequence_by, values)
