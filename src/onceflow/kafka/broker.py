"""The embedded default broker: one real Apache Kafka process, KRaft mode.

One combined broker+controller node, formatted on first start, with the
single-node settings transactions need. Data and logs live under
<state>/kafka; a restart keeps topics and data.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from onceflow import processes
from onceflow.errors import BrokerError, SetupError
from onceflow.jvm import classpath_jars
from onceflow.paths import state_dir
from onceflow.polling import wait_for

DEFAULT_PORT = 9092

_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = WARN
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
"""


@dataclass
class BrokerStatus:
    running: bool
    ready: bool
    pid: int | None
    port: int
    bootstrap: str
    data_dir: str
    log_file: str


def free_port_pair() -> int:
    """A port p such that p and p+1 are both free (a broker's client + controller ports): for
    brokers of their own in tests, benchmarks and drills."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65000:
            try:
                with socket.socket() as s2:
                    s2.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
    raise BrokerError("no free pair of adjacent ports on 127.0.0.1 after 50 tries. Fix: free some local ports")


def transaction_state_partition(transactional_id: str, partitions: int) -> int:
    """The partition of `__transaction_state` (of `partitions`) that holds a transactional id; its
    leader is the id's transaction coordinator. Kafka's own rule: `Utils.abs(id.hashCode) %
    partitions`, Java's String.hashCode over UTF-16 code units, Utils.abs(Integer.MIN_VALUE) = 0."""
    units = transactional_id.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class LocalBroker:
    """Start, stop and inspect the embedded broker living in <home>/kafka."""

    def __init__(
        self,
        home: Path | None = None,
        port: int | None = None,
        controller_port: int | None = None,
        extra_properties: dict[str, str] | None = None,
        cluster_id: str | None = None,
        heap: str | None = None,
    ):
        self.dir = (home or state_dir()) / "kafka"
        saved = self._saved_ports()
        self.port = port or saved.get("port") or int(os.environ.get("ONCEFLOW_KAFKA_PORT", DEFAULT_PORT))
        self.controller_port = controller_port or saved.get("controller_port") or self.port + 1
        self.extra_properties = extra_properties or {}
        self.heap = heap
        self.cluster_id = cluster_id  # one id for every node of a cluster (LocalCluster); else a fresh one

    # -- files ---------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_file(self) -> Path:
        return self.dir / "broker.log"

    @property
    def pid_file(self) -> Path:
        return self.dir / "broker.pid"

    @property
    def bootstrap(self) -> str:
        return f"localhost:{self.port}"

    def _saved_ports(self) -> dict[str, int]:
        try:
            return json.loads((self.dir / "ports.json").read_text())
        except (OSError, ValueError):
            return {}

    def _pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if processes.alive(pid) else None

    def _properties(self) -> str:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@localhost:{self.controller_port}",
            "listeners": f"PLAINTEXT://localhost:{self.port},CONTROLLER://localhost:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://localhost:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "4",
            "auto.create.topics.enable": "false",
            # single node: internal topics cannot have more than one replica
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # retention is checked often so retention drills finish in seconds
            "log.retention.check.interval.ms": "5000",
        }
        props.update(self.extra_properties)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    # -- lifecycle -----------------------------------------------------------
    def status(self, probe: bool = True) -> BrokerStatus:
        pid = self._pid()
        ready = bool(pid) and probe and self._answers(timeout=5)
        return BrokerStatus(
            running=pid is not None,
            ready=ready,
            pid=pid,
            port=self.port,
            bootstrap=self.bootstrap,
            data_dir=str(self.data_dir),
            log_file=str(self.log_file),
        )

    def _answers(self, timeout: float) -> bool:
        from confluent_kafka.admin import AdminClient

        try:
            admin = AdminClient(
                {"bootstrap.servers": self.bootstrap, "socket.timeout.ms": int(timeout * 1000), "log_level": 0}
            )  # probing a starting broker: refusals are expected
            admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 1)
            return True
        except Exception:
            return False

    def _java_cmd(self, main: str, *args: str) -> list[str]:
        java = shutil.which("java")
        if not java:
            raise BrokerError(
                "`java` is not on PATH; the Kafka broker needs Java 17+. "
                "Fix: install a JDK (apt-get install openjdk-17-jre-headless)."
            )
        try:
            jars = classpath_jars("kafka")
        except SetupError as exc:
            raise BrokerError(str(exc)) from None
        heap = self.heap or os.environ.get("ONCEFLOW_KAFKA_HEAP", "768m")
        return [
            java,
            f"-Xmx{heap}",
            "-Xms128m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            "-cp",
            os.pathsep.join(str(j) for j in jars),
            main,
            *args,
        ]

    def _format_storage(self) -> None:
        props = self.dir / "server.properties"
        cluster_id = self.cluster_id or uuid.uuid4().hex[:22]
        cmd = self._java_cmd("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BrokerError(
                f"formatting KRaft storage in {self.data_dir} failed:\n{(proc.stdout + proc.stderr)[-2000:]}"
            )

    def start(self, timeout: float = 90, log=lambda msg: None, wait: bool = True) -> BrokerStatus:
        """Start the broker (idempotent) and wait until it answers AdminClient calls (unless not
        `wait`: a node of a cluster answers only once a quorum of its controllers runs)."""
        if self._pid():
            log(f"broker already running (pid {self._pid()}) on {self.bootstrap}")
            return self._wait_ready(timeout) if wait else self.status(probe=False)
        for port in (self.port, self.controller_port):
            if _port_in_use(port):
                raise BrokerError(
                    f"port {port} is already in use by another process. Fix: stop that process, "
                    f"or choose another port (`onceflow kafka start --port N` or ONCEFLOW_KAFKA_PORT)."
                )
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "log4j2.properties").write_text(_LOG4J2)
        (self.dir / "server.properties").write_text(self._properties())
        (self.dir / "ports.json").write_text(json.dumps({"port": self.port, "controller_port": self.controller_port}))
        cmd = self._java_cmd("kafka.Kafka", str(self.dir / "server.properties"))
        if not (self.data_dir / "meta.properties").exists():
            log(f"formatting KRaft storage in {self.data_dir}")
            self._format_storage()
        with open(self.log_file, "ab") as out:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.dir,
            )
        self.pid_file.write_text(str(proc.pid))
        log(f"broker starting (pid {proc.pid}) on {self.bootstrap}; log: {self.log_file}")
        return self._wait_ready(timeout) if wait else self.status(probe=False)

    def _wait_ready(self, timeout: float) -> BrokerStatus:
        def answers() -> bool:
            if not self._pid():
                raise BrokerError(f"the broker exited during start-up. Last log lines:\n{self.logs(30)}")
            return self._answers(timeout=3)

        wait_for(
            answers,
            timeout,
            lambda: BrokerError(
                f"the broker did not answer on {self.bootstrap} within {timeout:.0f}s. Last log lines:\n{self.logs(30)}"
            ),
            interval=0.5,
        )
        status = self.status(probe=False)
        status.ready = True
        return status

    def stop(self, timeout: float = 30, log=lambda msg: None) -> bool:
        """SIGTERM (clean shutdown), then SIGKILL after `timeout`. True if it was running."""
        pid = self._pid()
        if not pid:
            self.pid_file.unlink(missing_ok=True)
            return False
        stopped = processes.stop(
            pid, grace=timeout, on_kill=lambda: log(f"broker did not stop within {timeout:.0f}s; sending SIGKILL")
        )
        if not stopped.gone:
            raise BrokerError(f"the broker (pid {pid}) is still there 30s after SIGKILL. Fix: look at `ps {pid}`")
        self.pid_file.unlink(missing_ok=True)
        return True

    def logs(self, lines: int = 50) -> str:
        try:
            text = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return "(no broker log yet)"
        return "\n".join(text[-lines:])

    def as_dict(self) -> dict:
        return asdict(self.status())


