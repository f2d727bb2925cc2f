"""The generator's summary of what it wrote, and its refusals before Kafka is asked."""

from __future__ import annotations

from collections import Counter

import pytest

from devkit.pipelines import PAYMENTS_SCHEMA
from onceflow.errors import ProducerError
from onceflow.generate.producer import ProduceSummary, produce


def test_the_summary_counts_per_partition_and_in_all():
    summary = ProduceSummary("t", transactions=3, aborted_transactions=1, seconds=1.23456)
    summary.per_partition = {1: Counter(committed=2, committed_valid=2, aborted=1), 0: Counter(committed=1)}
    assert summary.count("committed") == 3 and summary.count("committed", partition=1) == 2
    d = summary.as_dict()
    assert list(d["partitions"]) == ["0", "1"] and d["seconds"] == 1.235
    assert d["totals"] == {
        "committed": 3,
        "committed_valid": 2,
        "committed_malformed": 0,
        "committed_large": 0,
        "aborted": 1,
    }


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(abort_ratio=1.0), "abort_ratio=1.0 must be in"),
        (dict(malformed_ratio=-0.1), "malformed_ratio=-0.1 must be in"),
        (dict(txn_size=0), "txn_size=0 at least 1"),
        (dict(rate=-1), "rate=-1 must be at least 0"),
    ],
)
def test_impossible_settings_are_refused_before_kafka_is_asked(options, words):
    with pytest.raises(ProducerError, match=words):
        produce("127.0.0.1:1", "t", 10, schema=PAYMENTS_SCHEMA, **options)
