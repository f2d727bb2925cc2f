"""Both Delta writers stay honest on every table onceflow creates.

Spark's Delta (the pinned delta-spark) creates each sink table as a pipeline declares it, with its
table properties, and writes to it as the job does (appends, the aggregates' MERGE with deletion
vectors, checkpoints and checksums every ten commits); delta-rs (the pinned deltalake, the driver's
writer and the audits' independent reader) reads every row and commits to the same table, and
Spark reads that back. A newer Delta that turned on a table feature delta-rs lacks fails here.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from devkit.pipelines import PAYMENTS_AGGREGATES, load_pipeline
from onceflow.spark.sinks.delta import ensure_table
from onceflow.spark.table_specs import table_ddls, table_properties

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)

# what delta-rs 1.6 reads and writes (its docs' feature table); anything else Delta turns on is a break
DELTA_RS_READER_FEATURES = {"deletionVectors", "timestampNtz", "columnMapping", "v2Checkpoint"}
DELTA_RS_WRITER_FEATURES = {"deletionVectors", "appendOnly", "invariants", "checkConstraints", "changeDataFeed",
                            "generatedColumns", "timestampNtz", "columnMapping", "v2Checkpoint"}  # fmt: skip


def _count(path: str) -> int:
    """Rows as delta-rs sees them (DataFusion applies deletion vectors)."""
    result = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT count(*) AS n FROM t").read_all()
    return pa.table(result).column("n")[0].as_py()


def test_every_sink_table_is_read_and_written_by_delta_rs_and_back(spark, tmp_path):
    pipeline = load_pipeline(tmp_path, "localhost:9", "t-interop", aggregates=PAYMENTS_AGGREGATES)
    ddls, properties = table_ddls(pipeline), table_properties(pipeline)
    assert set(ddls) == {"bronze", "quarantine", "aggregates"}
    assert properties["aggregates"].get("delta.enableDeletionVectors") == "true"  # the MERGE's deletion vectors
    for name, ddl in ddls.items():
        path = str(tmp_path / name)
        ensure_table(spark, path, ddl, properties[name])
        empty = spark.createDataFrame([], ddl)
        one = spark.createDataFrame([tuple(None for _ in empty.columns)], empty.schema)
        for _ in range(11):  # past Delta's checkpoint interval: a checkpoint and checksums
            one.write.format("delta").mode("append").save(path)
        if name == "aggregates":  # rows updated in place, as the MERGE does: deletion vectors
            spark.sql(f"UPDATE delta.`{path}` SET first_batch_id = 1")
        table = DeltaTable(path)
        protocol = table.protocol()
        assert not set(protocol.reader_features or []) - DELTA_RS_READER_FEATURES, (name, protocol)
        assert not set(protocol.writer_features or []) - DELTA_RS_WRITER_FEATURES, (name, protocol)
        assert _count(path) == 11, name

        arrow = pa.Table.from_pandas(one.toPandas(), preserve_index=False).cast(pa.schema(table.schema().to_arrow()))
        write_deltalake(path, arrow, mode="append")
        DeltaTable(path).create_checkpoint()
        assert spark.read.format("delta").load(path).count() == 12, name
        one.write.format("delta").mode("append").save(path)  # and Spark again, after delta-rs's checkpoint
        assert _count(path) == 13, name
