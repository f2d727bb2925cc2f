"""Four-way reconciliation: Kafka, the Spark checkpoint, the sink ledgers, the sink rows.

Each of the four tells how far the pipeline got, independently:

- Kafka, read at read_committed over explicit offset ranges, is the source of truth;
- the Spark checkpoint (`offsets/` + `commits/`) says which batches Spark committed;
- each sink's ledger (Delta commit metadata) says which batches that table holds;
- the sink rows carry their Kafka coordinates (`_topic, _partition, _offset`).

This module fixes the *committed point* once, at the start of an audit (`committed_point`;
the pipeline's facts it takes are read by `onceflow.facts.read_committed_point`), so an audit of a
running stream judges one consistent prefix, and checks that the ledgers agree
(`agreement_checks`). The audit then compares rows and aggregates with Spark
(`onceflow.audit.rows.RowReconciler`, `onceflow.audit.aggregates.reconcile_aggregates`).
Every check comes back as a `Check` with expected/observed values and the offending
offsets. Nothing here writes to a table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from onceflow.ledger import EntryKind, Ledger, LedgerEntry, follower_lag
from onceflow.offsets import as_json, from_json
from onceflow.sink_kinds import FOLLOWS, SinkName


class CheckStatus(StrEnum):
    """The outcome of one audit check."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # not applicable here (e.g. no event_id declared)


class CheckGroup(StrEnum):
    """What part of the audit a check belongs to: the report page groups its checks by it."""

    LEDGERS = "ledgers"  # the checkpoint and the sink ledgers agree (agreement_checks)
    ROWS = "rows"  # Kafka's committed records vs the tables' rows (audit/rows.py)
    AGGREGATES = "aggregates"  # the streaming aggregates vs a batch recomputation (audit/aggregates.py)
    CURRENT = "current"  # the keyed table vs a fold of its bronze changes (audit/current.py)
    KAFKA_OUTPUT = "kafka_output"  # the Kafka output topic (audit/kafka_output.py)
    GX = "gx"  # a Great Expectations expectation (audit/validate.py); its suite is in its name


class AuditStatus(StrEnum):
    """The outcome of one audit run (summary.json's `status`; exit codes 0, 1, 2)."""

    PASSED = "passed"  # every check passed
    FAILED = "failed"  # a check found a data problem
    ERROR = "error"  # the audit could not run (the summary's `reason` says why)


class AuditScope(StrEnum):
    """What an audit covers: `onceflow audit --full | --since-last`, the Airflow operators' `audit_mode`."""

    FULL = "full"  # everything committed
    SINCE_LAST = "since-last"  # what was committed since the last passed audit

    @classmethod
    def parse(cls, text: str) -> AuditScope:
        """The scope a person named: its value, or `incremental`, the name the Airflow DAGs' `mode`
        param first had for since-last (still accepted). ValueError for anything else."""
        return cls.SINCE_LAST if text == "incremental" else cls(text)


MAX_RANGES = 1000  # offending offset ranges listed per check (the count is always exact)
MAX_SAMPLES = 5  # offending rows shown per check


# -- the result of one check ----------------------------------------------------------
@dataclass
class Check:
    """One audit check: what was expected, what was observed, and where it broke."""

    name: str
    title: str
    status: CheckStatus
    expected: Any = None
    observed: Any = None
    detail: str = ""
    source: str = "reconcile"  # "reconcile" (Spark/Python) or "gx" (a Great Expectations expectation)
    partitions: list[int] = field(default_factory=list)  # partitions where it failed
    ranges: list[dict] = field(default_factory=list)  # {"partition", "start", "end", "count"}
    ranges_total: int = 0  # how many ranges exist (ranges may be truncated to MAX_RANGES)
    samples: list[dict] = field(default_factory=list)
    group: CheckGroup = field(kw_only=True)  # where the report shows it: every check says, none is guessed

    @property
    def passed(self) -> bool:
        return self.status != CheckStatus.FAILED

    def as_dict(self) -> dict:
        return jsonable(asdict(self))


