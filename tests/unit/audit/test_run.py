"""An audit always writes its report: one that could not run says why, with exit code 2, and no
Spark was started for it (the audits that reconcile rows run in tests/integration/test_audit.py)."""

from __future__ import annotations

import json

import pytest

from devkit.pipelines import load_pipeline
from onceflow.audit.run import run_audit
from onceflow.reconcile import AuditScope, AuditStatus


def test_an_audit_of_a_pipeline_that_wrote_nothing_reports_why_it_could_not_run(tmp_path, monkeypatch):
    monkeypatch.setenv("ONCEFLOW_HOME", str(tmp_path / "home"))
    pipeline = load_pipeline(tmp_path / "p", "localhost:1", "t", name="p")
    outcome = run_audit(pipeline, AuditScope.SINCE_LAST, report_dir=tmp_path / "reports")
    assert outcome.status == AuditStatus.ERROR and outcome.exit_code == 2
    summary = json.loads((outcome.report_dir / "summary.json").read_text())
    assert summary["mode"] == "since-last" and summary["status"] == "error"
    assert summary["reason"].startswith("nothing to audit: no sink of topic 't' holds a committed batch")
    page = (outcome.report_dir / "index.html").read_text()
    assert "The audit could not run" in page and (tmp_path / "reports" / "p" / "latest").is_symlink()
    with pytest.raises(ValueError, match="mode must be one of \\('full', 'since-last'\\)"):
        run_audit(pipeline, "weekly", report_dir=tmp_path / "reports")


def test_an_audit_without_room_here_is_refused_with_the_fix(monkeypatch):
    from onceflow.audit.run import SPILL_BYTES_PER_OFFSET, WORKING_SET, fits_here
    from onceflow.errors import OnceflowError

    gb = 1024**3
    monkeypatch.delenv("ONCEFLOW_AUDIT_MEMORY_MB", raising=False)
    fits_here("p", 50_000_000, available=8 * gb, disk=50_000_000 * SPILL_BYTES_PER_OFFSET)  # its memory: no matter
    with pytest.raises(OnceflowError) as short:
        fits_here("p", 1_000, available=WORKING_SET, disk=10 * gb)
    assert "whatever its size" in str(short.value) and "ONCEFLOW_AUDIT_MEMORY_MB lower" in str(short.value)
    with pytest.raises(OnceflowError) as spill:
        fits_here("p", 50_000_000, available=8 * gb, disk=4 * gb)
    text = str(spill.value)
    assert "50,000,000 offsets spills about 30.6 GB" in text and "4.0 GB is free there" in text
    assert "TMPDIR" in text and "--since-last more often" in text


def test_great_expectations_validates_an_even_sample_of_a_large_table():
    """A table past GX_SAMPLE rows (as delta-rs reads it: string_view) is cut to every k-th row, its
    suite loses the whole table's row count and says what it holds; a small one is left whole."""
    import great_expectations as gx
    import great_expectations.expectations as gxe
    import pyarrow as pa

    from onceflow.audit.validate import sampled

    def suite():
        return gx.ExpectationSuite(
            name="s",
            expectations=[gxe.ExpectTableRowCountToEqual(value=10), gxe.ExpectColumnValuesToNotBeNull(column="s")],
        )

    big = pa.table({"s": pa.array([str(i) for i in range(25)]).cast(pa.string_view()), "n": list(range(25))})
    table, cut = sampled(big, suite(), most=10)
    assert table["n"].to_pylist() == [0, 3, 6, 9, 12, 15, 18, 21, 24]
    assert [type(e).__name__ for e in cut.expectations] == ["ExpectColumnValuesToNotBeNull"]
    assert cut.meta["sample"] == {"rows": 9, "of": 25, "every": 3}
    whole, kept = sampled(big, suite(), most=25)
    assert whole is big and len(kept.expectations) == 2
