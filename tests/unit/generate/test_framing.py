"""How produce frames a pipeline's records (generate/framing.py): a topic of plain JSON or Debezium
is not framed, and nothing asks a registry for it. The registry formats are framed through a real
registry in tests/integration/test_registry_topics.py."""

from __future__ import annotations

from devkit.pipelines import cdc_pipeline_file, pipeline_file
from onceflow.generate.framing import registry_framing


def test_plain_json_and_debezium_topics_are_not_framed(tmp_path):
    _, plain = pipeline_file(tmp_path / "j", "localhost:9092", "t")
    assert registry_framing(plain, malformed=True) == {}
    _, cdc = cdc_pipeline_file(tmp_path / "c", "localhost:9092", "t")
    assert cdc.schema.format == "debezium" and registry_framing(cdc, malformed=True) == {}
