"""`onceflow audit`: reconcile and validate a pipeline, write the report.

Exit code 0: every check passed; 1: a data problem was found; 2: the audit
could not run (the reason is printed and written to the report).
"""

from __future__ import annotations

import json

from onceflow.cli.console import console, log, out
from onceflow.config import DEFAULT_PIPELINE
from onceflow.reconcile import AuditScope, AuditStatus, CheckStatus


def add_parser(sub) -> None:
    p = sub.add_parser(
        "audit",
        help="prove exactly-once: reconcile Kafka, checkpoint, ledgers and rows; "
        "validate with Great Expectations; write a report",
    )
    p.add_argument("--pipeline", default=DEFAULT_PIPELINE, help="a pipeline name or YAML path")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--full", dest="mode", action="store_const", const=AuditScope.FULL, help="audit everything committed (default)"
    )
    scope.add_argument(
        "--since-last",
        dest="mode",
        action="store_const",
        const=AuditScope.SINCE_LAST,
        help="audit only what was committed since the last passed audit",
    )
    p.add_argument(
        "--report-dir", metavar="DIR", help="report root (default: $ONCEFLOW_REPORTS, else <state dir>/reports)"
    )
    p.add_argument("--json", action="store_true", help="print summary.json instead of the short verdict")
    p.set_defaults(func=cmd_audit, check=default_report_dir, needs_kafka=True, mode=AuditScope.FULL)


def default_report_dir(args) -> None:
    """--report-dir, else <state>/reports unless ONCEFLOW_REPORTS says otherwise."""
    if not args.report_dir:
        from onceflow.paths import reports_dir

        args.report_dir = str(reports_dir())


def cmd_audit(args) -> int:
    from onceflow import config
    from onceflow.audit.run import run_audit

    pipeline = config.load_pipeline(args.pipeline)  # cli.prepare found it and checked its Kafka
    outcome = run_audit(pipeline, mode=args.mode, report_dir=args.report_dir, log=log)
    s = outcome.summary
    if args.json:
        out.print_json(json.dumps(s, default=str))
        return outcome.exit_code
    if outcome.status == AuditStatus.ERROR:
        console.print(
            f"[bold red]error:[/bold red] the audit could not run: {s['reason']}", markup=True, highlight=False
        )
    else:
        counts = s["counts"]
        colour = "green" if outcome.status == AuditStatus.PASSED else "red"
        out.print(
            f"[bold {colour}]{outcome.status.upper()}[/bold {colour}] {pipeline.name} ({s['mode']}): "
            f"{counts.get('source_records', 0)} committed records in {counts.get('partitions_audited', 0)} "
            f"partition range(s); {len(s['checks']) - len(s['failed_checks'])}/{len(s['checks'])} checks "
            f"passed in {s['timings'].get('total')} s"
        )
        for check in s["checks"]:
            if check["status"] == CheckStatus.FAILED:
                out.print(
                    f"  [red]✗[/red] {check['name']}: {check['detail'] or check['title']}", markup=True, highlight=False
                )
    for line in note_lines(s):
        out.print(line, markup=False, highlight=False)
    out.print(f"report: {outcome.report_dir / 'index.html'}")
    return outcome.exit_code


def note_lines(summary: dict) -> list[str]:
    """The summary's notes as printed under the verdict: the root-cause clues the report
    shows first (a commit without a ledger entry, retention, the watermark used)."""
    return [f"  note: {n}" for n in summary.get("notes") or []]
