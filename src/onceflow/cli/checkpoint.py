"""`onceflow checkpoint status | show`: a pipeline's health, and what its checkpoint holds.

Thin: reads with onceflow.health / onceflow.checkpoint and prints (rich tables, or
JSON with --json). Exit codes are documented in docs/checkpoint-status.md.
"""

from __future__ import annotations

import json
import time
from datetime import UTC
from typing import TYPE_CHECKING

from rich.markup import escape

from onceflow import offsets
from onceflow.cli.console import number, out, print_json, print_json_line
from onceflow.config import DEFAULT_PIPELINE, load_pipeline
from onceflow.verdicts import STYLES

if TYPE_CHECKING:  # the report's types; onceflow.health loads when a command runs, not at `--help`
    from onceflow.health import HealthReport, LeaseFacts, PartitionLag

SHOW_BATCHES = 10  # newest batches listed by `checkpoint show`


def add_parser(sub) -> None:
    p = sub.add_parser("checkpoint", help="a pipeline's checkpoint and health (no JVM needed)")
    actions = p.add_subparsers(dest="action", required=True)

    s = actions.add_parser("status", help="health verdict: offsets vs Kafka, lag, run state, sink ledgers")
    s.add_argument("--pipeline", default=DEFAULT_PIPELINE, help="a pipeline name or YAML path")
    s.add_argument(
        "--json", action="store_true", help="print the report as JSON (docs/schemas/checkpoint-status.schema.json)"
    )
    s.add_argument(
        "--watch",
        type=number("--watch", float, minimum=0.1, what="the seconds between two looks"),
        metavar="SECONDS",
        help="look again every SECONDS in this one process (with --json: a report a line), instead of "
        "starting the command for each look: a look then costs milliseconds of CPU, not an interpreter's start",
    )
    s.add_argument(
        "--count",
        type=number("--count", int, minimum=1),
        metavar="N",
        help="with --watch: stop after N looks (default: until Ctrl-C); the exit code is the last look's",
    )
    s.set_defaults(func=cmd_status)

    s = actions.add_parser("show", help="what the checkpoint holds: batches, commits, offsets, problems")
    where = s.add_mutually_exclusive_group()
    where.add_argument("--pipeline", help=f"a pipeline name or YAML path (default {DEFAULT_PIPELINE})")
    where.add_argument("--path", help="a checkpoint directory, instead of a pipeline's")
    s.add_argument("--json", action="store_true", help="print what was found as JSON")
    s.set_defaults(func=cmd_show)


def _num(value) -> str:
    return "—" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


