"""A pipeline file's mistakes as a person reads them: a typo named with the field it meant
and the fix, without dumping the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from onceflow import config
from onceflow.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

GOOD = (ROOT / "pipelines" / "payments.yaml").read_text()


@pytest.mark.parametrize(
    "text, message",
    [
        (
            GOOD.replace("\nsource:", "\nsourc:"),
            "invalid pipeline config:\n  field `sourc`: unknown field; did you mean `source`? "
            "Fix: rename `sourc` to `source`",
        ),
        (
            GOOD.replace("  topic: payments", "  topik: payments"),
            "  field `source.topik`: unknown field; did you mean `source.topic`? Fix: rename `source.topik` to "
            "`source.topic`",
        ),
        (
            GOOD + "colour: red\n",
            "  field `colour`: unknown field. Fix: remove it, or use one of: name, source, schema, "
            "sinks, checkpoint, trigger, health, airflow, spark_master (docs/pipeline-config.md)",
        ),
        (
            GOOD.replace("checkpoint: checkpoints/payments\n", ""),
            "  field `checkpoint`: missing. Fix: add `checkpoint` to the file",
        ),
    ],
)
def test_a_typo_names_the_field_and_the_fix_without_dumping_the_file(tmp_path, text, message):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as caught:
        config.load(f, env={})
    got = str(caught.value)
    assert message in got
    assert "tables/payments" not in got and "{'" not in got  # none of the file's contents
    assert len(got.splitlines()) == 2  # the headline and one line: a misspelling is one mistake


def test_no_value_of_the_file_is_echoed(tmp_path):
    """A refused value is never shown (docs/pipeline-config.md): the field, the problem, the fix."""
    f = tmp_path / "p.yaml"
    f.write_text(GOOD.replace("  topic: payments", "  topic: '" + "x y" * 100 + "'"))
    with pytest.raises(ConfigError) as caught:
        config.load(f, env={})
    line = str(caught.value).splitlines()[1]
    assert line.startswith("  field `source.topic`: String should match pattern") and "x y" not in line
    assert len(line) < 250


def test_a_debezium_schema_without_a_timestamp_loads_and_its_refusals_echo_nothing(tmp_path):
    """Issue 48: `schema.event_time` defaulted to source.ts_ms for a CDC table with no timestamp
    column; a bad schema section is refused without echoing it (`(got {'format': 'debezium', ...})`)."""
    cdc = (Path(__file__).parents[2] / "pipelines" / "customers_cdc.yaml").read_text()
    no_time = cdc.replace("  event_time: updated_at\n", "").replace("    - {name: updated_at, type: timestamp}\n", "")
    f = tmp_path / "c.yaml"
    f.write_text(no_time)
    p = config.load(f, env={})
    assert p.schema.event_time_position == "source.ts_ms" and p.schema.event_time_column == "_event_time"
    f.write_text(no_time.replace("format: debezium", "format: json").replace(", encoding: precise", ""))
    with pytest.raises(ConfigError) as caught:
        config.load(f, env={})
    got = str(caught.value)
    assert "event_time is missing" in got and "{'" not in got and "'format'" not in got
    f.write_text(cdc.replace(", encoding: precise", ""))
    with pytest.raises(ConfigError) as caught:
        config.load(f, env={})
    got = str(caught.value)
    assert "decimal.handling.mode=precise" in got and "encoding: precise" in got and "{'" not in got
