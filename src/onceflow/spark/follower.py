"""The follower: what comes after the batches, in a thread of its own, off their path.

A micro-batch commits bronze and quarantine, hands bronze's ledger entry here and is
done; it waits neither for the aggregates, the keyed table nor compaction. The follower

- merges, on its own schedule (`sinks.aggregates.merge_every` after the previous merge
  ends, in a continuous run; once at the end of an available-now run), every bronze
  batch that arrived since its last merge into the aggregates: it reads those batches'
  rows back from bronze by (generation, batch id), adds their per-window metrics in one
  idempotent MERGE, and writes one ledger entry per bronze batch into that commit
  (ledger.group_json). So a one-second stream pays for the MERGE every few seconds
  instead of every batch (docs/exactly-once.md#the-aggregates-follow-bronze);
- merges the same batches into the keyed table (sinks.current, docs/cdc.md): per key the
  newest change of those rows, where it is newer than the table's (CurrentMerger), on the
  same terms: its own ledger entries, txn ids and floor; small batches' rows, handed over by
  the batch thread, with delta-rs from the driver (spark/sinks/current_rs.py);
- compacts the tables once enough small files have gathered (spark/compaction.py).

The aggregates' checkpoint is their own ledger: a run starts from the bronze batches
that reach past the aggregates' committed offsets (ledger.follower_lag), so a kill
between bronze's commit and the aggregates' loses nothing and merges nothing twice;
the next run merges those batches from bronze. Rows below those offsets are skipped,
as a sink floor skips them: after bronze was restored from an older copy and a new
generation re-read what it lost, the aggregates do not count those rows twice. Late
events (older than the watermark) are added, never dropped, so the table always
equals a recomputation from the bronze batches its ledger holds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from onceflow import faults
from onceflow.config import Pipeline
from onceflow.deltars import Appender
from onceflow.errors import TableFeatureError
from onceflow.ledger import EntryKind, Ledger, LedgerEntry, app_id, follower_lag, group_json, loss_app_id
from onceflow.sink_kinds import SinkName
from onceflow.sinks import table_path, table_paths
from onceflow.spark.compaction import Compactor
from onceflow.spark.floors import above, raised
from onceflow.spark.sinks import current_rs, delta

if TYPE_CHECKING:
    import pyarrow as pa

MAX_GROUP_BATCHES = 500  # bronze batches merged in one commit at most (its metadata holds an entry each)
AVAILABLE_NOW_GROUP_ROWS = 5_000_000  # an available-now run merges before its end once this many rows wait
COMPACT_EVERY = 10.0  # seconds between compaction checks of a continuous run without aggregates
KEPT_ROWS = 200_000  # bronze rows the keyed table's follower keeps on the driver for its next merge, at most

Stats = dict[tuple[int, int], Any]  # per bronze batch (generation, batch id): its `rows` and what `_extra` reads
Write = Callable[[str, int, str], None]  # a group's one idempotent commit: (app id, txn version, entries)


def _last_watermark(ledger: Ledger) -> datetime | None:
    """The aggregates watermark the newest entry recorded (its `extra`)."""
    last = ledger.last
    value = (last.extra or {}).get("watermark") if last else None
    return datetime.fromisoformat(value) if value else None


def window_floor(moment: datetime | None, window_seconds: float) -> datetime | None:
    """The start of the tumbling window (epoch-aligned, as Spark's `window()`) holding `moment`."""
    if moment is None:
        return None
    micros = int(window_seconds * 1_000_000)
    epoch = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    since = int((epoch - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1))
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=since - since % micros)


def batches_filter(entries: list[LedgerEntry]) -> Column:
    """Bronze rows written by these batches: `_generation`/`_batch_id` runs, so Delta can skip
    files by their statistics (LOSS entries hold no rows)."""
    runs: list[tuple[int, int, int]] = []  # generation, first batch, last batch
    for e in entries:
        if e.kind == EntryKind.LOSS:
            continue
        if runs and runs[-1][0] == e.generation and runs[-1][2] + 1 == e.batch_id:
            runs[-1] = (e.generation, runs[-1][1], e.batch_id)
        else:
            runs.append((e.generation, e.batch_id, e.batch_id))
    cond = F.lit(False)
    for g, lo, hi in runs:
        cond = cond | ((F.col("_generation") == g) & F.col("_batch_id").between(lo, hi))
    return cond


