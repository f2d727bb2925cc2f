"""A pipeline's declared event: fields, types, rules and aggregates.

Pipelines are data, not code: the Spark validation (spark/parse.py), the table
schemas (tables.py), the GX suites, the audit's independent judge
(schema/reference.py) and the event generator (generate/records.py) all follow
the declaration in the pipeline file. No module here names a pipeline's fields.
"""

from onceflow.schema.model import AggregatesSpec, FieldSpec, Metric, Schema

__all__ = ["AggregatesSpec", "FieldSpec", "Metric", "Schema"]
