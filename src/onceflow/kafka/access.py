"""May this client do what a pipeline needs on its cluster? (issue 40)

`check_access` logs in as a pipeline's clients will, then asks the broker what the principal
may do: DESCRIBE/READ/WRITE on topics (their authorized operations), READ on a consumer group,
and a transactional id (a transactional producer's `init_transactions`). The first refusal
raises a BrokerError that says what failed and the fix: a login refused (user or password), a
broker certificate this client does not trust or that names another host, or the ACL that is
missing. Login and TLS failures are caught as librdkafka reports them (its error callback), so
a check fails in seconds, not at its timeout. Messages never hold a secret.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from contextlib import suppress
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AdminClient

from onceflow.errors import BrokerError, KafkaAccessError
from onceflow.kafka.client import KafkaClient

T = TypeVar("T")

_GRANTS = "`onceflow kafka start --secure --pipeline P` grants a pipeline's ACLs; docs/kafka-security.md"


class _Probe:
    """One check's clients: what librdkafka reported (error_cb, its log lines), and the deadline."""

    def __init__(self, client: KafkaClient, timeout: float):
        self.client, self.timeout = client, timeout
        self.end = time.monotonic() + timeout
        self.errors: list[KafkaError] = []
        self.failures: list[str] = []  # librdkafka's FAIL log lines: why a connection closed
        user = client.props.get("sasl.username")
        self.principal = f"User:{user}" if user else "User:ANONYMOUS"

    def left(self) -> float:
        return max(0.5, self.end - time.monotonic())

    def log(self, level: int, fmt: str, *args: object) -> None:
        """librdkafka's log lines (the `logger` config calls this): kept, never printed."""
        if args and args[0] == "FAIL":
            self.failures.append(str(args[-1]))

    def config(self, **extra: Any) -> dict[str, Any]:
        ms = int(self.timeout * 1000)
        return self.client.librdkafka(
            **{
                "error_cb": self.errors.append,
                "logger": self,
                "log_level": 6,  # a connection's FAIL lines (why it closed) come as notices: kept, never printed
                "socket.connection.setup.timeout.ms": ms,
            },
            **extra,
        )

    def wait(self, handle: AdminClient, future: Future[T], doing: str) -> T:
        """The future's result, polling `handle` for its callbacks; a login, TLS or connection
        failure raises at once."""
        while True:
            self.refuse_login()
            if future.done():
                try:
                    return future.result()
                except KafkaException as exc:
                    self.refuse_login(exc.args[0])
                    raise
            if time.monotonic() > self.end:
                self.refuse_login(final=True)
                raise BrokerError(
                    f"Kafka at {self.client.describe()} did not answer within {self.timeout:.0f}s while {doing}. "
                    "Fix: check the bootstrap servers, and that the broker runs and this host may reach it"
                )
            handle.poll(0.1)

    def retrying(self, handle: AdminClient, request: Callable[[], Future[T]], doing: str) -> T:
        """`request()`'s result, asked again while the group coordinator is loading or moving and
        time is left."""
        while True:
            try:
                return self.wait(handle, request(), doing)
            except KafkaException as exc:
                if _code(exc) not in _COORDINATOR_MOVING or self.left() <= 1:
                    raise
                time.sleep(0.2)

    def refuse_login(self, err: KafkaError | None = None, final: bool = False) -> None:
        """Raise the refusal of the first login or TLS failure reported (or `err`); once every
        broker is down (or with `final`), of the connection failure."""
        reported = [*self.errors, *([err] if err is not None else [])]
        for e in reported:
            message = login_refusal(self.client, e)
            if message:
                raise KafkaAccessError(message)
        down = [e for e in reported if e.code() in _UNREACHABLE]
        if down and (final or any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in down)):
            why = self.failures[-1] if self.failures else down[0].str()
            hint = ""
            if "APIVERSION_QUERY" in why and "SSL" not in self.client.props.get("security.protocol", "").upper():
                hint = " (the broker closed the connection at once: its listener may expect TLS, i.e. SSL or SASL_SSL)"
            raise BrokerError(
                f"cannot reach Kafka at {self.client.describe()}: {why}{hint}. Fix: check the bootstrap servers "
                "and security.protocol, and that the broker runs"
            )


