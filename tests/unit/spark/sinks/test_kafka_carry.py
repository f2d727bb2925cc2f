"""What an older generation of the Kafka sink delivered, carried into the next so nothing is written twice."""

from __future__ import annotations

from onceflow.kafka.ledger import KafkaLedgerRecord
from onceflow.spark.sinks.kafka_carry import Carry, after_generation


def _record(batch: int, task: int, end: dict[int, int], start: dict[int, int] | None = None) -> KafkaLedgerRecord:
    return KafkaLedgerRecord("p", 0, batch, task, 2, "t", start or {0: 0}, end, 1, "out", "k", f"tx-{task}")


def test_a_generation_that_died_inside_a_batch_leaves_a_floor_and_the_tasks_that_committed():
    latest = [_record(4, 0, {0: 40}), _record(5, 1, {0: 50}, start={0: 40})]  # task 1 committed batch 5, task 0 not
    carry = after_generation(latest)
    assert carry.floor == {0: 40}
    assert [(i["batch_id"], i["tasks"], i["start"], i["end"]) for i in carry.partial] == [(5, [1], {0: 40}, {0: 50})]
    assert carry.for_batch({0: 30}) == carry  # a batch from below the floor: both still apply
    assert carry.for_batch({0: 45}) == Carry({}, carry.partial)  # above the floor: only the partial batch
    assert carry.for_batch({0: 60}) is None
    assert carry.clip({0: 30, 1: 7}) == {0: 40, 1: 7}


def test_a_carry_travels_as_json_and_unions_keep_everything_delivered():
    carry = Carry({0: 40}, [{"start": {0: 40}, "end": {0: 50}, "tasks": [1], "key_expr": "k", "task_partitions": 2}])
    back = Carry.from_json(carry.to_json())
    assert back == carry and carry.to_json()["floor"] == {"0": 40}
    assert Carry.from_json(None) == Carry() and not Carry()
    union = Carry.union([carry, Carry({0: 60, 1: 3}, [])])
    assert union.floor == {0: 60, 1: 3} and union.partial == carry.partial
    assert after_generation([]) == Carry()
