"""One exception class per failure kind; every message says what failed and the fix."""


class OnceflowError(Exception):
    """Base class: an error onceflow explains to the user (no traceback needed)."""


class ConfigError(OnceflowError):
    """A pipeline config file is missing, unreadable or has an invalid field."""


class SetupError(OnceflowError):
    """A prerequisite (java, mvn, jars, Python packages) is missing or mismatched."""


class BrokerError(OnceflowError):
    """The embedded Kafka broker could not be started, reached or stopped."""


class ProducerError(OnceflowError):
    """The event generator could not write its transactions."""


class CheckpointError(OnceflowError):
    """A Spark checkpoint directory is unreadable or inconsistent."""


class RecoveryError(OnceflowError):
    """Recovery refused or failed; the message says why and what to do."""


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
