"""Sink ledgers: how far each sink got, told by the sink itself.

Every Delta commit the streaming job makes carries a ledger entry in its commit
metadata (`userMetadata`): pipeline, sink, writer generation, batch id and the
per-partition Kafka offset range `[start, end)` the batch covered. The rows and
their entry land in one atomic commit, so the ledger can never claim rows that
are not there, nor hide rows that are. Entries are read back from the Delta log
with delta-rs, without a JVM, so CLI status checks and Airflow triggers stay light.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from onceflow import offsets
from onceflow.storage.location import Location

LEDGER_KEY = "onceflow_ledger"
LEDGER_FORMAT = 1


class EntryKind(StrEnum):
    """What a ledger entry stands for (its "kind" in the commit metadata)."""

    BATCH = "batch"  # an entry for a micro-batch's rows
    LOSS = "loss"  # offsets Kafka no longer held, accepted as lost by `onceflow recover --accept-loss`
    BACKFILL = "backfill"  # rows `onceflow backfill` re-wrote inside the committed range (kept beside the batches)
    GROUP = "group"  # one commit holding several batches' entries (the aggregates follower's merges)


# Delta operations that move or drop files but change no row. Delta's auto compaction runs
# right after a MERGE inside the same call and its commit picks up the session's
# userMetadata, so it carries a copy of the MERGE's ledger entry: a copy, never a step.
MAINTENANCE_OPERATIONS = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END", "REORG"})
# onceflow's own schema-evolution commits (spark/evolve.py) say so in their userMetadata
MAINTENANCE_KEY = "onceflow_maintenance"
# Which sink follows which (its table written from another sink's, not from Kafka) is
# sink_kinds.FOLLOWS; follower_lag below compares a follower's ledger with its leader's.


# a quarantine entry's extra: its rows per reason (onceflow.schema.reasons), for metrics and reports
REASONS = "reasons"
UNRECORDED = "unrecorded"  # rows of entries written before reasons were recorded


def rows_by_reason(entries: Iterable[LedgerEntry]) -> dict[str, int]:
    """A quarantine ledger's rows per reason over its entries; an entry that recorded none counts
    its rows as UNRECORDED."""
    out: dict[str, int] = {}
    for e in entries:
        reasons = e.extra.get(REASONS)
        if not isinstance(reasons, dict):
            reasons = {UNRECORDED: e.rows} if e.rows else {}
        for reason, n in reasons.items():
            out[str(reason)] = out.get(str(reason), 0) + int(n)
    return dict(sorted(out.items()))


def app_id(pipeline: str, sink: str, generation: int) -> str:
    """Delta txnAppId of one writer generation of one sink.

    A fresh checkpoint restarts batch ids at 0 and Delta skips every txnVersion
    it has seen for an app id, so each generation needs its own id.
    """
    return f"onceflow:{pipeline}:{sink}:g{generation}"


@dataclass(frozen=True)
class LedgerEntry:
    pipeline: str
    sink: str
    generation: int
    batch_id: int
    topic: str
    start: dict[int, int]
    end: dict[int, int]
    rows: int = 0
    kind: EntryKind = EntryKind.BATCH
    extra: dict = field(default_factory=dict)
    version: int | None = None  # the Delta table version that holds this entry
    timestamp: int | None = None  # commit time, ms since the epoch

    @property
    def app_id(self) -> str:
        """The Delta txnAppId its commit is written under (txnVersion: `batch_id`)."""
        if self.kind == EntryKind.BACKFILL:
            return backfill_app_id(self.pipeline, self.sink)
        return app_id(self.pipeline, self.sink, self.generation)

    def _body(self) -> dict:
        body = {
            LEDGER_KEY: LEDGER_FORMAT,
            "kind": self.kind,
            "pipeline": self.pipeline,
            "sink": self.sink,
            "generation": self.generation,
            "batch_id": self.batch_id,
            "topic": self.topic,
            "start": offsets.as_json(self.start),
            "end": offsets.as_json(self.end),
            "rows": self.rows,
        }
        if self.extra:
            body["extra"] = self.extra
        return body

    def to_json(self) -> str:
        """The commit metadata string written with the batch's rows."""
        return json.dumps(self._body(), separators=(",", ":"))

    @classmethod
    def _from_body(cls, body: dict, version: int | None, timestamp: int | None) -> LedgerEntry:
        return cls(
            pipeline=body["pipeline"],
            sink=body["sink"],
            generation=int(body["generation"]),
            batch_id=int(body["batch_id"]),
            topic=body["topic"],
            start=offsets.from_json(body["start"]),
            end=offsets.from_json(body["end"]),
            rows=int(body.get("rows", 0)),
            kind=EntryKind(body.get("kind", EntryKind.BATCH)),
            extra=body.get("extra") or {},
            version=version,
            timestamp=timestamp,
        )

    @classmethod
    def from_json(cls, text: str, version: int | None = None, timestamp: int | None = None) -> LedgerEntry | None:
        """Parse commit metadata; None when it is not one onceflow ledger entry."""
        entries = entries_from_json(text, version, timestamp)
        return entries[0] if entries is not None and len(entries) == 1 else None

    def as_dict(self) -> dict:
        """Every field, the offsets keyed by partition as strings (JSON's keys), in partition order."""
        d = asdict(self)
        d["start"] = offsets.as_json(self.start)
        d["end"] = offsets.as_json(self.end)
        return d


