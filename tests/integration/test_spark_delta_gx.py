"""The pinned set works together: Spark's Kafka connector, Delta, deltalake, GX."""

from __future__ import annotations

from collections import Counter

import pytest

from devkit.pipelines import PAYMENTS_SCHEMA
from onceflow.generate.producer import produce
from onceflow.spark.kafka_read import read_committed_batch

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # starts a Spark JVM (not in `make test-fast`)


def test_batch_read_committed_into_delta_counts_per_partition(broker, spark, topic, tmp_path):
    summary = produce(
        broker.bootstrap,
        topic,
        4000,
        schema=PAYMENTS_SCHEMA,
        partitions=4,
        seed=21,
        abort_ratio=0.1,
        malformed_ratio=0.02,
    )
    path = str(tmp_path / "raw")
    read_committed_batch(spark, broker.bootstrap, topic).write.format("delta").save(path)

    via_spark = {
        r["partition"]: r["count"] for r in spark.read.format("delta").load(path).groupBy("partition").count().collect()
    }
    expected = {p: summary.count("committed", p) for p in range(4)}
    assert via_spark == expected

    # an independent reader: delta-rs, which shares no code with Spark
    from deltalake import DeltaTable

    table = DeltaTable(path).to_pyarrow_table(columns=["partition", "offset"])
    via_delta_rs = Counter(table.column("partition").to_pylist())
    assert dict(via_delta_rs) == expected
    committed = {(r.partition, r.offset) for r in summary.records if not r.aborted}
    assert set(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True)) == committed


def test_great_expectations_validates_a_spark_dataframe(spark):
    import great_expectations as gx
    import great_expectations.expectations as gxe

    df = spark.createDataFrame([(0, 1), (0, 2), (1, 1)], "partition int, offset long")
    ctx = gx.get_context(mode="ephemeral")
    batch_def = ctx.data_sources.add_spark("s").add_dataframe_asset("a").add_batch_definition_whole_dataframe("b")
    suite = ctx.suites.add(gx.ExpectationSuite(name="smoke"))
    suite.add_expectation(gxe.ExpectCompoundColumnsToBeUnique(column_list=["partition", "offset"]))
    suite.add_expectation(gxe.ExpectTableRowCountToEqual(value=3))
    ok = batch_def.get_batch(batch_parameters={"dataframe": df}).validate(suite)
    assert ok.success

    dup = df.unionAll(df.limit(1))
    bad = batch_def.get_batch(batch_parameters={"dataframe": dup}).validate(suite)
    assert not bad.success
