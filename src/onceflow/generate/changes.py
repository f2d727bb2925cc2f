"""A change stream of one database table, for a Debezium pipeline (`schema.format: debezium`):
the records `onceflow produce` writes, and the table the database holds at the end.

The simulation keeps the table (key -> row, the pipeline's declared fields as the columns) and
writes each change as Debezium's PostgreSQL connector does (docs/cdc.md):

- a snapshot first: one `r` per initial row, all at the snapshot's position (one `source.lsn`,
  `source.snapshot` "first" / "true" / "last"), rows as they were before it;
- then one transaction per change, each at a greater position: `source.lsn` strictly increases
  and `source.ts_*` (the commit) and `ts_*` (the connector's processing) advance at least one
  millisecond, so every position `sequence_by` may name orders one key's changes strictly;
- `c` creates (a re-created key among them), `u` updates (`before` null: the default replica
  identity), `d` deletes (`before` the key columns alone) followed by the null-value tombstone,
  and primary-key changes: a delete of the old key, its tombstone and a create of the new key,
  all at one position;
- a `sequence_by` that names a row field (`version`, `updated_at`) needs the whole old row in
  `before` (PostgreSQL's `REPLICA IDENTITY FULL`), so it is written there; an int or long field
  takes a counter that grows over the whole table's life, a timestamp the commit time (re-creation
  included: docs/cdc.md, "Which sequence");
- the event-time field holds the commit time of the row's last change (`updated_at`).

The Kafka key is the row's key as JSON (`{"id": 7}`), so one key's records share a partition.

What is delivered differs from the log on purpose, as after a connector restart or a retrying
producer, without ever losing a change (so the fold of what is delivered is the table):

- duplicates: a run of the last records delivered (1 to 8 changes, with their tombstones) is
  delivered again, in the same order: `duplicate_ratio` is the share of the delivered changes
  that are such copies;
- out-of-order deliveries: two changes of one key (an update and the next update or delete, a
  create and its first update, a delete and the re-creation) delivered newer first:
  `out_of_order_ratio` is the share of the changes delivered after a newer change of their key;
- malformed records: `malformed_ratio` of the records, each judged by cdc/envelope.py with
  exactly its reason (`kinds()`); they change nothing in the table.

Why the fold of the delivered changes is the table: per key the fold keeps the greatest
(sequence, partition, offset), and a key's records share a partition, so the later delivery wins
a tie. Every change is delivered at least once; a copy or a late change only ever meets a change
of its key with a strictly greater sequence, except a delete with a row-field sequence, which
ties with the change before it: that pair is never swapped, and a copy run keeps the delivery
order of the records it repeats, so the delete's last copy still follows the change's.

Deterministic for a seed; plain Python (no Spark, no Kafka): generate/producer.py writes the records.
"""

from __future__ import annotations

import base64
import random
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from onceflow.cdc.spec import PLACEHOLDER, KeyedSpec
from onceflow.errors import ConfigError
from onceflow.generate.records import SEEDED_START, VALID, encode
from onceflow.schema import reasons as R
from onceflow.schema.model import INT_RANGE, Encoding, FieldSpec, Schema
from onceflow.schema.reasons import Reason
from onceflow.schema.reference import Judge, lookup, read_field, read_record
from onceflow.schema.values import FieldValues, timestamp_text

TOMBSTONE_KIND = "tombstone"  # a ChangeRecord's kind: the null-value record after a delete
# the positions of the envelope this generator writes (PostgreSQL's connector); others are refused
WRITTEN_POSITIONS = ("ts_ms", "ts_us", "ts_ns", "source.ts_ms", "source.ts_us", "source.ts_ns", "source.lsn")
DEBEZIUM_VERSION = "2.7.3.Final"
MAX_RUN = 8  # the most changes one redelivery repeats
_LAG = timedelta(microseconds=1_500)  # from the commit to the connector's processing
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MARGIN = 64  # bytes a malformed variant may add to an envelope
# the malformed kinds in the order a record is checked (schema/reasons.py)
_ORDER = (Reason.INVALID_JSON, *R.CDC_REASONS, *R.FIELD_REASONS, *R.RULE_REASONS.values())


