"""Generators: the events `onceflow produce`, the demos, the tests and the benchmarks write to Kafka.

None of this is the product: no pipeline, job, audit, recovery or health check imports it
(.importlinter, contract `core-no-stand-ins`); docs/generator.md says what it makes.

- records.py: records of a pipeline's declared event, valid or malformed with a known reason
  (`Generator`), each judged as the job will judge it.
- large.py: valid records made large on purpose (near the Kafka record limit, deep, wide).
- changes.py: a simulated table's Debezium change stream (snapshot, changes, key changes,
  duplicate and late deliveries, malformed records) and the table it ends with (`ChangeStream`).
- producer.py: writes them in Kafka transactions, some aborted on purpose (`produce`).
"""
