"""The job's reading of a registry's framed records against the audit's judges, over drawn schemas
and records, damaged bytes included: Avro (spark/avro.py: spark-avro, against fastavro), and JSON
Schema (spark/framed.py against schema/framed.py).

Hypothesis draws a record schema of the Avro types docs/registry.md lists (every primitive, the
logical types the view keeps, enums, nested records, arrays, nullable unions, and maps) with a
declared field for each that has one, registers it in a real registry, and draws records of it,
some damaged afterwards (cut short, bytes added, a byte changed, another schema id). Each batch
runs through the job's parse in one Spark job; for every record the job and the judge must give
the same reason and the same typed values, and every undamaged record must be valid to both.

For JSON Schema: any declared schema and any record of the JSON space (tests/json_space.py), each
framed with the subject's id, another subject's, an unknown one, or no header at all, or a header
cut short."""

from __future__ import annotations

import io
import itertools
import json
import math
from datetime import UTC, date, datetime
from decimal import Context, Decimal
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow.registry import Registry, frame
from onceflow.schema.avro import install_minimal_decimals, unsupported
from onceflow.schema.avro_reference import AvroJudge
from onceflow.schema.framed import FramedJsonJudge
from onceflow.schema.model import RegistrySpec, Schema
from onceflow.spark.avro import with_views
from onceflow.spark.framed import with_json_payloads
from onceflow.spark.parse import parse_events
from tests.integration.test_parse_properties import _comparable, check_batch
from tests.json_space import records, schemas, valid_records

pytestmark = [pytest.mark.integration, pytest.mark.spark]

install_minimal_decimals()
_SUBJECTS = itertools.count()
_SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
_TIMES = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC))


@st.composite
def _decimal(draw, name: str):
    precision = draw(st.integers(1, 38))
    scale = draw(st.integers(0, precision))
    avro = {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    values = st.integers(-(10**precision) + 1, 10**precision - 1).map(
        lambda n: Decimal(n).scaleb(-scale, Context(prec=100))
    )
    return avro, f"decimal({precision},{scale})", values


def _kinds(name: str):
    """(the Avro type, the declared type or None, a strategy of its values) of each kind of field."""
    enum = {"type": "enum", "name": f"E_{name}", "symbols": ["A", "B", "C_1"]}
    return st.one_of(
        st.just(("long", "long", st.integers(-(2**63), 2**63 - 1))),
        st.just(("int", "int", st.integers(-(2**31), 2**31 - 1))),
        st.just(("double", "double", st.floats(allow_nan=True, allow_infinity=True))),
        st.just(("float", "double", st.floats(width=32, allow_nan=False))),
        st.just(("boolean", "boolean", st.booleans())),
        st.just(("string", "string", st.text(max_size=30))),
        st.just((enum, "string", st.sampled_from(enum["symbols"]))),
        st.just(("bytes", "string", st.binary(max_size=20))),
        _decimal(name),
        st.just(({"type": "int", "logicalType": "date"}, "date", st.dates(date(1, 1, 2), date(9999, 12, 30)))),
        st.just(({"type": "long", "logicalType": "timestamp-micros"}, "timestamp", _TIMES)),
        st.just(
            (
                {"type": "long", "logicalType": "timestamp-millis"},
                "timestamp",
                _TIMES.map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
            )
        ),
        st.just(
            (
                {"type": "long", "logicalType": "local-timestamp-micros"},
                "timestamp",
                _TIMES.map(lambda t: t.replace(tzinfo=None)),
            )
        ),
        st.just(
            (
                {"type": "record", "name": f"R_{name}", "fields": [{"name": "a", "type": "long"}]},
                None,
                st.integers(-5, 5).map(lambda n: {"a": n}),
            )
        ),
        st.just(({"type": "array", "items": "long"}, None, st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4))),
        st.just(
            (
                {"type": "map", "values": "string"},
                None,
                st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
            )
        ),
        st.just(
            (
                {"type": "map", "values": ["null", "long"]},
                None,
                st.dictionaries(st.text(max_size=3), st.none() | st.integers(-(2**63), 2**63 - 1), max_size=4),
            )
        ),
    )


