"""A 3-node KRaft cluster on this machine (`onceflow kafka start --brokers 3`): topics replicated 3
times with min.insync.replicas 2, and transactions that survive the SIGKILL of the leader of a
partition while they are open: a read_committed reader sees every committed record exactly once
and no record of an aborted transaction (issue 40's replicated cluster, before the stream runs on it)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter

import pytest
from confluent_kafka.admin import AdminClient

from devkit.kafka import consume_all
from devkit.pipelines import PAYMENTS_SCHEMA
from onceflow.kafka.broker import LocalCluster
from onceflow.kafka.producer import produce

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def cluster(jars, tmp_path_factory):
    c = LocalCluster(home=tmp_path_factory.mktemp("cluster"), nodes=3, heap="384m")
    c.start(timeout=180)
    yield c
    c.stop()


def _leader(bootstrap: str, topic: str, partition: int) -> int:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15)
    return meta.topics[topic].partitions[partition].leader


def test_topics_are_replicated_and_a_killed_leader_loses_no_committed_record(cluster):
    topic = "replicated"
    out: dict = {}

    def write() -> None:
        out["summary"] = produce(
            cluster.bootstrap, topic, 6000, schema=PAYMENTS_SCHEMA, partitions=2, rate=1500, seed=7, abort_ratio=0.1
        )

    writer = threading.Thread(target=write)
    writer.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            leader = _leader(cluster.bootstrap, topic, 0)
            break
        except KeyError:
            time.sleep(0.2)
    meta = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=15)
    assert {len(p.replicas) for p in meta.topics[topic].partitions.values()} == {3}
    time.sleep(1.5)  # transactions open and committed before the kill
    node = cluster.nodes[leader - 1]
    pid = node.status(probe=False).pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # the partition's leader, mid-transaction
    killed_at = time.monotonic()
    time.sleep(3)
    node.start(timeout=120)
    writer.join(180)
    assert not writer.is_alive(), "the producer did not finish after the leader's kill"
    summary = out["summary"]
    assert summary.count("aborted") > 0 and time.monotonic() - killed_at < 180

    seen = Counter(value for _, _, _, value in consume_all(cluster.bootstrap, topic, timeout=120))
    assert max(seen.values()) == 1, "a record twice at read_committed"
    committed = [r for r in summary.records if not r.aborted]
    assert len(seen) == len(committed) == summary.count("committed")
    assert _leader(cluster.bootstrap, topic, 0) in (1, 2, 3)
