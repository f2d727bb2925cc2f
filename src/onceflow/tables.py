"""The Delta tables a pipeline writes: their schemas, in one place.

The streaming job writes them, the audit reads them, the docs describe them;
all three take the column names from here.
"""

from __future__ import annotations

# provenance of every row: where in Kafka it came from, which batch wrote it
PROVENANCE_DDL = (
    "_topic STRING, _partition INT, _offset BIGINT, _kafka_ts TIMESTAMP, "
    "_batch_id BIGINT, _generation INT, _ingested_at TIMESTAMP"
)

BRONZE_DDL = (
    "event_id STRING, account_id STRING, amount DECIMAL(18,2), currency STRING, "
    "event_time TIMESTAMP, " + PROVENANCE_DDL
)

QUARANTINE_DDL = "_key BINARY, _value BINARY, reason STRING, detail STRING, " + PROVENANCE_DDL

AGGREGATES_DDL = (
    "account_id STRING, window_start TIMESTAMP, window_end TIMESTAMP, events BIGINT, "
    "amount_sum DECIMAL(28,2), first_batch_id BIGINT, last_batch_id BIGINT"
)

# The aggregates MERGE updates a few rows per batch: with deletion vectors it marks their old
# versions deleted instead of rewriting every file that holds one (docs/exactly-once.md).
DELETION_VECTORS = "delta.enableDeletionVectors"
# Every batch adds small files; Delta's auto compaction merges them after a write once enough
# have gathered, so reads and audits do not slow down as a long-running stream goes on.
AUTO_COMPACT = "delta.autoOptimize.autoCompact"

# a row of bronze or quarantine is identified by its Kafka coordinates
SOURCE_KEY = ("_topic", "_partition", "_offset")
AGGREGATE_KEY = ("account_id", "window_start")