@dataclass(frozen=True)
class ChangeRecord:
    """One record as delivered: its Kafka key and value (None: a tombstone), its `kind` (VALID for
    a change, TOMBSTONE_KIND, or the reason code a malformed record must get), the change's `op`,
    and whether it is a `duplicate` (a change delivered again) or `late` (delivered after a newer
    change of its key)."""

    key: bytes
    value: bytes | None
    kind: str
    op: str | None = None
    duplicate: bool = False
    late: bool = False


@dataclass(frozen=True)
class _Position:
    """Where a change is in the database's log, and when it was committed and processed."""

    lsn: int
    last_commit: int
    commit: datetime
    processed: datetime
    tx_id: int
    snapshot: str = "false"


@dataclass
class _Unit:
    """One change as first delivered: its record, and its tombstone after a delete."""

    records: list[ChangeRecord]


def _micros(t: datetime) -> int:
    return (t - _EPOCH) // timedelta(microseconds=1)


def written(f: FieldSpec, value: Any) -> Any:
    """A valid value (decimals, dates and timestamps as text) as the connector writes the column
    (the field's encoding): a `precise` decimal as base64 of its unscaled value, big-endian two's
    complement in as few bytes as Java's BigInteger.toByteArray; epoch counts as integers."""
    enc = f.read_as
    if value is None or enc is None or enc in (Encoding.ISO, Encoding.STRING):
        return value
    if enc == Encoding.DOUBLE:
        return float(value)
    if enc == Encoding.PRECISE:
        unscaled = int(Decimal(value).scaleb(f.ftype.scale))
        size = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8  # as BigInteger.toByteArray
        return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode("ascii")
    if enc == Encoding.EPOCH_DAYS:
        return (date.fromisoformat(value) - date(1970, 1, 1)).days
    micros = (datetime.fromisoformat(value.replace("Z", "+00:00")) - _EPOCH) // timedelta(microseconds=1)
    return {Encoding.EPOCH_MILLIS: micros // 1000, Encoding.EPOCH_MICROS: micros, Encoding.EPOCH_NANOS: micros * 1000}[
        enc
    ]


def _put(obj: dict, keys: tuple[str, ...], value: Any) -> None:
    """Sets a value at a path of object keys, making the objects on the way."""
    for key in keys[:-1]:
        obj = obj.setdefault(key, {})
    obj[keys[-1]] = value


def _drop(obj: dict, keys: tuple[str, ...]) -> None:
    for key in keys[:-1]:
        obj = obj[key]
    del obj[keys[-1]]


@dataclass(frozen=True)
class TableComparison:
    """A keyed table against the database's final table (ChangeStream.compare_table)."""

    rows: int  # live rows in the table
    expected_rows: int
    tombstones: int
    expected_deleted: int
    differ: dict[tuple, tuple]  # key -> (the table's row, the database's), where they differ
    deleted_apart: set[tuple]  # keys deleted on one side only
    twice: list[tuple]  # keys the table holds more than once

    @property
    def match(self) -> bool:
        return not (self.differ or self.deleted_apart or self.twice)