# a group's coordinator loading or moving (a broker just started): asked again; librdkafka does not mark these
# retriable in an admin result
_COORDINATOR_MOVING = (
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
)
_UNREACHABLE = (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE)


def login_refusal(client: KafkaClient, err: KafkaError) -> str | None:
    """The refusal of a failed login or TLS handshake, None for another error."""
    text, code, where = err.str(), err.code(), client.describe()
    lowered = text.lower()
    if code == KafkaError._AUTHENTICATION or "sasl authentication" in lowered:
        return (
            f"Kafka at {where} refused the login: SASL authentication failed ({text}). "
            "Fix: check sasl.username/sasl.password (or the Airflow kafka connection)"
        )
    if "hostname mismatch" in lowered or (
        "certificate verify failed" in lowered and _trusted_but_misnamed(client, text)
    ):
        return (
            f"the TLS handshake with Kafka at {where} failed: the broker's certificate does not name the host "
            f"connected to ({text}). Fix: connect by a name the certificate holds (its subjectAltName), "
            "or give the broker a certificate for this name"
        )
    if "certificate verify failed" in lowered:
        ca = client.props.get("ssl.ca.location")
        trusted = f"ssl.ca.location is {ca}" if ca else "ssl.ca.location is not set: the system's CAs"
        return (
            f"the TLS handshake with Kafka at {where} failed: the broker's certificate is not signed by a CA "
            f"this client trusts ({trusted}; {text}). "
            "Fix: set ssl.ca.location to the CA that signed the broker's certificate"
        )
    if code == KafkaError._SSL or "ssl handshake failed" in lowered:
        return (
            f"the TLS handshake with Kafka at {where} failed ({text}). Fix: check security.protocol (does the "
            "listener speak TLS?) and the ssl.* settings"
        )
    return None


def _trusted_but_misnamed(client: KafkaClient, text: str) -> bool:
    """Whether the broker that failed verification (named in librdkafka's `text`) shows a certificate
    chain the client's CA trusts: then what failed is the name. One TLS handshake, no Kafka."""
    named = re.search(r"ssl://\[?([^\]/]+?)\]?:(\d+)/", text) or re.match(  # sasl_ssl://host:port/bootstrap
        r"(?:\w+://)?\[?([^\],]+?)\]?:(\d+)", client.bootstrap
    )
    if not named:
        return False
    try:
        context = ssl.create_default_context(cafile=client.props.get("ssl.ca.location"))
        context.check_hostname = False
        with socket.create_connection((named[1], int(named[2])), timeout=3) as raw, context.wrap_socket(raw):
            return True
    except (OSError, ssl.SSLError):
        return False


def _code(exc: KafkaException) -> Any:
    return exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None


def _topic_refusal(probe: _Probe, topic: str, ops: list[str]) -> KafkaAccessError:
    said = " and ".join([", ".join(ops[:-1]), ops[-1]] if len(ops) > 1 else ops)
    return KafkaAccessError(
        f"{probe.principal} may not {said} topic {topic!r} on {probe.client.bootstrap}: no TOPIC ACL allows it. "
        f"Fix: grant {said} on TOPIC {topic!r} to {probe.principal} ({_GRANTS})"
    )