class LocalCluster:
    """N combined broker+controller KRaft nodes on this machine (`onceflow kafka start --brokers 3`):
    topics and the internal ones replicated N times, `min.insync.replicas` N-1, so one node may die
    mid-transaction. Each node is a LocalBroker in <home>/kafka-cluster/node-<i>."""

    def __init__(self, home: Path | None = None, nodes: int = 3, heap: str = "512m"):
        if nodes < 3:
            raise BrokerError(f"a cluster needs at least 3 nodes (a quorum that survives one), not {nodes}")
        self.dir = (home or state_dir()) / "kafka-cluster"
        saved = self._saved()
        ports = saved.get("ports") or [free_port_pair() for _ in range(nodes)]
        self.cluster_id = saved.get("cluster_id") or uuid.uuid4().hex[:22]
        voters = ",".join(f"{i + 1}@localhost:{p + 1}" for i, p in enumerate(ports))
        isr = str(nodes - 1)
        replicated = {
            "controller.quorum.voters": voters,
            "default.replication.factor": str(nodes),
            "min.insync.replicas": isr,
            "offsets.topic.replication.factor": str(nodes),
            "transaction.state.log.replication.factor": str(nodes),
            "transaction.state.log.min.isr": isr,
            "share.coordinator.state.topic.replication.factor": str(nodes),
            "share.coordinator.state.topic.min.isr": isr,
            "unclean.leader.election.enable": "false",
        }
        self.heap = heap
        self.nodes = [
            LocalBroker(
                home=self.dir / f"node-{i + 1}",
                port=p,
                controller_port=p + 1,
                extra_properties={**replicated, "node.id": str(i + 1)},
                cluster_id=self.cluster_id,
                heap=heap,
            )
            for i, p in enumerate(ports)
        ]
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "cluster.json").write_text(json.dumps({"ports": ports, "cluster_id": self.cluster_id}))

    def _saved(self) -> dict:
        try:
            return json.loads((self.dir / "cluster.json").read_text())
        except (OSError, ValueError):
            return {}

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def start(self, timeout: float = 120, log=lambda msg: None) -> str:
        """Start every node, then wait until each answers; the bootstrap servers."""
        for node in self.nodes:
            node.start(timeout=timeout, log=log, wait=False)
        for node in self.nodes:
            node._wait_ready(timeout)
        log(f"{len(self.nodes)}-node cluster ready: {self.bootstrap}")
        return self.bootstrap

    def stop(self, log=lambda msg: None) -> None:
        """Stop every node at once: a node stopped after the others lost their quorum cannot shut
        down cleanly (its controlled shutdown waits for a controller) and is killed after 30 s."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda node: node.stop(log=log), self.nodes))

    # -- one node at a time (failover drills; nodes are named by their KRaft node.id, 1..N) --------
    def node(self, node_id: int) -> LocalBroker:
        """The node whose `node.id` is `node_id`, as metadata names leaders and replicas."""
        if not 1 <= node_id <= len(self.nodes):
            raise BrokerError(f"no node {node_id} in a {len(self.nodes)}-node cluster (ids 1..{len(self.nodes)})")
        return self.nodes[node_id - 1]

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node: no controlled shutdown, its leaderships move once the controller fences
        it (broker.session.timeout.ms)."""
        node = self.node(node_id)
        pid = node._pid()
        if pid is None:
            raise BrokerError(f"node {node_id} is not running")
        if not processes.stop(pid, grace=30, first=signal.SIGKILL).gone:
            raise BrokerError(f"node {node_id} (pid {pid}) is still there 30s after SIGKILL")
        node.pid_file.unlink(missing_ok=True)

    def stop_node(self, node_id: int, timeout: float = 30) -> None:
        """Stop one node cleanly (SIGTERM: a controlled shutdown hands its leaderships over first)."""
        self.node(node_id).stop(timeout=timeout)

    def start_node(self, node_id: int, timeout: float = 120) -> None:
        """Start one node again (its data kept) and wait until it answers."""
        self.node(node_id).start(timeout=timeout)

    def _metadata(self, topic: str | None = None):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0}).list_topics(topic, timeout=15)

    def leader_of(self, topic: str, partition: int) -> int:
        """The node.id leading `topic`'s `partition` now (-1 while it has no leader)."""
        return self._metadata(topic).topics[topic].partitions[partition].leader

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The node.id coordinating `transactional_id`'s transactions now: the leader of its
        partition of `__transaction_state` (which exists once a transactional producer started)."""
        topic = "__transaction_state"
        partitions = self._metadata(topic).topics[topic].partitions
        return partitions[transaction_state_partition(transactional_id, len(partitions))].leader

    def wait_in_sync(self, timeout: float = 120) -> None:
        """Wait until every partition of every topic (the internal ones too) has a leader and all
        its replicas in sync: a node that came back has caught up, so another may fail."""

        def lagging() -> list[str]:
            return [
                f"{name}-{p.id} (leader {p.leader}, isr {sorted(p.isrs)} of {sorted(p.replicas)})"
                for name, info in self._metadata().topics.items()
                for p in info.partitions.values()
                if p.leader < 0 or set(p.isrs) != set(p.replicas)
            ]

        left: list[str] = []

        def in_sync() -> bool:
            nonlocal left
            left = lagging()
            return not left

        wait_for(in_sync, timeout, lambda: BrokerError(f"partitions not in sync after {timeout:.0f}s: {left[:5]}"))
