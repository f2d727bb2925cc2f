"""Streaming progress → status.jsonl, for health checks and Airflow triggers, and
(given a `log`) one readable line per committed batch (onceflow.spark.batch_log).

Runs in the driver's Python process (PySpark's StreamingQueryListener), so it
sees every committed micro-batch and every idle heartbeat without polling.
"""

from __future__ import annotations

import json
import time

from pyspark.sql.streaming import StreamingQueryListener

from onceflow import faults, offsets
from onceflow.spark.batch_log import BatchLog, lag_of
from onceflow.state.status import RunEvent, StatusLog


def _end_offsets(progress, topic: str, which: str = "endOffset") -> dict[str, int]:
    """The Kafka end (or `latestOffset`) offsets of a progress event; they may arrive as JSON text (Spark 4)."""
    for source in getattr(progress, "sources", None) or []:
        raw = getattr(source, which, None)
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError:
                continue
        if isinstance(raw, dict) and topic in raw:
            return offsets.as_json(offsets.from_json(raw[topic]))
    return {}


class StatusListener(StreamingQueryListener):
    def __init__(
        self,
        status: StatusLog,
        run_id: str,
        topic: str,
        log=None,
        max_lag: int | None = None,
        trigger_seconds: float | None = None,
    ):
        self.batch_log = BatchLog(log, max_lag, trigger_seconds=trigger_seconds) if log is not None else None
        self.status = status
        self.run_id = run_id
        self.topic = topic
        self.last_data_at = time.monotonic()  # for --until-idle: the last batch that read records
        self.last_empty_at = float("-inf")  # ... and the last time Spark looked and found none
        self.batches = 0
        self.rows = 0
        self.last_batch_id = -1

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        p = event.progress
        rows = int(p.numInputRows or 0)
        if rows:
            self.last_data_at = time.monotonic()
        else:
            self.last_empty_at = time.monotonic()
        self.batches += 1
        self.rows += rows
        self.last_batch_id = max(self.last_batch_id, int(p.batchId))
        end = _end_offsets(p, self.topic)
        lag = lag_of(_end_offsets(p, self.topic, "latestOffset"), end)
        self.status.append(
            RunEvent.PROGRESS,
            run_id=self.run_id,
            query_id=str(p.id),
            batch_id=int(p.batchId),
            input_rows=rows,
            input_rows_per_second=round(float(p.inputRowsPerSecond or 0), 1),
            processed_rows_per_second=round(float(p.processedRowsPerSecond or 0), 1),
            batch_duration_ms=int(p.batchDuration or 0),
            durations_ms=dict(p.durationMs or {}),
            topic=self.topic,
            start_offsets=_end_offsets(p, self.topic, "startOffset"),
            end_offsets=end,
            lag=lag,
        )
        if self.batch_log is not None:
            self.batch_log.batch(int(p.batchId), rows, int(p.batchDuration or 0) / 1000, lag)
        # progress is posted after commits/N is written: the "after both" fault window
        faults.maybe_crash("after_checkpoint_commit", int(p.batchId))

    def onQueryIdle(self, event) -> None:
        self.last_empty_at = time.monotonic()
        self.status.append(RunEvent.IDLE, run_id=self.run_id, query_id=str(event.id))
        if self.batch_log is not None:
            self.batch_log.idle()

    def onQueryTerminated(self, event) -> None:
        self.close()

    def close(self) -> None:
        """Print the batches not printed yet (at most `every` seconds' worth); safe to call twice."""
        if self.batch_log is not None:
            self.batch_log.flush()
