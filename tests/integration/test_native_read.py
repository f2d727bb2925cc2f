"""The native Kafka reader (kafka/native_read.py) against the real broker: the same records as the
Python consumer's path, range by range, at read_committed, with aborted transactions whose markers
and aborted records end ranges; and a range that cannot be reached fails in time."""

from __future__ import annotations

import pyarrow as pa
import pytest

from devkit.pipelines import PAYMENTS_SCHEMA
from onceflow.errors import BrokerError
from onceflow.generate.producer import produce
from onceflow.kafka import native_read
from onceflow.kafka.admin import partitions_of
from onceflow.kafka.consume import range_batches

pytestmark = pytest.mark.integration


def _read(bootstrap: str, topic: str, ranges: dict, monkeypatch, reader: str, size: int = 700) -> pa.Table:
    monkeypatch.setenv(native_read.READER_ENV, reader)
    assert native_read.usable(bootstrap) == (reader == "native")
    return pa.Table.from_batches(list(range_batches(bootstrap, topic, ranges, timeout=60, size=size)))


@pytest.fixture(scope="module")
def produced(broker):
    topic = "t-native-read"
    summary = produce(
        broker.bootstrap, topic, 4000, schema=PAYMENTS_SCHEMA, partitions=3, seed=5, abort_ratio=0.2,
        malformed_ratio=0.05, txn_size=40,
    )  # fmt: skip
    assert summary.count("aborted") > 0
    return topic, summary


def test_the_same_records_as_the_python_consumer(broker, produced, monkeypatch):
    topic, summary = produced
    committed = sorted((r.partition, r.offset) for r in summary.records if not r.aborted)
    ends: dict[int, int] = {}
    for r in summary.records:
        ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 2)  # past the last commit marker
    assert sorted(ends) == partitions_of(broker.bootstrap, topic)
    whole = {p: (0, e) for p, e in ends.items()}
    native = _read(broker.bootstrap, topic, whole, monkeypatch, "native")
    python = _read(broker.bootstrap, topic, whole, monkeypatch, "python")
    assert native.schema == python.schema
    key = [("partition", "ascending"), ("offset", "ascending")]
    assert native.sort_by(key).equals(python.sort_by(key))
    assert sorted(zip(native["partition"].to_pylist(), native["offset"].to_pylist(), strict=True)) == committed
    monkeypatch.setenv(native_read.READER_ENV, "native")
    sizes = [b.num_rows for b in range_batches(broker.bootstrap, topic, whole, size=700)]
    assert len(sizes) > 2 and max(sizes) == 700, sizes


def test_ranges_that_end_on_markers_and_aborted_records(broker, produced, monkeypatch):
    """Each range ends right after an aborted record or on a transaction marker, where no record
    shows the end: the consumer's position does."""
    topic, summary = produced
    aborted = sorted((r.partition, r.offset) for r in summary.records if r.aborted)
    for p in sorted({p for p, _ in aborted}):
        last_aborted = max(o for q, o in aborted if q == p)
        for ranges in ({p: (3, last_aborted + 1)}, {p: (last_aborted - 5, last_aborted + 2)}, {p: (7, 8)}):
            native = _read(broker.bootstrap, topic, ranges, monkeypatch, "native")
            python = _read(broker.bootstrap, topic, ranges, monkeypatch, "python")
            assert native.equals(python), ranges
            expected = sorted(
                r.offset
                for r in summary.records
                if r.partition == p and not r.aborted and ranges[p][0] <= r.offset < ranges[p][1]
            )
            assert native["offset"].to_pylist() == expected


def test_an_unreachable_end_fails_in_time(broker, produced, monkeypatch):
    topic, _ = produced
    monkeypatch.setenv(native_read.READER_ENV, "native")
    with pytest.raises(BrokerError, match="did not reach the end offsets"):
        list(range_batches(broker.bootstrap, topic, {0: (0, 10**9)}, timeout=3))


def test_an_empty_range_gives_the_columns(broker, produced, monkeypatch):
    topic, _ = produced
    native = _read(broker.bootstrap, topic, {0: (5, 5)}, monkeypatch, "native")
    assert native.num_rows == 0 and native.column_names == ["key", "value", "topic", "partition", "offset"]
