"""How a recovery plan tells what it found: offsets, where each sink stands, the last run, the
next step; and the facts as the recovery record keeps them."""

from __future__ import annotations

from onceflow import offsets
from onceflow.errors import OnceflowError
from onceflow.ledger import EntryKind, Ledger, LedgerEntry
from onceflow.recovery.facts import Facts
from onceflow.state.status import ended


def offsets_text(at: dict[int, int] | None) -> str:
    """{0: 5, 1: 7} -> '{0: 5, 1: 7}' (partition order)."""
    if not at:
        return "{}"
    return "{" + ", ".join(f"{p}: {o}" for p, o in sorted(at.items())) + "}"


def last_batch(ledger: Ledger) -> LedgerEntry | None:
    """The newest batch entry a sink's ledger holds (not a LOSS or BACKFILL entry)."""
    return next((e for e in reversed(ledger.entries) if e.kind == EntryKind.BATCH), None)


def position_key(ledger: Ledger) -> tuple[int, int]:
    """(generation, batch id) of the newest batch a sink holds; (-1, -1) when none."""
    last = last_batch(ledger)
    return (last.generation, last.batch_id) if last else (-1, -1)


def where(ledger: Ledger) -> str:
    """'batch 7 of generation 0 (up to {0: 5})', or 'no batch'."""
    last = last_batch(ledger)
    if last is None:
        return "no batch"
    return f"batch {last.batch_id} of generation {last.generation} (up to {offsets_text(ledger.committed_offsets())})"


def run_text(f: Facts) -> str:
    """How the last run ended, as the finding says it."""
    run = f.last_run
    if not run:
        return "the query is not running (no run in the status log)"
    final = run.get("final")
    if final is None:
        return f"the query is not running: its last run ({run.get('run_id')}) has no final event (killed or crashed)"
    when = f" at {final['time']}" if final.get("time") else ""
    text = f"the query is not running: its last run ({run.get('run_id')}) {ended(final.get('status'))}{when}"
    return text + (f": {final['error'][:300]}" if final.get("error") else "")


def start_hint(f: Facts) -> str:
    """What to run next, with the pipeline's own name and DAG id."""
    return (
        f"start the query: `onceflow ingest --pipeline {f.pipeline}` (or `onceflow recover --pipeline "
        f"{f.pipeline} --resume`); in Airflow the {f.pipeline}_recover DAG starts it"
    )


def facts_summary(f: Facts) -> dict:
    """The facts as JSON, for the plan and the recovery record."""
    ck = f.checkpoint
    try:
        committed = offsets.as_json(ck.committed_offsets(f.topic)) if ck.usable else None
    except OnceflowError:
        committed = None
    return {
        "checkpoint": {
            "path": ck.path,
            "exists": ck.exists,
            "empty": ck.empty,
            "usable": ck.usable,
            "unusable_reasons": list(ck.unusable_reasons),
            "problems": [p.as_dict() for p in ck.problems][:50],
            "last_committed": ck.last_committed,
            "uncommitted": ck.uncommitted,
            "committed_offsets": committed,
            "generation": f.identity.generation if f.identity else None,
            "identity_error": f.identity_error,
        },
        "sinks": {
            name: {
                "path": led.table,
                "exists": led.exists,
                "entries": len(led.entries),
                "generation": led.generation,
                "last_batch": (last.batch_id if (last := last_batch(led)) else None),
                "committed_offsets": offsets.as_json(led.committed_offsets()),
                "problems": led.problems(),
            }
            for name, led in f.ledgers.items()
        },
        "kafka": {
            "topic": f.topic,
            "earliest": offsets.as_json(f.kafka.earliest),
            "latest": offsets.as_json(f.kafka.latest),
        },
        "run": {"running": f.running, "holder": f.holder, "last_run": f.last_run},
    }
