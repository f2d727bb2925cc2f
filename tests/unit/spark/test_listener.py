"""The listener reads Kafka's offsets out of a progress event, as Spark 4 sends them (JSON text or maps)."""

from __future__ import annotations

from types import SimpleNamespace

from onceflow.spark.listener import _end_offsets


def test_offsets_come_from_the_topics_source_as_text_or_as_a_map():
    progress = SimpleNamespace(
        sources=[
            SimpleNamespace(endOffset='{"other": {"0": 1}}'),
            SimpleNamespace(endOffset='{"t": {"1": 7, "0": "5"}}', latestOffset={"t": {"0": 9}}),
        ]
    )
    assert _end_offsets(progress, "t") == {"0": 5, "1": 7}
    assert _end_offsets(progress, "t", "latestOffset") == {"0": 9}
    assert _end_offsets(SimpleNamespace(sources=[SimpleNamespace(endOffset="{torn")]), "t") == {}
    assert _end_offsets(SimpleNamespace(), "t") == {}
