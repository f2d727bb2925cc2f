"""What a Delta table's history says: the metrics of each MERGE, the engine of each write."""

from __future__ import annotations


def merge_metrics(table: str) -> list[dict]:
    """Delta's operation metrics of each MERGE into `table`, oldest first (values as Delta
    wrote them: strings of numbers)."""
    from deltalake import DeltaTable

    history = sorted(DeltaTable(table).history(), key=lambda c: c.get("version", -1))
    return [c.get("operationMetrics") or {} for c in history if c.get("operation") == "MERGE"]


def write_engines(table: str) -> list[str]:
    """The engine of each WRITE commit to `table`, oldest first: "delta-rs" (the driver's commits)
    or "Apache-Spark" (Spark's Delta writer), from the commit's engineInfo."""
    from deltalake import DeltaTable

    history = sorted(DeltaTable(table).history(), key=lambda c: c.get("version", -1))
    return [c.get("engineInfo", "").split("/")[0].split(":")[0] for c in history if c.get("operation") == "WRITE"]
