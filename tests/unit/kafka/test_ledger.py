"""Pure logic of the Kafka sink's ledger: records, batches put together from task partitions,
their problems and the JSON `onceflow` prints, and a look-up through a leader moving (no broker)."""

from __future__ import annotations

import json
from typing import cast

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from onceflow.kafka.ledger import (
    _PROBE_SECONDS,
    SINK_NAME,
    KafkaLedger,
    KafkaLedgerRecord,
    _watermarks,
    default_ledger_topic,
    ledger_key,
    ledger_partition,
)
from onceflow.ledger import LedgerEntry
from onceflow.polling import Deadline


def record(
    batch: int,
    task: int,
    start: dict[int, int],
    end: dict[int, int],
    *,
    generation: int = 0,
    tasks: int = 2,
    rows: int = 3,
    written_at: int = 0,
) -> KafkaLedgerRecord:
    return KafkaLedgerRecord(
        pipeline="p",
        generation=generation,
        batch_id=batch,
        task_partition=task,
        task_partitions=tasks,
        topic="src",
        start=start,
        end=end,
        rows=rows,
        output_topic="out",
        key_expr="id",
        transactional_id=f"onceflow-p-g{generation}-{task}",
        written_at=written_at,
    )


def ledger(*records: KafkaLedgerRecord, **kw) -> KafkaLedger:
    return KafkaLedger("onceflow-ledger.p", "p", list(records), **kw)


def test_keys_partitions_and_the_default_topic():
    assert ledger_key("p", 2, 5) == b"p|g2|p5"
    assert [ledger_partition(t, 3) for t in range(5)] == [0, 1, 2, 0, 1]
    assert default_ledger_topic("payments") == "onceflow-ledger.payments"


def test_a_record_round_trips_and_anything_else_is_none():
    r = record(4, 1, {0: 10, 1: 5}, {0: 20, 1: 9}, written_at=17)
    back = KafkaLedgerRecord.from_json(r.to_json(), partition=1, offset=42)
    assert back == r  # where it was read from is not part of the record's identity
    assert (back.ledger_partition, back.ledger_offset) == (1, 42)
    assert back.start == {0: 10, 1: 5}  # partitions come back as ints
    for value in (None, b"not json", b"[1]", b'{"onceflow_kafka_ledger": 2}', b'{"onceflow_kafka_ledger": 1}'):
        assert KafkaLedgerRecord.from_json(value) is None
    assert KafkaLedgerRecord.from_json(r.to_json().decode()) == r  # str as well as bytes


def test_complete_batches_become_ledger_entries_and_partial_ones_do_not():
    led = ledger(
        record(0, 0, {0: 0}, {0: 10}, rows=2, written_at=5),
        record(0, 1, {0: 0}, {0: 10}, rows=4, written_at=7),
        record(1, 1, {0: 10}, {0: 18}, rows=1),  # task 0 of batch 1 has not committed (yet)
    )
    [entry] = led.entries
    assert (entry.sink, entry.batch_id, entry.start, entry.end, entry.rows) == (SINK_NAME, 0, {0: 0}, {0: 10}, 6)
    assert entry.timestamp == 7  # the last task's transaction
    assert entry.extra == {"output_topic": "out", "task_partitions": 2, "ledger_topic": "onceflow-ledger.p"}
    [partial] = led.partial
    assert partial.as_dict() == {"generation": 0, "batch_id": 1, "committed": [1], "missing": [0], "rows": 1}
    assert led.committed_offsets() == {0: 10}
    assert led.problems() == []  # the newest batch of its generation may still be partial
    assert led.to_ledger().table == "kafka:onceflow-ledger.p"


def test_problems_name_disagreeing_tasks_and_an_overtaken_partial_batch():
    led = ledger(
        record(0, 0, {0: 0}, {0: 10}),  # task 1 of batch 0 never committed, yet batch 1 did
        record(1, 0, {0: 10}, {0: 20}, tasks=3),
        record(1, 1, {0: 10}, {0: 21}, tasks=2),
    )
    problems = led.problems()
    assert any("task partitions [1] never committed, yet later batches did" in p for p in problems)
    assert any("batch 1: task partitions recorded different source offset ranges" in p for p in problems)
    assert any("batch 1: task partitions disagree on the number of task partitions [2, 3]" in p for p in problems)


