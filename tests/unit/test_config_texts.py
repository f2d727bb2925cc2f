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


def test_long_values_are_shortened(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(GOOD.replace("  topic: payments", "  topic: '" + "x y" * 100 + "'"))
    with pytest.raises(ConfigError) as caught:
        config.load(f, env={})
    line = str(caught.value).splitlines()[1]
    assert line.startswith("  field `source.topic`: String should match pattern") and " ...)" in line
    assert len(line) < 250
