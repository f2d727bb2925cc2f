"""`onceflow produce` for an avro pipeline, without a registry: the declared fields' Avro schema
(schema/avro_declared.py) and the records written with it (generate/avro_events.py). The job and the
audit's judge read them in tests/integration/test_registry_topics.py."""

from __future__ import annotations

import io
import json
from collections import Counter
from decimal import Decimal

import fastavro
import pytest

from devkit.pipelines import PAYMENTS_SCHEMA_BODY
from onceflow.generate.avro_events import UNKNOWN_ID, RegistryEvents, RegistryWriters, Writer, framed_kinds
from onceflow.generate.records import VALID, Generator
from onceflow.registry import unframe
from onceflow.schema.avro_declared import declared_avro_schema
from onceflow.schema.model import Schema
from onceflow.schema.reference import read_timestamp

FIELDS = [
    *PAYMENTS_SCHEMA_BODY["fields"],
    {"name": "channel", "type": "string", "required": False, "allowed": ["web", "app"]},
    {"name": "seen", "type": "timestamp", "path": "$.meta.seen", "required": False},
]
SCHEMA = Schema.model_validate({**PAYMENTS_SCHEMA_BODY, "fields": FIELDS})


def _decode(schema: dict, payload: bytes) -> dict:
    buf = io.BytesIO(payload)
    record = fastavro.schemaless_reader(buf, fastavro.parse_schema(json.loads(json.dumps(schema))))
    assert buf.tell() == len(payload), "bytes left over"
    assert isinstance(record, dict)
    return record


def _writers() -> RegistryWriters:
    first = declared_avro_schema(SCHEMA, "payments", leave_out=("channel",))
    evolved = declared_avro_schema(SCHEMA, "payments")
    time_field = {"name": "t", "type": ["null", {"type": "int", "logicalType": "time-millis"}], "default": None}
    return RegistryWriters(
        Writer(1, first, ("channel",)),
        Writer(2, evolved),
        Writer(3, {**first, "name": "Other"}, ("channel",)),
        Writer(4, {**evolved, "fields": [*evolved["fields"], time_field]}),
    )


def test_valid_records_decode_to_their_values_the_first_half_with_the_first_version():
    events = RegistryEvents(Generator(SCHEMA, seed=3), _writers(), evolve_at=50)
    for n in range(100):
        made = events.record(0.0)
        assert made.kind == VALID
        found = unframe(made.value)
        assert found is not None
        sid, payload = found
        assert sid == (1 if n < 50 else 2)
        writer = _writers().first if sid == 1 else _writers().evolved
        record = _decode(writer.schema, payload)
        assert record["event_id"] == made.event_id == made.values["event_id"]
        assert record["amount"] == Decimal(made.values["amount"])
        assert record["event_time"] == read_timestamp(made.values["event_time"])
        assert record.get("channel") == (made.values.get("channel") if sid == 2 else None)
        seen = made.values.get("seen")
        assert record["meta"]["seen"] == (read_timestamp(seen) if seen else None)


def test_each_malformed_kind_is_written_as_its_reason_says():
    writers = _writers()
    events = RegistryEvents(Generator(SCHEMA, seed=5), writers, evolve_at=10**9)
    kinds = framed_kinds(Generator(SCHEMA))
    assert events.kinds() == kinds
    seen: Counter = Counter()
    for _ in range(3000):
        made = events.record(0.5)
        seen[made.kind] += 1
        found = unframe(made.value)
        if made.kind == "oversized":
            assert len(made.value) > SCHEMA.max_bytes
        elif made.kind == "avro_not_framed":
            assert found is None and json.loads(made.value)["event_id"]
        elif made.kind == "avro_unknown_schema":
            assert found is not None and found[0] == UNKNOWN_ID
        elif made.kind == "avro_other_subject":
            assert found is not None and found[0] == 3 and _decode(writers.other_subject.schema, found[1])  # type: ignore[union-attr]
        elif made.kind == "avro_unsupported_schema":
            assert found is not None and found[0] == 4
        elif made.kind == "avro_undecodable":
            assert found is not None and found[0] == 1
            with pytest.raises((EOFError, AssertionError, IndexError, ValueError)):
                _decode(writers.first.schema, found[1])
        elif made.kind != VALID:  # a rule broken: a record of its writer schema, decodable
            assert found is not None and found[0] in (1, 2)
            writer = writers.first if found[0] == 1 else writers.evolved
            _decode(writer.schema, found[1])
    assert set(seen) == {VALID, *kinds}, seen


def test_a_broken_optional_field_the_first_version_lacks_is_written_with_the_evolved_one():
    """not_allowed can only break `channel` here: written with version 1, the break would be dropped."""
    body = {
        **PAYMENTS_SCHEMA_BODY,
        "fields": [
            *[{k: v for k, v in f.items() if k != "allowed"} for f in PAYMENTS_SCHEMA_BODY["fields"]],
            FIELDS[-2],
        ],
    }
    schema = Schema.model_validate(body)
    first = declared_avro_schema(schema, "p", leave_out=("channel",))
    writers = RegistryWriters(Writer(1, first, ("channel",)), Writer(2, declared_avro_schema(schema, "p")))
    events = RegistryEvents(Generator(schema, seed=1), writers, evolve_at=10**9)
    broken = [m for m in (events.record(0.9) for _ in range(400)) if m.kind == "not_allowed"]
    assert broken and all(unframe(m.value)[0] == 2 for m in broken)  # type: ignore[index]
