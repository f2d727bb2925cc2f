"""Kafka: client settings, admin look-ups, ACLs and the Kafka sink's ledger.

The local broker is in onceflow.local, the event generator in onceflow.generate.
"""
