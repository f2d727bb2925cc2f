"""Change data capture: a keyed current-state table from a topic of row changes (docs/cdc.md).

- spec.py: what `sinks.current` declares (keys, `sequence_by`, `delete_when`), resolved against
  the pipeline's schema; refused at load with the field and the fix.
- envelope.py: one Kafka record of a Debezium topic, judged and parsed into a `Change`, the
  `TOMBSTONE` no-op, or a `Malformed` reason (schema/reasons.py).
- fold.py: the reference fold of changes in any order into the current state and its
  tombstones: the independent replay the audit and the tests compare the keyed table with.

A simulated table's change stream for `onceflow produce` is in generate/changes.py.

The job's side lives in spark/: the parse (parse.py), the keyed MERGE (follower.py,
sinks/delta.py); the audit's in audit/current.py.

Plain Python only: no Spark here.
"""
