"""onceflow: Kafka into lakehouse tables exactly once, proven by audits."""

__version__ = "0.1.0"
