"""`onceflow produce`: the pipeline's schema decides what can be made; --partitions only creates."""

from __future__ import annotations

from onceflow.cli.app import build_parser
from onceflow.cli.produce import produce_plan


def test_the_plan_is_the_pipelines_schema_group_by_and_malformed_kinds():
    pipeline, group_by, kinds = produce_plan("payments")
    assert pipeline.name == "payments" and group_by == pipeline.sinks.aggregates.group_by
    assert "invalid_json" in kinds and len(kinds) == len(set(kinds))


def test_partitions_default_to_four_for_a_topic_it_creates():
    args = build_parser().parse_args(["produce"])
    assert args.partitions == 4 and args.pipeline == "payments" and args.count == 10_000
