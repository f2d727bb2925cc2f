"""The ACLs onceflow's principals need on a secured cluster (issue 40), stated once, in two tables
(docs/kafka-security.md quotes them): what a pipeline's principal needs, and what the principal of
`onceflow produce` needs. Nothing more: the authorizer allows nothing without an ACL.

A name in braces is filled in from the pipeline: `{source}` its source topic, `{output}` the
Kafka sink's output topic, `{ledger}` the sink's ledger topic (`onceflow-ledger.<pipeline>` unless
`sinks.kafka.ledger_topic`). Granted with `grant_pipeline` / `grant_producer` by an admin (a super
user); `onceflow kafka start --secure --pipeline P` does it on the embedded broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from onceflow.errors import BrokerError
from onceflow.kafka.admin import ensure_topic
from onceflow.kafka.client import KafkaClient
from onceflow.kafka.ledger import LEDGER_TOPIC_CONFIG, default_ledger_topic

if TYPE_CHECKING:
    from onceflow.config import Pipeline


@dataclass(frozen=True)
class Grant:
    """Allow `operations` on the resources of `resource` type whose name is `name` (LITERAL) or
    starts with it (PREFIXED)."""

    resource: str  # TOPIC, GROUP, TRANSACTIONAL_ID
    name: str
    pattern: str  # LITERAL or PREFIXED
    operations: tuple[str, ...]
    why: str


# a pipeline's principal (User:onceflow on the embedded broker): Spark's source, the transactional
# Kafka sink, its ledger, and onceflow's own readers (audit, recovery, health, backfill)
PIPELINE_ACLS: tuple[Grant, ...] = (
    Grant("TOPIC", "{source}", "LITERAL", ("READ", "DESCRIBE"), "the source topic, read at read_committed"),
    Grant("TOPIC", "{output}", "LITERAL", ("WRITE", "DESCRIBE", "READ"), "the Kafka sink's output; the audit reads it"),
    Grant(
        "TOPIC",
        "{ledger}",
        "LITERAL",
        ("READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS"),
        "the sink's ledger: written with each batch, read back on replay, by the audit and recovery; "
        "its retention checked",
    ),
    Grant("GROUP", "onceflow-", "PREFIXED", ("READ",), "the consumer groups of onceflow's readers (onceflow-*)"),
    Grant(
        "TRANSACTIONAL_ID",
        "onceflow",
        "PREFIXED",
        ("WRITE", "DESCRIBE"),
        "the sink's tasks' transactions (onceflow.<pipeline>.g<generation>.p<task>)",
    ),
)
# the principal of `onceflow produce` (User:producer on the embedded broker)
PRODUCER_ACLS: tuple[Grant, ...] = (
    Grant("TOPIC", "{source}", "LITERAL", ("WRITE", "DESCRIBE"), "the pipeline's source topic, written to"),
    Grant(
        "TRANSACTIONAL_ID",
        "onceflow-produce-",
        "PREFIXED",
        ("WRITE", "DESCRIBE"),
        "the producer's transactions (onceflow-produce-<uuid>)",
    ),
)


def principal_of(name: str) -> str:
    """`onceflow` -> `User:onceflow` (a principal with its type is kept as it is)."""
    return name if ":" in name else f"User:{name}"


def bindings(grants: tuple[Grant, ...], principal: str, **names: str | None) -> list[AclBinding]:
    """The ACL bindings of `grants` for `principal`; a grant whose {name} is None is left out."""
    out = []
    for g in grants:
        name = names.get(g.name.strip("{}")) if g.name.startswith("{") else g.name
        if name is None:
            continue
        for op in g.operations:
            out.append(
                AclBinding(
                    ResourceType[g.resource],
                    name,
                    ResourcePatternType[g.pattern],
                    principal_of(principal),
                    "*",
                    AclOperation[op],
                    AclPermissionType.ALLOW,
                )
            )
    return out


def _admin(admin: KafkaClient) -> AdminClient:
    return AdminClient(admin.librdkafka())


def _create(admin: KafkaClient, acls: list[AclBinding], timeout: float) -> list[AclBinding]:
    client = _admin(admin)  # held while its futures run: a client destroyed fails them
    futures = client.create_acls(acls, request_timeout=timeout)
    for binding, future in futures.items():
        try:
            future.result(timeout=timeout + 5)
        except KafkaException as exc:
            raise BrokerError(
                f"{admin.describe()} refused the ACL {binding}: {exc.args[0].str()}. Fix: grant as a super user "
                "(User:admin on the embedded broker: `onceflow kafka env --user admin`)"
            ) from None
    return acls


def grant_pipeline(
    admin_client: KafkaClient,
    principal: str,
    source_topic: str,
    output_topic: str | None,
    ledger_topic: str | None,
    timeout: float = 15,
) -> list[AclBinding]:
    """Create PIPELINE_ACLS for `principal` (`onceflow` or `User:onceflow`); the bindings made."""
    acls = bindings(PIPELINE_ACLS, principal, source=source_topic, output=output_topic, ledger=ledger_topic)
    return _create(admin_client, acls, timeout)


def grant_producer(admin: KafkaClient, principal: str, topic: str, timeout: float = 15) -> list[AclBinding]:
    """Create PRODUCER_ACLS for `principal` on `topic`; the bindings made."""
    return _create(admin, bindings(PRODUCER_ACLS, principal, source=topic), timeout)


def revoke(
    admin: KafkaClient,
    principal: str,
    resource: str | None = None,
    name: str | None = None,
    operation: str | None = None,
    timeout: float = 15,
) -> int:
    """Delete `principal`'s ACLs on `resource` (TOPIC, GROUP, TRANSACTIONAL_ID; None: any) named
    `name` exactly, literal or prefix (None: any) for `operation` (None: any); how many went."""
    # None: any name, any host (the stubs type both as str; confluent-kafka takes None as "any")
    flt = AclBindingFilter(
        ResourceType[resource] if resource else ResourceType.ANY,
        name,  # type: ignore[arg-type]
        ResourcePatternType.ANY,
        principal_of(principal),
        None,  # type: ignore[arg-type]
        AclOperation[operation] if operation else AclOperation.ANY,
        AclPermissionType.ANY,
    )
    client = _admin(admin)
    futures = client.delete_acls([flt], request_timeout=timeout)
    return sum(len(f.result(timeout=timeout + 5)) for f in futures.values())


def secure_pipeline(
    admin: KafkaClient, pipeline: Pipeline, principal: str, producer: str, partitions: int = 4
) -> list[str]:
    """A pipeline on a secured cluster: its topics created by `admin` (the source with `partitions`
    if missing; the Kafka sink's output and ledger as the sink would), PIPELINE_ACLS granted to
    `principal`, PRODUCER_ACLS to `producer`. The topics it made sure of."""
    source = pipeline.source.topic
    ensure_topic(admin, source, partitions, at_least=False)
    topics = [source]
    output = ledger = None
    sink = pipeline.sinks.kafka
    if sink is not None:
        output, ledger = sink.topic, sink.ledger_topic or default_ledger_topic(pipeline.name)
        ensure_topic(admin, output, sink.partitions, at_least=False)
        ensure_topic(admin, ledger, sink.partitions, dict(LEDGER_TOPIC_CONFIG), at_least=False)
        topics += [output, ledger]
    grant_pipeline(admin, principal, source, output, ledger)
    grant_producer(admin, producer, source)
    return topics
