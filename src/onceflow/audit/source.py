"""The committed source records of the audited ranges, each judged by the audit's own judge.

Kafka's committed records are read by a plain read_committed consumer (confluent-kafka, by
partition range: kafka/consume.range_batches; no JVM) and judged by schema/reference.Judge (not the
job's Spark validation, whose bugs it would share), by the declaration in force when each batch was
written: what the sinks should hold.

A Debezium pipeline's records (`schema.format: debezium`) are parsed by the reference envelope
parser, cdc/envelope.Envelope: a change comes out as its bronze row (`_op` and `_sequence` beside
the declared fields, a delete's row holding its key and sequence fields only), a malformed record
with its reason, and Debezium's tombstone (a null value: a no-op) with TOMBSTONE_REASON, a marker
that is no quarantine reason: such a record belongs in no sink. The declaration in force per batch
(`declaration_segments`) is the schema alone: an earlier declaration's records are parsed with its
fields and today's keys and sequence_by.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from onceflow import tables
from onceflow.audit.arrow_types import arrow_type
from onceflow.cdc.spec import KeyedSpec
from onceflow.config import Pipeline
from onceflow.kafka.client import source_client
from onceflow.kafka.consume import range_batches
from onceflow.state.unprocessable import Unprocessable

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    import pyarrow as pa


RAW_COLUMNS = ("_key", "_value", "_topic", "_partition", "_offset")  # a record's raw key, value and coordinates
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset")  # the same, as a Kafka batch names them
SOURCE_DDL = "_key BINARY, _value BINARY, _topic STRING, _partition INT, _offset BIGINT, reason STRING"
# the `reason` of a Debezium tombstone (a null value after a delete): a no-op, expected in neither
# bronze nor quarantine. Not a quarantine reason: a consumer that keeps `reason IS NULL` drops it.
TOMBSTONE_REASON = "_tombstone"
_POSITION_ARROW = {"BIGINT": "int64", "STRING": "string"}


def _sequence_arrow_type(keyed: KeyedSpec):
    """The `_sequence` struct in Arrow, as tables.bronze_columns declares it (KeyedSpec.sequence_ddl):
    a field's type, or a position's: BIGINT, DECIMAL(38,0), STRING."""
    import pyarrow as pa

    def part_type(part):
        if part.field is not None:
            return arrow_type(part.field.ftype)
        if part.sql == "DECIMAL(38,0)":
            return pa.decimal128(38, 0)
        return getattr(pa, _POSITION_ARROW[part.sql])()

    return pa.struct([pa.field(p.column, part_type(p)) for p in keyed.sequence])


def change_values(change, keyed: KeyedSpec, names: list[str]) -> dict:
    """A Debezium change's bronze row: the declared fields (a delete's: its key fields and the
    sequence's field parts, read from `before`; the others None), `_op`, and `_sequence` (part
    column -> value; a DIGITS position as a Decimal, bronze's DECIMAL(38,0))."""
    from decimal import Decimal

    from onceflow.cdc.spec import DIGITS

    if change.row is not None:
        values = {n: change.row.get(n) for n in names}
    else:
        values = dict.fromkeys(names)
        values |= dict(zip(keyed.key_names, change.key, strict=True))
        values |= {p.field.name: v for p, v in zip(keyed.sequence, change.sequence, strict=True) if p.field}
    sequence = {
        p.column: Decimal(v) if p.position == DIGITS and v is not None else v
        for p, v in zip(keyed.sequence, change.sequence, strict=True)
    }
    out = {**values, "_op": change.op, "_sequence": sequence}
    if change.event_time is not None:  # the envelope's event time (schema.event_time_position)
        out["_event_time"] = change.event_time
    return out


Segments = list[tuple[str, dict[int, tuple[int, int]]]]
T = TypeVar("T")


def _per_declaration(
    schema_json: str, segments: Segments, make: Callable[[str], T]
) -> tuple[T, Callable[[int, int], T]]:
    """What judges a record, made once per declaration (`make`: declaration JSON -> judge): the
    current one, and a lookup of the one in force at a record's (partition, offset)."""
    made = {schema_json: make(schema_json)}
    for declared, _ in segments:
        if declared not in made:
            made[declared] = make(declared)
    current = made[schema_json]

    def at(p: int, o: int) -> T:
        for declared, spans in segments:
            span = spans.get(p)
            if span and span[0] <= o < span[1]:
                return made[declared]
        return current

    return current, at


