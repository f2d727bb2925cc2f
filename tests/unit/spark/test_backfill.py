"""Which part of a requested backfill range is written, left to the stream, or refused."""

import pytest

from onceflow.spark.backfill import BackfillError, _min_offsets, clip_to_committed


def test_a_range_inside_the_committed_range_is_kept_whole():
    assert clip_to_committed({0: 10, 1: 0}, {0: 50, 1: 30}, {0: 0, 1: 0}, {0: 100, 1: 30}) == (
        {0: 10, 1: 0},
        {0: 50, 1: 30},
        {},
    )


def test_the_part_past_the_committed_end_is_left_to_the_stream():
    start, end, beyond = clip_to_committed({0: 10, 1: 40}, {0: 150, 1: 60}, {0: 0, 1: 0}, {0: 100, 1: 30})
    assert (start, end) == ({0: 10}, {0: 100})  # partition 1 lies wholly past its end
    assert beyond == {0: (100, 150), 1: (40, 60)}


def test_a_partition_the_stream_never_committed_is_left_to_it():
    assert clip_to_committed({2: 0}, {2: 5}, {0: 0}, {0: 100}) == ({}, {}, {2: (0, 5)})


def test_a_range_below_where_the_pipeline_started_is_refused_with_the_fix():
    with pytest.raises(BackfillError) as caught:
        clip_to_committed({0: 0}, {0: 50}, {0: 20}, {0: 100})
    message = str(caught.value)
    assert "partition 0: [0, 20)" in message and "Fix:" in message


def test_the_committed_end_is_where_every_sink_reached():
    assert _min_offsets([{0: 10, 1: 5}, {0: 7, 1: 9, 2: 3}]) == {0: 7, 1: 5}
