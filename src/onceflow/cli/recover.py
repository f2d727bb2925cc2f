"""`onceflow recover --pipeline P [--dry-run] [--force] [--accept-loss] [--resume]`.

Thin: plans and executes with onceflow.recovery, prints the plan (rich, or the
recovery record as JSON with --json). Exit codes: 0 done / nothing to do / dry run,
3 refused (the message says why and which flag, if any, lifts it), 2 error.
"""

from __future__ import annotations

from rich.markup import escape

from onceflow.cli.console import log, out, print_json, quiet
from onceflow.config import DEFAULT_PIPELINE, load_pipeline
from onceflow.state.status import IngestMode

EXIT_REFUSED = 3


def add_parser(sub) -> None:
    p = sub.add_parser(
        "recover",
        help="recover a pipeline from its last committed offsets (plan, then act)",
        description="Find out what broke (dead query, corrupt or lost checkpoint, sinks that "
        "disagree, checkpoint ahead of a sink, offsets deleted by Kafka retention), "
        "print the plan, and carry it out. Nothing is ever deleted.",
    )
    p.add_argument("--pipeline", default=DEFAULT_PIPELINE, help="a pipeline name or YAML path")
    p.add_argument("--dry-run", action="store_true", help="print the plan and stop (changes nothing)")
    p.add_argument(
        "--force",
        action="store_true",
        help="recover even when the checkpoint is ahead of a sink ledger (re-reads what the sink lost)",
    )
    p.add_argument(
        "--accept-loss",
        action="store_true",
        help="accept offsets Kafka no longer holds as lost: recorded by range in the sink ledgers",
    )
    p.add_argument("--resume", action="store_true", help="after recovering, run the job (onceflow ingest)")
    p.add_argument(
        "--mode",
        choices=[m.value for m in IngestMode],
        default=IngestMode.AVAILABLE_NOW.value,
        help="with --resume: how the job runs",
    )
    p.add_argument("--until-idle", type=float, metavar="SECONDS", help="with --resume: stop after this long idle")
    p.add_argument("--max-seconds", type=float, metavar="SECONDS", help="with --resume: stop after this long")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the recovery record as JSON (docs/schemas/recovery-record.schema.json)",
    )
    p.set_defaults(func=cmd_recover)


def cmd_recover(args) -> int:
    from onceflow.recovery import recover
    from onceflow.recovery.record import Outcome

    pipeline = load_pipeline(args.pipeline)
    result = recover(
        pipeline,
        dry_run=args.dry_run,
        force=args.force,
        accept_loss=args.accept_loss,
        log=log if not args.json else quiet,
    )
    if args.json:
        print_json(result.record)
    else:
        print_plan(result.plan, result.outcome, str(result.record_path), out)
    if result.outcome == Outcome.REFUSED:
        return EXIT_REFUSED
    if args.resume and result.outcome in (Outcome.DONE, Outcome.NOTHING_TO_DO):
        from onceflow.spark.ingest import run_ingest

        run = run_ingest(pipeline, mode=args.mode, until_idle=args.until_idle, max_seconds=args.max_seconds, log=log)
        out.print(
            f"{run.pipeline}: {run.status} after {run.seconds:.1f}s — {run.batches} batches, "
            f"{run.input_rows} records (generation {run.generation})"
        )
    return 0


def print_plan(plan, outcome: str, record_path: str, out) -> None:
    """The plan as a person reads it: what was found, what is (or would be) done, what comes next."""
    from rich.table import Table

    from onceflow.recovery.record import Outcome

    heads: dict[str, str] = {
        Outcome.DRY_RUN: "[bold cyan]dry run[/]: nothing was changed",
        Outcome.REFUSED: "[bold red]refused[/]",
        Outcome.DONE: "[bold green]done[/]",
        Outcome.NOTHING_TO_DO: "[bold green]nothing to do[/]",
        Outcome.FAILED: "[bold red]failed[/]",
    }
    head = heads.get(outcome, outcome)
    out.print(f"[bold]{escape(plan.pipeline)}[/]: {escape(plan.summary)}")
    out.print(f"outcome: {head}    decision: {plan.decision}    case: {plan.case}")
    out.print("[bold]found[/]")
    for finding in plan.findings:
        out.print(f"  • {escape(f'[{finding.case}]')} {escape(finding.detail)}")
    if plan.lost:
        table = Table(title="offsets Kafka no longer holds")
        for col in ("partition", "lost from", "lost to (excl.)", "offsets", "sinks"):
            table.add_column(col, justify="right" if col != "sinks" else "left")
        for r in plan.lost:
            table.add_row(str(r.partition), str(r.start), str(r.end), str(r.count), ", ".join(r.sinks))
        out.print(table)
    if plan.refusal:
        out.print(f"[bold red]why not[/]: {escape(plan.refusal)}")
    if plan.actions:
        verb = "done" if outcome == Outcome.DONE else "would do" if outcome == Outcome.DRY_RUN else "plan"
        out.print(f"[bold]{verb}[/]")
        for i, action in enumerate(plan.actions, start=1):
            out.print(f"  {i}. {escape(action.description)}")
    if plan.next_step and outcome != Outcome.REFUSED:
        out.print(f"[bold]next[/]: {escape(plan.next_step)}")
    out.print(f"[dim]record: {escape(record_path)}[/]")
