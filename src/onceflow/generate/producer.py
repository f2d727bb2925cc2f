"""Synthetic events for a pipeline's declared schema, written by a transactional producer.

Events come from generate/records.py: valid ones keep every declared rule, malformed
ones each break exactly one check (its reason code is the record's `kind`). They are
grouped into transactions; a chosen fraction of transactions is aborted on purpose
(read_committed readers must never see them), and a chosen fraction of records is
malformed on purpose (the pipeline must quarantine each with its reason). With a seed
the whole stream — values, times, keys, kinds, aborts — is reproducible.

For a Debezium pipeline (`keyed=` a KeyedSpec with `debezium`) the records are a change stream of
one table instead (generate/changes.py), and an aborted transaction is written again, committed: see
`_change_batches`.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import KafkaException, Producer

from onceflow.cdc.spec import KeyedSpec
from onceflow.errors import ProducerError
from onceflow.generate.avro_events import RegistryEvents, RegistryWriters
from onceflow.generate.changes import TOMBSTONE_KIND, ChangeRecord, ChangeStream
from onceflow.generate.debezium_avro import AvroChanges
from onceflow.generate.large import RATIO as LARGE_RATIO
from onceflow.generate.records import KAFKA_RECORD_LIMIT, VALID, Generator, Made
from onceflow.kafka.admin import ensure_topic, list_end_offsets
from onceflow.kafka.client import Cluster, KafkaClient, as_client
from onceflow.polling import wait_until
from onceflow.registry import HEADER_BYTES, frame
from onceflow.schema.model import Schema

__all__ = ["VALID", "GeneratedRecord", "ProduceSummary", "produce"]


@dataclass
class GeneratedRecord:
    """One record written: `kind` is VALID or the reason code it must be quarantined with;
    `event_id` the schema's event_id of a valid record (else None); `values` the declared
    fields of the event (for a malformed record: of the event it was broken from). In a change
    stream `change` is the op of a change (c, u, d, r) or "tombstone" (its value is None, and
    its kind VALID: it is never quarantined)."""

    key: bytes | None
    value: bytes | None
    kind: str
    event_id: Any
    txn: int
    aborted: bool
    values: dict[str, Any] = field(default_factory=dict, repr=False)
    partition: int = -1
    offset: int = -1
    large: str | None = None  # a valid record made large on purpose: its kind (generate/large.py)
    change: str | None = None  # in a change stream: the op of a change, or "tombstone"


Batch = tuple[bool, list[GeneratedRecord]]  # a transaction: whether it is aborted, its records


@dataclass
class ProduceSummary:
    topic: str
    transactions: int = 0
    aborted_transactions: int = 0
    per_partition: dict[int, Counter] = field(default_factory=dict)
    records: list[GeneratedRecord] = field(default_factory=list)
    seconds: float = 0.0
    changes: ChangeStream | None = field(default=None, repr=False)  # a change stream's table and counts

    def count(self, what: str, partition: int | None = None) -> int:
        """what: committed | committed_valid | committed_malformed | committed_large | aborted."""
        parts = [partition] if partition is not None else list(self.per_partition)
        return sum(self.per_partition.get(p, Counter())[what] for p in parts)

    def as_dict(self) -> dict:
        changes = {"changes": self.changes.summary()} if self.changes is not None else {}
        return {
            "topic": self.topic,
            "transactions": self.transactions,
            "aborted_transactions": self.aborted_transactions,
            "seconds": round(self.seconds, 3),
            "partitions": {str(p): dict(c) for p, c in sorted(self.per_partition.items())},
            "totals": {
                k: self.count(k)
                for k in ("committed", "committed_valid", "committed_malformed", "committed_large", "aborted")
            },
            **changes,
        }


class Records(Protocol):
    """Where a stream's records come from: a Generator (JSON text) or generate/avro_events.RegistryEvents."""

    rng: random.Random

    def record(self, malformed_ratio: float = 0.0) -> Made: ...


def _transactions(
    gen: Records, count: int, txn_size: int, malformed_ratio: float, abort_ratio: float
) -> Iterator[tuple[bool, list[Made]]]:
    made = 0
    while made < count:
        size = min(txn_size, count - made)
        abort = gen.rng.random() < abort_ratio
        yield abort, [gen.record(malformed_ratio) for _ in range(size)]
        made += size


def _event_batches(
    gen: Records, count: int, txn_size: int, malformed_ratio: float, abort_ratio: float, keep: bool
) -> Iterator[Batch]:
    for abort, batch in _transactions(gen, count, txn_size, malformed_ratio, abort_ratio):
        yield abort, [_from_made(made, abort, keep) for made in batch]