def check(name: str, title: str, ok: bool, *, group: CheckGroup, **kw) -> Check:
    return Check(name=name, title=title, status=CheckStatus.PASSED if ok else CheckStatus.FAILED, group=group, **kw)


def jsonable(value: Any) -> Any:
    """Spark/Python values → JSON values (decimals and big hashes as strings, bytes shortened)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value[:200]).decode("utf-8", errors="replace")
        return text + (f"… ({len(value)} bytes)" if len(value) > 200 else "")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
        return str(value)
    return value


# -- offsets --------------------------------------------------------------------------
def offset_ranges(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted offsets → maximal runs of consecutive offsets as [start, end) pairs."""
    out: list[tuple[int, int]] = []
    for o in sorted(set(offsets)):
        if out and out[-1][1] == o:
            out[-1] = (out[-1][0], o + 1)
        else:
            out.append((o, o + 1))
    return out


# -- the committed point --------------------------------------------------------------
@dataclass
class SinkView:
    """One sink table as read at the start: its ledger up to the newest commit."""

    name: str
    path: str
    exists: bool
    version: int | None  # the Delta version the audit reads (pinned: later commits are not seen)
    entries: int
    generation: int | None
    last_batch: int | None
    end: dict[int, int]  # cumulative ledger end: everything below is in the table
    at_point: dict[int, int] | None  # the ledger's end at the checkpoint's committed batch (None: not found)
    ahead: int  # ledger entries beyond the checkpoint's committed batch
    foreign_commits: list[dict]
    backfills: list[dict] = field(default_factory=list)  # BACKFILL commits: version, rows, written ranges
    maintenance_commits: int = 0  # compactions and vacuums: files moved, no row changed
    follows: SinkName | None = None  # the sink whose batches this one is derived from (sink_kinds.FOLLOWS)
    trails: int | None = None  # batches of that sink this one does not hold yet (merged by the next run)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["end"], d["at_point"] = as_json(self.end), as_json(self.at_point)
        return jsonable(d)


@dataclass
class CommittedPoint:
    """What the audit judges: per partition the offset range [start, end), fixed at the start."""

    topic: str
    mode: AuditScope
    checkpoint: dict  # path, exists, usable, last_committed, uncommitted, generation, offsets
    sinks: dict[str, SinkView]
    first: dict[int, int]  # where the pipeline started reading, per partition
    start: dict[int, int]
    end: dict[int, int]
    not_retained: dict[int, tuple[int, int]]  # committed ranges Kafka no longer holds (not verifiable)
    accepted_loss: list[dict]  # ranges recovery accepted as lost (ledger LOSS entries)
    problems: dict[str, list[str]]  # check name → what disagrees
    running: bool = False
    watermark: dict | None = None

    def ranges(self) -> dict[int, tuple[int, int]]:
        """The non-empty ranges to audit, by partition."""
        return {p: (self.start[p], self.end[p]) for p in sorted(self.end) if self.start.get(p, 0) < self.end[p]}

    def as_dict(self) -> dict:
        return {
            "topic": self.topic,
            "mode": self.mode,
            "running": self.running,
            "checkpoint": jsonable({**self.checkpoint, "offsets": as_json(self.checkpoint.get("offsets"))}),
            "sinks": {n: s.as_dict() for n, s in self.sinks.items()},
            "partitions": [
                {
                    "partition": p,
                    "first": self.first.get(p),
                    "start": self.start.get(p),
                    "end": self.end[p],
                    "records_span": self.end[p] - self.start.get(p, self.end[p]),
                    "not_retained": list(self.not_retained[p]) if p in self.not_retained else None,
                }
                for p in sorted(self.end)
            ],
            "accepted_loss": self.accepted_loss,
            "watermark": self.watermark,
        }


def _cumulative(entries: list[LedgerEntry]) -> list[dict[int, int]]:
    out: list[dict[int, int]] = []
    cum: dict[int, int] = {}
    for e in entries:
        cum = {**cum, **e.end}
        out.append(cum)
    return out


