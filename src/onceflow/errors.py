"""One exception class per failure kind; every message says what failed and the fix."""

import os


class OnceflowError(Exception):
    """Base class: an error onceflow explains to the user (no traceback needed)."""


class ConfigError(OnceflowError):
    """A pipeline config file is missing, unreadable or has an invalid field."""


class DeclarationError(OnceflowError, ValueError):
    """A pipeline file's declaration that contradicts another part of the file (a key that is not
    a declared field): raised while the file is validated, reported by config.load as the dotted
    `field`, the `problem` and the `fix`, never with the file's contents."""

    def __init__(self, field: str, problem: str, fix: str):
        super().__init__(f"{field}: {problem}. Fix: {fix}")
        self.field, self.problem, self.fix = field, problem, fix


class SetupError(OnceflowError):
    """A prerequisite (java, mvn, jars, Python packages) is missing or mismatched."""


class BrokerError(OnceflowError):
    """The embedded Kafka broker could not be started, reached or stopped."""


class KafkaAccessError(BrokerError):
    """Kafka answers but refuses this client: its login, the broker's certificate, or an ACL.
    A restart fails the same way until the settings or the grants change (kafka.access)."""


class ProducerError(OnceflowError):
    """The event generator could not write its transactions."""


class CheckpointError(OnceflowError):
    """A Spark checkpoint directory is unreadable or inconsistent."""


class CheckpointFileError(CheckpointError):
    """One file of a Spark checkpoint is missing, unreadable or malformed; `path` and `reason` say
    which and why."""

    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(f"{os.fspath(path)}: {reason}")
        self.path, self.reason = os.fspath(path), reason


class RecoveryError(OnceflowError):
    """Recovery refused or failed; the message says why and what to do."""


class IdentityFileError(RecoveryError):
    """A checkpoint's identity file (_onceflow.json) cannot be read; `path` and `cause` say which and
    why, `problem` says both without the fix."""

    def __init__(self, path: str | os.PathLike, cause: str):
        self.path, self.cause = os.fspath(path), cause
        super().__init__(
            f"{self.problem}. Fix: run `onceflow recover` to start a new generation from the sink ledgers."
        )

    @property
    def problem(self) -> str:
        return f"{self.path} is unreadable ({self.cause})"


class StorageError(OnceflowError):
    """An object store refused, failed a check, or is held by another driver; the message says which and the fix."""


class RegistryError(OnceflowError):
    """The schema registry could not be started, reached or asked (onceflow.local.registry, onceflow.registry)."""


class UnreadableSchemaError(RegistryError):
    """A registered schema onceflow does not read; the message says why (schema/protobuf.py)."""


class LeaseHeldError(StorageError):
    """Another driver holds the pipeline's lease in the store; `holder` says who (docs/storage.md)."""

    def __init__(self, message: str, holder: dict):
        super().__init__(message)
        self.holder = holder


class StoreConflict(Exception):  # a result, not a failure: the condition did not hold
    """The store refused a conditional write: the object exists (create) or changed (if-match)."""


class UndecodableMessage(OnceflowError):
    """A record's bytes are no message of its Protobuf type, by the audit's own decoder
    (schema/protobuf_reference.py): the record's verdict is `protobuf_undecodable`, not a failure."""


class AuditError(OnceflowError):
    """An audit could not run (not: an audit that found a problem)."""


class SinkError(OnceflowError):
    """A pipeline's sink or its ledger is missing or unreadable (onceflow.sinks)."""


class RangeError(OnceflowError):
    """A requested offset or time range is invalid; the message names the field and the fix."""


class TableFeatureError(SinkError):
    """delta-rs cannot commit to a Delta table: the table uses a feature delta-rs does not support."""

    def __init__(self, path: str, reason: str, fix: str):
        super().__init__(f"delta-rs cannot commit to the Delta table at {path} ({reason}). Fix: {fix}")
        self.path, self.reason = path, reason


class KafkaLedgerError(OnceflowError):
    """The Kafka sink's ledger topic could not be read, or is unusable as a ledger."""


class KafkaSinkError(OnceflowError):
    """The transactional Kafka sink could not commit a batch; the message says which task and why."""


class FaultSpecError(OnceflowError):
    """The fault-injection environment variables are malformed."""


class IngestError(OnceflowError):
    """The streaming query failed; the message carries Spark's reason."""


class BackfillError(OnceflowError):
    """A backfill range that cannot be processed; the message names the fix."""


class AlreadyRunningError(OnceflowError):
    """Another process already runs this pipeline's query."""


class RecoveryInProgressError(OnceflowError):
    """A recovery works on this pipeline: only the query it starts may run."""


class LedgerReadError(SinkError):
    """A sink's ledger cannot be read; `sink`, `where` and `cause` say which, where and why."""

    def __init__(self, sink: str, where: str, cause: str):
        super().__init__(f"the {sink} sink's ledger at {where} cannot be read ({cause})")
        self.sink, self.where, self.cause = sink, where, cause


class BatchHeld(Exception):
    """A batch held at the stop gate was released by `query.stop()`: it wrote nothing.

    The message holds Py4J's error line and the Java exception, and nothing long
    after them: Spark classifies an exception raised from Python's foreachBatch as
    a stop's interruption when its text matches `Py4JJavaError: An error occurred
    while calling…java.lang.InterruptedException` (StreamExecution.PROXY_ERROR),
    a regex whose stack depth grows with the text after the first part.
    """
