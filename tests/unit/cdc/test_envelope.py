"""A Debezium record judged and parsed: a Change, the TOMBSTONE no-op, or one precise reason;
never an exception, whatever the bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow.cdc.envelope import TOMBSTONE, Change, Envelope, Malformed, read_position
from onceflow.cdc.spec import DIGITS, LONG, TEXT
from onceflow.schema import reasons as R
from onceflow.schema.model import MAX_RECORD_BYTES, Encoding, Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import How, Judge, lookup, read_field, read_record
from tests.json_space import any_json, dumps, events, schemas

# cheap examples: many more than the `ci` profile's Spark-sized budget, as many as `fuzz` asks
PROPERTIES = settings(
    max_examples=max(200, settings().max_examples),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CUSTOMERS = Schema.model_validate(
    {
        "format": "debezium",
        "event_time": "updated_at",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "email", "type": "string", "pattern": "@"},
            {"name": "balance", "type": "decimal(10,2)", "encoding": "string", "required": False},
            {"name": "version", "type": "long"},
            {"name": "updated_at", "type": "timestamp"},
        ],
    }
)
ROW = {"id": 7, "email": "a@b.c", "balance": "12.50", "version": 3, "updated_at": "2026-01-01T00:00:00.5Z"}
TYPED = {
    "id": 7,
    "email": "a@b.c",
    "balance": Decimal("12.50"),
    "version": 3,
    "updated_at": datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=UTC),
}
SOURCE = {"connector": "postgresql", "db": "shop", "table": "customers", "lsn": 24023128, "ts_ms": 1767225600120}


def envelope(op: Any = "u", **changes: Any) -> dict:
    """A Debezium envelope of one change of ROW; `changes` replace its members (None: JSON null)."""
    body: dict[str, Any] = {
        "before": {**ROW, "version": 2} if op in ("u", "d") else None,
        "after": None if op == "d" else dict(ROW),
        "source": dict(SOURCE),
        "op": op,
        "ts_ms": 1767225600123,
    }
    body.update(changes)
    return body


def encode(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def parse(obj: Any, sequence_by: str | list[str] = "source.lsn", keys=("id",), schema: Schema = CUSTOMERS):
    return Envelope(schema, list(keys), sequence_by).parse(b'{"id": 7}', obj if isinstance(obj, bytes) else encode(obj))


def without(d: dict, *names: str) -> dict:
    return {k: v for k, v in d.items() if k not in names}


# -- changes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["c", "u", "r"])
def test_a_create_update_or_snapshot_read_is_the_typed_row_after_it(op):
    got = parse(envelope(op))
    assert got == Change(op, (7,), TYPED, (24023128,), 1767225600123, SOURCE)
    assert isinstance(got, Change) and not got.deleted


def test_a_delete_is_keyed_by_before_and_holds_no_row():
    got = parse(envelope("d", before={"id": 7}))  # PostgreSQL's default replica identity: the key alone
    assert got == Change("d", (7,), None, (24023128,), 1767225600123, SOURCE)
    assert isinstance(got, Change) and got.deleted


def test_the_null_value_after_a_delete_is_a_tombstone_not_a_malformed_record():
    assert Envelope(CUSTOMERS, ["id"], "source.lsn").parse(b'{"id": 7}', None) is TOMBSTONE
    assert parse({"schema": {"type": "struct"}, "payload": None}) is TOMBSTONE
    assert parse(b"") == Malformed(Reason.INVALID_JSON, "the value is not one JSON object of at most schema.max_bytes")


def test_schemas_enabled_records_are_read_like_plain_ones():
    for op in ("c", "u", "d", "r"):
        plain = envelope(op)
        assert parse({"schema": {"type": "struct", "fields": []}, "payload": plain}) == parse(plain)
    bad = parse({"schema": {}, "payload": [1]})
    assert isinstance(bad, Malformed) and bad.reason == Reason.NOT_AN_OBJECT
    # an envelope that merely has a `schema` member beside the others is not wrapped
    assert isinstance(parse({**envelope("c"), "schema": {}}), Change)


def test_undeclared_columns_are_left_out_and_an_optional_one_may_be_absent():
    got = parse(envelope("c", after={**without(ROW, "balance"), "extra": [1, 2]}))
    assert isinstance(got, Change) and got.row == {**TYPED, "balance": None}


@pytest.mark.parametrize(
    "sequence_by, value, sequence",
    [
        ("source.lsn", envelope(), (24023128,)),
        ("ts_ms", envelope(), (1767225600123,)),
        (["source.ts_ms", "source.lsn"], envelope(), (1767225600120, 24023128)),
        ("version", envelope(), (3,)),  # a declared field of the row
        ("version", envelope("d"), (2,)),  # a delete's: the deleted row's last value, in `before`
        ("updated_at", envelope(), (TYPED["updated_at"],)),
        ("source.scn", envelope(source={"scn": "10"}), (10,)),  # Oracle writes its SCN as digits
        (
            ["source.file", "source.pos", "source.row"],
            envelope(source={"file": "b.000003", "pos": 9, "row": 0}),
            ("b.000003", 9, 0),
        ),
    ],
)
def test_the_sequence_is_read_as_its_type_says(sequence_by, value, sequence):
    got = parse(value, sequence_by)
    assert isinstance(got, Change) and got.sequence == sequence


@pytest.mark.parametrize(
    "sequence_by, member, older, newer",
    [
        ("source.lsn", "source", {"lsn": 9}, {"lsn": 10}),
        ("source.scn", "source", {"scn": "9"}, {"scn": "10"}),
        ("ts_ms", "ts_ms", 999, 1000),
        ("version", "after", {**ROW, "version": 9}, {**ROW, "version": 10}),
        ("balance", "after", {**ROW, "balance": "9.5"}, {**ROW, "balance": "10.25"}),
        # instants, not texts: 00:30 at +01:00 is 23:30 the day before
        ("updated_at", "after", {**ROW, "updated_at": "2026-01-01T00:30:00+01:00"}, ROW),
    ],
)
def test_numbers_and_times_compare_as_such_never_as_text(sequence_by, member, older, newer):
    schema = CUSTOMERS
    if sequence_by == "balance":  # a sequence field must be required
        fields = [{**f, "required": True} for f in CUSTOMERS.model_dump()["fields"]]
        schema = Schema.model_validate({**CUSTOMERS.model_dump(), "fields": fields})
    a = parse(envelope("u", **{member: older}), sequence_by, schema=schema)
    b = parse(envelope("u", **{member: newer}), sequence_by, schema=schema)
    assert isinstance(a, Change) and isinstance(b, Change)
    assert a.sequence < b.sequence
    as_written = [
        json.dumps(lookup(v, tuple(sequence_by.split(".")[1:])) if member == "source" else v) for v in (older, newer)
    ]
    if member == "after":
        as_written = [json.dumps(v[sequence_by]) for v in (older, newer)]
    assert as_written[0] > as_written[1]  # what comparing them as text would get wrong


# -- malformed records: one reason each, the first check they fail ----------------------------
MALFORMED = [
    ("not JSON", b"{op: c}", Reason.INVALID_JSON),
    ("not an object", b"[1, 2]", Reason.NOT_AN_OBJECT),
    ("oversized", encode({**envelope(), "pad": "x" * 20_000}), Reason.OVERSIZED),
    ("invalid UTF-8", b'{"op": "\xff"}', Reason.INVALID_UTF8),
    ("duplicate key", b'{"op": "c", "op": "u"}', Reason.DUPLICATE_KEY),
    ("no op", without(envelope(), "op"), Reason.CDC_MISSING_OP),
    ("null op", envelope(op=None), Reason.CDC_MISSING_OP),
    ("unknown op", envelope(op="x"), Reason.CDC_UNKNOWN_OP),
    ("truncate", envelope(op="t"), Reason.CDC_UNKNOWN_OP),
    ("op in capitals", envelope(op="C"), Reason.CDC_UNKNOWN_OP),
    ("op a number", envelope(op=1), Reason.CDC_UNKNOWN_OP),
    ("create without after", without(envelope("c"), "after"), Reason.CDC_MISSING_AFTER),
    ("update with a null after", envelope("u", after=None), Reason.CDC_MISSING_AFTER),
    ("snapshot read with a non-object after", envelope("r", after=[ROW]), Reason.CDC_MISSING_AFTER),
    ("delete without before", without(envelope("d"), "before"), Reason.CDC_MISSING_BEFORE),
    (
        "delete with a null before and the row in after",
        envelope("d", before=None, after=ROW),
        Reason.CDC_MISSING_BEFORE,
    ),
    ("key absent", envelope("c", after=without(ROW, "id")), Reason.CDC_MISSING_KEY),
    ("key null", envelope("u", after={**ROW, "id": None}), Reason.CDC_MISSING_KEY),
    ("delete's key absent", envelope("d", before={"email": "a@b.c"}), Reason.CDC_MISSING_KEY),
    ("key of the wrong type", envelope("c", after={**ROW, "id": "7"}), Reason.CDC_INVALID_KEY),
    ("key out of range", envelope("c", after={**ROW, "id": 2**63}), Reason.CDC_INVALID_KEY),
    ("no source", without(envelope(), "source"), Reason.CDC_MISSING_SEQUENCE),
    ("no lsn", envelope(source=without(SOURCE, "lsn")), Reason.CDC_MISSING_SEQUENCE),
    ("null lsn", envelope(source={**SOURCE, "lsn": None}), Reason.CDC_MISSING_SEQUENCE),
    ("lsn as text", envelope(source={**SOURCE, "lsn": "24023128"}), Reason.CDC_INVALID_SEQUENCE),
    ("lsn with a fraction", envelope(source={**SOURCE, "lsn": 9.5}), Reason.CDC_INVALID_SEQUENCE),
    ("lsn a boolean", envelope(source={**SOURCE, "lsn": True}), Reason.CDC_INVALID_SEQUENCE),
    ("lsn past a long (stored as a BIGINT)", envelope(source={**SOURCE, "lsn": 2**63}), Reason.CDC_INVALID_SEQUENCE),
    # an unchanged TOASTed column without its old value (issue 48), before the row's own checks
    (
        "placeholder of an unchanged TOASTed column",
        envelope("u", before=None, after={**ROW, "email": "__debezium_unavailable_value"}),
        Reason.CDC_UNAVAILABLE_VALUE,
    ),
    # the row's own checks come last: a field missing, of the wrong type, unusable, breaking a rule
    ("row without a required field", envelope("c", after=without(ROW, "email")), Reason.MISSING_FIELD),
    ("row with a field of the wrong type", envelope("u", after={**ROW, "version": "3"}), Reason.WRONG_TYPE),
    ("row with an unusable value", envelope("r", after={**ROW, "updated_at": "yesterday"}), Reason.INVALID_VALUE),
    ("row breaking a rule", envelope("c", after={**ROW, "email": "nobody"}), Reason.PATTERN_MISMATCH),
    # first failing check wins: no op before no after; a missing key before a missing sequence
    ("no op and no after", without(envelope("c"), "op", "after"), Reason.CDC_MISSING_OP),
    ("no key and no sequence", envelope("c", after=without(ROW, "id"), source={}), Reason.CDC_MISSING_KEY),
    ("no sequence and a bad row", envelope("c", after=without(ROW, "email"), source={}), Reason.CDC_MISSING_SEQUENCE),
]


@pytest.mark.parametrize("case, value, reason", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_a_malformed_record_gets_its_one_reason(case, value, reason):
    got = parse(value)
    assert isinstance(got, Malformed), got
    assert got.reason == reason, got.detail
    assert got.detail


def test_every_envelope_reason_is_reached():
    reached = {reason for *_, reason in MALFORMED}
    assert set(R.CDC_REASONS) - {Reason.CDC_INVALID_EVENT_TIME} <= reached  # that one: test_envelope_encodings.py
    assert not set(R.CDC_REASONS) & set(R.REASONS)  # a JSON event's reasons stay as they were


def test_a_delete_is_judged_on_its_key_and_sequence_only():
    partial = {"id": 7, "email": None, "updated_at": "not a time"}  # what the row looked like is not judged
    assert isinstance(parse(envelope("d", before=partial)), Change)
    got = parse(envelope("d", before={"id": 7}), "version")  # a row-field sequence must be in `before`
    assert isinstance(got, Malformed) and got.reason == Reason.CDC_MISSING_SEQUENCE and "`before`" in got.detail


@pytest.mark.parametrize(
    "detail_of, expected",
    [
        (envelope(op="x"), "op is 'x', not one of c, u, d, r"),
        (envelope("c", after={**ROW, "id": "7"}), "key field 'id' is '7', not a long"),
        (envelope(source={**SOURCE, "lsn": "9"}), "sequence source.lsn is '9', not a long"),
        (envelope(source={}), "sequence source.lsn is absent in the envelope"),
        (without(envelope("d"), "before"), "op 'd' needs `before`, an object; it is absent"),
    ],
)
def test_the_detail_says_what_was_wrong(detail_of, expected):
    got = parse(detail_of)
    assert isinstance(got, Malformed) and got.detail == expected


def test_an_envelope_is_only_read_for_a_debezium_schema():
    with pytest.raises(ValueError, match="format is 'json'"):
        fields = [{**f, "encoding": None} for f in CUSTOMERS.model_dump()["fields"]]
        Envelope(
            Schema.model_validate({**CUSTOMERS.model_dump(), "fields": fields, "format": "json"}), ["id"], "source.lsn"
        )


@pytest.mark.parametrize(
    "kind, raw, expected",
    [
        (LONG, 9, (None, 9)),
        (LONG, "9", (Reason.INVALID_VALUE, None)),
        (DIGITS, "0010", (None, 10)),
        (DIGITS, "1e3", (Reason.INVALID_VALUE, None)),
        (DIGITS, "١٢", (Reason.INVALID_VALUE, None)),  # digits of other scripts are not decimal digits here
        (DIGITS, 10, (Reason.INVALID_VALUE, None)),
        (TEXT, "00000027:00000758:0003", (None, "00000027:00000758:0003")),
        (TEXT, 27, (Reason.INVALID_VALUE, None)),
        (LONG, None, (Reason.MISSING_FIELD, None)),
    ],
)
def test_positions_are_read_as_written(kind, raw, expected):
    _, obj = read_record(encode({"v": raw}), MAX_RECORD_BYTES)
    assert read_position(kind, lookup(obj, ("v",))) == expected


# -- properties ------------------------------------------------------------------------------
@st.composite
def changes(draw) -> tuple[dict, Change]:
    """A valid change of a CUSTOMERS row and what it parses to."""
    op = draw(st.sampled_from(["c", "u", "d", "r"]))
    key = draw(st.integers(-(2**63), 2**63 - 1))
    lsn = draw(st.integers(0, 2**63 - 1))  # stored as a BIGINT: past a long is cdc_invalid_sequence (test_envelope)
    version = draw(st.integers(0, 2**40))
    email = draw(st.text(max_size=10)) + "@"
    row = {**ROW, "id": key, "email": email, "version": version}
    typed = {**TYPED, "id": key, "email": email, "version": version}
    value = envelope(op, before={"id": key} if op == "d" else None, source={**SOURCE, "lsn": lsn})
    if op != "d":
        value["after"] = row
    expected = Change(op, (key,), None if op == "d" else typed, (lsn,), value["ts_ms"], value["source"])
    return value, expected


@PROPERTIES
@given(data=st.data())
def test_a_valid_change_parses_back_to_itself_in_either_form(data):
    value, expected = data.draw(changes())
    if data.draw(st.booleans()):
        value = {"schema": {"type": "struct"}, "payload": value}
    assert parse(dumps(value, data.draw).encode()) == expected


@PROPERTIES
@given(data=st.data())
def test_no_record_makes_the_parser_raise(data):
    """Envelopes whose members hold any JSON, and any bytes at all."""
    anything = any_json(max_leaves=6)
    member = st.one_of(anything, st.dictionaries(st.sampled_from(["id", "email", "version", "lsn"]), anything))
    op = st.one_of(st.sampled_from(["c", "u", "d", "r", "t", ""]), anything)
    body = data.draw(
        st.fixed_dictionaries(
            {},
            optional={"op": op, "before": member, "after": member, "source": member, "ts_ms": anything},
        )
    )
    wrapped = {"schema": None, "payload": body} if data.draw(st.booleans()) else body
    raw = data.draw(
        st.one_of(st.binary(max_size=64), st.just(dumps(wrapped, data.draw).encode("utf-8", "surrogatepass")))
    )
    got = parse(raw, data.draw(st.sampled_from(["source.lsn", "version", ["ts_ms", "source.scn"]])))
    assert got is TOMBSTONE or isinstance(got, Change | Malformed)
    if isinstance(got, Malformed):
        assert got.reason in (*R.REASONS, *R.CDC_REASONS)


@PROPERTIES
@given(data=st.data())
def test_the_row_is_judged_as_a_json_event_is(data):
    """For any declared schema and any event, `after` gets the reason and the typed values the
    audit's judge gives the event itself, unless its key (the event time here) already failed."""
    drawn = data.draw(schemas())  # its max_bytes lifted: the envelope around the event is larger
    schema = Schema.model_validate({**drawn.model_dump(), "max_bytes": MAX_RECORD_BYTES})
    off = data.draw(st.one_of(st.none(), st.integers(0, len(schema.fields) - 1)))
    event = data.draw(events(schema, valid_only=off is None and data.draw(st.booleans()), off=off))
    text = dumps(event, data.draw, ws=False)
    raw = text.encode("utf-8", "surrogatepass")
    # a Debezium decimal says how it is written (`encoding: string` here: decimal text), a JSON
    # event's may be a number too: the event is judged with its decimals read as text
    as_text: dict[str, How] = {
        f.name: (Encoding.STRING, f.ftype.scale) for f in schema.fields if f.ftype.base == "decimal"
    }
    verdict = Judge(schema).judge(raw)
    if verdict.reason not in R.RECORD_REASONS:
        verdict = Judge(schema).judge_object(read_record(raw, MAX_RECORD_BYTES)[1], as_text)
    fields = [{**f, "encoding": "string"} if f["name"] in as_text else f for f in schema.model_dump()["fields"]]
    debezium = Schema.model_validate({**schema.model_dump(), "fields": fields, "format": "debezium", "event_id": None})
    assert schema.event_time is not None
    got = Envelope(debezium, [schema.event_time], "source.lsn").parse(
        None, b'{"op": "c", "source": {"lsn": 1}, "after": ' + raw + b"}"
    )
    if verdict.reason in R.RECORD_REASONS:  # a whole-record reason of the event: the envelope's is its own
        assert isinstance(got, Malformed)
        return
    _, obj = read_record(raw, MAX_RECORD_BYTES)
    event_time = schema.field(schema.event_time)
    assert event_time is not None
    key_reason, _ = read_field(event_time, lookup(obj, event_time.keys))
    if key_reason:
        assert isinstance(got, Malformed)
        assert got.reason == (Reason.CDC_MISSING_KEY if key_reason == Reason.MISSING_FIELD else Reason.CDC_INVALID_KEY)
    elif verdict.reason:
        assert isinstance(got, Malformed) and got.reason == verdict.reason
    else:
        assert isinstance(got, Change) and got.row == verdict.values
