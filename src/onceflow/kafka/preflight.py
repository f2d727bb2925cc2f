"""Before any JVM starts: every Kafka cluster a pipeline uses answers, and on a secured one the
pipeline's principal may do what its job will (issue 40). A broker that is down, a refused login
or a missing ACL costs seconds and names the fix, not minutes of Spark retrying."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from onceflow.kafka.admin import REACH_TIMEOUT, require_broker
from onceflow.kafka.client import sink_client, source_client
from onceflow.kafka.ledger import default_ledger_topic

if TYPE_CHECKING:
    from onceflow.config import Pipeline


def _merged(*needs: dict[str, Any]) -> dict[str, Any]:
    """check_access arguments of several needs on one cluster, asked together."""
    out: dict[str, Any] = {}
    for need in needs:
        for key, value in need.items():
            out[key] = value if key == "transactional_id" else [*out.get(key, []), *value]
    return out


def pipeline_access(pipeline: Pipeline) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the pipeline's principal will do (check_access's arguments) on its source's cluster,
    and on its Kafka sink's (empty without one): read the source (Spark's consumer group prefix
    included); write and read the sink's output and ledger (created by the sink when missing), its
    ledger reader's group, and its transactions."""
    source = {"topics_read": [pipeline.source.topic], "groups": ["onceflow-spark"]}
    out = pipeline.sinks.kafka
    if out is None:
        return source, {}
    topics = [out.topic, out.ledger_topic or default_ledger_topic(pipeline.name)]
    sink = {
        "topics_read": topics,
        "topics_write": topics,
        "creatable": topics,
        "groups": ["onceflow-kafka-ledger-reader"],
        "transactional_id": f"onceflow.{pipeline.name}.preflight",
    }
    return source, sink


def require_pipeline_brokers(pipeline: Pipeline, timeout: float = REACH_TIMEOUT) -> None:
    """require_broker for every Kafka cluster a pipeline uses (its source, and a Kafka sink's own
    cluster), each asked once: on a secured cluster in one login, with what the pipeline will do
    there. A plaintext cluster is not asked about ACLs: it authorizes no one."""
    source, sink = source_client(pipeline), sink_client(pipeline)
    reads, writes = pipeline_access(pipeline)
    where = pipeline.file or None
    if sink is None or sink == source:
        require_broker(source, timeout=timeout, file=where, access=_merged(reads, writes))
        return
    require_broker(source, timeout=timeout, file=where, access=reads)
    require_broker(sink, timeout=timeout, field="sinks.kafka.bootstrap_servers", file=where, access=writes)