def test_a_gap_between_complete_batches_is_a_problem():
    led = ledger(record(0, 0, {0: 0}, {0: 10}, tasks=1), record(1, 0, {0: 12}, {0: 20}, tasks=1))
    assert led.problems() == ["batch 1 (generation 0) starts partition 0 at 12, but the previous entry ended it at 10"]


def test_as_dict_is_json_with_every_complete_batch_as_an_entry():
    """KafkaLedger.as_dict() prints each complete batch as LedgerEntry.as_dict(); that method once sat
    in the body of another function after its return, so any ledger with entries raised AttributeError."""
    led = ledger(
        record(0, 0, {1: 0, 0: 0}, {1: 4, 0: 10}, written_at=9),
        record(0, 1, {1: 0, 0: 0}, {1: 4, 0: 10}, written_at=8),
        record(1, 0, {0: 10, 1: 4}, {0: 11, 1: 4}),
        in_doubt={1: (30, 33)},
    )
    out = led.as_dict()
    assert json.loads(json.dumps(out)) == out
    [entry] = out["entries"]
    assert entry["start"] == {"0": 0, "1": 0} and list(entry["start"]) == ["0", "1"]
    assert entry["end"] == {"0": 10, "1": 4}
    assert (entry["batch_id"], entry["rows"], entry["sink"], entry["timestamp"]) == (0, 6, "kafka", 9)
    assert out["records"] == 3
    assert out["committed_offsets"] == {"0": 10, "1": 4}
    assert out["in_doubt"] == {"1": {"last_stable_offset": 30, "log_end": 33}}
    assert [p["batch_id"] for p in out["partial"]] == [1]
    assert out["problems"] == []


def test_a_ledger_entry_as_dict_keys_offsets_by_partition_strings_in_order():
    e = LedgerEntry("p", "bronze", 1, 3, "t", {2: 5, 0: 1}, {2: 6, 0: 4}, rows=2)
    d = e.as_dict()
    assert list(d["start"].items()) == [("0", 1), ("2", 5)]
    assert list(d["end"].items()) == [("0", 4), ("2", 6)]
    assert (d["pipeline"], d["sink"], d["generation"], d["batch_id"], d["kind"]) == ("p", "bronze", 1, 3, "batch")


class _Consumer:
    """Answers get_watermark_offsets from a script: an error code raises it, a pair is the answer."""

    def __init__(self, *script):
        self.script, self.calls, self.refreshes = list(script), [], 0

    def get_watermark_offsets(self, tp, timeout):
        self.calls.append(timeout)
        step = self.script.pop(0)
        if isinstance(step, int):
            raise KafkaException(KafkaError(step))
        return step

    def list_topics(self, topic, timeout):
        self.refreshes += 1


def test_a_watermark_look_up_rides_through_a_leader_moving_and_gives_up_on_anything_else():
    moving = _Consumer(
        KafkaError._UNKNOWN_PARTITION, KafkaError._TIMED_OUT, KafkaError.NOT_LEADER_FOR_PARTITION, (0, 7)
    )
    assert _watermarks(cast(Consumer, moving), TopicPartition("l", 0), Deadline(60)) == (0, 7)
    assert moving.refreshes == 3 and max(moving.calls) <= _PROBE_SECONDS  # each probe bounded, the leader re-read
    other = _Consumer(KafkaError.TOPIC_AUTHORIZATION_FAILED, (0, 7))
    with pytest.raises(KafkaException):
        _watermarks(cast(Consumer, other), TopicPartition("l", 0), Deadline(60))
    late = _Consumer(KafkaError._TIMED_OUT, (0, 7))
    with pytest.raises(KafkaException):  # the reader's own deadline passed: the last error
        _watermarks(cast(Consumer, late), TopicPartition("l", 0), Deadline(0))