@st.composite
def _shapes(draw):
    """A writer schema, its declaration, and a strategy of its records."""
    fields: list[dict[str, Any]] = []
    declared: list[dict[str, Any]] = []
    values: dict[str, Any] = {}
    for i in range(draw(st.integers(1, 5))):
        name = f"f{i}"
        avro, dtype, strategy = draw(_kinds(name))
        if draw(st.booleans()):  # nullable
            avro, strategy = ["null", avro], st.one_of(st.none(), strategy)
            fields.append({"name": name, "type": avro, "default": None})
        else:
            fields.append({"name": name, "type": avro})
        if dtype is not None:
            declared.append({"name": name, "type": dtype, "required": not isinstance(avro, list)})
        values[name] = strategy
    fields.append({"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}})
    declared.append({"name": "ts", "type": "timestamp"})
    values["ts"] = _TIMES
    return {"type": "record", "name": "Drawn", "fields": fields}, declared, st.fixed_dictionaries(values)


@st.composite
def _damaged(draw, framed: bytes):
    how = draw(st.sampled_from(["none", "none", "cut", "add", "flip", "id"]))
    if how == "cut":
        return framed[: draw(st.integers(0, len(framed) - 1))]
    if how == "add":
        return framed + draw(st.binary(min_size=1, max_size=4))
    if how == "flip" and len(framed) > 5:
        at = draw(st.integers(5, len(framed) - 1))
        return framed[:at] + bytes([framed[at] ^ draw(st.integers(1, 255))]) + framed[at + 1 :]
    if how == "id":
        return frame(draw(st.integers(10**6, 2**31 - 1)), framed[5:])
    return framed


@_SETTINGS
@given(data=st.data())
def test_job_and_judge_agree_on_drawn_avro_records(spark, registry, data):
    writer, declared, records = data.draw(_shapes(), label="shape")
    subject = f"drawn-{next(_SUBJECTS)}-value"
    spec = RegistrySpec(url=registry.url)
    schema = Schema.model_validate(
        {"format": "avro", "registry": {"url": registry.url}, "event_time": "ts", "fields": declared}
    )
    schema_id = Registry(spec).register(subject, json.dumps(writer))
    parsed = fastavro.parse_schema(writer)
    built = []
    drawn = data.draw(st.lists(records, min_size=1, max_size=12), label="records")
    for record in drawn:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, record)
        built.append(frame(schema_id, out.getvalue()))
    values = [data.draw(_damaged(v), label="damage") for v in built]
    df = spark.createDataFrame(
        [(None, v, "t", 0, i, datetime(2026, 1, 1), 0) for i, v in enumerate(values)],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int",
    )
    job = parse_events(with_views(df, Registry(spec), subject), schema)
    cols = [
        f"unix_micros(`{f.name}`) AS `{f.name}`"
        if f.ftype.base == "timestamp"
        else f"unix_date(`{f.name}`) AS `{f.name}`"
        if f.ftype.base == "date"
        else f"`{f.name}`"
        for f in schema.fields
    ]
    rows = {r["_offset"]: r for r in job.selectExpr("_offset", "reason", "detail", *cols).collect()}
    judge = AvroJudge(schema, Registry(spec), subject)
    refused = unsupported(json.dumps(writer))  # none of the drawn types is, today
    local = [f["name"] for f in writer["fields"] if "local-timestamp" in json.dumps(f["type"])]
    problems = []
    for i, value in enumerate(values):
        row, verdict = rows[i], judge.judge(value)
        if row["reason"] != verdict.reason:
            problems.append(f"{value!r}: job {row['reason']} ({row['detail']}), judge {verdict.reason}")
        elif verdict.reason is None:
            mine = {f.name: row[f.name] for f in schema.fields}
            if mine != _comparable(schema, verdict.values):
                problems.append(f"{value!r}: values differ: job {mine}, judge {_comparable(schema, verdict.values)}")
        # an undamaged record is valid but for what its view is refused for: a NaN or an infinity in a
        # double field, a local timestamp (no offset) in a timestamp field; a decimal always reads
        record = drawn[i]
        fits: set[str | None] = {"avro_unsupported_schema"} if refused else {None}
        if any(isinstance(v, float) and not math.isfinite(v) for v in record.values()):
            fits.add("wrong_type")
        if any(record[name] is not None for name in local):
            fits.add("invalid_value")
        if value == built[i] and row["reason"] not in fits:
            problems.append(f"{value!r}: undamaged, but the job says {row['reason']} ({row['detail']})")
    assert not problems, f"writer schema {json.dumps(writer)}\n" + "\n".join(problems)


@_SETTINGS
@given(data=st.data())
def test_the_fields_read_from_a_drawn_schema_accept_every_record_it_writes(registry, data):
    """`schema.fields: registry` on drawn writer schemas (schema/avro_declared.fields_of_avro): a schema
    with a field no declared type reads (an array, a map) is refused naming that field; any other
    gives a declared field for each leaf (a nested record's at its path), and the audit's judge
    (fastavro, then the JSON reference judge) finds every record the schema writes valid by them,
    but one holding a NaN or an infinity, which a double field refuses (`wrong_type`, as in JSON)."""
    from onceflow.schema.avro_declared import fields_of_avro

    writer, _, records = data.draw(_shapes(), label="shape")

    def kind(t: Any) -> Any:
        t = next(b for b in t if b != "null") if isinstance(t, list) else t
        return t.get("type") if isinstance(t, dict) else t

    unread = [f["name"] for f in writer["fields"] if kind(f["type"]) in ("array", "map")]
    try:
        fields = fields_of_avro(writer)
    except ValueError as exc:
        assert unread and f"$.{unread[0]} is" in str(exc), exc
        return
    assert not unread, fields
    leaves = {f"$.{f['name']}.a" if kind(f["type"]) == "record" else f"$.{f['name']}" for f in writer["fields"]}
    assert {f.get("path", f"$.{f['name']}") for f in fields} == leaves
    schema = Schema.model_validate(
        {"format": "avro", "registry": {"url": registry.url}, "event_time": "ts", "fields": fields}
    )
    spec, subject = RegistrySpec(url=registry.url), f"fields-{next(_SUBJECTS)}-value"
    schema_id = Registry(spec).register(subject, json.dumps(writer))
    judge, parsed = AvroJudge(schema, Registry(spec), subject), fastavro.parse_schema(writer)
    for record in data.draw(st.lists(records, min_size=1, max_size=8), label="records"):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, record)
        verdict = judge.judge(frame(schema_id, out.getvalue()))
        unreadable = any(isinstance(v, float) and not math.isfinite(v) for v in record.values())
        assert verdict.reason == ("wrong_type" if unreadable else None), (json.dumps(writer), record, verdict)