def _sink_view(name: str, ledger: Ledger, cp_end: dict[int, int] | None) -> SinkView:
    entries = ledger.entries
    cums = _cumulative(entries)
    at_point, ahead = None, 0
    if cp_end is not None:
        for i in range(len(cums) - 1, -1, -1):  # the newest entry whose end is the checkpoint's point
            if all(cums[i].get(p) == o for p, o in cp_end.items()):
                at_point, ahead = dict(cums[i]), len(cums) - 1 - i
                break
    versions = [e.version for e in entries if e.version is not None]
    versions += [c["version"] for c in ledger.foreign_commits if c.get("version") is not None]
    versions += [e.version for e in ledger.backfills if e.version is not None]
    versions += [c["version"] for c in ledger.maintenance if c.get("version") is not None]
    last = ledger.last
    return SinkView(
        name=name,
        path=ledger.table,
        exists=ledger.exists,
        version=max(versions) if versions else None,
        entries=len(entries),
        generation=last.generation if last else None,
        last_batch=last.batch_id if last else None,
        end=dict(cums[-1]) if cums else {},
        at_point=at_point,
        ahead=ahead,
        foreign_commits=list(ledger.foreign_commits),
        backfills=[
            {"version": e.version, "rows": e.rows, "written": e.extra.get("written", [])} for e in ledger.backfills
        ],
        maintenance_commits=len(ledger.maintenance),
    )


def first_offsets(entries: list[LedgerEntry]) -> dict[int, int]:
    first: dict[int, int] = {}
    for e in entries:
        for p, o in e.start.items():
            first.setdefault(p, o)
        for p, o in e.end.items():
            first.setdefault(p, o)  # a partition seen only in `end` started empty there
    return first


