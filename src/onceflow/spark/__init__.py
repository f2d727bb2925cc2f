"""Spark: the session factory, the streaming job, its sinks and quarantine."""
