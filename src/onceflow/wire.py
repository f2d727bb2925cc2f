"""The base of every JSON document onceflow emits: the health report (`onceflow checkpoint status
--json`), the audit summary (summary.json), the recovery record, the Airflow trigger's events and the
onceflow page's rows.

Each is a frozen pydantic model whose dump is the JSON (as pyiceberg's wire objects are), and
docs/schemas/*.json are generated from the models (`python -m devkit.schemas`; a unit test fails
when a committed schema differs), so a field added to a report cannot be missing from its contract.
A field with a default is one the document may leave out: `as_json` writes only the fields that were
given, so "absent" and "null" stay what each report said before it was typed.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

# a moment as ISO 8601 text (UTC); the schemas say so (`format: date-time`)
IsoTime = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
Count = Annotated[int, Field(ge=0)]


class Wire(BaseModel):
    """A JSON document's model: frozen, no field it does not declare (config.py's style)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def as_json(self) -> dict[str, Any]:
        """The document as JSON values, with the fields that were given (see the module doc)."""
        return self.model_dump(mode="json", exclude_unset=True)


class OpenWire(Wire):
    """A document section that passes on another file's fields (a lease's info, run.json): the
    fields it names are typed, the rest kept as they were."""

    model_config = ConfigDict(extra="allow", frozen=True)


class BatchPoint(Wire):
    """One committed micro-batch of a status log as a chart point (onceflow.web.batch_series): what the
    audit summary's and the onceflow page's batch charts draw."""

    batch: int | None
    time: str | None = Field(description="when the batch's progress was reported (ISO, UTC)")
    rows: int | None = Field(description="records the batch read")
    seconds: float = Field(description="the batch's duration")
    input_rate: float | None = Field(description="rows/s arriving")
    processed_rate: float | None = Field(description="rows/s processed")
    lag: int | None = Field(description="offsets Kafka held beyond the batch's end (null: not recorded)")
