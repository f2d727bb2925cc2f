"""The embedded broker's files and ports, and how it reports itself when it is not running; a local
cluster's nodes and where Kafka keeps a transactional id's state."""

from __future__ import annotations

import socket

import pytest

from onceflow.errors import BrokerError
from onceflow.kafka.broker import LocalBroker, LocalCluster, free_port_pair, transaction_state_partition


def test_a_free_port_pair_is_free_on_both_ports():
    port = free_port_pair()
    for p in (port, port + 1):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_a_stopped_broker_says_so_and_stopping_it_is_a_no_op(tmp_path):
    broker = LocalBroker(home=tmp_path, port=free_port_pair())
    status = broker.status()
    assert not status.running and not status.ready and status.pid is None
    assert status.bootstrap == f"localhost:{broker.port}" and status.log_file == str(broker.log_file)
    assert broker.stop() is False and broker.logs() == "(no broker log yet)"
    broker.pid_file.parent.mkdir(parents=True, exist_ok=True)
    broker.pid_file.write_text("999999999")  # a pid file left by a broker that died: not running
    assert broker.status().pid is None and broker.stop() is False and not broker.pid_file.exists()


def test_a_transactional_id_maps_to_its_transaction_state_partition_as_kafka_maps_it():
    # Java's String.hashCode, then Kafka's Utils.abs (Integer.MIN_VALUE -> 0), modulo the partitions
    assert transaction_state_partition("a", 50) == 97 % 50
    assert transaction_state_partition("onceflow.p_cf.g1.p3", 4) == 2  # hashCode 601762634 (jshell)
    assert transaction_state_partition("polygenelubricants", 50) == 0  # hashCode Integer.MIN_VALUE
    assert transaction_state_partition("", 4) == 0


def test_a_cluster_names_its_nodes_by_node_id_and_refuses_to_kill_one_that_is_not_running(tmp_path):
    cluster = LocalCluster(home=tmp_path)
    assert cluster.node(1) is cluster.nodes[0] and cluster.node(3) is cluster.nodes[2]
    for wrong in (0, 4):
        with pytest.raises(BrokerError, match="no node"):
            cluster.node(wrong)
    with pytest.raises(BrokerError, match="node 2 is not running"):
        cluster.kill_node(2)