def _moved_by_hand(unprocessable: dict[int, list[tuple[int, int]]]) -> Callable[[int, int], bool]:
    """Whether an operator moved the record at (partition, offset) to quarantine (unprocessable.json)."""
    return lambda p, o: any(a <= o < b for a, b in unprocessable.get(p, ()))


def _judged(
    schema_json: str,
    segments: Segments,
    unprocessable: dict[int, list[tuple[int, int]]],
    cdc: tuple[list[str], list[str]] | None = None,
    framed: tuple[dict, str, str] | None = None,
):
    """Each Kafka record judged by schema/reference.Judge, by the
    declaration in force when its batch was written (`segments`: declaration → offset ranges;
    records outside them: the current one). Values come out in the current bronze types.
    A record an operator moved to quarantine by hand (`unprocessable`: per partition, offset
    ranges) is not judged: it belongs in quarantine as `unprocessable`.

    `cdc` (a Debezium pipeline's keys and sequence_by): each record parsed by cdc/envelope.Envelope
    instead, its bronze row with `_op` and `_sequence` (tables.bronze_columns' DDL); a tombstone
    comes out with TOMBSTONE_REASON and no values.

    `framed` (a registry pipeline's settings, password included, its subject and its format): each
    record judged by schema/avro_reference.AvroJudge (Avro: decoded with fastavro),
    schema/protobuf_reference.ProtobufJudge (Protobuf: its own wire decoder) or
    schema/framed.FramedJsonJudge (JSON Schema), its schema asked of the registry the pipeline
    names today."""
    if cdc is not None:
        return _parsed(schema_json, segments, unprocessable, cdc, framed)

    def run(batches):
        import pyarrow as pa

        from onceflow.registry import Registry
        from onceflow.schema.avro_reference import AvroJudge
        from onceflow.schema.framed import FramedJsonJudge
        from onceflow.schema.model import AVRO, PROTOBUF, RegistrySpec, Schema
        from onceflow.schema.protobuf_reference import ProtobufJudge
        from onceflow.schema.reasons import Reason
        from onceflow.schema.reference import Judge, Verdict

        schema = Schema.model_validate_json(schema_json)

        def make(declared: str) -> Judge | AvroJudge | FramedJsonJudge | ProtobufJudge:
            if framed is None:
                return Judge(Schema.model_validate_json(declared))
            settings, subject, fmt = framed
            kinds: dict[str, type[AvroJudge | FramedJsonJudge | ProtobufJudge]] = {
                AVRO: AvroJudge,
                PROTOBUF: ProtobufJudge,
            }
            return kinds.get(fmt, FramedJsonJudge)(
                Schema.model_validate_json(declared), Registry(RegistrySpec(**settings)), subject
            )

        current, judge_for = _per_declaration(schema_json, segments, make)
        moved = Verdict(Reason.UNPROCESSABLE, {f.name: None for f in schema.fields})
        by_hand = _moved_by_hand(unprocessable)

        for batch in batches:
            values = batch.column("value").to_pylist()
            if not segments and not unprocessable:
                verdicts = [current.judge(v) for v in values]
            else:
                where = zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(), strict=True)
                verdicts = [
                    moved if by_hand(p, o) else judge_for(p, o).judge(v)
                    for (p, o), v in zip(where, values, strict=True)
                ]
            arrays = [
                pa.array([v.values.get(f.name) for v in verdicts], type=arrow_type(f.ftype)) for f in schema.fields
            ]
            arrays += [batch.column(c) for c in KAFKA_COLUMNS]
            arrays.append(pa.array([v.reason for v in verdicts], type=pa.string()))
            yield pa.RecordBatch.from_arrays(
                arrays, names=[*schema.names, "_key", "_value", "_topic", "_partition", "_offset", "reason"]
            )

    return run


