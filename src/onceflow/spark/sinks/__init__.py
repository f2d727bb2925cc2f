"""Output sinks the streaming job calls from foreachBatch, one module per kind.

`kafka_txn.KafkaTxnSink` writes a pipeline's valid events to a Kafka topic
exactly once (Kafka transactions, fencing, a ledger topic; docs/kafka-sink.md);
`onceflow.kafka.ledger` reads that sink's ledger back for the audit and recovery.
"""