@st.composite
def _framed(draw, payload: bytes | None, ids: dict[str, int]) -> bytes | None:
    if payload is None:
        return None
    how = draw(st.sampled_from(["subject", "subject", "subject", "other", "unknown", "bare", "cut"]))
    if how == "bare":
        return payload
    if how == "cut":
        return frame(ids["subject"], payload)[: draw(st.integers(0, 4))]
    return frame(ids.get(how) or draw(st.integers(10**6, 2**31 - 1)), payload)


@_SETTINGS
@given(data=st.data())
def test_job_and_judge_agree_on_any_json_record_in_any_frame(spark, registry, data):
    drawn = data.draw(schemas(), label="schema")
    spec = RegistrySpec(url=registry.url)
    schema = Schema.model_validate(
        {**drawn.model_dump(exclude_defaults=True), "format": "json_schema", "registry": {"url": registry.url}}
    )
    subject = f"drawn-json-{next(_SUBJECTS)}-value"
    client = Registry(spec)
    doc = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "T", "type": "object"}
    ids = {
        "subject": client.register(subject, json.dumps(doc), "JSON"),
        "other": client.register(f"{subject}-other", json.dumps({**doc, "title": "O"}), "JSON"),
    }
    anything = data.draw(st.lists(records(schema), min_size=5, max_size=30), label="records")
    valid = data.draw(st.lists(valid_records(schema), max_size=6), label="valid records")
    values = [data.draw(_framed(v, ids), label="frame") for v in anything]
    # a valid record in the subject's frame stays valid when it fits with its header
    fits = [frame(ids["subject"], v) for v in valid if len(v) + 5 <= schema.max_bytes]
    must_be_valid = set(range(len(values), len(values) + len(fits)))
    judge = FramedJsonJudge(schema, Registry(spec), subject)
    check_batch(spark, schema, values + fits, must_be_valid, judge, lambda df: with_json_payloads(df, client, subject))


