"""The audit's small datasets (reconciliation, findings) through Great Expectations on SQLite:
a clean table passes, and a finding or a lost record fails its
expectation with the offending rows as samples, as the Spark engine reported them. (Runs
without a JVM: `make test-fast` holds it.)"""

from __future__ import annotations

from onceflow.audit import suites
from onceflow.audit.validate import Rows, run_suites
from onceflow.reconcile import CheckStatus


def _recon_row(partition: int, lost: int = 0) -> dict:
    checksum = "12345678901234567890123"
    return {c: 0 for c in suites.ddl_types(suites.RECONCILIATION_DDL)} | {
        "partition": partition,
        "start": 0,
        "end": 10,
        "source_records": 10,
        "source_valid": 9,
        "source_malformed": 1,
        "bronze_rows": 9 - lost,
        "quarantine_rows": 1,
        "sink_rows": 10 - lost,
        "lost_records": lost,
        "source_checksum": checksum,
        "sink_checksum": checksum if not lost else "-42",
    }


def _datasets(recon_rows: list[dict], findings: list[dict]) -> dict:
    return {
        "reconciliation": (Rows.from_dicts(suites.RECONCILIATION_DDL, recon_rows), suites.reconciliation_suite()),
        "findings": (Rows.from_dicts(suites.FINDINGS_DDL, findings), suites.findings_suite()),
    }


def test_clean_small_tables_pass(tmp_path):
    out = run_suites(_datasets([_recon_row(0), _recon_row(1)], []), tmp_path, "run-clean")
    assert {c.status for c in out.checks} == {CheckStatus.PASSED}
    assert len(out.checks) == len(suites.reconciliation_suite().expectations) + len(suites.FINDING_CHECKS)
    expected = len(suites.reconciliation_suite().expectations)
    assert out.statistics["reconciliation"]["evaluated_expectations"] == expected
    assert (tmp_path / out.docs_index).is_file() and set(out.suite_pages) == {"reconciliation", "findings"}


def test_a_loss_fails_its_expectations_with_the_offending_rows(tmp_path):
    findings = [{"check": "loss", "partition": 1, "start": 4, "end": 6, "count": 2}]
    out = run_suites(_datasets([_recon_row(0), _recon_row(1, lost=2)], findings), tmp_path, "run-loss")
    checks = {c.name: c for c in out.checks}
    loss = checks["gx.findings.unexpected_rows_expectation[loss]"]
    assert loss.status == CheckStatus.FAILED
    assert [(s["check"], s["partition"], s["start"], s["end"], s["count"]) for s in loss.samples] == [
        ("loss", 1, 4, 6, 2)
    ]
    assert checks["gx.findings.unexpected_rows_expectation[phantoms]"].status == CheckStatus.PASSED
    lost = checks["gx.reconciliation.expect_column_values_to_be_between[lost_records]"]
    assert lost.status == CheckStatus.FAILED and lost.observed["unexpected_count"] == 1
    assert (
        checks["gx.reconciliation.expect_column_pair_values_to_be_equal[source_checksum,sink_checksum]"].status
        == CheckStatus.FAILED
    )
    assert (
        checks["gx.reconciliation.expect_column_pair_values_to_be_equal[source_malformed,quarantine_rows]"].status
        == CheckStatus.PASSED
    )
