"""Schema evolution of a pipeline's existing tables, safely.

A changed declaration meets tables written under the old one. Compatible
changes keep every old row meaningful and are applied before the first batch,
in commits the ledger counts as maintenance (no row changes):

- a new optional field: `ALTER TABLE … ADD COLUMNS` (old rows read it as NULL), in bronze and in
  the keyed table (both hold the declared fields);
- a type widened without loss (`int` to `long`, a decimal given more digits): the table rewritten
  once with the column cast, in one overwrite commit (`overwriteSchema`). The derived tables follow
  by themselves: `sum(long)` is stored as decimal(38,0) where `sum(int)` was a bigint, `max(long)`
  as a bigint, a widened key or group as its new type, and every stored value casts exactly.
  Not Delta's type widening: its `typeWidening` table feature (and the `checkpointProtection`
  that dropping it leaves) is one the pinned delta-rs can neither read nor write, and delta-rs
  is the driver's writer and the audits' independent reader. The rewrite costs a pass over the
  table, once; old versions stay readable as they were.

Everything else would change what old rows mean and is refused at start with
the field, what changed, and the fix: a removed or renamed field, a narrowed or
changed type, a new required field, changed aggregates. A compatible change never
stops a pipeline (tests/integration/test_evolution.py proves each against each
aggregate function whose stored type changes).
"""

from __future__ import annotations

import json

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DecimalType, IntegerType, LongType, StructType

from onceflow.deltars import table_schema_json
from onceflow.errors import ConfigError
from onceflow.ledger import MAINTENANCE_KEY
from onceflow.sink_kinds import FIELD_TABLES, SinkName
from onceflow.storage.commit_lock import commit_lock

# the integer digits each integral type can hold: a decimal with as many keeps every value
_INTEGER_DIGITS: dict[DataType, int] = {IntegerType(): 10, LongType(): 19}


def widens(old: DataType, new: DataType) -> bool:
    """True where every value of `old` casts to `new` exactly: int to long, an integer to a
    decimal with as many integer digits, a decimal to one with no fewer integer and fraction digits.
    (Delta's own type widening is not used: see the module's docstring.)"""
    if old == new:
        return False
    if isinstance(new, DecimalType):
        if isinstance(old, DecimalType):
            return new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
        digits = _INTEGER_DIGITS.get(old)
        return digits is not None and new.precision - new.scale >= digits
    return (old, new) == (IntegerType(), LongType())


def _fields(schema: StructType) -> dict[str, DataType]:
    return {f.name.lower(): f.dataType for f in schema.fields}


def evolve_table(
    spark: SparkSession, path: str, sink: str, declared_ddl: str, optional: set[str], pipeline_file: str
) -> list[str]:
    """Bring the table at `path` to the declared schema, or refuse; returns what was done."""
    # read from the log with delta-rs: Spark would build the table's snapshot state for it, seconds
    # of a fresh driver's start (the batches load what they need when they run)
    existing = StructType.fromJson(json.loads(table_schema_json(path)))
    declared = spark.createDataFrame([], declared_ddl).schema
    have, want = _fields(existing), _fields(declared)
    names = {f.name.lower(): f.name for f in declared.fields}
    fix = (
        f"Fix: restore the field's declaration in {pipeline_file}, or give the new event a new pipeline "
        f"(new tables and checkpoint); see docs/pipeline-config.md#changing-a-schema"
    )
    problems: list[str] = []
    added, widened = [], []
    for name, old in have.items():
        if name not in want:
            problems.append(
                f"{sink}: column `{name}` ({old.simpleString()}) is no longer declared (removed or renamed)"
            )
        elif want[name] != old:
            if widens(old, want[name]):
                widened.append((names[name], old, want[name]))
            else:
                problems.append(
                    f"{sink}: column `{name}` is {old.simpleString()} in the table but declared "
                    f"{want[name].simpleString()} (only a widening without loss, such as int → long, is applied)"
                )
    for name, new in want.items():
        if name not in have:
            if sink in FIELD_TABLES and name in optional:
                added.append((names[name], new))
            else:
                what = "a required field" if sink in FIELD_TABLES else "a new aggregates column"
                problems.append(f"{sink}: `{names[name]}` is {what}: rows already written have no value for it")
    if problems and sink == SinkName.AGGREGATES:
        fix = (
            "Fix: the aggregates are derived from bronze: move the table at "
            f"{path} aside (or delete it) and the next run creates it as declared and merges every batch "
            "bronze holds into it (docs/pipeline-config.md#changing-a-schema)"
        )
    if problems:
        raise ConfigError(
            f"{pipeline_file}: the declaration no longer fits the existing {sink} table {path}:\n  "
            + "\n  ".join(problems)
            + f"\n{fix}"
        )
    done: list[str] = []
    if added or widened:
        _alter(spark, path, sink, added, widened, done)
    return done


def _alter(
    spark: SparkSession,
    path: str,
    sink: str,
    added: list,
    widened: list[tuple[str, DataType, DataType]],
    done: list[str],
) -> None:
    """The evolution's commits, marked as onceflow maintenance in their commit info."""
    key = "spark.databricks.delta.commitInfo.userMetadata"
    spark.conf.set(key, json.dumps({MAINTENANCE_KEY: "schema evolution"}))
    try:
        _apply(spark, path, sink, added, widened, done)
    finally:
        spark.conf.unset(key)


def _apply(spark: SparkSession, path: str, sink: str, added: list, widened: list, done: list[str]) -> None:
    if added:
        cols = ", ".join(f"`{n}` {t.simpleString()}" for n, t in added)
        with commit_lock(path):
            spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({cols})")
        done.append(f"{sink}: added optional column(s) {', '.join(n for n, _ in added)} (old rows read NULL)")
    if widened:
        _rewrite_widened(spark, path, widened)
        what = ", ".join(f"{n} from {old.simpleString()} to {new.simpleString()}" for n, old, new in widened)
        done.append(f"{sink}: widened {what} (the table rewritten once)")


def _rewrite_widened(spark: SparkSession, path: str, widened: list[tuple[str, DataType, DataType]]) -> None:
    """One overwrite of every row with the widened columns cast to their declared types: a plain schema
    change any Delta reader and writer knows (the table's properties, its idempotence ids and its
    history stay). Each cast is exact (`widens`), so no value changes."""
    wide = {n.lower(): new for n, _, new in widened}
    table = spark.read.format("delta").load(path)
    cols = [
        F.col(f"`{c}`").cast(wide[c.lower()]).alias(c) if c.lower() in wide else F.col(f"`{c}`") for c in table.columns
    ]
    with commit_lock(path):
        table.select(*cols).write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
