"""Offset ranges a person asks for (`onceflow backfill`, the `<pipeline>_backfill` DAG): parsed
and checked in one place, so the CLI and Airflow refuse the same ranges with the same words.

Only the shape is checked here (JSON, partitions, start <= end); whether Kafka still holds
the range is the caller's look-up (onceflow.airflow.backfill.validate_range).
"""

from __future__ import annotations

import json
from typing import Any

from onceflow.errors import RangeError

EXAMPLE = '{"0": 100, "1": 0}'


def parse_offsets(value: Any, field: str) -> dict[int, int]:
    """{partition: offset} from a JSON text or a mapping; RangeError names `field` and the fix."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise RangeError(f"{field}: {value!r} is not JSON. Fix: write e.g. {EXAMPLE}") from None
    if not isinstance(value, dict) or not value:
        raise RangeError(
            f"{field}: expected a non-empty object of partition -> offset, got {value!r}. Fix: write e.g. {EXAMPLE}"
        )
    out: dict[int, int] = {}
    for p, o in value.items():
        try:
            partition, offset = int(p), int(o)
        except (TypeError, ValueError):
            raise RangeError(
                f"{field}: partition {p!r} -> {o!r} is not integer -> integer. Fix: write e.g. {EXAMPLE}"
            ) from None
        if partition < 0 or offset < 0:
            raise RangeError(f"{field}: partition {partition} -> {offset}: partitions and offsets are >= 0")
        out[partition] = offset
    return out


def offset_range(
    start: Any, end: Any, start_field: str = "start_offsets", end_field: str = "end_offsets"
) -> tuple[dict[int, int], dict[int, int]]:
    """Parse and check [start, end) per partition: the same partitions in both, start <= end."""
    first, last = parse_offsets(start, start_field), parse_offsets(end, end_field)
    if set(first) != set(last):
        raise RangeError(
            f"{start_field} has partitions {sorted(first)} but {end_field} {sorted(last)}. "
            "Fix: give the same partitions in both"
        )
    backwards = [p for p in sorted(first) if first[p] > last[p]]
    if backwards:
        p = backwards[0]
        raise RangeError(
            f"partition {p}: start offset {first[p]} is after end offset {last[p]} "
            f"({start_field} > {end_field}). Fix: give each partition's first offset in "
            f"{start_field} and the offset after its last in {end_field}, start <= end"
        )
    return first, last