def _coverage(entries: list[LedgerEntry]) -> dict[int, list[tuple[int, int]]]:
    """The offsets a ledger's entries cover, per partition, as merged [start, end) intervals."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for e in entries:
        for p, end in e.end.items():
            start = e.start.get(p, 0)
            if end > start:
                spans.setdefault(p, []).append((start, end))
    merged: dict[int, list[tuple[int, int]]] = {}
    for p, items in spans.items():
        out: list[tuple[int, int]] = []
        for start, end in sorted(items):
            if out and start <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], end))
            else:
                out.append((start, end))
        merged[p] = out
    return merged


def _entry_key(e: LedgerEntry) -> tuple:
    return (e.kind, e.generation, e.batch_id, tuple(sorted(e.start.items())), tuple(sorted(e.end.items())))


def committed_point(
    topic: str,
    checkpoint,
    ledgers: dict[str, Ledger],
    *,
    mode: AuditScope = AuditScope.FULL,
    watermark: dict | None = None,
    earliest: dict[int, int] | None = None,
    checkpoint_generation: int | None = None,
    running: bool = False,
) -> CommittedPoint:
    """Fix the committed point and the ranges to audit; list every disagreement.

    `checkpoint` is an `onceflow.checkpoint.Checkpoint` (or None when there is none);
    `ledgers` maps sink name → `Ledger` (read after the checkpoint, so a running job
    can only have moved them further); `earliest` is Kafka's log start per partition.
    The audited end is the checkpoint's committed offsets where the ledgers agree,
    else the minimum of all four; the start is where the pipeline began (full) or the
    watermark of the last passed audit (since-last). A follower (the aggregates) does not
    bound the end: it may trail, and is judged over the batches its own ledger holds.
    """
    problems: dict[str, list[str]] = {
        "checkpoint_ledger_agreement": [],
        "ledger_agreement": [],
        "ledger_contiguity": [],
    }
    cp_info: dict = {
        "path": getattr(checkpoint, "path", None),
        "exists": bool(checkpoint and checkpoint.exists),
        "usable": bool(checkpoint and checkpoint.usable),
        "last_committed": None,
        "uncommitted": None,
        "generation": checkpoint_generation,
        "offsets": None,
    }
    cp_end: dict[int, int] | None = None
    if checkpoint is not None and checkpoint.exists and checkpoint.last_committed is not None:
        try:
            cp_end = checkpoint.committed_offsets(topic) or None
        except Exception as exc:  # a CheckpointError: the committed batch's offsets are unreadable
            problems["checkpoint_ledger_agreement"].append(str(exc))
        cp_info.update(last_committed=checkpoint.last_committed, uncommitted=checkpoint.uncommitted, offsets=cp_end)
    if cp_end is None and not problems["checkpoint_ledger_agreement"]:
        why = "does not exist" if not cp_info["exists"] else "has no committed batch for topic " + repr(topic)
        problems["checkpoint_ledger_agreement"].append(
            f"the checkpoint {cp_info['path']} {why}; the audit goes up to the sink ledgers only"
        )

    sinks = {name: _sink_view(name, ledger, cp_end) for name, ledger in ledgers.items()}
    leader: str  # a sink a follower follows
    for name, leader in FOLLOWS.items():  # a follower may trail its leader, never lead it
        if name in sinks and leader in ledgers and sinks[name].exists:
            missing, ahead = follower_lag(ledgers[leader], ledgers[name])
            sinks[name].follows, sinks[name].trails = leader, len(missing)
            if ahead:
                problems["ledger_agreement"].append(
                    f"{name} holds offsets {as_json(ahead)}, beyond what {leader} holds "
                    f"({as_json(ledgers[leader].committed_offsets())}): they cannot have been merged from {leader}"
                )
    written = [s for s in sinks.values() if s.entries]
    if not written and cp_end is None:
        from onceflow.errors import AuditError

        raise AuditError(
            f"nothing to audit: no sink of topic {topic!r} holds a committed batch and the checkpoint "
            "has none. Fix: run `onceflow ingest` for this pipeline first."
        )

    # checkpoint vs each ledger
    for s in sinks.values():
        if cp_end is None:
            continue
        if s.at_point is None:
            behind = {p: (s.end.get(p), o) for p, o in cp_end.items() if s.end.get(p, -1) < o}
            if behind and s.follows:
                continue  # a follower trailing its leader: the next merge brings it up (it is audited as far as it got)
            if behind:
                parts = ", ".join(
                    f"partition {p}: ledger {have}, checkpoint {want}" for p, (have, want) in sorted(behind.items())
                )
                problems["checkpoint_ledger_agreement"].append(
                    f"{s.name}: the ledger is behind the checkpoint ({parts}): Spark committed batches whose "
                    f"rows are not in {s.name}"
                )
            else:
                problems["checkpoint_ledger_agreement"].append(
                    f"{s.name}: no ledger entry ends at the checkpoint's committed offsets {as_json(cp_end)} "
                    f"(ledger ends at {as_json(s.end)}): the two histories diverged"
                )
        elif s.ahead and not running and not (s.ahead == 1 and cp_info["uncommitted"] is not None):
            problems["checkpoint_ledger_agreement"].append(
                f"{s.name}: {s.ahead} ledger entries lie beyond the checkpoint's last committed batch "
                f"{cp_info['last_committed']} although no job is running (at most the one uncommitted batch may)"
            )
    if cp_end is not None and checkpoint_generation is not None:
        for s_name, ledger in ledgers.items():
            by_batch = {
                e.batch_id: e
                for e in ledger.entries
                if e.kind == EntryKind.BATCH and e.generation == checkpoint_generation
            }
            for b in checkpoint.commits:
                batch = checkpoint.batches.get(b)
                planned = batch.offsets(topic) if batch else None
                entry = by_batch.get(b)
                if planned is not None and entry is not None and entry.end != planned:
                    problems["checkpoint_ledger_agreement"].append(
                        f"{s_name}: batch {b} (generation {checkpoint_generation}) ends at {as_json(entry.end)} in the "
                        f"ledger but at {as_json(planned)} in the checkpoint's offsets/{b}"
                    )

    # ledgers vs each other, up to the point every one of them reached
    names = [n for n, s in sinks.items() if s.exists]
    if len(names) > 1:
        counts = {
            n: len(ledgers[n].entries) - sinks[n].ahead if sinks[n].at_point is not None else len(ledgers[n].entries)
            for n in names
        }
        ref = next((n for n in names if not sinks[n].follows), names[0])
        for n in (n for n in names if n != ref):
            # a follower mirrors its leader's entries one for one (it may trail: SinkView.trails); sinks fed
            # from Kafka must cover the same offsets, batch boundaries aside: after a recovery from sinks
            # that disagreed, the new generation's first batch starts at each sink's own floor
            follows = sinks[n].follows
            leader = follows if follows is not None and follows in ledgers else ref
            if follows is None:
                mine, theirs = ledgers[n].entries[: counts[n]], ledgers[ref].entries[: counts[ref]]
                if _coverage(mine) == _coverage(theirs):
                    continue
            for i in range(min(counts[leader], counts[n])):
                a, b = ledgers[leader].entries[i], ledgers[n].entries[i]
                if _entry_key(a) != _entry_key(b):
                    problems["ledger_agreement"].append(
                        f"entry {i}: {leader} holds batch {a.batch_id} (generation {a.generation}) "
                        f"{as_json(a.start)}→{as_json(a.end)}, {n} holds batch {b.batch_id} "
                        f"(generation {b.generation}) "
                        f"{as_json(b.start)}→{as_json(b.end)}"
                    )
                    break
            if counts[n] != counts[ref] and not sinks[n].follows:  # a follower may trail (SinkView.trails)
                problems["ledger_agreement"].append(
                    f"{ref} holds {counts[ref]} ledger entries up to the committed point, {n} holds {counts[n]}"
                )
    for n, ledger in ledgers.items():
        problems["ledger_contiguity"] += [f"{n}: {p}" for p in ledger.problems()]

    # the end: the checkpoint's point where every ledger reached it, else the minimum of all
    ends = [cp_end] if cp_end is not None else []
    ends += [s.at_point if s.at_point is not None else s.end for s in sinks.values() if s.exists and not s.follows]
    partitions = sorted({p for e in ends for p in e})
    end = {p: min(e.get(p, 0) for e in ends) for p in partitions}

    entries = next((ledgers[s.name].entries for s in written if not s.follows), [])
    first = first_offsets(entries)
    if checkpoint is not None and checkpoint.initial_offsets and topic in checkpoint.initial_offsets:
        for p, o in checkpoint.initial_offsets[topic].items():
            first.setdefault(p, o)
    for p in partitions:
        first.setdefault(p, (earliest or {}).get(p, 0))
    accepted = [
        {"partition": p, "start": e.start.get(p), "end": o, "sink": e.sink, "batch_id": e.batch_id}
        for e in entries
        if e.kind == EntryKind.LOSS
        for p, o in sorted(e.end.items())
        if e.start.get(p) != o
    ]

    since = from_json((watermark or {}).get("offsets")) if mode == AuditScope.SINCE_LAST and watermark else {}
    start = {p: min(max(since.get(p, first[p]), first[p]), end[p]) for p in partitions}
    not_retained: dict[int, tuple[int, int]] = {}
    for p in partitions:
        low = (earliest or {}).get(p)
        if low is not None and low > start[p]:
            not_retained[p] = (start[p], min(low, end[p]))
            start[p] = min(low, end[p])
    return CommittedPoint(
        topic=topic,
        mode=mode,
        checkpoint=cp_info,
        sinks=sinks,
        first=first,
        start=start,
        end=end,
        not_retained=not_retained,
        accepted_loss=accepted,
        problems=problems,
        running=running,
        watermark=watermark if since else None,
    )


def agreement_checks(point: CommittedPoint) -> list[Check]:
    """The checks decided before any row is read: do the checkpoint and the sink ledgers agree?"""
    titles = {
        "checkpoint_ledger_agreement": "Spark checkpoint and sink ledgers agree on the committed offsets",
        "ledger_agreement": "the sink ledgers agree with each other, batch by batch",
        "ledger_contiguity": "each ledger is contiguous (every batch starts where the previous ended)",
    }
    out = []
    for name, title in titles.items():
        found = point.problems.get(name, [])
        out.append(
            check(
                name,
                title,
                not found,
                expected="no disagreement",
                observed=len(found),
                detail="; ".join(found[:20]),
                samples=[{"problem": f} for f in found[:MAX_SAMPLES]],
                group=CheckGroup.LEDGERS,
            )
        )
    return out


def dump(obj: Any) -> str:
    return json.dumps(jsonable(obj), indent=2, sort_keys=False)
