"""Offset maps and offset ranges to and from JSON, in one place.

An offset map is `{partition: offset}`, an offset range map `{partition: (start, end)}` with `end`
exclusive. JSON keys are strings, so wherever one is written (ledger entries, status events,
recovery plans, reports, Spark's Kafka options) its partitions become strings, in partition
order, and they come back as integers when read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, overload


@overload
def as_json(offsets: Mapping[int, int]) -> dict[str, int]: ...
@overload
def as_json(offsets: None) -> None: ...
@overload
def as_json(offsets: Mapping[int, int] | None) -> dict[str, int] | None: ...
def as_json(offsets: Mapping[int, int] | None) -> dict[str, int] | None:
    """{0: 5, 1: 7} -> {"0": 5, "1": 7}, in partition order; None stays None."""
    return None if offsets is None else {str(p): int(o) for p, o in sorted(offsets.items())}


def from_json(raw: Mapping[Any, Any] | None) -> dict[int, int]:
    """{"0": 5} (or {0: 5}) -> {0: 5}; None or {} -> {}. ValueError/TypeError on a non-integer."""
    return {int(p): int(o) for p, o in (raw or {}).items()}


def ranges_as_json(ranges: Mapping[int, tuple[int, int]]) -> dict[str, list[int]]:
    """{0: (5, 9)} -> {"0": [5, 9]}, in partition order."""
    return {str(p): [int(a), int(b)] for p, (a, b) in sorted(ranges.items())}


def ranges_from_json(raw: Mapping[Any, Any] | None) -> dict[int, tuple[int, int]]:
    """{"0": [5, 9]} -> {0: (5, 9)}; None or {} -> {}."""
    return {int(p): (int(a), int(b)) for p, (a, b) in (raw or {}).items()}


def spark_json(topic: str, offsets: Mapping[int, int]) -> str:
    """Spark's Kafka source option (startingOffsets, endingOffsets) for one topic:
    '{"topic":{"0":5}}'."""
    return json.dumps({topic: as_json(offsets)}, separators=(",", ":"))


def from_spark_json(text: str | None, topic: str) -> dict[int, int] | None:
    """The offsets of `topic` in a Spark Kafka offsets option ({topic: {"0": 5}} -> {0: 5});
    None for 'earliest', 'latest', another topic's or unparseable text."""
    if not text or not text.lstrip().startswith("{"):
        return None
    try:
        return from_json(json.loads(text).get(topic))
    except (ValueError, TypeError, AttributeError):
        return None
