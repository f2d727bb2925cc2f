"""The stop's pure parts: which batch passes the gate, the held batch's removal from a
checkpoint (synthetic, shaped like Spark 4's) and the message Spark must read as a stop.

The gate's hold and query.stop() need a real JVM: tests/integration/test_clean_stop.py.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake

from onceflow.ledger import LedgerEntry
from onceflow.spark.stop import BatchHeld, StopGate, discard_held_batch, planned_before
from tests.unit.test_checkpoint import TOPIC, write_checkpoint

# Spark 4.0's StreamExecution.PROXY_ERROR (read from spark-sql_2.13-4.0.0.jar): a Python
# foreachBatch exception whose text matches it, while the query is being stopped, is a stop
PROXY_ERROR = re.compile(
    r"py4j.protocol.Py4JJavaError: An error occurred while calling((.|\r\n|\r|\n)*)"
    r"(java.lang.InterruptedException|java.io.InterruptedIOException|"
    r"java.nio.channels.ClosedByInterruptException)"
)


def test_the_held_batchs_message_is_what_spark_reads_as_a_stop_and_short():
    text = str(BatchHeld(StopGate._released(7)))
    match = PROXY_ERROR.search(text)
    assert match and "batch 7" in text
    # Java's regex recurses once per character its (.|\n)* loop takes: what follows must stay short
    assert len(text) - text.index("py4j.protocol.Py4JJavaError") < 200


def test_new_batches_pass_until_a_stop_then_only_an_earlier_runs_batch_passes(tmp_path):
    gate = StopGate(str(tmp_path), planned_before=4, hold_limit=1)
    gate.enter(4, spark=None)  # a replay: planned by the run before, passes
    gate.enter(5, spark=None)
    assert gate.snapshot() == (5, None) and gate.writing() == 5
    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / "5").write_text("v1\n{}")
    assert gate.writing() is None
    gate.close("SIGTERM")
    gate.enter(3, spark=None)  # an earlier run's batch still passes a closed gate
    assert gate.snapshot() == (3, None)
    assert StopGate(f"file://{tmp_path}", 4, 1).committed(5)  # a file: URI names the same directory


def _ledger_table(path, batch_id: int, generation: int = 0) -> None:
    entry = LedgerEntry(
        pipeline="p",
        sink="bronze",
        generation=generation,
        batch_id=batch_id,
        topic=TOPIC,
        start={0: 0},
        end={0: 10},
        rows=1,
    )
    write_deltalake(
        str(path),
        pa.table({"_offset": pa.array([1], pa.int64())}),
        commit_properties=CommitProperties(custom_metadata={"userMetadata": entry.to_json()}),
    )


def test_the_held_batch_is_removed_only_when_nothing_holds_it(tmp_path):
    batches = {0: {0: 10}, 1: {0: 20}, 2: {0: 30}}
    cp = write_checkpoint(tmp_path / "ck", {0: 0}, batches, [0, 1])
    assert planned_before(str(cp)) == 2 and planned_before(str(tmp_path / "none")) == -1

    # a sink that holds batch 2 (of this generation) keeps it planned: the next run re-runs it as planned
    bronze = tmp_path / "bronze"
    _ledger_table(bronze, batch_id=2)
    said = discard_held_batch(str(cp), 2, 0, [str(tmp_path / "missing"), str(bronze)])
    assert "left in place" in said and (cp / "offsets" / "2").exists()
    # not the newest planned batch, or committed: left
    assert "left in place" in discard_held_batch(str(cp), 1, 0, [])
    # nothing holds it: offsets/2 and its checksum go, the checkpoint ends at the last commit
    said = discard_held_batch(str(cp), 2, 1, [str(bronze)])  # bronze holds batch 2 of generation 0, not 1
    assert "removed" in said
    assert not (cp / "offsets" / "2").exists() and not (cp / "offsets" / ".2.crc").exists()
    assert (cp / "offsets" / "1").exists() and planned_before(str(cp)) == 1


@pytest.mark.parametrize("held", [0, 5])
def test_a_batch_that_is_not_planned_is_left_alone(tmp_path, held):
    cp = write_checkpoint(tmp_path / "ck", {0: 0}, {0: {0: 10}, 1: {0: 20}}, [0])
    assert "left in place" in discard_held_batch(str(cp), held, 0, [])
    assert sorted(p.name for p in (cp / "offsets").iterdir() if p.name.isdigit()) == ["0", "1"]
