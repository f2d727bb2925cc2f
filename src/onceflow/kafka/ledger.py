"""The Kafka sink's ledger: one record per (batch, task partition), on a ledger topic.

Each task of the transactional Kafka sink commits its output records and one
ledger record in the same Kafka transaction, so a ledger record is visible (at
read_committed) exactly when that task's output is. The record says which
pipeline, writer generation, batch and task partition it belongs to, and the
batch's source offset range `[start, end)`.

Layout, chosen so that "did task p already commit batch N?" is one short read:
- key `<pipeline>|g<generation>|p<task>`, value JSON (`KafkaLedgerRecord`);
- the record of task p goes to ledger partition `p % ledger partitions` (the
  sink creates the topic with one partition per task), never compacted, never
  expired (`retention.ms=-1`);
- within one task partition batches commit in order (Spark starts batch N+1 only
  after every task of batch N succeeded), so "N is committed for p" is "the
  latest committed record of p has batch_id >= N". The latest is found by
  reading a small window back from the end of its ledger partition.

`read_kafka_ledger` reads every record back (for the audit and recovery) and
turns complete batches into `onceflow.ledger.LedgerEntry`s, so the Kafka sink
answers the same questions as the Delta sinks.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from onceflow import offsets
from onceflow.errors import KafkaLedgerError
from onceflow.kafka.client import Cluster, as_client, sink_client
from onceflow.kafka.consume import partition_offset
from onceflow.ledger import Ledger, LedgerEntry, contiguity_problems
from onceflow.polling import Deadline, wait_for
from onceflow.sink_kinds import SinkName

LEDGER_KEY = "onceflow_kafka_ledger"
LEDGER_FORMAT = 1
SINK_NAME = SinkName.KAFKA  # the name its entries carry
# Topic settings of a ledger topic: records must outlive any replay.
LEDGER_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
_OFFSET_INVALID = -1001


def default_ledger_topic(pipeline: str) -> str:
    return f"onceflow-ledger.{pipeline}"


def ledger_key(pipeline: str, generation: int, task: int) -> bytes:
    return f"{pipeline}|g{generation}|p{task}".encode()


def ledger_partition(task: int, ledger_partitions: int) -> int:
    return task % ledger_partitions


@dataclass(frozen=True)
class KafkaLedgerRecord:
    """What one task committed for one batch, in the same transaction as its rows."""

    pipeline: str
    generation: int
    batch_id: int
    task_partition: int
    task_partitions: int  # how many task partitions the batch was split into
    topic: str  # the source topic
    start: dict[int, int]  # the batch's source offset range [start, end), per source partition
    end: dict[int, int]
    rows: int  # output records this task wrote for the batch
    output_topic: str
    key_expr: str  # the key expression the rows were partitioned by
    transactional_id: str
    written_at: int = 0  # ms since the epoch, when the task began its transaction
    # what earlier generations already delivered, while it still matters (kafka_txn.Carry)
    carry: dict | None = None
    ledger_partition: int | None = field(default=None, compare=False)  # where it was read from
    ledger_offset: int | None = field(default=None, compare=False)

    def to_json(self) -> bytes:
        body = {
            LEDGER_KEY: LEDGER_FORMAT,
            "pipeline": self.pipeline,
            "generation": self.generation,
            "batch_id": self.batch_id,
            "task_partition": self.task_partition,
            "task_partitions": self.task_partitions,
            "topic": self.topic,
            "start": offsets.as_json(self.start),
            "end": offsets.as_json(self.end),
            "rows": self.rows,
            "output_topic": self.output_topic,
            "key_expr": self.key_expr,
            "transactional_id": self.transactional_id,
            "written_at": self.written_at,
        }
        if self.carry:
            body["carry"] = self.carry
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_json(
        cls, value: bytes | str | None, partition: int | None = None, offset: int | None = None
    ) -> KafkaLedgerRecord | None:
        """Parse a ledger value; None for anything that is not a ledger record."""
        try:
            body = json.loads(value) if value is not None else None
        except (TypeError, ValueError, UnicodeDecodeError):
            return None
        if not isinstance(body, dict) or body.get(LEDGER_KEY) != LEDGER_FORMAT:
            return None
        try:
            return cls(
                pipeline=body["pipeline"],
                generation=int(body["generation"]),
                batch_id=int(body["batch_id"]),
                task_partition=int(body["task_partition"]),
                task_partitions=int(body["task_partitions"]),
                topic=body["topic"],
                start=offsets.from_json(body["start"]),
                end=offsets.from_json(body["end"]),
                rows=int(body["rows"]),
                output_topic=body["output_topic"],
                key_expr=body["key_expr"],
                transactional_id=body["transactional_id"],
                written_at=int(body.get("written_at", 0)),
                carry=body.get("carry") or None,
                ledger_partition=partition,
                ledger_offset=offset,
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["start"] = offsets.as_json(self.start)
        d["end"] = offsets.as_json(self.end)
        return d


# -- reading ranges at read_committed ------------------------------------------
def _consumer(cluster: Cluster, isolation: str) -> Consumer:
    """A consumer that only ever `assign`s: no group membership, no offset commits."""
    return Consumer(
        as_client(cluster).librdkafka(
            **{
                "group.id": "onceflow-kafka-ledger-reader",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": isolation,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 50,
                "log_level": 3,
            }
        )
    )


# A watermark look-up goes to the partition's leader as the client last knew it. While a node of a
# cluster dies that may be the dead node (the request then waits for its whole timeout, or until the
# node is back) or no node at all; so each look-up is bounded, and retried on the leader known after
# a metadata refresh until the reader's own timeout.
_PROBE_SECONDS = 5.0
_LEADER_MOVING = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._DESTROY_BROKER,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT,
    }
)


def _watermarks(consumer: Consumer, tp: TopicPartition, deadline: Deadline) -> tuple[int, int]:
    """`consumer.get_watermark_offsets(tp)` through its leader moving to another node, by `deadline`."""
    while True:
        probe = max(min(_PROBE_SECONDS, deadline.left()), 0.1)
        try:
            return consumer.get_watermark_offsets(tp, timeout=probe)
        except KafkaException as exc:
            if deadline.passed or exc.args[0].code() not in _LEADER_MOVING:
                raise
        with contextlib.suppress(KafkaException):  # the partition's leader now
            consumer.list_topics(tp.topic, timeout=probe)


# A client can stay stuck after every node of a cluster restarted: its metadata refreshes keep
# answering "unknown partition" while a new client sees the partition at once (seen in the whole-
# cluster fault of tests/e2e/test_cluster_failover.py). So a look-up that fails this long on one
# consumer goes on with a new one, within the reader's own timeout.
_FRESH_CONSUMER_AFTER = 20.0


class LedgerReader:
    """Reads ledger partitions at read_committed (two consumers, reused across look-ups)."""

    def __init__(self, cluster: Cluster, timeout: float = 60):
        self.cluster = as_client(cluster)
        self.timeout = timeout
        self.committed = _consumer(self.cluster, "read_committed")
        self.uncommitted = _consumer(self.cluster, "read_uncommitted")  # only for the log end
        self.renewed = 0  # consumers replaced after they stayed stuck (`_watermarks`)

    def close(self) -> None:
        self.committed.close()
        self.uncommitted.close()

    def __enter__(self) -> LedgerReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _watermarks(self, isolation: str, tp: TopicPartition) -> tuple[int, int]:
        """Watermarks at `isolation` within the reader's timeout, on a new consumer when the
        current one has failed for `_FRESH_CONSUMER_AFTER` seconds with its leader moving."""
        attr = "committed" if isolation == "read_committed" else "uncommitted"
        deadline = Deadline(self.timeout)
        while True:
            try:
                return _watermarks(getattr(self, attr), tp, Deadline(min(_FRESH_CONSUMER_AFTER, deadline.left())))
            except KafkaException as exc:
                if deadline.passed or exc.args[0].code() not in _LEADER_MOVING:
                    raise
            with contextlib.suppress(Exception):  # its state is unknown; a new client starts clean
                getattr(self, attr).close()
            setattr(self, attr, _consumer(self.cluster, isolation))
            self.renewed += 1

    def stable_end(self, topic: str, partition: int, wait: bool = True) -> tuple[int, int, int]:
        """(low, stable, log_end); with `wait`, `stable` covers every record written so far.

        At read_committed the high watermark a consumer sees is the last stable
        offset (LSO): a transaction still open on the partition holds it back,
        and records committed after that transaction began stay invisible until
        it ends. So wait until the LSO reaches the log end as it was on entry
        (every record of ours was written before we looked); another writer's
        open transaction ends by commit, abort or its transaction timeout.
        Without `wait`, the committed records up to the LSO are what can be known
        now, and `stable < log_end` says an open transaction hides the rest.
        """
        tp = TopicPartition(topic, partition)
        _, log_end = self._watermarks("read_uncommitted", tp)
        stable = log_end

        def settled() -> tuple[int, int, int] | None:
            nonlocal stable
            low, stable = self._watermarks("read_committed", tp)
            return (low, stable, log_end) if stable >= log_end or not wait else None

        return wait_for(
            settled,
            self.timeout,
            lambda: KafkaLedgerError(
                f"ledger topic {topic!r} partition {partition}: an open transaction of another writer holds "
                f"the last stable offset at {stable}, below the log end {log_end}, for more than "
                f"{self.timeout:.0f}s, so committed ledger records behind it cannot be read yet. Fix: stop "
                "the other writer (an older generation, or another pipeline sharing this ledger topic) or "
                "wait for its transaction timeout; give each pipeline its own ledger topic."
            ),
        )

    def read_range(self, topic: str, partition: int, lo: int, hi: int) -> list[tuple[int, bytes | None, bytes | None]]:
        """Committed records of [lo, hi) of one partition: [(offset, key, value)].

        At read_committed the consumer skips aborted records and control markers,
        so completion is judged by its position, not by the last record seen.
        """
        out: list[tuple[int, bytes | None, bytes | None]] = []
        if hi <= lo:
            return out
        consumer = self.committed
        consumer.assign([TopicPartition(topic, partition, lo)])
        deadline = Deadline(self.timeout)
        try:
            while True:
                for msg in consumer.consume(500, 0.2):
                    err = msg.error()
                    if err is not None:
                        if err.fatal():
                            raise KafkaLedgerError(f"reading ledger topic {topic!r} partition {partition}: {err.str()}")
                        continue
                    _, offset = partition_offset(msg)
                    if offset < hi:
                        out.append((offset, msg.key(), msg.value()))
                position = consumer.position([TopicPartition(topic, partition)])[0].offset
                if position != _OFFSET_INVALID and position >= hi:
                    return out
                if deadline.passed:
                    raise KafkaLedgerError(
                        f"reading ledger topic {topic!r} partition {partition} offsets [{lo}, {hi}) did not "
                        f"finish within {self.timeout:.0f}s (position {position}). Fix: check that the broker "
                        "is up and the partition has a leader."
                    )
        finally:
            consumer.unassign()

    def latest(
        self, topic: str, partition: int, key: bytes, window: int = 64, wait: bool = True
    ) -> KafkaLedgerRecord | None:
        """The newest committed ledger record with `key` in one ledger partition.

        Reads backwards in doubling windows from the last stable offset; with one
        ledger partition per task the first window holds the answer.
        """
        return self.newest(topic, partition, lambda k, r: k == key, window, wait)

    def newest(
        self, topic: str, partition: int, match, window: int = 64, wait: bool = True
    ) -> KafkaLedgerRecord | None:
        """The newest committed ledger record for which match(key, record) holds."""
        low, hi, _ = self.stable_end(topic, partition, wait)
        size = window
        while hi > low:
            lo = max(low, hi - size)
            for offset, key, value in reversed(self.read_range(topic, partition, lo, hi)):
                record = KafkaLedgerRecord.from_json(value, partition, offset)
                if record is not None and match(key, record):
                    return record
            hi, size = lo, size * 2
        return None

    def all(self, topic: str, partition: int) -> tuple[list[KafkaLedgerRecord], tuple[int, int] | None]:
        """Every committed record readable now, and (stable, log_end) if an open
        transaction hides the partition's tail (None when nothing is in doubt)."""
        low, stable, log_end = self.stable_end(topic, partition, wait=False)
        records = []
        for offset, _, value in self.read_range(topic, partition, low, stable):
            record = KafkaLedgerRecord.from_json(value, partition, offset)
            if record is not None:
                records.append(record)
        return records, ((stable, log_end) if stable < log_end else None)