def own_session(spark: SparkSession) -> SparkSession:
    """A session of the same Spark app with the same settings, for the follower's thread: the
    MERGE's txn settings (session conf) must never reach a bronze write of the batch thread."""
    session = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if spark.conf.isModifiable(key):
            session.conf.set(key, value)
    return session


class BronzeFollower:
    """What the aggregates and the keyed table share as followers of bronze: the bronze batches
    still to merge (from its ledger at start, then as the batches commit), the floor below which
    the table holds every bronze row, and one commit per group of batches holding an entry each.
    A subclass says what a merge writes (`_write`) and what its entries record (`_extra`)."""

    sink: SinkName  # its name in the ledgers (sink_kinds.FOLLOWS)
    via = ""  # how the last merge was made, when not through Spark (its log line says so)

    def __init__(
        self,
        spark: SparkSession,
        pipeline: Pipeline,
        ledgers: dict[str, Ledger],
        log: Callable[[str], None] = lambda msg: None,
    ):
        pending, _ = follower_lag(ledgers[SinkName.BRONZE], ledgers[self.sink])
        self.spark = spark
        self.pipeline = pipeline
        self.bronze_path = table_path(pipeline, SinkName.BRONZE)
        self.path = table_path(pipeline, self.sink)
        self.log = log
        self.pending: list[LedgerEntry] = list(pending)
        # per partition, the offset below which the table holds every bronze row
        self.floor: dict[int, int] = ledgers[self.sink].committed_offsets()
        self._known = {**self.floor, **ledgers[SinkName.BRONZE].committed_offsets()}  # bronze's end, as far as told
        self._bronze = Appender(self.bronze_path)  # for bronze's version only: the follower never writes it
        self._empty = Appender(self.path)
        self._begin(ledgers)

    def _begin(self, ledgers: dict[str, Ledger]) -> None:
        """What a subclass reads of its declaration and its ledger at the start."""

    def maintain(self) -> None:
        """Upkeep after a cycle's merges (the keyed table purges old tombstones)."""

    def add(self, entry: LedgerEntry, rows: pa.Table | None = None) -> bool:
        """Queue a bronze batch (`rows`: its bronze rows, when the batch committed them from the
        driver); False for a replayed one it already has or merged."""
        if not any(o > self._known.get(p, -1) for p, o in entry.end.items()):
            return False
        self._known.update(entry.end)
        self.pending.append(entry)
        return True

    def waiting_rows(self) -> int:
        return sum(e.rows for e in self.pending)

    def _stats(self, rows: DataFrame) -> dict[tuple[int, int], Row]:
        """Per bronze batch (generation, batch id): its rows' count (`rows`) and what `_extra` needs."""
        return {
            (r["_generation"], r["_batch_id"]): r
            for r in rows.groupBy("_generation", "_batch_id").agg(F.count(F.lit(1)).alias("rows")).collect()
        }

    def _extra(self, stats: Row | None) -> dict:
        """What an entry records beside its offsets and rows (the aggregates: lateness, watermark)."""
        return {}

    def _write(self, rows: DataFrame, stats: dict[tuple[int, int], Row], app: str, version: int, meta: str) -> None:
        """The one idempotent commit of a group that holds rows (`meta`: the entries)."""
        raise NotImplementedError

    def _plan(self, group: list[LedgerEntry]) -> tuple[Stats, Write]:
        """The group's rows read back from bronze through Spark: their stats, and its commit."""
        version = self._bronze.table().version()  # pinned: the MERGE may read its source twice
        rows = (
            self.spark.read.format("delta")
            .option("versionAsOf", version)
            .load(self.bronze_path)
            .where(batches_filter(group) & above(self.floor))
        )
        stats = self._stats(rows)
        return stats, lambda app, txn_version, meta: self._write(rows, stats, app, txn_version, meta)

    def merge(self, group: list[LedgerEntry]) -> None:
        """One commit to the table holding `group`'s bronze batches and an entry each."""
        started = time.monotonic()
        stats, write = self._plan(group)
        entries = []
        for e in group:
            s = stats.get((e.generation, e.batch_id))
            entries.append(
                LedgerEntry(
                    pipeline=e.pipeline,
                    sink=self.sink,
                    generation=e.generation,
                    batch_id=e.batch_id,
                    topic=e.topic,
                    start=raised(e.start, self.floor),
                    end=raised(e.end, self.floor),
                    rows=s["rows"] if s else 0,
                    kind=e.kind,
                    extra=self._extra(s),
                )
            )
        last = group[-1]
        app, txn_version = (
            (loss_app_id(last.pipeline, self.sink, last.generation), 0)
            if last.kind == EntryKind.LOSS
            else (app_id(last.pipeline, self.sink, last.generation), last.batch_id)
        )
        for e in group:
            faults.maybe_crash(f"before_{self.sink}_commit", e.batch_id)
        total = sum(r["rows"] for r in stats.values())
        if total:
            write(app, txn_version, group_json(entries))
        else:  # no rows: an empty commit keeps the ledger contiguous (delta-rs: milliseconds)
            self._empty.append(None, group_json(entries), app, txn_version)
        for e in group:
            faults.maybe_crash(f"after_{self.sink}_commit", e.batch_id)
        for e in entries:
            self.floor.update(e.end)
        span = merged_span([(e.generation, e.batch_id) for e in group])
        self.log(
            f"{self.pipeline.name}: {self.sink}: merged {span} ({total:,} rows){self.via} "
            f"in {time.monotonic() - started:.1f}s"
        )


