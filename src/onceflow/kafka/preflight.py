"""Before any JVM starts: every Kafka cluster a pipeline uses answers, and on a secured one the
pipeline's principal may do what its job will (issue 40). A broker that is down, a refused login
or a missing ACL costs seconds and names the fix, not minutes of Spark retrying."""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.kafka.access import check_access
from onceflow.kafka.admin import REACH_TIMEOUT, admin_client, require_broker
from onceflow.kafka.client import sink_client, source_client
from onceflow.kafka.ledger import default_ledger_topic

if TYPE_CHECKING:
    from onceflow.config import Pipeline


def require_pipeline_brokers(pipeline: Pipeline, timeout: float = REACH_TIMEOUT) -> None:
    """require_broker for every Kafka cluster a pipeline uses: its source and a Kafka sink elsewhere."""
    source = source_client(pipeline)
    require_broker(source, timeout=timeout, file=pipeline.file or None)
    sink = sink_client(pipeline)
    if sink is not None and sink != source:
        require_broker(sink, timeout=timeout, field="sinks.kafka.bootstrap_servers", file=pipeline.file or None)
    require_pipeline_access(pipeline, timeout=timeout)


def require_pipeline_access(pipeline: Pipeline, timeout: float = REACH_TIMEOUT) -> None:
    """On a secured cluster, that the pipeline's principal may do what its job will: read the
    source (Spark's consumer group prefix included) and, with a Kafka sink, write the output and
    the ledger and start transactions. A missing ACL is named before any JVM starts, not minutes
    into a run. A plaintext cluster is not asked: it authorizes no one."""
    source, sink = source_client(pipeline), sink_client(pipeline)
    if source.secured:
        check_access(source, topics_read=[pipeline.source.topic], group="onceflow-spark", timeout=timeout)
    out = pipeline.sinks.kafka
    if out is None or sink is None or not sink.secured:
        return
    ledger = out.ledger_topic or default_ledger_topic(pipeline.name)
    existing = set(admin_client(sink).list_topics(timeout=timeout).topics)  # the sink creates what is missing
    check_access(
        sink,
        topics_read=[t for t in (out.topic, ledger) if t in existing],
        topics_write=[t for t in (out.topic, ledger) if t in existing],
        group="onceflow-kafka-ledger-reader",
        transactional_id=f"onceflow.{pipeline.name}.preflight",
        timeout=timeout,
    )
