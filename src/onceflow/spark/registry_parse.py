"""A registry pipeline's raw Kafka rows parsed: one home for the stream's batches and a backfill's
range, so both judge a framed record alike.

Avro is decoded into its JSON view per schema id (spark/avro.py), Protobuf too (spark/protobuf.py),
JSON Schema's payload is read as it is (spark/framed.py); the declared fields and rules then judge
it as any JSON event (spark/parse.py). A Debezium topic's Avro envelopes (converter avro) are viewed
the same way, then read as Debezium's JSON envelopes are (docs/cdc.md#envelopes-in-avro). The ids
are read per DataFrame, so a schema registered after the stream started is read too."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame

from onceflow.config import Pipeline
from onceflow.registry import Registry
from onceflow.schema.avro import EVERY_DECIMAL, PLAIN_SCALE
from onceflow.schema.model import AVRO, DEBEZIUM, PROTOBUF
from onceflow.spark.avro import with_views
from onceflow.spark.framed import with_json_payloads
from onceflow.spark.parse import parse_events
from onceflow.spark.protobuf import with_protobuf_views
from onceflow.state.unprocessable import Unprocessable


def registry_parser(pipeline: Pipeline, unprocessable: Unprocessable | None = None) -> Callable[[DataFrame], DataFrame]:
    """raw Kafka rows -> parse_events' rows, for a pipeline whose schema names a registry."""
    schema, spec = pipeline.schema, pipeline.schema.registry
    if spec is None or schema.framing is None:
        raise ValueError(f"{pipeline.name}: schema.format {schema.format} names no registry")
    registry, subject, keyed = Registry(spec), str(pipeline.registry_subject), pipeline.keyed
    if schema.framing == AVRO:
        # a Debezium envelope's decimals all as their text (`encoding: string`), an Avro record's only past PLAIN_SCALE
        plain = EVERY_DECIMAL if schema.format == DEBEZIUM else PLAIN_SCALE
        return lambda raw: parse_events(
            with_views(raw, registry, subject, plain), schema, unprocessable=unprocessable, keyed=keyed
        )
    readable = with_protobuf_views if schema.framing == PROTOBUF else with_json_payloads
    return lambda raw: parse_events(readable(raw, registry, subject), schema, unprocessable=unprocessable, keyed=keyed)
