"""The keyed table's MERGE from the driver (delta-rs) against Spark's, as the table grows.

    .venv/bin/python benchmarks/keyed_merge_size.py [--keys 50000,400000,1600000] [--changes 500] [--json F]

A small group of the keyed table is merged from the driver with delta-rs while the table is
at most `sinks.current.driver_merge_max_mib` (docs/cdc.md#how-the-job-keeps-it), else through
Spark. delta-rs rewrites the files a MERGE touches (copy-on-write); Spark's MERGE, with the
deletion vectors the keyed table has by default, writes the changed rows and marks the old
ones deleted. Where does one start to cost more than the other?

For each size (`--keys` live keys of the shipped customers_cdc table, written in one file
as compaction leaves a table of that size), two copies of the table get the same `--merges`
groups of `--changes` changes of random existing keys (updates with a newer lsn, one in ten a
delete), alternating: one copy through `current_rs` (newest change per key in Python, delta-rs
MERGE), the other through `spark/sinks/delta.py` (`newest_changes` + `merge_current` from a
local DataFrame of the same rows: the follower's Spark path also reads them back from bronze,
which this leaves out, in Spark's favour). Both commit under a txn with a ledger-sized metadata,
as the follower does. It reports the table's bytes and the median seconds per MERGE after one
warm-up on each side, and checks that both copies end with the same rows. Quote the ratios;
the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from harness import emit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WARM_UP = 1


def table_rows(keys: int):
    """`keys` live rows of the keyed table, as the follower would have left them."""
    import pyarrow as pa

    ids = list(range(1, keys + 1))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": [f"c{i}@example.com" for i in ids],
            "name": [f"name {i}" for i in ids],
            "tier": [("free", "pro", "enterprise")[i % 3] for i in ids],
            "balance": pa.array([Decimal(i % 10_000) / 4 for i in ids], pa.decimal128(12, 2)),
            "updated_at": pa.array([T0] * keys, pa.timestamp("us", tz="UTC")),
            "_sequence": pa.array([{"source_lsn": i} for i in ids], pa.struct([("source_lsn", pa.int64())])),
            "_partition": pa.array([i % 4 for i in ids], pa.int32()),
            "_offset": pa.array(ids, pa.int64()),
            "_deleted": pa.array([False] * keys),
            "_batch_id": pa.array([0] * keys, pa.int64()),
            "_generation": pa.array([0] * keys, pa.int32()),
            "_changed_at": pa.array([T0] * keys, pa.timestamp("us", tz="UTC")),
        }
    )


def bronze_changes(rng: random.Random, keys: int, changes: int, batch: int):
    """A group's bronze rows: updates of random existing keys with a newer lsn, one in ten a delete."""
    import pyarrow as pa

    rows = []
    for n in range(changes):
        key = rng.randint(1, keys)
        delete = rng.random() < 0.1
        lsn = 10 * keys * (batch + 1) + n
        rows.append(
            {
                "id": key,
                "email": None if delete else f"c{key}.{batch}@example.com",
                "name": None if delete else f"name {key} v{batch}",
                "tier": None if delete else "pro",
                "balance": None if delete else Decimal(batch),
                "updated_at": None if delete else T0 + timedelta(seconds=batch),
                "_op": "d" if delete else "u",
                "_sequence": {"source_lsn": lsn},
                "_partition": key % 4,
                "_offset": lsn,
                "_batch_id": batch,
                "_generation": 0,
            }
        )
    schema = table_rows(1).schema
    types = {f.name: f.type for f in schema}
    fields = [pa.field(n, types.get(n, pa.string()) if n != "_op" else pa.string()) for n in rows[0]]
    return pa.Table.from_pylist(rows, pa.schema(fields))


def measure(spark, work: Path, keys: int, changes: int, merges: int, seed: int) -> dict:
    from onceflow import config, tables
    from onceflow.deltars import Appender
    from onceflow.ledger import LedgerEntry
    from onceflow.spark.sinks import current_rs, delta

    pipeline = config.load(Path(__file__).resolve().parents[1] / "pipelines" / "customers_cdc.yaml", env={})
    schema, keyed = pipeline.schema, pipeline.keyed
    assert keyed is not None
    paths = {side: str(work / f"{keys}-{side}") for side in ("delta-rs", "spark")}
    initial = table_rows(keys)
    for path in paths.values():
        delta.ensure_table(spark, path, tables.current_ddl(schema, keyed), {tables.DELETION_VECTORS: "true"})
        Appender(path).append(initial, "{}", "bench:seed", 0)
    appender = Appender(paths["delta-rs"])
    size = sum(appender.table().get_add_actions(flatten=True).column("size_bytes").to_pylist())
    rng = random.Random(seed)
    seconds: dict[str, list[float]] = {"delta-rs": [], "spark": []}
    for batch in range(1, merges + 1):
        rows = bronze_changes(rng, keys, changes, batch)
        entry = LedgerEntry("bench", "current", 0, batch, "bench", {0: batch}, {0: batch + 1})
        started = time.monotonic()
        picked = current_rs.newest_changes(rows, schema, keyed)
        current_rs.merge_current(appender, picked, keyed, entry.app_id, batch, entry.to_json())
        seconds["delta-rs"].append(time.monotonic() - started)
        started = time.monotonic()
        frame = delta.newest_changes(spark.createDataFrame(rows), schema, keyed)
        delta.merge_current(spark, paths["spark"], frame, keyed, entry.app_id, batch, entry.to_json())
        seconds["spark"].append(time.monotonic() - started)
    a, b = (spark.read.format("delta").load(p).select("id", "email", "_deleted", "_offset") for p in paths.values())
    assert a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty(), "the two copies differ: the MERGEs disagree"
    medians = {side: statistics.median(s[WARM_UP:]) for side, s in seconds.items()}
    return {
        "keys": keys,
        "table_mib": round(size / 2**20, 1),
        "median_seconds": {side: round(m, 3) for side, m in medians.items()},
        "seconds": {side: [round(x, 2) for x in s] for side, s in seconds.items()},
        "delta_rs_to_spark": round(medians["delta-rs"] / medians["spark"], 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", default="50000,400000,1600000", help="comma-separated table sizes, in live keys")
    ap.add_argument("--changes", type=int, default=500, help="changes per merged group")
    ap.add_argument("--merges", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    if args.merges <= WARM_UP:
        ap.error(f"--merges must be more than the {WARM_UP} warm-up merge")

    from onceflow.spark.session import build_session

    spark = build_session("onceflow-bench-keyed-merge-size", master="local[*]")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    work = Path(tempfile.mkdtemp(prefix="onceflow-bench-keyed-size-"))
    runs = []
    for keys in (int(x) for x in args.keys.split(",") if x.strip()):
        print(f"{keys:,} keys: {args.merges} groups of {args.changes} changes, delta-rs and Spark …", flush=True)
        runs.append(measure(spark, work, keys, args.changes, args.merges, args.seed))
        print(runs[-1], flush=True)
    spark.stop()
    emit({"changes": args.changes, "merges": args.merges, "cores": os.cpu_count(), "runs": runs}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
