"""The reference fold: changes, in any order and with any duplicates, to the current state.

This is the oracle the audit and the tests compare the keyed table with; it stays small
enough to be checked by reading. The rules (docs/cdc.md):

1. Per key, the change with the greatest sequence wins, whatever order the changes arrive in.
2. Equal sequences: the later record in the log wins, the greater (partition, offset). One
   key's changes share a sequence when the sequence is coarser than the log (`source.ts_ms`:
   two changes in one millisecond; a row field that a delete repeats from the row it removes)
   or when a key changes and comes back at one position: Debezium writes a primary-key change
   as a delete of the old key and a create of the new one at the same position, so `1 -> 2 ->
   1` in one transaction holds delete(1), create(2), delete(2), create(1), and key 1 must exist
   at the end. One key's records are in one partition (Debezium keys them by the row's key),
   where the log's order is the database's; across partitions the rule is only deterministic.
3. A delete removes the row and leaves a tombstone holding its sequence: a change of that key
   with a smaller sequence arriving later loses to it, so it cannot bring the row back. A
   change with a greater sequence (the key created again) wins over the tombstone.
4. A snapshot read (`r`) is an upsert, like a create or an update.
5. (partition, offset) names one record: a duplicate is the same change at the same place, and
   folding it again changes nothing.

Winning is a maximum over (sequence, partition, offset), an order in which no two records are
equal, so the result does not depend on the order, the grouping or the repetition of the
changes: `fold_batches` (one batch after another, each folded into the state the previous ones
left, as a per-batch MERGE does) equals `fold` of all of them at once. The table must therefore
keep, per key, the winner's sequence and position beside the row, and per deleted key the
delete's: a tombstone is (sequence, partition, offset), not the sequence alone.

The fold keeps every tombstone; the table keeps them for `tombstone_retention` (docs/cdc.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from onceflow.cdc.envelope import Change

Located = tuple[Change, int, int]  # a change, the partition and the offset of its record


@dataclass(frozen=True)
class Version:
    """The change that holds a key now, and where its record is in the log."""

    change: Change
    partition: int
    offset: int

    @property
    def order(self) -> tuple:
        """What wins: the greater sequence, then the later record in the log."""
        return (self.change.sequence, self.partition, self.offset)


@dataclass(frozen=True)
class State:
    """Per key, the winning change: the current rows and the tombstones of deleted keys."""

    versions: dict[tuple, Version] = field(default_factory=dict)

    @property
    def rows(self) -> dict[tuple, dict[str, Any] | None]:
        """{key: row} of the keys whose winner is not a delete: the current-state table."""
        return {k: v.change.row for k, v in self.versions.items() if not v.change.deleted}

    @property
    def tombstones(self) -> dict[tuple, tuple]:
        """{key: sequence} of the keys whose winner is a delete."""
        return {k: v.change.sequence for k, v in self.versions.items() if v.change.deleted}


def fold_into(state: State, changes: Iterable[Located]) -> State:
    """`state` with `changes` applied: per key, the greater of the version held and each change."""
    versions = dict(state.versions)
    for change, partition, offset in changes:
        new = Version(change, partition, offset)
        held = versions.get(change.key)
        if held is None or new.order > held.order:
            versions[change.key] = new
    return State(versions)


def fold(changes: Iterable[Located]) -> State:
    """The current state after all of `changes`, in any order, duplicates included."""
    return fold_into(State(), changes)


def fold_batches(batches: Iterable[Iterable[Located]]) -> State:
    """The batches applied one after another, each to the state the previous ones left: the
    same as `fold` of all their changes at once."""
    state = State()
    for batch in batches:
        state = fold_into(state, batch)
    return state
