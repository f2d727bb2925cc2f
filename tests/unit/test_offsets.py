"""Offset maps and ranges to and from JSON: partitions as strings in partition order, back as integers."""

from __future__ import annotations

import json

import pytest

from onceflow import offsets


def test_a_map_goes_out_in_partition_order_with_string_keys_and_comes_back():
    out = offsets.as_json({10: 5, 2: 7, 0: 1})
    assert list(out) == ["0", "2", "10"] and out == {"0": 1, "2": 7, "10": 5}
    assert offsets.from_json(json.loads(json.dumps(out))) == {0: 1, 2: 7, 10: 5}
    assert offsets.as_json(None) is None and offsets.from_json(None) == {} and offsets.from_json({}) == {}


def test_a_non_integer_partition_or_offset_is_refused():
    with pytest.raises(ValueError):
        offsets.from_json({"zero": 1})
    with pytest.raises(TypeError):
        offsets.from_json({"0": None})


def test_ranges_go_out_as_pairs_and_come_back_as_tuples():
    out = offsets.ranges_as_json({1: (5, 9), 0: (0, 3)})
    assert list(out) == ["0", "1"] and out == {"0": [0, 3], "1": [5, 9]}
    assert offsets.ranges_from_json(json.loads(json.dumps(out))) == {0: (0, 3), 1: (5, 9)}
    assert offsets.ranges_from_json(None) == {}


def test_spark_offsets_option_for_one_topic_and_back():
    text = offsets.spark_json("payments", {1: 20, 0: 10})
    assert text == '{"payments":{"0":10,"1":20}}'
    assert offsets.from_spark_json(text, "payments") == {0: 10, 1: 20}
    assert offsets.from_spark_json(text, "other") == {}
    for bad in (None, "", "earliest", "latest", "{not json", '["a list"]'):
        assert offsets.from_spark_json(bad, "payments") is None, bad
