"""The embedded default broker: one real Apache Kafka process, KRaft mode.

One combined broker+controller node, formatted on first start, with the
single-node settings transactions need. Data and logs live under
<state>/kafka; a restart keeps topics and data.

`secure=True` (`onceflow kafka start --secure`) gives the same node a SASL_SSL listener
(SCRAM-SHA-512, TLS from a CA of its own) for clients and inter-broker traffic, and ACLs
(StandardAuthorizer, nothing allowed without an ACL). Its files live in <dir>/secure: the CA,
the broker's key and certificate, and the users' client settings (credentials.json, 0600).
The controller listener, on localhost, takes SASL PLAIN (SASL_PLAINTEXT): a KRaft controller cannot
SCRAM-authenticate (its SCRAM users live in the metadata it serves), so the node's broker logs in to
its controller as admin with PLAIN, whose one user is stated in server.properties (0600). A
PLAINTEXT controller listener would make its clients User:ANONYMOUS, who would then have to be a
super user: anyone on the machine could grant themselves anything through the controller port
(an Admin client's `bootstrap.controllers`).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from onceflow.errors import BrokerError
from onceflow.kafka.client import KafkaClient
from onceflow.local.service import LocalService, read_json
from onceflow.local.tls import make_ca, make_server_cert, write_private
from onceflow.paths import state_dir
from onceflow.polling import wait_for

DEFAULT_PORT = 9092
# the secure broker's users: its admin (topics, ACLs, the ready probe and inter-broker traffic), the
# pipelines' principal and the one `onceflow produce` uses
SECURE_USERS = ("admin", "onceflow", "producer")
SCRAM = "SCRAM-SHA-512"

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
    secure: bool = False  # SASL_SSL (SCRAM-SHA-512) and ACLs, or plaintext


@dataclass(frozen=True)
class Listener:
    """A client listener of a served broker (`onceflow kafka serve`, the docker stack's `kafka`):
    bound on every interface at `port`, advertised to clients as `host:advertised_port` (a
    container's name inside its network, or localhost and a published port outside it)."""

    port: int
    host: str
    advertised_port: int

    @classmethod
    def parse(cls, text: str) -> Listener:
        """`PORT=HOST:ADVERTISED_PORT` (e.g. `9092=kafka:9092`, `29092=localhost:29092`)."""
        port, sep, address = text.partition("=")
        host, colon, advertised = address.rpartition(":")
        if not (sep and colon and host and port.isdigit() and advertised.isdigit()):
            raise BrokerError(
                f"listener {text!r} is not PORT=HOST:ADVERTISED_PORT. Fix: e.g. --listener 9092=kafka:9092"
            )
        return cls(int(port), host, int(advertised))


# below Linux's default ephemeral range (32768-60999, where client connections get their ports)
PRIVATE_PORTS = (20000, 32000)


def free_port_pair() -> int:
    """A port p such that p and p+1 are both free (a broker's client + controller ports): for
    brokers of their own in tests, benchmarks and drills. Drawn below the kernel's ephemeral range,
    so no outgoing connection takes either port while a broker restarts on them."""
    low, high = PRIVATE_PORTS
    for _ in range(200):
        port = random.randrange(low, high - 1)
        try:
            with socket.socket() as s1, socket.socket() as s2:
                s1.bind(("127.0.0.1", port))
                s2.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise BrokerError("no free pair of adjacent ports on 127.0.0.1 after 200 tries. Fix: free some local ports")


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


class LocalBroker(LocalService):
    """Start, stop and inspect the embedded broker living in <home>/kafka."""

    FOLDER = "kafka"
    STEM = "broker"
    TITLE = "the broker"
    ERROR = BrokerError
    NO_JAVA = (
        "`java` is not on PATH; the Kafka broker needs Java 17+. "
        "Fix: install a JDK (apt-get install openjdk-17-jre-headless)."
    )
    NO_LOG = "(no broker log yet)"

    def __init__(
        self,
        home: Path | None = None,
        port: int | None = None,
        controller_port: int | None = None,
        extra_properties: dict[str, str] | None = None,
        cluster_id: str | None = None,
        heap: str | None = None,
        secure: bool | None = None,
    ):
        super().__init__(home)
        saved = self._saved_ports()
        # None: as the broker was last started (plain if never)
        self.secure = bool(saved.get("secure", False)) if secure is None else secure
        self.port = port or saved.get("port") or int(os.environ.get("ONCEFLOW_KAFKA_PORT", DEFAULT_PORT))
        self.controller_port = controller_port or saved.get("controller_port") or self.port + 1
        self.extra_properties = extra_properties or {}
        self.heap = heap
        self.cluster_id = cluster_id  # one id for every node of a cluster (LocalCluster); else a fresh one
        self._users: dict[str, dict[str, str]] | None = None  # the secure broker's, once read
        self.listeners: tuple[Listener, ...] = ()  # a served broker's (serve); else one on localhost:port

    # -- files (data_dir, log_file, pid_file: LocalService) --------------------
    @property
    def bootstrap(self) -> str:
        return f"localhost:{self.port}"

    @property
    def secure_dir(self) -> Path:
        return self.dir / "secure"

    @property
    def ca_file(self) -> Path:
        return self.secure_dir / "ca.pem"

    @property
    def credentials_file(self) -> Path:
        return self.secure_dir / "credentials.json"

    def _saved_ports(self) -> dict:
        return read_json(self.dir / "ports.json")

    def _client_listeners(self, protocol: str) -> list[tuple[str, str, str]]:
        """(name, bound address, advertised address) of each client listener, the inter-broker one
        first (named `protocol`): localhost:port, or a served broker's `listeners`."""
        if not self.listeners:
            return [(protocol, f"localhost:{self.port}", f"localhost:{self.port}")]
        return [
            (protocol if i == 0 else f"CLIENT{i + 1}", f"0.0.0.0:{lst.port}", f"{lst.host}:{lst.advertised_port}")
            for i, lst in enumerate(self.listeners)
        ]

    def _listener_properties(self, protocol: str, controller_protocol: str) -> dict[str, str]:
        clients = self._client_listeners(protocol)
        return {
            "listeners": ",".join(
                [f"{name}://{bound}" for name, bound, _ in clients] + [f"CONTROLLER://localhost:{self.controller_port}"]
            ),
            "advertised.listeners": ",".join(f"{name}://{advertised}" for name, _, advertised in clients),
            "inter.broker.listener.name": protocol,
            "listener.security.protocol.map": ",".join(
                [f"{name}:{protocol}" for name, _, _ in clients] + [f"CONTROLLER:{controller_protocol}"]
            ),
        }

    def _properties(self) -> str:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@localhost:{self.controller_port}",
            **self._listener_properties("PLAINTEXT", "PLAINTEXT"),
            "controller.listener.names": "CONTROLLER",
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
        if self.secure:
            props.update(self._secure_properties())
        props.update(self.extra_properties)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _secure_properties(self) -> dict[str, str]:
        """SASL_SSL (SCRAM) for clients and inter-broker traffic; SASL PLAIN on the controller
        listener, localhost only, its one user admin (a KRaft controller cannot SCRAM-authenticate);
        ACLs, and nothing allowed where there is none."""
        admin = self._credentials()["admin"]
        user, password = admin["sasl.username"], admin["sasl.password"]
        scram_jaas = (
            f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'
        )
        return {
            **self._listener_properties("SASL_SSL", "SASL_PLAINTEXT"),
            "sasl.enabled.mechanisms": SCRAM,
            "sasl.mechanism.inter.broker.protocol": SCRAM,
            **{
                f"listener.name.{name.lower()}.{SCRAM.lower()}.sasl.jaas.config": scram_jaas
                for name, _, _ in self._client_listeners("SASL_SSL")
            },
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{user}" password="{password}" user_{user}="{password}";'
            ),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.secure_dir / "broker.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            "ssl.client.auth": "none",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "allow.everyone.if.no.acl.found": "false",
        }

    # -- the secure broker's users --------------------------------------------------
    def _credentials(self) -> dict[str, dict[str, str]]:
        """The users' librdkafka settings, read once (the ready probe asks for admin's at every poll;
        the file never changes once written)."""
        if self._users is not None:
            return self._users
        try:
            self._users = json.loads(self.credentials_file.read_text())
            return self._users
        except (OSError, ValueError) as exc:
            raise BrokerError(
                f"the secure broker's credentials in {self.credentials_file} cannot be read ({exc}). Fix: stop "
                f"the broker and remove {self.dir} to start a new secure broker (its data goes with it)"
            ) from None

    def _make_secure_files(self, passwords: dict[str, str] | None = None) -> None:
        """The CA, the broker's certificate (for localhost and the served listeners' names) and the
        users' passwords (`passwords`, else fresh random ones), unless there already."""
        self.secure_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.ca_file.exists():
            make_ca(self.secure_dir)
        if not (self.secure_dir / "broker.pem").exists():
            hosts = [lst.host for lst in self.listeners]
            make_server_cert(
                self.ca_file, self.secure_dir / "ca.key", self.secure_dir / "broker.pem", "localhost", *hosts
            )
        if not self.credentials_file.exists():
            users = {
                user: {
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanism": SCRAM,
                    "sasl.username": user,
                    "sasl.password": (passwords or {}).get(user) or secrets.token_urlsafe(24),
                    "ssl.ca.location": str(self.ca_file),
                }
                for user in SECURE_USERS
            }
            write_private(self.credentials_file, json.dumps(users, indent=2))

    def client(self, user: str = "onceflow") -> KafkaClient:
        """This broker as `user` reaches it (a plain broker: its bootstrap, no settings)."""
        if not self.secure:
            return KafkaClient(self.bootstrap)
        users = self._credentials()
        if user not in users:
            raise BrokerError(
                f"the secure broker in {self.dir} has no user {user!r}. Fix: use one of {', '.join(sorted(users))}"
            )
        return KafkaClient(self.bootstrap, users[user])

    def env(self, user: str = "onceflow") -> dict[str, str]:
        """The ONCEFLOW_KAFKA_* variables a shell or pipeline reaches this broker with, as `user`
        (a plain broker: only ONCEFLOW_KAFKA_BOOTSTRAP)."""
        props = self.client(user).props
        values = {
            "ONCEFLOW_KAFKA_BOOTSTRAP": self.bootstrap,
            "ONCEFLOW_KAFKA_SECURITY_PROTOCOL": props.get("security.protocol", ""),
            "ONCEFLOW_KAFKA_SASL_MECHANISM": props.get("sasl.mechanism", ""),
            "ONCEFLOW_KAFKA_USERNAME": props.get("sasl.username", ""),
            "ONCEFLOW_KAFKA_PASSWORD": props.get("sasl.password", ""),
            "ONCEFLOW_KAFKA_CA": props.get("ssl.ca.location", ""),
        }
        return {k: v for k, v in values.items() if v}

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
            secure=self.secure,
        )

    def _answers(self, timeout: float) -> bool:
        from confluent_kafka.admin import AdminClient

        try:
            # probing a starting broker: refusals are expected; a secure one as its admin
            admin = AdminClient(
                self.client("admin").librdkafka(**{"socket.timeout.ms": int(timeout * 1000), "log_level": 0})
            )
            admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 1)
            return True
        except Exception:
            return False

    def _java_cmd(self, main: str, *args: str) -> list[str]:
        java, jars = self._java("kafka")
        heap = self.heap or os.environ.get("ONCEFLOW_KAFKA_HEAP", "768m")
        return [
            java,
            f"-Xmx{heap}",
            "-Xms128m",
            "-XX:+UseG1GC",
            # e.g. `-XX:TieredStopAtLevel=1` where brokers carry little load and CPU is short (the test
            # suite: a 3-node cluster at 120 transactional records/s burnt 0.6 of the CPU it burns with
            # C2, docs/testing.md); empty by default
            *shlex.split(os.environ.get("ONCEFLOW_KAFKA_JAVA_OPTIONS", "")),
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            "-cp",
            os.pathsep.join(str(j) for j in jars),
            main,
            *args,
        ]

    def _format_storage(self) -> None:
        """`StorageTool format`; a secure broker's SCRAM users are created here too (KIP-900), their
        passwords passed in a 0600 @argfile (never on the process list), removed afterwards."""
        props = self.dir / "server.properties"
        cluster_id = self.cluster_id or uuid.uuid4().hex[:22]
        args = ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)]
        passwords = []
        if self.secure:
            for user, settings in self._credentials().items():
                passwords.append(settings["sasl.password"])
                args += ["--add-scram", f"{SCRAM}=[name={user},password={settings['sasl.password']}]"]
        argfile = self.secure_dir / "format.args"
        if passwords:  # the launcher expands an @file only before the main class: the class goes in it
            write_private(argfile, "\n".join(_argfile_quote(a) for a in args) + "\n")
            cmd = self._java_cmd(f"@{argfile}")
        else:
            cmd = self._java_cmd(*args)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        finally:
            argfile.unlink(missing_ok=True)
        if proc.returncode != 0:
            said = (proc.stdout + proc.stderr)[-2000:]
            for password in passwords:
                said = said.replace(password, "***")
            raise BrokerError(f"formatting KRaft storage in {self.data_dir} failed:\n{said}")

    def start(self, timeout: float = 90, log=lambda msg: None, wait: bool = True) -> BrokerStatus:
        """Start the broker (idempotent) and wait until it answers AdminClient calls (unless not
        `wait`: a node of a cluster answers only once a quorum of its controllers runs)."""
        self._check_mode()
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
        formatted = (self.data_dir / "meta.properties").exists()
        if self.secure and not formatted:
            self._make_secure_files()
        (self.dir / "log4j2.properties").write_text(_LOG4J2)
        write_private(self.dir / "server.properties", self._properties())  # a secure one holds the admin's JAAS
        (self.dir / "ports.json").write_text(
            json.dumps({"port": self.port, "controller_port": self.controller_port, "secure": self.secure})
        )
        cmd = self._java_cmd("kafka.Kafka", str(self.dir / "server.properties"))
        if not formatted:
            log(f"formatting KRaft storage in {self.data_dir}")
            self._format_storage()
        proc = self._launch(cmd, cwd=self.dir)
        log(f"broker starting (pid {proc.pid}) on {self.bootstrap}; log: {self.log_file}")
        return self._wait_ready(timeout) if wait else self.status(probe=False)

    def serve(
        self,
        listeners: tuple[Listener, ...],
        passwords: dict[str, str] | None = None,
        ready_file: Path | None = None,
        ca_out: Path | None = None,
        on_ready=lambda broker: None,
        timeout: float = 120,
        log=lambda msg: None,
    ) -> int:
        """Run the broker in the foreground until it exits (a container's main process,
        `onceflow kafka serve`): the same settings as `start`, with client `listeners` bound on
        every interface and advertised by name; a secure one's users get `passwords` (from the
        environment) on first start. Its log goes to this process's stdout. Once it answers,
        `on_ready(self)` runs (topics, ACLs), the CA is copied to `ca_out` (for clients to trust)
        and `ready_file` is written (a healthcheck's); SIGTERM is passed on (a clean shutdown).
        The broker's exit code is returned."""
        self.listeners = listeners
        if ready_file:
            ready_file.unlink(missing_ok=True)
        self._check_mode()
        self.dir.mkdir(parents=True, exist_ok=True)
        formatted = (self.data_dir / "meta.properties").exists()
        if self.secure and not formatted:
            self._make_secure_files(passwords)
        if self.secure and passwords:
            stale = [u for u, p in passwords.items() if self._credentials().get(u, {}).get("sasl.password") != p]
            if stale:
                raise BrokerError(
                    f"the passwords of {', '.join(stale)} differ from the ones this broker was formatted with "
                    f"({self.credentials_file}). Fix: give the broker its first passwords again, or remove its data "
                    f"({self.dir}) to start a new broker with these"
                )
        (self.dir / "log4j2.properties").write_text(_LOG4J2)
        write_private(self.dir / "server.properties", self._properties())
        (self.dir / "ports.json").write_text(
            json.dumps({"port": self.port, "controller_port": self.controller_port, "secure": self.secure})
        )
        if not formatted:
            log(f"formatting KRaft storage in {self.data_dir}")
            self._format_storage()
        proc = subprocess.Popen(self._java_cmd("kafka.Kafka", str(self.dir / "server.properties")), cwd=self.dir)
        self.pid_file.write_text(str(proc.pid))
        signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
        advertised = ", ".join(f"{lst.host}:{lst.advertised_port}" for lst in listeners)
        log(f"broker starting (pid {proc.pid}), advertised as {advertised}")

        def answers() -> bool:
            if proc.poll() is not None:
                raise BrokerError(f"the broker exited during start-up (exit {proc.returncode})")
            return self._answers(timeout=3)

        wait_for(
            answers, timeout, lambda: BrokerError(f"the broker did not answer within {timeout:.0f}s"), interval=0.5
        )
        on_ready(self)
        if ca_out and self.secure:
            ca_out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.ca_file, ca_out)
        if ready_file:
            ready_file.write_text(str(proc.pid))
        log(f"broker ready ({'SASL_SSL, SCRAM-SHA-512, ACLs' if self.secure else 'PLAINTEXT'})")
        return proc.wait()

    def _check_mode(self) -> None:
        """Refuse to start the data of a secure broker plain, or of a plain one secure: the users,
        ACLs and listeners a broker has are set when its storage is formatted."""
        if not (self.data_dir / "meta.properties").exists():
            return
        was = bool(self._saved_ports().get("secure", False))
        if was == self.secure:
            return
        mode = {True: "secure (SASL_SSL, SCRAM-SHA-512, ACLs)", False: "plain (PLAINTEXT)"}
        raise BrokerError(
            f"the broker in {self.dir} was made {mode[was]}; it cannot start {mode[self.secure]}. Fix: start it "
            f"as it was (`onceflow kafka start{' --secure' if was else ''}`), or stop it and remove {self.dir} "
            f"to start a new {'secure' if self.secure else 'plain'} broker (its topics and data go with it)"
        )

    def _wait_ready(self, timeout: float) -> BrokerStatus:
        self._wait_answering(
            lambda: self._answers(timeout=3),
            timeout,
            lambda: BrokerError(
                f"the broker did not answer on {self.bootstrap} within {timeout:.0f}s. Last log lines:\n{self.logs(30)}"
            ),
            interval=0.5,
            log_lines=30,
        )
        status = self.status(probe=False)
        status.ready = True
        return status

    def stop(self, timeout: float = 30, log=lambda msg: None) -> bool:
        """SIGTERM (clean shutdown), then SIGKILL after `timeout`. True if it was running."""
        return self._stop_process(
            timeout,
            on_kill=lambda: log(f"broker did not stop within {timeout:.0f}s; sending SIGKILL"),
            still_there=lambda pid: BrokerError(
                f"the broker (pid {pid}) is still there 30s after SIGKILL. Fix: look at `ps {pid}`"
            ),
        )


