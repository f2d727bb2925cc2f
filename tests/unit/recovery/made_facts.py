"""Hand-made recovery facts for the unit tests of onceflow.recovery: ledgers of contiguous
batches, a readable checkpoint, and the Facts that hold them (no broker, Spark or files)."""

from __future__ import annotations

from onceflow.checkpoint import BatchOffsets, Checkpoint
from onceflow.ledger import Ledger, LedgerEntry
from onceflow.recovery.cases import ActionKind, Case, Decision
from onceflow.recovery.facts import Facts, KafkaOffsets
from onceflow.recovery.plan import Action, Finding, Plan
from onceflow.state.generation import CheckpointIdentity

T = "payments"
CP = "/state/checkpoint"
SINKS = ("bronze", "quarantine", "aggregates")
FED = ("bronze", "quarantine")  # written from Kafka; the aggregates follow bronze (sink_kinds.FOLLOWS)


def entries(
    sink: str,
    ends: list[dict[int, int]],
    generation: int = 0,
    first_batch: int = 0,
    start: dict[int, int] | None = None,
) -> list[LedgerEntry]:
    """Contiguous batch entries ending at each of `ends`, the first starting at `start` (default 0s)."""
    prev = dict(start) if start is not None else {p: 0 for p in ends[0]}
    out = []
    for i, end in enumerate(ends):
        out.append(LedgerEntry(T, sink, generation, first_batch + i, T, dict(prev), dict(end), rows=1))
        prev = dict(end)
    return out


def ledgers(**per_sink: list[LedgerEntry]) -> dict[str, Ledger]:
    return {s: Ledger(f"/state/{s}", per_sink.get(s, []), []) for s in SINKS}


def checkpoint(planned: list[dict[int, int]], committed: int | None, **kw) -> Checkpoint:
    """A readable checkpoint whose offsets/N are `planned[N]`, committed up to batch `committed`."""
    batches = {b: BatchOffsets(b, {}, ({T: o},)) for b, o in enumerate(planned)}
    commits = tuple(range(committed + 1)) if committed is not None else ()
    return Checkpoint(
        path=CP,
        exists=True,
        query_id="q",
        initial_offsets={T: {p: 0 for p in planned[0]}},
        batches=batches,
        commits=commits,
        offsets_files=tuple(batches),
        commit_files=commits,
        **kw,
    )


def facts(
    ck: Checkpoint,
    led: dict[str, Ledger],
    *,
    generation: int | None = 0,
    earliest=None,
    latest=None,
    identity_error=None,
    running=False,
    last_run=None,
    identity=None,
) -> Facts:
    if identity is None and generation is not None:
        identity = CheckpointIdentity(T, generation, "2026-01-01T00:00:00Z")
    return Facts(
        pipeline=T,
        pipeline_file="pipelines/payments.yaml",
        topic=T,
        default_starting_offsets="earliest",
        checkpoint=ck,
        identity=identity,
        identity_error=identity_error,
        ledgers=led,
        kafka=KafkaOffsets(earliest or {0: 0, 1: 0}, latest or {0: 1000, 1: 1000}),
        running=running,
        holder={"pid": 4242, "host": "h", "started": "x"} if running else None,
        last_run=last_run if last_run is not None else {"run_id": "r1", "final": None},
    )


B = [{0: 100, 1: 50}, {0: 200, 1: 120}, {0: 300, 1: 160}]  # three batches' end offsets
MISSING_CK = Checkpoint(path=CP, exists=False, unusable_reasons=("the checkpoint directory does not exist",))


def all_sinks(ends=B, **kw) -> dict[str, Ledger]:
    return ledgers(**{s: entries(s, ends, **kw) for s in SINKS})


def made_plan(**fields) -> Plan:
    """A plan as `decide` would return one (a restart of a killed query moving a leftover file aside),
    with `fields` replacing any of its fields."""
    made: dict = dict(
        pipeline="p",
        pipeline_file="pipelines/p.yaml",
        topic="t",
        checkpoint_path="/cp",
        case=Case.DEAD_QUERY,
        decision=Decision.RESTART,
        summary="restart",
        findings=[Finding(Case.DEAD_QUERY, "killed")],
        actions=[Action(ActionKind.MOVE_LEFTOVERS, "move 1 file", {"files": ["/cp/.x.tmp"]})],
        next_step="start it",
    )
    return Plan(**{**made, **fields})
