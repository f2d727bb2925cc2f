"""The ACLs onceflow's principals get: exactly the tables' (no broker)."""

from __future__ import annotations

from onceflow.kafka.acls import PIPELINE_ACLS, PRODUCER_ACLS, bindings, principal_of


def _rows(acls) -> set[tuple[str, str, str, str, str]]:
    return {
        (a.restype.name, a.name, a.resource_pattern_type.name, a.operation.name, a.principal)
        for a in acls
        if a.host == "*" and a.permission_type.name == "ALLOW"
    }


def test_a_pipeline_gets_exactly_its_topics_groups_and_transactional_ids():
    made = bindings(PIPELINE_ACLS, "onceflow", source="src", output="out", ledger="onceflow-ledger.p")
    u = "User:onceflow"
    assert len(made) == len(_rows(made)) == 12
    assert _rows(made) == {
        ("TOPIC", "src", "LITERAL", "READ", u),
        ("TOPIC", "src", "LITERAL", "DESCRIBE", u),
        ("TOPIC", "out", "LITERAL", "WRITE", u),
        ("TOPIC", "out", "LITERAL", "DESCRIBE", u),
        ("TOPIC", "out", "LITERAL", "READ", u),
        ("TOPIC", "onceflow-ledger.p", "LITERAL", "READ", u),
        ("TOPIC", "onceflow-ledger.p", "LITERAL", "WRITE", u),
        ("TOPIC", "onceflow-ledger.p", "LITERAL", "DESCRIBE", u),
        ("TOPIC", "onceflow-ledger.p", "LITERAL", "DESCRIBE_CONFIGS", u),
        ("GROUP", "onceflow-", "PREFIXED", "READ", u),
        ("TRANSACTIONAL_ID", "onceflow", "PREFIXED", "WRITE", u),
        ("TRANSACTIONAL_ID", "onceflow", "PREFIXED", "DESCRIBE", u),
    }
    no_sink = _rows(bindings(PIPELINE_ACLS, "User:onceflow", source="src", output=None, ledger=None))
    assert {r[1] for r in no_sink} == {"src", "onceflow-", "onceflow"}, "no Kafka sink: no output or ledger ACLs"


def test_the_producer_writes_its_topic_with_its_own_transactional_ids():
    assert _rows(bindings(PRODUCER_ACLS, "producer", source="src")) == {
        ("TOPIC", "src", "LITERAL", "WRITE", "User:producer"),
        ("TOPIC", "src", "LITERAL", "DESCRIBE", "User:producer"),
        ("TRANSACTIONAL_ID", "onceflow-produce-", "PREFIXED", "WRITE", "User:producer"),
        ("TRANSACTIONAL_ID", "onceflow-produce-", "PREFIXED", "DESCRIBE", "User:producer"),
    }
    assert principal_of("producer") == "User:producer" and principal_of("User:x") == "User:x"