# -- the whole ledger ----------------------------------------------------------
@dataclass
class PartialBatch:
    """A batch some of whose task partitions committed and others not (yet)."""

    generation: int
    batch_id: int
    committed: list[int]
    missing: list[int]
    rows: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class KafkaLedger:
    """The Kafka sink ledger of one pipeline, read at read_committed."""

    ledger_topic: str
    pipeline: str
    records: list[KafkaLedgerRecord]
    exists: bool = True
    # ledger partition -> (last stable offset, log end): an open transaction (a writer
    # mid-commit, or one that crashed and was not fenced yet) hides what follows it
    in_doubt: dict[int, tuple[int, int]] = field(default_factory=dict)

    def batches(self) -> dict[tuple[int, int], list[KafkaLedgerRecord]]:
        """(generation, batch_id) -> the records of its committed task partitions."""
        out: dict[tuple[int, int], list[KafkaLedgerRecord]] = {}
        for record in self.records:
            out.setdefault((record.generation, record.batch_id), []).append(record)
        return dict(sorted(out.items()))

    def committed(self, generation: int) -> dict[tuple[int, int], KafkaLedgerRecord]:
        """(batch_id, task_partition) -> record, for one generation."""
        return {(r.batch_id, r.task_partition): r for r in self.records if r.generation == generation}

    @property
    def entries(self) -> list[LedgerEntry]:
        """Complete batches (every task partition committed) as ledger entries, oldest first."""
        out = []
        for (generation, batch_id), records in self.batches().items():
            if _missing(records):
                continue
            first = records[0]
            out.append(
                LedgerEntry(
                    pipeline=self.pipeline,
                    sink=SINK_NAME,
                    generation=generation,
                    batch_id=batch_id,
                    topic=first.topic,
                    start=dict(first.start),
                    end=dict(first.end),
                    rows=sum(r.rows for r in records),
                    extra={
                        "output_topic": first.output_topic,
                        "task_partitions": first.task_partitions,
                        "ledger_topic": self.ledger_topic,
                    },
                    timestamp=max(r.written_at for r in records),
                )
            )
        return out

    @property
    def partial(self) -> list[PartialBatch]:
        out = []
        for (generation, batch_id), records in self.batches().items():
            missing = _missing(records)
            if missing:
                out.append(
                    PartialBatch(
                        generation,
                        batch_id,
                        sorted(r.task_partition for r in records),
                        missing,
                        sum(r.rows for r in records),
                    )
                )
        return out

    def committed_offsets(self) -> dict[int, int]:
        """Per source partition, the next offset after the last complete batch."""
        return self.to_ledger().committed_offsets()

    def problems(self) -> list[str]:
        """Contiguity breaks between complete batches, disagreeing records of one
        batch, and partial batches that later batches overtook (which cannot
        happen unless two queries wrote the same generation)."""
        problems = contiguity_problems(self.entries)
        batches = self.batches()
        last_of_generation: dict[int, int] = {}
        for generation, batch_id in batches:
            last_of_generation[generation] = max(batch_id, last_of_generation.get(generation, -1))
        for (generation, batch_id), records in batches.items():
            ranges = {(json.dumps(r.start, sort_keys=True), json.dumps(r.end, sort_keys=True)) for r in records}
            if len(ranges) > 1:
                problems.append(
                    f"generation {generation} batch {batch_id}: task partitions recorded different "
                    f"source offset ranges {sorted(ranges)}"
                )
            counts = {r.task_partitions for r in records}
            if len(counts) > 1:
                problems.append(
                    f"generation {generation} batch {batch_id}: task partitions disagree on the "
                    f"number of task partitions {sorted(counts)}"
                )
            missing = _missing(records)
            if missing and batch_id != last_of_generation[generation]:
                problems.append(
                    f"generation {generation} batch {batch_id}: task partitions {missing} never "
                    "committed, yet later batches did"
                )
        return problems

    def to_ledger(self) -> Ledger:
        """The same shape as a Delta sink's ledger (onceflow.ledger.Ledger)."""
        return Ledger(table=f"kafka:{self.ledger_topic}", entries=self.entries, foreign_commits=[], exists=self.exists)

    def as_dict(self) -> dict:
        return {
            "ledger_topic": self.ledger_topic,
            "pipeline": self.pipeline,
            "exists": self.exists,
            "records": len(self.records),
            "in_doubt": {
                str(p): {"last_stable_offset": s, "log_end": e} for p, (s, e) in sorted(self.in_doubt.items())
            },
            "entries": [e.as_dict() for e in self.entries],
            "partial": [p.as_dict() for p in self.partial],
            "committed_offsets": offsets.as_json(self.committed_offsets()),
            "problems": self.problems(),
        }