def merged_span(batches: list[tuple[int, int]]) -> str:
    """The (generation, batch id)s of one merge in words: `batch 7`, `batches 3–9`, and per
    generation across a change (`batches 56–58 of generation 0, 0–3 of generation 1`), since batch
    ids start again in a new generation and one range across it (`56–3`) reads as nonsense."""
    ids: dict[int, list[int]] = {}
    for generation, batch in batches:
        ids.setdefault(generation, []).append(batch)

    def run(b: list[int]) -> str:
        return f"{b[0]}" if len(b) == 1 else f"{b[0]}–{b[-1]}"

    if len(ids) == 1:
        only = next(iter(ids.values()))
        return f"batch {only[0]}" if len(only) == 1 else f"batches {run(only)}"
    return "batches " + ", ".join(f"{run(b)} of generation {g}" for g, b in ids.items())


class AggregatesMerger(BronzeFollower):
    """The aggregates' follower: per-window metrics of the new bronze rows added in one MERGE."""

    sink = SinkName.AGGREGATES

    def _begin(self, ledgers: dict[str, Ledger]) -> None:
        assert self.pipeline.sinks.aggregates is not None  # a merger only for a pipeline with sinks.aggregates
        self.aggs = self.pipeline.sinks.aggregates
        self.watermark = _last_watermark(ledgers[SinkName.AGGREGATES])

    def _stats(self, rows: DataFrame) -> dict[tuple[int, int], Row]:
        event_time = F.col(self.pipeline.schema.event_time_column)
        late = event_time < F.lit(self.watermark) if self.watermark is not None else F.lit(False)
        stats = {
            (r["_generation"], r["_batch_id"]): r
            for r in rows.groupBy("_generation", "_batch_id")
            .agg(
                F.count(F.lit(1)).alias("rows"),
                F.max(event_time).alias("max_time"),
                F.min(event_time).alias("min_time"),
                F.count(F.when(late, 1)).alias("late"),
            )
            .collect()
        }
        newest = max((r["max_time"] for r in stats.values()), default=None)
        if newest is not None:  # the entries record the watermark after this merge
            candidate = newest.replace(tzinfo=UTC) - timedelta(seconds=self.aggs.watermark_seconds)
            if self.watermark is None or candidate > self.watermark:
                self.watermark = candidate
        return stats

    def _extra(self, stats: Row | None) -> dict:
        extra: dict = {"late_events": stats["late"] if stats else 0}
        if self.watermark is not None:
            extra["watermark"] = self.watermark.isoformat()
        return extra

    def _write(self, rows: DataFrame, stats: dict[tuple[int, int], Row], app: str, version: int, meta: str) -> None:
        schema, aggs = self.pipeline.schema, self.aggs
        oldest = min(r["min_time"] for r in stats.values() if r["rows"])
        delta.merge_aggregates(
            self.spark,
            self.path,
            delta.batch_aggregates(rows, schema, aggs, aggs.window),
            aggs,
            app,
            version,
            meta,
            window_floor(oldest, aggs.window_seconds),
        )


