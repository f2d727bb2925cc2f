"""`schema.fields: registry`: an Avro, Protobuf or JSON Schema pipeline's fields read at load from
its subject's latest schema, instead of listed (docs/registry.md#fields-from-the-registry): Avro's
by schema/avro_declared.fields_of_avro, Protobuf's (the file's first message) by
schema/protobuf_declared.fields_of_protobuf, JSON Schema's by
schema/json_schema_declared.fields_of_json_schema.

Listed fields win: a file that lists them never asks the registry for fields. The listed fields are
the contract a team reviews and can put rules on; fields from the registry follow the producers,
so a new version registered under the subject changes the declaration at the next load (a new
optional field becomes a new bronze column). Each batch records the declaration it was judged by,
so the audit judges every batch by the fields it had.

Each load asks once, waiting no longer than the registry's `timeout_seconds`: a DAG file is parsed
every few seconds and must not hang on a registry that is down. What was read last is kept in
`<state>/pipelines/<name>/registry-fields.json`; a load falls back on it, with a warning, while the
registry does not answer, so the pipeline's DAGs stay in Airflow through a registry restart.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from onceflow.errors import ConfigError, RegistryError, UnreadableSchemaError
from onceflow.registry import Registry
from onceflow.schema.avro_declared import fields_of_avro
from onceflow.schema.json_schema_declared import fields_of_json_schema
from onceflow.schema.model import AVRO, JSON_SCHEMA, PROTOBUF, RegistrySpec
from onceflow.schema.protobuf import file_set
from onceflow.schema.protobuf_declared import fields_of_protobuf

FROM_REGISTRY = "registry"
# each format's reading of a registered schema's text into declared fields
READERS: dict[str, Callable[[str], list[dict[str, Any]]]] = {
    AVRO: lambda text: fields_of_avro(json.loads(text)),
    PROTOBUF: lambda text: fields_of_protobuf(file_set(text)),
    JSON_SCHEMA: lambda text: fields_of_json_schema(json.loads(text)),
}
CACHE_FILE = "registry-fields.json"
_log = logging.getLogger("onceflow.config")


def with_registry_fields(data: dict[str, Any], file: str, state: Path) -> dict[str, Any]:
    """`data` (a pipeline file's mapping, variables substituted) with `schema.fields` read from the
    registry when the file says `fields: registry`; as it is otherwise. `state`: the state dir."""
    schema = data.get("schema")
    if not (isinstance(schema, dict) and schema.get("fields") == FROM_REGISTRY):
        return data
    where = f"{file}: schema.fields: registry"
    fmt = schema.get("format")
    if fmt not in READERS:
        raise ConfigError(
            f"{where} reads an Avro, Protobuf or JSON Schema schema's fields, and this schema's format is "
            f"{fmt or 'json'}. Fix: list the fields (docs/pipeline-config.md#schema)"
        )
    try:
        spec = RegistrySpec.model_validate({**(schema.get("registry") or {}), "wait_seconds": 0})
    except ValidationError:
        return data  # the registry section's own errors are reported by the validation that follows
    source = data.get("source")
    topic = source.get("topic") if isinstance(source, dict) else None
    if not (spec.subject or isinstance(topic, str)):
        return data  # no subject to ask for: the missing source.topic is reported by the validation
    subject = spec.subject or f"{topic}-value"
    name = data.get("name")
    cache = state / "pipelines" / name / CACHE_FILE if isinstance(name, str) and name.isidentifier() else None
    try:
        latest = _latest(Registry(spec), subject)
    except RegistryError as exc:
        kept = _kept(cache, subject)
        if kept is None:
            raise ConfigError(
                f"{where}: the registry could not be asked for {subject}'s latest schema and none was read "
                f"before ({exc}). Fix: start the registry or point schema.registry.url at it, or list the fields"
            ) from None
        _log.warning(
            "%s: the registry does not answer (%s); the fields of %s's latest schema as last read (id %s)",
            where,
            exc,
            subject,
            kept["id"],
        )
        return _with_fields(data, schema, kept["fields"])
    if latest is None:
        raise ConfigError(
            f"{where}: the subject {subject} has no version in the registry at {spec.url}. Fix: register the "
            "writer schema first (the producers' serializer does; `onceflow produce` too), name the subject "
            "in schema.registry.subject, or list the fields"
        )
    schema_id, text = latest
    try:
        fields = READERS[str(fmt)](text)
    except (ValueError, UnreadableSchemaError) as exc:  # a schema no declared fields read
        raise ConfigError(f"{where}: {subject}'s latest schema (id {schema_id}): {exc}") from None
    if cache is not None:
        _keep(cache, {"subject": subject, "id": schema_id, "fields": fields})
    return _with_fields(data, schema, fields)


def _latest(registry: Registry, subject: str) -> tuple[int, str] | None:
    schema_id = registry.latest(subject)
    if schema_id is None:
        return None
    text = registry.schema(schema_id)
    if text is None:
        raise RegistryError(f"the registry named id {schema_id} as {subject}'s latest and then did not know it")
    return schema_id, text


def _with_fields(data: dict[str, Any], schema: dict[str, Any], fields: list[dict[str, Any]]) -> dict[str, Any]:
    """The fields in the file's schema; the ones it names as event_time and event_id required, as
    they must be (a Protobuf message field, such as a Timestamp, always has presence: optional)."""
    named = {schema.get("event_time"), schema.get("event_id")} - {None}
    fields = [{**f, "required": True} if f["name"] in named else f for f in fields]
    return {**data, "schema": {**schema, "fields": fields}}


def _kept(cache: Path | None, subject: str) -> dict[str, Any] | None:
    try:
        kept = json.loads(cache.read_text()) if cache is not None else None
    except (OSError, ValueError):
        return None
    return kept if isinstance(kept, dict) and kept.get("subject") == subject else None


def _keep(cache: Path, found: dict[str, Any]) -> None:
    """Write what was read, when it differs from what is kept (a load runs on every DAG parse)."""
    if _kept(cache, found["subject"]) == found:
        return
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(".partial")
        partial.write_text(json.dumps(found, indent=2))
        partial.replace(cache)
    except OSError as exc:  # a read-only state dir: the fields are read, only the fallback is lost
        _log.warning("cannot keep the registry's fields in %s (%s)", cache, exc)
