"""Deliberate crashes for tests and drills, off unless ONCEFLOW_FAULT is set. (The Kafka sink's
task-level crashes, which kill the whole driver process group, are `onceflow.faults.kafka_sink`.)

`ONCEFLOW_FAULT=<point>@<batch id>` kills the driver with `os._exit` (no
cleanup, no final status: as hard as `kill -9`) when batch <batch id> reaches
<point>, so the hardest windows of exactly-once are exercised on purpose:

- `before_sink_commit`      the batch is planned (offsets/N written), nothing committed
- `between_sinks`           bronze committed, quarantine not yet
- `after_sink_commit`       every sink committed, Spark's commits/N not yet written
- `after_checkpoint_commit` commits/N written too (the next run starts at N+1)
- `before_aggregates_commit` the aggregates follower is about to commit a merge that holds
                            bronze batch N (bronze has it; the aggregates do not yet)
- `before_current_commit`   the same for the keyed table's MERGE (sinks.current)
- `after_current_commit`    the keyed table committed a merge holding bronze batch N; the
                            follower has not yet moved on

`ONCEFLOW_FAULT_POISON=<partition>:<offset>` makes that record fail its batch in a Spark task
(an error raised while it is validated), in every run, as a record that meets an engine bug
would: the poisoned-batch path (onceflow.state.poison, `onceflow quarantine`) is proven with it.
"""

from __future__ import annotations

import os
import sys

POINTS = (
    "before_sink_commit",
    "between_sinks",
    "after_sink_commit",
    "after_checkpoint_commit",
    "before_aggregates_commit",
    "before_current_commit",
    "after_current_commit",
)
# the points only a pipeline with a keyed table (sinks.current) reaches
CURRENT_POINTS = ("before_current_commit", "after_current_commit")
# the points every pipeline with aggregates reaches (the kill schedules of payments and sensors)
JOB_POINTS = tuple(p for p in POINTS if p not in CURRENT_POINTS)
EXIT_CODE = 86  # tells a test the crash was the injected one


def parse(spec: str | None) -> tuple[str, int] | None:
    """'after_sink_commit@3' -> ('after_sink_commit', 3); ValueError naming the accepted forms."""
    if not spec:
        return None
    point, _, batch = spec.partition("@")
    if point not in POINTS or not batch.isdigit():
        raise ValueError(f"ONCEFLOW_FAULT={spec!r}: expected <point>@<batch id> with point one of {', '.join(POINTS)}")
    return point, int(batch)


ENV_POISON = "ONCEFLOW_FAULT_POISON"


def poison_record() -> tuple[int, int] | None:
    """ONCEFLOW_FAULT_POISON='3:120' -> (3, 120); ValueError naming the form."""
    spec = os.environ.get(ENV_POISON)
    if not spec:
        return None
    partition, _, offset = spec.partition(":")
    if not (partition.isdigit() and offset.isdigit()):
        raise ValueError(f"{ENV_POISON}={spec!r}: expected <partition>:<offset>, e.g. 0:120")
    return int(partition), int(offset)


def maybe_crash(point: str, batch_id: int) -> None:
    fault = parse(os.environ.get("ONCEFLOW_FAULT"))
    if fault == (point, batch_id):
        sys.stderr.write(f"onceflow: injected fault: crashing at {point} of batch {batch_id}\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)
