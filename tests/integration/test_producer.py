"""The transactional event generator against the real broker."""

from __future__ import annotations

import json

import pytest

from onceflow import events
from onceflow.kafka.producer import VALID, produce
from tests.kafka_helpers import consume_all

pytestmark = pytest.mark.integration


def test_read_committed_sees_exactly_the_committed_records(broker, topic):
    summary = produce(broker.bootstrap, topic, 3000, partitions=3, seed=11, abort_ratio=0.2,
                      malformed_ratio=0.05, txn_size=50)
    committed = {(r.partition, r.offset) for r in summary.records if not r.aborted}
    aborted = {(r.partition, r.offset) for r in summary.records if r.aborted}
    assert aborted, "the seed must yield aborted transactions for this test to mean anything"
    assert all(r.partition >= 0 and r.offset >= 0 for r in summary.records)

    seen_committed = consume_all(broker.bootstrap, topic, "read_committed")
    assert {(p, o) for p, o, _, _ in seen_committed} == committed
    assert len(seen_committed) == len(committed), "no record may be read twice"

    seen_all = {(p, o) for p, o, _, _ in consume_all(broker.bootstrap, topic, "read_uncommitted")}
    assert aborted <= seen_all, "read_uncommitted shows the aborted records: the transactions are real"

    assert summary.count("committed") == len(committed)
    assert summary.count("aborted") == len(aborted)
    assert summary.count("committed_valid") + summary.count("committed_malformed") == len(committed)
    for p in (0, 1, 2):
        assert summary.count("committed", p) == sum(1 for q, _ in committed if q == p)


def test_seed_reproduces_the_same_events(broker, topic):
    a = produce(broker.bootstrap, topic + "-a", 500, seed=5, abort_ratio=0.1, malformed_ratio=0.1)
    b = produce(broker.bootstrap, topic + "-b", 500, seed=5, abort_ratio=0.1, malformed_ratio=0.1)
    c = produce(broker.bootstrap, topic + "-c", 500, seed=6, abort_ratio=0.1, malformed_ratio=0.1)
    key = lambda s: [(r.key, r.value, r.kind, r.aborted, r.partition) for r in s.records]
    assert key(a) == key(b)
    assert key(a) != key(c)


def test_every_malformed_kind_is_generated_and_really_malformed(broker, topic):
    summary = produce(broker.bootstrap, topic, 2000, seed=3, malformed_ratio=0.3)
    kinds = {r.kind for r in summary.records}
    assert set(events.GENERATED_MALFORMED_KINDS) <= kinds
    for r in summary.records:
        if r.kind == events.INVALID_JSON:
            with pytest.raises(ValueError):
                json.loads(r.value)
        elif r.kind == events.OVERSIZED:
            assert len(r.value) > events.MAX_EVENT_BYTES
        elif r.kind == VALID:
            body = json.loads(r.value)
            assert set(body) == set(events.REQUIRED_FIELDS) and float(body["amount"]) > 0
