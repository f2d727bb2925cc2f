"""`onceflow audit`'s scope flags name one vocabulary (full, since-last); its notes print under the verdict."""

from __future__ import annotations

from onceflow.cli.app import build_parser
from onceflow.cli.audit import note_lines
from onceflow.reconcile import AuditScope


def test_the_scope_flags():
    parse = build_parser().parse_args
    assert parse(["audit"]).mode == AuditScope.FULL
    assert parse(["audit", "--full"]).mode == AuditScope.FULL
    assert parse(["audit", "--since-last"]).mode == AuditScope.SINCE_LAST


def test_the_notes_print_under_the_verdict():
    assert note_lines({"notes": ["a", "b"]}) == ["  note: a", "  note: b"]
    assert note_lines({}) == []
