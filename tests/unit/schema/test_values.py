"""The generator's values per field: valid ones keep every rule, breakers break exactly one."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from devkit.pipelines import SENSORS_SCHEMA
from onceflow.schema.values import FieldValues, keeps, timestamp_text


def _field(name: str):
    return next(f for f in SENSORS_SCHEMA.fields if f.name == name)


def test_valid_values_keep_every_declared_rule():
    rng, now = random.Random(3), datetime(2026, 1, 1, tzinfo=UTC)
    for f in SENSORS_SCHEMA.fields:
        values = FieldValues(f, rng)
        for _ in range(50):
            v = values.valid(rng, now)
            assert values.usable(v), (f.name, v)
            assert all(keeps(f, rule, v) for rule in f.rules()), (f.name, v)


def test_a_breaker_breaks_its_rule():
    rng = random.Random(5)
    for name, rule in (("site", "allowed"), ("reading", "min"), ("reading", "max"), ("firmware", "pattern")):
        f = _field(name)
        breakers = FieldValues(f, rng).breakers(rule)
        assert breakers and all(not keeps(f, rule, v) for v in breakers), (name, rule, breakers)


def test_timestamps_are_written_in_utc_with_microseconds():
    assert timestamp_text(datetime(2026, 1, 1, 0, 0, 0, 10, tzinfo=UTC)) == "2026-01-01T00:00:00.000010Z"