def _check_topics(probe: _Probe, admin: AdminClient, read: set[str], write: set[str], creatable: set[str]) -> None:
    topics = sorted(read | write)
    futures = admin.describe_topics(
        TopicCollection(topics), include_authorized_operations=True, request_timeout=probe.left()
    )
    for topic in topics:
        need = [op for op, named in (("READ", read), ("WRITE", write)) if topic in named]
        try:
            description = probe.wait(admin, futures[topic], f"describing topic {topic!r}")
        except KafkaException as exc:
            if _code(exc) == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                raise _topic_refusal(probe, topic, ["DESCRIBE", *need]) from None
            if _code(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                if topic in creatable:  # the caller makes it: nothing of it to check yet
                    continue
                raise BrokerError(
                    f"topic {topic!r} does not exist on {probe.client.bootstrap}. Fix: create it "
                    "(`onceflow kafka create-topic --pipeline P`, or as the cluster's admin)"
                ) from None
            raise BrokerError(f"cannot describe topic {topic!r} on {probe.client.describe()}: {exc}") from None
        allowed = {op.name for op in description.authorized_operations or ()}
        missing = [op for op in need if op not in allowed]
        if missing:
            raise _topic_refusal(probe, topic, missing)


def _check_group(probe: _Probe, admin: AdminClient, group: str) -> None:
    refusal = KafkaAccessError(
        f"{probe.principal} may not READ consumer group {group!r} on {probe.client.bootstrap}: no GROUP ACL "
        f"allows it. Fix: grant READ on GROUP {group!r} to {probe.principal} (onceflow's groups all start with "
        f"'onceflow-': one PREFIXED ACL on 'onceflow-' covers them; {_GRANTS})"
    )

    def request() -> Future:
        futures = admin.describe_consumer_groups(
            [group], include_authorized_operations=True, request_timeout=probe.left()
        )
        return futures[group]

    try:
        description = probe.retrying(admin, request, f"describing consumer group {group!r}")
    except KafkaException as exc:
        if _code(exc) == KafkaError.GROUP_AUTHORIZATION_FAILED:
            raise refusal from None
        raise BrokerError(f"cannot describe consumer group {group!r} on {probe.client.describe()}: {exc}") from None
    if "READ" not in {op.name for op in description.authorized_operations or ()}:
        raise refusal


def _check_transactions(probe: _Probe, transactional_id: str) -> None:
    producer = Producer(probe.config(**{"transactional.id": transactional_id}))
    try:
        producer.init_transactions(probe.left())
    except KafkaException as exc:
        if _code(exc) in (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED):
            raise KafkaAccessError(
                f"{probe.principal} may not use transactional id {transactional_id!r} on {probe.client.bootstrap}: "
                f"no TRANSACTIONAL_ID ACL allows WRITE on it. Fix: grant WRITE and DESCRIBE on TRANSACTIONAL_ID "
                f"{transactional_id!r} to {probe.principal} (a PREFIXED ACL on 'onceflow' covers a pipeline's "
                f"Kafka sink, one on 'onceflow-produce-' `onceflow produce`; {_GRANTS})"
            ) from None
        probe.refuse_login(exc.args[0], final=True)
        raise BrokerError(
            f"transactions with id {transactional_id!r} cannot start on {probe.client.describe()}: {exc}"
        ) from None
    finally:
        with suppress(KafkaException):  # a fatal error (an ACL refusal is one) surfaces again here
            producer.poll(0)  # as check_access's admin: nothing left queued at destroy


def check_access(
    client: KafkaClient,
    *,
    topics_read: Iterable[str] = (),
    topics_write: Iterable[str] = (),
    creatable: Iterable[str] = (),
    group: str | None = None,
    groups: Iterable[str] = (),
    transactional_id: str | None = None,
    timeout: float = 10,
) -> None:
    """Raise BrokerError (what failed, the fix) unless `client` logs in and its principal may READ
    `topics_read`, WRITE `topics_write` (and DESCRIBE both; a topic in `creatable` that does not
    exist yet is skipped: the caller creates it), READ consumer group `group` and each of `groups`,
    and start transactions with `transactional_id` (a probe id that matches the real ones' ACL, e.g.
    `onceflow.preflight.<pipeline>`: a producer with it is fenced). One login, within about
    `timeout` s."""
    probe = _Probe(client, timeout)
    admin = AdminClient(probe.config())
    try:
        probe.wait(admin, admin.describe_cluster(request_timeout=probe.left()), "logging in")
        read, write = set(topics_read), set(topics_write)
        if read or write:
            _check_topics(probe, admin, read, write, set(creatable))
        for name in dict.fromkeys([*([group] if group else []), *groups]):
            _check_group(probe, admin, name)
        if transactional_id:
            _check_transactions(probe, transactional_id)
    finally:
        with suppress(KafkaException):  # a fatal error surfaces again here: already said above
            admin.poll(0)  # serve what is queued: a client destroyed with events left prints a notice to stderr