def group_json(entries: list[LedgerEntry]) -> str:
    """The commit metadata of one commit that holds several batches, each with its own
    entry, oldest first: the aggregates follower merges every bronze batch that arrived
    since its last merge in one commit (onceflow.spark.follower), and the ledger still
    tells batch by batch what the table holds."""
    if not entries:
        raise ValueError("a ledger group needs at least one entry")
    return json.dumps(
        {LEDGER_KEY: LEDGER_FORMAT, "kind": EntryKind.GROUP, "entries": [e._body() for e in entries]},
        separators=(",", ":"),
    )


def entries_from_json(
    text: str | None, version: int | None = None, timestamp: int | None = None
) -> list[LedgerEntry] | None:
    """The ledger entries of one commit's metadata: one, or a group's, all at `version`;
    None when it is not onceflow's."""
    if text is None:
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get(LEDGER_KEY) != LEDGER_FORMAT:
        return None
    if body.get("kind") == EntryKind.GROUP:
        return [LedgerEntry._from_body(e, version, timestamp) for e in body.get("entries") or []]
    return [LedgerEntry._from_body(body, version, timestamp)]


@dataclass
class Ledger:
    """One sink table's ledger, oldest entry first."""

    table: str
    entries: list[LedgerEntry]
    foreign_commits: list[dict]  # commits with no ledger entry that may change data (manual writes, ...)
    exists: bool = True
    backfills: list[LedgerEntry] = field(default_factory=list)  # BACKFILL entries: repairs, not progress
    maintenance: list[dict] = field(default_factory=list)  # compactions, vacuums: no data changed
    properties: dict[str, str] = field(default_factory=dict)  # the table's Delta properties (configuration)

    @property
    def last(self) -> LedgerEntry | None:
        return self.entries[-1] if self.entries else None

    @property
    def generation(self) -> int | None:
        return self.last.generation if self.last else None

    def committed_offsets(self) -> dict[int, int]:
        """Per partition, the offset up to which this sink holds everything: the
        next offset to read. Partitions never seen are absent."""
        out: dict[int, int] = {}
        for entry in self.entries:
            out.update(entry.end)
        return out

    def problems(self) -> list[str]:
        return contiguity_problems(self.entries)


