"""`onceflow recover` prints the plan as a person reads it: what was found, what is done, what next."""

from __future__ import annotations

import io

from rich.console import Console

from onceflow.cli.recover import print_plan
from onceflow.recovery.cases import ActionKind, Case, Decision
from onceflow.recovery.plan import Action, Finding, LostRange, Plan
from onceflow.recovery.record import Outcome
from tests.unit.recovery.made_facts import made_plan


def _printed(plan: Plan, outcome: str) -> str:
    buffer = io.StringIO()
    print_plan(plan, outcome, "/r.json", Console(file=buffer, width=200, highlight=False))
    return buffer.getvalue()


def _plan(**kw) -> Plan:
    """A new generation that records a loss (what the page prints most of)."""
    return made_plan(
        **{
            "case": Case.RETENTION,
            "decision": Decision.NEW_GENERATION,
            "summary": "new generation 1",
            "findings": [Finding(Case.RETENTION, "Kafka deleted [5, 9)")],
            "actions": [Action(ActionKind.WRITE_LOSS, "record the loss")],
            "next_step": "start the query",
            "lost": [LostRange(0, 5, 9, ["bronze"])],
            **kw,
        }
    )


def test_a_plan_carried_out_says_what_was_done_and_what_comes_next():
    text = _printed(_plan(), Outcome.DONE)
    assert "p: new generation 1" in text and "outcome: done" in text and "case: retention_loss" in text
    assert "[retention_loss] Kafka deleted [5, 9)" in text and "offsets Kafka no longer holds" in text
    assert "done\n  1. record the loss" in text and "next: start the query" in text


def test_a_refusal_says_why_and_no_next_step():
    plan = _plan()
    plan.refuse(Case.AHEAD, "the sink is behind. Fix: --force", override="--force")
    text = _printed(plan, Outcome.REFUSED)
    assert "outcome: refused" in text and "why not: the sink is behind. Fix: --force" in text
    assert "next:" not in text
    assert "would do" in _printed(_plan(), Outcome.DRY_RUN)
