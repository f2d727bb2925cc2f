"""One Kafka cluster as onceflow reaches it, in the names each client family takes (issue 40).

A pipeline states its client settings once, in librdkafka's names (those of confluent-kafka,
which onceflow's admin, producer, consumer and transactional sink use, and of an Airflow
`kafka` connection's extra); Spark's Kafka source takes the same settings in the Java client's
names with the `kafka.` prefix, translated here and nowhere else. Secrets stay in the settings
object: its repr, `describe()` and `fingerprint()` never show them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from onceflow.config import client_settings, is_secret_setting
from onceflow.connections import airflow_conn_env, extra_of, handed_env
from onceflow.errors import ConfigError

if TYPE_CHECKING:
    from onceflow.config import Pipeline
# librdkafka -> Java client, where the name or the value form differs (the rest are the same name)
_SAME = (
    "security.protocol",
    "client.id",
    "socket.connection.setup.timeout.ms",
    "ssl.endpoint.identification.algorithm",
)
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_JAVA_ONLY_FIX = (
    "Fix: state the setting in librdkafka's name (docs/kafka-security.md), which onceflow translates for Spark"
)


# librdkafka settings Spark's source has no use for: logging, and what onceflow sets per client
# itself (a connection's extra often carries a group.id: Spark takes groupIdPrefix instead)
_NOT_FOR_SPARK = frozenset(
    {"log_level", "debug", "group.id", "auto.offset.reset", "enable.auto.commit", "isolation.level"}
)


def _jaas_quote(value: str) -> str:
    """A JAAS option value: quoted, with `\\` and `"` escaped (Java's StreamTokenizer reads it)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, repr=False)
class KafkaClient:
    """A cluster: its bootstrap servers and client settings (librdkafka names, secrets resolved)."""

    bootstrap: str
    props: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "bootstrap.servers" in self.props:
            raise ConfigError("bootstrap.servers goes in bootstrap_servers, not among the client settings")
        mech = [k for k in ("sasl.mechanism", "sasl.mechanisms") if k in self.props]
        if len(mech) > 1:
            raise ConfigError("both sasl.mechanism and sasl.mechanisms are set; keep one (librdkafka: aliases)")

    # -- confluent-kafka ------------------------------------------------------------------
    def librdkafka(self, **extra: Any) -> dict[str, Any]:
        """An AdminClient/Producer/Consumer config: bootstrap, these settings, then `extra` (Any:
        the client classes' config types, callbacks such as error_cb among them)."""
        # librdkafka's errors only by default: its notices (a destroyed client "purging unserved
        # events", a new connection) are not the user's business; `log_level`/`debug` in the settings win
        return {"bootstrap.servers": self.bootstrap, "log_level": 3, **self.props, **extra}

    # -- Spark's Kafka source (the Java client) ---------------------------------------------
    @property
    def mechanism(self) -> str | None:
        value = self.props.get("sasl.mechanism") or self.props.get("sasl.mechanisms")
        return value.upper() if value else None

    def spark_options(self) -> dict[str, str]:
        """The `kafka.`-prefixed options of Spark's Kafka source for these settings; ConfigError for
        a setting the Java client has no counterpart of (a CA directory, librdkafka-only keys)."""
        java: dict[str, str] = {"bootstrap.servers": self.bootstrap}
        p = dict(self.props)
        for key in _SAME:
            if key in p:
                value = p.pop(key)
                if key == "ssl.endpoint.identification.algorithm" and value.lower() == "none":
                    value = ""  # the Java client's spelling of "no hostname check"
                java[key] = value
        mech = self.mechanism
        p.pop("sasl.mechanism", None), p.pop("sasl.mechanisms", None)
        if mech:
            java["sasl.mechanism"] = mech
            user, password = p.pop("sasl.username", None), p.pop("sasl.password", None)
            if mech in _JAAS_MODULES:
                if user is None or password is None:
                    raise ConfigError(f"sasl.mechanism {mech} needs sasl.username and sasl.password")
                java["sasl.jaas.config"] = (
                    f"{_JAAS_MODULES[mech]} required username={_jaas_quote(user)} password={_jaas_quote(password)};"
                )
            elif mech != "OAUTHBEARER":
                raise ConfigError(f"sasl.mechanism {mech} is not supported; use PLAIN, SCRAM-SHA-256/512")
        if "ssl.ca.location" in p:
            java["ssl.truststore.type"] = "PEM"
            java["ssl.truststore.location"] = p.pop("ssl.ca.location")
        if "ssl.ca.pem" in p:
            java["ssl.truststore.type"] = "PEM"
            java["ssl.truststore.certificates"] = p.pop("ssl.ca.pem")
        if "ssl.certificate.location" in p or "ssl.key.location" in p:
            raise ConfigError(
                "a client certificate and key as two files has no Java form of the same shape; put the PKCS#8 key "
                "and the certificate chain in one PEM file and set it as ssl.keystore.location with "
                "ssl.keystore.type: PEM (onceflow passes both forms on to librdkafka as they are)"
            )
        for key in ("ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.keystore.type"):
            if key in p:
                java[key] = p.pop(key)
        if "socket.timeout.ms" in p:  # librdkafka's per-request timeout is the Java client's request.timeout.ms
            java["request.timeout.ms"] = p.pop("socket.timeout.ms")
        unknown = sorted(k for k in p if k not in _NOT_FOR_SPARK)
        if unknown:
            raise ConfigError(f"no Java client counterpart for {', '.join(unknown)}. {_JAVA_ONLY_FIX}")
        return {f"kafka.{k}": v for k, v in java.items()}

    @property
    def protocol(self) -> str:
        return self.props.get("security.protocol", "PLAINTEXT").upper()

    @property
    def secured(self) -> bool:
        """TLS or SASL: a cluster that checks who connects, and so may refuse a login or an ACL."""
        return self.protocol != "PLAINTEXT"

    # -- saying which cluster, never how to log in ----------------------------------------------
    def describe(self) -> str:
        """`host:port (SASL_SSL, SCRAM-SHA-512 as onceflow)`: for messages and status files (a
        cluster reached with no settings: its servers alone)."""
        if not self.props:
            return self.bootstrap
        how = self.protocol + (f", {self.mechanism} as {self.props.get('sasl.username')}" if self.mechanism else "")
        return f"{self.bootstrap} ({how})"

    def fingerprint(self) -> str:
        """A key for caches of clients (secrets hashed in, never shown)."""
        body = json.dumps([self.bootstrap, sorted(self.props.items())])
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def __repr__(self) -> str:
        shown = {k: ("***" if is_secret_setting(k) else v) for k, v in self.props.items()}
        return f"KafkaClient({self.bootstrap!r}, {shown!r})"


# a cluster as a caller may hold it: a client, or bare bootstrap servers (plaintext)
Cluster = KafkaClient | str


# A bounded read's consumer settings (kafka/consume.py's and kafka/native_read.py's range reads):
# - at a partition's end the broker answers a fetch at once rather than holding it 500 ms for more
#   records, so the position past the last markers shows soon;
# - when the reader falls behind for a moment, librdkafka pauses a partition's fetches for
#   fetch.queue.backoff.ms, 1 s by default: on 2 cores that left the CPU idle for a third of a 5 M
#   record read and made its time vary by 2x (11.3 s and 17.1 s; with 10 ms, 6.9 s and 6.8 s:
#   docs/benchmarks.md)
BOUNDED_READ = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 50,
    "fetch.queue.backoff.ms": 10,
}


