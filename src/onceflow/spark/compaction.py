"""Compaction of the job's tables, from the follower thread, off the batches' path.

Every batch adds small files (one per Kafka partition to bronze, one to quarantine, a
few to the aggregates per merge); left alone, reads and audits slow down as a stream
goes on. Delta's auto compaction merges them, but its post-commit check rebuilds the
table's snapshot state after every commit: about 0.4 s of a 1,000-record batch on 2
cores (docs/benchmarks.md). So onceflow's sessions turn that hook off
(spark/session.py) and this does the same job between batches: a table whose
`delta.autoOptimize.autoCompact` property is on (sinks.<name>.auto_compact) is
compacted once `minNumFiles` files smaller than `minFileSize` have gathered — the
session's `spark.databricks.delta.autoCompact.*` settings, Delta's own thresholds —
by an OPTIMIZE that rewrites only those small files. Its commits move files and change
no row; the ledgers count them as maintenance.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import SparkSession

from onceflow.deltars import Appender
from onceflow.spark.session import COMPACT_MIN_FILE_BYTES
from onceflow.storage.commit_lock import commit_lock
from onceflow.tables import AUTO_COMPACT

COMPACT_AFTER_FILES = 50  # Delta's autoCompact.minNumFiles
TARGET_FILE_BYTES = 128 * 1024 * 1024  # Delta's autoCompact.maxFileSize: the size compaction writes


def compaction_settings(spark: SparkSession) -> tuple[int, int]:
    """(files, bytes): compact once this many files smaller than this many bytes have gathered,
    from the session's Delta auto compaction settings (Delta's defaults when unset)."""

    def setting(key: str, default: int) -> int:
        value = spark.conf.get(f"spark.databricks.delta.autoCompact.{key}", None)
        return int(value) if value is not None and str(value).isdigit() else default

    return setting("minNumFiles", COMPACT_AFTER_FILES), setting("minFileSize", COMPACT_MIN_FILE_BYTES)


class Compactor:
    """Compacts a run's tables when enough small files have gathered in them."""

    def __init__(self, spark: SparkSession, paths: dict[str, str], log: Callable[[str], None] = lambda msg: None):
        self.spark = spark  # the follower's own session
        self.after, self.small = compaction_settings(spark)
        self.tables = {name: Appender(path) for name, path in paths.items()}
        self.log = log
        self.compactions: dict[str, int] = {name: 0 for name in paths}
        spark.conf.set("spark.databricks.delta.optimize.minFileSize", str(self.small))
        spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(TARGET_FILE_BYTES))

    def run(self) -> list[str]:
        """Compact every table that wants it and has gathered enough small files; the names compacted."""
        from delta.tables import DeltaTable

        done = []
        for name, table in self.tables.items():
            handle = table.table()
            if str(handle.metadata().configuration.get(AUTO_COMPACT, "false")).lower() != "true":
                continue
            small = table.small_files(self.small)
            if small < self.after:
                continue
            with commit_lock(table.path):
                DeltaTable.forPath(self.spark, table.path).optimize().executeCompaction()
            self.compactions[name] += 1
            done.append(name)
            self.log(f"compacted {name}: {small} small files")
        return done
