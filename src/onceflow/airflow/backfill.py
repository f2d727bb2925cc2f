"""Backfill: validate a requested offset or time range, then reprocess it with the backfill app.

The range is checked before any Spark starts: offsets per partition, start <=
end, within what Kafka still holds (a range past retention would silently shrink);
a time range becomes offsets with Kafka's offsets-for-times look-up. The backfill
app writes only records the tables do not hold yet, so repeating a range is a no-op.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from onceflow import offsets
from onceflow.airflow.hooks import OnceflowHook
from onceflow.airflow.spark_submit import OnceflowSparkSubmitOperator
from onceflow.errors import RangeError
from onceflow.kafka.client import Cluster, as_client
from onceflow.ranges import offset_range

__all__ = ["BackfillOperator", "BackfillRangeOperator", "RangeError", "kafka_offsets_for_times", "validate_range"]


def _time_ms(value: Any, field: str) -> int:
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise RangeError(f"{field}: {value!r} is not an ISO-8601 time. Fix: e.g. 2026-11-22T10:00:00Z") from None
    if moment.tzinfo is None:
        raise RangeError(f"{field}: {value!r} has no time zone. Fix: add Z or +00:00")
    return int(moment.timestamp() * 1000)


def validate_range(
    params: dict, watermarks: dict[int, tuple[int, int]], offsets_for_times=None
) -> dict[str, dict[str, int]]:
    """Params -> {"start": {"p": offset}, "end": {"p": offset}} within Kafka's (low, high) per partition.

    `offsets_for_times(ms) -> {partition: offset}` resolves a time range.
    """
    by_offsets = params.get("start_offsets") is not None or params.get("end_offsets") is not None
    by_time = params.get("start_time") is not None or params.get("end_time") is not None
    if by_offsets == by_time:
        raise RangeError("give either start_offsets + end_offsets or start_time + end_time (not both, not neither)")
    if by_offsets:
        if params.get("start_offsets") is None or params.get("end_offsets") is None:
            raise RangeError("start_offsets and end_offsets go together. Fix: give both")
        start, end = offset_range(params["start_offsets"], params["end_offsets"])
    else:
        if params.get("start_time") is None or params.get("end_time") is None:
            raise RangeError("start_time and end_time go together. Fix: give both")
        t0, t1 = _time_ms(params["start_time"], "start_time"), _time_ms(params["end_time"], "end_time")
        if t0 >= t1:
            raise RangeError(f"start_time {params['start_time']} is not before end_time {params['end_time']}")
        if offsets_for_times is None:
            raise RangeError("a time range needs Kafka to resolve it")
        start, end = offsets_for_times(t0), offsets_for_times(t1)
        if any(start[p] > end.get(p, start[p]) for p in start):  # t0 < t1: Kafka's look-up cannot reverse it
            raise RangeError(f"the times resolved to a backwards range ({start} -> {end})")
    for p in sorted(start):
        if p not in watermarks:
            raise RangeError(f"partition {p} does not exist (the topic has {sorted(watermarks)})")
        low, high = watermarks[p]
        if start[p] < low:
            raise RangeError(
                f"partition {p}: offsets below {low} are gone from Kafka (retention); the range "
                f"starts at {start[p]}. Fix: start at {low} or later, or recover with --accept-loss"
            )
        if end[p] > high:
            raise RangeError(f"partition {p}: end offset {end[p]} is past the log end {high}. Fix: end at {high}")
    return {"start": offsets.as_json(start), "end": offsets.as_json(end)}


def kafka_offsets_for_times(cluster: Cluster, topic: str, partitions: list[int]):
    """A function ms -> {partition: first offset at or after ms (log end if none)}."""
    from confluent_kafka import Consumer, TopicPartition

    client = as_client(cluster)

    def lookup(ms: int) -> dict[int, int]:
        consumer = Consumer(client.librdkafka(**{"group.id": "onceflow-backfill", "enable.auto.commit": False}))
        try:
            found = consumer.offsets_for_times([TopicPartition(topic, p, ms) for p in partitions], timeout=15)
            out = {}
            for tp in found:
                out[tp.partition] = (
                    tp.offset
                    if tp.offset >= 0
                    else consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=15)[1]
                )
            return out
        finally:
            consumer.close()

    return lookup


class BackfillRangeOperator(BaseOperator):
    """Validate the DAG run's range params against Kafka; the offsets are the XCom."""

    template_fields: Sequence[str] = ("pipeline_file",)

    def __init__(self, *, pipeline_file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline_file = pipeline_file

    def execute(self, context: Any) -> dict:
        hook = OnceflowHook(self.pipeline_file)
        marks = hook.watermarks()
        source = hook.pipeline.source
        try:
            resolved = validate_range(
                dict(context["params"]),
                marks,
                kafka_offsets_for_times(hook.source_client, source.topic, sorted(marks)),
            )
        except RangeError as exc:
            raise AirflowFailException(f"{hook.name} backfill: {exc}") from None
        self.log.info("%s backfill range: %s", hook.name, resolved)
        return resolved


class BackfillOperator(OnceflowSparkSubmitOperator):
    """spark-submit of spark_apps/backfill.py over a validated range (JSON from BackfillRangeOperator)."""

    template_fields: Sequence[str] = (*OnceflowSparkSubmitOperator.template_fields, "offsets")

    def __init__(self, *, pipeline_file: str, offsets: Any, **kwargs: Any) -> None:
        super().__init__(pipeline_file=pipeline_file, app="backfill", **kwargs)
        self.offsets = offsets

    def arguments(self, context: Any) -> list[str]:
        rng = json.loads(self.offsets) if isinstance(self.offsets, str) else self.offsets
        return [
            *super().arguments(context),
            "--start-offsets",
            json.dumps(rng["start"]),
            "--end-offsets",
            json.dumps(rng["end"]),
        ]