class CurrentMerger(BronzeFollower):
    """The keyed table's follower (sinks.current, docs/cdc.md): per key, the newest change of the
    new bronze rows, merged where it is newer than the table's. A group whose rows the batch
    thread handed over (small batches, KEPT_ROWS at most) is merged from them with delta-rs
    while the table allows it (current_rs.driver_mergeable); any other through Spark, read back
    from bronze. The table's tombstones older than `tombstone_retention` are purged now and
    then, in a commit of their own."""

    sink = SinkName.CURRENT

    def _begin(self, ledgers: dict[str, Ledger]) -> None:
        current, keyed = self.pipeline.sinks.current, self.pipeline.keyed
        assert current is not None and keyed is not None  # a merger only for a pipeline with sinks.current
        self.current = current
        self.keyed = keyed
        self._purged: float | None = None  # when the tombstones were last purged (monotonic)
        self._rows: dict[tuple[int, int], pa.Table] = {}  # the pending batches' bronze rows handed over
        self._kept = 0  # rows in _rows
        self._held = threading.Lock()  # _rows and _kept: the batch thread adds, the follower's takes
        self._driver = True  # False once delta-rs refused the table: Spark merges the rest of the run
        own = ("_op", "_sequence") if keyed.debezium else ()
        self._columns = [*self.pipeline.schema.names, *own, "_partition", "_offset", "_batch_id", "_generation"]

    def add(self, entry: LedgerEntry, rows: pa.Table | None = None) -> bool:
        if not super().add(entry):
            return False
        with self._held:
            if rows is not None and self._driver and self._kept + rows.num_rows <= KEPT_ROWS:
                self._rows[(entry.generation, entry.batch_id)] = rows.select(self._columns)
                self._kept += rows.num_rows
        return True

    def _plan(self, group: list[LedgerEntry]) -> tuple[Stats, Write]:
        """From the rows handed over when each batch of the group has them and the table allows
        it; else through Spark."""
        batches = [(e.generation, e.batch_id) for e in group]
        with self._held:
            held = [self._rows.pop(b) for b in batches if b in self._rows]
            self._kept -= sum(r.num_rows for r in held)
        self.via = ""
        if (
            len(held) < len(batches)
            or not self._driver
            or not current_rs.driver_mergeable(self._empty, self.current.driver_merge_max_mib * 2**20)
        ):
            return super()._plan(group)
        import pyarrow as pa

        kept = [current_rs.above(r, self.floor) for r in held]
        stats: Stats = {b: {"rows": r.num_rows} for b, r in zip(batches, kept, strict=True)}
        rows = pa.concat_tables(kept, promote_options="default")
        changes = current_rs.newest_changes(rows, self.pipeline.schema, self.keyed)
        self.via = " with delta-rs"

        def write(app: str, version: int, meta: str) -> None:
            try:
                current_rs.merge_current(self._empty, changes, self.keyed, app, version, meta)
            except TableFeatureError as exc:  # Spark's writer takes this group and the rest of the run
                self._driver = False
                self.log(
                    f"{self.pipeline.name}: current: delta-rs cannot merge into {exc.path} ({exc.reason}): "
                    "this run merges through Spark"
                )
                _, spark_write = super(CurrentMerger, self)._plan(group)
                spark_write(app, version, meta)

        return stats, write

    def _write(self, rows: DataFrame, stats: dict[tuple[int, int], Row], app: str, version: int, meta: str) -> None:
        changes = delta.newest_changes(rows, self.pipeline.schema, self.keyed)
        delta.merge_current(self.spark, self.path, changes, self.keyed, app, version, meta)

    def maintain(self) -> None:
        """Delete the tombstones older than the retention (docs/cdc.md#tombstones-and-retention):
        at the first cycle of a run, then every tenth of the retention (at most hourly)."""
        every = min(self.current.tombstone_retention_seconds / 10, 3600.0)
        if self._purged is not None and time.monotonic() - self._purged < every:
            return
        removed = delta.purge_tombstones(self.spark, self.path, self.current.tombstone_retention_seconds)
        self._purged = time.monotonic()
        if removed:
            past = self.current.tombstone_retention
            self.log(f"{self.pipeline.name}: current: purged {removed:,} tombstone(s) older than {past}")


