"""`onceflow produce` for a protobuf pipeline, without a registry: the declared fields as proto3
(generate/protobuf_events.py) and the records written with them, read back by the audit's decoder
(schema/protobuf_reference.py) and judged by the declared fields. The job and the registry's own
checks read them in tests/integration/test_registry_topics.py."""

from __future__ import annotations

import json
from collections import Counter

from google.protobuf import descriptor_pb2

from devkit.pipelines import PAYMENTS_SCHEMA_BODY
from onceflow.generate.avro_events import RegistryEvents, RegistryWriters, framed_kinds
from onceflow.generate.protobuf_events import ProtoWriter, declared_proto
from onceflow.generate.records import VALID, Generator
from onceflow.registry import unframe
from onceflow.schema import reasons as R
from onceflow.schema.model import Schema
from onceflow.schema.protobuf import file_set
from onceflow.schema.protobuf_reference import reference_view
from onceflow.schema.reference import Judge

FIELDS = [
    *PAYMENTS_SCHEMA_BODY["fields"],
    {"name": "channel", "type": "string", "required": False, "allowed": ["web", "app"]},
    {"name": "seen", "type": "timestamp", "path": "$.meta.seen", "required": False},
    {"name": "day", "type": "date", "path": "$.meta.day", "required": False},
]
SCHEMA = Schema.model_validate({**PAYMENTS_SCHEMA_BODY, "fields": FIELDS})
FIRST = declared_proto(SCHEMA, "payments-pb", leave_out=("channel",))
EVOLVED = declared_proto(SCHEMA, "payments-pb")


def _writers() -> RegistryWriters[ProtoWriter]:
    return RegistryWriters(
        ProtoWriter(1, FIRST, ("channel",)),
        ProtoWriter(2, EVOLVED),
        ProtoWriter(3, FIRST, ("channel",)),
        ProtoWriter(4, EVOLVED),
        reasons=R.PROTOBUF_REASONS,
    )


def test_the_declared_fields_become_a_proto3_message_that_keeps_its_numbers_across_versions():
    first, evolved = (descriptor_pb2.FileDescriptorSet.FromString(file_set(t)).file[-1] for t in (FIRST, EVOLVED))
    numbers = {f.name: f.number for f in evolved.message_type[0].field}
    assert {f.name: f.number for f in first.message_type[0].field} == {
        k: v for k, v in numbers.items() if k != "channel"
    }
    by_name = {f.name: f for f in evolved.message_type[0].field}
    assert by_name["channel"].proto3_optional and not by_name["event_id"].proto3_optional
    assert by_name["meta"].type_name.endswith("MetaFields")
    assert by_name["amount"].type == by_name["event_id"].type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING
    assert by_name["event_time"].type_name == ".google.protobuf.Timestamp"


def test_valid_records_read_back_as_their_values_and_each_kind_gets_its_reason():
    judge = Judge(SCHEMA)
    files = {1: file_set(FIRST), 2: file_set(EVOLVED), 3: file_set(FIRST), 4: file_set(EVOLVED)}
    events = RegistryEvents(Generator(SCHEMA, seed=7), _writers(), evolve_at=150)
    framing = set(R.PROTOBUF_REASONS) - {R.Reason.PROTOBUF_UNDECODABLE}
    kinds: Counter[str] = Counter()
    for n in range(600):
        made = events.record(0.5)
        kinds[made.kind] += 1
        found = unframe(made.value) if made.value is not None else None
        if made.kind in framing or made.kind == R.Reason.OVERSIZED:
            continue  # the registry's checks: the integration test
        assert found is not None
        sid, payload = found
        view = reference_view(files[sid], payload)
        if made.kind == R.Reason.PROTOBUF_UNDECODABLE:
            assert view is None, payload.hex()
            continue
        assert view is not None
        verdict = judge.judge(view.encode())
        assert verdict.reason == (None if made.kind == VALID else made.kind), (made.kind, view)
        if made.kind == VALID:
            assert sid == (1 if n < 150 else 2)
            assert verdict.values["event_id"] == made.event_id
            if sid == 1:
                assert json.loads(view).get("channel", "absent") == "absent"
    assert set(kinds) - {VALID} == set(framed_kinds(Generator(SCHEMA), reasons=R.PROTOBUF_REASONS)), kinds