def _parsed(
    schema_json: str,
    segments: Segments,
    unprocessable: dict[int, list[tuple[int, int]]],
    cdc: tuple[list[str], list[str]],
    framed: tuple[dict, str, str] | None = None,
):
    """`_judged` for a Debezium pipeline: each record parsed by the reference envelope parser;
    with `framed` (converter avro or json_schema) its framed envelope read first
    (cdc/envelope.FramedEnvelope)."""
    keys, sequence_by = cdc

    def run(batches):
        import pyarrow as pa

        from onceflow.cdc.envelope import Change, Envelope, FramedEnvelope, Malformed
        from onceflow.registry import Registry
        from onceflow.schema.model import RegistrySpec, Schema
        from onceflow.schema.reasons import Reason

        schema = Schema.model_validate_json(schema_json)

        def make(declared: str) -> Envelope | FramedEnvelope:
            envelope = Envelope(Schema.model_validate_json(declared), keys, sequence_by)
            if framed is None:
                return envelope
            settings, subject, _ = framed
            return FramedEnvelope(envelope, Registry(RegistrySpec(**settings)), subject)

        current, parser_for = _per_declaration(schema_json, segments, make)
        keyed = current.spec
        names = schema.names
        empty = {**dict.fromkeys(names), "_op": None, "_sequence": None}
        by_hand = _moved_by_hand(unprocessable)

        types = {f.name: arrow_type(f.ftype) for f in schema.fields}
        types |= {"_op": pa.string(), "_sequence": _sequence_arrow_type(keyed)}
        if schema.event_time_position is not None:
            types["_event_time"] = pa.timestamp("us", tz="UTC")
        for batch in batches:
            where = zip(
                batch.column("partition").to_pylist(),
                batch.column("offset").to_pylist(),
                batch.column("key").to_pylist(),
                batch.column("value").to_pylist(),
                strict=True,
            )
            rows: list[tuple[dict, str | None]] = []
            for p, o, k, v in where:
                if by_hand(p, o):
                    rows.append((empty, Reason.UNPROCESSABLE))
                    continue
                parsed = parser_for(p, o).parse(k, v)
                if isinstance(parsed, Change):
                    rows.append((change_values(parsed, keyed, names), None))
                elif isinstance(parsed, Malformed):
                    rows.append((empty, parsed.reason))
                else:  # TOMBSTONE: a no-op
                    rows.append((empty, TOMBSTONE_REASON))
            arrays = [pa.array([r.get(n) for r, _ in rows], type=t) for n, t in types.items()]
            arrays += [batch.column(c) for c in KAFKA_COLUMNS]
            arrays.append(pa.array([reason for _, reason in rows], type=pa.string()))
            yield pa.RecordBatch.from_arrays(
                arrays, names=[*types, "_key", "_value", "_topic", "_partition", "_offset", "reason"]
            )

    return run


def declaration_segments(pipeline: Pipeline) -> Segments:
    """Where an earlier declaration was in force: from the bronze ledger's entries, which
    record the declaration each batch was judged by (only those that differ from today's)."""
    from onceflow.ledger import read_ledger

    current = pipeline.schema.model_dump_json()
    out: Segments = []
    for e in read_ledger(pipeline.resolve(pipeline.sinks.bronze.path)).entries:
        declared = as_declared_today(e.extra.get("schema")) if e.extra else None
        if not declared or declared == current:
            continue
        spans = {p: (s, e.end.get(p, s)) for p, s in e.start.items() if s < e.end.get(p, s)}
        if out and out[-1][0] == declared:
            merged = dict(out[-1][1])
            for p, (s, end) in spans.items():
                lo, hi = merged.get(p, (s, end))
                merged[p] = (min(lo, s), max(hi, end))
            out[-1] = (declared, merged)
        else:
            out.append((declared, spans))
    return out


@functools.lru_cache(maxsize=64)
def as_declared_today(recorded: str | None) -> str | None:
    """A batch's recorded declaration as today's model writes it: a setting added to the model
    since, at its default (say schema.registry.wait_seconds), makes no other declaration, so the
    report names no change that was never made. One the model no longer reads stays as it was.
    Cached: a ledger's entries share a handful of declarations."""
    from pydantic import ValidationError

    from onceflow.schema.model import Schema

    if not recorded:
        return recorded
    try:
        return Schema.model_validate_json(recorded).model_dump_json()
    except ValidationError:
        return recorded


