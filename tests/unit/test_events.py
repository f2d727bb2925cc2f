from __future__ import annotations

import json

from onceflow import events
from onceflow.kafka.producer import EventFactory


def test_factory_is_deterministic_per_seed():
    a, b = EventFactory(1), EventFactory(1)
    assert [a.valid() for _ in range(5)] == [b.valid() for _ in range(5)]
    assert EventFactory(1).valid() != EventFactory(2).valid()


def test_malformed_kinds_break_the_event_as_named():
    f = EventFactory(9)
    missing = json.loads(f.malformed(events.MISSING_FIELD))
    assert len(set(events.REQUIRED_FIELDS) - set(missing)) == 1
    assert float(json.loads(f.malformed(events.NEGATIVE_AMOUNT))["amount"]) < 0
    assert not isinstance(json.loads(f.malformed(events.WRONG_TYPE))["amount"], str)
    assert len(f.malformed(events.OVERSIZED)) > events.MAX_EVENT_BYTES
