"""docs/schemas/*.json, generated from the models of the documents onceflow emits (onceflow.wire).

`python -m devkit.schemas` rewrites every file; tests/unit/test_wire.py fails while a committed file
differs from what this writes, so a field or a verdict added to a report cannot be missing from its
published contract (issue 50: two hand-written schemas had lost `down` and `starting`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


class _Schema(GenerateJsonSchema):
    """Pydantic's schema without a generated title on every field (the field's name says it)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def models() -> dict[str, type[BaseModel]]:
    """File name -> the model of the document it describes."""
    from onceflow.airflow.payloads import PagePipelines, TriggerPayload
    from onceflow.audit.report import AuditSummary
    from onceflow.health import HealthReport
    from onceflow.recovery.record import RecordDocument

    return {
        "checkpoint-status.schema.json": HealthReport,
        "airflow-health-event.schema.json": TriggerPayload,
        "onceflow-page-pipelines.schema.json": PagePipelines,
        "audit-summary.schema.json": AuditSummary,
        "recovery-record.schema.json": RecordDocument,
    }


def generated(name: str) -> str:
    """The text of docs/schemas/`name`, as the model says."""
    body = models()[name].model_json_schema(mode="serialization", schema_generator=_Schema)
    head = {"$schema": DRAFT, "$id": f"https://onceflow.dev/schemas/{name}"}
    return json.dumps({**head, **body}, indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    for name in models():
        path, text = SCHEMAS / name, generated(name)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"rewrote {path}")


if __name__ == "__main__":
    main()
