"""Exactly-once under hard kills (issue 3's proof), Delta and Kafka sinks together, with the
tables and the checkpoint on S3 (a real S3 API server): the store a team runs them on, and the
harder case (no atomic rename; each next driver takes the killed one's lease in the store over).
The same windows on a local file system are killed by test_cdc_kills.py (the keyed table's
schedule) and the recovery tests; this schedule was test_s3_kills.py's too (issue 50: one
schedule, one stack, instead of two).

A whole broker outage is in test_cluster_failover.py; the sensors pipeline's crash in test_recovery.py.

The shape of Kafka's transactions system test: seed known records (with aborted
transactions and malformed records) while the stream runs, kill the driver hard
— once in each fault-injection window of the job and of its transactional Kafka
sink, then at random moments — restart from the same checkpoint each time, then
assert: the Delta tables hold every committed record exactly once, nothing from
an aborted transaction, every malformed record in quarantine with its reason, and
aggregates equal to a recomputation from bronze; and a read_committed consumer of
the Kafka sink's output sees every committed valid event exactly once.

One kill schedule proves both sinks (issue 19: it merged two e2e tests that each
built a stack and killed the ingest job in every window). Where each assertion of
the two former tests lives now (H: test_hard_kills_in_every_window_and_at_random,
K: test_kafka_sink_exactly_once.py::test_transactional_sink_is_exactly_once_through_the_kill_schedule):

  H1 every ONCEFLOW_FAULT run exits with the injected code ........ the job windows loop
  H2 the producer's summary holds aborted and malformed records .... after the random kills
  H3 the final available-now run finishes (K9: the last run finishes) final run (in-process)
  H4 assert_exactly_once: bronze, quarantine (with reasons), aggregates
     (K17: the Delta sinks of the same job, through the same kills) ... end
  H5 the committed count equals the producer's ......................... end
  H6 every Delta ledger is contiguous ...................................... end
  H7 the schedule ran as planned (runs == windows + random kills) ....... end
  S1 tables and checkpoint are on S3; a killed driver never released its lease
     (the next one took it over) ................................... the job windows loop
  K1 the crash_after_tasks run dies by SIGKILL ............................. the Kafka windows loop
  K2 the Kafka ledger then holds that batch partially: tasks 0-1, not 2-3 .. idem
  K3 that batch is planned, not committed by Spark ......................... idem
  K4 the killed tasks' records sit in the output log, never committed .. end (log ends kept at the kill)
  K5 the crash_after_write run dies by SIGKILL ............................. idem
  K6 the Kafka ledger holds that batch complete, and no partial batch ..... idem
  K7 that batch is not committed by Spark .................................. idem
  K8 an external kill -9 after a committed batch ........................... the random kills
  K10 no event twice at read_committed ..................................... end
  K11 no committed valid input event missing from the output .............. end
  K12 no event of an aborted input transaction in the output .............. end
  K13 output event set == committed valid input event set ................. end
  K14 read_uncommitted shows the killed attempts (at least those of K4) ... end
  K15 the Kafka ledger has no problem and no partial batch ................ end
  K16 the Kafka ledger's rows add up to the committed valid events ........ end
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter

import pytest

from devkit.driver import IngestProcess
from devkit.kafka import BackgroundProducer, consume_all, log_ends, value_json
from devkit.pipelines import PAYMENTS_SCHEMA, pipeline_file, table_sinks
from onceflow import faults
from onceflow.checkpoint import read_checkpoint
from onceflow.faults.kafka_sink import ENV_FAULT as KAFKA_FAULT
from onceflow.faults.kafka_sink import ENV_KILL_PGID
from onceflow.generate.producer import VALID
from onceflow.kafka.ledger import read_kafka_ledger
from onceflow.sinks import lease_folder, table_paths
from onceflow.spark.ingest import run_ingest
from onceflow.storage.lease import read_lease
from onceflow.storage.location import Location
from tests.exactly_once import assert_exactly_once, assert_ledgers_contiguous, kill_in_every_job_window, next_batch

pytestmark = pytest.mark.e2e

# Every run must find a batch to plan at its fault: 10 killed runs plan at most 2 new batches each
# (PER_BATCH offsets), so 24,000 events leave the catch-up run 4,000 or more (the producer is done
# long before the last kill). A fresh driver's first batch took as long for 600 records as for 2,300
# (about 10 s on 2 cores, 2026-11-27), so smaller batches keep every window and cut what the catch-up
# and the oracles read (52,000 and 2,500 before; 30,000 until the catch-up was seen to take 47 s)
EVENTS, PARTITIONS, PER_BATCH = 24_000, 4, 1000
TASKS = 4  # the Kafka sink's task partitions
SEED = 20261122
# the Kafka sink's own windows (src/onceflow/faults/kafka_sink.py), each aimed at the next batch
KAFKA_WINDOWS = ("crash_after_tasks:2", "crash_after_write")
RANDOM_KILLS = 3


def _committed_batches(checkpoint: str) -> set[int]:
    return set(read_checkpoint(checkpoint).commits)


def _ids(bootstrap: str, topic: str, isolation: str) -> Counter:
    """Event ids of the Kafka sink's output, read by an independent consumer (not Spark)."""
    return Counter(value_json(v)["event_id"] for _, _, _, v in consume_all(bootstrap, topic, isolation, timeout=120))