def _argfile_quote(arg: str) -> str:
    """One argument of a Java @argfile: in double quotes, `\\` and `"` escaped."""
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


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
        return read_json(self.dir / "cluster.json")

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

        def still_there(pid: int) -> BrokerError:
            return BrokerError(f"node {node_id} (pid {pid}) is still there 30s after SIGKILL")

        if not self.node(node_id)._stop_process(30, first=signal.SIGKILL, still_there=still_there):
            raise BrokerError(f"node {node_id} is not running")

    def stop_node(self, node_id: int, timeout: float = 30) -> None:
        """Stop one node cleanly (SIGTERM: a controlled shutdown hands its leaderships over first)."""
        self.node(node_id).stop(timeout=timeout)

    def start_node(self, node_id: int, timeout: float = 120) -> None:
        """Start one node again (its data kept) and wait until it answers."""
        self.node(node_id).start(timeout=timeout)

    def metadata(self, topic: str | None = None):
        from confluent_kafka.admin import AdminClient

        return AdminClient(KafkaClient(self.bootstrap).librdkafka(log_level=0)).list_topics(topic, timeout=15)

    def leader_of(self, topic: str, partition: int) -> int:
        """The node.id leading `topic`'s `partition` now (-1 while it has no leader)."""
        return self.metadata(topic).topics[topic].partitions[partition].leader

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The node.id coordinating `transactional_id`'s transactions now: the leader of its
        partition of `__transaction_state` (which exists once a transactional producer started)."""
        topic = "__transaction_state"
        partitions = self.metadata(topic).topics[topic].partitions
        return partitions[transaction_state_partition(transactional_id, len(partitions))].leader

    def wait_in_sync(self, timeout: float = 120) -> None:
        """Wait until every partition of every topic (the internal ones too) has a leader and all
        its replicas in sync: a node that came back has caught up, so another may fail."""

        def lagging() -> list[str]:
            return [
                f"{name}-{p.id} (leader {p.leader}, isr {sorted(p.isrs)} of {sorted(p.replicas)})"
                for name, info in self.metadata().topics.items()
                for p in info.partitions.values()
                if p.leader < 0 or set(p.isrs) != set(p.replicas)
            ]

        left: list[str] = []

        def in_sync() -> bool:
            nonlocal left
            left = lagging()
            return not left

        wait_for(in_sync, timeout, lambda: BrokerError(f"partitions not in sync after {timeout:.0f}s: {left[:5]}"))