def as_client(cluster: Cluster) -> KafkaClient:
    return cluster if isinstance(cluster, KafkaClient) else KafkaClient(cluster)


# -- the clusters of a pipeline -----------------------------------------------------------


def connection_env(conn_id: str) -> str:
    """The variable through which onceflow's Airflow side hands a `kafka` connection's config dict
    to the processes it starts (task, triggerer, spark-submit driver): never a templated field."""
    return handed_env("KAFKA", conn_id)


def connection_settings(conn_id: str) -> dict[str, str]:
    """A `kafka` connection's librdkafka config dict (bootstrap.servers included): from
    ONCEFLOW_KAFKA_CONN_<ID> (set by onceflow's Airflow side), else Airflow's own
    AIRFLOW_CONN_<ID>. ConfigError with the fix when neither is there."""
    for name in (connection_env(conn_id), airflow_conn_env(conn_id)):
        text = os.environ.get(name)
        if not text:
            continue
        try:
            extra = json.loads(text) if name.startswith("ONCEFLOW_") else extra_of(text)
        except (ValueError, KeyError, AttributeError) as exc:
            raise ConfigError(
                f"the Kafka connection {conn_id!r} in ${name} is not readable ({type(exc).__name__}). Fix: make "
                'it JSON like {"conn_type": "kafka", "extra": {"bootstrap.servers": "host:9092", ...}}'
            ) from None
        try:
            return client_settings(extra)
        except ValueError as exc:
            raise ConfigError(
                f"the Kafka connection {conn_id!r} in ${name}: {exc}. Fix: state each setting as text"
            ) from None
    raise ConfigError(
        f"the Kafka connection {conn_id!r} is not known here. Fix: under Airflow, create it (Admin -> "
        "Connections, type kafka, extra = a librdkafka config dict with bootstrap.servers); elsewhere export "
        f'{airflow_conn_env(conn_id)}=\'{{"conn_type": "kafka", "extra": {{...}}}}\' '
        "(docs/kafka-security.md)"
    )


def _client(bootstrap: str | None, settings: Mapping[str, str], conn_id: str | None, where: str) -> KafkaClient:
    props = dict(connection_settings(conn_id)) if conn_id else {}
    servers = (bootstrap or "").strip() or props.get("bootstrap.servers", "")
    props.pop("bootstrap.servers", None)
    props.update(settings)
    if not servers:
        raise ConfigError(
            f"{where}: no bootstrap servers; the connection {conn_id!r} has no bootstrap.servers in its extra. "
            f"Fix: add it there, or set {where}.bootstrap_servers"
        )
    return KafkaClient(servers, props)


def connection_client(conn_id: str) -> KafkaClient:
    """The cluster a `kafka` connection names, with its settings."""
    return _client(None, {}, conn_id, f"connection {conn_id}")


def source_client(pipeline: Pipeline) -> KafkaClient:
    """The cluster a pipeline reads: source.bootstrap_servers, source.kafka, source.kafka_connection."""
    src = pipeline.source
    return _client(src.bootstrap_servers, src.kafka, src.kafka_connection, "source")


def sink_client(pipeline: Pipeline) -> KafkaClient | None:
    """The cluster of the Kafka sink: its own servers if it names them, else the source's; its own
    settings or connection if it names them, else the source's settings."""
    sink = pipeline.sinks.kafka
    if sink is None:
        return None
    if sink.kafka is None and sink.kafka_connection is None:
        source = source_client(pipeline)
        return KafkaClient(sink.bootstrap_servers or source.bootstrap, source.props)
    return _client(sink.bootstrap_servers, sink.kafka or {}, sink.kafka_connection, "sinks.kafka")