def _from_made(made: Made, aborted: bool, keep: bool) -> GeneratedRecord:
    values = made.values if keep else {}
    return GeneratedRecord(made.key, made.value, made.kind, made.event_id, -1, aborted, values, large=made.large)


def _change_batches(
    stream: Iterable[ChangeRecord], txn_size: int, abort_ratio: float, rng: random.Random
) -> Iterator[Batch]:
    """The change stream in transactions of `txn_size`. An aborted transaction is written again
    right after, committed (as a connector's exactly-once producer retries a failed one): so
    what read_committed readers see is exactly the stream, every change delivered, and the
    stream's expected table stays the fold of what is committed. Its aborted copies are extra
    records, beyond `count`, that no committed reader sees."""
    records = iter(stream)
    while batch := list(itertools.islice(records, txn_size)):
        if rng.random() < abort_ratio:
            yield True, [_from_change(rec, True) for rec in batch]
        yield False, [_from_change(rec, False) for rec in batch]


def _from_change(rec: ChangeRecord, aborted: bool) -> GeneratedRecord:
    kind = VALID if rec.kind == TOMBSTONE_KIND else rec.kind  # a tombstone is a no-op, never quarantined
    change = "tombstone" if rec.kind == TOMBSTONE_KIND else rec.op
    return GeneratedRecord(rec.key, rec.value, kind, None, -1, aborted, change=change)


