"""The per-batch lines of a running ingest: at a readable rate, with rows, seconds, lag, verdict."""

from __future__ import annotations

import json
from types import SimpleNamespace

from onceflow.spark.batch_log import BatchLog, lag_of
from onceflow.spark.listener import StatusListener
from onceflow.state.status import StatusLog
from tests.manual_clock import ManualClock


def test_lag_is_kafkas_latest_minus_the_batch_end_per_partition():
    assert lag_of({"0": 120, "1": 50}, {"0": 100, "1": 50}) == 20
    assert lag_of({}, {"0": 1}) is None and lag_of({"0": 5}, {}) is None


def test_a_fast_trigger_prints_one_line_every_few_seconds_summing_the_batches():
    lines: list[str] = []
    clock = ManualClock()
    log = BatchLog(lines.append, max_lag=1000, every=5, clock=clock)
    for batch in range(12):  # a 1-second trigger
        clock.now += 1
        log.batch(batch, rows=100, seconds=0.8, lag=300)
    assert lines == [
        "batches 0–4: 500 rows in 4.0 s (last 0.8 s); lag 300 (healthy)",
        "batches 5–9: 500 rows in 4.0 s (last 0.8 s); lag 300 (healthy)",
    ]
    log.flush()  # the end of the run
    assert lines[-1] == "batches 10–11: 200 rows in 1.6 s (last 0.8 s); lag 300 (healthy)"


def test_slow_batches_each_get_their_line_and_lag_above_max_lag_is_lagging():
    lines: list[str] = []
    clock = ManualClock()
    log = BatchLog(lines.append, max_lag=50_000, every=5, clock=clock)
    clock.now = 60
    log.batch(0, rows=2_000_000, seconds=58.4, lag=1_200_000)
    clock.now = 100
    log.batch(1, rows=5, seconds=0.2, lag=None)
    assert lines == [
        "batch 0: 2,000,000 rows in 58.4 s; lag 1,200,000 > max_lag 50,000 (lagging)",
        "batch 1: 5 rows in 0.2 s; lag unknown",
    ]


def test_an_idle_stream_says_so_once_a_minute():
    lines: list[str] = []
    clock = ManualClock()
    log = BatchLog(lines.append, every=5, idle_every=60, clock=clock)
    clock.now = 10
    log.batch(3, rows=1, seconds=0.5, lag=0)
    for _ in range(30):  # idle events every 5 s for 150 s
        clock.now += 5
        log.idle()
    assert lines == [
        "batch 3: 1 row in 0.5 s; lag 0 (healthy)",
        "idle: no new data after batch 3; lag 0 (healthy)",
        "idle: no new data after batch 3; lag 0 (healthy)",
    ]


def test_the_listener_writes_the_status_log_and_the_lines(tmp_path):
    lines: list[str] = []
    listener = StatusListener(StatusLog(tmp_path, "p"), "run-1", "t", log=lines.append, max_lag=10)
    assert listener.batch_log is not None
    listener.batch_log.every = 0  # every batch a line
    source = SimpleNamespace(
        endOffset=json.dumps({"t": {"0": 40, "1": 10}}), latestOffset=json.dumps({"t": {"0": 50, "1": 30}})
    )
    progress = SimpleNamespace(
        id="q",
        batchId=7,
        numInputRows=25,
        inputRowsPerSecond=5.0,
        processedRowsPerSecond=9.0,
        batchDuration=1500,
        durationMs={},
        sources=[source],
    )
    listener.onQueryProgress(SimpleNamespace(progress=progress))
    assert lines == ["batch 7: 25 rows in 1.5 s; lag 30 > max_lag 10 (lagging)"]
    events = list(StatusLog(tmp_path, "p").events())
    assert events[-1]["batch_id"] == 7 and events[-1]["end_offsets"] == {"0": 40, "1": 10}


def test_closing_the_listener_prints_the_batches_still_pending_once(tmp_path):
    lines: list[str] = []
    listener = StatusListener(StatusLog(tmp_path, "p"), "run-1", "t", log=lines.append)
    source = SimpleNamespace(endOffset=json.dumps({"t": {"0": 5}}), latestOffset=json.dumps({"t": {"0": 5}}))
    progress = SimpleNamespace(
        id="q",
        batchId=0,
        numInputRows=5,
        inputRowsPerSecond=5.0,
        processedRowsPerSecond=9.0,
        batchDuration=300,
        durationMs={},
        sources=[source],
    )
    listener.onQueryProgress(SimpleNamespace(progress=progress))
    assert lines == []  # less than 5 s since the listener started: held for the next line
    listener.close()
    listener.onQueryTerminated(SimpleNamespace(id="q"))
    assert lines == ["batch 0: 5 rows in 0.3 s; lag 0 (healthy)"]


def test_batches_longer_than_the_trigger_are_said_once_a_run():
    """Spark warned "Current batch is falling behind" for almost every batch on S3 (≈ 60 lines a run,
    issue 48): its logger is quieted (onceflow.spark.session) and the batch log says it once."""
    lines: list[str] = []
    clock = ManualClock()
    log = BatchLog(lines.append, every=5, clock=clock, trigger_seconds=1.0)
    log.batch(0, rows=10, seconds=0.5, lag=0)
    for i in range(1, 60):
        log.batch(i, rows=10, seconds=2.5, lag=0)
    behind = [line for line in lines if "longer than the trigger interval" in line]
    assert behind == [
        "batch 1 took 2.5 s, longer than the trigger interval (1 s): the next batch starts at once, and batches "
        "run back to back while they take this long (said once a run; the lag on each line tells whether they keep up)"
    ]
    quiet = BatchLog(lines.append, clock=clock)  # available-now: no interval to fall behind
    quiet.batch(0, rows=1, seconds=99, lag=0)
    assert len([line for line in lines if "trigger interval" in line]) == 1