def test_hard_kills_in_every_window_and_at_random(broker, spark, s3, topic, tmp_path):
    rng = random.Random(SEED)
    folder = tmp_path / "pipeline"
    data = s3.url("kills", topic)
    out_topic, ledger_topic = f"{topic}-out", f"{topic}-ledger"
    sinks = {
        **table_sinks(data),
        "kafka": {"topic": out_topic, "ledger_topic": ledger_topic, "key": "account_id", "partitions": TASKS},
    }
    file, pipeline = pipeline_file(
        folder,
        broker.bootstrap,
        topic,
        sinks=sinks,
        checkpoint=f"{data}/checkpoint",
        # the final catch-up (available-now) takes the backlog in large batches
        max_offsets=PER_BATCH,
        available_now_max_offsets=60000,
        trigger={"processing_time": "500 ms"},
    )
    checkpoint = pipeline.checkpoint_path
    assert Location(checkpoint).is_s3 and all(Location(p).is_s3 for p in table_paths(pipeline).values())  # S1
    producer = BackgroundProducer(
        broker.bootstrap,
        topic,
        EVENTS,
        schema=PAYMENTS_SCHEMA,
        partitions=PARTITIONS,
        rate=700,
        seed=SEED,
        abort_ratio=0.06,
        malformed_ratio=0.015,
    )
    producer.start()
    job = IngestProcess(pipeline, file, tmp_path)

    # H1: one crash inside each exactly-once window of the job, all in one batch (issue 50: one batch
    # per killed run, not a replay and then a fresh batch to die in; tests/exactly_once.py)
    def killed_never_released() -> None:  # S1: the killed driver's lease is still held
        lease = lease_folder(pipeline)
        assert lease is not None and not (read_lease(lease) or {}).get("released")

    kill_in_every_job_window(job, pipeline, after_each=killed_never_released)

    # K1-K7: then each window of the Kafka sink; the fault kills the driver's whole process group
    crash_ends: dict[int, int] = {}
    for window in KAFKA_WINDOWS:
        target = next_batch(checkpoint)
        job.start(env={KAFKA_FAULT: f"{window}@batch:{target}", ENV_KILL_PGID: "self"})
        code = job.wait_exit(timeout=600)
        assert code == -signal.SIGKILL, (
            f"{window}@batch:{target} should die by the injected SIGKILL, exit {code}:\n{job.tail()}"
        )
        ledger = read_kafka_ledger(broker.bootstrap, ledger_topic, pipeline.name)
        assert target in read_checkpoint(checkpoint).offsets_files, target
        assert target not in _committed_batches(checkpoint), f"Spark must not have committed batch {target}"
        if window.startswith("crash_after_tasks"):  # tasks 0-1 committed batch `target`, 2-3 died before
            assert [(p.batch_id, p.committed, p.missing) for p in ledger.partial] == [(target, [0, 1], [2, 3])], (
                ledger.as_dict()
            )
            # the log's end now: what the killed tasks left in it is judged once their transactions are
            # resolved (at the end), since a read_committed reader stops at the first open transaction
            crash_ends = log_ends(broker.bootstrap, out_topic)
        else:  # every task committed batch `target` (the replayed partial batch too), Spark did not
            assert target in [e.batch_id for e in ledger.entries] and ledger.partial == [], ledger.as_dict()

    # H/K8: then kill -9 at random moments, each after the run has committed something
    for _ in range(RANDOM_KILLS):
        seen = job.progress_count()
        job.start()
        job.wait_progress(more_than=seen)
        time.sleep(rng.uniform(0.0, 2.5))  # the kill's moment: a deliberate random delay, not a wait
        job.kill9()

    summary = producer.result()  # H2
    assert summary.count("aborted") >= 0.04 * EVENTS and summary.count("committed_malformed") >= 0.01 * EVENTS * 0.9
    # the catch-up is killed by nothing, so it runs in the session's warm driver (a fresh one cost
    # 60-75 s on 2 busy cores): the same job from the same checkpoint, as `onceflow ingest` runs it
    final = run_ingest(pipeline, spark=spark)
    assert final.status == "finished", final  # H3

    counts = assert_exactly_once(pipeline, broker.bootstrap, produced=[summary])  # H4
    assert counts["committed"] == summary.count("committed")  # H5
    assert_ledgers_contiguous(pipeline)  # H6
    assert job.runs == len(faults.JOB_POINTS) + len(KAFKA_WINDOWS) + RANDOM_KILLS  # H7

    # K10-K16: the Kafka sink's output, through the same kills
    valid = Counter(r.event_id for r in summary.records if r.kind == VALID and not r.aborted)
    aborted = {r.event_id for r in summary.records if r.aborted and r.event_id}
    assert aborted, "the input must hold aborted transactions for the proof to mean anything"
    committed = _ids(broker.bootstrap, out_topic, "read_committed")
    duplicated = {i: n for i, n in committed.items() if n > 1}
    assert not duplicated, f"{len(duplicated)} events more than once at read_committed, e.g. {list(duplicated)[:5]}"
    lost = set(valid) - set(committed)
    assert not lost, f"{len(lost)} committed input events missing from the output, e.g. {sorted(lost)[:5]}"
    assert not set(committed) & aborted, "events of aborted input transactions reached the output"
    assert set(committed) == set(valid)
    uncommitted = _ids(broker.bootstrap, out_topic, "read_uncommitted")
    aborted_attempts = sum(uncommitted.values()) - sum(committed.values())
    # K4: records in the log at the crash_after_tasks kill that never became committed: the killed tasks'
    before_crash = lambda isolation: sum(  # noqa: E731
        1 for p, o, _, _ in consume_all(broker.bootstrap, out_topic, isolation, timeout=120) if o < crash_ends.get(p, 0)
    )
    in_doubt = before_crash("read_uncommitted") - before_crash("read_committed")
    assert in_doubt > 0, "the killed tasks' records must sit in the log, uncommitted"
    assert aborted_attempts >= in_doubt, "read_uncommitted shows the aborted attempts of the killed tasks"  # K14
    ledger = read_kafka_ledger(broker.bootstrap, ledger_topic, pipeline.name)
    assert ledger.problems() == [] and ledger.partial == []
    assert sum(e.rows for e in ledger.entries) == len(valid)
    print(
        f"\n{job.runs + 1} runs, {job.runs} killed: {counts['committed']} committed records exactly once in "
        f"Delta; {len(committed)} events, 0 duplicates at read_committed of the Kafka sink; {aborted_attempts} "
        f"records of killed attempts visible only at read_uncommitted; {len(ledger.entries)} Kafka batches"
    )
