"""Audits: reconcile Kafka, checkpoint, ledgers and rows; validate with Great
Expectations; write summary.json, an HTML page and the Data Docs.

    from onceflow.audit.run import run_audit
    outcome = run_audit(pipeline, mode="full")   # outcome.exit_code: 0 passed, 1 data problem, 2 could not run
"""