# from this many records, or this many bytes of them, on, the reference judge (one Python thread,
# ~25,000 plain records/s, far fewer long ones full of escapes) runs in one spawned process per
# core: a process costs about a second to start (docs/benchmarks.md)
PARALLEL_FROM = 100_000
PARALLEL_BYTES = 32 * 1024 * 1024
# the columnar judge's chunk, judged while the next chunk is read: small enough that the last one's
# judging, after the read, is short (one DuckDB query a chunk where the compiled judge is not built)
COLUMNAR_CHUNK = 50_000
# how many of the columnar judge's sure records the reference judges again in every audit, spread
# evenly over them (about 0.1 s of the reference's time)
SAMPLE = 2_000
# `reference`: every record judged by the reference judge alone (the columnar judge is not used);
# `duckdb`: the columnar judge's DuckDB query even where the compiled one is built
JUDGE_ENV = "ONCEFLOW_AUDIT_JUDGE"


def columnar_judge_for(schema):
    """The columnar judge of a schema's records: the compiled one (audit/native_judge.py) where it is
    built, else the DuckDB query (audit/columnar_judge.py); both are sure of the same records."""
    import os

    from onceflow.audit import native_judge
    from onceflow.audit.columnar_judge import ColumnarJudge

    if native_judge.available() and os.environ.get(JUDGE_ENV, "").strip().lower() != "duckdb":
        return native_judge.NativeJudge(schema)
    return ColumnarJudge(schema)


@dataclass
class Judged:
    """The committed source records of the audited ranges, judged (`table`: read_source's columns and
    `_columnar`, true where the columnar judge's verdict stands), and how: how many records the
    columnar judge was sure of, how many of those the reference judged again (`sampled`), and the
    coordinates where the two disagreed (the reference's verdict is the one in `table`)."""

    table: pa.Table
    columnar: int = 0
    sampled: int = 0
    disagreements: list[tuple[int, int]] = field(default_factory=list)
    rejudged: int = 0  # sure records the reconciliation found in dispute, judged again (audit/rows.py)
    not_columnar: str | None = None  # why the columnar judge read no record, if it read none
    engine: str | None = None  # the columnar judge's: "native" (compiled) or "duckdb" (columnar_judge_for)


def read_source(
    pipeline: Pipeline, ranges: dict[int, tuple[int, int]], segments: Segments | None = None, columnar: bool = True
) -> Judged:
    """The committed source records of the ranges, each judged by the audit's own judges:
    bronze's columns (tables.bronze_columns: the declared fields, typed; a Debezium pipeline's
    `_op` and `_sequence` too), the raw `_key` and `_value`, the coordinates and `reason` (NULL when
    valid) — what the sinks should hold. A Debezium tombstone has reason TOMBSTONE_REASON: it
    belongs in neither bronze nor quarantine. `columnar` False: the reference judge alone (for a
    comparison that does not judge its disputes again). All in memory: the row reconciliation reads
    them chunk by chunk instead (`source_stream`)."""
    segments = declaration_segments(pipeline) if segments is None else segments
    batches = range_batches(source_client(pipeline), pipeline.source.topic, ranges)
    return judge_records(pipeline, segments, batches, columnar=columnar)


def source_stream(pipeline: Pipeline, ranges: dict[int, tuple[int, int]], segments: Segments) -> JudgedStream:
    """read_source's records chunk by chunk, each judged while the next is read."""
    batches = range_batches(source_client(pipeline), pipeline.source.topic, ranges)
    return JudgedStream(pipeline, segments, batches, sum(e - s for s, e in ranges.values()))


def _not_columnar(pipeline: Pipeline) -> str | None:
    """Why the columnar judge reads none of a pipeline's records, or None."""
    import os

    from onceflow.audit.columnar_judge import why_not

    if os.environ.get(JUDGE_ENV, "").strip().lower() == "reference":
        return f"{JUDGE_ENV}=reference"
    if pipeline.keyed is not None and pipeline.keyed.debezium:
        return "a Debezium pipeline's envelopes"
    return why_not(pipeline.schema)


