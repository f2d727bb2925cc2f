"""Synthetic payments events written by a transactional producer.

Events are grouped into transactions; a chosen fraction of transactions is
aborted on purpose (read_committed readers must never see them), and a chosen
fraction of records is malformed on purpose (the pipeline must quarantine them).
With a seed the whole stream — ids, amounts, times, keys, aborts — is reproducible.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterator

from confluent_kafka import KafkaException, Producer

from onceflow import events
from onceflow.errors import ProducerError
from onceflow.kafka.admin import ensure_topic

VALID = "valid"


@dataclass
class GeneratedRecord:
    key: bytes
    value: bytes
    kind: str  # "valid" or a malformed reason code
    event_id: str | None
    txn: int
    aborted: bool
    partition: int = -1
    offset: int = -1


@dataclass
class ProduceSummary:
    topic: str
    transactions: int = 0
    aborted_transactions: int = 0
    per_partition: dict[int, Counter] = field(default_factory=dict)
    records: list[GeneratedRecord] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, what: str, partition: int | None = None) -> int:
        """what: committed | committed_valid | committed_malformed | aborted."""
        parts = [partition] if partition is not None else list(self.per_partition)
        return sum(self.per_partition.get(p, Counter())[what] for p in parts)

    def as_dict(self) -> dict:
        return {
            "topic": self.topic,
            "transactions": self.transactions,
            "aborted_transactions": self.aborted_transactions,
            "seconds": round(self.seconds, 3),
            "partitions": {str(p): dict(c) for p, c in sorted(self.per_partition.items())},
            "totals": {k: self.count(k) for k in ("committed", "committed_valid", "committed_malformed", "aborted")},
        }


class EventFactory:
    """Deterministic events for a seed; event_time advances 10 ms per event."""

    def __init__(self, seed: int | None, accounts: int = 500, start: datetime | None = None):
        self.rng = random.Random(seed)
        self.accounts = accounts
        self.start = start or (datetime(2026, 1, 1, tzinfo=timezone.utc) if seed is not None
                               else datetime.now(timezone.utc))
        self.n = 0

    def valid(self) -> dict:
        rng = self.rng
        event = {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "account_id": f"acct-{rng.randrange(self.accounts):05d}",
            "amount": f"{rng.randrange(1, 1_000_000) / 100:.2f}",
            "currency": rng.choice(events.CURRENCIES),
            "event_time": (self.start + timedelta(milliseconds=10 * self.n)).isoformat().replace("+00:00", "Z"),
        }
        self.n += 1
        return event

    def malformed(self, kind: str) -> bytes:
        event = self.valid()
        if kind == events.INVALID_JSON:
            return json.dumps(event).encode()[: self.rng.randrange(5, 40)]
        if kind == events.MISSING_FIELD:
            del event[self.rng.choice(events.REQUIRED_FIELDS)]
        elif kind == events.WRONG_TYPE:
            event["amount"] = self.rng.choice([["12.00"], {"value": 1}, True])
        elif kind == events.NEGATIVE_AMOUNT:
            event["amount"] = f"-{event['amount']}"
        elif kind == events.OVERSIZED:
            event["note"] = "x" * (events.MAX_EVENT_BYTES + 1024)
        else:
            raise ValueError(f"unknown malformed kind {kind!r}")
        return json.dumps(event).encode()

    def record(self, malformed_ratio: float) -> tuple[bytes, bytes, str, str | None]:
        if self.rng.random() < malformed_ratio:
            kind = events.GENERATED_MALFORMED_KINDS[self.rng.randrange(len(events.GENERATED_MALFORMED_KINDS))]
            value = self.malformed(kind)
            key = f"acct-{self.rng.randrange(self.accounts):05d}".encode()
            return key, value, kind, None
        event = self.valid()
        return event["account_id"].encode(), json.dumps(event).encode(), VALID, event["event_id"]


def _transactions(factory: EventFactory, count: int, txn_size: int, malformed_ratio: float,
                  abort_ratio: float) -> Iterator[tuple[bool, list[tuple[bytes, bytes, str, str | None]]]]:
    made = 0
    while made < count:
        size = min(txn_size, count - made)
        abort = factory.rng.random() < abort_ratio
        yield abort, [factory.record(malformed_ratio) for _ in range(size)]
        made += size


def produce(bootstrap: str, topic: str, count: int, *, partitions: int = 4, rate: float = 0,
            seed: int | None = None, abort_ratio: float = 0.0, malformed_ratio: float = 0.0,
            txn_size: int = 100, transactional_id: str | None = None, keep_records: bool = True,
            progress: Callable[[int], None] | None = None) -> ProduceSummary:
    """Write `count` events in transactions of `txn_size`; returns what was written where.

    Aborted transactions still consume offsets (and their records sit in the log
    until the abort marker), which is exactly what read_committed must skip.
    """
    for name, ratio in (("abort_ratio", abort_ratio), ("malformed_ratio", malformed_ratio)):
        if not 0 <= ratio < 1:
            raise ProducerError(f"{name}={ratio} must be in [0, 1)")
    ensure_topic(bootstrap, topic, partitions)
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id or f"onceflow-produce-{uuid.uuid4()}",
        "partitioner": "murmur2_random",  # same key -> same partition as Java clients
        "linger.ms": 20,
        "message.max.bytes": 1_000_000,
    })
    summary = ProduceSummary(topic=topic)
    factory = EventFactory(seed)
    started = time.monotonic()
    written = 0
    try:
        producer.init_transactions(30)
        for abort, batch in _transactions(factory, count, txn_size, malformed_ratio, abort_ratio):
            producer.begin_transaction()
            pending: list[GeneratedRecord] = []
            for key, value, kind, event_id in batch:
                rec = GeneratedRecord(key, value, kind, event_id, summary.transactions, abort)
                pending.append(rec)

                def delivered(err, msg, rec=rec):
                    if err is None:
                        rec.partition, rec.offset = msg.partition(), msg.offset()

                _produce_one(producer, topic, rec, delivered)
                written += 1
                if rate > 0:
                    ahead = written / rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
            producer.flush(60)  # offsets known for committed and aborted alike
            if abort:
                producer.abort_transaction(60)
                summary.aborted_transactions += 1
            else:
                producer.commit_transaction(60)
            summary.transactions += 1
            for rec in pending:
                counts = summary.per_partition.setdefault(rec.partition, Counter())
                if rec.aborted:
                    counts["aborted"] += 1
                else:
                    counts["committed"] += 1
                    counts["committed_valid" if rec.kind == VALID else "committed_malformed"] += 1
                    if rec.kind != VALID:
                        counts[f"malformed:{rec.kind}"] += 1
            if keep_records:
                summary.records.extend(pending)
            if progress:
                progress(len(pending))
    except KafkaException as exc:
        raise ProducerError(f"producing to {topic!r} on {bootstrap} failed: {exc}") from exc
    finally:
        producer.flush(10)
    summary.seconds = time.monotonic() - started
    return summary


def _produce_one(producer: Producer, topic: str, rec: GeneratedRecord, on_delivery) -> None:
    while True:
        try:
            producer.produce(topic, value=rec.value, key=rec.key, on_delivery=on_delivery)
            return
        except BufferError:
            producer.poll(0.1)  # local queue full: let deliveries drain
