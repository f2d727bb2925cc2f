"""`onceflow produce`: the pipeline's schema decides what can be made; --partitions only creates."""

from __future__ import annotations

import pytest

from onceflow.cli.app import build_parser
from onceflow.cli.produce import produce_plan


def test_the_plan_is_the_pipelines_schema_group_by_and_malformed_kinds():
    pipeline, group_by, kinds = produce_plan("payments")
    assert pipeline.name == "payments" and group_by == pipeline.sinks.aggregates.group_by
    assert "invalid_json" in kinds and len(kinds) == len(set(kinds))


def test_partitions_default_to_four_for_a_topic_it_creates():
    args = build_parser().parse_args(["produce"])
    assert args.partitions == 4 and args.pipeline == "payments" and args.count == 10_000


def test_an_avro_pipeline_is_refused_with_the_fix_and_plain_json_is_not_framed(tmp_path):
    from devkit.pipelines import PAYMENTS_SCHEMA_BODY, load_pipeline
    from onceflow.cli.produce import registry_frame
    from onceflow.errors import ConfigError

    avro = {**PAYMENTS_SCHEMA_BODY, "format": "avro", "registry": {"url": "http://127.0.0.1:1/apis/ccompat/v7"}}
    with pytest.raises(ConfigError, match=r"does not write Avro yet .*Fix: write the records with an Avro serializer"):
        registry_frame(load_pipeline(tmp_path / "a", "localhost:9092", "t", schema=avro))
    assert registry_frame(load_pipeline(tmp_path / "j", "localhost:9092", "t")) is None
