"""The verdict vocabulary: one row of facts per verdict, and the published schemas' verdict enums
generated from it (a verdict the sensors fire on can never be missing from a schema again: issue 50;
that the committed files are what the models generate is tests/unit/test_wire.py's)."""

from __future__ import annotations

import json

import pytest

from devkit.schemas import generated
from onceflow.verdicts import (
    ALERTS,
    COLORS,
    EVENT_VERDICTS,
    EXIT_CODES,
    PAGE_VERDICTS,
    PROBLEMS,
    STATUS_VERDICTS,
    STYLES,
    VERDICTS,
    Verdict,
)

# the verdict list each published JSON Schema (docs/schemas/) must carry
SCHEMA_ENUMS = {
    "checkpoint-status.schema.json": STATUS_VERDICTS,
    "airflow-health-event.schema.json": EVENT_VERDICTS,
    "onceflow-page-pipelines.schema.json": PAGE_VERDICTS,
}


def _enums(node) -> list[list[str]]:
    """Every `verdict` enum in a JSON Schema document, wherever it sits."""
    found = []
    if isinstance(node, dict):
        verdict = (node.get("properties") or {}).get("verdict") or {}
        if "enum" in verdict:
            found.append(verdict["enum"])
        for value in node.values():
            found += _enums(value)
    elif isinstance(node, list):
        for value in node:
            found += _enums(value)
    return found


@pytest.mark.parametrize("name", sorted(SCHEMA_ENUMS))
def test_each_schema_lists_exactly_the_verdicts_of_its_enum(name):
    found = _enums(json.loads(generated(name)))  # the event's own, and the health report's inside it
    assert [str(v) for v in SCHEMA_ENUMS[name]] in found
    assert all(enum in [[str(v) for v in e] for e in SCHEMA_ENUMS.values()] for enum in found)


def test_every_verdict_of_the_command_reaches_every_schema():
    for name, enum in SCHEMA_ENUMS.items():
        assert set(EXIT_CODES) <= set(enum), name
    assert set(SCHEMA_ENUMS["airflow-health-event.schema.json"]) >= {Verdict.NOT_STARTED, Verdict.WINDOW_END}


def test_every_verdict_has_one_row_and_the_tables_derive_from_it():
    assert set(VERDICTS) == set(Verdict)
    assert set(STYLES) == set(EXIT_CODES), "the terminal can show every verdict the command gives"
    assert set(EXIT_CODES) | {Verdict.ERROR} <= set(COLORS), "the page can show every verdict it lists"
    assert all(v in ALERTS for v in PROBLEMS) and Verdict.DOWN in ALERTS and Verdict.DOWN not in PROBLEMS
    assert all(EXIT_CODES[v] != 0 for v in ALERTS), "an alert is a non-zero exit"
    # work that repairs or completes the pipeline is no alert (a stuck recovery turns into one: test_health)
    assert EXIT_CODES[Verdict.RECOVERING] == EXIT_CODES[Verdict.STARTING] == 0
