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
