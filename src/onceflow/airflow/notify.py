"""Incidents to people, through Airflow's own notifiers.

A pipeline's `airflow.notify` (config.Notify) names an SMTP connection and recipients, a Slack
incoming-webhook connection, or both. The smtp and slack providers' notifiers send them with the
connections Airflow holds, so no address book, password or webhook token sits in a pipeline file.

An incident is told once, by the task that decides it, never by a poll:
- `<p>_stream`'s trigger_recover: its window's watch ended on an alert verdict (dead, stalled,
  failed, poisoned, broken: a recovery is triggered; down: the next stream run starts the app);
- `<p>_recover`'s begin, for a recovery no watch triggered (by hand): it started;
- `<p>_recover`'s end: the recovered app committed its first batch (resolved), or the recovery did
  not finish, and why;
- an audit task: the audit found a data problem, or at its last try could not run.

Each message names the pipeline, what happened, the evidence (verdict reasons, batch, lag, ranges,
failed checks), the runbook and the Airflow and onceflow links. The values of the pipeline's own
secret settings are masked in it, whatever a reason quotes. A notifier that fails is logged and
does not fail its task: the incident stays in the task's log and on the onceflow page.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import quote

from onceflow.airflow.links import UI_PREFIX, base_url
from onceflow.config import EmailNotify, Notify, Pipeline, is_secret_setting
from onceflow.verdicts import PROBLEMS, RUNBOOKS

MASK = "***"


class IncidentKind(StrEnum):
    ALERT = "alert"  # a stream window's watch ended on an alert verdict
    RECOVERY_STARTED = "recovery_started"  # a recovery began that no watch triggered
    RECOVERED = "recovered"  # the recovered app committed its first batch: the incident is resolved
    RECOVERY_FAILED = "recovery_failed"  # the recovery was refused or did not finish
    AUDIT_FAILED = "audit_failed"  # an audit found a data problem, or could not run at its last try


@dataclass(frozen=True)
class Incident:
    """One message: what happened to which pipeline, the evidence, and where to look."""

    pipeline: str
    kind: IncidentKind
    headline: str
    evidence: list[str] = field(default_factory=list)
    runbook: str | None = None  # a docs/ path
    links: dict[str, str] = field(default_factory=dict)  # label -> URL

    @property
    def resolves(self) -> bool:
        return self.kind == IncidentKind.RECOVERED

    def subject(self) -> str:
        return f"[onceflow] {self.pipeline}: {self.headline}"

    def _runbook_url(self, docs_url: str | None) -> str | None:
        if self.runbook is None:
            return None
        if not docs_url:
            return self.runbook
        return docs_url.rstrip("/") + "/" + self.runbook.removeprefix("docs/")

    def text(self, docs_url: str | None = None) -> str:
        """Plain text (Slack's message)."""
        lines = [f"*{self.subject()}*", *(f"• {e}" for e in self.evidence)]
        runbook = self._runbook_url(docs_url)
        if runbook:
            lines.append(f"Runbook: {runbook}")
        lines += [f"{label}: {url}" for label, url in self.links.items()]
        return "\n".join(lines)

    def html(self, docs_url: str | None = None) -> str:
        """The mail's body: every value escaped."""
        e = html.escape
        items = "".join(f"<li>{e(x)}</li>" for x in self.evidence)
        links = [(label, url) for label, url in self.links.items()]
        runbook = self._runbook_url(docs_url)
        if runbook:
            links.insert(0, ("Runbook", runbook))
        anchors = "".join(f'<li><a href="{e(url, quote=True)}">{e(label)}</a>: {e(url)}</li>' for label, url in links)
        return f"<h3>{e(self.subject())}</h3><ul>{items}</ul><ul>{anchors}</ul>"

    def masked(self, secrets: Iterable[str]) -> Incident:
        """The same incident with every secret value in it replaced by ***."""
        values = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

        def mask(text: str) -> str:
            for value in values:
                text = text.replace(value, MASK)
            return text

        return Incident(
            self.pipeline,
            self.kind,
            mask(self.headline),
            [mask(x) for x in self.evidence],
            self.runbook,
            {label: mask(url) for label, url in self.links.items()},
        )


def secret_values(pipeline: Pipeline) -> list[str]:
    """The values of the pipeline's secret settings (a SASL password, a key's password, a
    registry password): masked wherever a message might quote them."""
    found = [v for k, v in pipeline.source.kafka.items() if is_secret_setting(k)]
    if pipeline.sinks.kafka is not None and pipeline.sinks.kafka.kafka:
        found += [v for k, v in pipeline.sinks.kafka.kafka.items() if is_secret_setting(k)]
    registry = pipeline.schema.registry
    if registry is not None and registry.password:
        found.append(registry.password)
    return found


# -- links -------------------------------------------------------------------------------------
def airflow_url(path: str) -> str:
    """A URL on this Airflow's UI ([api] base_url; a path alone when it is not set)."""
    return f"{base_url()}{path}"


def run_link(dag_id: str, run_id: str) -> str:
    return airflow_url(f"/dags/{quote(dag_id)}/runs/{quote(run_id, safe='')}")


def page_link() -> str:
    return airflow_url(f"{UI_PREFIX}/")


# -- what each incident says -------------------------------------------------------------------
def alert_incident(pipeline: str, event: dict, dag_id: str, run_id: str, recover_dag: str) -> Incident:
    """A stream window's watch ended on an alert verdict (`event`: its HealthEvent)."""
    verdict = str(event.get("verdict"))
    health = event.get("health") or {}
    run = event.get("run") or {}
    evidence = [f"verdict {verdict}: {r}" for r in event.get("reasons") or []] or [f"verdict {verdict}"]
    last = (health.get("checkpoint") or {}).get("last_committed")
    lag = (health.get("lag") or {}).get("total")
    if last is not None:
        evidence.append(f"last committed batch: {last}")
    if lag is not None:
        evidence.append(f"lag: {lag} offsets")
    poisoned = (health.get("run") or {}).get("poisoned")
    if poisoned:  # the batch every run failed on: its offsets, the error, how many runs
        spans = ", ".join(f"partition {p} [{r[0]}, {r[1]})" for p, r in sorted((poisoned.get("ranges") or {}).items()))
        batch, runs, error = poisoned.get("batch_id"), poisoned.get("runs"), poisoned.get("error")
        evidence.append(f"poisoned batch {batch} ({spans}), failed {runs} runs: {error}")
    if run.get("run_id"):
        evidence.append(
            f"the app's run {run['run_id']}: {run.get('batches', 0)} batches, final status "
            f"{run.get('final_status') or 'none'}" + (f", error: {run['error']}" if run.get("error") else "")
        )
    if verdict in PROBLEMS:
        headline = f"{verdict}, recovery started"
        links = {"Recovery runs": airflow_url(f"/dags/{quote(recover_dag)}/runs")}
    else:
        headline = f"{verdict}, the next stream run starts the app again"
        links = {}
    return Incident(
        pipeline,
        IncidentKind.ALERT,
        headline,
        evidence,
        RUNBOOKS.get(verdict),
        {"Stream run": run_link(dag_id, run_id), **links, "onceflow page": page_link()},
    )


def recovery_started(pipeline: str, verdict: str, reasons: str, dag_id: str, run_id: str) -> Incident:
    evidence = [f"triggered as: {verdict or 'manual'}"] + ([f"reasons: {reasons}"] if reasons else [])
    return Incident(
        pipeline,
        IncidentKind.RECOVERY_STARTED,
        "recovery started",
        evidence,
        "docs/recovery.md",
        {"Recovery run": run_link(dag_id, run_id), "onceflow page": page_link()},
    )


def recovery_ended(
    pipeline: str,
    executed: dict | None,
    first_batch: dict | None,
    refusal: str | None,
    dag_id: str,
    run_id: str,
    seconds: float | None,
) -> Incident:
    """The recovery's outcome, from its tasks' XComs: `executed` (onceflow recover's record),
    `first_batch` (wait_first_batch's HealthEvent), `refusal` (execute's reason when it refused)."""
    links = {"Recovery run": run_link(dag_id, run_id), "onceflow page": page_link()}
    plan = (executed or {}).get("plan") or {}
    evidence = []
    if plan.get("case"):
        evidence.append(f"case {plan['case']} → decision {plan.get('decision')}")
    if first_batch is not None and executed is not None:
        run = first_batch.get("run") or {}
        took = f" {seconds:.0f} s after the recovery began" if seconds is not None else ""
        evidence.insert(0, f"the recovered app committed batch {run.get('last_batch_id')}{took}")
        return Incident(pipeline, IncidentKind.RECOVERED, "recovered", evidence, "docs/recovery.md", links)
    if refusal:
        why = f"refused: {refusal}"
    elif executed is None:
        why = "`onceflow recover` failed (its task log says why)"
    else:
        why = "the recovered app did not commit a first batch (wait_first_batch's log says why)"
    return Incident(
        pipeline, IncidentKind.RECOVERY_FAILED, "recovery did not finish", [why, *evidence], "docs/recovery.md", links
    )


def audit_failed(pipeline: str, verdict: dict, summary: dict, report_url: str, dag_id: str, run_id: str) -> Incident:
    """An audit found a data problem (`verdict`: report.audit_verdict; `summary`: its summary.json)."""
    evidence = [f"failed: {', '.join(verdict.get('problems') or ['?'])}"]
    for check in summary.get("checks") or []:
        if not isinstance(check, dict) or check.get("status") != "failed":
            continue
        detail = check.get("detail") or ""
        evidence.append(f"{check.get('name')}: {detail}"[:500])
    counts = summary.get("counts") or {}
    if counts.get("offsets_audited") is not None:
        evidence.append(f"audited {counts['offsets_audited']} offsets in {counts.get('partitions_audited')} partitions")
    return Incident(
        pipeline,
        IncidentKind.AUDIT_FAILED,
        "audit failed" if verdict.get("status") != "error" else "the audit could not run",
        evidence,
        "docs/audit.md",
        {"Audit report": report_url, "Audit run": run_link(dag_id, run_id)},
    )


# -- sending -----------------------------------------------------------------------------------
def _notifier(target: Any, incident: Incident, docs_url: str | None):
    if isinstance(target, str):  # `package.module:function`, given the incident, returns a BaseNotifier
        import importlib

        module, function = target.split(":")
        return getattr(importlib.import_module(module), function)(incident)
    if isinstance(target, EmailNotify):
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        return SmtpNotifier(
            to=target.to,
            from_email=target.from_,
            subject=incident.subject(),
            html_content=incident.html(docs_url),
            smtp_conn_id=target.connection,
        )
    from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

    return SlackWebhookNotifier(slack_webhook_conn_id=target.connection, text=incident.text(docs_url))


def send(
    pipeline: Pipeline, incident: Incident, context: Any, log: Callable[[str], None] = lambda msg: None
) -> list[str]:
    """Tell `pipeline`'s notify targets; returns those that took the message (a connection id, or a
    notifier factory's path). A failing target is logged (masked) and skipped: a notification never
    fails the task that decided it."""
    notify: Notify = pipeline.airflow.notify
    secrets = secret_values(pipeline)
    incident = incident.masked(secrets)
    log(f"incident: {incident.subject()}")
    sent = []
    for target in notify.targets:
        name = target if isinstance(target, str) else target.connection
        try:
            # notify(), not the notifier's __call__: the text is not a template (a reason may hold "{{")
            _notifier(target, incident, notify.docs_url).notify(context)
            sent.append(name)
        except Exception as exc:  # a mail server or webhook down must not fail the recovery or the audit
            reason = Incident(pipeline.name, incident.kind, f"{type(exc).__name__}: {exc}").masked(secrets).headline
            log(f"the notification through {name!r} failed: {reason}")
    return sent


def tell(
    pipeline: Callable[[], Pipeline],
    incident: Callable[[], Incident],
    context: Any,
    log: Callable[[str], None] = lambda msg: None,
) -> list[str]:
    """send(), from a task whose own work (a recovery's trigger, its marker, an audit's verdict) must
    go on whatever happens here: a pipeline that cannot be read or an incident that cannot be worded
    is logged, never raised."""
    try:
        return send(pipeline(), incident(), context, log)
    except Exception as exc:
        log(f"the incident could not be told: {type(exc).__name__}: {exc}")
        return []
