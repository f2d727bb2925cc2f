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


def test_an_avro_pipelines_kinds_are_its_frames_and_rules(tmp_path):
    from devkit.pipelines import PAYMENTS_SCHEMA_BODY, pipeline_file

    avro = {**PAYMENTS_SCHEMA_BODY, "format": "avro", "registry": {"url": "http://127.0.0.1:1/apis/ccompat/v7"}}
    path, _ = pipeline_file(tmp_path / "a", "localhost:9092", "t", schema=avro)
    _, _, kinds = produce_plan(str(path))  # no registry asked: the kinds follow from the declaration
    assert kinds[:6] == (
        "oversized",
        "avro_not_framed",
        "avro_unknown_schema",
        "avro_other_subject",
        "avro_unsupported_schema",
        "avro_undecodable",
    )
    assert "below_min" in kinds and "invalid_json" not in kinds and "missing_field" not in kinds