def test_a_map_is_read_whatever_order_its_entries_come_back_in_and_its_damage_is_named_alike(spark, registry):
    """Avro's Java reader puts a map's entries into a hash map: the job cannot compare a map's record
    written again byte for byte (spark/avro.py), so it compares its length and bytes as a multiset.
    A map of many entries (its order is not the hash map's) is valid to both readers and a declared
    field reads one entry; a map in two blocks, a key twice, a value that is not UTF-8, a byte left
    over, a count not in its shortest form are `avro_undecodable` to both."""
    writer = {
        "type": "record",
        "name": "WithMap",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "attrs", "type": {"type": "map", "values": "string"}},
        ],
    }
    spec = RegistrySpec(url=registry.url)
    subject = f"maps-{next(_SUBJECTS)}-value"
    schema_id = Registry(spec).register(subject, json.dumps(writer))
    fields = [
        {"name": "id", "type": "long"},
        {"name": "ts", "type": "timestamp"},
        {"name": "color", "type": "string", "path": "$.attrs.color", "required": False},
    ]
    schema = Schema.model_validate(
        {"format": "avro", "registry": {"url": registry.url}, "fields": fields, "event_time": "ts"}
    )

    def varint(n: int) -> bytes:
        z, out = (n << 1) ^ (n >> 63), bytearray()
        while True:
            out.append((z & 0x7F) | (0x80 if z > 0x7F else 0))
            z >>= 7
            if not z:
                return bytes(out)

    def entries(pairs: list[tuple[bytes, bytes]]) -> bytes:
        return b"".join(varint(len(k)) + k + varint(len(v)) + v for k, v in pairs)

    head = varint(7) + varint(1_700_000_000_000_000)  # id, ts
    many = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(40)] + [(b"color", b"red")]
    ok = head + varint(len(many)) + entries(many) + b"\x00"
    cases = {
        "many entries": (ok, None),
        "an empty map": (head + b"\x00", None),
        "two blocks": (
            head + varint(1) + entries(many[:1]) + varint(1) + entries(many[1:2]) + b"\x00",
            "avro_undecodable",
        ),
        "a key twice": (head + varint(2) + entries([(b"a", b"1"), (b"a", b"2")]) + b"\x00", "avro_undecodable"),
        "not utf-8": (head + varint(1) + entries([(b"a", b"\xf0\x9f\x98")]) + b"\x00", "avro_undecodable"),
        "a byte left over": (ok + b"\x00", "avro_undecodable"),
        "a long count": (head + b"\x82\x00" + entries(many[:1]) + b"\x00", "avro_undecodable"),
    }
    values = [frame(schema_id, payload) for payload, _ in cases.values()]
    df = spark.createDataFrame(
        [(None, v, "t", 0, i, datetime(2026, 1, 1), 0) for i, v in enumerate(values)],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int",
    )
    rows = {r["_offset"]: r for r in parse_events(with_views(df, Registry(spec), subject), schema).collect()}
    judge = AvroJudge(schema, Registry(spec), subject)
    for i, (name, (_, expected)) in enumerate(cases.items()):
        verdict = judge.judge(values[i])
        assert (rows[i]["reason"], verdict.reason) == (expected, expected), (name, rows[i]["detail"])
    assert rows[0]["color"] == judge.judge(values[0]).values["color"] == "red"
