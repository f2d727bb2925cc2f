"""The keyed table (sinks.current) vs an independent replay of its bronze changes.

The follower MERGEs each bronze batch's newest change per key into the keyed table
(spark/follower.py), so at every committed point the table must hold, per key, what the
reference fold (cdc/fold.py) of every bronze change the table's ledger covers gives: the row of
the winning change, or a tombstone for a deleted key, with the winner's `_sequence`,
`_partition` and `_offset`. This check shares no code with the MERGE: both tables are read with
delta-rs (not Spark, whose reader the job uses), each bronze row becomes a `cdc.envelope.Change`
in plain Python, and `cdc.fold.fold` folds them all at once (not batch by batch, as the job does).

Which bronze rows: as for the aggregates (audit/aggregates.py), every bronze row below the keyed
table's ledger end, from where the pipeline started reading (`point.first`): offsets, not batch
ids, decide, as the follower's floors do, so after bronze was restored from an older copy and a
new generation re-read what it lost, the rows it re-read stand for the ones the table merged.
LOSS entries hold no rows. The bronze and keyed tables are read at the versions the committed
point pinned.

Three checks (`reconcile.Check`):

- `current_rows`: the table's live rows (`_deleted` false) and the fold's rows have the same
  keys, the same declared field values and the same winner. A key the fold deleted but the table
  holds is `resurrected`, unless retention explains it: after its tombstone was purged
  (`tombstone_retention`, docs/cdc.md#tombstones-and-retention) a late older change of the key
  is applied as if it had never been deleted; such a row (a real bronze change of that key,
  taken by the table after the tombstone could have been purged) is counted as `revived`,
  informational.
- `current_tombstones`: each tombstone row of the table is a fold tombstone with the same winner,
  its other declared fields NULL. A fold tombstone missing from the table is `purged`
  (informational) when its delete reached bronze more than the retention before the table's
  pinned commit, else it is missing (purged too early, or never written).
- `current_keys_unique`: no key has two rows.

A key is judged by one check: `current_rows` for the keys live on either side, the tombstone
check for the others. Timestamps compared across the two tables allow CLOCK_SKEW.

Scale: the fold is plain Python over the bronze rows (only the columns it needs, read with
delta-rs into pyarrow), and the keyed table is read whole; fine for the suite's tables and a
modest production table, a full pass each audit (an incremental audit compares everything too).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from onceflow import tables
from onceflow.audit.sink_tables import open_table, read_table
from onceflow.cdc.envelope import Change
from onceflow.cdc.fold import State, Version, fold
from onceflow.cdc.spec import KeyedSpec
from onceflow.config import Pipeline
from onceflow.reconcile import MAX_RANGES, MAX_SAMPLES, Check, CheckGroup, CheckStatus, CommittedPoint, check, jsonable
from onceflow.sink_kinds import SinkName

CLOCK_SKEW = timedelta(minutes=1)  # between the bronze writer's clock and the MERGE's (purge ages)
ROWS_TITLE = "keyed table = fold of its bronze changes (live rows: keys, values, winners)"
TOMBSTONES_TITLE = "keyed table's tombstones = the fold's deletes (purged ones past tombstone_retention aside)"
UNIQUE_TITLE = "keyed table holds each key once"


class Mismatch(StrEnum):
    """What is wrong with a key (a finding's `kind`)."""

    DIFFERS = "differs"  # both sides hold the key, with other values or another winner
    MISSING = "missing_in_table"  # the fold holds it, the table does not
    DELETED_IN_TABLE = "deleted_in_table"  # the fold holds a row, the table a tombstone
    RESURRECTED = "resurrected"  # the fold deleted the key, the table holds a row
    NOT_IN_BRONZE = "not_in_bronze"  # the table holds a key no bronze change has
    UNUSABLE = "unusable_bronze_row"  # a bronze change without its key, op or sequence
    DUPLICATE = "duplicate_key"  # the table holds the key more than once


# (a change, its partition, its offset, when its bronze row was written)
BronzeChange = tuple[Change, int, int, datetime | None]


@dataclass
class CurrentReconciliation:
    checks: list[Check]
    live_rows: int = 0  # keys the fold holds a row for
    tombstones: int = 0  # keys the fold deleted
    table_rows: int = 0
    purged: int = 0  # fold tombstones the table purged after tombstone_retention (informational)
    revived: int = 0  # keys brought back by a late older change after their tombstone's purge
    findings: list[dict] = field(default_factory=list)  # one per offending key, for the GX findings suite


# -- bronze rows and table rows as the fold sees them ----------------------------------------
def bronze_change(row: dict, spec: KeyedSpec, names: Sequence[str]) -> Change | None:
    """One bronze row as the change it records; None when it lacks its key, op or sequence.
    Debezium's rows hold `_op` and `_sequence`; a plain event's sequence is made of its fields
    and it is a delete when `delete_when` holds."""
    key = tuple(row.get(k) for k in spec.key_names)
    if spec.debezium:
        op = row.get("_op")
        struct = row.get("_sequence") or {}
        sequence = tuple(struct.get(p.column) for p in spec.sequence)
    else:
        d = spec.delete_when
        op = "d" if spec.delete_when.matches(row.get(d.name)) else "u"
        sequence = tuple(row.get(p.name) for p in spec.sequence)
    if op is None or any(v is None for v in key) or any(v is None for v in sequence):
        return None
    values = None if op == "d" else {n: row.get(n) for n in names}
    return Change(op, key, values, sequence)


def table_order(row: dict, spec: KeyedSpec) -> tuple:
    """A keyed-table row's winner as fold.Version.order: (sequence, partition, offset)."""
    struct = row.get("_sequence") or {}
    return (tuple(struct.get(p.column) for p in spec.sequence), row.get("_partition"), row.get("_offset"))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _older(a: tuple, b: tuple) -> bool:
    """a < b, False when they cannot be compared (a NULL in a hand-edited row)."""
    try:
        return a < b
    except TypeError:
        return False


def _purgeable(deleted_at: datetime | None, by: datetime | None, retention: timedelta) -> bool:
    """Whether a tombstone whose delete reached bronze at `deleted_at` may have been purged by
    `by`: the table purges tombstones it took more than `retention` ago (it took them after
    bronze had them). Unknown times give the benefit of the doubt."""
    if deleted_at is None or by is None:
        return True
    return deleted_at < by - retention + CLOCK_SKEW


# -- the comparison, a pure function ----------------------------------------------------------
class _Comparison:
    def __init__(
        self,
        spec: KeyedSpec,
        names: Sequence[str],
        changes: Iterable[BronzeChange],
        table_rows: Iterable[dict],
        retention: timedelta,
        as_of: datetime | None,
    ):
        self.spec, self.names, self.retention, self.as_of = spec, list(names), retention, as_of
        self.unusable = 0  # bronze rows without their key, op or sequence: no change to fold
        self.unusable_samples: list[dict] = []
        located = []
        self.at: dict[tuple, Change] = {}  # (partition, offset) -> the change its bronze row records
        self.written: dict[tuple, datetime | None] = {}  # (partition, offset) -> its bronze row's _ingested_at
        for change, partition, offset, written in changes:
            located.append((change, partition, offset))
            self.at[(partition, offset)] = change
            self.written[(partition, offset)] = written
        self.state: State = fold(located)
        self.rows: dict[tuple, list[dict]] = {}
        for row in table_rows:
            self.rows.setdefault(tuple(row.get(k) for k in spec.key_names), []).append(row)
        self.findings: list[dict] = []

    # one side each, for the samples
    def expected(self, v: Version | None) -> dict | None:
        if v is None:
            return None
        c = v.change
        values = c.row if c.row is not None else dict(zip(self.spec.key_names, c.key, strict=True))
        return jsonable(
            {
                **values,
                "_op": c.op,
                "_sequence": {p.column: s for p, s in zip(self.spec.sequence, c.sequence, strict=True)},
                "_partition": v.partition,
                "_offset": v.offset,
                "_deleted": c.deleted,
            }
        )

    def observed(self, row: dict | None) -> dict | None:
        if row is None:
            return None
        return jsonable({c: row.get(c) for c in [*self.names, *tables.CURRENT_OWN] if c in row})

    def sample(self, key: tuple, kind: str, v: Version | None, row: dict | None) -> dict:
        return {
            "key": jsonable(dict(zip(self.spec.key_names, key, strict=True))),
            "kind": kind,
            "fold": self.expected(v),
            "table": self.observed(row),
        }

    def finding(self, name: str, key: tuple, kind: str) -> None:
        if len(self.findings) < MAX_RANGES:
            self.findings.append(
                {
                    "check": "current",
                    "partition": None,
                    "start": None,
                    "end": None,
                    "count": 1,
                    "key": " / ".join(str(k) for k in key),
                    "kind": f"{name}: {kind}",
                }
            )

    def wrong(
        self, name: str, key: tuple, kind: str, v: Version | None, row: dict | None, kinds: dict, bad: list
    ) -> None:
        """A key check `name` finds wrong: counted by kind, a finding, and a sample while there is room."""
        kinds[kind] = kinds.get(kind, 0) + 1
        self.finding(name, key, kind)
        if len(bad) < MAX_SAMPLES:
            bad.append(self.sample(key, kind, v, row))

    # what one row is
    def same_winner(self, v: Version, row: dict) -> bool:
        return table_order(row, self.spec) == v.order

    def same_values(self, v: Version, row: dict) -> bool:
        if v.change.row is None:  # a tombstone: keys set, the other declared fields NULL
            keys = set(self.spec.key_names)
            return all(row.get(n) is None for n in self.names if n not in keys)
        return all(_same(v.change.row.get(n), row.get(n)) for n in self.names)

    def revived(self, v: Version, row: dict) -> bool:
        """Retention explains the row: the fold's winner is a delete whose tombstone may have been
        purged before the table took `row`, a real bronze change of the key older than that delete
        (docs/cdc.md#tombstones-and-retention)."""
        if not v.change.deleted or not _older(table_order(row, self.spec), v.order):
            return False
        partition, offset = row.get("_partition"), row.get("_offset")
        change = self.at.get((partition, offset))
        if change is None or change.key != v.change.key or change.deleted != bool(row.get("_deleted")):
            return False
        real = Version(change, int(partition or 0), int(offset or 0))  # found in bronze: not NULL
        if not self.same_winner(real, row) or not self.same_values(real, row):
            return False
        return _purgeable(self.written.get((v.partition, v.offset)), row.get("_changed_at"), self.retention)

    # the checks
    def run(self) -> CurrentReconciliation:
        versions = self.state.versions
        live = {k for k, v in versions.items() if not v.change.deleted}
        gone = {k for k, v in versions.items() if v.change.deleted}
        first = {k: rs[0] for k, rs in self.rows.items()}
        table_live = {k for k, r in first.items() if not r.get("_deleted")}
        table_gone = {k for k, r in first.items() if r.get("_deleted")}
        out = CurrentReconciliation(
            checks=[],
            live_rows=len(live),
            tombstones=len(gone),
            table_rows=sum(len(rs) for rs in self.rows.values()),
        )

        # live rows: every key live on either side
        bad: list[dict] = []
        kinds: dict[str, int] = {}
        for key in sorted(live | table_live, key=_sort_key):
            v, row = versions.get(key), first.get(key)
            kind = None
            if key in live and key in table_live:
                assert v is not None and row is not None
                if not (self.same_winner(v, row) and self.same_values(v, row)):
                    kind = Mismatch.DIFFERS
            elif key in live:
                kind = Mismatch.DELETED_IN_TABLE if key in table_gone else Mismatch.MISSING
            else:  # live in the table only
                assert row is not None
                if v is None:
                    kind = Mismatch.NOT_IN_BRONZE
                elif self.revived(v, row):
                    out.revived += 1
                else:
                    kind = Mismatch.RESURRECTED
            if kind:
                self.wrong("current_rows", key, kind, v, row, kinds, bad)
        if self.unusable:
            kinds[Mismatch.UNUSABLE] = self.unusable
            bad = (self.unusable_samples + bad)[:MAX_SAMPLES]
        failed = sum(kinds.values())
        notes = [f"{n} {k.replace('_', ' ')}" for k, n in sorted(kinds.items())]
        if out.revived:
            notes.append(
                f"{out.revived} key(s) revived by a late older change after their tombstone's "
                "retention (informational: docs/cdc.md#tombstones-and-retention)"
            )
        out.checks.append(
            check(
                "current_rows",
                ROWS_TITLE,
                not failed,
                expected={"rows": len(live), "differing": 0},
                observed={"rows": len(table_live), "differing": failed, **kinds, "revived": out.revived},
                samples=bad,
                detail="; ".join(notes) + (": " + _samples_text(bad) if failed else ""),
                group=CheckGroup.CURRENT,
            )
        )

        # tombstones: the keys deleted on either side that are live on neither
        bad, kinds = [], {}
        judged = live | table_live
        for key in sorted((gone | table_gone) - judged, key=_sort_key):
            v, row = versions.get(key), first.get(key)
            kind = None
            if key in gone and key in table_gone:
                assert v is not None and row is not None
                if not (self.same_winner(v, row) and self.same_values(v, row)):
                    if self.revived(v, row):
                        out.revived += 1
                    else:
                        kind = Mismatch.DIFFERS
            elif key in gone:  # not in the table
                assert v is not None
                if _purgeable(self.written.get((v.partition, v.offset)), self.as_of, self.retention):
                    out.purged += 1
                else:
                    kind = Mismatch.MISSING
            else:
                kind = Mismatch.NOT_IN_BRONZE
            if kind:
                self.wrong("current_tombstones", key, kind, v, row, kinds, bad)
        failed = sum(kinds.values())
        notes = [f"{n} {k.replace('_', ' ')}" for k, n in sorted(kinds.items())]
        if Mismatch.MISSING in kinds:
            notes.append(
                "a missing tombstone's delete reached bronze less than tombstone_retention before the "
                "table's pinned commit: it cannot have been purged yet"
            )
        if out.purged:
            notes.append(f"{out.purged} tombstone(s) purged past tombstone_retention (informational)")
        out.checks.append(
            check(
                "current_tombstones",
                TOMBSTONES_TITLE,
                not failed,
                expected={"tombstones": len(gone - judged), "differing": 0},
                observed={
                    "tombstones": len(table_gone - judged),
                    "purged": out.purged,
                    "differing": failed,
                    **kinds,
                },
                samples=bad,
                detail="; ".join(notes) + (": " + _samples_text(bad) if failed else ""),
                group=CheckGroup.CURRENT,
            )
        )

        # each key once
        twice = {k: rs for k, rs in self.rows.items() if len(rs) > 1}
        for key in sorted(twice, key=_sort_key)[:MAX_RANGES]:
            self.finding("current_keys_unique", key, Mismatch.DUPLICATE)
        samples = [
            {
                "key": jsonable(dict(zip(self.spec.key_names, key, strict=True))),
                "rows": len(rs),
                "table": [self.observed(r) for r in rs[:MAX_SAMPLES]],
            }
            for key, rs in sorted(twice.items(), key=lambda kv: _sort_key(kv[0]))[:MAX_SAMPLES]
        ]
        extra = sum(len(rs) - 1 for rs in twice.values())
        out.checks.append(
            check(
                "current_keys_unique",
                UNIQUE_TITLE,
                not twice,
                expected=0,
                observed={"keys": len(twice), "extra_rows": extra},
                samples=samples,
                detail=(
                    f"{len(twice)} key(s) held by more than one row: "
                    + ", ".join(" / ".join(str(k) for k in key) for key in sorted(twice, key=_sort_key)[:MAX_SAMPLES])
                    if twice
                    else ""
                ),
                group=CheckGroup.CURRENT,
            )
        )
        out.findings = self.findings
        return out


def _sort_key(key: tuple) -> tuple:
    """Keys in a stable order, whatever their types (a NULL in a hand-edited row included)."""
    return tuple((v is None, str(type(v).__name__), v if v is not None else 0) for v in key)


def _samples_text(samples: list[dict]) -> str:
    """'differs 7; missing_in_table 9'; an unusable bronze row by its place in the log."""

    def where(s: dict) -> str:
        if s.get("key") is None:
            b = s.get("bronze") or {}
            return f"at partition {b.get('_partition')} offset {b.get('_offset')}"
        return " / ".join(str(v) for v in s["key"].values())

    return "; ".join(f"{s['kind']} {where(s)}" for s in samples)


def compare(
    spec: KeyedSpec,
    names: Sequence[str],
    bronze_rows: Iterable[dict],
    table_rows: Iterable[dict],
    retention_seconds: float,
    as_of: datetime | None = None,
) -> CurrentReconciliation:
    """The three checks, from the bronze rows the table's ledger covers (declared fields,
    Debezium's `_op`/`_sequence`, `_partition`, `_offset`, `_ingested_at`) and the keyed table's
    rows (tables.current_columns). `as_of`: when the table's pinned commit was made (purged
    tombstones are judged against it; None: any tombstone may have been purged)."""
    changes: list[BronzeChange] = []
    unusable: list[dict] = []
    for row in bronze_rows:
        change = bronze_change(row, spec, names)
        if change is None:
            unusable.append(row)
            continue
        changes.append((change, row["_partition"], row["_offset"], row.get("_ingested_at")))
    comparison = _Comparison(spec, names, changes, table_rows, timedelta(seconds=retention_seconds), as_of)
    comparison.unusable = len(unusable)
    comparison.unusable_samples = [
        {"key": None, "kind": Mismatch.UNUSABLE, "bronze": jsonable(r)} for r in unusable[:MAX_SAMPLES]
    ]
    return comparison.run()


# -- reading the tables with delta-rs (audit/sink_tables.py) ------------------------------------------
def read_bronze(
    path: str, version: int | None, ranges: dict[int, tuple[int, int]], spec: KeyedSpec, names: Sequence[str]
) -> list[dict]:
    """The bronze rows in `ranges` (per partition [start, end)), the columns the fold needs."""
    if not ranges:
        return []
    cols = [*names, *(["_op", "_sequence"] if spec.debezium else []), "_partition", "_offset", "_ingested_at"]
    return read_table(path, version, ranges, cols).to_pylist()


def read_current(path: str, version: int | None, columns: Sequence[str]) -> list[dict]:
    """The keyed table's rows at a version."""
    return read_table(path, version, None, list(columns)).to_pylist()


def commit_time(path: str, version: int | None) -> datetime | None:
    """When the table's commit `version` (None: the newest) was made, from its history; None
    when the history no longer holds it."""
    from datetime import UTC

    try:
        commits = open_table(path, None).history()  # a version-pinned table's history is off by one (delta-rs 1.6)
    except Exception:  # the table is gone meanwhile: judged without the time
        return None
    for c in commits:
        if (version is None or c.get("version") == version) and c.get("timestamp") is not None:
            return datetime.fromtimestamp(c["timestamp"] / 1000, tz=UTC)
    return None


def reconcile_current(pipeline: Pipeline, point: CommittedPoint) -> CurrentReconciliation:
    """The keyed table (its pinned version) vs the fold of the bronze changes below its ledger's
    end (bronze's pinned version); SKIPPED checks when there is no keyed table to compare."""
    sink, spec = pipeline.sinks.current, pipeline.keyed
    view = point.sinks.get(SinkName.CURRENT)
    if sink is None or spec is None:
        skipped = Check(
            "current_rows",
            ROWS_TITLE,
            CheckStatus.SKIPPED,
            detail="the pipeline has no sinks.current",
            group=CheckGroup.CURRENT,
        )
        return CurrentReconciliation([skipped])
    if view is None or not view.exists:
        why = "the keyed table does not exist yet" if view is not None else "the committed point has no keyed table"
        return CurrentReconciliation(
            [Check("current_rows", ROWS_TITLE, CheckStatus.SKIPPED, detail=why, group=CheckGroup.CURRENT)]
        )
    names = pipeline.schema.names
    covered = {p: (point.first.get(p, 0), e) for p, e in view.end.items() if point.first.get(p, 0) < e}
    bronze_view = point.sinks.get(SinkName.BRONZE)
    bronze = read_bronze(
        pipeline.resolve(pipeline.sinks.bronze.path),
        bronze_view.version if bronze_view else None,
        covered,
        spec,
        names,
    )
    path = pipeline.resolve(sink.path)
    table = read_current(path, view.version, list(tables.current_columns(pipeline.schema, spec)))
    return compare(spec, names, bronze, table, sink.tombstone_retention_seconds, commit_time(path, view.version))
