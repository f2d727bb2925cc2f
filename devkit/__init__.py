"""The kit tests and benchmarks share, outside the product: never installed with onceflow, never
imported by it. Each helper exists once, here:

- pipelines.py     the shipped example pipelines (payments, sensors) and scratch pipeline files on them
- driver.py        a Spark driver as a process of its own (`onceflow ingest`, a peer job): start,
                   wait for what it logs, stop at a batch boundary, kill -9
- kafka.py         a broker of one's own, events produced the benchmarks' way, reads that do not use
                   Spark (an independent confluent-kafka consumer)
- delta_history.py what a Delta table's history says (MERGE metrics, the engine of each write)

`use_checkout()` points onceflow at this checkout's jars and project, as tests/conftest.py and
benchmarks/harness.py do first.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def use_checkout() -> None:
    """The checkout's jars (.onceflow/jars, resolved by `onceflow setup`) and the checkout as the
    project (pipelines/, spark_apps/), unless the environment already says otherwise."""
    os.environ.setdefault("ONCEFLOW_JARS", str(ROOT / ".onceflow" / "jars"))
    os.environ.setdefault("ONCEFLOW_PROJECT", str(ROOT))
