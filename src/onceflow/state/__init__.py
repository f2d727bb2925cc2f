"""A pipeline's own state: every file onceflow keeps for one pipeline, and the module that writes it.

Most of it lives in the pipeline's state directory, `<state>/pipelines/<name>/`
(`config.Pipeline.state_path`; `<state>` is $ONCEFLOW_HOME, else `.onceflow/`), as small files
that other processes read without talking to the job: health, recovery, the Airflow hooks and
the onceflow page all see the same facts.

In `<state>/pipelines/<name>/`:

- `status.jsonl` (status.py, `StatusLog`): the job's events, one JSON line each: `started`,
  `progress` per committed batch, `idle`, `final` with how the run ended and, after a failure,
  the batch it was writing. The last run and how it ended (`Run`), and the poisoned-batch check,
  read it.
- `run.lock` (status.py, `RunLock`): an flock the running job holds, so a second copy of the
  same query refuses to start; `run.json` beside it says which process holds it (pid, host,
  the driver JVM's pid, the app's log): health tells a live holder from a dead one by it.
- `recovering.json` (control.py, `RecoveryMarker`): a recovery is at work; only the app it
  starts may run meanwhile. Expires unless renewed.
- `wanted.json` (control.py, `Wanted`): a stream DAG run wants the app running until `until`;
  a leased app stops once nobody renews it, and a wanted pipeline with no app is `down`.
- `stream_run.json` (control.py, `StreamRun`): the one `<p>_stream` DAG run at work.
- `launching.json` (control.py, `Launching`): an app was launched and has not taken its run
  lock yet (written by onceflow.airflow.stream), so health says `starting`, not `down`.
- `standby.lock`, `standby.json` (standby.py, `Standby`): a warm standby driver waits to take
  over the moment the running query dies (`onceflow ingest --standby`, `airflow.standby`); health
  reads a death with one ready as `starting`. `standby-launch.json`: one was launched and is still
  building its session, so no second is launched meanwhile.
- `control.lock` (control.py, `control_lock`): the flock under which a recovery begins, a
  stream run launches or adopts, and a new app checks for a recovery, so none interleave.
- `unprocessable.json` (unprocessable.py, `Unprocessable`): offset ranges an operator moved
  to quarantine by hand (`onceflow quarantine`); it only grows. poison.py reads it beside
  `status.jsonl` to say whether a batch is `poisoned` (it writes nothing).
- `recoveries/<stamp>.json` (recovery/record.py, `RecoveryRecord`): one record per
  `onceflow recover`: the facts, the plan, each action and how it ended.
- `apps/<time>-<pid>.log` (airflow/stream.py): the output of an app a stream run launched
  detached; the newest few are kept.

Elsewhere, per pipeline:

- `<checkpoint>/_onceflow.json` (generation.py, `CheckpointIdentity`): the writer generation
  a checkpoint belongs to (its Delta app id), and a new generation's exact starting offsets;
  written by recovery, read by the job before it starts (spark/generation_guard.py).
- `<checkpoint>.broken-<stamp>` (recovery/new_generation.py, recovery/execute.py): a checkpoint
  recovery moved aside; nothing is deleted.
- `_onceflow/<name>/driver-lease.json` beside the pipeline's tables in an object store
  (storage/lease.py, `sinks.lease_folder`): one driver per pipeline on any machine.
- `<reports>/<name>/` (audit/report.py): one folder per audit run with its `summary.json`,
  `latest` pointing at the newest, and `watermark.json`, where the next `since-last` audit starts.
- The sink tables' own commit metadata (ledger.py, kafka/ledger.py), which the job writes with
  each batch: the sink ledgers, read by onceflow.facts with the rest of a pipeline's facts.
"""