# -- status --------------------------------------------------------------------------
def cmd_status(args) -> int:
    from onceflow.health import pipeline_health

    pipeline = load_pipeline(args.pipeline)
    if not args.watch:
        report = pipeline_health(pipeline)
        print_json(report.as_json()) if args.json else print_status(report)
        return report.exit_code
    looks, code = 0, 0
    try:  # one process, the pipeline loaded once: each look pays only for what it reads
        while True:
            started = time.monotonic()
            report = pipeline_health(pipeline)
            code, looks = report.exit_code, looks + 1
            print_json_line(report.as_json()) if args.json else print_status(report)
            if args.count and looks >= args.count:
                return code
            time.sleep(max(0.0, args.watch - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return code


def _total_row(rows: list[PartitionLag], lag: int | None) -> list[str] | None:
    """The "all" row: committed, latest and lag summed over the partitions, each only where
    every partition has a value; no row for one partition, or when nothing sums."""
    if len(rows) < 2:
        return None
    columns = ([r.committed for r in rows], [r.latest for r in rows])
    sums = [sum(x for x in col if x is not None) if all(x is not None for x in col) else None for col in columns]
    if all(v is None for v in (*sums, lag)):
        return None
    return [_num(v) for v in (*sums, lag)]


def lease_line(lease: LeaseFacts) -> str:
    """The pipeline's driver lease in its object store, in one line (docs/storage.md)."""
    if lease.error:
        return f"unreadable ({lease.error})"
    if not lease.host:
        return f"never taken ({lease.uri})"
    state = "released" if lease.released else "live" if lease.live else "lapsed"
    where = "this machine" if lease.here else lease.host
    return f"{state}, pid {lease.pid} on {where}, renewed {lease.renewed_at} ({lease.uri})"


def print_status(report: HealthReport) -> None:
    from rich.table import Table

    ck, run, kafka = report.checkpoint, report.run, report.kafka
    table = Table(title=f"{report.pipeline}: topic {kafka.topic} at {kafka.bootstrap}", title_justify="left")
    for col in ("partition", "committed", "latest", "lag"):
        table.add_column(col, justify="right")
    for row in report.partitions:
        flag = " (behind retention)" if row.behind_retention else " (ahead of Kafka)" if row.ahead_of_kafka else ""
        table.add_row(str(row.partition), _num(row.committed), _num(row.latest), _num(row.lag) + flag)
    total = _total_row(report.partitions, report.lag.total)
    if total:
        table.add_row("all", *total, style="bold")
    if report.partitions:
        out.print(table)
    if kafka.error:
        out.print(f"[yellow]kafka:[/yellow] {escape(kafka.error)}", markup=True)

    if ck.error:
        out.print(f"checkpoint: {ck.error}", markup=False)
    elif not ck.exists or ck.empty:
        out.print(f"checkpoint: none yet at {ck.path}", markup=False)
    else:
        pending = f", batch {ck.uncommitted} planned not committed" if ck.uncommitted is not None else ""
        out.print(
            f"checkpoint: last committed batch {_num(ck.last_committed)} at {ck.last_commit_at or '—'}"
            f"{pending}; {len(ck.problems)} problem(s)",
            markup=False,
        )
    sinks = ", ".join(
        f"{name} {_num(s.last_batch) if not s.error else 'unreadable'}"
        + (f" (g{s.generation})" if s.generation is not None else "")
        + (f", {s.trails_batches} batch(es) to merge" if s.trails_batches else "")
        for name, s in report.sinks.items()
    )
    if sinks:
        out.print(f"sink ledgers, last batch: {sinks}", markup=False)
    state = "running" if run.running else "not running"
    if run.holder:
        state += f" (pid {run.holder.get('pid')} on {run.holder.get('host')})"
    bits = [state]
    if run.heartbeat_age_seconds is not None:
        bits.append(f"last heartbeat {run.heartbeat_age_seconds:.0f}s ago")
    if run.commits_per_minute is not None:
        bits.append(f"{run.commits_per_minute:g} commits/min")
    if run.avg_batch_duration_ms is not None:
        bits.append(f"avg batch {run.avg_batch_duration_ms:.0f} ms")
    if run.final:
        bits.append(f"last run {run.final.status} at {run.final.time}")
    out.print("job: " + "; ".join(bits), markup=False)
    if report.lease:
        out.print(f"driver lease: {lease_line(report.lease)}", markup=False)
    for note in report.notes:
        out.print(f"[dim]note:[/dim] {escape(note)}", markup=True)
    style = STYLES.get(report.verdict, "bold")
    out.print(f"[{style}]{report.verdict.upper()}[/{style}] — " + escape("; ".join(report.reasons)), markup=True)


# -- show ----------------------------------------------------------------------------
def cmd_show(args) -> int:
    from onceflow.checkpoint import read_checkpoint

    path = args.path or load_pipeline(args.pipeline).checkpoint_path
    ck = read_checkpoint(path)
    if args.json:
        data = ck.as_dict()
        data["batches"] = [_batch_row(ck, b) for b in ck.offsets_files]
        print_json(data)
    else:
        print_show(ck)
    if not ck.exists or not ck.usable:
        return 2 if ck.exists or args.path else 0
    return 1 if ck.problems else 0


def _batch_row(ck, batch_id: int) -> dict:
    batch = ck.batches.get(batch_id)
    return {
        "batch_id": batch_id,
        "committed": batch_id in ck.commits,
        "readable": batch is not None,
        "timestamp_ms": batch.timestamp_ms if batch else None,
        "offsets": ({t: offsets.as_json(batch.offsets(t) or {}) for t in batch.topics} if batch else None),
    }


def print_show(ck) -> None:
    from datetime import datetime

    from rich.table import Table

    if not ck.exists:
        out.print(f"no checkpoint at {ck.path}: " + "; ".join(ck.unusable_reasons), markup=False)
        return
    if ck.empty:
        out.print(f"checkpoint {ck.path}: empty (no batch planned yet)", markup=False)
    else:
        retained = f"{ck.retained[0]}–{ck.retained[1]}" if ck.retained else "none"
        out.print(
            f"checkpoint {ck.path}\n  query id {ck.query_id or '—'}; batches on disk {retained}; "
            f"last committed {_num(ck.last_committed)}"
            + (
                f"; batch {ck.uncommitted} planned, not committed (re-run on restart)"
                if ck.uncommitted is not None
                else ""
            ),
            markup=False,
        )
        if ck.initial_offsets:
            out.print("  initial offsets: " + json.dumps(ck.initial_offsets), markup=False)
        table = Table(title=f"newest {min(SHOW_BATCHES, len(ck.offsets_files))} batches", title_justify="left")
        for col in ("batch", "committed", "planned at (UTC)", "end offsets"):
            table.add_column(col)
        for b in ck.offsets_files[-SHOW_BATCHES:]:
            row = _batch_row(ck, b)
            when = (
                datetime.fromtimestamp(row["timestamp_ms"] / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
                if row["timestamp_ms"]
                else "—"
            )
            ends = json.dumps(row["offsets"], separators=(",", ":")) if row["readable"] else "unreadable"
            table.add_row(str(b), "yes" if row["committed"] else "no", when, ends)
        out.print(table)
    for p in ck.problems:
        out.print(f"[yellow]problem:[/yellow] {escape(p.path)}: {escape(p.reason)}", markup=True)
    if ck.usable:
        out.print("[green]usable[/green]: Spark can restart from it", markup=True)
    else:
        out.print("[bold red]UNUSABLE[/bold red]: " + escape("; ".join(ck.unusable_reasons)), markup=True)