def produce(
    cluster: Cluster,
    topic: str,
    count: int,
    *,
    schema: Schema,
    group_by: Sequence[str] = (),
    key_field: str | None = None,
    partitions: int = 4,
    rate: float = 0,
    seed: int | None = None,
    abort_ratio: float = 0.0,
    malformed_ratio: float = 0.0,
    large_ratio: float = LARGE_RATIO,
    txn_size: int = 100,
    transactional_id: str | None = None,
    keep_records: bool = True,
    progress: Callable[[int], None] | None = None,
    keyed: KeyedSpec | None = None,
    duplicate_ratio: float = 0.05,
    out_of_order_ratio: float = 0.05,
    frame_id: int | None = None,
    writers: RegistryWriters | None = None,
    envelope: tuple[dict, int] | None = None,
) -> ProduceSummary:
    """Write `count` events of `schema` in transactions of `txn_size`; returns what was
    written where.

    group_by: the pipeline's aggregates fields (their values repeat, from a small pool).
    The Kafka key is the value of `key_field`, by default the schema's event_id, else the
    first group_by field (as the Kafka sink's default key); with neither, records have
    no key and the partitioner spreads them. Malformed kinds are drawn uniformly from
    the kinds the schema can produce (Generator.kinds()). `large_ratio` of the valid events
    are made large on purpose (long strings, exactly max_bytes, deep or wide members:
    generate/large.py), all still valid.

    `partitions` applies only when the topic does not exist yet; an existing one is written with
    the partitions it has.

    Aborted transactions still consume offsets (and their records sit in the log
    until the abort marker), which is exactly what read_committed must skip.

    keyed: a Debezium pipeline's keyed table (`Pipeline.keyed`): then the `count` records are a
    change stream of one table (generate/changes.py) with `duplicate_ratio` and `out_of_order_ratio`,
    `malformed_ratio` of them malformed, keyed by the row's key; `summary.changes` holds the
    stream, its counts and the table it must fold to. Aborted transactions are written again
    (`_change_batches`), so `count` records are committed; `large_ratio` does not apply.

    frame_id: each value in the Confluent wire format with this schema id (a `json_schema`
    pipeline's, or a Debezium one's with `converter: json_schema`; onceflow.registry.frame), the
    events made 5 bytes shorter so that a record of exactly max_bytes still is one, header included.

    writers: an `avro` or `protobuf` pipeline's registered writer schemas (generate/avro_events.py,
    generate/protobuf_events.py): the events are written in the format, the first half with the
    first version and the rest with the evolved one; `large_ratio` does not apply.

    envelope: a Debezium pipeline's Avro envelope schema and its id (converter avro,
    generate/debezium_avro.py): the change stream written in Avro, Debezium's AvroConverter's way.
    """
    for name, ratio, top in (
        ("abort_ratio", abort_ratio, 1),
        ("malformed_ratio", malformed_ratio, 1),
        ("large_ratio", large_ratio, 1),
        ("duplicate_ratio", duplicate_ratio, 1),
        ("out_of_order_ratio", out_of_order_ratio, 0.5),  # at most one late change per pair of changes
    ):
        if not 0 <= ratio < top:
            raise ProducerError(f"{name}={ratio} must be in [0, {top})")
    if count < 0 or txn_size < 1 or rate < 0:
        raise ProducerError(f"count={count} and rate={rate} must be at least 0, txn_size={txn_size} at least 1")
    stream: ChangeStream | None = None
    batches: Iterator[Batch]
    if frame_id is not None:  # the header counts towards max_bytes
        schema = schema.model_copy(update={"max_bytes": schema.max_bytes - HEADER_BYTES})
    if keyed is not None and keyed.debezium:
        stream = ChangeStream(
            schema,
            keyed,
            seed,
            count=count,
            duplicate_ratio=duplicate_ratio,
            out_of_order_ratio=out_of_order_ratio,
            malformed_ratio=malformed_ratio,
            table=topic.rsplit(".", 1)[-1],
        )
        changes: Iterable[ChangeRecord] = stream
        if envelope is not None:
            changes = AvroChanges(stream, envelope[0], envelope[1], keyed)
        batches = _change_batches(changes, txn_size, abort_ratio, random.Random(None if seed is None else seed + 2))
    else:
        gen = Generator(
            schema, seed, group_by=group_by, key_field=key_field, large_ratio=0.0 if writers else large_ratio
        )
        records: Records = gen if writers is None else RegistryEvents(gen, writers, evolve_at=count // 2)
        batches = _event_batches(records, count, txn_size, malformed_ratio, abort_ratio, keep_records)
    client = as_client(cluster)
    bootstrap = client.bootstrap
    ensure_topic(client, topic, partitions, at_least=False)  # an existing topic is written as it is
    producer = Producer(
        client.librdkafka(
            **{
                "transactional.id": transactional_id or f"onceflow-produce-{uuid.uuid4()}",
                "partitioner": "murmur2_random",  # same key -> same partition as Java clients
                "linger.ms": 20,
                "message.max.bytes": KAFKA_RECORD_LIMIT,
                # librdkafka's own notices (%4|…|GETPID|…) are not the user's business; errors still raise
                "log_level": 3,
            }
        )
    )
    summary = ProduceSummary(topic=topic, changes=stream)
    started = time.monotonic()
    written = 0
    last: dict[int, int] = {}  # per partition, the highest offset written
    try:
        producer.init_transactions(30)
        for abort, batch in batches:
            producer.begin_transaction()
            pending: list[GeneratedRecord] = []
            for rec in batch:
                rec.txn = summary.transactions
                if frame_id is not None and rec.value is not None:
                    rec.value = frame(frame_id, rec.value)
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
                if rec.offset >= 0:  # delivered: an aborted transaction's records may not be (purged)
                    last[rec.partition] = max(last.get(rec.partition, -1), rec.offset)
                counts = summary.per_partition.setdefault(rec.partition, Counter())
                if rec.aborted:
                    counts["aborted"] += 1
                else:
                    counts["committed"] += 1
                    counts["committed_valid" if rec.kind == VALID else "committed_malformed"] += 1
                    if rec.kind != VALID:
                        counts[f"malformed:{rec.kind}"] += 1
                    elif rec.large:
                        counts["committed_large"] += 1
                        counts[f"large:{rec.large}"] += 1
                    if rec.change:
                        counts[f"change:{rec.change}"] += 1
            if keep_records:
                summary.records.extend(pending)
            if progress and not (stream is not None and abort):  # a change stream's aborted copies are extra
                progress(len(pending))
    except KafkaException as exc:
        raise ProducerError(f"producing to {topic!r} on {bootstrap} failed: {exc}") from exc
    finally:
        producer.flush(10)
    _await_stable(client, topic, last)
    summary.seconds = time.monotonic() - started
    return summary


def _await_stable(client: KafkaClient, topic: str, last: dict[int, int], timeout: float = 60.0) -> None:
    """Return once every record written is readable at read_committed: the last stable offset of
    each partition is past its last record. With Kafka 4's transactions (KIP-890, version 2) a
    commit returns before the coordinator has written the partitions' markers, so the stable
    offset follows a moment later; a caller that reads or counts right after must not race it."""
    if not last:
        return

    def stable() -> bool:  # the partitions written only: no metadata request per look
        latest = list_end_offsets(client, topic, partitions=sorted(last))["latest"]
        return all(latest.get(p, -1) > o for p, o in last.items())

    if not wait_until(stable, timeout, interval=0.1):
        raise ProducerError(
            f"the transactions written to {topic!r} on {client.bootstrap} did not become readable at read_committed "
            f"within {timeout:g}s (the last stable offsets stayed below {last}): is the transaction coordinator up?"
        )


def _produce_one(producer: Producer, topic: str, rec: GeneratedRecord, on_delivery) -> None:
    while True:
        try:
            producer.produce(topic, value=rec.value, key=rec.key, on_delivery=on_delivery)
            return
        except BufferError:
            producer.poll(0.1)  # local queue full: let deliveries drain
