"""What earlier writer generations of the Kafka sink already delivered.

A new generation (after recovery: new checkpoint, batch ids from 0, new
transactional ids) may start reading below what the Kafka sink already holds:
the recovery point is the lowest of all sinks, and the previous generation may
have died inside a batch some task partitions had committed. Rewriting those
rows would duplicate them, so the sink works out, from its own ledger, what is
already delivered:

- `floor`: per source partition, everything below was delivered (the end of
  the previous generation's last complete batch);
- `partial`: the previous generation's last batch, if only some task partitions
  committed it: its offset range, which task partitions, and how rows were split
  (`pmod(hash(key), n)`) — so exactly the rows those tasks wrote are known.

Rows matching either are excluded from the new generation's writes. The carry
travels in the new generation's ledger records while a batch can still contain
such rows, so a restart of the new generation knows it without looking back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from onceflow.kafka.ledger import KafkaLedgerRecord
from onceflow.offsets import as_json, from_json


@dataclass
class Carry:
    floor: dict[int, int] = field(default_factory=dict)
    partial: list[dict] = field(
        default_factory=list
    )  # {generation, batch_id, start, end, tasks, task_partitions, key_expr}

    def __bool__(self) -> bool:
        return bool(self.floor) or bool(self.partial)

    def to_json(self) -> dict:
        return {
            "floor": as_json(self.floor),
            "partial": [
                {
                    **item,
                    "start": as_json(item["start"]),
                    "end": as_json(item["end"]),
                }
                for item in self.partial
            ],
        }

    @classmethod
    def from_json(cls, body: dict | None) -> Carry:
        if not body:
            return cls()
        return cls(
            floor=from_json(body.get("floor")),
            partial=[
                {
                    **item,
                    "start": from_json(item["start"]),
                    "end": from_json(item["end"]),
                    "tasks": [int(t) for t in item["tasks"]],
                }
                for item in body.get("partial") or []
            ],
        )

    @classmethod
    def union(cls, carries: Iterable[Carry]) -> Carry:
        """Everything any of them says was delivered (excluding delivered rows is always safe)."""
        out = cls()
        for carry in carries:
            for p, o in carry.floor.items():
                out.floor[p] = max(o, out.floor.get(p, o))
            for item in carry.partial:
                if item not in out.partial:
                    out.partial.append(item)
        return out

    def for_batch(self, start: dict[int, int]) -> Carry | None:
        """The part that can still match rows of a batch starting at `start` (None: nothing)."""
        floor = self.floor if any(start.get(p, o) < o for p, o in self.floor.items()) else {}
        partial = [i for i in self.partial if any(start.get(p, e) < e for p, e in i["end"].items())]
        carry = Carry(dict(floor), partial)
        return carry or None

    def clip(self, offsets: dict[int, int]) -> dict[int, int]:
        """A ledger range bound moved up to the floor: the rows below it are not this generation's."""
        return {p: max(o, self.floor.get(p, o)) for p, o in offsets.items()}

    def delivered(self):
        """A Spark Column: true for rows an earlier generation already delivered."""
        from pyspark.sql import functions as F

        cond = F.lit(False)
        for p, o in sorted(self.floor.items()):
            cond = cond | ((F.col("_partition") == p) & (F.col("_offset") < o))
        for item in self.partial:
            in_range = F.lit(False)
            for p, s in sorted(item["start"].items()):
                e = item["end"].get(p, s)
                if s < e:
                    in_range = in_range | (
                        (F.col("_partition") == p) & (F.col("_offset") >= s) & (F.col("_offset") < e)
                    )
            task = F.pmod(F.hash(F.expr(item["key_expr"]).cast("binary")), F.lit(item["task_partitions"]))
            cond = cond | (in_range & task.isin(*item["tasks"]))
        return cond


def after_generation(latest: list[KafkaLedgerRecord]) -> Carry:
    """The carry a new generation inherits from an older generation's newest record per task."""
    if not latest:
        return Carry()
    inherited = Carry.union(Carry.from_json(r.carry) for r in latest)
    n = max(r.task_partitions for r in latest)
    by_task = {r.task_partition: r for r in latest}
    newest = max(r.batch_id for r in latest)
    complete = min(by_task[t].batch_id if t in by_task else -1 for t in range(n))
    carry = Carry(dict(inherited.floor), list(inherited.partial))
    if complete >= 0:
        done = next(r for r in latest if r.batch_id == complete)
        for p, o in done.end.items():
            carry.floor[p] = max(o, carry.floor.get(p, o))
    if newest > complete:
        first = next(r for r in latest if r.batch_id == newest)
        carry.partial.append(
            {
                "generation": first.generation,
                "batch_id": newest,
                "start": dict(first.start),
                "end": dict(first.end),
                "task_partitions": n,
                "key_expr": first.key_expr,
                "tasks": sorted(r.task_partition for r in latest if r.batch_id == newest),
            }
        )
    carry.partial = [i for i in carry.partial if any(e > carry.floor.get(p, 0) for p, e in i["end"].items())]
    return carry
