"""Each pipeline's DAGs have one list of kinds and one way to name them."""

from __future__ import annotations

from onceflow.airflow.dag_kinds import DagKind, dag_id


def test_a_pipelines_dag_ids_are_its_name_and_the_kind():
    assert [dag_id("payments", k) for k in DagKind] == [
        "payments_stream",
        "payments_batch",
        "payments_audit",
        "payments_recover",
        "payments_backfill",
    ]
