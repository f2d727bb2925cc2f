"""Row reconciliation: committed Kafka records vs bronze ∪ quarantine, in DuckDB over Arrow (no JVM).

One union of the committed source records (Kafka at read_committed, judged by the audit's own
implementation of the declared rules, schema/reference.py — not the job's Spark validation, whose
bugs it would share) and the sink rows, grouped by the Kafka coordinates `(_topic, _partition,
_offset)`, then one aggregation per partition gives every count the checks need: accounting,
loss, phantoms, duplicates and content. Offending offsets are only looked up (and turned into
ranges) when a count says there are some, so a clean audit pays for one group by and one pass.

Content is compared by a 64-bit hash per row over the canonical fields —
bronze: its columns before the provenance (tables.bronze_columns: the declared fields, typed,
and for Debezium `_op` and `_sequence`, so a wrong op or sequence is a content mismatch), the
source's values cast to the types bronze holds them in;
quarantine: key, value, reason — summed per partition as a decimal: order-independent, and any
added, missing or changed row (a value the job parsed differently, a reason it gave differently)
changes the sum.

A Debezium tombstone (a null value after a delete, source.TOMBSTONE_REASON) is a no-op: it is
expected in neither table, is not a source record of the accounting, and is counted apart
(`RowReconciliation.tombstones`); one found in a sink is a phantom row.

What it compares comes from source.py (the committed source records, judged) and
sink_tables.py (the sink tables at the pinned version, by delta-rs); offending offsets become
ranges in offending.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from onceflow import tables
from onceflow.audit.duck import HeldTable, ident, spilling
from onceflow.audit.offending import at_keys, islands, ranges_text
from onceflow.audit.sink_tables import scan_table
from onceflow.audit.source import (
    KAFKA_COLUMNS,
    RAW_COLUMNS,
    TOMBSTONE_REASON,
    Judged,
    JudgedStream,
    declaration_segments,
    flagged,
    raw_records_at,
    reference_judged,
    source_stream,
)
from onceflow.config import Pipeline
from onceflow.gc_pause import gc_paused
from onceflow.reconcile import MAX_RANGES, MAX_SAMPLES, Check, CheckGroup, CheckStatus, CommittedPoint, check, jsonable
from onceflow.sink_kinds import SinkName

if TYPE_CHECKING:
    import pyarrow as pa

_COUNTS = (
    "source_records",
    "source_valid",
    "source_malformed",
    "bronze_rows",
    "quarantine_rows",
    "lost_records",
    "phantom_keys",
    "phantom_rows",
    "duplicate_keys",
    "extra_copies",
    "content_mismatches",
)
QUARANTINE_FIELDS = ("_key", "_value", "reason")
_ENGINES = {"native": "compiled", "duckdb": "DuckDB's query"}  # the columnar judge's engines, as a report names them
KEY = ("_topic", "_partition", "_offset")


def _raw_in(table: pa.Table, keys: list[tuple[int, int]]) -> pa.Table:
    """The raw records at these coordinates, from a judged table that holds them (read_source's)."""
    return raw_records_at(table.select(list(RAW_COLUMNS)).rename_columns(list(KAFKA_COLUMNS)), keys)


def _raw_from_kafka(pipeline: Pipeline, keys: list[tuple[int, int]]) -> pa.Table:
    """The raw records at these coordinates, read again from Kafka (the span of each partition's)."""
    import pyarrow as pa

    from onceflow.kafka.client import source_client
    from onceflow.kafka.consume import range_batches

    spans: dict[int, tuple[int, int]] = {}
    for p, o in keys:
        lo, hi = spans.get(p, (o, o + 1))
        spans[p] = (min(lo, o), max(hi, o + 1))
    return raw_records_at(
        pa.Table.from_batches(list(range_batches(source_client(pipeline), pipeline.source.topic, spans))), keys
    )


# the joined coordinates' conditions (columns of the `j` table)
LOST = "in_source AND NOT in_sink"
PHANTOM = "in_sink AND NOT in_source"
DUPLICATE = "copies > 1"
CHANGED = "in_source AND in_sink AND (h_min <> src_h OR h_max <> src_h)"


def _as_bronze_types(source: pa.Table, bronze: pa.Schema, columns: list[str]) -> pa.Table:
    """The source's content columns in the Arrow types bronze holds them in (delta-rs reads a
    timestamp, a decimal, an int as the table declares it), so that equal values hash equally; a
    column that cannot be cast keeps its own type (its rows then differ: a content mismatch)."""
    import pyarrow as pa

    out = source
    for name in columns:
        if name not in bronze.names or name not in source.column_names:
            continue
        want = bronze.field(name).type
        i = source.column_names.index(name)
        if source.schema.field(i).type == want:
            continue
        try:
            out = out.set_column(i, pa.field(name, want), out.column(i).cast(want))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return out


@dataclass
class RowReconciliation:
    partitions: list[dict]  # one row per partition: counts and checksums
    checks: list[Check]
    totals: dict = field(default_factory=dict)
    findings: list[dict] = field(default_factory=list)  # every offending range, for the GX findings suite
    tombstones: int = 0  # Debezium tombstones in the audited ranges: no-ops, in no sink
    judged_columnar: int = 0  # source records whose verdict is the columnar judge's (audit/columnar_judge.py)


RawAt = Callable[[list[tuple[int, int]]], "pa.Table"]


class RowReconciler:
    """Compares the source records of the committed point with bronze ∪ quarantine, in a DuckDB
    database of its own that spills to disk past its memory limit (duck.spilling): the sinks' audited
    rows are streamed into it from delta-rs, the source's judged records chunk by chunk as they are
    read and judged, each chunk's raw bytes dropped once hashed. A record of the columnar judge in
    dispute is read again from Kafka (`raw_at`) for the reference judge. `bronze` and `quarantine`
    (HeldTable) are what the aggregates and Great Expectations read of the sinks."""

    def __init__(
        self,
        pipeline: Pipeline,
        point: CommittedPoint,
        source: Judged | JudgedStream | pa.Table,
        bronze: pa.Table | pa.RecordBatchReader,
        quarantine: pa.Table | pa.RecordBatchReader,
        raw_at: RawAt | None = None,
    ):
        import tempfile

        import pyarrow as pa

        self.pipeline = pipeline
        self.point = point
        self.schema = pipeline.schema
        # bronze's columns before the provenance: what a bronze row's content is
        self.columns = list(tables.bronze_columns(pipeline.schema, pipeline.keyed))
        self._spill = tempfile.TemporaryDirectory(prefix="onceflow-audit-")
        self.con = spilling(self._spill.name)
        self.bronze_schema = bronze.schema
        if isinstance(source, pa.Table):  # judged by the reference alone
            source = Judged(flagged(source, False))
        chunks: Iterable[pa.Table]
        if isinstance(source, Judged):  # all at once, raw bytes and all: a dispute's are read from it
            table = source.table
            self.judged, chunks = source, [table]
            raw_at = raw_at or (lambda keys: _raw_in(table, keys))
        else:
            self.judged, chunks = source.judged, source
        if raw_at is None:
            raise ValueError("a judged stream drops its raw records: give raw_at, where a dispute's are read again")
        self.raw_at = raw_at
        self._hold_sinks(bronze, quarantine, chunks)

    @classmethod
    def read(cls, pipeline: Pipeline, point: CommittedPoint) -> RowReconciler:
        """The committed point's records from Kafka, judged as they are read, and both sinks at their
        pinned versions, restricted to the audited ranges (streamed by delta-rs while Kafka is read)."""
        ranges = point.ranges()
        bronze, quarantine = point.sinks.get(SinkName.BRONZE), point.sinks.get(SinkName.QUARANTINE)
        return cls(
            pipeline,
            point,
            source_stream(pipeline, ranges, declaration_segments(pipeline)),
            scan_table(pipeline.resolve(pipeline.sinks.bronze.path), bronze.version if bronze else None, ranges),
            scan_table(
                pipeline.resolve(pipeline.sinks.quarantine.path), quarantine.version if quarantine else None, ranges
            ),
            raw_at=lambda keys: _raw_from_kafka(pipeline, keys),
        )

    def _hold_sinks(self, bronze, quarantine, chunks: Iterable[pa.Table]) -> None:
        """The sinks copied into the database in a thread of its own (delta-rs and DuckDB let go of the
        GIL) while the source's chunks are judged and put in here, each in a thread of its own too,
        so that this one goes on reading (at most two chunks waiting)."""
        from collections import deque
        from concurrent.futures import Future, ThreadPoolExecutor

        def hold(name: str, data) -> None:
            cur = self.con.cursor()
            try:
                cur.register(f"_{name}_in", data)
                cur.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}_in")
                cur.unregister(f"_{name}_in")
            finally:
                cur.close()

        quarantine_schema = quarantine.schema
        # millions of messages and verdicts made and dropped, no cycle among them (onceflow/gc_pause.py)
        with (
            gc_paused(),
            ThreadPoolExecutor(1, thread_name_prefix="sink-tables") as pool,
            ThreadPoolExecutor(1, thread_name_prefix="source-rows") as puts,
        ):

            def both() -> None:
                hold("bronze", bronze)
                hold("quarantine", quarantine)

            def put(chunk: pa.Table) -> None:
                cur = self.con.cursor()
                try:
                    self._put_source(chunk, False, con=cur)
                finally:
                    cur.close()

            sinks = pool.submit(both)
            first = True
            pending: deque[Future] = deque()
            for chunk in chunks:
                if first:  # the table made here, before any insert
                    self._put_source(chunk, True)
                    first = False
                    continue
                pending.append(puts.submit(put, chunk))
                while len(pending) > 2:
                    pending.popleft().result()
            for done in pending:
                done.result()
            sinks.result()
        self.bronze = HeldTable(self.con, "bronze", self.bronze_schema)
        self.quarantine = HeldTable(self.con, "quarantine", quarantine_schema)

    def _put_source(self, chunk: pa.Table, first: bool, into: str = "src", con=None) -> None:
        """A judged chunk into table `into`, its content in bronze's types, its raw key and value
        replaced by the hash a quarantine row of it would have (`_qh`; NULL for a valid record);
        `con`: a cursor of the database (another thread's), else the reconciler's own connection."""
        con = con or self.con
        chunk = _as_bronze_types(chunk, self.bronze_schema, self.columns)
        con.register("_chunk", chunk)
        quarantine_h = f"hash('{SinkName.QUARANTINE.value}', {', '.join(QUARANTINE_FIELDS)})"
        rows = (
            f"SELECT * EXCLUDE (_key, _value), CASE WHEN reason IS NOT NULL THEN {quarantine_h} END AS _qh FROM _chunk"
        )
        if first:
            con.execute(f"CREATE OR REPLACE TABLE {into} AS {rows}")
        else:
            con.execute(f"INSERT INTO {into} BY NAME {rows}")
        con.unregister("_chunk")

    def release(self) -> None:
        self.con.close()
        self._spill.cleanup()

    def _join(self) -> None:
        """Table `j`: one row per Kafka coordinate seen in the source or the sinks."""
        fields = ", ".join(ident(c) for c in self.columns)
        bronze_h = f"hash('{SinkName.BRONZE.value}', {fields})"
        quarantine_h = f"hash('{SinkName.QUARANTINE.value}', {', '.join(QUARANTINE_FIELDS)})"
        noop = f"coalesce(reason = '{TOMBSTONE_REASON}', false)"
        self.con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE j AS
            WITH u AS (
              SELECT _topic, _partition, _offset,
                     CASE WHEN {noop} THEN 0 ELSE 1 END AS s,
                     CASE WHEN reason IS NULL THEN 1 ELSE 0 END AS v,
                     CASE WHEN {noop} THEN NULL WHEN reason IS NULL THEN {bronze_h} ELSE _qh END AS h,
                     0 AS b, 0 AS q, CASE WHEN {noop} THEN 1 ELSE 0 END AS t
              FROM src
              UNION ALL SELECT _topic, _partition, _offset, 0, 0, {bronze_h}, 1, 0, 0 FROM bronze
              UNION ALL SELECT _topic, _partition, _offset, 0, 0, {quarantine_h}, 0, 1, 0 FROM quarantine
            )
            SELECT _topic, _partition, _offset,
                   sum(s) > 0 AS in_source, sum(v) > 0 AS valid, sum(t) > 0 AS tombstone,
                   max(h) FILTER (WHERE s = 1) AS src_h,
                   sum(b + q) AS copies, sum(b + q) > 0 AS in_sink,
                   sum(h::HUGEINT) FILTER (WHERE b + q > 0) AS sink_sum,
                   min(h) FILTER (WHERE b + q > 0) AS h_min, max(h) FILTER (WHERE b + q > 0) AS h_max,
                   sum(b) AS bronze, sum(q) AS quarantine
            FROM u GROUP BY _topic, _partition, _offset
            """
        )

    def _rejudge_disputes(self) -> None:
        """The records the columnar judge was sure of that the sinks hold otherwise, read again
        (`raw_at`) and judged by the reference judge, whose verdict then stands (a difference of the
        two is a disagreement); table `j` made again if any was."""
        if not self.judged.columnar:
            return
        disputed = self.con.execute(
            "SELECT s._partition, s._offset FROM src s JOIN j USING (_topic, _partition, _offset) "
            f"WHERE s._columnar AND ({CHANGED}) ORDER BY 1, 2"
        ).fetchall()
        if not disputed:
            return
        raw = self.raw_at([(int(p), int(o)) for p, o in disputed])
        again = reference_judged(self.pipeline, raw.to_batches())
        self._put_source(flagged(again, False), True, into="again")
        content = ", ".join(f"{{t}}.{ident(c)}" for c in [*self.columns, "reason"])
        self.judged.disagreements += [
            (int(p), int(o))
            for p, o in self.con.execute(
                "SELECT s._partition, s._offset FROM src s JOIN again a USING (_topic, _partition, _offset) "
                f"WHERE hash({content.format(t='s')}) <> hash({content.format(t='a')}) ORDER BY 1, 2"
            ).fetchall()
        ]
        self.judged.rejudged += again.num_rows
        self.con.execute(
            "DELETE FROM src s WHERE EXISTS (SELECT 1 FROM again a WHERE a._topic = s._topic "
            "AND a._partition = s._partition AND a._offset = s._offset)"
        )
        self.con.execute("INSERT INTO src BY NAME SELECT * FROM again")
        self.con.execute("DROP TABLE again")
        self._join()

    def run(self) -> RowReconciliation:
        self._join()
        self._rejudge_disputes()
        n = lambda cond: f"count(*) FILTER (WHERE {cond})"  # noqa: E731
        stats = self.con.execute(
            f"""
            SELECT _partition,
                   {n("in_source")}, {n("valid")}, {n("in_source AND NOT valid")},
                   coalesce(sum(bronze), 0), coalesce(sum(quarantine), 0),
                   {n(LOST)}, {n(PHANTOM)}, coalesce(sum(copies) FILTER (WHERE {PHANTOM}), 0),
                   {n(DUPLICATE)}, coalesce(sum(copies - 1) FILTER (WHERE {DUPLICATE}), 0),
                   {n(CHANGED)},
                   coalesce(sum(src_h::HUGEINT), 0)::VARCHAR, coalesce(sum(sink_sum), 0)::VARCHAR,
                   {n("tombstone")}
            FROM j GROUP BY _partition
            """
        ).fetchall()
        names = ("_partition", *_COUNTS, "source_checksum", "sink_checksum", "tombstones")
        by_p = {int(r[0]): dict(zip(names, r, strict=True)) for r in stats}
        tombstones = 0
        for row in by_p.values():
            tombstones += int(row.pop("tombstones") or 0)
            row.update({k: int(row[k]) for k in _COUNTS})
        zeros = {k: 0 for k in _COUNTS} | {"source_checksum": "0", "sink_checksum": "0"}
        partitions = []
        for p in sorted(set(self.point.end) | set(by_p)):
            row = {**zeros, **by_p.get(p, {})}
            row.pop("_partition", None)
            partitions.append(
                {
                    "partition": p,
                    "start": self.point.start.get(p),
                    "end": self.point.end.get(p),
                    **row,
                    "sink_rows": row["bronze_rows"] + row["quarantine_rows"],
                }
            )
        totals = {
            k: sum(int(r[k]) for r in partitions)
            for k in (
                "source_records",
                "source_valid",
                "source_malformed",
                "bronze_rows",
                "quarantine_rows",
                "sink_rows",
                "lost_records",
                "phantom_rows",
                "duplicate_keys",
                "extra_copies",
                "content_mismatches",
            )
        }
        columnar = int(self.con.execute("SELECT count(*) FILTER (WHERE _columnar) FROM src").fetchall()[0][0])
        result = RowReconciliation(
            partitions=partitions, checks=[], totals=totals, tombstones=tombstones, judged_columnar=columnar
        )
        result.checks = [
            self._accounting(partitions),
            self._loss(partitions, result),
            self._phantoms(partitions, result),
            self._duplicates(partitions, result),
            self._event_ids(result),
            self._content(partitions, result),
            self._judges(),
        ]
        return result

    def _judges(self) -> Check:
        """Whether the audit's two judges agreed on every record both read (audit/columnar_judge.py)."""
        j = self.judged
        title = "the audit's columnar judge agreed with its reference judge on every record both judged"
        if not j.columnar:
            return Check(
                "judges_agree",
                title,
                CheckStatus.SKIPPED,
                detail=f"every record was judged by the reference judge ({j.not_columnar or 'none was plain'})",
                group=CheckGroup.ROWS,
            )
        both = j.sampled + j.rejudged
        at = ", ".join(f"partition {p} offset {o}" for p, o in j.disagreements[:MAX_SAMPLES])
        return check(
            "judges_agree",
            title,
            not j.disagreements,
            expected=0,
            observed={"disagreements": len(j.disagreements), "judged_by_both": both, "columnar": j.columnar},
            partitions=sorted({p for p, _ in j.disagreements}),
            detail=(
                f"the columnar judge ({_ENGINES.get(j.engine or '', j.engine)}) was sure of {j.columnar} record(s); "
                f"the reference judged {j.sampled} of them "
                f"again as a sample and {j.rejudged} the sinks hold otherwise"
                + (
                    f"; they disagreed on {len(j.disagreements)} ({at}): the reference's verdict was used there, but "
                    "the columnar judge's other verdicts cannot be trusted. Audit again with "
                    "ONCEFLOW_AUDIT_JUDGE=reference and report the records (docs/audit.md#the-two-judges)"
                    if j.disagreements
                    else ""
                )
            ),
            group=CheckGroup.ROWS,
        )

    def _keys(self, cond: str) -> list[tuple[int, int]]:
        """The first MAX_SAMPLES coordinates where `cond` holds."""
        rows = self.con.execute(
            f"SELECT _partition, _offset FROM j WHERE {cond} ORDER BY _partition, _offset LIMIT {MAX_SAMPLES}"
        ).fetchall()
        return [(int(p), int(o)) for p, o in rows]

    # -- the checks -----------------------------------------------------------------
    def _accounting(self, parts: list[dict]) -> Check:
        bad = [
            r
            for r in parts
            if not (
                r["source_records"] == r["sink_rows"]
                and r["source_valid"] == r["bronze_rows"]
                and r["source_malformed"] == r["quarantine_rows"]
            )
        ]
        t = lambda k: sum(r[k] for r in parts)  # noqa: E731
        return check(
            "accounting",
            "committed source records = bronze + quarantine, per partition",
            not bad,
            expected={"records": t("source_records"), "bronze": t("source_valid"), "quarantine": t("source_malformed")},
            observed={"records": t("sink_rows"), "bronze": t("bronze_rows"), "quarantine": t("quarantine_rows")},
            partitions=[r["partition"] for r in bad],
            detail="; ".join(
                f"partition {r['partition']}: source {r['source_records']} "
                f"({r['source_valid']} valid, {r['source_malformed']} malformed) vs sink "
                f"{r['sink_rows']} ({r['bronze_rows']} bronze, {r['quarantine_rows']} quarantine)"
                for r in bad[:20]
            ),
            group=CheckGroup.ROWS,
        )

    def _loss(self, parts: list[dict], result: RowReconciliation) -> Check:
        count = sum(r["lost_records"] for r in parts)
        ranges: list[dict] = []
        total, samples = 0, []
        if count:
            ranges, total = islands(self.con, "j", LOST, base="in_source")
            samples = self.source_rows(self._keys(LOST))
            result.findings += [{"check": "loss", **r} for r in ranges]
        return check(
            "loss",
            "no committed source record is missing from bronze ∪ quarantine (anti-join)",
            not count,
            expected=0,
            observed=count,
            ranges=ranges,
            ranges_total=total,
            samples=samples,
            partitions=[r["partition"] for r in parts if r["lost_records"]],
            detail=ranges_text("lost", ranges, total),
            group=CheckGroup.ROWS,
        )

    def _phantoms(self, parts: list[dict], result: RowReconciliation) -> Check:
        count = sum(r["phantom_rows"] for r in parts)
        ranges: list[dict] = []
        total, samples = 0, []
        if count:
            ranges, total = islands(self.con, "j", PHANTOM)
            samples = self.sink_rows(self._keys(PHANTOM))
            result.findings += [{"check": "phantoms", **r} for r in ranges]
        return check(
            "phantoms",
            "no sink row without a committed source record (e.g. from an aborted transaction)",
            not count,
            expected=0,
            observed=count,
            ranges=ranges,
            ranges_total=total,
            samples=samples,
            partitions=[r["partition"] for r in parts if r["phantom_rows"]],
            detail=ranges_text("phantom rows at", ranges, total),
            group=CheckGroup.ROWS,
        )

    def _duplicates(self, parts: list[dict], result: RowReconciliation) -> Check:
        keys = sum(r["duplicate_keys"] for r in parts)
        extra = sum(r["extra_copies"] for r in parts)
        ranges: list[dict] = []
        total, samples = 0, []
        if keys:
            ranges, total = islands(self.con, "j", DUPLICATE)
            samples = self.sink_rows(self._keys(DUPLICATE))
            result.findings += [{"check": "duplicates", **r} for r in ranges]
        return check(
            "duplicates",
            "no two sink rows share (_topic, _partition, _offset)",
            not keys,
            expected=0,
            observed={"keys": keys, "extra_rows": extra},
            ranges=ranges,
            ranges_total=total,
            samples=samples,
            partitions=[r["partition"] for r in parts if r["duplicate_keys"]],
            detail=ranges_text("duplicated offsets", ranges, total),
            group=CheckGroup.ROWS,
        )

    def _event_ids(self, result: RowReconciliation) -> Check:
        event_id = self.schema.event_id
        title = "no two bronze rows share the declared event_id"
        if event_id is None:
            return Check(
                "duplicate_event_ids",
                title,
                CheckStatus.SKIPPED,
                detail="the schema declares no event_id: uniqueness of events is not checked "
                "(uniqueness of Kafka offsets is, by the duplicates check)",
                group=CheckGroup.ROWS,
            )
        # the repeated ids first (a count per id: a grouping that spills), their coordinates only then
        repeated = f"SELECT {ident(event_id)} AS e FROM bronze GROUP BY {ident(event_id)} HAVING count(*) > 1"
        dups = (
            f"SELECT {ident(event_id)} AS event_id, count(*) AS rows, "
            "list([_partition, _offset] ORDER BY _partition, _offset) AS at "
            f"FROM bronze b SEMI JOIN ({repeated}) r ON r.e IS NOT DISTINCT FROM b.{ident(event_id)} "
            f"GROUP BY {ident(event_id)}"
        )
        found = self.con.execute(f"SELECT * FROM ({dups}) ORDER BY event_id NULLS FIRST LIMIT {MAX_RANGES}").fetchall()
        total = len(found)
        if total >= MAX_RANGES:
            total = int(self.con.execute(f"SELECT count(*) FROM ({dups})").fetchall()[0][0])
        samples = [
            {
                "event_id": jsonable(eid),
                "rows": int(rows),
                "offsets": [{"partition": int(p), "offset": int(o)} for p, o in at],
            }
            for eid, rows, at in found[:MAX_SAMPLES]
        ]
        for _eid, _rows, at in found:
            for p, o in at:
                result.findings.append(
                    {
                        "check": "duplicate_event_ids",
                        "partition": int(p),
                        "start": int(o),
                        "end": int(o) + 1,
                        "count": 1,
                    }
                )
        return check(
            "duplicate_event_ids",
            title.replace("the declared event_id", event_id),
            not found,
            expected=0,
            observed=total,
            samples=samples,
            partitions=sorted({int(p) for _e, _r, at in found for p, _o in at}),
            detail="; ".join(
                f"event_id {s['event_id']} at "
                + ", ".join(f"partition {o['partition']} offset {o['offset']}" for o in s["offsets"])
                for s in samples
            ),
            group=CheckGroup.ROWS,
        )

    def _content(self, parts: list[dict], result: RowReconciliation) -> Check:
        bad = [r for r in parts if r["source_checksum"] != r["sink_checksum"]]
        ranges: list[dict] = []
        total, samples = 0, []
        rows_changed = sum(r["content_mismatches"] for r in parts)
        if rows_changed:
            ranges, total = islands(self.con, "j", CHANGED)
            keys = self._keys(CHANGED)
            src = {(s["_partition"], s["_offset"]): s for s in self.source_rows(keys)}
            for s in self.sink_rows(keys):
                k = (s["_partition"], s["_offset"])
                samples.append({"_partition": k[0], "_offset": k[1], "source": src.get(k), "sink": s})
            result.findings += [{"check": "content", **r} for r in ranges]
        return check(
            "content",
            "order-independent payload checksum per partition equals between source and sink",
            not bad and not rows_changed,
            expected={str(r["partition"]): r["source_checksum"] for r in parts},
            observed={str(r["partition"]): r["sink_checksum"] for r in parts},
            partitions=[r["partition"] for r in bad],
            ranges=ranges,
            ranges_total=total,
            samples=samples,
            detail=(
                "checksum differs in partition(s) "
                + ", ".join(str(r["partition"]) for r in bad)
                + (
                    f"; {rows_changed} row(s) whose payload differs from its source record"
                    if rows_changed
                    else "; no single row differs: the difference comes from missing, extra or duplicated rows"
                )
                if bad or rows_changed
                else ""
            ),
            group=CheckGroup.ROWS,
        )

    # -- samples ----------------------------------------------------------------------
    def _rows(self, sql: str) -> list[dict]:
        return [jsonable(r) for r in self.con.sql(sql).to_arrow_table().to_pylist()]

    def source_rows(self, keys: list[tuple[int, int]]) -> list[dict]:
        """The judged source records at these coordinates."""
        if not keys:
            return []
        cols = ", ".join(ident(c) for c in ["_partition", "_offset", *self.columns, "reason"])
        return self._rows(f"SELECT {cols} FROM src WHERE {at_keys(keys)} ORDER BY _partition, _offset")

    def sink_rows(self, keys: list[tuple[int, int]]) -> list[dict]:
        """The sink rows at these coordinates, from bronze and quarantine, with their table."""
        if not keys:
            return []
        fields = ", ".join(ident(c) for c in self.columns)
        where = at_keys(keys)
        b = self._rows(
            f"SELECT '{SinkName.BRONZE.value}' AS \"table\", _partition, _offset, {fields}, "
            f"NULL::VARCHAR AS reason, _batch_id FROM bronze WHERE {where}"
        )
        q = self._rows(
            f"SELECT '{SinkName.QUARANTINE.value}' AS \"table\", _partition, _offset, reason, _batch_id "
            f"FROM quarantine WHERE {where}"
        )
        empty = dict.fromkeys(self.columns)
        q = [{"table": r["table"], "_partition": r["_partition"], "_offset": r["_offset"], **empty, **r} for r in q]
        return sorted(b + q, key=lambda r: (r["_partition"], r["_offset"], r["table"]))