def read_ledger(table_path: str, storage_options: dict[str, str] | None = None) -> Ledger:
    """Read the ledger of one Delta table from its commit history (no JVM)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(
            table_path,
            storage_options=storage_options if storage_options is not None else Location(table_path).storage_options,
        )
    except TableNotFoundError:
        return Ledger(table=table_path, entries=[], foreign_commits=[], exists=False)
    entries, foreign, backfills, maintenance = [], [], [], []
    for commit in sorted(table.history(), key=lambda c: c.get("version", -1)):
        brief = {
            "version": commit.get("version"),
            "operation": commit.get("operation"),
            "timestamp": commit.get("timestamp"),
        }
        if commit.get("operation") in MAINTENANCE_OPERATIONS or MAINTENANCE_KEY in (commit.get("userMetadata") or ""):
            maintenance.append(brief)
            continue
        found = entries_from_json(
            commit.get("userMetadata"), version=commit.get("version"), timestamp=commit.get("timestamp")
        )
        if found is None and commit.get("operation") not in ("CREATE TABLE",):
            foreign.append(brief)
        for entry in found or ():
            if entry.kind == EntryKind.BACKFILL:  # a repair inside the committed range: not a step of the stream
                backfills.append(entry)
            else:
                entries.append(entry)
    return Ledger(
        table=table_path,
        entries=entries,
        foreign_commits=foreign,
        backfills=backfills,
        maintenance=maintenance,
        properties=dict(table.metadata().configuration),
    )


def contiguity_problems(entries: Iterable[LedgerEntry]) -> list[str]:
    """Each entry must start where the previous one ended, partition by partition;
    within a generation batch ids must rise by one. Returns what breaks that."""
    problems: list[str] = []
    prev: LedgerEntry | None = None
    for entry in entries:
        if prev is not None:
            if entry.generation == prev.generation and entry.batch_id != prev.batch_id + 1:
                problems.append(
                    f"generation {entry.generation}: batch {entry.batch_id} follows batch "
                    f"{prev.batch_id} (expected {prev.batch_id + 1})"
                )
            if entry.generation < prev.generation:
                problems.append(
                    f"generation {entry.generation} (batch {entry.batch_id}) follows generation {prev.generation}"
                )
            for p, start in sorted(entry.start.items()):
                before = prev.end.get(p)
                if before is not None and start != before:
                    problems.append(
                        f"batch {entry.batch_id} (generation {entry.generation}) starts partition {p} "
                        f"at {start}, but the previous entry ended it at {before}"
                    )
        prev = entry
    return problems


def follower_lag(leader: Ledger, follower: Ledger) -> tuple[list[LedgerEntry], dict[int, int]]:
    """How a table derived from another's batches (the aggregates from bronze) stands against it:
    (the leader's entries that reach past the follower's committed offsets, oldest first: what it
    still lacks; the partitions where the follower holds offsets the leader does not: {p: its end}).

    Offsets, not batch ids, decide, as the sink floors of a new writer generation do: after bronze
    is restored from an older copy and re-reads what it lost, the aggregates skip the rows below
    their own end instead of counting them twice."""
    floor = follower.committed_offsets()
    missing = [e for e in leader.entries if any(o > floor.get(p, -1) for p, o in e.end.items())]
    held = leader.committed_offsets()
    return missing, {p: o for p, o in floor.items() if o > held.get(p, -1)}


# -- writing LOSS entries (onceflow recover --accept-loss) -------------------------------
def loss_app_id(pipeline: str, sink: str, generation: int) -> str:
    """Delta txnAppId of a generation's LOSS commit.

    Not the generation's own app id: a LOSS commit there with txnVersion 0 would
    make Delta skip that generation's real batch 0 (same app id, same version),
    and the first batch after recovery would vanish without a sound. Its own app
    id, version 0, keeps it idempotent without touching the batch ids.
    """
    return f"{app_id(pipeline, sink, generation)}:loss"


def loss_entry(
    pipeline: str,
    sink: str,
    generation: int,
    topic: str,
    start: dict[int, int],
    end: dict[int, int],
    extra: dict | None = None,
) -> LedgerEntry:
    """The ledger entry that records offsets [start, end) as lost (Kafka no longer held them).

    batch_id -1: it precedes the new generation's batch 0, so contiguity holds
    (the previous entry ends at `start`, the generation's first batch starts at `end`).
    """
    bad = {p: (start.get(p), o) for p, o in end.items() if p not in start or start[p] > o}
    if bad or not end:
        raise ValueError(f"a LOSS entry needs start <= end for every partition it names, got {bad or 'no partitions'}")
    return LedgerEntry(
        pipeline=pipeline,
        sink=sink,
        generation=generation,
        batch_id=-1,
        topic=topic,
        start=dict(sorted(start.items())),
        end=dict(sorted(end.items())),
        rows=0,
        kind=EntryKind.LOSS,
        extra=extra or {},
    )


def write_loss(table_path: str, entry: LedgerEntry, storage_options: dict[str, str] | None = None) -> int | None:
    """Commit a LOSS entry to a sink table as an empty append (no rows, just the ledger entry).

    Written with delta-rs, so recovery needs no JVM. Idempotent: the commit carries
    the txn (loss_app_id, 0) and is skipped when the table already has it, as Delta
    skips a repeated txnAppId/txnVersion. Returns the new table version, or None
    when the entry was already there.
    """
    from onceflow.deltars import Appender

    if entry.kind != EntryKind.LOSS:
        raise ValueError(f"write_loss writes LOSS entries only, not {entry.kind.value!r}")
    return Appender(table_path, storage_options).append(
        None, entry.to_json(), loss_app_id(entry.pipeline, entry.sink, entry.generation), 0
    )


# -- BACKFILL entries (onceflow backfill) ------------------------------------------------
def backfill_app_id(pipeline: str, sink: str) -> str:
    """Delta txnAppId of a sink's backfill commits; txnVersion counts them (0, 1, ...).

    Separate from every generation's id, so a backfill never shadows a stream batch.
    """
    return f"onceflow:{pipeline}:{sink}:backfill"


def backfill_entry(
    pipeline: str,
    sink: str,
    generation: int,
    sequence: int,
    topic: str,
    start: dict[int, int],
    end: dict[int, int],
    rows: int,
    missing: list[dict],
    reasons: dict[str, int] | None = None,
) -> LedgerEntry:
    """The ledger entry of one backfill commit: the range searched and the offsets it re-wrote
    (and, for the quarantine, its rows per reason)."""
    return LedgerEntry(
        pipeline=pipeline,
        sink=sink,
        generation=generation,
        batch_id=sequence,
        topic=topic,
        start=dict(sorted(start.items())),
        end=dict(sorted(end.items())),
        rows=rows,
        kind=EntryKind.BACKFILL,
        extra={"written": missing, **({REASONS: reasons} if reasons is not None else {})},
    )