class ChangeStream:
    """`count` records of one table's change stream, in delivery order (iterate once); then
    `expected_rows()`, the table the database holds, and `counts`.

    snapshot_rows: the rows of the initial snapshot (default count/20, 1 to 500); the table is
    kept near that size (at least 20 rows). table: the table's name in `source`.
    """

    def __init__(
        self,
        schema: Schema,
        spec: KeyedSpec,
        seed: int | None = None,
        *,
        count: int,
        snapshot_rows: int | None = None,
        duplicate_ratio: float = 0.05,
        out_of_order_ratio: float = 0.05,
        malformed_ratio: float = 0.0,
        table: str = "customers",
        start: datetime | None = None,
        optional_ratio: float = 0.9,
    ):
        for name, ratio, top in (
            ("duplicate_ratio", duplicate_ratio, 1.0),
            ("malformed_ratio", malformed_ratio, 1.0),
            ("out_of_order_ratio", out_of_order_ratio, 0.5),  # at most one late change per pair
        ):
            if not 0 <= ratio < top:
                raise ConfigError(f"{name}={ratio} must be in [0, {top:g})")
        if count < 0:
            raise ConfigError(f"count={count} must be at least 0")
        if not spec.debezium:
            raise ConfigError("a change stream is made for schema.format: debezium")
        self.schema, self.spec, self.count = schema, spec, count
        self.duplicate_ratio, self.out_of_order_ratio = duplicate_ratio, out_of_order_ratio
        self.malformed_ratio, self.optional_ratio, self.table = malformed_ratio, optional_ratio, table
        self.rng = random.Random(seed)
        default_start = SEEDED_START if seed is not None else datetime.now(UTC)
        self.start = (start or default_start).astimezone(UTC)
        self.snapshot_rows = min(count, max(1, min(count // 20, 500)) if snapshot_rows is None else snapshot_rows)
        self._target = max(self.snapshot_rows, 20)
        self._keys = spec.keys
        self._key_names = {f.name for f in spec.keys}
        self._seq_fields = [p.field for p in spec.sequence if p.field is not None]
        self._seq_names = {f.name for f in self._seq_fields}
        self._full_identity = bool(self._seq_fields)  # `before` must hold the row's sequence
        self._check_sequence(count)
        self._judge = Judge(schema)
        probe = {f.name: FieldValues(f, random.Random(0)) for f in schema.fields}
        room = schema.max_bytes - self._probe_size(probe)
        if room < _MARGIN:
            raise ConfigError(
                f"schema.max_bytes {schema.max_bytes} leaves {room} bytes beside a Debezium envelope of only the "
                f"required fields; raise max_bytes so that changes and their malformed variants fit"
            )
        self.fields = {f.name: FieldValues(f, self.rng, None, room - _MARGIN) for f in schema.fields}
        self._breakers = {
            (f.name, rule): b for f in schema.fields for rule in f.rules() if (b := self.fields[f.name].breakers(rule))
        }
        self._kinds = self._possible_kinds()
        # the database
        self.rows: dict[tuple, dict[str, Any]] = {}  # key -> row: JSON-ready values, None for NULL
        self.deleted: set[tuple] = set()  # keys deleted and not created again
        self._ever_deleted: set[tuple] = set()
        self._n = 0  # keys drawn
        self._counter = 0  # the value of an int or long sequence field
        self._lsn = 23_000_000 + self.rng.randrange(1_000_000)
        self._last_commit = self._lsn
        self._tx = 700 + self.rng.randrange(1000)
        self._clock = self.start
        self._snapshot_at: _Position | None = None
        self._reads = 0
        self._recent: deque[_Unit] = deque(maxlen=MAX_RUN)
        self.counts: Counter = Counter()
        self._state = "new"

    # -- what it can make ----------------------------------------------------------------
    def kinds(self) -> tuple[str, ...]:
        """The malformed kinds this pipeline's records can be made with, in the order of the checks."""
        return self._kinds

    def _possible_kinds(self) -> tuple[str, ...]:
        can = {Reason.INVALID_JSON, *R.CDC_REASONS}
        plain = [f for f in self.schema.fields if f.name not in self._key_names | self._seq_names]
        if self.schema.event_time_position is None:
            can.discard(Reason.CDC_INVALID_EVENT_TIME)
        if not plain:
            can.discard(Reason.CDC_UNAVAILABLE_VALUE)
        if any(f.required for f in plain):
            can.add(Reason.MISSING_FIELD)
        if plain:
            can.add(Reason.WRONG_TYPE)
        if any(self.fields[f.name].invalid_values(self._sample(f)) for f in plain):
            can.add(Reason.INVALID_VALUE)
        can |= {R.RULE_REASONS[rule] for _, rule in self._breakers}
        return tuple(k for k in _ORDER if k in can)

    def _check_sequence(self, count: int) -> None:
        """Refuses, with the fix, a sequence this generator cannot make grow over the table's life."""
        for part in self.spec.sequence:
            if part.field is None and part.name not in WRITTEN_POSITIONS:
                raise ConfigError(
                    f"sinks.current.sequence_by {part.name!r}: the change stream generator writes PostgreSQL's "
                    f"envelope ({', '.join(WRITTEN_POSITIONS)}); name one of those to try the pipeline with it"
                )
        for f in self._seq_fields:
            base = f.ftype.base
            if f.name in self._key_names:
                raise ConfigError(f"sequence_by field {f.name!r} is a key field: a key's changes never order it")
            if base not in ("int", "long", "timestamp") or f.allowed is not None:
                raise ConfigError(
                    f"sequence_by field {f.name!r} ({f.type}{', allowed values' if f.allowed else ''}): the generator "
                    "makes growing values for int, long and timestamp fields only; sequence by source.lsn to try it"
                )
            if base != "timestamp" and self._version_value(f, count + 1) is None:
                raise ConfigError(
                    f"sequence_by field {f.name!r}: {count + 1} growing values do not fit within its min/max; "
                    "widen the bounds or produce fewer records"
                )

    # -- the stream ----------------------------------------------------------------------
    def __iter__(self) -> Iterator[ChangeRecord]:
        if self._state != "new":
            raise RuntimeError("a ChangeStream is read once: make a new one (same seed: same records)")
        self._state = "reading"
        while (left := self.count - self.counts["records"]) > 0:
            for rec in self._next(left):
                self.counts["records"] += 1
                yield rec
        self._state = "done"

    def _next(self, left: int) -> list[ChangeRecord]:
        """The next records, at most `left` of them."""
        if self.rng.random() < self.malformed_ratio:
            return [self._malformed()]
        if self._reads < self.snapshot_rows:
            key = self._fresh_key()
            if key is not None:
                return self._first([self._read(key)])
            self.snapshot_rows = self._reads  # every key is taken: a snapshot of fewer rows
        firsts = self.counts["changes"]
        share = self.duplicate_ratio / (1 - self.duplicate_ratio)  # copies per first delivery
        if self._recent and self.counts["duplicates"] < share * firsts and self.rng.random() < 0.5:
            return self._replay(left)
        if left >= 2 and self.counts["out_of_order"] < self.out_of_order_ratio * firsts and self.rng.random() < 0.5:
            return self._first(self._late_pair(left))
        return self._first(self._change(left))

    def _first(self, units: list[_Unit]) -> list[ChangeRecord]:
        """The first delivery of changes: counted, and remembered for a redelivery."""
        out = []
        for unit in units:
            self._recent.append(unit)
            for rec in unit.records:
                self.counts["tombstones" if rec.value is None else "changes"] += 1
                self.counts["out_of_order"] += rec.late
                out.append(rec)
        return out

    def _replay(self, left: int) -> list[ChangeRecord]:
        """The last changes delivered, delivered again in the same order (a connector restarted
        from an older offset): whole changes only, within `left` records."""
        run: list[_Unit] = []
        size = 0
        for unit in reversed(list(self._recent)[-self.rng.randint(1, MAX_RUN) :]):
            if size + len(unit.records) > left:
                break
            run.insert(0, unit)
            size += len(unit.records)
        out = [replace(rec, duplicate=rec.value is not None, late=False) for unit in run for rec in unit.records]
        for rec in out:
            self.counts["tombstones" if rec.value is None else "duplicates"] += 1
        return out

    # -- changes of the table ------------------------------------------------------------
    def _change(self, room: int) -> list[_Unit]:
        """One transaction of one change (two at one position for a key change), in at most `room` records."""
        size = len(self.rows)
        small = size < self._target
        weights = {"c": 0.25 if small else 0.08}
        if size:
            weights["u"] = 0.55
        if size and room >= 2:
            weights["d"] = 0.06 if small else 0.2
        if size and room >= 3:
            weights["k"] = 0.04
        if self.deleted:
            weights["rc"] = 0.05
        op = self.rng.choices(list(weights), list(weights.values()))[0]
        key = self._live_key() if size else None
        if op == "rc":
            return [self._create(self.rng.choice(sorted(self.deleted)))]
        if op == "c" or key is None:
            fresh = self._fresh_key()
            if fresh is not None:
                return [self._create(fresh)]
            if key is None:
                raise ConfigError("the generator found no key for a new row: declare keys with more values")
        if op == "d":
            return [self._delete(key)]
        if op == "k":
            return self._rekey(key)
        return [self._update(key)]

    def _late_pair(self, room: int) -> list[_Unit]:
        """Two changes of one key in the log's order, delivered newer first: the older is late."""
        forms = ["cu"]
        if self.rows:
            forms.append("uu")
            if room >= 3:
                forms.append("dc")  # a delete and the key created again
                if not self._full_identity:  # a row-field sequence: the delete ties with the change before
                    forms.append("ud")
        form = self.rng.choice(forms)
        if form == "cu":
            key = self._fresh_key()
            if key is None:
                return self._change(room)
            older = self._create(key)
        else:
            key = self._live_key()
            older = self._delete(key) if form == "dc" else self._update(key)
        newer = {"u": self._update, "c": self._create, "d": self._delete}[form[1]](key)
        older.records = [replace(rec, late=rec.value is not None) for rec in older.records]
        return [newer, older]

    def _read(self, key: tuple) -> _Unit:
        """One row of the initial snapshot, as it was before the snapshot."""
        if self._snapshot_at is None:
            self._snapshot_at = self._position(snapshot=True)
        self._reads += 1
        mark = "first" if self._reads == 1 else "last" if self._reads == self.snapshot_rows else "true"
        at = replace(self._snapshot_at, processed=self._clock + _LAG, snapshot=mark)
        self._clock += timedelta(microseconds=self.rng.randrange(50, 400))
        past = self.start - timedelta(days=self.rng.randrange(1, 400), microseconds=self.rng.randrange(86_400 * 10**6))
        row = self._new_row(key, past)
        self.rows[key] = row
        self.counts["snapshot_reads"] += 1
        return self._unit("r", key, None, row, at)

    def _create(self, key: tuple) -> _Unit:
        at = self._position()
        if key in self._ever_deleted and key not in self.rows:
            self.counts["recreations"] += 1
        row = self._new_row(key, at.commit)
        self._put_row(key, row)
        self.counts["creates"] += 1
        return self._unit("c", key, None, row, at)

    def _update(self, key: tuple) -> _Unit:
        at = self._position()
        old = self.rows[key]
        row = dict(old)
        plain = [f for f in self.schema.fields if f.name not in self._key_names | self._seq_names]
        plain = [f for f in plain if f.name != self.schema.event_time] or plain
        for f in self.rng.sample(plain, min(len(plain), self.rng.randint(1, 3))):
            row[f.name] = self._value(f, at.commit)
        self._stamp(row, at.commit)
        self.rows[key] = row
        self.counts["updates"] += 1
        return self._unit("u", key, old if self._full_identity else None, row, at)

    def _delete(self, key: tuple, at: _Position | None = None) -> _Unit:
        at = at or self._position()
        old = self.rows.pop(key)
        self.deleted.add(key)
        self._ever_deleted.add(key)
        self.counts["deletes"] += 1
        unit = self._unit("d", key, old if self._full_identity else self._key_row(key), None, at)
        unit.records.append(ChangeRecord(unit.records[0].key, None, TOMBSTONE_KIND))
        return unit

    def _rekey(self, key: tuple) -> list[_Unit]:
        """UPDATE of the primary key: a delete of the old key, its tombstone and a create of the
        new one, at one position."""
        new = self._fresh_key()
        if new is None:
            return [self._update(key)]
        at = self._position()
        row = dict(self.rows[key])
        gone = self._delete(key, at)
        for f, v in zip(self._keys, new, strict=True):
            row[f.name] = v
        self._stamp(row, at.commit)
        if new in self._ever_deleted:
            self.counts["recreations"] += 1
        self._put_row(new, row)
        self.counts["creates"] += 1
        self.counts["key_changes"] += 1
        return [gone, self._unit("c", new, None, row, at)]

    def _put_row(self, key: tuple, row: dict[str, Any]) -> None:
        self.rows[key] = row
        self.deleted.discard(key)

    # -- rows and keys -------------------------------------------------------------------
    def _live_key(self) -> tuple:
        return self.rng.choice(list(self.rows))

    def _fresh_key(self) -> tuple | None:
        """A key no live row has (a deleted one may come back), or None when none is found."""
        for _ in range(30):
            self._n += 1
            key = tuple(self.fields[f.name].unique(self.rng, self._n) for f in self._keys)
            if key not in self.rows:
                return key
        return None

    def _new_row(self, key: tuple, at: datetime) -> dict[str, Any]:
        row = {f.name: self._value(f, at) for f in self.schema.fields}
        row.update(zip((f.name for f in self._keys), key, strict=True))
        self._stamp(row, at)
        return row

    def _value(self, f: FieldSpec, at: datetime) -> Any:
        if not f.required and self.rng.random() >= self.optional_ratio:
            return None
        return self.fields[f.name].valid(self.rng, at)

    def _stamp(self, row: dict[str, Any], at: datetime) -> None:
        """The event time is the commit time; a sequence field grows with every change."""
        if self.schema.event_time_position is None:  # else the envelope's source.ts_ms is the event time
            row[str(self.schema.event_time)] = timestamp_text(at)
        for f in self._seq_fields:
            if f.ftype.base == "timestamp":
                row[f.name] = timestamp_text(at)
            else:
                self._counter += 1
                row[f.name] = self._version_value(f, self._counter)

    @staticmethod
    def _version_value(f: FieldSpec, n: int) -> int | None:
        lo, hi = INT_RANGE[f.ftype.base]
        first = max(lo, int(f.min) if f.min is not None else 1)
        top = min(hi, int(f.max) if f.max is not None else hi)
        value = first + n - 1
        return value if value <= top else None

    def _sample(self, f: FieldSpec) -> Any:
        return self.fields[f.name].valid(random.Random(0), self.start)

    def _key_row(self, key: tuple) -> dict[str, Any]:
        return {f.name: v for f, v in zip(self._keys, key, strict=True)}

    # -- Debezium's records --------------------------------------------------------------
    def _position(self, snapshot: bool = False) -> _Position:
        """The next transaction's place in the log: a greater lsn, a commit at least 1 ms later."""
        self._clock += timedelta(microseconds=self.rng.randrange(1_001, 30_000))
        self._last_commit = self._lsn
        self._lsn += self.rng.randrange(56, 4_096)
        self._tx += 1
        at = _Position(self._lsn, self._last_commit, self._clock, self._clock + _LAG, self._tx)
        return replace(at, snapshot="first") if snapshot else at

    def _image(self, row: dict[str, Any] | None) -> dict | None:
        """A row as Debezium writes it: every column of the row, at its declared path."""
        if row is None:
            return None
        obj: dict = {}
        by_name = {f.name: f for f in self.schema.fields}
        for name, value in row.items():
            _put(obj, by_name[name].keys, written(by_name[name], value))
        return obj

    def _envelope(self, op: str, before: dict | None, after: dict | None, at: _Position) -> dict:
        commit, processed = _micros(at.commit), _micros(at.processed)
        source = {
            "version": DEBEZIUM_VERSION,
            "connector": "postgresql",
            "name": "onceflow",
            "ts_ms": commit // 1000,
            "snapshot": at.snapshot,
            "db": "shop",
            "sequence": f'["{at.last_commit}","{at.lsn}"]',  # not read: two LSNs as text
            "ts_us": commit,
            "ts_ns": commit * 1000,
            "schema": "public",
            "table": self.table,
            "txId": at.tx_id,
            "lsn": at.lsn,
            "xmin": None,
        }
        return {
            "before": self._image(before),
            "after": self._image(after),
            "source": source,
            "transaction": None,
            "op": op,
            "ts_ms": processed // 1000,
            "ts_us": processed,
            "ts_ns": processed * 1000,
        }

    def _kafka_key(self, key: tuple) -> bytes:
        return encode(self._key_row(key))

    def _unit(self, op: str, key: tuple, before: dict | None, after: dict | None, at: _Position) -> _Unit:
        value = self._encode(self._envelope(op, before, after, at), VALID)
        return _Unit([ChangeRecord(self._kafka_key(key), value, VALID, op)])

    def _encode(self, envelope: dict, kind: str) -> bytes:
        value = encode(envelope)
        if len(value) > self.schema.max_bytes:
            raise ConfigError(
                f"a generated {kind} change event is {len(value)} bytes, more than schema.max_bytes "
                f"{self.schema.max_bytes}; raise max_bytes or shorten the fields' examples"
            )
        return value

    def _probe_size(self, probe: dict[str, FieldValues]) -> int:
        """The bytes of an envelope of a row of only the required fields (the whole old row in
        `before` too when the sequence needs it)."""
        rng = random.Random(0)
        row = {f.name: probe[f.name].valid(rng, self.start) if f.required else None for f in self.schema.fields}
        at = _Position(10**12, 10**12, self.start, self.start, 10**9)
        return len(encode(self._envelope("u", row if self._full_identity else None, row, at)))

    # -- malformed records ---------------------------------------------------------------
    def _malformed(self) -> ChangeRecord:
        """A record broken so that cdc/envelope.py gives it exactly its kind; the table is untouched."""
        kind = self.rng.choice(self._kinds)
        if self.rows:
            key = self._live_key()
            row = dict(self.rows[key])
        else:
            key = tuple(self.fields[f.name].unique(self.rng, self._n + 1) for f in self._keys)
            row = self._new_row(key, self._clock)
        at = _Position(self._lsn, self._last_commit, self._clock, self._clock + _LAG, self._tx)
        op = (
            "d"
            if kind == Reason.CDC_MISSING_BEFORE
            else self.rng.choice(["c", "u", "d"] if kind in _KEYED else ["c", "u"])
        )
        before = row if op == "d" or (op == "u" and self._full_identity) else None
        if op == "d" and not self._full_identity:
            before = self._key_row(key)
        envelope = self._envelope(op, before, None if op == "d" else row, at)
        self._break(kind, envelope, op)
        self.counts["malformed"] += 1
        self.counts[f"malformed:{kind}"] += 1
        value = self._encode(envelope, kind)
        if kind == Reason.INVALID_JSON:  # a prefix of the text: an object never closed
            cut = value.find(b"\\")
            value = value[: self.rng.randrange(1, cut if cut > 1 else len(value))]
        return ChangeRecord(self._kafka_key(key), value, kind)

    def _break(self, kind: str, envelope: dict, op: str) -> None:
        rng = self.rng
        image = envelope["before" if op == "d" else "after"]
        if kind == Reason.CDC_MISSING_OP:
            if rng.random() < 0.5:
                del envelope["op"]
            else:
                envelope["op"] = None
        elif kind == Reason.CDC_UNKNOWN_OP:
            envelope["op"] = rng.choice(["t", "t", "m", "x", "U", "", "delete"])
            if envelope["op"] == "t":  # Debezium's truncate: no row
                envelope["before"] = envelope["after"] = None
        elif kind in (Reason.CDC_MISSING_AFTER, Reason.CDC_MISSING_BEFORE):
            side = "before" if op == "d" else "after"
            if rng.random() < 0.3:
                del envelope[side]
            else:
                envelope[side] = rng.choice([None, None, [], "row", 7])
        elif kind in (Reason.CDC_MISSING_KEY, Reason.CDC_INVALID_KEY):
            f = rng.choice(self._keys)
            if kind == Reason.CDC_MISSING_KEY:
                self._absent(image, f)
            else:
                fv = self.fields[f.name]
                _put(image, f.keys, rng.choice(fv.wrong_types() + fv.invalid_values(lookup(image, f.keys))))
        elif kind in (Reason.CDC_MISSING_SEQUENCE, Reason.CDC_INVALID_SEQUENCE):
            part = rng.choice(self.spec.sequence)
            where = envelope if part.field is None else image
            if kind == Reason.CDC_MISSING_SEQUENCE:
                if rng.random() < 0.5:
                    _drop(where, part.path)
                else:
                    _put(where, part.path, None)
            elif part.field is None:
                v = lookup(where, part.path)
                _put(where, part.path, rng.choice([str(v), v + 0.5, True, 2**64, [v]]))
            else:
                fv = self.fields[part.field.name]
                _put(where, part.path, rng.choice(fv.wrong_types() + fv.invalid_values(lookup(where, part.path))))
        elif kind == Reason.CDC_INVALID_EVENT_TIME:
            position = self.schema.event_time_position or ""
            _put(envelope, tuple(position.split(".")), rng.choice([None, "x", 1.5, 2**62, [1]]))
        elif kind == Reason.CDC_UNAVAILABLE_VALUE:  # an unchanged TOASTed column, without the full old row
            plain = [f for f in self.schema.fields if f.name not in self._key_names | self._seq_names]
            _put(image, rng.choice(plain).keys, PLACEHOLDER)
            envelope["before"] = None
        elif kind != Reason.INVALID_JSON:
            self._break_row(kind, image)

    def _break_row(self, kind: str, image: dict) -> None:
        """One declared field of `after` broken: a field that is neither key nor sequence for the
        field kinds (those are the envelope's), any field for a rule."""
        rng = self.rng
        plain = [f for f in self.schema.fields if f.name not in self._key_names | self._seq_names]
        if kind == Reason.MISSING_FIELD:
            self._absent(image, rng.choice([f for f in plain if f.required]))
        elif kind == Reason.WRONG_TYPE:
            f = rng.choice(plain)
            _put(image, f.keys, rng.choice(self.fields[f.name].wrong_types()))
        elif kind == Reason.INVALID_VALUE:
            options = []
            for f in plain:
                current = lookup(image, f.keys)
                current = self._sample(f) if current is None else current
                options += [(f, v) for v in self.fields[f.name].invalid_values(current)]
            f, v = rng.choice(options)
            _put(image, f.keys, v)
        else:
            name, rule = rng.choice(sorted(k for k in self._breakers if R.RULE_REASONS[k[1]] == kind))
            f = next(f for f in self.schema.fields if f.name == name)
            _put(image, f.keys, written(f, rng.choice(self._breakers[(name, rule)])))

    def _absent(self, image: dict, f: FieldSpec) -> None:
        if self.rng.random() < 0.5:
            _drop(image, f.keys)
        else:
            _put(image, f.keys, None)

    # -- what the database holds ---------------------------------------------------------
    def _require_done(self) -> None:
        if self._state != "done":
            raise RuntimeError("the expected table is known once every record of the stream was read")

    def expected_rows(self) -> dict[tuple, dict[str, Any]]:
        """{key: row} the database holds at the end, typed as cdc/envelope.py reads them (Decimal,
        datetime, None for a NULL): what the fold of the delivered changes must give."""
        self._require_done()
        out = {}
        for row in self.rows.values():
            _, obj = read_record(encode(self._image(row)), 10**9)
            values = self._judge.judge_object(obj).values
            out[tuple(values[f.name] for f in self._keys)] = values
        return out

    def expected_deleted(self) -> set[tuple]:
        """The keys deleted and not created again (typed): the fold's tombstones."""
        self._require_done()
        out = set()
        for key in self.deleted:
            _, obj = read_record(encode(self._image(self._key_row(key))), 10**9)
            out.add(tuple(read_field(f, lookup(obj, f.keys))[1] for f in self._keys))
        return out

    def compare_table(self, rows: list[dict]) -> TableComparison:
        """The keyed table's rows (its declared fields and `_deleted`, as read) against the
        database's final table: the demo's summary and the tests' oracle."""
        keys = self.spec.key_names
        names = [f.name for f in self.schema.fields]
        held = Counter(tuple(r[k] for k in keys) for r in rows)
        live = {tuple(r[k] for k in keys): {n: r[n] for n in names} for r in rows if not r["_deleted"]}
        deleted = {tuple(r[k] for k in keys) for r in rows if r["_deleted"]}
        want, gone = self.expected_rows(), self.expected_deleted()
        differ = {k: (live.get(k), want.get(k)) for k in set(live) | set(want) if live.get(k) != want.get(k)}
        return TableComparison(
            rows=len(live),
            expected_rows=len(want),
            tombstones=len(deleted),
            expected_deleted=len(gone),
            differ=differ,
            deleted_apart=deleted ^ gone,
            twice=[k for k, n in held.items() if n > 1],
        )

    def expected_document(self) -> dict:
        """The expected table as JSON (`onceflow produce --expect FILE`): the rows as Debezium
        writes them, sorted by key, the deleted keys, and the counts of the stream."""
        self._require_done()
        names = self.spec.key_names
        return {
            "table": self.table,
            "keys": list(names),
            "sequence_by": [p.name for p in self.spec.sequence],
            "rows": [self._image(self.rows[k]) for k in sorted(self.rows)],
            "deleted_keys": [self._key_row(k) for k in sorted(self.deleted)],
            "counts": self.summary(),
        }

    def summary(self) -> dict[str, int]:
        """The counts of the stream: records delivered, changes first delivered (snapshot reads,
        creates, updates, deletes, key changes, re-creations), tombstones, duplicates, late
        (out-of-order) changes, malformed records and each malformed kind. A key change's delete
        and create are counted among the deletes and creates too."""
        names = (
            "records",
            "changes",
            "snapshot_reads",
            "creates",
            "updates",
            "deletes",
            "key_changes",
            "recreations",
            "tombstones",
            "duplicates",
            "out_of_order",
            "malformed",
        )
        out = {n: self.counts[n] for n in names}
        out.update(sorted((k, v) for k, v in self.counts.items() if k.startswith("malformed:")))
        return out


# the kinds whose broken change may be a delete: judged on `before`
_KEYED = (
    Reason.CDC_MISSING_OP,
    Reason.CDC_UNKNOWN_OP,
    Reason.CDC_MISSING_KEY,
    Reason.CDC_INVALID_KEY,
    Reason.CDC_MISSING_SEQUENCE,
    Reason.CDC_INVALID_SEQUENCE,
    Reason.INVALID_JSON,
)