def _missing(records: Iterable[KafkaLedgerRecord]) -> list[int]:
    records = list(records)
    expected = max(r.task_partitions for r in records)
    return sorted(set(range(expected)) - {r.task_partition for r in records})


def read_kafka_ledger(cluster: Cluster, ledger_topic: str, pipeline: str, timeout: float = 60) -> KafkaLedger:
    """Every committed ledger record of `pipeline` on `ledger_topic`, oldest first per task.

    Never waits for open transactions: a crashed writer's transaction stays open
    until a restart fences it or its timeout passes; `in_doubt` names the ledger
    partitions whose tail it hides (with one partition per task, only that
    task's own in-flight record)."""
    from onceflow.kafka.admin import admin_client

    bootstrap = as_client(cluster).bootstrap
    try:
        meta = admin_client(cluster).list_topics(ledger_topic, timeout=15)
    except KafkaException as exc:
        raise KafkaLedgerError(
            f"cannot reach Kafka at {bootstrap} to read ledger topic {ledger_topic!r}: {exc}. "
            "Fix: check the bootstrap servers and that the broker runs."
        ) from None
    info = meta.topics.get(ledger_topic)
    if info is None or info.error is not None:
        return KafkaLedger(ledger_topic, pipeline, [], exists=False)
    records: list[KafkaLedgerRecord] = []
    in_doubt = {}
    try:
        with LedgerReader(cluster, timeout) as reader:
            for partition in sorted(info.partitions):
                found, doubt = reader.all(ledger_topic, partition)
                records.extend(r for r in found if r.pipeline == pipeline)
                if doubt:
                    in_doubt[partition] = doubt
    except KafkaException as exc:
        raise KafkaLedgerError(
            f"reading ledger topic {ledger_topic!r} on {bootstrap} failed: {exc}. Fix: check "
            "that the broker runs and the topic's partitions have a leader."
        ) from None
    records.sort(key=lambda r: (r.generation, r.batch_id, r.task_partition))
    return KafkaLedger(ledger_topic, pipeline, records, in_doubt=in_doubt)


def pipeline_kafka_ledger(pipeline) -> KafkaLedger:
    """The Kafka sink ledger of a pipeline with `sinks.kafka` (addresses from its config)."""
    sink = pipeline.sinks.kafka
    if sink is None:
        raise KafkaLedgerError(f"pipeline {pipeline.name!r} has no sinks.kafka section")
    client = sink_client(pipeline)
    assert client is not None
    return read_kafka_ledger(
        client,
        sink.ledger_topic or default_ledger_topic(pipeline.name),
        pipeline.name,
    )