def _outside(partitions, offsets, spans: list[dict[int, list[tuple[int, int]]]]):
    """Per row of these coordinates, whether it lies in none of the spans (per partition, ranges)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    inside = pa.array([False] * len(partitions), pa.bool_())
    for span in spans:
        for p, ranges in span.items():
            for a, b in ranges:
                here = pc.and_(pc.equal(partitions, p), pc.and_(pc.greater_equal(offsets, a), pc.less(offsets, b)))
                inside = pc.or_(inside, here)
    return pc.invert(inside)


def judge_records(
    pipeline: Pipeline,
    segments: Segments,
    raw: Iterable[pa.RecordBatch],
    parallel_from: int = PARALLEL_FROM,
    sample: int = SAMPLE,
    columnar: bool = True,
) -> Judged:
    """Raw Kafka batches judged, all at once (JudgedStream's chunks, concatenated)."""
    import dataclasses

    import pyarrow as pa

    raw = list(raw)
    stream = JudgedStream(
        pipeline, segments, raw, sum(b.num_rows for b in raw), parallel_from, sample, columnar=columnar
    )
    return dataclasses.replace(stream.judged, table=pa.concat_tables(list(stream)))


def flagged(table: pa.Table, columnar: bool) -> pa.Table:
    """The table with `_columnar`: whether each verdict is the columnar judge's."""
    import pyarrow as pa

    return table.append_column("_columnar", pa.array([columnar] * table.num_rows, pa.bool_()))


class JudgedStream:
    """Raw Kafka batches (at least one; an iterator is read as they are judged), judged chunk by chunk:
    iterating gives tables in read_source's columns and `_columnar`, and `judged` counts as it goes.

    The columnar judge (audit/columnar_judge.py) reads chunks of COLUMNAR_CHUNK records, one in a
    thread of its own while the next is read (DuckDB lets go of the GIL); at most two chunks are held.
    The reference judge reads what it is not sure of (_ReferenceJudging: in this process while that
    is little, else in one spawned process per core, share by share as they come) and an even sample
    of `sample` of its sure records (every `expected // sample`-th), whose verdicts it replaces where
    the two disagree."""

    def __init__(
        self,
        pipeline: Pipeline,
        segments: Segments,
        raw: Iterable[pa.RecordBatch],
        expected: int,
        parallel_from: int = PARALLEL_FROM,
        sample: int = SAMPLE,
        columnar: bool = True,
    ):
        self.pipeline, self.segments, self.raw, self.parallel_from = pipeline, segments, raw, parallel_from
        self.sample, self.step = sample, max(1, expected // sample) if sample else 0
        why = _not_columnar(pipeline) if columnar else "the caller asked for the reference judge"
        self.judged = Judged(None, not_columnar=why)  # chunks, not one table
        self._sure_seen = 0

    def __iter__(self) -> Iterator[pa.Table]:
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        with _ReferenceJudging(self.pipeline, self.segments, self.parallel_from) as reference:
            if self.judged.not_columnar is not None:
                given = None  # a batch read, for the columns when there is no record
                for batch in self.raw:
                    given = batch
                    yield from reference.add([batch])
                yield from reference.finish(given)
                return
            split = self._splitter()
            with ThreadPoolExecutor(1, thread_name_prefix="columnar-judge") as pool:
                pending: deque = deque()
                for chunk in _chunks(self.raw, COLUMNAR_CHUNK):
                    pending.append(pool.submit(split, chunk))
                    if len(pending) > 1:  # one chunk judged while the next is read
                        fast, unsure = pending.popleft().result()
                        yield from self._checked(fast, unsure, reference)
                while pending:
                    fast, unsure = pending.popleft().result()
                    yield from self._checked(fast, unsure, reference)
            yield from reference.finish()

    def _splitter(self):
        """A chunk of raw batches -> (its sure records in read_source's columns, its other raw records)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        pipeline = self.pipeline
        columnar_judge = columnar_judge_for(pipeline.schema)
        self.judged.engine = columnar_judge.engine
        by_hand = Unprocessable.load(pipeline.state_path).ranges(pipeline.source.topic)
        earlier = [{p: [span] for p, span in spans.items()} for _, spans in self.segments]
        names = pipeline.schema.names
        types = {f.name: arrow_type(f.ftype) for f in pipeline.schema.fields}

        def split(batches: list[pa.RecordBatch]) -> tuple[pa.Table, pa.Table]:
            records = pa.Table.from_batches(batches)
            judged = columnar_judge.judge(records["value"])
            outside = _outside(records["partition"], records["offset"], [by_hand, *earlier])
            sure = pc.and_(pc.fill_null(judged["_sure"], False), outside)
            kept = records.filter(sure)
            columns = [judged[n].filter(sure).cast(types[n]) for n in names]
            columns += [kept[c] for c in KAFKA_COLUMNS]
            columns.append(pa.nulls(kept.num_rows, pa.string()))
            fast = flagged(pa.table(columns, names=[*names, *RAW_COLUMNS, "reason"]), True)
            return fast, records.filter(pc.invert(sure))

        return split

    def _checked(self, fast: pa.Table, unsure: pa.Table, reference: _ReferenceJudging) -> Iterator[pa.Table]:
        """A chunk's sure records with the sample judged again (the reference's verdict standing where
        the two disagree), then whatever the reference has judged by now."""
        j = self.judged
        j.columnar += fast.num_rows
        first = -self._sure_seen % self.step if self.step else fast.num_rows
        positions = list(range(first, fast.num_rows, self.step or 1))[: max(0, self.sample - j.sampled)]
        self._sure_seen += fast.num_rows
        if positions:
            mine = fast.take(positions)
            raw = mine.select(list(RAW_COLUMNS)).rename_columns(list(KAFKA_COLUMNS))
            again = _judge_share(self.pipeline, self.segments, raw.to_batches())
            j.sampled += len(positions)
            wrong = _disagreements(mine, again, self.pipeline.schema.names)
            if wrong:  # the reference's verdict stands where the two disagree
                j.disagreements += wrong
                fast, fixed = _replace(fast, again, wrong)
                yield fixed
        yield fast
        yield from reference.add(unsure.to_batches())


def _chunks(raw: Iterable[pa.RecordBatch], size: int) -> Iterator[list[pa.RecordBatch]]:
    """The batches in lists of at least `size` rows (the last may hold fewer; at least one list)."""
    held: list = []
    rows, given = 0, False
    for batch in raw:
        held.append(batch)
        rows += batch.num_rows
        if rows >= size:
            given = True
            yield held
            held, rows = [], 0
    if held or not given:
        yield held


# a share of records the reference judges in a spawned process (they come in as the columnar judge
# leaves them): enough to be worth sending, little enough that a few in flight stay small
SHARE_ROWS = 50_000
SHARE_BYTES = 16 * 1024 * 1024


class _ReferenceJudging:
    """The reference judge over records as they come: gathered into shares; in this process when all of
    them are fewer than `parallel_from` and PARALLEL_BYTES, else each share in a spawned process (one
    per core, started at the first share: about a second), at most one share per process in flight."""

    def __init__(self, pipeline: Pipeline, segments: Segments, parallel_from: int):
        import os
        from collections import deque

        self.pipeline, self.segments, self.parallel_from = pipeline, segments, parallel_from
        self.held: list = []
        self.rows = self.bytes = 0
        self.processes = os.cpu_count() or 1
        self.pool: ProcessPoolExecutor | None = None
        self.pending: deque = deque()
        self.share_rows = min(SHARE_ROWS, max(1, parallel_from))

    def __enter__(self) -> _ReferenceJudging:
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def add(self, batches: list) -> Iterator[pa.Table]:
        for b in batches:
            if b.num_rows:
                self.held.append(b)
                self.rows += b.num_rows
                self.bytes += b.nbytes
        if self.rows >= self.share_rows or self.bytes >= SHARE_BYTES:
            yield from self._send()
        while self.pending and self.pending[0].done():
            yield self.pending.popleft().result()

    def finish(self, columns_from: pa.RecordBatch | None = None) -> Iterator[pa.Table]:
        """What is left judged; with none left, `columns_from` (a batch read) judged empty: its columns."""
        small = self.rows < self.parallel_from and self.bytes < PARALLEL_BYTES
        if not self.held:
            if columns_from is not None:
                yield flagged(_judge_share(self.pipeline, self.segments, [columns_from.slice(0, 0)]), False)
        elif self.pool is None and (small or self.processes < 2):
            yield flagged(_judge_share(self.pipeline, self.segments, self.held), False)
            self.held = []
        else:
            yield from self._send()
        while self.pending:
            yield self.pending.popleft().result()

    def _send(self) -> Iterator[pa.Table]:
        if self.processes < 2:
            yield flagged(_judge_share(self.pipeline, self.segments, self.held), False)
        else:
            if self.pool is None:
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                # spawned, not forked: the caller runs threads (delta-rs, DuckDB) that a fork would not carry
                self.pool = ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("spawn"))
            self.pending.append(self.pool.submit(_judge_share_flagged, self.pipeline, self.segments, self.held))
            while len(self.pending) > self.processes:
                yield self.pending.popleft().result()
        self.held, self.rows, self.bytes = [], 0, 0


def _judge_share_flagged(pipeline: Pipeline, segments: Segments, batches: list) -> pa.Table:
    """_judge_share's table with `_columnar` false (what a spawned process sends back)."""
    return flagged(_judge_share(pipeline, segments, batches), False)


def _disagreements(mine: pa.Table, again: pa.Table, names: list[str]) -> list[tuple[int, int]]:
    """The coordinates where the reference's verdict (`again`) differs from the columnar one (`mine`)."""
    cols = [*names, "reason"]
    theirs = {(r["_partition"], r["_offset"]): [r[c] for c in cols] for r in again.to_pylist()}
    return sorted(
        (r["_partition"], r["_offset"])
        for r in mine.to_pylist()
        if theirs.get((r["_partition"], r["_offset"])) != [r[c] for c in cols]
    )


def _replace(fast: pa.Table, again: pa.Table, at: list[tuple[int, int]]) -> tuple[pa.Table, pa.Table]:
    """`fast` without the rows at these coordinates, and the reference's rows for them (`_columnar` false)."""
    import pyarrow.compute as pc

    span: dict[int, list[tuple[int, int]]] = {}
    for p, o in at:
        span.setdefault(p, []).append((o, o + 1))
    spans = [span]
    fixed = again.filter(pc.invert(_outside(again["_partition"], again["_offset"], spans)))
    kept = fast.filter(_outside(fast["_partition"], fast["_offset"], spans))
    return kept, flagged(fixed, False)


def raw_records_at(raw: pa.Table, keys: list[tuple[int, int]]) -> pa.Table:
    """The rows of `raw` (a Kafka batch's columns, KAFKA_COLUMNS) at these coordinates: what a judge reads."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def coordinate(partition, offset):  # one int64 per (partition, offset): offsets stay below 2**40
        return pc.add(pc.multiply(pc.cast(partition, pa.int64()), 2**40), offset)

    wanted = pa.array([p * 2**40 + o for p, o in keys], pa.int64())
    return raw.filter(pc.is_in(coordinate(raw["partition"], raw["offset"]), value_set=wanted))


def reference_judged(pipeline: Pipeline, raw: list) -> pa.Table:
    """Raw Kafka batches of records the columnar judge read (so outside any earlier declaration's
    ranges and any moved by hand), judged by the reference judge alone, in this process."""
    return _judge_share(pipeline, [], raw)


def _judge_share(pipeline: Pipeline, segments: Segments, batches: list) -> pa.Table:
    """Raw Kafka batches judged by the reference judge, in this process."""
    import pyarrow as pa

    from onceflow.gc_pause import gc_paused

    judge, _ = record_judge(pipeline, segments)
    with gc_paused():  # a parse makes many objects and no cycles (onceflow/gc_pause.py)
        return pa.Table.from_batches(list(judge(iter(batches))))


def record_judge(pipeline: Pipeline, segments: Segments | None = None):
    """The audit's judge of a pipeline's raw Kafka records, and the DDL of what it gives: a function
    of Arrow record batches (key, value, topic, partition, offset) to batches of bronze's columns,
    the coordinates and `reason` (read_source runs it; a batch of none gives the columns)."""
    schema, keyed = pipeline.schema, pipeline.keyed
    segments = declaration_segments(pipeline) if segments is None else segments
    ddl = ", ".join(f"`{n}` {t}" for n, t in tables.bronze_columns(schema, keyed).items()) + ", " + SOURCE_DDL
    by_hand = Unprocessable.load(pipeline.state_path).ranges(pipeline.source.topic)
    cdc = None
    if keyed is not None and keyed.debezium and pipeline.sinks.current is not None:
        current = pipeline.sinks.current
        sequence_by = [current.sequence_by] if isinstance(current.sequence_by, str) else list(current.sequence_by)
        cdc = (list(current.keys), sequence_by)
    framed = None
    if schema.registry is not None and pipeline.registry_subject is not None:
        settings = {**schema.registry.model_dump(), "password": schema.registry.password}
        framed = (settings, pipeline.registry_subject, str(schema.framing))
    return _judged(schema.model_dump_json(), segments, by_hand, cdc, framed), ddl