class Schedule:
    """When the follower's next cycle is due. In a continuous run, `every` seconds after the
    previous cycle ENDED, once something waits: counted from its start, a MERGE slower than
    `every` would start the next one at once and hold a core for good, and the batches'
    latency is what pays (docs/benchmarks.md, the follower's pause). In an available-now run
    (`every` None), at the end, unless much has gathered. No Spark here: tested alone."""

    def __init__(self, every: float | None, clock: Callable[[], float] = time.monotonic):
        self.every = every
        self.clock = clock
        self._ended = clock()

    def due(self, batches: int, rows: int, new: bool) -> bool:
        """`batches` bronze batches (`rows` rows) wait to be merged; `new`: any batch committed
        since the last cycle (a pipeline without aggregates still compacts)."""
        if batches >= MAX_GROUP_BATCHES:
            return True
        if self.every is None:
            return batches > 0 and rows >= AVAILABLE_NOW_GROUP_ROWS
        return (batches > 0 or new) and self.clock() - self._ended >= self.every

    def wait(self) -> float | None:
        """Seconds to sleep before asking again (None: until woken)."""
        return None if self.every is None else max(0.05, self.every - (self.clock() - self._ended))

    def cycle_ended(self) -> None:
        self._ended = self.clock()


class Follower:
    """The run's second thread: merges the aggregates and the keyed table (those the pipeline
    declares) and compacts the tables, on its own schedule. Its errors fail the run (run_ingest)."""

    def __init__(
        self,
        spark: SparkSession,
        pipeline: Pipeline,
        ledgers: dict[str, Ledger],
        continuous: bool,
        log: Callable[[str], None] = lambda msg: None,
    ):
        self.spark = own_session(spark)
        self.pipeline = pipeline
        self.mergers: list[BronzeFollower] = []
        if pipeline.sinks.aggregates is not None:
            self.mergers.append(AggregatesMerger(self.spark, pipeline, ledgers, log))
        if pipeline.sinks.current is not None:
            self.mergers.append(CurrentMerger(self.spark, pipeline, ledgers, log))
        self.compactor = Compactor(self.spark, table_paths(pipeline), log=lambda msg: log(f"{pipeline.name}: {msg}"))
        declared = [s.merge_every_seconds for s in (pipeline.sinks.aggregates, pipeline.sinks.current) if s is not None]
        every = min(declared, default=COMPACT_EVERY)
        self.schedule = Schedule(every if continuous else None)  # available-now: at the end
        self.error: BaseException | None = None
        self._new = False  # batches committed since the last cycle
        self._cv = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"onceflow-follower-{pipeline.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, entry: LedgerEntry, rows: pa.Table | None = None) -> None:
        """A bronze batch committed (or found committed, on a replay): merge it in a while.
        `rows`: its bronze rows, when the batch committed them from the driver."""
        with self._cv:
            self._new = True
            added = [m.add(entry, rows) for m in self.mergers]
            if any(added):
                self._cv.notify()

    def finish(self) -> None:
        """Stop the thread and do what is left, here: at the end of a run the followers hold
        every batch bronze holds, and the tables are compacted. Raises what failed."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        if self._thread.is_alive():
            self._thread.join()
        if self.error is not None:
            raise self.error
        self._cycle(everything=True)

    def _due(self) -> bool:
        batches = max((len(m.pending) for m in self.mergers), default=0)
        rows = max((m.waiting_rows() for m in self.mergers), default=0)
        return self.schedule.due(batches, rows, self._new)

    def _run(self) -> None:
        try:
            while True:
                with self._cv:
                    while not self._stopping and not self._due():
                        self._cv.wait(timeout=self.schedule.wait())
                    if self._stopping:
                        return
                self._cycle()
        except BaseException as exc:
            self.error = exc

    def _cycle(self, everything: bool = False) -> None:
        """Merge what waits (all of it with `everything`, else one group per table), purge old
        tombstones when due, then compact; the schedule counts its pause from here (Schedule)."""
        with self._cv:
            self._new = False
        for merger in self.mergers:
            while True:
                with self._cv:  # the batch thread appends meanwhile
                    group = merger.pending[:MAX_GROUP_BATCHES]
                if not group:
                    break
                merger.merge(group)
                with self._cv:
                    del merger.pending[: len(group)]
                if not everything:
                    break
            merger.maintain()
        self.compactor.run()
        self.schedule.cycle_ended()
