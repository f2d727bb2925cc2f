"""Builds this folder: a pipeline's state as onceflow with Spark 4.0.0 and Delta 4.0.0 left it.

tests/integration/test_old_state.py starts from it on the current engines. Run once, with the
old pins installed (it is test data, like a file from a user's disk; rebuild only on purpose):

    .venv/bin/python tests/data/state_spark_4_0/make.py

It starts a broker, produces `records.jsonl` (written here first, so the test can produce the
same records at the same offsets: same transactions, same aborts), ingests them with the
installed engines in an available-now run of small batches, and keeps the tables, the
checkpoint and the status log in `state.tar.gz` (paths inside are relative to it; a tarball, so
no `_delta_log/` or checkpoint folder is tracked as if it were generated state).
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
NAME, TOPIC = "oldstate", "oldstate-payments"


def main() -> int:
    sys.path.insert(0, str(ROOT))
    import os

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        os.environ["ONCEFLOW_HOME"] = str(home)
        os.environ.setdefault("ONCEFLOW_JARS", str(ROOT / ".onceflow" / "jars"))
        import pyspark

        from devkit.pipelines import PAYMENTS_SCHEMA, write_pipeline
        from onceflow import config
        from onceflow.generate.producer import produce
        from onceflow.local.broker import LocalBroker, free_port_pair
        from onceflow.spark.ingest import run_ingest

        broker = LocalBroker(home=home / "broker", port=free_port_pair())
        broker.start(timeout=120)
        try:
            summary = produce(
                broker.bootstrap,
                TOPIC,
                600,
                schema=PAYMENTS_SCHEMA,
                partitions=2,
                seed=38,
                abort_ratio=0.1,
                malformed_ratio=0.03,
                txn_size=50,
                group_by=("account_id",),
            )
            records = HERE / "records.jsonl"
            with records.open("w") as f:
                for r in summary.records:
                    f.write(
                        json.dumps(
                            {
                                "txn": r.txn,
                                "aborted": r.aborted,
                                "partition": r.partition,
                                "offset": r.offset,
                                "key": base64.b64encode(r.key).decode() if r.key is not None else None,
                                "value": base64.b64encode(r.value).decode() if r.value is not None else None,
                                "kind": r.kind,
                            }
                        )
                        + "\n"
                    )
            state = Path(tmp) / "state"
            pipeline = config.load(write_pipeline(state, broker.bootstrap, TOPIC, name=NAME, max_offsets=150))
            result = run_ingest(pipeline)
            assert result.status == "finished", result
        finally:
            broker.stop()
        shutil.copy(pipeline.state_path / "status.jsonl", state / "status.jsonl")
        for yaml in state.glob("*.yaml"):
            yaml.unlink()
        target = HERE / "state.tar.gz"
        with tarfile.open(target, "w:gz") as tar:
            tar.add(state, arcname="state")
        (HERE / "VERSIONS").write_text(f"pyspark {pyspark.__version__}\n")
    print(f"wrote {target}: {result.batches} batches, {result.input_rows} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
