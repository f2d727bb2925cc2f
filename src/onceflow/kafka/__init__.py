"""Kafka: the embedded broker, admin look-ups and the event generator."""
